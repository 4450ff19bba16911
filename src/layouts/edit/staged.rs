//! The staging area: opening one over a cache ([`Cache::edit`]), the
//! staged view reads see (sets win, deleted rows are gone, appended rows
//! come last), and the edits themselves, checked and encoded as they are
//! staged.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arrow_array::RecordBatch;

#[cfg(feature = "lance")]
use crate::cache::metadata::CacheMetadata;
use crate::cache::versions::version_id;
use crate::error::{Error, Result};
use crate::features::decode::RowDecoder;
use crate::features::encode::BatchEncoder;
use crate::features::Features;
use crate::layouts::arrow_shards::read::ArrowShards;
use crate::layouts::backend::{normalize_index, Backend};
#[cfg(feature = "lance")]
use crate::layouts::lance_rows::read::LanceRows;
use crate::layouts::open::Cache;
use crate::value::{Example, Row, Value};

use super::{Base, Slot, Staging};

impl Cache {
    /// Stages edits over this cache's version (see [`Staging`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the cache for a layout other than
    /// `arrow-shards` and `lance-rows`, or a cache with dedup.
    pub fn edit(&self) -> Result<Staging> {
        // A commit replaces files in place under the cache's lock, which an
        // object store (no rename, locks of one machine) cannot give.
        #[cfg(feature = "s3")]
        if crate::storage::is_object_uri(&self.dir) {
            return Err(Error::InvalidArgument(format!(
                "{}: a cache on object storage is not edited in place; edit a local copy and publish it again (its commit replaces the cache)",
                self.dir.display()
            )));
        }
        #[cfg(feature = "lance")]
        if let (CacheMetadata::LanceRows(meta), Some(rows)) = (
            &self.metadata,
            self.backend.as_any().downcast_ref::<LanceRows>(),
        ) {
            let counts = rows.row_counts().to_vec();
            let lance_version = rows.lance_version()?;
            return Ok(self.staging(
                Base::Lance {
                    meta: Box::new(meta.clone()),
                    rows: rows.clone(),
                    lance_version,
                },
                &counts,
                rows.decoder().clone(),
            ));
        }
        let (Some(meta), Some(shards)) = (
            self.metadata.as_arrow_shards(),
            self.backend.as_any().downcast_ref::<ArrowShards>(),
        ) else {
            return Err(Error::InvalidArgument(format!(
                "{} is a {} cache; staged edits are made to arrow-shards and lance-rows caches",
                self.dir.display(),
                self.layout
            )));
        };
        if meta.dedup.is_some() {
            return Err(Error::InvalidArgument(format!(
                "{} stores repeated cells once (dedup), whose refs name rows by position; staged edits are made to caches without dedup",
                self.dir.display()
            )));
        }
        Ok(self.staging(
            Base::Arrow {
                meta: Box::new(meta.clone()),
                shards: shards.clone(),
            },
            &meta.shard_row_counts,
            shards.decoder().clone(),
        ))
    }

    fn staging(&self, base: Base, row_counts: &[u64], decoder: RowDecoder) -> Staging {
        let mut starts = vec![0u64];
        for &r in row_counts {
            starts.push(starts.last().copied().unwrap_or(0) + r);
        }
        Staging {
            dir: self.dir.clone(),
            storage: self.storage.clone(),
            base,
            base_version: version_id(&self.metadata),
            features: self.features().clone(),
            schema: self.features().arrow_schema(),
            decoder,
            starts,
            deleted: Vec::new(),
            overrides: BTreeMap::new(),
            appended: Vec::new(),
            rows_set: 0,
            cells_set: 0,
            message: None,
        }
    }
}

impl Staging {
    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The features every staged row is checked against.
    pub fn features(&self) -> &Arc<Features> {
        &self.features
    }

    /// The version the edits are staged on.
    pub fn base_version(&self) -> u64 {
        self.base_version
    }

    /// Rows in the staged view.
    pub fn len(&self) -> u64 {
        self.base_len() - self.deleted.len() as u64 + self.appended.len() as u64
    }

    /// True when the staged view has no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when nothing is staged.
    pub fn is_unchanged(&self) -> bool {
        self.deleted.is_empty() && self.overrides.is_empty() && self.appended.is_empty()
    }

    /// A message recorded with the version the commit makes.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }

    pub(super) fn base_len(&self) -> u64 {
        *self.starts.last().unwrap_or(&0)
    }

    /// The row of the staged view at `index` (negative counts from the end).
    fn slot(&self, index: i64) -> Result<Slot> {
        Ok(self.slot_at(normalize_index(index, self.len())?))
    }

