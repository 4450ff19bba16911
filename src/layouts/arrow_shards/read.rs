//! The `arrow-shards` backend: memory-mapped Arrow IPC files.
//!
//! A shard is mapped on first use and its footer parsed; each record batch is
//! decoded on first use. Uncompressed batches are zero-copy views into the
//! map and are kept; for compressed shards only the batch holding the
//! requested rows is decompressed (the reference decompresses the whole
//! shard before the first row), and decompressed batches are kept in a
//! least-recently-used cache bounded in bytes
//! ([`DEFAULT_DECOMPRESSED_CACHE_BYTES`], [`ArrowShards::with_cache_bytes`]),
//! so reading a compressed cache of any size holds at most that much. Every length and offset read from a file is checked before
//! use, so a truncated or corrupt shard is an error naming the file, never a
//! panic.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_ipc::reader::FileDecoder;
use arrow_ipc::Block;
use arrow_schema::{Schema, SchemaRef};

use crate::error::{Error, Result};
use crate::features::decode::RowDecoder;
use crate::features::Features;
use crate::layouts::arrow_shards::dedup::{cell_bytes, read_refs, refs_path, restored, CellRef};
use crate::layouts::arrow_shards::format::BUILD_ID_FOOTER_KEY;
use crate::layouts::arrow_shards::ipc::{
    block_rows, block_rows_meta, block_span, check_schema, footer_length, map_file, read_footer,
    read_footer_parts,
};
use crate::layouts::backend::{
    normalize_index, shard_order, Backend, BatchIter, IterOptions, RowsCore,
};
use crate::storage::{RangedFile, Storage, StorageRef};
use crate::value::Row;

/// Bytes of decompressed record batches an [`ArrowShards`] keeps by default
/// (compressed shards only; uncompressed batches are views into the map).
pub const DEFAULT_DECOMPRESSED_CACHE_BYTES: usize = 256 << 20;

/// Shards fetched ahead into the disk cache while one is read, during
/// iteration over a cache on object storage.
pub const PREFETCH_SHARDS: usize = 2;

/// Decompressed record batches by (shard, batch), least recently used
/// evicted first, their Arrow memory sizes summing to at most `budget`.
#[derive(Debug)]
struct BatchLru {
    budget: usize,
    used: usize,
    tick: u64,
    map: HashMap<(usize, usize), (RecordBatch, usize, u64)>,
}

impl BatchLru {
    fn new(budget: usize) -> Self {
        BatchLru {
            budget,
            used: 0,
            tick: 0,
            map: HashMap::new(),
        }
    }

    fn get(&mut self, key: (usize, usize)) -> Option<RecordBatch> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(&key).map(|(b, _, t)| {
            *t = tick;
            b.clone()
        })
    }

    /// A new budget; batches are evicted until what is kept fits it.
    fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
        self.evict_to(budget);
    }

    /// Evicts the least recently used batches until at most `limit` bytes remain.
    fn evict_to(&mut self, limit: usize) {
        while self.used > limit {
            let oldest = self
                .map
                .iter()
                .min_by_key(|(_, (_, _, t))| *t)
                .map(|(k, _)| *k)
                .expect("used > 0 means an entry");
            let (_, freed, _) = self.map.remove(&oldest).expect("present");
            self.used -= freed;
        }
    }

    /// Keeps `batch` unless it alone exceeds the budget, evicting the least
    /// recently used batches to make room.
    fn insert(&mut self, key: (usize, usize), batch: &RecordBatch) {
        let size = batch_bytes(batch);
        if size > self.budget || self.map.contains_key(&key) {
            return;
        }
        self.evict_to(self.budget - size);
        self.tick += 1;
        self.used += size;
        self.map.insert(key, (batch.clone(), size, self.tick));
    }
}

/// The bytes a decoded batch's buffers span. Not `get_array_memory_size`:
/// a buffer the IPC file stored uncompressed (arrow-rs does so when
/// compressing would not shrink it) is a slice of the whole mapped file,
/// whose capacity that would count for every batch, so a cache of a few
/// batches' worth would fill the budget.
fn batch_bytes(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0))
        .sum()
}

