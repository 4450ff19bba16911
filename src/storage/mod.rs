//! Where cache files live: one trait, [`Storage`], through which every
//! writer and reader of a cache does its file I/O, and its first
//! implementation, the local filesystem ([`LocalFs`]).
//!
//! The shape follows tantivy's `Directory` and Lance's object-store /
//! commit-handler split:
//! - files are **write-once**: [`Storage::create`] refuses an existing path,
//!   a file is complete once [`WriteFile::finish`] returns, and readers only
//!   ever see files of a published directory, so no reader observes a
//!   partial file;
//! - small state (metadata, checksums) is replaced whole with
//!   [`Storage::write_atomic`];
//! - a cache becomes visible by one atomic step on a directory
//!   ([`Storage::exchange`] or [`Storage::rename`]), which is what the commit
//!   protocol of [`crate::cache::publish`] is written against;
//! - reads are whole files, byte ranges, or a zero-copy [`Storage::map`]
//!   (a memory map locally; an object store would fetch the object).
//!
//! Lance datasets do their own I/O through Lance's object store; a
//! [`Storage`] tells Lance where with [`Storage::lance_uri`] and fsyncs what
//! Lance wrote with [`Storage::sync_tree`].
//!
//! Inputs of a build (the video files, image folders and CSVs a source
//! reads) are not cache files and are read with `std::fs` by the sources.

pub mod disk_cache;
mod local;
#[cfg(feature = "s3")]
pub mod object;

use std::fmt::Debug;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::error::Result;

pub use local::LocalFs;
#[cfg(feature = "s3")]
pub use object::{is_object_uri, ObjectStorage};

/// Ranges a prefetch asks for at once (it holds them until they are on disk).
pub const PREFETCH_RANGES: usize = 8;

/// A file read by byte ranges (an object on an object store, through the
/// local disk cache), for readers that need only parts of a large file.
pub trait RangedFile: Send + Sync + Debug {
    /// Bytes in the file.
    fn len(&self) -> u64;
    /// True for an empty file.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The bytes `range`.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the file; [`crate::Error::CorruptShard`]
    /// for a range outside it.
    fn read_range(&self, range: Range<u64>) -> Result<Bytes>;
    /// Several ranges (fetched concurrently where the storage can).
    ///
    /// # Errors
    /// As [`RangedFile::read_range`].
    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        ranges.iter().map(|r| self.read_range(r.clone())).collect()
    }
    /// True when `range` is on local disk already (no request to read it).
    fn is_cached(&self, range: &Range<u64>) -> bool;
    /// Bytes of this file held on local disk now.
    fn cached_bytes(&self) -> u64;
}

/// A shared handle on a storage.
pub type StorageRef = Arc<dyn Storage>;

/// What a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// Anything else (a symlink, a device): never part of a cache.
    Other,
}

/// One entry of a directory listing, or what [`Storage::stat`] tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The path of the entry.
    pub path: PathBuf,
    /// File, directory or other.
    pub kind: EntryKind,
    /// Bytes (files only; 0 for the rest).
    pub len: u64,
    /// Last modification, where the storage knows it.
    pub modified: Option<std::time::SystemTime>,
}

impl Entry {
    /// The last component of the path, lossily as UTF-8.
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// True for a regular file.
    pub fn is_file(&self) -> bool {
        self.kind == EntryKind::File
    }

    /// True for a directory.
    pub fn is_dir(&self) -> bool {
        self.kind == EntryKind::Dir
    }
}

/// A file being written: bytes go in with [`Write`], and
/// [`WriteFile::finish`] makes them durable. Dropped without `finish`, the
/// file may hold any prefix of what was written.
pub trait WriteFile: Write + Send + Debug {
    /// The file.
    fn path(&self) -> &Path;
    /// Bytes in the file so far (what was there when reopened, plus what was written).
    fn len(&self) -> u64;
    /// True when nothing is in the file.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Makes everything written so far durable (data only: an appended log
    /// line), keeping the file open.
    fn sync_data(&mut self) -> Result<()>;
    /// Flushes and makes the file durable, data and size.
    fn finish(self: Box<Self>) -> Result<()>;
}

/// A held exclusive lock; released when dropped (and when its holder dies).
pub trait LockGuard: Send + Sync + Debug {
    /// The lock's path.
    fn path(&self) -> &Path;
}

/// Where cache files live. Paths are absolute or relative to the working
/// directory, as the caller gave them; every error names the path and what
/// was being done.
pub trait Storage: Send + Sync + Debug {
    /// A short name ("local").
    fn name(&self) -> &'static str;

    /// What is at `path`; `None` when nothing is.
    ///
    /// # Errors
    /// [`crate::Error::Io`] for anything but absence.
    fn stat(&self, path: &Path) -> Result<Option<Entry>>;

    /// True when `path` is a regular file.
    fn is_file(&self, path: &Path) -> bool {
        matches!(self.stat(path), Ok(Some(e)) if e.is_file())
    }

    /// True when `path` is a directory.
    fn is_dir(&self, path: &Path) -> bool {
        matches!(self.stat(path), Ok(Some(e)) if e.is_dir())
    }

    /// True when anything is at `path`.
    fn exists(&self, path: &Path) -> bool {
        matches!(self.stat(path), Ok(Some(_)))
    }

