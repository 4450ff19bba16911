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

mod backend;
mod gather;
pub(crate) mod lru;
mod restore;
mod shard;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use arrow_array::RecordBatch;
use arrow_schema::Schema;

use crate::error::{Error, Result};
use crate::features::decode::RowDecoder;
use crate::features::Features;
use crate::layouts::arrow_shards::format::BUILD_ID_FOOTER_KEY;
use crate::layouts::arrow_shards::ipc::map_file;
use crate::layouts::backend::RowsCore;
use crate::storage::StorageRef;

use lru::BatchLru;
use restore::DedupRead;
use shard::{ShardBytes, ShardData};

/// Bytes of decompressed record batches an [`ArrowShards`] keeps by default
/// (compressed shards only; uncompressed batches are views into the map).
pub const DEFAULT_DECOMPRESSED_CACHE_BYTES: usize = 256 << 20;

/// Shards fetched ahead into the disk cache while one is read, during
/// iteration over a cache on object storage.
pub const PREFETCH_SHARDS: usize = 2;

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

/// Checks that a shard's footer names the build the cache records (when it
/// records one): a shard of another build was replaced while the cache was
/// open, or files of two builds were mixed.
fn check_build_id(path: &Path, custom: &[(String, String)], build_id: Option<&str>) -> Result<()> {
    if let Some(id) = build_id {
        let found = custom
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
    Ok(())
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