/// A memory-mapped `arrow-shards` cache.
#[derive(Debug, Clone)]
pub struct ArrowShards {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    core: RowsCore,
    storage: StorageRef,
    /// Shards are read by byte ranges (prefetch applies).
    storage_is_remote: bool,
    build_id: Option<String>,
    shards: Vec<ShardSlot>,
    /// Decompressed batches of compressed shards, bounded in bytes.
    lru: Mutex<BatchLru>,
    /// Every row read is checked against its stored checksum.
    verify_on_read: AtomicBool,
    /// Deduped cells to put back, for a cache that has them.
    dedup: OnceLock<DedupRead>,
}

/// What a reader of a cache with deduped cells needs: the columns that may
/// hold refs and how many refs each shard has.
#[derive(Debug, Clone)]
struct DedupRead {
    columns: Vec<usize>,
    shard_refs: Vec<u64>,
}

#[derive(Debug)]
struct ShardSlot {
    path: PathBuf,
    /// The name `_metadata.json` gives it (relative to the cache).
    name: String,
    rows: u64,
    data: OnceLock<Arc<ShardData>>,
    /// A background fetch of its batches into the disk cache was started.
    prefetching: AtomicBool,
}

/// A shard's bytes: the whole file (mapped, or in memory), or an object
/// read by byte ranges through the disk cache.
#[derive(Debug, Clone)]
enum ShardBytes {
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

struct ShardData {
    path: PathBuf,
    bytes: ShardBytes,
    decoder: FileDecoder,
    blocks: Vec<Block>,
    /// `batch_starts[j]` = first shard-local row of batch j; last = shard rows.
    batch_starts: Vec<u64>,
    /// Decoded batches of an uncompressed shard (views into `buf`); for a
    /// compressed shard only when loaded into memory, else its batches go
    /// through the backend's LRU.
    batches: Vec<OnceLock<RecordBatch>>,
    /// The shard's row checksums, read on the first checked read.
    row_sums: OnceLock<Vec<u64>>,
    /// The shard's deduped cells, read on first use.
    refs: OnceLock<Vec<CellRef>>,
    /// True when the shard's batches are compressed (decoding allocates).
    compressed: bool,
    /// This shard's position in the cache (the LRU's key).
    index: usize,
    schema: Schema,
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
    fn open(
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
        if let Some(id) = build_id {
            let found = footer
                .custom
                .iter()
                .find(|(k, _)| k == BUILD_ID_FOOTER_KEY)
                .map(|(_, v)| v.as_str());
            if found != Some(id) {
                return Err(Error::corrupt(
                    path,
                    "shard belongs to another build of this cache (it was replaced while open, or files were mixed); reopen the cache",
                ));
            }
        }
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
            batches,
            row_sums: OnceLock::new(),
            refs: OnceLock::new(),
            compressed,
            index,
            schema: footer.schema,
        })
    }

    /// Decodes every record batch and keeps it (a compressed shard's
    /// batches then bypass the LRU).
    fn make_resident(&self) -> Result<()> {
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
    fn check_rows(
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

    fn dir_and_name(&self) -> (&Path, String) {
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
    fn batch(&self, j: usize, lru: &Mutex<BatchLru>) -> Result<RecordBatch> {
        if let Some(b) = self.batches[j].get() {
            return Ok(b.clone());
        }
        if !self.compressed && !self.bytes.is_ranged() {
            let b = self.decode(j)?;
            let _ = self.batches[j].set(b);
            return Ok(self.batches[j].get().expect("just set").clone());
        }
        let key = (self.index, j);
        if let Some(b) = lru.lock().unwrap_or_else(|p| p.into_inner()).get(key) {
            return Ok(b);
        }
        let b = self.decode(j)?;
        lru.lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, &b);
        Ok(b)
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
    fn block_range(&self, j: usize) -> std::ops::Range<u64> {
        let b = &self.blocks[j];
        let start = b.offset() as u64;
        start..start + b.metaDataLength() as u64 + b.bodyLength() as u64
    }

    /// (batch index, row within batch) of a shard-local row.
    fn locate(&self, local: u64) -> (usize, usize) {
        let j = self.batch_starts.partition_point(|&s| s <= local) - 1;
        (j, (local - self.batch_starts[j]) as usize)
    }
}

impl ArrowShards {
    /// A backend over shard files in `dir` with their row counts, read
    /// through the storage `dir` lives on.
    ///
    /// `build_id`, when given, must match the footer of every shard.
    pub fn new(
        dir: &Path,
        filenames: &[String],
        row_counts: &[u64],
        features: Arc<Features>,
        decoder: RowDecoder,
        build_id: Option<String>,
    ) -> Self {
        Self::new_in(
            crate::storage::storage_for(dir),
            dir,
            filenames,
            row_counts,
            features,
            decoder,
            build_id,
        )
    }

    /// [`ArrowShards::new`] reading through `storage`.
    pub fn new_in(
        storage: StorageRef,
        dir: &Path,
        filenames: &[String],
        row_counts: &[u64],
        features: Arc<Features>,
        decoder: RowDecoder,
        build_id: Option<String>,
    ) -> Self {
        let shards = filenames
            .iter()
            .zip(row_counts)
            .map(|(f, &rows)| ShardSlot {
                path: dir.join(f),
                name: f.clone(),
                rows,
                data: OnceLock::new(),
                prefetching: AtomicBool::new(false),
            })
            .collect();
        ArrowShards {
            inner: Arc::new(Inner {
                core: RowsCore::new(
                    dir,
                    features.clone(),
                    features.arrow_schema(),
                    decoder,
                    row_counts.to_vec(),
                ),
                storage_is_remote: storage.name() != "local",
                storage,
                build_id,
                shards,
                lru: Mutex::new(BatchLru::new(DEFAULT_DECOMPRESSED_CACHE_BYTES)),
                verify_on_read: AtomicBool::new(false),
                dedup: OnceLock::new(),
            }),
        }
    }

    /// The same backend checking every row it reads against the shard's
    /// stored row checksums (`_row_xxh64/`, written with
    /// [`ArrowWriteOptions::with_record_checksums`](crate::ArrowWriteOptions::with_record_checksums)).
    /// A row whose bytes changed is an [`Error::ChecksumMismatch`] naming
    /// the row, the changed columns and the file. Clones share the setting.
    pub fn with_verify_on_read(self, yes: bool) -> Self {
        self.inner.verify_on_read.store(yes, Ordering::Relaxed);
        self
    }

    /// The same backend putting deduped cells back: `columns` (schema
    /// positions) may hold refs, `shard_refs` counts each shard's (see
    /// [`crate::layouts::arrow_shards::dedup`]). Set once.
    pub fn with_dedup(self, columns: Vec<usize>, shard_refs: Vec<u64>) -> Self {
        let _ = self.inner.dedup.set(DedupRead {
            columns,
            shard_refs,
        });
        self
    }

    /// The refs of shard `s` (empty without dedup), read and checked on first use.
    fn refs<'a>(&self, s: usize, shard: &'a ShardData) -> Result<&'a [CellRef]> {
        let Some(d) = self.inner.dedup.get() else {
            return Ok(&[]);
        };
        let expected = d.shard_refs.get(s).copied().unwrap_or(0);
        if expected == 0 {
            return Ok(&[]);
        }
        if let Some(r) = shard.refs.get() {
            return Ok(r);
        }
        let (dir, name) = shard.dir_and_name();
        let rows = *shard.batch_starts.last().expect("one entry");
        let r = read_refs(
            self.inner.storage.as_ref(),
            &refs_path(dir, &name),
            expected,
            self.inner.core.starts[s],
            rows,
            &d.columns,
        )?;
        let _ = shard.refs.set(r);
        Ok(shard.refs.get().expect("just set"))
    }

    /// Puts deduped cells back into `batch`, whose row k is shard-local row
    /// `rows[k].1` of shard `rows[k].0`: each gets the bytes of the cell it
    /// refers to (read, and checked when verify-on-read is on, as any row).
    fn restore(&self, batch: RecordBatch, rows: &[(usize, u64)]) -> Result<RecordBatch> {
        if self.inner.dedup.get().is_none() {
            return Ok(batch);
        }
        let mut per_col: std::collections::BTreeMap<usize, Vec<(usize, u64)>> =
            std::collections::BTreeMap::new();
        for (k, &(s, local)) in rows.iter().enumerate() {
            let shard = self.shard(s)?;
            let refs = self.refs(s, shard)?;
            if refs.is_empty() {
                continue;
            }
            let lo = refs.partition_point(|r| r.local < local);
            for r in refs[lo..].iter().take_while(|r| r.local == local) {
                per_col
                    .entry(r.column as usize)
                    .or_default()
                    .push((k, r.target));
            }
        }
        if per_col.is_empty() {
            return Ok(batch);
        }
        let mut cols = batch.columns().to_vec();
        for (c, list) in per_col {
            let held: Vec<(RecordBatch, usize)> = list
                .iter()
                .map(|&(_, t)| self.row_batch(t))
                .collect::<Result<_>>()?;
            let values: Vec<&[u8]> = held
                .iter()
                .map(|(b, r)| cell_bytes(b.column(c), *r))
                .collect();
            let at: Vec<usize> = list.iter().map(|&(k, _)| k).collect();
            cols[c] = restored(&cols[c], &at, &values);
        }
        RecordBatch::try_new(batch.schema(), cols)
            .map_err(|e| Error::arrow(Some(&self.inner.core.dir), e))
    }

    /// The deduped cells of shard `i` (0 without dedup), its refs file read
    /// and checked (magic, count, checksum, every ref pointing at an earlier
    /// row of a deduped column).
    ///
    /// # Errors
    /// [`Error::CorruptShard`] naming the refs file; a read error.
    pub fn dedup_refs(&self, i: usize) -> Result<usize> {
        let shard = self.shard(i)?;
        Ok(self.refs(i, shard)?.len())
    }

    /// True when deduped cells may need putting back.
    fn has_dedup(&self) -> bool {
        self.inner.dedup.get().is_some()
    }

    /// Whether every row read is checked against its checksum.
    pub fn verify_on_read(&self) -> bool {
        self.inner.verify_on_read.load(Ordering::Relaxed)
    }

    /// Bytes [`Self::load_into_memory`] would hold: an uncompressed shard's
    /// file, a compressed shard's decompressed buffers (from the IPC
    /// headers, nothing is decompressed to measure it).
    ///
    /// # Errors
    /// A read error naming the shard.
    pub fn in_memory_bytes(&self) -> Result<u64> {
        let schema = &self.inner.core.schema;
        let mut total = 0u64;
        for slot in &self.inner.shards {
            let per_column = crate::layouts::arrow_shards::ipc::shard_column_bytes(
                self.inner.storage.as_ref(),
                &slot.path,
                schema,
            )?;
            let (stored, memory) = per_column
                .iter()
                .fold((0, 0), |(a, b), (d, m)| (a + d, b + m));
            total += if stored == memory {
                self.inner
                    .storage
                    .stat(&slot.path)?
                    .map_or(stored, |e| e.len)
            } else {
                memory
            };
        }
        Ok(total)
    }

    /// Reads every shard into memory and decodes every record batch, so no
    /// read touches the files again (and a compressed shard is decompressed
    /// once). Uncompressed shards are copied into heap buffers that Arrow's
    /// batches view; compressed shards are decompressed from their map,
    /// which is then only kept for the footer. Shards already opened are
    /// decoded where they are.
    ///
    /// # Errors
    /// A read error naming the shard.
    pub fn load_into_memory(&self) -> Result<()> {
        let storage = self.inner.storage.as_ref();
        for (i, slot) in self.inner.shards.iter().enumerate() {
            if slot.data.get().is_none() {
                // A remote shard is fetched whole: it is all read anyway.
                let bytes = ShardBytes::Whole(map_file(storage, &slot.path)?);
                let mut d = ShardData::open(
                    bytes,
                    &slot.path,
                    i,
                    &self.inner.core.schema,
                    slot.rows,
                    self.inner.build_id.as_deref(),
                )?;
                if let (false, ShardBytes::Whole(buf)) = (d.compressed, &d.bytes) {
                    // Nothing is decoded yet: the blocks are offsets, so
                    // the map can be swapped for a heap copy of it.
                    let mut m = arrow_buffer::MutableBuffer::from_len_zeroed(buf.len());
                    m.as_slice_mut().copy_from_slice(buf.as_slice());
                    d.bytes = ShardBytes::Whole(m.into());
                }
                let _ = slot.data.set(Arc::new(d));
            }
            slot.data.get().expect("set above").make_resident()?;
        }
        Ok(())
    }

    /// Checks rows of batch `j` of shard `s` when verify-on-read is on.
    fn check(
        &self,
        s: usize,
        shard: &ShardData,
        j: usize,
        batch: &RecordBatch,
        rows: impl IntoIterator<Item = usize>,
    ) -> Result<()> {
        if !self.verify_on_read() {
            return Ok(());
        }
        let first = self.inner.core.starts[s];
        shard.check_rows(self.inner.storage.as_ref(), first, j, batch, rows)
    }

    /// The same backend keeping at most `bytes` of decompressed record
    /// batches (compressed shards; default [`DEFAULT_DECOMPRESSED_CACHE_BYTES`]).
    /// 0 keeps none: every read decompresses its batch again. Clones share
    /// one cache, so they share its budget too.
    pub fn with_cache_bytes(self, bytes: usize) -> Self {
        self.inner
            .lru
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .set_budget(bytes);
        self
    }

    /// The byte budget of decompressed batches.
    pub fn cache_bytes(&self) -> usize {
        self.inner
            .lru
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .budget
    }

    /// Bytes of decompressed batches held now (at most [`Self::cache_bytes`]).
    pub fn cached_bytes(&self) -> usize {
        self.inner
            .lru
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .used
    }

    /// Paths of the shard files.
    pub fn shard_paths(&self) -> Vec<PathBuf> {
        self.inner.shards.iter().map(|s| s.path.clone()).collect()
    }

    fn shard(&self, i: usize) -> Result<&Arc<ShardData>> {
        let slot = &self.inner.shards[i];
        if let Some(d) = slot.data.get() {
            return Ok(d);
        }
        let d = ShardData::open(
            self.shard_bytes(&slot.path)?,
            &slot.path,
            i,
            &self.inner.core.schema,
            slot.rows,
            self.inner.build_id.as_deref(),
        )?;
        let _ = slot.data.set(Arc::new(d));
        Ok(slot.data.get().expect("just set"))
    }

    /// A shard's bytes: mapped locally, by ranges from an object store.
    fn shard_bytes(&self, path: &Path) -> Result<ShardBytes> {
        let storage = self.inner.storage.as_ref();
        let ranged = storage.ranged(path).map_err(|e| match e {
            Error::Io { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Error::MissingShard {
                    path: path.to_path_buf(),
                }
            }
            e => e,
        })?;
        Ok(match ranged {
            Some(r) => ShardBytes::Ranged(r),
            None => ShardBytes::Whole(map_file(storage, path)?),
        })
    }

    /// True when the shards are read by byte ranges (an object store).
    pub fn is_remote(&self) -> bool {
        self.inner.storage_is_remote
    }

    /// Starts fetching shard `s`'s batches into the disk cache on a thread
    /// of its own (remote shards only, once per shard); a failure is left
    /// for the read that needs the batch to report.
    fn prefetch(&self, s: usize) {
        let Some(slot) = self.inner.shards.get(s) else {
            return;
        };
        if !self.inner.storage_is_remote || slot.prefetching.swap(true, Ordering::Relaxed) {
            return;
        }
        let this = self.clone();
        let spawned = std::thread::Builder::new()
            .name("shardset-prefetch".into())
            .spawn(move || {
                let Ok(d) = this.shard(s) else { return };
                if let ShardBytes::Ranged(r) = &d.bytes {
                    // The batches not on disk yet, a few requests at a
                    // time (what is fetched is held until it is written).
                    let todo: Vec<_> = (0..d.blocks.len())
                        .map(|j| d.block_range(j))
                        .filter(|range| !r.is_cached(range))
                        .collect();
                    for chunk in todo.chunks(crate::storage::PREFETCH_RANGES) {
                        if r.read_ranges(chunk).is_err() {
                            return;
                        }
                    }
                }
            });
        if spawned.is_err() {
            slot.prefetching.store(false, Ordering::Relaxed);
        }
    }

    /// (shard, local row) of a global row (`row < len`).
    fn locate(&self, row: u64) -> (usize, u64) {
        self.inner.core.locate(row)
    }

    /// The Arrow schema stored in a shard's footer (opens it).
    ///
    /// # Errors
    /// A read error naming the shard.
    pub fn shard_file_schema(&self, i: usize) -> Result<Schema> {
        Ok(self.shard(i)?.schema.clone())
    }

    /// Number of IPC record batches in a shard (opens it).
    ///
    /// # Errors
    /// A read error naming the shard.
    pub fn shard_num_batches(&self, i: usize) -> Result<usize> {
        Ok(self.shard(i)?.blocks.len())
    }

    /// Shard-local row ranges `[start, end)` of a shard's record batches (opens it).
    ///
    /// # Errors
    /// A read error naming the shard.
    pub fn batch_row_ranges(&self, shard: usize) -> Result<Vec<(u64, u64)>> {
        let d = self.shard(shard)?;
        Ok(d.batch_starts.windows(2).map(|w| (w[0], w[1])).collect())
    }

    /// One record batch of a shard.
    ///
    /// # Errors
    /// A read error naming the shard.
    pub fn read_batch(&self, shard: usize, batch: usize) -> Result<RecordBatch> {
        let d = self.shard(shard)?;
        if batch >= d.blocks.len() {
            return Err(Error::InvalidArgument(format!(
                "shard {shard} has {} batches",
                d.blocks.len()
            )));
        }
        d.batch(batch, &self.inner.lru)
    }

    /// The batch holding `row` and the row's place in it, the row checked
    /// when verify-on-read is on.
    fn row_batch(&self, row: u64) -> Result<(RecordBatch, usize)> {
        self.row_batch_checking(row, 1)
    }

    /// The batch holding `row` and the row's place in it, the rows from
    /// `row` up to `count` of them within that batch checked when
    /// verify-on-read is on.
    fn row_batch_checking(&self, row: u64, count: u64) -> Result<(RecordBatch, usize)> {
        let (s, local) = self.locate(row);
        let shard = self.shard(s)?;
        let (j, r) = shard.locate(local);
        let batch = shard.batch(j, &self.inner.lru)?;
        let end = (r + count as usize).min(batch.num_rows());
        self.check(s, shard, j, &batch, r..end)?;
        Ok((batch, r))
    }
}

