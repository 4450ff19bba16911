//! Selections kept beside a cache: the rows a filter kept, so the next open
//! with the same filter reads a few bytes instead of the filter's columns.
//!
//! `<cache>/_selections/<version key>/<filter key>.sel`: the version key
//! hashes what the rows are (the metadata, its edit version, the Lance
//! version and the row count), the filter key the filter's text. A file is
//! a roaring bitmap (compact both for a few rows and for most of them)
//! between a header and an xxh3 checksum:
//!
//! ```text
//! "SSDSEL01" | rows: u64 LE | roaring treemap (its portable format) | xxh3-64 of all before: u64 LE
//! ```
//!
//! A file that is short, damaged, or made for another row count is ignored
//! (the filter is evaluated again and the file replaced). Saving a selection
//! removes those of other versions of the cache. `_selections/` is not data:
//! checksums and `verify` leave it out.

use std::path::{Path, PathBuf};

use roaring::RoaringTreemap;
use xxhash_rust::xxh3::xxh3_64;

use crate::cache::naming::SELECTIONS_DIR;
use crate::error::{Error, Result};
use crate::storage::Storage;

const MAGIC: &[u8; 8] = b"SSDSEL01";

/// Where the selection of `filter_key` for `version_key` lives under `dir`.
pub(crate) fn selection_path(dir: &Path, version_key: &str, filter_key: &str) -> PathBuf {
    dir.join(SELECTIONS_DIR)
        .join(version_key)
        .join(format!("{filter_key}.sel"))
}

/// The file's bytes for the sorted row positions `rows` of a cache of
/// `total` rows.
pub(crate) fn encode(total: u64, rows: &[u64]) -> Vec<u8> {
    let map = RoaringTreemap::from_sorted_iter(rows.iter().copied())
        .expect("selections are made in ascending order");
    let mut out = Vec::with_capacity(24 + map.serialized_size());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&total.to_le_bytes());
    map.serialize_into(&mut out)
        .expect("writing into a Vec cannot fail");
    let sum = xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// The row positions in a file's bytes, or None when the bytes are not a
/// whole, intact selection of a cache of `total` rows.
pub(crate) fn decode(total: u64, bytes: &[u8]) -> Option<Vec<u64>> {
    let body_len = bytes.len().checked_sub(8)?;
    let (body, sum) = bytes.split_at(body_len);
    if body.len() < 16 || &body[..8] != MAGIC {
        return None;
    }
    if xxh3_64(body) != u64::from_le_bytes(sum.try_into().ok()?) {
        return None;
    }
    if u64::from_le_bytes(body[8..16].try_into().ok()?) != total {
        return None;
    }
    let map = RoaringTreemap::deserialize_from(&body[16..]).ok()?;
    if map.max().is_some_and(|m| m >= total) {
        return None;
    }
    Some(map.iter().collect())
}

/// The kept selection at `path`, if there is an intact one.
pub(crate) fn load(storage: &dyn Storage, path: &Path, total: u64) -> Option<Vec<u64>> {
    if !storage.is_file(path) {
        return None;
    }
    decode(total, &storage.read(path).ok()?)
}

/// Keeps a selection at `path` (atomically replaced), and removes the
/// selections of other versions of the cache.
///
/// # Errors
/// I/O errors naming the path (a read-only cache, a full disk).
pub(crate) fn save(storage: &dyn Storage, path: &Path, total: u64, rows: &[u64]) -> Result<()> {
    let version_dir = path
        .parent()
        .ok_or_else(|| Error::InvalidArgument(format!("{} has no folder", path.display())))?;
    storage.create_dir_all(version_dir)?;
    storage.write_atomic(path, &encode(total, rows))?;
    if let Some(root) = version_dir.parent() {
        for e in storage.list(root)? {
            if e.is_dir() && e.path != version_dir {
                storage.remove_dir_all(&e.path)?;
            }
        }
    }
    Ok(())
}
