//! Where a writer writes: the one place that decides between a directory
//! (the cache's lock taken, the build published in place) and an
//! object-store URI (built in a local staging directory under its lock,
//! then published with a commit marker, see `cache::remote`). Every layout's
//! writer, and so `write_cache`, goes through [`write_at`].

use std::path::{Path, PathBuf};

use crate::cache::lock::CacheLock;
use crate::error::Result;

/// What a writer returns: it names the place its cache was published at.
pub trait WrittenAt {
    /// Records that the cache was published at `dir` (an object-store URI,
    /// after a build in local staging).
    fn published_at(&mut self, dir: PathBuf);
}

/// Runs `write` for the cache at `location` with the directory it writes in
/// and the lock it holds: `location` itself under its lock, or, for an
/// object-store URI, a local staging directory published at the URI when
/// `write` succeeds.
///
/// # Errors
/// What `write` returns (nothing is published then), a lock or a publish error.
pub fn write_at<T: WrittenAt>(
    location: &Path,
    write: impl FnOnce(&Path, &CacheLock) -> Result<T>,
) -> Result<T> {
    #[cfg(feature = "s3")]
    if crate::storage::is_object_uri(location) {
        let mut w = crate::cache::remote::write_staged(location, write)?;
        w.published_at(location.to_path_buf());
        return Ok(w);
    }
    let lock = CacheLock::acquire(location)?;
    write(location, &lock)
}
