//! The object-safe [`Backend`] trait every layout's reader implements, and
//! the index and shard-order rules they share.
//!
//! A backend knows how to find rows in its files; it knows nothing of
//! builders, samplers or loaders. Backends are cheap to clone (paths, counts
//! and lazily opened maps behind an `Arc`), and [`Backend::reopened`] gives a
//! copy with nothing open, for a worker process or thread that wants its own maps.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::error::{Error, Result};
use crate::features::decode::RowDecoder;
use crate::features::Features;
use crate::value::Row;

/// Which shards `iter_batches` visits, and in which order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IterOptions {
    /// Only these shards, in this order (default: all, in order).
    pub shards: Option<Vec<usize>>,
    /// Shuffle the shard order with this seed (rows within a shard stay in order).
    pub shuffle_seed: Option<u64>,
}

impl IterOptions {
    /// Visits only these shards.
    pub fn with_shards(mut self, shards: Vec<usize>) -> Self {
        self.shards = Some(shards);
        self
    }

    /// Shuffles the shard order with a seed.
    pub fn with_shuffle_seed(mut self, seed: u64) -> Self {
        self.shuffle_seed = Some(seed);
        self
    }
}

/// What every backend holds and answers the same way: its directory, the
/// features and schema of its rows, the decoder `get` uses, and the row
/// counts of its shards (files, fragments or videos).
#[derive(Debug, Clone)]
pub struct RowsCore {
    pub(crate) dir: PathBuf,
    pub(crate) features: Arc<Features>,
    pub(crate) schema: SchemaRef,
    pub(crate) decoder: RowDecoder,
    pub(crate) row_counts: Vec<u64>,
    /// `starts[i]` = first global row of shard i; `starts[n]` = total rows.
    pub(crate) starts: Vec<u64>,
}

impl RowsCore {
    /// A core over shards of `row_counts` rows.
    pub(crate) fn new(
        dir: &Path,
        features: Arc<Features>,
        schema: SchemaRef,
        decoder: RowDecoder,
        row_counts: Vec<u64>,
    ) -> Self {
        let mut starts = Vec::with_capacity(row_counts.len() + 1);
        let mut at = 0u64;
        starts.push(0);
        for &r in &row_counts {
            at += r;
            starts.push(at);
        }
        RowsCore {
            dir: dir.to_path_buf(),
            features,
            schema,
            decoder,
            row_counts,
            starts,
        }
    }

    /// The same core with another schema (layouts whose rows are not their features').
    #[cfg(feature = "lance")]
    pub(crate) fn with_schema(mut self, schema: SchemaRef) -> Self {
        self.schema = schema;
        self
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Total rows.
    pub fn len(&self) -> u64 {
        *self.starts.last().expect("starts has a sentinel")
    }

    /// True when there is no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The shard holding global `row` and the row's position in it (`row < len()`).
    pub(crate) fn locate(&self, row: u64) -> (usize, u64) {
        let s = self.starts.partition_point(|&x| x <= row) - 1;
        (s, row - self.starts[s])
    }
}

/// An iterator of record batches.
pub type BatchIter<'a> = Box<dyn Iterator<Item = Result<RecordBatch>> + Send + 'a>;

/// The operations every layout serves.
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// The layout name (`arrow-shards`, ...).
    fn layout(&self) -> &'static str;

    /// What every backend answers the same way.
    fn core(&self) -> &RowsCore;

    /// Number of rows.
    fn len(&self) -> u64 {
        self.core().len()
    }

    /// True when there is no row.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of shards (files, fragments or videos).
    fn num_shards(&self) -> usize {
        self.core().row_counts.len()
    }

    /// Rows per shard, in shard order.
    fn shard_row_counts(&self) -> &[u64] {
        &self.core().row_counts
    }

    /// The Arrow schema of the rows.
    fn schema(&self) -> SchemaRef {
        self.core().schema.clone()
    }

    /// The features of the rows.
    fn features(&self) -> &Arc<Features> {
        &self.core().features
    }

    /// The cache directory, when file-backed.
    fn cache_dir(&self) -> Option<&Path> {
        Some(&self.core().dir)
    }

    /// The decoder used by [`Backend::get`].
    fn decoder(&self) -> &RowDecoder {
        &self.core().decoder
    }

