//! Whole-file checksums (xxh64), shared by every layout's writer and by
//! `verify`: the hash of a file, and `_checksums.json`, the xxh64 of every
//! data file of a cache. Lance writers record it at build time; `verify
//! --stamp` records it for a cache written without (the reference's).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::cache::metadata::METADATA_FILE;
use crate::error::{Error, Result};
use crate::storage::Storage;

/// The file recording the xxh64 of every data file of a cache (ours; the
/// reference never reads it).
pub const CHECKSUMS_FILE: &str = "_checksums.json";

/// xxh64 of a file, 16 hex chars.
///
/// # Errors
/// [`Error::Io`] naming the file.
pub fn xxh64_file(path: &Path) -> Result<String> {
    xxh64_file_in(crate::storage::storage_for(path).as_ref(), path)
}

/// [`xxh64_file`] through `storage` (hashing the mapped file, which reads
/// each page once and copies nothing).
///
/// # Errors
/// [`Error::Io`] naming the file.
pub fn xxh64_file_in(storage: &dyn Storage, path: &Path) -> Result<String> {
    let bytes = storage.map(path)?;
    Ok(format!("{:016x}", xxhash_rust::xxh64::xxh64(&bytes, 0)))
}

/// The file checksums of a stamped cache.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Stamp {
    /// Always `xxh64`.
    pub(crate) algorithm: String,
    /// Each data file, relative to the cache directory, sorted.
    pub(crate) files: Vec<StampedFile>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StampedFile {
    pub(crate) path: String,
    pub(crate) bytes: u64,
    pub(crate) xxh64: String,
}

/// Reads and checks a `_checksums.json`.
///
/// # Errors
/// [`Error::Metadata`] naming the file when it is unreadable, of another
/// algorithm, or names a path outside the cache.
pub(crate) fn read_file_checksums(storage: &dyn Storage, path: &Path) -> Result<Stamp> {
    let text = storage.read(path)?;
    let stamp: Stamp = serde_json::from_slice(&text)
        .map_err(|e| Error::metadata(path, format!("unreadable checksums file: {e}")))?;
    if stamp.algorithm != "xxh64" {
        return Err(Error::metadata(
            path,
            format!("unknown checksum algorithm '{}'", stamp.algorithm),
        ));
    }
    for f in &stamp.files {
        let p = Path::new(&f.path);
        if p.is_absolute() || p.components().any(|c| c == std::path::Component::ParentDir) {
            return Err(Error::metadata(
                path,
                format!("'{}' is not a path inside the cache", f.path),
            ));
        }
    }
    Ok(stamp)
}

/// Checks the files `names` (relative to `dir`) that [`CHECKSUMS_FILE`]
/// records against their recorded size and xxh64, for a reader about to
/// hand their bytes to a library that trusts them (Lance's manifests).
/// A file it does not record passes; so does every file of a cache
/// without a readable one (`verify` reports that).
///
/// # Errors
/// [`Error::CorruptShard`] naming the file and what differs; I/O errors
/// naming it.
#[cfg(feature = "lance")]
pub(crate) fn check_recorded(storage: &dyn Storage, dir: &Path, names: &[String]) -> Result<()> {
    let stamp_path = dir.join(CHECKSUMS_FILE);
    if !storage.exists(&stamp_path) {
        return Ok(());
    }
    let Ok(stamp) = read_file_checksums(storage, &stamp_path) else {
        return Ok(());
    };
    for f in stamp.files.iter().filter(|f| names.contains(&f.path)) {
        let path = dir.join(&f.path);
        let Some(len) = storage.stat(&path)?.map(|e| e.len) else {
            continue; // missing: the reader says so
        };
        let differs = if len != f.bytes {
            Some(format!("{len} bytes, {CHECKSUMS_FILE} records {}", f.bytes))
        } else {
            let got = xxh64_file_in(storage, &path)?;
            (got != f.xxh64)
                .then(|| format!("xxh64 is {got}, {CHECKSUMS_FILE} records {}", f.xxh64))
        };
        if let Some(d) = differs {
            return Err(Error::corrupt(&path, format!("{d}: the file is damaged")));
        }
    }
    Ok(())
}