    /// The row of the staged view at position `i` (`i < len()`).
    fn slot_at(&self, i: u64) -> Slot {
        let live = self.base_len() - self.deleted.len() as u64;
        if i >= live {
            return Slot::New((i - live) as usize);
        }
        // The smallest parent row r with i + 1 live rows in 0..=r.
        let (mut lo, mut hi) = (i, i + self.deleted.len() as u64);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let dead = self.deleted.partition_point(|&d| d <= mid) as u64;
            if mid + 1 - dead > i {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Slot::Base(lo)
    }

    fn encode(&self, features: Arc<Features>, ex: Example, row: u64) -> Result<RecordBatch> {
        let mut enc = BatchEncoder::new(features, Some(&self.dir));
        enc.append(ex, row)?;
        enc.finish()
    }

    /// The row at a slot as a one-row batch of the features' schema.
    fn raw_at(&self, slot: Slot) -> Result<RecordBatch> {
        let b = match slot {
            Slot::New(k) => return Ok(self.appended[k].clone()),
            Slot::Base(r) => match self.overrides.get(&r) {
                Some(b) => return Ok(b.clone()),
                None => self.base.backend().get_raw(r as i64)?,
            },
        };
        RecordBatch::try_new(self.schema.clone(), b.columns().to_vec())
            .map_err(|e| Error::arrow(Some(&self.dir), e))
    }

    fn put(&mut self, slot: Slot, batch: RecordBatch) {
        match slot {
            Slot::New(k) => self.appended[k] = batch,
            Slot::Base(r) => {
                self.overrides.insert(r, batch);
            }
        }
    }

    /// Row `index` of the staged view, decoded.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`]; a read or decode error.
    pub fn get(&self, index: i64) -> Result<Row> {
        match self.slot(index)? {
            Slot::Base(r) if !self.overrides.contains_key(&r) => self.base.backend().get(r as i64),
            slot => self.decoder.decode_row(&self.raw_at(slot)?, 0),
        }
    }

    /// Row `index` of the staged view as a one-row record batch.
    ///
    /// # Errors
    /// As [`Staging::get`].
    pub fn get_raw(&self, index: i64) -> Result<RecordBatch> {
        self.raw_at(self.slot(index)?)
    }

    /// Replaces row `index` with `example` (every feature given).
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`]; [`Error::Encode`] naming the column when
    /// the example does not fit the features (nothing is staged then).
    pub fn set_row(&mut self, index: i64, example: Example) -> Result<()> {
        let at = normalize_index(index, self.len())?;
        let slot = self.slot_at(at);
        let batch = self.encode(self.features.clone(), example, at)?;
        self.put(slot, batch);
        self.rows_set += 1;
        Ok(())
    }

    /// Replaces one cell: `column` of row `index`.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`]; [`Error::InvalidArgument`] for a column
    /// the features do not have; [`Error::Encode`] for a value that does
    /// not fit the column.
    pub fn set_cell(&mut self, index: i64, column: &str, value: impl Into<Value>) -> Result<()> {
        let at = normalize_index(index, self.len())?;
        let slot = self.slot_at(at);
        let (pos, feature) = self
            .features
            .iter()
            .enumerate()
            .find(|(_, (n, _))| *n == column)
            .map(|(i, (_, f))| (i, f.clone()))
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "{} has no column '{column}' (columns: {:?})",
                    self.dir.display(),
                    self.features.names()
                ))
            })?;
        let one = Arc::new(Features::new().with(column.to_string(), feature));
        let cell = self.encode(
            one,
            Example::new().with(column.to_string(), value.into()),
            at,
        )?;
        let row = self.raw_at(slot)?;
        let mut cols = row.columns().to_vec();
        cols[pos] = cell.column(0).clone();
        let batch = RecordBatch::try_new(self.schema.clone(), cols)
            .map_err(|e| Error::arrow(Some(&self.dir), e))?;
        self.put(slot, batch);
        self.cells_set += 1;
        Ok(())
    }

    /// Deletes row `index`; later rows move up by one.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`].
    pub fn delete(&mut self, index: i64) -> Result<()> {
        match self.slot(index)? {
            Slot::New(k) => {
                self.appended.remove(k);
            }
            Slot::Base(r) => {
                self.overrides.remove(&r);
                let at = self.deleted.partition_point(|&d| d < r);
                self.deleted.insert(at, r);
            }
        }
        Ok(())
    }

    /// Appends a row at the end.
    ///
    /// # Errors
    /// [`Error::Encode`] naming the column when the example does not fit.
    pub fn append(&mut self, example: Example) -> Result<()> {
        let batch = self.encode(self.features.clone(), example, self.len())?;
        self.appended.push(batch);
        Ok(())
    }
}
