//! The local disk cache of object-store byte ranges.
//!
//! A read of a cache on object storage fetches byte ranges (a shard's
//! footer, a record batch's header, a record batch) and keeps each as one
//! file under `<root>/ranges/`, named by the object, its version (size and
//! ETag) and the range. The files are shared by every process of the
//! machine:
//!
//! - a range is written to a temporary file of its own and renamed into
//!   place once complete, and a file is used only when its length is the
//!   range's, so a partly downloaded range is never read;
//! - two processes fetching the same range at once both write it, and the
//!   second rename replaces the first with the same bytes (objects of a
//!   committed build never change: a new build writes new objects);
//! - the byte budget is kept least recently used first: a hit refreshes the
//!   file's modification time, and every process that has written a
//!   sixteenth of the budget since it last looked takes the cache's `flock`
//!   lock (`<root>/.lock`; no shared-memory or name files) and removes the
//!   oldest files until the rest fit. A file removed while another process
//!   reads it is read whole already (files are read, not mapped) or fetched
//!   again.

use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use crate::error::{Error, Result};

/// Bytes the disk cache keeps by default (`SHARDSET_OBJECT_CACHE_BYTES`).
pub const DEFAULT_DISK_CACHE_BYTES: u64 = 32 << 30;

/// Counters of one process's use of a [`DiskCache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskCacheStats {
    /// Ranges read from the disk cache.
    pub hits: u64,
    /// Ranges fetched from the object store.
    pub fetches: u64,
    /// Bytes fetched from the object store.
    pub fetched_bytes: u64,
    /// Files removed to keep the budget.
    pub evicted: u64,
}

/// Byte ranges of objects, kept on local disk under a byte budget.
#[derive(Debug)]
pub struct DiskCache {
    root: PathBuf,
    budget: u64,
    since_check: AtomicU64,
    hits: AtomicU64,
    fetches: AtomicU64,
    fetched_bytes: AtomicU64,
    evicted: AtomicU64,
}

impl DiskCache {
    /// A disk cache in `root` keeping at most `budget` bytes.
    pub fn new(root: impl Into<PathBuf>, budget: u64) -> Self {
        DiskCache {
            root: root.into(),
            budget,
            since_check: AtomicU64::new(u64::MAX / 2),
            hits: AtomicU64::new(0),
            fetches: AtomicU64::new(0),
            fetched_bytes: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
        }
    }

    /// The disk cache the environment names: `SHARDSET_OBJECT_CACHE` (a
    /// directory; default `$XDG_CACHE_HOME/shardset/objects`, else
    /// `~/.cache/shardset/objects`) and `SHARDSET_OBJECT_CACHE_BYTES`
    /// (default [`DEFAULT_DISK_CACHE_BYTES`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a budget that is not a number.
    pub fn from_env() -> Result<Self> {
        let root = match std::env::var_os("SHARDSET_OBJECT_CACHE") {
            Some(d) if !d.is_empty() => PathBuf::from(d),
            _ => match std::env::var_os("XDG_CACHE_HOME") {
                Some(d) if !d.is_empty() => PathBuf::from(d).join("shardset").join("objects"),
                _ => std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .unwrap_or_else(std::env::temp_dir)
                    .join(".cache")
                    .join("shardset")
                    .join("objects"),
            },
        };
        let budget = match std::env::var("SHARDSET_OBJECT_CACHE_BYTES") {
            Ok(v) => v.trim().parse::<u64>().map_err(|_| {
                Error::InvalidArgument(format!(
                    "SHARDSET_OBJECT_CACHE_BYTES must be a number of bytes, not {v:?}"
                ))
            })?,
            Err(_) => DEFAULT_DISK_CACHE_BYTES,
        };
        Ok(DiskCache::new(root, budget))
    }