/// Files a Lance dataset replaces in place (a hint of its latest version,
/// rewritten at each commit): not data, never stamped nor checked.
pub(crate) const MUTABLE_FILES: &[&str] = &["_versions/latest_version_hint.json"];

/// The data files of a cache: every regular file under it but the metadata,
/// the stamp itself, [`MUTABLE_FILES`], kept filter selections and the
/// top-level names in `exclude`, relative and sorted.
fn data_files(storage: &dyn Storage, dir: &Path, exclude: &[&str]) -> Result<Vec<String>> {
    Ok(storage
        .walk_files(dir)?
        .into_iter()
        .map(|rel| rel.to_string_lossy().into_owned())
        .filter(|s| {
            let top = s.split('/').next().unwrap_or("");
            s != METADATA_FILE
                && s != CHECKSUMS_FILE
                && !MUTABLE_FILES.contains(&s.as_str())
                && top != crate::cache::naming::SELECTIONS_DIR
                && !exclude.contains(&top)
        })
        .collect())
}

/// Records the xxh64 of every data file under `dir` (all files but the
/// metadata, this file and the top-level names in `exclude`, such as a
/// build's own working files) in [`CHECKSUMS_FILE`], written atomically and
/// durably. Returns the number of files recorded.
///
/// # Errors
/// I/O errors naming the file.
pub(crate) fn write_file_checksums(
    storage: &dyn Storage,
    dir: &Path,
    exclude: &[&str],
) -> Result<usize> {
    stamp_files(storage, dir, exclude, None)
}

/// Brings an existing [`CHECKSUMS_FILE`] up to date after files were added
/// and removed (never changed: Lance writes each data file once): entries
/// of files still there are kept, new files are hashed, gone ones dropped.
///
/// # Errors
/// As [`read_file_checksums`] and [`write_file_checksums`].
#[cfg(feature = "lance")]
pub(crate) fn update_file_checksums(
    storage: &dyn Storage,
    dir: &Path,
    exclude: &[&str],
) -> Result<usize> {
    let old = read_file_checksums(storage, &dir.join(CHECKSUMS_FILE))?;
    stamp_files(storage, dir, exclude, Some(&old))
}

/// Writes [`CHECKSUMS_FILE`] for the data files under `dir`, hashing each
/// one unless `known` records it under `data/` with the same size (Lance
/// writes a data file once).
fn stamp_files(
    storage: &dyn Storage,
    dir: &Path,
    exclude: &[&str],
    known: Option<&Stamp>,
) -> Result<usize> {
    let known: std::collections::HashMap<&str, &StampedFile> = known
        .map(|k| k.files.iter().map(|f| (f.path.as_str(), f)).collect())
        .unwrap_or_default();
    let mut files = Vec::new();
    for rel in data_files(storage, dir, exclude)? {
        let p = dir.join(&rel);
        let bytes = storage
            .stat(&p)?
            .map(|e| e.len)
            .ok_or_else(|| Error::io("stat", &p, std::io::ErrorKind::NotFound.into()))?;
        let xxh64 = match known.get(rel.as_str()) {
            Some(f) if f.bytes == bytes && rel.starts_with("data/") => f.xxh64.clone(),
            _ => xxh64_file_in(storage, &p)?,
        };
        files.push(StampedFile {
            path: rel,
            bytes,
            xxh64,
        });
    }
    let n = files.len();
    let stamp = Stamp {
        algorithm: "xxh64".into(),
        files,
    };
    let text = serde_json::to_vec_pretty(&stamp).expect("serializable");
    storage.write_atomic(&dir.join(CHECKSUMS_FILE), &text)?;
    Ok(n)
}
