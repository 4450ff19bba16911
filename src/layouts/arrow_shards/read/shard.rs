//! One shard file: its bytes (mapped, in memory, or byte ranges of an
//! object), its footer and batch headers parsed and checked on open, and
//! its record batches decoded on demand and checked against the shard's
//! row checksums.

use std::borrow::Cow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_ipc::reader::FileDecoder;
use arrow_ipc::Block;
use arrow_schema::{Schema, SchemaRef};

use crate::error::{Error, Result};
use crate::layouts::arrow_shards::dedup::CellRef;
use crate::layouts::arrow_shards::ipc::{
    block_rows, block_rows_meta, block_span, check_schema, footer_length, read_footer,
    read_footer_parts,
};
use crate::storage::{RangedFile, Storage};

use super::check_build_id;
use super::lru::BatchLru;

/// A shard's bytes: the whole file (mapped, or in memory), or an object
/// read by byte ranges through the disk cache.
#[derive(Debug, Clone)]
pub(super) enum ShardBytes {
    Whole(Buffer),
    Ranged(Arc<dyn RangedFile>),
}

/// Bytes of a remote shard's end fetched with the first request: the
/// footer and its length, in one range for any footer up to this size (a
/// footer is the schema and 24 bytes a record batch: a few KiB).
const TAIL_GUESS: u64 = 8 << 10;

impl ShardBytes {
    fn len(&self) -> u64 {
        match self {
            ShardBytes::Whole(b) => b.len() as u64,
            ShardBytes::Ranged(r) => r.len(),
        }
    }

    /// The bytes `start..start + len` (checked against the file's length
    /// by the caller).
    fn slice(&self, start: usize, len: usize) -> Result<Buffer> {
        match self {
            ShardBytes::Whole(b) => Ok(b.slice_with_length(start, len)),
            ShardBytes::Ranged(r) => Ok(Buffer::from(
                r.read_range(start as u64..(start + len) as u64)?,
            )),
        }
    }

    fn is_ranged(&self) -> bool {
        matches!(self, ShardBytes::Ranged(_))
    }
}

/// A shard's table of one number column (filled by the gather): each
/// record batch's value buffer, or None when a batch has nulls or other
/// values.
pub(super) type FixedTable = OnceLock<Option<Vec<Buffer>>>;

pub(super) struct ShardData {
    path: PathBuf,
    pub(super) bytes: ShardBytes,
    decoder: FileDecoder,
    pub(super) blocks: Vec<Block>,
    /// `batch_starts[j]` = first shard-local row of batch j; last = shard rows.
    pub(super) batch_starts: Vec<u64>,
    /// The rows of every batch but the last (which has at most as many),
    /// when they are all equal, so a row's batch is a division; else 0.
    uniform: u64,
    /// Decoded batches of an uncompressed shard (views into `buf`); for a
    /// compressed shard only when loaded into memory, else its batches go
    /// through the backend's LRU.
    batches: Vec<OnceLock<RecordBatch>>,
    /// The shard's row checksums, read on the first checked read.
    row_sums: OnceLock<Vec<u64>>,
    /// The shard's deduped cells, read on first use.
    pub(super) refs: OnceLock<Vec<CellRef>>,
    /// True when the shard's batches are compressed (decoding allocates).
    pub(super) compressed: bool,
    /// Tables of a number column's values in every record batch, one a
    /// column of the schema, made on a gather's first use (None: a batch
    /// has nulls or other values). Read without a lock: the gather's
    /// threads share them, and a lock or a reference count taken per batch
    /// makes the cores trade its cache line.
    pub(super) fixed: Vec<FixedTable>,
    /// This shard's position in the cache (the LRU's key).
    index: usize,
    pub(super) schema: Schema,
}

impl std::fmt::Debug for ShardData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardData")
            .field("path", &self.path)
            .field("bytes", &self.bytes.len())
            .field("batches", &self.blocks.len())
            .finish()
    }
}

