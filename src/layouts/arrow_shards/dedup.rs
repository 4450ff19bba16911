//! Dedup of large repeated cells in `arrow-shards` caches.
//!
//! With [`ArrowWriteOptions::with_dedup`](crate::ArrowWriteOptions::with_dedup),
//! the writer keys every binary cell (images, arrays, `binary` values) of at
//! least the threshold's size by the xxh3-128 hash of its bytes. The first
//! occurrence of a value is stored as it is; each later one is stored as an
//! empty value, and the shard's `_dedup/<shard>.refs` file records its row,
//! column and the row of the first occurrence. Readers put the first
//! occurrence's bytes back, so every read returns the bytes written.
//!
//! A cache in which nothing repeated has no refs file and no `dedup` key: it
//! is the very cache a write without dedup makes, which the reference reads.
//! A cache with refs records `dedup` in its metadata and sets
//! `cache_format_version` to 2 with `requires: ["dedup"]`, so the reference
//! (which reads version 1 only) refuses it rather than return empty cells.
//!
//! A refs file: `SSREFS01`, the count (u64 LE), then per ref the shard-local
//! row (u64), the column (u32), 4 zero bytes and the cache row of the first
//! occurrence (u64), sorted by row then column; last, the xxh64 of all the
//! bytes before it (u64 LE).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, GenericBinaryArray, OffsetSizeTrait, RecordBatch};
use arrow_buffer::{Buffer, OffsetBuffer};
use arrow_schema::DataType;

use crate::error::{Error, Result};
use crate::storage::Storage;

/// The folder of refs files inside a cache.
pub const DEDUP_DIR: &str = "_dedup";

/// The `requires` entry of a cache with deduped cells.
pub const DEDUP_REQUIREMENT: &str = "dedup";

/// The threshold [`ArrowWriteOptions::with_dedup`](crate::ArrowWriteOptions::with_dedup)
/// users usually want: cells of 4 KiB and more.
pub const DEFAULT_DEDUP_THRESHOLD: u64 = 4096;

const MAGIC: &[u8; 8] = b"SSREFS01";
const ENTRY: usize = 24;

/// The refs file of a shard.
pub fn refs_path(dir: &Path, shard: &str) -> PathBuf {
    crate::cache::rowsum::beside(dir, shard, DEDUP_DIR, "refs")
}

/// One deduped cell: its shard-local row, its column, and the cache row
/// holding its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct CellRef {
    /// Shard-local row of the deduped cell.
    pub local: u64,
    /// Its column (position in the schema).
    pub column: u32,
    /// The cache row whose cell in the same column holds the bytes.
    pub target: u64,
}

/// The columns dedup applies to: top-level binary ones.
pub fn eligible_columns(schema: &arrow_schema::Schema) -> Vec<usize> {
    schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| matches!(f.data_type(), DataType::LargeBinary | DataType::Binary))
        .map(|(i, _)| i)
        .collect()
}

/// Encodes refs (sorted) into a refs file's bytes.
pub fn encode_refs(refs: &[CellRef]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + refs.len() * ENTRY + 8);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(refs.len() as u64).to_le_bytes());
    for r in refs {
        out.extend_from_slice(&r.local.to_le_bytes());
        out.extend_from_slice(&r.column.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&r.target.to_le_bytes());
    }
    let sum = xxhash_rust::xxh64::xxh64(&out, 0);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// A refs file's bytes, once its magic, count (`expected`), length and
/// checksum are right.
fn intact_refs(storage: &dyn Storage, path: &Path, expected: u64) -> Result<Vec<u8>> {
    let bytes = storage.read(path)?;
    let bad = |why: String| Error::corrupt(path, why);
    if bytes.len() < 24 || &bytes[..8] != MAGIC {
        return Err(bad("not a refs file (bad magic or too short)".into()));
    }
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let n = u64_at(8);
    let len = n.checked_mul(ENTRY as u64).and_then(|b| b.checked_add(24));
    if n != expected || len != Some(bytes.len() as u64) {
        return Err(bad(format!(
            "{} bytes for {n} refs; the metadata records {expected}",
            bytes.len()
        )));
    }
    let body = bytes.len() - 8;
    if xxhash_rust::xxh64::xxh64(&bytes[..body], 0) != u64_at(body) {
        return Err(bad("checksum mismatch: the refs file changed".into()));
    }
    Ok(bytes)
}

/// Whether the refs file at `path` is intact and holds `expected` refs
/// (what a resumed build asks of a committed shard's).
pub(crate) fn refs_intact(storage: &dyn Storage, path: &Path, expected: u64) -> bool {
    intact_refs(storage, path, expected).is_ok()
}

/// Reads and checks a shard's refs file: magic, length, checksum, order,
/// and that every ref points at an earlier row (`first` is the shard's
/// first cache row) of a deduped column.
///
/// # Errors
/// [`Error::CorruptShard`] naming the file and what is wrong; [`Error::Io`].
pub fn read_refs(
    storage: &dyn Storage,
    path: &Path,
    expected: u64,
    first: u64,
    shard_rows: u64,
    columns: &[usize],
) -> Result<Vec<CellRef>> {
    let bytes = intact_refs(storage, path, expected)?;
    let bad = |why: String| Error::corrupt(path, why);
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let n = expected;
    let mut out = Vec::with_capacity(n as usize);
    for k in 0..n as usize {
        let at = 16 + k * ENTRY;
        let r = CellRef {
            local: u64_at(at),
            column: u32::from_le_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes")),
            target: u64_at(at + 16),
        };
        if r.local >= shard_rows
            || !columns.contains(&(r.column as usize))
            || r.target >= first + r.local
            || out
                .last()
                .is_some_and(|p: &CellRef| (p.local, p.column) >= (r.local, r.column))
        {
            return Err(bad(format!("ref {k} ({r:?}) is out of place")));
        }
        out.push(r);
    }
    Ok(out)
}

