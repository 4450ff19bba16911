//! [`Dataset`]: what a training loop holds. A backend plus a *view* (which
//! rows, in which order), a column selection and a format. Views compose
//! without copying data: `select`, `slice`, `shuffle`, `filter` and
//! `train_test_split` only build index lists.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::Array;
use arrow_array::RecordBatch;
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::features::decode::{DecodeOptions, RowDecoder};
use crate::features::{Feature, Features};
use crate::layouts::backend::{normalize_index, Backend, IterOptions};
use crate::layouts::open::Cache;
use crate::util::SplitMix64;
use crate::value::Row;

pub use iter::RowIter;

pub mod collate;
#[cfg(feature = "parquet")]
mod export;
#[cfg(feature = "lance")]
pub mod filter;
mod fixed;
mod iter;

/// Which physical rows a dataset shows, in order.
#[derive(Debug, Clone)]
pub(crate) enum View {
    /// Every row, in storage order.
    All(u64),
    /// `len` rows from `start`, in storage order.
    Range { start: u64, len: u64 },
    /// Arbitrary physical rows (order and duplicates allowed).
    Indices(Arc<[u64]>),
}

impl View {
    fn len(&self) -> u64 {
        match self {
            View::All(n) => *n,
            View::Range { len, .. } => *len,
            View::Indices(ix) => ix.len() as u64,
        }
    }

    /// Physical row of view position `pos` (`pos < len`).
    #[inline]
    pub(crate) fn physical(&self, pos: u64) -> u64 {
        match self {
            View::All(_) => pos,
            View::Range { start, .. } => start + pos,
            View::Indices(ix) => ix[pos as usize],
        }
    }
}

/// How rows come out of [`Dataset::get`] and friends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Typed values: images as pixels, arrays as tensors, labels with names.
    #[default]
    Decoded,
    /// Stored cells: images and arrays as bytes, labels as ids.
    Raw,
}

/// Size of the test part of [`Dataset::train_test_split`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TestSize {
    /// A fraction of the rows in (0, 1); the test part gets `ceil(fraction * n)`.
    Fraction(f64),
    /// An exact number of rows in (0, n).
    Count(u64),
}

/// A view over a cache, cheap to clone and to pass to worker threads.
#[derive(Debug, Clone)]
pub struct Dataset {
    backend: Arc<dyn Backend>,
    view: View,
    decoder: RowDecoder,
    format: Format,
    cache: Option<Arc<Cache>>,
}

impl Dataset {
    /// The dataset of a whole opened cache.
    pub fn new(cache: Cache) -> Self {
        let backend = cache.backend.clone();
        Dataset {
            view: View::All(backend.len()),
            decoder: backend.decoder().clone(),
            backend,
            format: Format::Decoded,
            cache: Some(Arc::new(cache)),
        }
    }

    /// A dataset over any backend.
    pub fn from_backend(backend: Arc<dyn Backend>) -> Self {
        Dataset {
            view: View::All(backend.len()),
            decoder: backend.decoder().clone(),
            backend,
            format: Format::Decoded,
            cache: None,
        }
    }

    /// Number of rows in the view.
    pub fn len(&self) -> u64 {
        self.view.len()
    }

    /// True when the view is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The opened cache (metadata, directory), when built from one.
    pub fn cache(&self) -> Option<&Cache> {
        self.cache.as_deref()
    }