impl ShardData {
    /// Parses a shard's footer and its batches' headers: from the whole
    /// file (mapped, or read into memory), or from byte ranges of a remote
    /// object (its first bytes, its end, and each batch's header).
    pub(super) fn open(
        bytes: ShardBytes,
        path: &Path,
        index: usize,
        expected: &SchemaRef,
        rows: u64,
        build_id: Option<&str>,
    ) -> Result<Self> {
        let footer = match &bytes {
            ShardBytes::Whole(buf) => read_footer(path, buf)?,
            ShardBytes::Ranged(r) => {
                let n = r.len();
                if n < 18 {
                    return Err(Error::corrupt(
                        path,
                        format!("{n} bytes is too short for an Arrow IPC file"),
                    ));
                }
                let head = r.read_range(0..8)?;
                let mut tail = r.read_range(n - TAIL_GUESS.min(n - 8)..n)?;
                let footer_len = footer_length(path, &tail, n as usize)? as u64;
                if footer_len + 10 > tail.len() as u64 {
                    tail = r.read_range(n - footer_len - 10..n)?;
                }
                read_footer_parts(path, &head, &tail, n as usize)?
            }
        };
        check_schema(path, &footer.schema, expected)?;
        check_build_id(path, &footer.custom, build_id)?;
        let mut batch_starts = Vec::with_capacity(footer.blocks.len() + 1);
        let mut acc = 0u64;
        let mut compressed = false;
        batch_starts.push(0);
        // A remote shard's batch headers, fetched concurrently.
        let headers = match &bytes {
            ShardBytes::Whole(_) => Vec::new(),
            ShardBytes::Ranged(r) => {
                let spans = footer
                    .blocks
                    .iter()
                    .map(|b| block_span(path, b, r.len() as usize))
                    .collect::<Result<Vec<_>>>()?;
                let ranges: Vec<_> = spans
                    .iter()
                    .map(|&(start, meta_len, _)| start as u64..(start + meta_len) as u64)
                    .collect();
                let metas = r.read_ranges(&ranges)?;
                spans
                    .into_iter()
                    .map(|(_, _, body)| body)
                    .zip(metas)
                    .collect()
            }
        };
        for (j, b) in footer.blocks.iter().enumerate() {
            let (n, c) = match &bytes {
                ShardBytes::Whole(buf) => block_rows(path, buf, b, buf.len(), expected)?,
                ShardBytes::Ranged(_) => {
                    let (body_len, meta) = &headers[j];
                    block_rows_meta(path, meta, *body_len, expected)?
                }
            };
            acc += n;
            compressed |= c;
            batch_starts.push(acc);
        }
        if acc != rows {
            return Err(Error::corrupt(
                path,
                format!("shard holds {acc} rows, metadata records {rows}"),
            ));
        }
        let uniform = uniform_rows(&batch_starts);
        // Decode with the features' schema so every batch of every shard
        // shares one SchemaRef (the file's was checked equal above).
        let decoder = FileDecoder::new(expected.clone(), footer.version);
        let batches = (0..footer.blocks.len()).map(|_| OnceLock::new()).collect();
        Ok(ShardData {
            path: path.to_path_buf(),
            bytes,
            decoder,
            blocks: footer.blocks,
            batch_starts,
            uniform,
            batches,
            row_sums: OnceLock::new(),
            refs: OnceLock::new(),
            compressed,
            fixed: expected.fields().iter().map(|_| OnceLock::new()).collect(),
            index,
            schema: footer.schema,
        })
    }

    /// Decodes every record batch and keeps it (a compressed shard's
    /// batches then bypass the LRU).
    pub(super) fn make_resident(&self) -> Result<()> {
        for j in 0..self.blocks.len() {
            if self.batches[j].get().is_none() {
                let b = self.decode(j)?;
                let _ = self.batches[j].set(b);
            }
        }
        Ok(())
    }

    /// Checks rows `rows` (batch-local) of batch `j` against the shard's
    /// stored row checksums; `first` is the shard's first row in the cache.
    ///
    /// # Errors
    /// [`Error::ChecksumMismatch`] naming the row, the changed columns and
    /// the file; [`Error::Io`] / [`Error::CorruptShard`] for a missing or
    /// damaged checksum file.
    pub(super) fn check_rows(
        &self,
        storage: &dyn Storage,
        first: u64,
        j: usize,
        batch: &RecordBatch,
        rows: impl IntoIterator<Item = usize>,
    ) -> Result<()> {
        let sums = match self.row_sums.get() {
            Some(s) => s,
            None => {
                let (dir, name) = self.dir_and_name();
                let s = crate::cache::rowsum::read_sidecar(storage, dir, &name)?;
                if s.len() as u64 != *self.batch_starts.last().expect("one entry") {
                    return Err(Error::corrupt(
                        crate::cache::rowsum::sidecar(dir, &name),
                        format!(
                            "{} row checksums for a shard of {} rows",
                            s.len(),
                            self.batch_starts.last().expect("one entry")
                        ),
                    ));
                }
                let _ = self.row_sums.set(s);
                self.row_sums.get().expect("just set")
            }
        };
        let start = self.batch_starts[j];
        for r in rows {
            let local = start + r as u64;
            if crate::cache::rowsum::row_hash(batch, r) != sums[local as usize] {
                return Err(Error::ChecksumMismatch {
                    path: self.path.clone(),
                    row: first + local,
                    local,
                    columns: self.changed_columns(storage, j, batch),
                });
            }
        }
        Ok(())
    }

    /// The columns of batch `j` whose checksum differs from the stored one
    /// (empty when the cache has no column checksums).
    fn changed_columns(&self, storage: &dyn Storage, j: usize, batch: &RecordBatch) -> Vec<String> {
        let (dir, name) = self.dir_and_name();
        let path = crate::cache::rowsum::column_sidecar(dir, &name);
        let Ok(stored) = crate::cache::rowsum::read_sums(storage, &path) else {
            return Vec::new();
        };
        let n = batch.num_columns();
        if stored.len() != n * self.blocks.len() {
            return Vec::new();
        }
        let now = crate::cache::rowsum::column_hashes(batch);
        batch
            .schema()
            .fields()
            .iter()
            .enumerate()
            .filter(|(c, _)| stored[j * n + c] != now[*c])
            .map(|(_, f)| f.name().clone())
            .collect()
    }