    /// The cache's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The byte budget.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// This process's counters.
    pub fn stats(&self) -> DiskCacheStats {
        DiskCacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            fetches: self.fetches.load(Ordering::Relaxed),
            fetched_bytes: self.fetched_bytes.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
        }
    }

    fn ranges_dir(&self) -> PathBuf {
        self.root.join("ranges")
    }

    /// The file of `range` of the object `object` at `version`.
    pub fn range_path(&self, object: &str, version: &str, range: &Range<u64>) -> PathBuf {
        let h = xxhash_rust::xxh3::xxh3_128(format!("{object}\0{version}").as_bytes());
        let hex = format!("{h:032x}");
        self.ranges_dir()
            .join(&hex[..2])
            .join(&hex[2..])
            .join(format!("{}-{}", range.start, range.end))
    }

    /// Bytes of complete ranges of the object on disk now.
    pub fn object_bytes(&self, object: &str, version: &str) -> u64 {
        let file = self.range_path(object, version, &(0..0));
        complete_bytes(file.parent().expect("range files have a parent"))
    }

    /// True when `range` of the object is on disk, complete.
    pub fn contains(&self, object: &str, version: &str, range: &Range<u64>) -> bool {
        std::fs::metadata(self.range_path(object, version, range))
            .is_ok_and(|m| m.len() == range.end - range.start)
    }

    /// `range` of the object: from disk when there, else from `fetch`
    /// (kept on disk for the next reader).
    ///
    /// # Errors
    /// What `fetch` returns; [`Error::Io`] when the cache directory cannot
    /// be written; [`Error::CorruptShard`] when `fetch` returns a wrong length.
    pub fn get_or_fetch(
        &self,
        object: &str,
        version: &str,
        range: Range<u64>,
        fetch: impl FnOnce() -> Result<Bytes>,
    ) -> Result<Bytes> {
        if let Some(b) = self.get(object, version, &range) {
            return Ok(b);
        }
        let bytes = fetch()?;
        self.insert(object, version, range, bytes.clone())?;
        Ok(bytes)
    }

    /// `range` of the object when it is on disk, complete.
    pub fn get(&self, object: &str, version: &str, range: &Range<u64>) -> Option<Bytes> {
        let path = self.range_path(object, version, range);
        let b = read_complete(&path, range.end - range.start)?;
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(b)
    }

    /// Keeps `bytes`, just fetched, as `range` of the object.
    ///
    /// # Errors
    /// [`Error::Io`] when the cache directory cannot be written;
    /// [`Error::CorruptShard`] when `bytes` is not the range's length.
    pub fn insert(
        &self,
        object: &str,
        version: &str,
        range: Range<u64>,
        bytes: Bytes,
    ) -> Result<()> {
        let path = self.range_path(object, version, &range);
        let want = range.end - range.start;
        if bytes.len() as u64 != want {
            return Err(Error::corrupt(
                object,
                format!(
                    "the object store returned {} bytes for the range {}..{}",
                    bytes.len(),
                    range.start,
                    range.end
                ),
            ));
        }
        self.fetches.fetch_add(1, Ordering::Relaxed);
        self.fetched_bytes.fetch_add(want, Ordering::Relaxed);
        self.store(&path, &bytes)
    }

    /// Writes `bytes` as `path`: a temporary file of this writer's, renamed
    /// into place once complete.
    fn store(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        let dir = path.parent().expect("range files have a parent");
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
        let tmp = dir.join(format!(
            ".{}.tmp.{}.{}",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("range"),
            std::process::id(),
            unique()
        ));
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(bytes)?;
            std::fs::rename(&tmp, path)
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::io("write", path, e));
        }
        let n = bytes.len() as u64;
        let before = self.since_check.fetch_add(n, Ordering::Relaxed);
        if before.saturating_add(n) >= (self.budget / 16).max(1) {
            self.since_check.store(0, Ordering::Relaxed);
            self.evict()?;
        }
        Ok(())
    }

    /// Removes the least recently used files until the rest fit the budget
    /// (and temporary files older than an hour, left by a killed writer),
    /// under the cache's lock.
    ///
    /// # Errors
    /// [`Error::Io`] when the lock cannot be taken.
    pub fn evict(&self) -> Result<()> {
        std::fs::create_dir_all(&self.root)
            .map_err(|e| Error::io("create directory", &self.root, e))?;
        let _lock = crate::storage::local().lock(&self.root.join(".lock"), true)?;
        let mut files = Vec::new();
        let mut total = 0u64;
        let now = SystemTime::now();
        walk(&self.ranges_dir(), &mut |p, m| {
            let modified = m.modified().unwrap_or(now);
            let is_tmp = p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.') && n.contains(".tmp."));
            if is_tmp {
                if now.duration_since(modified).unwrap_or_default() > Duration::from_secs(3600) {
                    let _ = std::fs::remove_file(p);
                }
                return;
            }
            total += m.len();
            files.push((modified, m.len(), p.to_path_buf()));
        });
        if total <= self.budget {
            return Ok(());
        }
        files.sort();
        for (_, len, p) in files {
            if total <= self.budget {
                break;
            }
            if std::fs::remove_file(&p).is_ok() {
                total -= len;
                self.evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// Bytes of complete range files on disk now.
    pub fn disk_bytes(&self) -> u64 {
        complete_bytes(&self.ranges_dir())
    }
}

/// Bytes of the complete range files under `dir` (not the temporary files
/// of writers, whose names start with a dot).
fn complete_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    walk(dir, &mut |p, m| {
        if !p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'))
        {
            total += m.len();
        }
    });
    total
}

/// The file at `path` when it holds exactly `want` bytes (its modification
/// time refreshed: it was just used), mapped rather than copied: a range
/// file is never changed once in place (it is written whole under another
/// name and renamed), and eviction unlinks it, which leaves a mapping valid.
fn read_complete(path: &Path, want: u64) -> Option<Bytes> {
    let f = File::open(path).ok()?;
    let meta = f.metadata().ok()?;
    if meta.len() != want {
        return None;
    }
    let _ = f.set_modified(SystemTime::now());
    if want == 0 {
        return Some(Bytes::new());
    }
    // SAFETY: range files are immutable once renamed into place (see above).
    let map = unsafe { memmap2::Mmap::map(&f) }.ok()?;
    if map.len() as u64 != want {
        return None;
    }
    Some(Bytes::from_owner(map))
}

fn walk(dir: &Path, f: &mut dyn FnMut(&Path, &std::fs::Metadata)) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let Ok(m) = e.metadata() else { continue };
        if m.is_dir() {
            walk(&p, f);
        } else if m.is_file() {
            f(&p, &m);
        }
    }
}