    /// One row as a 1-row record batch of raw cells (negative indices count from the end).
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`], or a read error naming the shard.
    fn get_raw(&self, index: i64) -> Result<RecordBatch>;

    /// One row decoded to typed values (negative indices count from the end).
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`], a read error naming the shard, or [`Error::Decode`].
    fn get(&self, index: i64) -> Result<Row>;

    /// One row decoded with a caller's decoder (other columns or options).
    ///
    /// # Errors
    /// As [`Backend::get`].
    fn get_with(&self, index: i64, decoder: &RowDecoder) -> Result<Row> {
        let batch = self.get_raw(index)?;
        decoder.decode_row(&batch, 0)
    }

    /// Rows at `indices`, in that order, duplicates allowed, across shards.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for any index outside the dataset.
    fn take(&self, indices: &[i64]) -> Result<RecordBatch>;

    /// Copies the fixed-width values of rows `indices` (in that order,
    /// duplicates allowed) into `outs`: row `indices[i]` goes to slot
    /// `slots[i]` (slot `i` without `slots`). Returns false, having written
    /// any part of `outs`, when this backend cannot (a column with nulls or
    /// of another width, deduplicated cells, a layout without the path):
    /// the caller then takes the rows, whose errors say what is wrong.
    ///
    /// # Errors
    /// As [`Backend::take`].
    fn gather_fixed(
        &self,
        indices: &[i64],
        slots: Option<&[usize]>,
        outs: &mut [super::gather::FixedOut<'_>],
    ) -> Result<bool> {
        let _ = (indices, slots, outs);
        Ok(false)
    }

    /// Where the values of fixed-width columns `columns` ((column, bytes a
    /// value)) of rows `indices` are, without copying them: row
    /// `indices[i]`'s value of column `c` is put at `dst[c][slots[i]]`
    /// (slot `i` without `slots`), a slice of the memory this backend
    /// keeps. A reader of several backends (a mixture) locates every
    /// backend's rows into one table in its own order, then copies once
    /// ([`super::gather::copy_values`]). Returns false, having written any
    /// part of `dst`, where the backend keeps no such memory (then
    /// [`Backend::gather_fixed`]).
    ///
    /// # Errors
    /// As [`Backend::take`]; [`Error::InvalidArgument`] for a slot past
    /// `dst`.
    fn locate_fixed<'a>(
        &'a self,
        indices: &[i64],
        columns: &[(usize, usize)],
        slots: Option<&[usize]>,
        dst: &mut [Vec<&'a [u8]>],
    ) -> Result<bool> {
        let _ = (indices, columns, slots, dst);
        Ok(false)
    }

    /// `len` rows from `start` (clamped at the end), across shard boundaries.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] when `start > len()`.
    fn slice(&self, start: u64, len: u64) -> Result<RecordBatch>;

    /// Record batches of the chosen shards, in the chosen order.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a shard index out of range.
    fn iter_batches(&self, opts: &IterOptions) -> Result<BatchIter<'_>>;

    /// A copy of this backend with nothing opened yet.
    fn reopened(&self) -> Box<dyn Backend>;

    /// True when rows are fetched from a remote store (an object store),
    /// so hints of what comes next ([`Backend::prefetch_rows`]) pay off.
    fn reads_remotely(&self) -> bool {
        false
    }

    /// A hint: `rows` (cache positions) will be read soon. A remote backend
    /// starts fetching the shards holding them into its disk cache in the
    /// background; others ignore it.
    fn prefetch_rows(&self, rows: &[u64]) {
        let _ = rows;
    }

    /// The concrete backend, for layout-specific calls (`downcast_ref::<ArrowShards>()`).
    fn as_any(&self) -> &dyn std::any::Any;
}

/// Normalises a possibly negative index against `len`.
///
/// # Errors
/// [`Error::IndexOutOfRange`].
pub fn normalize_index(index: i64, len: u64) -> Result<u64> {
    let i = if index < 0 {
        len as i128 + index as i128
    } else {
        index as i128
    };
    if i < 0 || i >= len as i128 {
        return Err(Error::IndexOutOfRange { index, len });
    }
    Ok(i as u64)
}

/// `len` rows from `start` (clamped at `n`), assembled from zero-copy pieces:
/// `piece(row)` returns the cached batch holding `row` and the row's position
/// in it. One piece is returned as is; several are concatenated.
///
/// # Errors
/// [`Error::IndexOutOfRange`] when `start > n`, or what `piece` returns.
pub(crate) fn slice_from_pieces(
    n: u64,
    start: u64,
    len: u64,
    schema: &SchemaRef,
    dir: &Path,
    mut piece: impl FnMut(u64) -> Result<(RecordBatch, usize)>,
) -> Result<RecordBatch> {
    if start > n {
        return Err(Error::IndexOutOfRange {
            index: start.min(i64::MAX as u64) as i64,
            len: n,
        });
    }
    let end = start.saturating_add(len).min(n);
    let mut parts = Vec::new();
    let mut row = start;
    while row < end {
        let (b, r) = piece(row)?;
        let k = ((b.num_rows() - r) as u64).min(end - row) as usize;
        parts.push(b.slice(r, k));
        row += k as u64;
    }
    match parts.len() {
        0 => Ok(RecordBatch::new_empty(schema.clone())),
        1 => Ok(parts.pop().expect("one part")),
        _ => arrow_select::concat::concat_batches(schema, &parts)
            .map_err(|e| Error::arrow(Some(dir), e)),
    }
}

