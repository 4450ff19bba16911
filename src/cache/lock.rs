//! The exclusive build lock `<cache dir>.lock` beside a cache.
//!
//! An OS advisory lock (`flock`, the same primitive as Python's `filelock`),
//! so a lock is released when its holder dies, and the lock file is never
//! deleted (deleting it would let a second writer lock a fresh inode).

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A held exclusive lock; released on drop.
#[derive(Debug)]
pub struct CacheLock {
    _file: File,
    path: PathBuf,
}

/// The lock file of a cache directory: `<parent>/<name>.lock`.
pub fn lock_path(cache_dir: &Path) -> PathBuf {
    let mut name = cache_dir
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".lock");
    cache_dir.with_file_name(name)
}

impl CacheLock {
    /// Blocks until the exclusive lock of `cache_dir` is held.
    ///
    /// # Errors
    /// [`Error::Io`] naming the lock file (e.g. permission denied on the root).
    pub fn acquire(cache_dir: &Path) -> Result<Self> {
        let path = lock_path(cache_dir);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::io("create directory", parent, e))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io("open lock file", &path, e))?;
        file.lock().map_err(|e| Error::io("lock", &path, e))?;
        Ok(CacheLock { _file: file, path })
    }

    /// Takes the lock only if nobody holds it.
    ///
    /// # Errors
    /// [`Error::Io`] when the lock file cannot be opened.
    pub fn try_acquire(cache_dir: &Path) -> Result<Option<Self>> {
        let path = lock_path(cache_dir);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::io("create directory", parent, e))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io("open lock file", &path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(CacheLock { _file: file, path })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io("lock", &path, e)),
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_name_keeps_dots() {
        assert_eq!(
            lock_path(Path::new("/a/b/ds_v1.2_train_x")),
            PathBuf::from("/a/b/ds_v1.2_train_x.lock")
        );
    }

    #[test]
    fn second_lock_waits() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("c");
        let held = CacheLock::acquire(&target).unwrap();
        assert!(CacheLock::try_acquire(&target).unwrap().is_none());
        drop(held);
        assert!(CacheLock::try_acquire(&target).unwrap().is_some());
    }
}
