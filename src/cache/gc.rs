//! Garbage collection: the temp dirs of builds that never published and the
//! replaced generations whose deletion was interrupted, found under a cache
//! root by their names (`.<name>_tmp_<8 chars>`, `.<name>_old_<8 chars>`) and
//! removed only when no live build holds the cache's lock.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cache::lock::{lock_path, CacheLock};
use crate::cache::metadata::METADATA_FILE;
use crate::cache::publish::parse_leftover;
pub use crate::cache::publish::LeftoverKind;
use crate::error::Result;
use crate::storage::storage_for;

/// How deep [`dirs_under`] looks below a root (`ROOT/processed/<cache>` is
/// depth 2; `--out DIR/<split>` is depth 1).
pub const MAX_DEPTH: usize = 4;

/// True when `dir` holds a `_metadata.json` (a published cache).
pub fn is_cache(dir: &Path) -> bool {
    storage_for(dir).is_file(&dir.join(METADATA_FILE))
}

/// Directories under `root` (not hidden, not inside a cache), breadth first
/// to [`MAX_DEPTH`], `root` included.
pub fn dirs_under(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    let mut level = vec![root.to_path_buf()];
    for _ in 0..MAX_DEPTH {
        let mut next = Vec::new();
        for d in &level {
            if is_cache(d) {
                continue;
            }
            let Ok(entries) = storage_for(d).list(d) else {
                continue;
            };
            let mut subs: Vec<PathBuf> = entries
                .into_iter()
                .filter(|e| !e.name().starts_with('.') && e.is_dir())
                .map(|e| e.path)
                .collect();
            subs.sort();
            next.extend(subs);
        }
        out.extend(next.iter().cloned());
        level = next;
    }
    out
}

/// Options of [`collect_garbage`].
#[derive(Debug, Clone, Copy, Default)]
pub struct GcOptions {
    min_age: Duration,
    dry_run: bool,
}

impl GcOptions {
    /// Leaves left-overs modified less than `age` ago (default: none left).
    pub fn with_min_age(mut self, age: Duration) -> Self {
        self.min_age = age;
        self
    }

    /// Reports what would be removed without removing it.
    pub fn with_dry_run(mut self, yes: bool) -> Self {
        self.dry_run = yes;
        self
    }

    /// Whether this is a dry run.
    pub fn dry_run(&self) -> bool {
        self.dry_run
    }
}

/// A left-over directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// The directory.
    pub path: PathBuf,
    /// The cache it belongs to.
    pub cache: PathBuf,
    /// Temp dir or replaced generation.
    pub kind: LeftoverKind,
    /// Bytes of its files.
    pub bytes: u64,
    /// Time since it was last modified.
    pub age: Duration,
}

/// Why a left-over was kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// Modified more recently than the minimum age.
    TooYoung,
    /// A live build holds the cache's lock.
    Locked,
}

/// What [`collect_garbage`] did.
#[derive(Debug, Clone, Default)]
pub struct GcReport {
    /// Removed (or, on a dry run, to be removed).
    pub removed: Vec<Leftover>,
    /// Kept, with the reason.
    pub kept: Vec<(Leftover, Kept)>,
    /// Bytes of the removed left-overs.
    pub bytes_freed: u64,
}

/// Removes the left-overs of every cache under `root` ([`dirs_under`]).
///
/// A left-over is removed only while holding its cache's lock (taken without
/// waiting), so the temp dir of a build in progress is never touched.
///
/// # Errors
/// [`crate::Error::Io`] naming a directory that could not be removed or locked.
pub fn collect_garbage(root: &Path, opts: &GcOptions) -> Result<GcReport> {
    let storage = storage_for(root);
    let mut report = GcReport::default();
    for parent in dirs_under(root) {
        if is_cache(&parent) {
            continue;
        }
        let Ok(entries) = storage.list(&parent) else {
            continue;
        };
        let mut found: Vec<(PathBuf, String, LeftoverKind, Duration)> = entries
            .into_iter()
            .filter(|e| e.is_dir())
            .filter_map(|e| {
                let age = e
                    .modified
                    .and_then(|t| t.elapsed().ok())
                    .unwrap_or_default();
                parse_leftover(&e.name()).map(|(name, kind)| (e.path, name, kind, age))
            })
            .collect();
        found.sort();
        for (path, name, kind, age) in found {
            let cache = parent.join(&name);
            let left = Leftover {
                bytes: storage.dir_size(&path).unwrap_or(0),
                path,
                cache,
                kind,
                age,
            };
            if age < opts.min_age {
                report.kept.push((left, Kept::TooYoung));
                continue;
            }
            // A builder holds `<cache>.lock` for as long as it writes its temp
            // dir; no lock file means no builder ever locked this cache here.
            let guard = if storage.exists(&lock_path(&left.cache)) {
                match CacheLock::try_acquire_in(&storage, &left.cache)? {
                    Some(g) => Some(g),
                    None => {
                        report.kept.push((left, Kept::Locked));
                        continue;
                    }
                }
            } else {
                None
            };
            if !opts.dry_run {
                storage.remove_dir_all(&left.path)?;
            }
            drop(guard);
            report.bytes_freed += left.bytes;
            report.removed.push(left);
        }
    }
    Ok(report)
}