fn unique() -> u64 {
    static N: AtomicU64 = AtomicU64::new(0);
    let t = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ N.fetch_add(1, Ordering::Relaxed).rotate_left(32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_kept_reused_and_evicted_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::new(dir.path(), 1000);
        let got = cache
            .get_or_fetch("b/o", "v1", 0..400, || Ok(Bytes::from(vec![1u8; 400])))
            .unwrap();
        assert_eq!(got.len(), 400);
        let again = cache
            .get_or_fetch("b/o", "v1", 0..400, || panic!("must come from disk"))
            .unwrap();
        assert_eq!(again, got);
        assert_eq!(cache.stats().hits, 1);
        // A torn file (wrong length) is never used: fetched again.
        let p = cache.range_path("b/o", "v1", &(400..800));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, [9u8; 10]).unwrap();
        let b = cache
            .get_or_fetch("b/o", "v1", 400..800, || Ok(Bytes::from(vec![2u8; 400])))
            .unwrap();
        assert_eq!(&b[..], &[2u8; 400][..]);
        // A third range overflows the budget: the least recently used goes.
        std::thread::sleep(Duration::from_millis(20));
        let _ = cache
            .get_or_fetch("b/o", "v1", 0..400, || unreachable!())
            .unwrap();
        cache
            .get_or_fetch("b/o", "v1", 800..1200, || Ok(Bytes::from(vec![3u8; 400])))
            .unwrap();
        assert!(cache.disk_bytes() <= 1000, "{}", cache.disk_bytes());
        assert!(!cache.contains("b/o", "v1", &(400..800)));
        assert!(cache.contains("b/o", "v1", &(800..1200)));
        // A short answer from the store is an error, not a cached range.
        let e = cache
            .get_or_fetch("b/o", "v1", 1200..1300, || Ok(Bytes::from(vec![0u8; 3])))
            .unwrap_err();
        assert!(e.to_string().contains("returned 3 bytes"), "{e}");
        assert!(!cache.contains("b/o", "v1", &(1200..1300)));
    }
}