impl Backend for ArrowShards {
    fn layout(&self) -> &'static str {
        crate::cache::metadata::LAYOUT_ARROW_SHARDS
    }

    fn core(&self) -> &RowsCore {
        &self.inner.core
    }

    fn get_raw(&self, index: i64) -> Result<RecordBatch> {
        let row = normalize_index(index, self.len())?;
        let (batch, r) = self.row_batch(row)?;
        self.restore(batch.slice(r, 1), &[self.locate(row)])
    }

    fn get(&self, index: i64) -> Result<Row> {
        self.get_with(index, &self.inner.core.decoder)
    }

    fn get_with(&self, index: i64, decoder: &RowDecoder) -> Result<Row> {
        if self.has_dedup() {
            return decoder.decode_row(&self.get_raw(index)?, 0);
        }
        let row = normalize_index(index, self.len())?;
        let (batch, r) = self.row_batch(row)?;
        decoder.decode_row(&batch, r)
    }

    fn take(&self, indices: &[i64]) -> Result<RecordBatch> {
        let n = self.len();
        if indices.is_empty() {
            return Ok(RecordBatch::new_empty(self.schema()));
        }
        // Group lookups: consecutive indices usually hit the same batch.
        let mut batches: Vec<RecordBatch> = Vec::new();
        let mut ids: Vec<(usize, u64, usize)> = Vec::new(); // (shard, batch j, slot in `batches`)
        let mut picks: Vec<(usize, usize)> = Vec::with_capacity(indices.len());
        let mut locs: Vec<(usize, u64)> = Vec::new();
        for &ix in indices {
            let row = normalize_index(ix, n)?;
            let (s, local) = self.locate(row);
            if self.has_dedup() {
                locs.push((s, local));
            }
            let shard = self.shard(s)?;
            let (j, r) = shard.locate(local);
            let slot = match ids.iter().rev().find(|(a, b, _)| *a == s && *b == j as u64) {
                Some(&(_, _, k)) => k,
                None => {
                    batches.push(shard.batch(j, &self.inner.lru)?);
                    ids.push((s, j as u64, batches.len() - 1));
                    batches.len() - 1
                }
            };
            self.check(s, shard, j, &batches[slot], [r])?;
            picks.push((slot, r));
        }
        if batches.len() == 1 {
            let (first, last) = (picks[0].1, picks[picks.len() - 1].1);
            let contiguous = last >= first
                && last - first + 1 == picks.len()
                && picks.windows(2).all(|w| w[1].1 == w[0].1 + 1);
            if contiguous {
                return self.restore(batches[0].slice(first, picks.len()), &locs);
            }
        }
        let refs: Vec<&RecordBatch> = batches.iter().collect();
        let out = arrow_select::interleave::interleave_record_batch(&refs, &picks)
            .map_err(|e| Error::arrow(Some(&self.inner.core.dir), e))?;
        self.restore(out, &locs)
    }

    fn slice(&self, start: u64, len: u64) -> Result<RecordBatch> {
        if self.has_dedup() && start < self.len() {
            // Rows by index, so each deduped cell is put back.
            let end = start.saturating_add(len).min(self.len());
            let idx: Vec<i64> = (start..end).map(|i| i as i64).collect();
            return self.take(&idx);
        }
        let end = start.saturating_add(len);
        crate::layouts::backend::slice_from_pieces(
            self.len(),
            start,
            len,
            &self.schema(),
            &self.inner.core.dir,
            // Each piece runs from `row` to its batch's end or the slice's.
            |row| self.row_batch_checking(row, end - row),
        )
    }

    fn iter_batches(&self, opts: &IterOptions) -> Result<BatchIter<'_>> {
        let order = shard_order(opts, self.num_shards())?;
        let this = self.clone();
        let ahead = order.clone();
        let iter = order.into_iter().enumerate().flat_map(move |(k, s)| {
            let this = this.clone();
            // Remote shards: the next ones in this order are fetched into
            // the disk cache while this one is read.
            for &next in ahead.iter().skip(k + 1).take(PREFETCH_SHARDS) {
                this.prefetch(next);
            }
            let nb = match this.shard(s) {
                Ok(d) => d.blocks.len(),
                Err(e) => return Box::new(std::iter::once(Err(e))) as BatchIter<'static>,
            };
            Box::new((0..nb).map(move |j| {
                let d = this.shard(s)?;
                let batch = d.batch(j, &this.inner.lru)?;
                this.check(s, d, j, &batch, 0..batch.num_rows())?;
                if !this.has_dedup() || this.refs(s, d)?.is_empty() {
                    return Ok(batch);
                }
                let (a, b) = (d.batch_starts[j], d.batch_starts[j + 1]);
                let locs: Vec<(usize, u64)> = (a..b).map(|l| (s, l)).collect();
                this.restore(batch, &locs)
            }))
        });
        Ok(Box::new(iter))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn reads_remotely(&self) -> bool {
        self.inner.storage_is_remote
    }

    fn prefetch_rows(&self, rows: &[u64]) {
        if !self.inner.storage_is_remote {
            return;
        }
        let n = self.len();
        let mut seen = std::collections::BTreeSet::new();
        for &r in rows.iter().filter(|&&r| r < n) {
            seen.insert(self.locate(r).0);
        }
        for s in seen {
            self.prefetch(s);
        }
    }

    fn reopened(&self) -> Box<dyn Backend> {
        let i = &self.inner;
        let names: Vec<String> = i.shards.iter().map(|s| s.name.clone()).collect();
        let fresh = ArrowShards::new(
            &i.core.dir,
            &names,
            &i.core.row_counts,
            i.core.features.clone(),
            i.core.decoder.clone(),
            i.build_id.clone(),
        )
        .with_cache_bytes(self.cache_bytes())
        .with_verify_on_read(self.verify_on_read());
        let fresh = match i.dedup.get() {
            Some(d) => fresh.with_dedup(d.columns.clone(), d.shard_refs.clone()),
            None => fresh,
        };
        // A copy of a cache held in memory is mapped: loading it again in
        // every worker would multiply the memory the guard allowed once.
        Box::new(fresh)
    }
}
