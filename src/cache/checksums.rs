//! Whole-file checksums (xxh64), shared by every layout's writer and by
//! `verify`: the hash of a file, and `_checksums.json`, the xxh64 of every
//! data file of a cache. Lance writers record it at build time; `verify
//! --stamp` records it for a cache written without (the reference's).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::cache::metadata::METADATA_FILE;
use crate::error::{Error, Result};

/// The file recording the xxh64 of every data file of a cache (ours; the
/// reference never reads it).
pub const CHECKSUMS_FILE: &str = "_checksums.json";

/// xxh64 of a file, 16 hex chars.
///
/// # Errors
/// [`Error::Io`] naming the file.
pub fn xxh64_file(path: &Path) -> Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
    let mut h = xxhash_rust::xxh64::Xxh64::new(0);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::io("read", path, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(format!("{:016x}", h.digest()))
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
pub(crate) fn read_file_checksums(path: &Path) -> Result<Stamp> {
    let text = std::fs::read(path).map_err(|e| Error::io("read", path, e))?;
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

/// The data files of a cache: every regular file under it but the metadata,
/// the stamp itself and the top-level names in `exclude`, relative and sorted.
fn data_files(dir: &Path, exclude: &[&str]) -> Result<Vec<String>> {
    fn walk(root: &Path, d: &Path, exclude: &[&str], out: &mut Vec<String>) -> Result<()> {
        for e in std::fs::read_dir(d).map_err(|e| Error::io("list", d, e))? {
            let e = e.map_err(|e| Error::io("list", d, e))?;
            let p = e.path();
            let ty = e.file_type().map_err(|e| Error::io("stat", &p, e))?;
            if ty.is_dir() {
                walk(root, &p, exclude, out)?;
            } else if ty.is_file() {
                let rel = p.strip_prefix(root).expect("under root");
                let s = rel.to_string_lossy().into_owned();
                let top = s.split('/').next().unwrap_or("");
                if s != METADATA_FILE && s != CHECKSUMS_FILE && !exclude.contains(&top) {
                    out.push(s);
                }
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, dir, exclude, &mut out)?;
    out.sort();
    Ok(out)
}

/// Records the xxh64 of every data file under `dir` (all files but the
/// metadata, this file and the top-level names in `exclude`, such as a
/// build's own working files) in [`CHECKSUMS_FILE`], written atomically and
/// fsynced. Returns the number of files recorded.
///
/// # Errors
/// I/O errors naming the file.
pub(crate) fn write_file_checksums(dir: &Path, exclude: &[&str]) -> Result<usize> {
    let path = dir.join(CHECKSUMS_FILE);
    let mut files = Vec::new();
    for rel in data_files(dir, exclude)? {
        let p = dir.join(&rel);
        let bytes = std::fs::metadata(&p)
            .map_err(|e| Error::io("stat", &p, e))?
            .len();
        files.push(StampedFile {
            xxh64: xxh64_file(&p)?,
            path: rel,
            bytes,
        });
    }
    let n = files.len();
    let stamp = Stamp {
        algorithm: "xxh64".into(),
        files,
    };
    let text = serde_json::to_vec_pretty(&stamp).expect("serializable");
    let tmp = dir.join(format!(
        "{CHECKSUMS_FILE}.tmp-{}",
        crate::util::random_suffix()
    ));
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&text)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io("write", &path, e));
    }
    crate::util::fsync_dir(dir)?;
    Ok(n)
}