    /// The cache directory, when file-backed.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.backend.cache_dir()
    }

    /// Features of the rows (after column selection).
    pub fn features(&self) -> &Arc<Features> {
        self.decoder.selected_features()
    }

    /// Column names (after column selection).
    pub fn column_names(&self) -> Vec<String> {
        self.features().names()
    }

    /// The current format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// True when the view is every row in storage order.
    pub fn is_identity(&self) -> bool {
        matches!(self.view, View::All(_))
    }

    pub(crate) fn view(&self) -> &View {
        &self.view
    }

    /// The physical row of a view position.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`].
    pub fn physical_index(&self, index: i64) -> Result<u64> {
        Ok(self.view.physical(normalize_index(index, self.len())?))
    }

    fn with_view(&self, view: View) -> Self {
        Dataset {
            view,
            ..self.clone()
        }
    }

    /// The same view in another format.
    pub fn with_format(&self, format: Format) -> Self {
        let opts = self
            .decoder
            .options()
            .clone()
            .with_raw(format == Format::Raw);
        Dataset {
            decoder: self.decoder.with_options(opts),
            format,
            ..self.clone()
        }
    }

    /// Decodes `Video(path|bytes)` columns to clips with a read-time policy
    /// (None: rows hold [`crate::VideoRef`]s). Nothing in the cache changes.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for a bad policy or when the dataset has no
    /// path or bytes video column.
    #[cfg(feature = "video")]
    pub fn with_video_decode(&self, policy: Option<crate::video::VideoDecode>) -> Result<Self> {
        if let Some(p) = &policy {
            p.validate()?;
            let has = self.features().iter().any(
                |(_, f)| matches!(f, crate::features::Feature::Video(v) if !v.storage.is_layout()),
            );
            if !has {
                return Err(crate::Error::InvalidArgument(
                    "video decoding needs a Video(storage='path'|'bytes') column".into(),
                ));
            }
        }
        let opts = self.decoder.options().clone().with_video_decode(policy);
        Ok(Dataset {
            decoder: self.decoder.with_options(opts),
            ..self.clone()
        })
    }

    /// The same view with images decoded to pixels (true) or kept as bytes.
    pub fn with_image_decoding(&self, yes: bool) -> Self {
        let opts = self.decoder.options().clone().with_decode_images(yes);
        Dataset {
            decoder: self.decoder.with_options(opts),
            ..self.clone()
        }
    }

    /// Only these columns, in this order.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an unknown or repeated column.
    pub fn select_columns(&self, columns: &[&str]) -> Result<Self> {
        // Selection is always relative to the cache's full schema.
        let full = RowDecoder::new(
            self.backend.features().clone(),
            self.decoder.options().clone(),
        );
        Ok(Dataset {
            decoder: full.with_columns(columns)?,
            ..self.clone()
        })
    }

    /// Row `index` (negative counts from the end).
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`], or a read/decode error.
    pub fn get(&self, index: i64) -> Result<Row> {
        let p = self.physical_index(index)?;
        self.backend.get_with(p as i64, &self.decoder)
    }

    /// Rows at view positions `indices`, in that order (duplicates allowed).
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for any bad index, or a read/decode error.
    pub fn take(&self, indices: &[i64]) -> Result<Vec<Row>> {
        let batch = self.take_arrow(indices)?;
        self.decoder.decode_batch(&batch)
    }

    /// Raw Arrow cells of the rows at `indices` (all columns of the cache).
    ///
    /// # Errors
    /// As [`Dataset::take`].
    pub fn take_arrow(&self, indices: &[i64]) -> Result<RecordBatch> {
        let n = self.len();
        let phys = indices
            .iter()
            .map(|&i| normalize_index(i, n).map(|p| self.view.physical(p) as i64))
            .collect::<Result<Vec<_>>>()?;
        self.backend.take(&phys)
    }

    /// The backend rows of view positions (already normalised, `< len`).
    pub(crate) fn physical_positions(&self, positions: &[u64]) -> Vec<i64> {
        positions
            .iter()
            .map(|&p| self.view.physical(p) as i64)
            .collect()
    }

    /// [`Dataset::physical_positions`], borrowed where the view is the whole
    /// cache (its positions are its rows): a batch's read then copies and
    /// allocates no index list.
    pub(crate) fn physical_slice<'p>(&self, positions: &'p [u64]) -> Cow<'p, [i64]> {
        match self.view {
            // Positions are below the row count, itself below 2^63.
            View::All(_) if positions.iter().all(|&p| p <= i64::MAX as u64) => {
                // SAFETY: u64 and i64 have the same size and alignment, and
                // every value is below 2^63, so each reads as the same number.
                Cow::Borrowed(unsafe {
                    std::slice::from_raw_parts(positions.as_ptr().cast::<i64>(), positions.len())
                })
            }
            _ => Cow::Owned(self.physical_positions(positions)),
        }
    }

    /// Raw Arrow cells of the rows at view positions (already normalised,
    /// `< len`), all columns of the cache.
    pub(crate) fn take_positions_arrow(&self, positions: &[u64]) -> Result<RecordBatch> {
        self.backend.take(&self.physical_slice(positions))
    }

    /// How this dataset decodes cells: its limits and trusted roots among
    /// them.
    pub fn decode_options(&self) -> &DecodeOptions {
        self.decoder.options()
    }

    /// Rows at view positions (already normalised, `< len`).
    pub(crate) fn take_positions(&self, positions: &[u64]) -> Result<Vec<Row>> {
        let phys: Vec<i64> = positions
            .iter()
            .map(|&p| self.view.physical(p) as i64)
            .collect();
        let batch = self.backend.take(&phys)?;
        self.decoder.decode_batch(&batch)
    }

    /// A view of `len` rows from `start` (clamped at the end).
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] when `start > len()`.
    pub fn slice(&self, start: u64, len: u64) -> Result<Self> {
        let n = self.len();
        if start > n {
            return Err(Error::IndexOutOfRange {
                index: start.min(i64::MAX as u64) as i64,
                len: n,
            });
        }
        let len = len.min(n - start);
        Ok(self.with_view(match &self.view {
            View::All(_) => View::Range { start, len },
            View::Range { start: s, .. } => View::Range {
                start: s + start,
                len,
            },
            View::Indices(ix) => View::Indices(ix[start as usize..(start + len) as usize].into()),
        }))
    }

    /// A view of the rows at these positions (negative allowed), composed with this view.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for any bad index.
    pub fn select(&self, indices: &[i64]) -> Result<Self> {
        let n = self.len();
        let phys = indices
            .iter()
            .map(|&i| normalize_index(i, n).map(|p| self.view.physical(p)))
            .collect::<Result<Vec<_>>>()?;
        Ok(self.with_view(View::Indices(phys.into())))
    }

    fn select_positions(&self, positions: &[u64]) -> Self {
        let phys: Vec<u64> = positions.iter().map(|&p| self.view.physical(p)).collect();
        self.with_view(View::Indices(phys.into()))
    }

    /// A view of the rows in a seeded random order.
    pub fn shuffle(&self, seed: u64) -> Self {
        let mut perm: Vec<u64> = (0..self.len()).collect();
        SplitMix64::new(seed).shuffle(&mut perm);
        self.select_positions(&perm)
    }

    /// The rows for which `pred` is true, as a view (rows are decoded in
    /// batches and tested in parallel; the order is kept).
    ///
    /// # Errors
    /// The first read or decode error.
    pub fn filter<F>(&self, pred: F) -> Result<Self>
    where
        F: Fn(&Row) -> bool + Sync,
    {
        const CHUNK: u64 = 1024;
        let n = self.len();
        let chunks: Vec<u64> = (0..n.div_ceil(CHUNK)).collect();
        let kept: Vec<Vec<u64>> = crate::util::in_pool(|| {
            chunks
                .par_iter()
                .map(|&c| {
                    let start = c * CHUNK;
                    let end = (start + CHUNK).min(n);
                    let pos: Vec<u64> = (start..end).collect();
                    let rows = self.take_positions(&pos)?;
                    Ok(pos
                        .into_iter()
                        .zip(rows)
                        .filter(|(_, r)| pred(r))
                        .map(|(p, _)| p)
                        .collect())
                })
                .collect::<Result<_>>()
        })??;
        let kept: Vec<u64> = kept.into_iter().flatten().collect();
        Ok(self.select_positions(&kept))
    }

    /// Ids of a `ClassLabel` column for every row of the view.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the column is missing or not a ClassLabel.
    pub fn label_ids(&self, column: &str) -> Result<Vec<i64>> {
        let names = self.backend.features().names();
        let col = names.iter().position(|n| n == column).ok_or_else(|| {
            Error::InvalidArgument(format!("no column '{column}' (columns: {names:?})"))
        })?;
        if !matches!(
            self.backend.features().get(column),
            Some(Feature::ClassLabel(_))
        ) {
            return Err(Error::InvalidArgument(format!(
                "stratify column '{column}' must be a ClassLabel"
            )));
        }
        let mut out = Vec::with_capacity(self.len() as usize);
        let mut push = |b: &RecordBatch| -> Result<()> {
            let a = b
                .column(col)
                .as_primitive_opt::<Int64Type>()
                .ok_or_else(|| Error::InvalidArgument(format!("column '{column}' is not int64")))?;
            out.extend((0..a.len()).map(|i| if a.is_null(i) { -1 } else { a.value(i) }));
            Ok(())
        };
        if self.is_identity() {
            for b in self.backend.iter_batches(&IterOptions::default())? {
                push(&b?)?;
            }
        } else {
            let n = self.len();
            let mut s = 0;
            while s < n {
                let e = (s + 8192).min(n);
                let phys: Vec<i64> = (s..e).map(|p| self.view.physical(p) as i64).collect();
                push(&self.backend.take(&phys)?)?;
                s = e;
            }
        }
        Ok(out)
    }

    /// Splits the view into (train, test) views, disjoint and complete.
    /// With `stratify_by` (a ClassLabel column) each class keeps its share in
    /// both parts (largest-remainder rounding, so the test size is exact).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a size outside (0, n) or a bad stratify column.
    pub fn train_test_split(
        &self,
        test_size: TestSize,
        seed: u64,
        stratify_by: Option<&str>,
    ) -> Result<(Self, Self)> {
        let n = self.len();
        let n_test = match test_size {
            TestSize::Fraction(f) if f > 0.0 && f < 1.0 => (f * n as f64).ceil() as u64,
            TestSize::Count(c) => c,
            TestSize::Fraction(f) => {
                return Err(Error::InvalidArgument(format!(
                    "test fraction must be in (0, 1), got {f}"
                )))
            }
        };
        if n_test == 0 || n_test >= n {
            return Err(Error::InvalidArgument(format!(
                "test size {n_test} leaves an empty part of a {n}-row dataset"
            )));
        }
        let mut rng = SplitMix64::new(seed);
        let (mut train, mut test): (Vec<u64>, Vec<u64>) = match stratify_by {
            None => {
                let mut perm: Vec<u64> = (0..n).collect();
                rng.shuffle(&mut perm);
                let test = perm.split_off((n - n_test) as usize);
                (perm, test)
            }
            Some(col) => {
                let ids = self.label_ids(col)?;
                let mut classes: std::collections::BTreeMap<i64, Vec<u64>> = Default::default();
                for (p, id) in ids.into_iter().enumerate() {
                    classes.entry(id).or_default().push(p as u64);
                }
                // Largest remainder: floor shares, then hand out what is left.
                let mut shares: Vec<(i64, u64, f64)> = classes
                    .iter()
                    .map(|(&c, v)| {
                        let exact = n_test as f64 * v.len() as f64 / n as f64;
                        (c, exact.floor() as u64, exact - exact.floor())
                    })
                    .collect();
                let mut left = n_test - shares.iter().map(|s| s.1).sum::<u64>();
                let mut order: Vec<usize> = (0..shares.len()).collect();
                order.sort_by(|&a, &b| shares[b].2.total_cmp(&shares[a].2).then(a.cmp(&b)));
                for i in order {
                    if left == 0 {
                        break;
                    }
                    if shares[i].1 < classes[&shares[i].0].len() as u64 {
                        shares[i].1 += 1;
                        left -= 1;
                    }
                }
                let (mut train, mut test) = (Vec::new(), Vec::new());
                for (c, k, _) in shares {
                    let mut v = classes.remove(&c).expect("class");
                    rng.shuffle(&mut v);
                    let t = v.split_off(v.len() - k as usize);
                    train.extend(v);
                    test.extend(t);
                }
                (train, test)
            }
        };
        rng.shuffle(&mut train);
        rng.shuffle(&mut test);
        Ok((self.select_positions(&train), self.select_positions(&test)))
    }

    /// Decoded rows in view order.
    pub fn iter(&self) -> RowIter<'_> {
        RowIter::new(self)
    }

    /// Arrow record batches (all columns) in view order, `batch_size` rows
    /// each; the identity view yields the stored batches zero-copy.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero batch size.
    pub fn iter_arrow(
        &self,
        batch_size: usize,
    ) -> Result<Box<dyn Iterator<Item = Result<RecordBatch>> + Send + '_>> {
        if batch_size == 0 {
            return Err(Error::InvalidArgument(
                "batch_size must be at least 1".into(),
            ));
        }
        if self.is_identity() {
            return self.backend.iter_batches(&IterOptions::default());
        }
        let n = self.len();
        let this = self.clone();
        Ok(Box::new((0..n.div_ceil(batch_size as u64)).map(move |c| {
            let s = c * batch_size as u64;
            let e = (s + batch_size as u64).min(n);
            match &this.view {
                View::Range { start, .. } => this.backend.slice(start + s, e - s),
                _ => {
                    let phys: Vec<i64> = (s..e).map(|p| this.view.physical(p) as i64).collect();
                    this.backend.take(&phys)
                }
            }
        })))
    }
}
