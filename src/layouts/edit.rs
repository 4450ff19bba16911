//! Staged edits of an `arrow-shards` or `lance-rows` cache, committed as
//! a new version.
//!
//! [`Cache::edit`] returns a [`Staging`] over the opened version: rows and
//! single cells set, rows deleted and appended are checked against the
//! features and encoded at once, and held in memory; reads through the
//! staging area see them (a set wins, deleted rows are gone, appended rows
//! come last) without rewriting anything. [`Staging::plan`] says which
//! shards a commit rewrites, reuses and adds; [`Staging::commit`] writes
//! only those, under the cache's lock:
//!
//! 1. left-overs of an earlier commit of the same version that never
//!    reached its commit point are removed;
//! 2. the parent's metadata is kept as `_cache_versions/<parent>.json` (once);
//! 3. each touched shard is written anew as `shard-NNNNN.v<version>.arrow`
//!    (position in the new version, then the version), with its row
//!    checksums when the cache keeps them; appended rows go to new shards
//!    of the same names, rotated by the cache's byte budget; untouched
//!    shards are the very same files;
//! 4. the new metadata goes to `_cache_versions/<version>.json`;
//! 5. `_metadata.json` is replaced atomically with the same bytes: the
//!    commit point.
//!
//! A crash before step 5 leaves the parent version in place (the new files
//! are named by no metadata `_metadata.json` points at, and the next commit
//! or `gc` removes them); after it, the new version. No file of the parent
//! version is changed or removed, so a reader holding it keeps reading it,
//! and the published directory is always a plain cache the reference opens
//! (it reads the shards `shard_filenames` names). [`gc_versions`] removes
//! old versions and the files only they name.
//!
//! A `lance-rows` cache is edited the same way through Lance's own
//! versions: the staging, checks and reads are the same; the commit writes
//! the touched fragments anew (each taking its old fragment's place and
//! id), appended rows as new fragments, and commits one Lance `Update`
//! transaction (a new Lance version; untouched fragments are the same data
//! files) before the same two metadata steps. The cache version records
//! the Lance version it reads (`lance_version`), so an old cache version
//! opens the Lance version it was, and a Lance commit whose cache version
//! never became current is undone (Lance's restore) by the next commit or
//! `gc`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::cache::lock::CacheLock;
#[cfg(feature = "lance")]
use crate::cache::metadata::LanceRowsMetadata;
use crate::cache::metadata::{
    write_json_checksummed, ArrowShardsMetadata, CacheMetadata, WriterInfo, METADATA_FILE,
};
use crate::cache::pipeline::DEFAULT_BATCH_SIZE;
use crate::cache::rowsum;
#[cfg(feature = "lance")]
use crate::cache::versions::read_version;
use crate::cache::versions::{
    kept_version_ids, version_id, version_path, ChangeSummary, VersionInfo, VERSIONS_DIR,
};
use crate::error::{Error, Result};
use crate::features::decode::RowDecoder;
use crate::features::encode::BatchEncoder;
use crate::features::Features;
use crate::layouts::arrow_shards::format::ShardRecord;
use crate::layouts::arrow_shards::read::ArrowShards;
use crate::layouts::arrow_shards::shard_writer::ShardWriter;
use crate::layouts::backend::{normalize_index, Backend};
#[cfg(feature = "lance")]
use crate::layouts::lance_rows::{edit as lance_edit, read::LanceRows};
use crate::layouts::open::Cache;
use crate::storage::StorageRef;
use crate::util::fault_point;
use crate::value::{Example, Row, Value};

/// The file name of the shard at `position` of version `version`.
pub fn edited_shard_filename(position: usize, version: u64) -> String {
    format!("shard-{position:05}.v{version}.arrow")
}

/// Where a row of the staged view comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// A row of the parent version (possibly replaced).
    Base(u64),
    /// An appended row.
    New(usize),
}