    /// The entries directly under `dir`, sorted by name.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming `dir` (absent, not a directory, unreadable).
    fn list(&self, dir: &Path) -> Result<Vec<Entry>>;

    /// A whole file.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the file.
    fn read(&self, path: &Path) -> Result<Vec<u8>>;

    /// The bytes `range` of a file (an error when the file is shorter).
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the file.
    fn read_range(&self, path: &Path, range: Range<u64>) -> Result<Vec<u8>>;

    /// A whole file without copying where the storage can (a read-only
    /// memory map locally). The bytes stay valid as long as the returned
    /// value or a slice of it lives; files of a published cache are never
    /// modified in place.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the file; its `source` is `NotFound`
    /// when the file is absent.
    fn map(&self, path: &Path) -> Result<Bytes>;

    /// The file as a [`RangedFile`] when this storage reads large files by
    /// byte ranges rather than mapping them (object stores); `None` locally.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the file.
    fn ranged(&self, path: &Path) -> Result<Option<Arc<dyn RangedFile>>> {
        let _ = path;
        Ok(None)
    }

    /// Creates a new file for writing; an existing file is an error
    /// (files are written once).
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the file.
    fn create(&self, path: &Path) -> Result<Box<dyn WriteFile>>;

    /// Reopens an append-only log, cut to its first `keep_bytes` bytes (a
    /// torn tail is dropped), for appending.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the file.
    fn reopen_append(&self, path: &Path, keep_bytes: u64) -> Result<Box<dyn WriteFile>>;

    /// Replaces `path` with `bytes` in one step: a reader sees the old file
    /// or the new one, never a mix; durable when this returns.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the file.
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<()>;

    /// Creates `dir` and its missing parents.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the directory.
    fn create_dir_all(&self, dir: &Path) -> Result<()>;

    /// Creates `dir` (its parent must exist); `false` when it exists already.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the directory.
    fn create_dir(&self, dir: &Path) -> Result<bool>;

    /// Renames a file or directory; `to` must not be a non-empty directory.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming `to`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;

    /// Swaps two directory entries in one atomic step. `Ok(false)` when the
    /// storage cannot (the caller falls back to two renames).
    ///
    /// # Errors
    /// [`crate::Error::Io`] for a failure other than "not supported".
    fn exchange(&self, a: &Path, b: &Path) -> Result<bool>;

    /// Removes a file; an absent file is not an error.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the file.
    fn remove_file(&self, path: &Path) -> Result<()>;

    /// Removes a directory and everything under it; an absent one is not an error.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the directory.
    fn remove_dir_all(&self, dir: &Path) -> Result<()>;

    /// Makes the creations, renames and removals inside `dir` durable.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the directory.
    fn sync_dir(&self, dir: &Path) -> Result<()>;

    /// Makes every file and directory under `dir` durable (what a library
    /// that does its own I/O, such as Lance, wrote there).
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the first path that fails.
    fn sync_tree(&self, dir: &Path) -> Result<()>;

    /// Takes the exclusive lock `path` (created if missing, never deleted):
    /// waits for it when `wait`, else returns `None` when another holder has it.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the lock file.
    fn lock(&self, path: &Path, wait: bool) -> Result<Option<Box<dyn LockGuard>>>;

    /// The URI Lance opens for the dataset directory `dir`.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] when `dir` cannot be named as a URI.
    fn lance_uri(&self, dir: &Path) -> Result<String>;

    /// Bytes of every file under `dir` (0 when absent).
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming a directory that cannot be listed.
    fn dir_size(&self, dir: &Path) -> Result<u64> {
        let mut total = 0;
        if !self.is_dir(dir) {
            return Ok(0);
        }
        for e in self.list(dir)? {
            match e.kind {
                EntryKind::Dir => total += self.dir_size(&e.path)?,
                EntryKind::File => total += e.len,
                EntryKind::Other => {}
            }
        }
        Ok(total)
    }

    /// Every regular file under `dir`, relative to it, sorted.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming a directory that cannot be listed.
    fn walk_files(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        fn go(
            s: &(impl Storage + ?Sized),
            root: &Path,
            d: &Path,
            out: &mut Vec<PathBuf>,
        ) -> Result<()> {
            for e in s.list(d)? {
                match e.kind {
                    EntryKind::Dir => go(s, root, &e.path, out)?,
                    EntryKind::File => {
                        out.push(e.path.strip_prefix(root).unwrap_or(&e.path).to_path_buf())
                    }
                    EntryKind::Other => {}
                }
            }
            Ok(())
        }
        let mut out = Vec::new();
        go(self, dir, dir, &mut out)?;
        out.sort();
        Ok(out)
    }
}

/// The storage a cache path lives on: an object store for `s3://bucket/key`
/// (with the `s3` feature), else the local filesystem.
pub fn storage_for(path: &Path) -> StorageRef {
    #[cfg(feature = "s3")]
    if object::is_object_uri(path) {
        return object::storage_for_uri(path);
    }
    #[cfg(not(feature = "s3"))]
    let _ = path;
    local()
}

/// The local filesystem, shared.
pub fn local() -> StorageRef {
    static LOCAL: OnceLock<StorageRef> = OnceLock::new();
    LOCAL.get_or_init(|| Arc::new(LocalFs)).clone()
}