/// Rows at `indices` (negative count from the end) of a backend that
/// reads shards in chunks of `chunk_rows` rows: each distinct chunk is
/// asked of `load` once, in first-use order, and the rows are picked from
/// them in the order asked (duplicates allowed).
///
/// # Errors
/// [`Error::IndexOutOfRange`], and `load`'s errors.
pub(crate) fn take_by_chunks(
    core: &RowsCore,
    indices: &[i64],
    chunk_rows: u64,
    load: impl FnOnce(&[(usize, u64)]) -> Result<Vec<RecordBatch>>,
) -> Result<RecordBatch> {
    if indices.is_empty() {
        return Ok(RecordBatch::new_empty(core.schema.clone()));
    }
    let (keys, picks) = chunk_picks(core, indices, chunk_rows)?;
    let chunks = load(&keys)?;
    let refs: Vec<&RecordBatch> = chunks.iter().collect();
    arrow_select::interleave::interleave_record_batch(&refs, &picks)
        .map_err(|e| Error::arrow(Some(&core.dir), e))
}

/// [`Backend::gather_fixed`] for a backend that reads chunks as
/// [`take_by_chunks`] does: each chunk loaded once, then every row's
/// values copied from it.
///
/// # Errors
/// As [`take_by_chunks`].
pub(crate) fn gather_by_chunks(
    core: &RowsCore,
    indices: &[i64],
    chunk_rows: u64,
    load: impl FnOnce(&[(usize, u64)]) -> Result<Vec<RecordBatch>>,
    slots: Option<&[usize]>,
    outs: &mut [super::gather::FixedOut<'_>],
) -> Result<bool> {
    super::gather::check_slots(indices.len(), slots)?;
    if indices.is_empty() {
        return Ok(true);
    }
    let (keys, picks) = chunk_picks(core, indices, chunk_rows)?;
    let chunks = load(&keys)?;
    super::gather::gather_from_chunks(&chunks, &picks, slots, outs)
}

/// The chunks a read needs ((shard, chunk) keys) and each row's (place of
/// its chunk in them, row in the chunk).
type ChunkPicks = (Vec<(usize, u64)>, Vec<(usize, usize)>);

/// Rows `indices` grouped by chunk of `chunk_rows` rows of a shard: the
/// chunks' (shard, chunk) keys in the order first used, and each row's
/// (place of its chunk in the keys, row in the chunk).
fn chunk_picks(core: &RowsCore, indices: &[i64], chunk_rows: u64) -> Result<ChunkPicks> {
    let n = core.len();
    let mut keys: Vec<(usize, u64)> = Vec::new();
    let mut slot_of: std::collections::HashMap<(usize, u64), usize, rustc_hash::FxBuildHasher> =
        std::collections::HashMap::default();
    let mut picks = Vec::with_capacity(indices.len());
    for &ix in indices {
        let (shard, local) = core.locate(normalize_index(ix, n)?);
        let key = (shard, local / chunk_rows);
        let slot = *slot_of.entry(key).or_insert_with(|| {
            keys.push(key);
            keys.len() - 1
        });
        picks.push((slot, (local % chunk_rows) as usize));
    }
    Ok((keys, picks))
}

/// The shard order an [`IterOptions`] asks for.
///
/// # Errors
/// [`Error::InvalidArgument`] for a shard index out of range.
pub fn shard_order(opts: &IterOptions, num_shards: usize) -> Result<Vec<usize>> {
    let mut order = match &opts.shards {
        Some(s) => {
            if let Some(bad) = s.iter().find(|&&i| i >= num_shards) {
                return Err(Error::InvalidArgument(format!(
                    "shard {bad} does not exist (the cache has {num_shards})"
                )));
            }
            s.clone()
        }
        None => (0..num_shards).collect(),
    };
    if let Some(seed) = opts.shuffle_seed {
        crate::util::SplitMix64::new(seed).shuffle(&mut order);
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_indices() {
        assert_eq!(normalize_index(-1, 5).unwrap(), 4);
        assert_eq!(normalize_index(-5, 5).unwrap(), 0);
        assert!(normalize_index(-6, 5).is_err());
        assert!(normalize_index(5, 5).is_err());
        assert!(normalize_index(0, 0).is_err());
        assert!(normalize_index(i64::MIN, 5).is_err());
    }

    #[test]
    fn shard_order_shuffles_a_permutation() {
        let o = shard_order(&IterOptions::default().with_shuffle_seed(3), 50).unwrap();
        let mut s = o.clone();
        s.sort();
        assert_eq!(s, (0..50).collect::<Vec<_>>());
        assert_ne!(o, s);
        assert!(shard_order(&IterOptions::default().with_shards(vec![9]), 3).is_err());
    }
}