/// The version edits are staged on, by layout.
#[derive(Debug)]
enum Base {
    Arrow {
        meta: ArrowShardsMetadata,
        shards: ArrowShards,
    },
    #[cfg(feature = "lance")]
    Lance {
        meta: LanceRowsMetadata,
        rows: LanceRows,
        /// The Lance version the staged view reads.
        lance_version: u64,
    },
}

impl Base {
    fn backend(&self) -> &dyn Backend {
        match self {
            Base::Arrow { shards, .. } => shards,
            #[cfg(feature = "lance")]
            Base::Lance { rows, .. } => rows,
        }
    }
}

/// Edits staged over one version of an `arrow-shards` or `lance-rows` cache.
#[derive(Debug)]
pub struct Staging {
    dir: PathBuf,
    storage: StorageRef,
    base: Base,
    base_version: u64,
    features: Arc<Features>,
    schema: SchemaRef,
    decoder: RowDecoder,
    /// `starts[i]`: first row of shard i in the parent; `starts[n]`: its rows.
    starts: Vec<u64>,
    /// Parent rows deleted, sorted.
    deleted: Vec<u64>,
    /// Parent rows replaced, as one-row batches.
    overrides: BTreeMap<u64, RecordBatch>,
    /// Appended rows, as one-row batches.
    appended: Vec<RecordBatch>,
    rows_set: u64,
    cells_set: u64,
    message: Option<String>,
}

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
                    meta: meta.clone(),
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
                meta: meta.clone(),
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

/// What a commit would do, before it does it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditPlan {
    /// The version the edits are staged on.
    pub base_version: u64,
    /// The version a commit makes.
    pub version: u64,
    /// Rows before and after.
    pub rows_before: u64,
    /// Rows after the commit.
    pub rows_after: u64,
    /// Parent shards (Arrow files, or Lance fragments), by position,
    /// written anew because rows in them changed.
    pub rewritten: Vec<usize>,
    /// Parent shards kept as they are (the same files).
    pub reused: Vec<usize>,
    /// Parent shards dropped: every row in them was deleted.
    pub removed: Vec<usize>,
    /// Rows appended (written to new shards).
    pub appended_rows: u64,
    /// Bytes the commit writes, estimated: the rewritten shards' file sizes
    /// scaled by the rows they keep, plus the appended rows' Arrow bytes
    /// (the commit's report has the exact figure).
    pub bytes_estimate: u64,
}

impl EditPlan {
    /// True when committing would change nothing.
    pub fn is_empty(&self) -> bool {
        self.rewritten.is_empty() && self.removed.is_empty() && self.appended_rows == 0
    }
}

/// What a commit did.
#[derive(Debug, Clone)]
pub struct CommitReport {
    /// The version published.
    pub version: u64,
    /// What was planned (and done).
    pub plan: EditPlan,
    /// What the new version records of its making (exact bytes written).
    pub change: ChangeSummary,
    /// The metadata of the new version.
    pub metadata: CacheMetadata,
    /// Wall time of the commit, in seconds.
    pub seconds: f64,
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

