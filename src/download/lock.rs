//! The lock on `<name>.lock` a file is made under, so two processes asking
//! for one file download it once, and the sibling names (`.lock`, `.tmp`)
//! of a download.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A lock on `<dest>.lock`, held while the file is made.
pub(super) struct FileLock(std::fs::File);

impl FileLock {
    pub(super) fn acquire(dest: &Path) -> Result<Self> {
        let p = with_suffix(dest, ".lock");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&p)
            .map_err(|e| Error::io("open the download lock", &p, e))?;
        f.lock().map_err(|e| Error::io("lock", &p, e))?;
        Ok(FileLock(f))
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

pub(super) fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}