    pub(super) fn dir_and_name(&self) -> (&Path, String) {
        (
            self.path.parent().unwrap_or(Path::new(".")),
            self.path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        )
    }

    /// Record batch `j`: kept (a view) for an uncompressed shard, through
    /// the backend's bounded LRU for a compressed one.
    pub(super) fn batch(&self, j: usize, lru: &Mutex<BatchLru>) -> Result<RecordBatch> {
        self.batch_cow(j, lru).map(Cow::into_owned)
    }

    /// As [`Self::batch`], borrowed where the shard keeps it (uncompressed
    /// and local, or loaded into memory): a take of random rows touches
    /// hundreds of batches, and each clone would touch counts shared by
    /// every thread reading the shard.
    pub(super) fn batch_cow(
        &self,
        j: usize,
        lru: &Mutex<BatchLru>,
    ) -> Result<Cow<'_, RecordBatch>> {
        if let Some(b) = self.kept(j)? {
            return Ok(Cow::Borrowed(b));
        }
        let key = (self.index, j);
        if let Some(b) = lru.lock().unwrap_or_else(|p| p.into_inner()).get(key) {
            return Ok(Cow::Owned(b));
        }
        let b = self.decode(j)?;
        lru.lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, &b);
        Ok(Cow::Owned(b))
    }

    /// Record batch `j` where the shard keeps it (uncompressed and local,
    /// decoded here on first use; or loaded into memory); None where it
    /// goes through the LRU.
    pub(super) fn kept(&self, j: usize) -> Result<Option<&RecordBatch>> {
        if let Some(b) = self.batches[j].get() {
            return Ok(Some(b));
        }
        if self.compressed || self.bytes.is_ranged() {
            return Ok(None);
        }
        let b = self.decode(j)?;
        let _ = self.batches[j].set(b);
        Ok(self.batches[j].get())
    }

    fn decode(&self, j: usize) -> Result<RecordBatch> {
        let block = &self.blocks[j];
        let len = block.metaDataLength() as usize + block.bodyLength() as usize;
        let data = self.bytes.slice(block.offset() as usize, len)?;
        let batch = catch_unwind(AssertUnwindSafe(|| {
            self.decoder.read_record_batch(block, &data)
        }))
        .map_err(|_| Error::corrupt(&self.path, format!("record batch {j} is malformed")))?
        .map_err(|e| Error::corrupt(&self.path, format!("record batch {j}: {e}")))?
        .ok_or_else(|| Error::corrupt(&self.path, format!("record batch {j} is empty")))?;
        let want = (self.batch_starts[j + 1] - self.batch_starts[j]) as usize;
        if batch.num_rows() != want {
            return Err(Error::corrupt(
                &self.path,
                format!(
                    "record batch {j} has {} rows, its header says {want}",
                    batch.num_rows()
                ),
            ));
        }
        Ok(batch)
    }

    /// The byte range of batch `j` (what [`ShardData::decode`] reads).
    pub(super) fn block_range(&self, j: usize) -> std::ops::Range<u64> {
        let b = &self.blocks[j];
        let start = b.offset() as u64;
        start..start + b.metaDataLength() as u64 + b.bodyLength() as u64
    }

    /// (batch index, row within batch) of a shard-local row (`< rows`).
    pub(super) fn locate(&self, local: u64) -> (usize, usize) {
        if let Some(j) = local.checked_div(self.uniform) {
            return (j as usize, (local - j * self.uniform) as usize);
        }
        let j = self.batch_starts.partition_point(|&s| s <= local) - 1;
        (j, (local - self.batch_starts[j]) as usize)
    }
}

/// The rows of each batch when every batch but the last has the same
/// number and the last no more; 0 otherwise (or with no rows).
fn uniform_rows(starts: &[u64]) -> u64 {
    let Some(&first) = starts.get(1) else {
        return 0;
    };
    let n = starts.len() - 1;
    let even =
        starts[..n].windows(2).all(|w| w[1] - w[0] == first) && starts[n] - starts[n - 1] <= first;
    if even {
        first
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::uniform_rows;

    #[test]
    fn batches_of_equal_rows_and_a_shorter_last_are_uniform() {
        assert_eq!(uniform_rows(&[0, 4, 8, 10]), 4);
        assert_eq!(uniform_rows(&[0, 4, 8, 12]), 4);
        assert_eq!(uniform_rows(&[0, 7]), 7);
    }

    #[test]
    fn uneven_batches_a_longer_last_and_no_rows_are_not() {
        assert_eq!(uniform_rows(&[0, 4, 7, 10]), 0);
        assert_eq!(uniform_rows(&[0, 4, 8, 13]), 0);
        assert_eq!(uniform_rows(&[0]), 0);
        assert_eq!(uniform_rows(&[0, 0, 0]), 0);
    }
}