    fn base_len(&self) -> u64 {
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

    /// The parent shard of parent row `r`.
    fn shard_of(&self, r: u64) -> usize {
        self.starts.partition_point(|&s| s <= r) - 1
    }

    fn touched(&self) -> BTreeSet<usize> {
        self.deleted
            .iter()
            .chain(self.overrides.keys())
            .map(|&r| self.shard_of(r))
            .collect()
    }

    fn deleted_in(&self, shard: usize) -> u64 {
        let (a, b) = (self.starts[shard], self.starts[shard + 1]);
        (self.deleted.partition_point(|&d| d < b) - self.deleted.partition_point(|&d| d < a)) as u64
    }

    /// What [`Staging::commit`] would write.
    ///
    /// # Errors
    /// [`Error::Io`] reading a shard file's size.
    pub fn plan(&self) -> Result<EditPlan> {
        let touched = self.touched();
        let (mut rewritten, mut reused, mut removed) = (Vec::new(), Vec::new(), Vec::new());
        let mut bytes = 0u64;
        let units = self.starts.len() - 1;
        // Lance: bytes per row of the data files, for the estimate.
        #[cfg(feature = "lance")]
        let lance_row_bytes = match &self.base {
            Base::Lance { .. } if !touched.is_empty() => {
                let data = self.dir.join("data");
                let size = if self.storage.is_dir(&data) {
                    self.storage.dir_size(&data)?
                } else {
                    0
                };
                size as f64 / self.base_len().max(1) as f64
            }
            _ => 0.0,
        };
        for s in 0..units {
            let rows = self.starts[s + 1] - self.starts[s];
            if !touched.contains(&s) {
                reused.push(s);
                continue;
            }
            let kept = rows - self.deleted_in(s);
            if kept == 0 {
                removed.push(s);
                continue;
            }
            rewritten.push(s);
            bytes += match &self.base {
                Base::Arrow { meta, .. } => {
                    let size = match &meta.shard_num_bytes {
                        Some(sizes) => sizes[s],
                        None => self
                            .storage
                            .stat(&self.dir.join(&meta.shard_filenames[s]))?
                            .map_or(0, |m| m.len),
                    };
                    (size as u128 * kept as u128 / rows.max(1) as u128) as u64
                }
                #[cfg(feature = "lance")]
                Base::Lance { .. } => (lance_row_bytes * kept as f64) as u64,
            };
        }
        bytes += self
            .appended
            .iter()
            .map(crate::layouts::arrow_shards::format::pyarrow_nbytes)
            .sum::<u64>();
        Ok(EditPlan {
            base_version: self.base_version,
            version: self.base_version + 1,
            rows_before: self.base_len(),
            rows_after: self.len(),
            rewritten,
            reused,
            removed,
            appended_rows: self.appended.len() as u64,
            bytes_estimate: bytes,
        })
    }

    fn writer(
        &self,
        meta: &ArrowShardsMetadata,
        budget: Option<u64>,
        version: u64,
        first: usize,
    ) -> Result<ShardWriter> {
        let build_id = meta
            .build_id
            .clone()
            .unwrap_or_else(crate::layouts::arrow_shards::write::random_build_id);
        Ok(ShardWriter::new(
            self.storage.clone(),
            &self.dir,
            self.schema.clone(),
            batch_size(meta),
            budget,
            meta.compression,
            build_id,
        )?
        .with_record_checksums(meta.row_checksums == Some(true))
        .with_naming(move |k| edited_shard_filename(first + k, version)))
    }

    /// The kept rows of parent shard `s` with its edits applied, in order,
    /// handed to `out` as pieces (slices of the parent's batches and the
    /// replaced rows).
    fn edited_rows(&self, s: usize, mut out: impl FnMut(RecordBatch) -> Result<()>) -> Result<()> {
        let start = self.starts[s];
        // The parent's rows of shard s, a batch at a time: (first, end) local rows.
        let ranges: Vec<(u64, u64)> = match &self.base {
            Base::Arrow { shards, .. } => shards.batch_row_ranges(s)?,
            #[cfg(feature = "lance")]
            Base::Lance { .. } => {
                let rows = self.starts[s + 1] - start;
                (0..rows.div_ceil(EDIT_READ_ROWS))
                    .map(|k| (k * EDIT_READ_ROWS, ((k + 1) * EDIT_READ_ROWS).min(rows)))
                    .collect()
            }
        };
        for (j, (a, b)) in ranges.into_iter().enumerate() {
            let batch = match &self.base {
                Base::Arrow { shards, .. } => shards.read_batch(s, j)?,
                #[cfg(feature = "lance")]
                Base::Lance { .. } => self.base.backend().slice(start + a, b - a)?,
            };
            let mut run: Option<u64> = None;
            for local in a..=b {
                let g = start + local;
                let plain = local < b
                    && self.deleted.binary_search(&g).is_err()
                    && !self.overrides.contains_key(&g);
                if plain {
                    run.get_or_insert(local);
                    continue;
                }
                if let Some(r0) = run.take() {
                    out(batch.slice((r0 - a) as usize, (local - r0) as usize))?;
                }
                if local < b {
                    if let Some(o) = self.overrides.get(&g) {
                        out(o.clone())?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Publishes the staged edits as a new version (see the module
    /// documentation for the steps), and returns what it did. Nothing is
    /// written when nothing is staged.
    ///
    /// # Errors
    /// [`Error::EditConflict`] when the cache is no longer at the version
    /// the edits were staged on (another commit or a rebuild came first:
    /// nothing is written); an I/O or Arrow error naming the file, after
    /// which the parent version is still the published one.
    pub fn commit(self) -> Result<CommitReport> {
        let t0 = Instant::now();
        let plan = self.plan()?;
        let storage = self.storage.as_ref();
        let dir = &self.dir;
        let _lock = CacheLock::acquire_in(&self.storage, dir)?;
        let now = CacheMetadata::read_in(storage, dir)?;
        let found = version_id(&now);
        let same = match (&self.base, &now) {
            (Base::Arrow { meta, .. }, CacheMetadata::ArrowShards(m)) => {
                m.build_id == meta.build_id
            }
            #[cfg(feature = "lance")]
            (Base::Lance { meta, .. }, CacheMetadata::LanceRows(m)) => {
                m.lance_version == meta.lance_version
            }
            _ => false,
        };
        if found != self.base_version || !same {
            return Err(Error::EditConflict {
                path: dir.clone(),
                expected: self.base_version,
                found,
            });
        }
        let change = ChangeSummary {
            rows_set: self.rows_set,
            cells_set: self.cells_set,
            rows_deleted: self.deleted.len() as u64,
            rows_appended: self.appended.len() as u64,
            shards_rewritten: plan.rewritten.len() as u64,
            shards_reused: plan.reused.len() as u64,
            shards_new: 0,
            shards_removed: plan.removed.len() as u64,
            bytes_written: 0,
            message: self.message.clone(),
        };
        if plan.is_empty() {
            return Ok(CommitReport {
                version: self.base_version,
                plan,
                change,
                metadata: now,
                seconds: t0.elapsed().as_secs_f64(),
            });
        }
        let (metadata, change) = match &self.base {
            Base::Arrow { meta, .. } => self.commit_arrow(meta, &plan, change)?,
            #[cfg(feature = "lance")]
            Base::Lance {
                meta,
                lance_version,
                ..
            } => self.commit_lance(meta, *lance_version, &plan, change)?,
        };
        Ok(CommitReport {
            version: plan.version,
            plan,
            change,
            metadata,
            seconds: t0.elapsed().as_secs_f64(),
        })
    }

    /// Keeps the parent's metadata as its version file (once), so the
    /// parent stays openable by its id; `bytes` is that metadata.
    fn keep_parent(&self, bytes: &[u8]) -> Result<()> {
        let storage = self.storage.as_ref();
        storage.create_dir_all(&self.dir.join(VERSIONS_DIR))?;
        let base_file = version_path(&self.dir, self.base_version);
        if !storage.is_file(&base_file) {
            storage.write_atomic(&base_file, bytes)?;
        }
        Ok(())
    }

    /// The version record of the commit.
    fn version_info(&self, change: &ChangeSummary) -> VersionInfo {
        VersionInfo {
            id: self.base_version + 1,
            parent: self.base_version,
            created_unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            change: change.clone(),
        }
    }

    fn commit_arrow(
        &self,
        m: &ArrowShardsMetadata,
        plan: &EditPlan,
        mut change: ChangeSummary,
    ) -> Result<(CacheMetadata, ChangeSummary)> {
        let storage = self.storage.as_ref();
        let dir = &self.dir;
        let version = plan.version;
        // 1. Left-overs of a commit of this version that never reached its
        //    commit point: named by no kept version, so never read.
        remove_version_files(storage, dir, version)?;
        // 2. The parent stays openable by its id.
        self.keep_parent(&storage.read(&dir.join(METADATA_FILE))?)?;
        fault_point("edit:after-base-version");
        // 3. Touched shards anew, untouched ones as they are, appended rows last.
        let mut records: Vec<ShardRecord> = Vec::new();
        let kept = |s: usize| ShardRecord {
            filename: m.shard_filenames[s].clone(),
            num_rows: m.shard_row_counts[s],
            num_bytes: m.shard_num_bytes.as_ref().map_or(0, |v| v[s]),
            xxh64: m
                .shard_xxh64
                .as_ref()
                .map_or_else(String::new, |v| v[s].clone()),
            refs: 0,
        };
        for s in 0..m.shard_filenames.len() {
            if plan.reused.contains(&s) {
                records.push(kept(s));
            } else if plan.rewritten.contains(&s) {
                let mut w = self.writer(m, None, version, records.len())?;
                let mut chunks = Rechunk::new(batch_size(m), self.schema.clone(), dir);
                self.edited_rows(s, |piece| chunks.push(piece, &mut w))?;
                chunks.finish(&mut w)?;
                let written = w.finish()?;
                change.bytes_written += written.iter().map(|r| r.num_bytes).sum::<u64>();
                records.extend(written);
                fault_point("edit:after-rewritten-shard");
            }
        }
        if !self.appended.is_empty() {
            let mut w = self.writer(m, m.shard_size_target_bytes, version, records.len())?;
            let mut chunks = Rechunk::new(batch_size(m), self.schema.clone(), dir);
            for b in &self.appended {
                chunks.push(b.clone(), &mut w)?;
            }
            chunks.finish(&mut w)?;
            let written = w.finish()?;
            change.shards_new = written.len() as u64;
            change.bytes_written += written.iter().map(|r| r.num_bytes).sum::<u64>();
            records.extend(written);
        }
        storage.sync_dir(dir)?;
        if m.row_checksums == Some(true) {
            storage.sync_dir(&dir.join(rowsum::ROW_SUMS_DIR))?;
        }
        fault_point("edit:after-shards");
        // 4. The new version's metadata, kept by id.
        let mut meta = m.clone();
        meta.num_rows = records.iter().map(|r| r.num_rows).sum();
        meta.num_shards = records.len() as u64;
        meta.shard_row_counts = records.iter().map(|r| r.num_rows).collect();
        meta.shard_filenames = records.iter().map(|r| r.filename.clone()).collect();
        if meta.shard_num_bytes.is_some() {
            meta.shard_num_bytes = Some(records.iter().map(|r| r.num_bytes).collect());
        }
        if meta.shard_xxh64.is_some() {
            meta.shard_xxh64 = Some(records.iter().map(|r| r.xxh64.clone()).collect());
        }
        meta.writer = Some(WriterInfo::current());
        meta.version = Some(self.version_info(&change));
        meta.metadata_xxh64 = None;
        write_json_checksummed(storage, &version_path(dir, version), &meta)?;
        fault_point("edit:after-version-file");
        // 5. The commit point.
        write_json_checksummed(storage, &dir.join(METADATA_FILE), &meta)?;
        fault_point("edit:after-commit");
        Ok((CacheMetadata::ArrowShards(meta), change))
    }

    #[cfg(feature = "lance")]
    fn commit_lance(
        &self,
        m: &LanceRowsMetadata,
        lance_version: u64,
        plan: &EditPlan,
        mut change: ChangeSummary,
    ) -> Result<(CacheMetadata, ChangeSummary)> {
        let storage = self.storage.as_ref();
        let dir = &self.dir;
        let version = plan.version;
        // 1. A Lance commit whose cache version never became current (a
        //    crash before the commit point) is undone: the parent's file
        //    proves it was ours.
        let latest = lance_edit::latest_version(dir)?;
        // The Lance version the commit is made on: the parent's, or its
        // restored copy.
        let mut on_version = lance_version;
        if latest != lance_version {
            let ours = storage.is_file(&version_path(dir, self.base_version))
                && read_version(storage, dir, self.base_version)
                    .ok()
                    .and_then(|v| match v {
                        CacheMetadata::LanceRows(v) => v.lance_version,
                        _ => None,
                    })
                    == Some(lance_version);
            if !ours {
                return Err(Error::EditConflict {
                    path: dir.clone(),
                    expected: self.base_version,
                    found: self.base_version,
                });
            }
            on_version = lance_edit::restore(dir, lance_version)?;
        }
        let v = version_path(dir, version);
        if storage.is_file(&v) {
            storage.remove_file(&v)?;
        }
        // 2. The parent stays openable by its id, and says which Lance
        //    version it reads.
        let mut parent = m.clone();
        parent.lance_version = Some(lance_version);
        parent.metadata_xxh64 = None;
        if !storage.is_file(&version_path(dir, self.base_version)) {
            storage.create_dir_all(&dir.join(VERSIONS_DIR))?;
            write_json_checksummed(storage, &version_path(dir, self.base_version), &parent)?;
        }
        fault_point("edit:after-base-version");
        // 3. Touched fragments anew, appended rows as new fragments, one
        //    Lance commit.
        let mut rewritten = Vec::with_capacity(plan.rewritten.len());
        for &s in &plan.rewritten {
            let mut pieces = Vec::new();
            self.edited_rows(s, |piece| {
                pieces.push(piece);
                Ok(())
            })?;
            rewritten.push((s, pieces));
            fault_point("edit:after-rewritten-shard");
        }
        let per_file = m
            .fragment_row_counts
            .as_ref()
            .and_then(|c| c.iter().copied().max())
            .filter(|&n| n > 0)
            .unwrap_or(1024 * 1024) as usize;
        let done = lance_edit::commit(
            storage,
            dir,
            on_version,
            lance_edit::FragmentEdits {
                rewritten,
                removed: plan.removed.clone(),
                appended: self.appended.clone(),
                max_rows_per_file: per_file,
            },
            || fault_point("edit:after-shards"),
        )?;
        change.bytes_written = done.bytes_written;
        change.shards_new = done.new_fragments;
        fault_point("edit:after-lance-commit");
        if storage.is_file(&dir.join(crate::cache::checksums::CHECKSUMS_FILE)) {
            crate::cache::checksums::update_file_checksums(storage, dir, &[VERSIONS_DIR])?;
        }
        // 4. The new version's metadata, kept by id.
        let mut meta = m.clone();
        meta.num_rows = done.fragment_rows.iter().sum();
        meta.fragment_row_counts = Some(done.fragment_rows);
        meta.lance_version = Some(done.lance_version);
        meta.writer = Some(WriterInfo::current());
        meta.version = Some(self.version_info(&change));
        meta.metadata_xxh64 = None;
        write_json_checksummed(storage, &v, &meta)?;
        fault_point("edit:after-version-file");
        // 5. The commit point.
        write_json_checksummed(storage, &dir.join(METADATA_FILE), &meta)?;
        fault_point("edit:after-commit");
        Ok((CacheMetadata::LanceRows(meta), change))
    }
}

/// Rows read from a Lance fragment at a time while rewriting it.
#[cfg(feature = "lance")]
const EDIT_READ_ROWS: u64 = 4096;

fn batch_size(meta: &ArrowShardsMetadata) -> usize {
    meta.batch_size
        .and_then(|b| usize::try_from(b).ok())
        .filter(|&b| b > 0)
        .unwrap_or(DEFAULT_BATCH_SIZE.get())
}

/// Gathers row pieces into record batches of exactly `size` rows (the last
/// one shorter), as the writer's rotation rule expects.
struct Rechunk<'a> {
    size: usize,
    schema: SchemaRef,
    dir: &'a Path,
    pending: Vec<RecordBatch>,
    rows: usize,
}

impl<'a> Rechunk<'a> {
    fn new(size: usize, schema: SchemaRef, dir: &'a Path) -> Self {
        Rechunk {
            size,
            schema,
            dir,
            pending: Vec::new(),
            rows: 0,
        }
    }

    fn push(&mut self, mut b: RecordBatch, out: &mut ShardWriter) -> Result<()> {
        while self.rows + b.num_rows() >= self.size {
            let take = self.size - self.rows;
            self.pending.push(b.slice(0, take));
            b = b.slice(take, b.num_rows() - take);
            self.rows = self.size;
            self.flush(out)?;
        }
        if b.num_rows() > 0 {
            self.rows += b.num_rows();
            self.pending.push(b);
        }
        Ok(())
    }

    fn flush(&mut self, out: &mut ShardWriter) -> Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let pieces: Vec<RecordBatch> = self
            .pending
            .drain(..)
            .map(|p| RecordBatch::try_new(self.schema.clone(), p.columns().to_vec()))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| Error::arrow(Some(self.dir), e))?;
        let batch = arrow_select::concat::concat_batches(&self.schema, &pieces)
            .map_err(|e| Error::arrow(Some(self.dir), e))?;
        self.rows = 0;
        out.write(&batch)
    }

    fn finish(mut self, out: &mut ShardWriter) -> Result<()> {
        self.flush(out)
    }
}

/// Removes the shard files (and their row checksums) named after
/// `version`, and its version file.
fn remove_version_files(
    storage: &dyn crate::storage::Storage,
    dir: &Path,
    version: u64,
) -> Result<()> {
    let suffix = format!(".v{version}.arrow");
    for e in storage.list(dir)? {
        let name = e.name();
        if e.is_file() && name.starts_with("shard-") && name.ends_with(&suffix) {
            remove_shard(storage, dir, &name)?;
        }
    }
    let v = version_path(dir, version);
    if storage.is_file(&v) {
        storage.remove_file(&v)?;
    }
    Ok(())
}

/// Removes a shard file and its row checksum files, if any.
fn remove_shard(storage: &dyn crate::storage::Storage, dir: &Path, name: &str) -> Result<u64> {
    let mut freed = 0;
    for p in [
        dir.join(name),
        rowsum::sidecar(dir, name),
        rowsum::column_sidecar(dir, name),
    ] {
        if let Some(st) = storage.stat(&p)? {
            freed += st.len;
            storage.remove_file(&p)?;
        }
    }
    Ok(freed)
}

/// What [`gc_versions`] removed (or would remove, on a dry run).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionGc {
    /// Version ids whose metadata files were removed.
    pub versions: Vec<u64>,
    /// Shard files named by no kept version.
    pub files: Vec<PathBuf>,
    /// Bytes those files (and their row checksums) held.
    pub bytes: u64,
}

/// Keeps the newest `keep` versions of the `arrow-shards` cache at `dir`
/// (the current one always) and removes the older versions' metadata
/// files and every shard file that no kept version names, under the
/// cache's lock. A reader still holding a removed version keeps the shards
/// it has mapped; the shards it has not opened yet are gone.
///
/// # Errors
/// [`Error::InvalidArgument`] for `keep == 0`; a metadata or I/O error
/// naming the file.
pub fn gc_versions(dir: &Path, keep: usize, dry_run: bool) -> Result<VersionGc> {
    if keep == 0 {
        return Err(Error::InvalidArgument(
            "keep at least one version (the current one)".into(),
        ));
    }
    let storage = crate::storage::storage_for(dir);
    let storage = storage.as_ref();
    let _lock = CacheLock::acquire(dir)?;
    let current = CacheMetadata::read_in(storage, dir)?;
    let now = version_id(&current);
    let ids: Vec<u64> = kept_version_ids(storage, dir)?
        .into_iter()
        .filter(|&id| id < now)
        .collect();
    let older = ids.len().saturating_sub(keep - 1);
    let (drop, kept) = ids.split_at(older);
    #[cfg(feature = "lance")]
    if let CacheMetadata::LanceRows(m) = &current {
        return gc_lance_versions(storage, dir, m, now, drop, kept, dry_run);
    }
    let mut named: BTreeSet<String> = BTreeSet::new();
    if let Some(m) = current.as_arrow_shards() {
        named.extend(m.shard_filenames.iter().cloned());
    }
    for &id in kept {
        // Below the current version: its own file (read_version would read
        // `_metadata.json` again for each).
        let meta = CacheMetadata::read_at(storage, dir, &version_path(dir, id))?;
        if let Some(m) = meta.as_arrow_shards() {
            named.extend(m.shard_filenames.iter().cloned());
        }
    }
    let mut out = VersionGc {
        versions: drop.to_vec(),
        ..VersionGc::default()
    };
    // Files of versions above the current one (a commit that never reached
    // its commit point) are named by nothing and go too.
    for e in storage.list(dir)? {
        let name = e.name();
        if e.is_file()
            && name.starts_with("shard-")
            && name.ends_with(".arrow")
            && !named.contains(&name)
        {
            out.files.push(e.path.clone());
            if dry_run {
                out.bytes += e.len;
            } else {
                out.bytes += remove_shard(storage, dir, &name)?;
            }
        }
    }
    for id in kept_version_ids(storage, dir)? {
        let stale = id > now || drop.contains(&id);
        if stale && !dry_run {
            storage.remove_file(&version_path(dir, id))?;
        }
    }
    if !dry_run {
        storage.sync_dir(dir)?;
    }
    Ok(out)
}

/// [`gc_versions`] of a `lance-rows` cache: the dropped versions' files go,
/// a Lance commit whose cache version never became current is undone, and
/// Lance's cleanup removes the Lance versions older than the oldest kept
/// one with the data files only they use.
#[cfg(feature = "lance")]
fn gc_lance_versions(
    storage: &dyn crate::storage::Storage,
    dir: &Path,
    current: &LanceRowsMetadata,
    now: u64,
    drop: &[u64],
    kept: &[u64],
    dry_run: bool,
) -> Result<VersionGc> {
    let lance_of = |id: u64| -> Result<Option<u64>> {
        Ok(
            match CacheMetadata::read_at(storage, dir, &version_path(dir, id))? {
                CacheMetadata::LanceRows(m) => m.lance_version,
                _ => None,
            },
        )
    };
    let current_lance = crate::layouts::open::lance_version_of(storage, dir, current)?;
    let mut out = VersionGc {
        versions: drop.to_vec(),
        ..VersionGc::default()
    };
    // A build never edited records no Lance version: nothing to clean.
    let Some(current_lance) = current_lance else {
        return Ok(out);
    };
    let mut keep_lance = vec![current_lance];
    for &id in kept {
        keep_lance.extend(lance_of(id)?);
    }
    let used = lance_edit::data_files_of(dir, &keep_lance)?;
    let data = dir.join("data");
    if storage.is_dir(&data) {
        for e in storage.list(&data)? {
            if e.is_file() && !used.contains(&e.name()) {
                out.bytes += e.len;
                out.files.push(e.path.clone());
            }
        }
    }
    if dry_run {
        return Ok(out);
    }
    if lance_edit::latest_version(dir)? != current_lance {
        lance_edit::restore(dir, current_lance)?;
    }
    for id in kept_version_ids(storage, dir)? {
        if id > now || drop.contains(&id) {
            storage.remove_file(&version_path(dir, id))?;
        }
    }
    let oldest = keep_lance.iter().copied().min().unwrap_or(current_lance);
    lance_edit::cleanup_before(dir, oldest)?;
    if storage.is_file(&dir.join(crate::cache::checksums::CHECKSUMS_FILE)) {
        crate::cache::checksums::update_file_checksums(storage, dir, &[VERSIONS_DIR])?;
    }
    storage.sync_dir(dir)?;
    Ok(out)
}
