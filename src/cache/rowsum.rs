//! Optional per-record checksums: one xxh64 per row, kept beside each shard
//! in `_row_xxh64/<shard>.xxh` (little-endian u64s). A shard's file checksum
//! says *that* it changed; these say *which rows* did.

use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{
    ArrowPrimitiveType, Float16Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
    Int8Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use xxhash_rust::xxh64::Xxh64;

use crate::error::{Error, Result};
use crate::storage::Storage;

/// Folder of the row-checksum sidecars inside a cache.
pub const ROW_SUMS_DIR: &str = "_row_xxh64";

/// Sidecar path of a shard.
pub fn sidecar(dir: &Path, shard: &str) -> PathBuf {
    beside(dir, shard, ROW_SUMS_DIR, "xxh")
}

/// The file `<sub>/<shard name>.<ext>` in the directory of `shard` (a
/// shard under a build prefix keeps its sidecars under the same prefix).
pub(crate) fn beside(dir: &Path, shard: &str, sub: &str, ext: &str) -> PathBuf {
    let (parent, name) = match shard.rsplit_once('/') {
        Some((p, n)) => (dir.join(p), n),
        None => (dir.to_path_buf(), shard),
    };
    parent.join(sub).join(format!("{name}.{ext}"))
}

fn hash_cell(h: &mut Xxh64, a: &dyn Array, i: usize) {
    if a.is_null(i) {
        h.update(&[0]);
        return;
    }
    h.update(&[1]);
    match a.data_type() {
        DataType::Boolean => h.update(&[a.as_boolean().value(i) as u8]),
        DataType::Utf8 => h.update(a.as_string::<i32>().value(i).as_bytes()),
        DataType::Binary => h.update(a.as_binary::<i32>().value(i)),
        DataType::LargeBinary => h.update(a.as_binary::<i64>().value(i)),
        // The same bytes as a large_binary cell: one checksum whichever
        // way an array column is stored.
        DataType::FixedSizeBinary(_) => h.update(a.as_fixed_size_binary().value(i)),
        DataType::List(_) => {
            let child = a.as_list::<i32>().value(i);
            h.update(&(child.len() as u64).to_le_bytes());
            for j in 0..child.len() {
                hash_cell(h, child.as_ref(), j);
            }
        }
        DataType::Struct(_) => {
            for c in a.as_struct().columns() {
                hash_cell(h, c.as_ref(), i);
            }
        }
        _ => {
            // The value's little-endian bytes, read from the typed values
            // (no `to_data`, which clones the array's description per cell).
            macro_rules! native {
                ($($t:ty),*) => {
                    $(if let Some(p) = a.as_primitive_opt::<$t>() {
                        let w = std::mem::size_of::<<$t as ArrowPrimitiveType>::Native>();
                        let bytes = p.values().inner().as_slice();
                        h.update(&bytes[i * w..(i + 1) * w]);
                        return;
                    })*
                };
            }
            native!(
                Int8Type,
                Int16Type,
                Int32Type,
                Int64Type,
                UInt8Type,
                UInt16Type,
                UInt32Type,
                UInt64Type,
                Float16Type,
                Float32Type,
                Float64Type
            );
        }
    }
}

/// One checksum per row of a batch.
pub fn row_hashes(batch: &RecordBatch) -> Vec<u64> {
    (0..batch.num_rows()).map(|i| row_hash(batch, i)).collect()
}

/// The checksum of row `i` of a batch (one of [`row_hashes`]).
pub fn row_hash(batch: &RecordBatch, i: usize) -> u64 {
    let mut h = Xxh64::new(0);
    for c in batch.columns() {
        hash_cell(&mut h, c.as_ref(), i);
    }
    h.digest()
}

/// One checksum per column of a batch, over all its cells: what names the
/// column of a row whose checksum no longer matches.
pub fn column_hashes(batch: &RecordBatch) -> Vec<u64> {
    batch
        .columns()
        .iter()
        .map(|c| {
            let mut h = Xxh64::new(0);
            for i in 0..batch.num_rows() {
                hash_cell(&mut h, c.as_ref(), i);
            }
            h.digest()
        })
        .collect()
}

/// Sidecar path of a shard's column checksums: one per (record batch,
/// column), batch-major.
pub fn column_sidecar(dir: &Path, shard: &str) -> PathBuf {
    beside(dir, shard, ROW_SUMS_DIR, "cols")
}

/// Writes a shard's row checksums durably.
///
/// # Errors
/// [`Error::Io`] naming the sidecar.
pub fn write_sidecar(storage: &dyn Storage, dir: &Path, shard: &str, sums: &[u64]) -> Result<()> {
    write_sums(storage, &sidecar(dir, shard), sums)
}

/// Writes checksums (little-endian u64s) durably to `path`.
///
/// # Errors
/// [`Error::Io`] naming the file.
pub fn write_sums(storage: &dyn Storage, path: &Path, sums: &[u64]) -> Result<()> {
    if let Some(p) = path.parent() {
        storage.create_dir_all(p)?;
    }
    let mut bytes = Vec::with_capacity(sums.len() * 8);
    for s in sums {
        bytes.extend_from_slice(&s.to_le_bytes());
    }
    storage.write_atomic(path, &bytes)
}

/// The xxh64 of a shard's two sidecars as [`write_sums`] writes them
/// (the row checksums `rows`, then the column checksums `cols`), which a
/// build's manifest records so that a resumed build can check them.
pub(crate) fn sidecars_digest(rows: &[u64], cols: &[u64]) -> String {
    let mut h = Xxh64::new(0);
    for s in rows.iter().chain(cols) {
        h.update(&s.to_le_bytes());
    }
    format!("{:016x}", h.digest())
}

/// [`sidecars_digest`] of the sidecars on disk of `shard`.
///
/// # Errors
/// As [`read_sums`].
pub(crate) fn sidecars_digest_on_disk(
    storage: &dyn Storage,
    dir: &Path,
    shard: &str,
) -> Result<String> {
    let rows = read_sidecar(storage, dir, shard)?;
    let cols = read_sums(storage, &column_sidecar(dir, shard))?;
    Ok(sidecars_digest(&rows, &cols))
}

/// Reads a shard's row checksums.
///
/// # Errors
/// [`Error::Io`] naming the sidecar; [`Error::CorruptShard`] for a length
/// that is not a whole number of checksums.
pub fn read_sidecar(storage: &dyn Storage, dir: &Path, shard: &str) -> Result<Vec<u64>> {
    read_sums(storage, &sidecar(dir, shard))
}

/// Reads checksums written by [`write_sums`].
///
/// # Errors
/// [`Error::Io`] naming the file; [`Error::CorruptShard`] for a length
/// that is not a whole number of checksums.
pub fn read_sums(storage: &dyn Storage, path: &Path) -> Result<Vec<u64>> {
    let bytes = storage.read(path)?;
    if bytes.len() % 8 != 0 {
        return Err(Error::corrupt(path, "checksum file is truncated"));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect())
}
