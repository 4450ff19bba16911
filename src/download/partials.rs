//! Partial downloads (`<name>.tmp`) no process is making any more, found
//! and removed under their download lock.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::lock::with_suffix;
use crate::error::{Error, Result};

/// A partial download (`<name>.tmp`) no process is making.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StalePartial {
    /// The `.tmp` file.
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// Time since it was last written.
    pub age: Duration,
}

/// The `.tmp` files in `dir` at least `min_age` old whose download lock is
/// free, removed unless `dry_run` (each under its lock, so a download
/// resuming it is never cut short).
///
/// # Errors
/// [`Error::Io`] naming the folder or file.
pub fn remove_stale_partials(
    dir: &Path,
    min_age: Duration,
    dry_run: bool,
) -> Result<Vec<StalePartial>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::io("list", dir, e)),
    };
    for e in entries {
        let e = e.map_err(|e| Error::io("list", dir, e))?;
        let path = e.path();
        let Some(dest) = path
            .to_str()
            .and_then(|p| p.strip_suffix(".tmp"))
            .map(PathBuf::from)
        else {
            continue;
        };
        let meta = e.metadata().map_err(|e| Error::io("stat", &path, e))?;
        if !meta.is_file() {
            continue;
        }
        let age = meta
            .modified()
            .ok()
            .and_then(|t| t.elapsed().ok())
            .unwrap_or_default();
        if age < min_age {
            continue;
        }
        let lock_file = with_suffix(&dest, ".lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_file)
            .map_err(|e| Error::io("open the download lock", &lock_file, e))?;
        if lock.try_lock().is_err() {
            continue; // a download is resuming it now
        }
        if !dry_run {
            std::fs::remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
        }
        let _ = lock.unlock();
        out.push(StalePartial {
            path,
            bytes: meta.len(),
            age,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}
