//! The exclusive build lock `<cache dir>.lock` beside a cache.
//!
//! An OS advisory lock (`flock`, the same primitive as Python's `filelock`),
//! so a lock is released when its holder dies, and the lock file is never
//! deleted (deleting it would let a second writer lock a fresh inode).

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::storage::{LockGuard, StorageRef};

/// A held exclusive lock; released on drop.
#[derive(Debug)]
pub struct CacheLock {
    _guard: Box<dyn LockGuard>,
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
    /// [`crate::Error::Io`] naming the lock file (e.g. permission denied on the root).
    pub fn acquire(cache_dir: &Path) -> Result<Self> {
        Self::acquire_in(&crate::storage::storage_for(cache_dir), cache_dir)
    }

    /// [`CacheLock::acquire`] on `storage`.
    ///
    /// # Errors
    /// As [`CacheLock::acquire`].
    pub fn acquire_in(storage: &StorageRef, cache_dir: &Path) -> Result<Self> {
        let path = lock_path(cache_dir);
        let guard = storage
            .lock(&path, true)?
            .expect("a waiting lock is always taken");
        Ok(CacheLock {
            _guard: guard,
            path,
        })
    }

    /// Takes the lock only if nobody holds it.
    ///
    /// # Errors
    /// [`crate::Error::Io`] when the lock file cannot be opened.
    pub fn try_acquire(cache_dir: &Path) -> Result<Option<Self>> {
        Self::try_acquire_in(&crate::storage::storage_for(cache_dir), cache_dir)
    }

    /// [`CacheLock::try_acquire`] on `storage`.
    ///
    /// # Errors
    /// As [`CacheLock::try_acquire`].
    pub fn try_acquire_in(storage: &StorageRef, cache_dir: &Path) -> Result<Option<Self>> {
        let path = lock_path(cache_dir);
        Ok(storage.lock(&path, false)?.map(|guard| CacheLock {
            _guard: guard,
            path,
        }))
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