/// The writer's side: first occurrences by content, and the refs of the
/// shard being written.
#[derive(Debug)]
pub struct Deduper {
    threshold: u64,
    columns: Vec<usize>,
    seen: HashMap<(usize, u128, u64), u64>,
    /// Refs of the open shard.
    pub(crate) shard_refs: Vec<CellRef>,
    /// Cells deduped so far.
    pub(crate) cells: u64,
    /// Bytes not stored because of them.
    pub(crate) bytes_saved: u64,
}

impl Deduper {
    /// Dedup of cells of at least `threshold` bytes in `columns`.
    pub fn new(threshold: u64, columns: Vec<usize>) -> Self {
        Deduper {
            threshold,
            columns,
            seen: HashMap::new(),
            shard_refs: Vec::new(),
            cells: 0,
            bytes_saved: 0,
        }
    }

    /// The batch as stored: each cell whose bytes were seen before becomes
    /// empty and gets a ref. `first_row` is the batch's first cache row,
    /// `first_local` its first row in the open shard.
    ///
    /// # Errors
    /// [`Error::Arrow`] if the rebuilt column is rejected (an internal error).
    pub fn apply(
        &mut self,
        batch: &RecordBatch,
        first_row: u64,
        first_local: u64,
    ) -> Result<RecordBatch> {
        let mut cols: Vec<ArrayRef> = batch.columns().to_vec();
        let mut changed = false;
        let mut refs = Vec::new();
        for c in self.columns.clone() {
            let col = cols[c].clone();
            let found = match col.data_type() {
                DataType::Binary => {
                    self.scan(col.as_binary::<i32>(), c, first_row, first_local, &mut refs)
                }
                _ => self.scan(col.as_binary::<i64>(), c, first_row, first_local, &mut refs),
            };
            if let Some(dup) = found {
                let empty: Vec<&[u8]> = vec![&[]; dup.len()];
                cols[c] = restored(&col, &dup, &empty);
                changed = true;
            }
        }
        refs.sort();
        self.shard_refs.extend(refs);
        if !changed {
            return Ok(batch.clone());
        }
        RecordBatch::try_new(batch.schema(), cols).map_err(|e| Error::arrow(None, e))
    }
}

impl Deduper {
    /// The rows of column `c` whose bytes were seen before (refs pushed),
    /// in order; `None` when there is none.
    fn scan<O: OffsetSizeTrait>(
        &mut self,
        a: &GenericBinaryArray<O>,
        c: usize,
        first_row: u64,
        first_local: u64,
        refs: &mut Vec<CellRef>,
    ) -> Option<Vec<usize>> {
        let mut dup = Vec::new();
        for r in 0..a.len() {
            if a.is_null(r) {
                continue;
            }
            let v = a.value(r);
            if (v.len() as u64) < self.threshold {
                continue;
            }
            let key = (c, xxhash_rust::xxh3::xxh3_128(v), v.len() as u64);
            match self.seen.get(&key) {
                Some(&target) => {
                    dup.push(r);
                    refs.push(CellRef {
                        local: first_local + r as u64,
                        column: c as u32,
                        target,
                    });
                    self.cells += 1;
                    self.bytes_saved += v.len() as u64;
                }
                None => {
                    self.seen.insert(key, first_row + r as u64);
                }
            }
        }
        (!dup.is_empty()).then_some(dup)
    }
}

/// Column `a` (binary or large binary) with the cells at `rows` (sorted)
/// replaced by `values` (same order).
pub fn restored(a: &ArrayRef, rows: &[usize], values: &[&[u8]]) -> ArrayRef {
    match a.data_type() {
        DataType::Binary => Arc::new(replaced(a.as_binary::<i32>(), rows, values)),
        _ => Arc::new(replaced(a.as_binary::<i64>(), rows, values)),
    }
}

/// `a` with the cells at `rows` (sorted) replaced by `values` (same order),
/// nulls kept: how a repeat is emptied and how it is put back.
fn replaced<O: OffsetSizeTrait>(
    a: &GenericBinaryArray<O>,
    rows: &[usize],
    values: &[&[u8]],
) -> GenericBinaryArray<O> {
    let mut offsets = Vec::with_capacity(a.len() + 1);
    let mut out = Vec::new();
    offsets.push(O::usize_as(0));
    let mut k = 0;
    for r in 0..a.len() {
        if k < rows.len() && rows[k] == r {
            out.extend_from_slice(values[k]);
            k += 1;
        } else if !a.is_null(r) {
            out.extend_from_slice(a.value(r));
        }
        offsets.push(O::usize_as(out.len()));
    }
    GenericBinaryArray::<O>::new(
        OffsetBuffer::new(offsets.into()),
        Buffer::from_vec(out),
        a.nulls().cloned(),
    )
}

/// The bytes of cell `r` of a binary or large binary column.
pub fn cell_bytes(a: &ArrayRef, r: usize) -> &[u8] {
    match a.data_type() {
        DataType::Binary => a.as_binary::<i32>().value(r),
        _ => a.as_binary::<i64>().value(r),
    }
}
