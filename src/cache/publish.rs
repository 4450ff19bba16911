//! Atomic publication of a cache directory.
//!
//! A build writes into `.<name>_tmp_<random>` beside the target. Publishing
//! fsyncs the temp dir, swaps it with an existing target in one step
//! (`renameat2(RENAME_EXCHANGE)`; where the filesystem refuses, the target is
//! first moved aside), renames the old generation to `.<name>_old_<random>`,
//! fsyncs the parent and only then deletes the old generation. At every
//! instant the target path is either the complete old cache or the complete
//! new one (absent for the width of one rename only on the fallback); a
//! crash leaves at most dot-prefixed left-overs, never a half-written target. If anything fails before publication, dropping the
//! [`StagingDir`] removes the temp dir.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::storage::StorageRef;
use crate::util::random_suffix;

/// Marks the temp dir of a build: `.<name>_tmp_<8 chars>`.
const TEMP_MARKER: &str = "_tmp_";
/// Marks a replaced generation awaiting deletion: `.<name>_old_<8 chars>`.
const OLD_MARKER: &str = "_old_";

/// What a dot-directory left beside a cache is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LeftoverKind {
    /// `.<name>_tmp_<suffix>`: the temp dir of a build that never published.
    Temp,
    /// `.<name>_old_<suffix>`: a replaced cache whose deletion was interrupted.
    Old,
}

impl LeftoverKind {
    fn marker(self) -> &'static str {
        match self {
            LeftoverKind::Temp => TEMP_MARKER,
            LeftoverKind::Old => OLD_MARKER,
        }
    }

    /// A fresh name of this kind for the cache `name`.
    fn fresh_name(self, name: &str) -> String {
        format!(".{name}{}{}", self.marker(), random_suffix())
    }

    /// The prefix every left-over of this kind of the cache `name` starts with.
    fn prefix(self, name: &str) -> String {
        format!(".{name}{}", self.marker())
    }
}

/// Parses a left-over's directory name into (cache name, kind); `None` for
/// any other name.
pub fn parse_leftover(file_name: &str) -> Option<(String, LeftoverKind)> {
    let rest = file_name.strip_prefix('.')?;
    for kind in [LeftoverKind::Temp, LeftoverKind::Old] {
        if let Some((name, suffix)) = rest.rsplit_once(kind.marker()) {
            let ok = suffix.len() == 8
                && suffix
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
            if ok && !name.is_empty() {
                return Some((name.to_string(), kind));
            }
        }
    }
    None
}

/// A temp directory that becomes a cache on [`StagingDir::publish`] and is
/// removed if dropped unpublished (error or panic).
#[derive(Debug)]
pub struct StagingDir {
    storage: StorageRef,
    tmp: PathBuf,
    target: PathBuf,
    armed: bool,
}

fn file_name(target: &Path) -> Result<String> {
    target
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_string)
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "cache directory {} has no UTF-8 file name",
                target.display()
            ))
        })
}

fn parent_of(target: &Path) -> &Path {
    target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// The left-overs beside `target` whose names start with one of `kinds`' prefixes.
fn leftovers(storage: &StorageRef, target: &Path, kinds: &[LeftoverKind]) -> Vec<PathBuf> {
    let Ok(name) = file_name(target) else {
        return Vec::new();
    };
    let prefixes: Vec<String> = kinds.iter().map(|k| k.prefix(&name)).collect();
    storage
        .list(parent_of(target))
        .map(|entries| {
            entries
                .into_iter()
                .filter(|e| {
                    let n = e.name();
                    prefixes.iter().any(|p| n.starts_with(p.as_str()))
                })
                .map(|e| e.path)
                .collect()
        })
        .unwrap_or_default()
}

/// Removes `.<name>_tmp_*` and `.<name>_old_*` beside `target`: what a killed
/// build or publish leaves. Call only while holding the cache's lock.
/// Returns the paths removed.
pub fn remove_leftovers(storage: &StorageRef, target: &Path) -> Vec<PathBuf> {
    leftovers(storage, target, &[LeftoverKind::Temp, LeftoverKind::Old])
        .into_iter()
        .filter(|p| storage.remove_dir_all(p).is_ok())
        .collect()
}

/// Removes only `.<name>_old_*` beside `target` (replaced generations whose
/// deletion was interrupted). Call only while holding the cache's lock.
pub fn remove_leftovers_old(storage: &StorageRef, target: &Path) {
    for p in leftovers(storage, target, &[LeftoverKind::Old]) {
        let _ = storage.remove_dir_all(&p);
    }
}

/// Temp dirs of `target` (`.<name>_tmp_*`), sorted.
pub fn temp_dirs(storage: &StorageRef, target: &Path) -> Vec<PathBuf> {
    leftovers(storage, target, &[LeftoverKind::Temp])
}

impl StagingDir {
    /// Takes over an existing temp dir (a killed build being resumed).
    pub fn adopt(storage: &StorageRef, tmp: &Path, target: &Path) -> Self {
        StagingDir {
            storage: storage.clone(),
            tmp: tmp.to_path_buf(),
            target: target.to_path_buf(),
            armed: true,
        }
    }

    /// Keeps the temp dir on drop (so a failed build can be resumed).
    pub fn keep_on_drop(&mut self) {
        self.armed = false;
    }

    /// Creates `.<name>_tmp_<random>` beside `target` (creating the parent).
    ///
    /// # Errors
    /// [`Error::Io`] naming the directory that could not be created.
    pub fn create(storage: &StorageRef, target: &Path) -> Result<Self> {
        let name = file_name(target)?;
        let parent = parent_of(target);
        storage.create_dir_all(parent)?;
        loop {
            let tmp = parent.join(LeftoverKind::Temp.fresh_name(&name));
            if storage.create_dir(&tmp)? {
                return Ok(StagingDir::adopt(storage, &tmp, target));
            }
        }
    }

    /// The temp directory to write into.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// The final cache directory.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The storage the cache is written to.
    pub fn storage(&self) -> &StorageRef {
        &self.storage
    }

    /// Makes the temp dir the cache, replacing any existing one atomically.
    /// The caller must hold the cache lock and have made every file durable.
    ///
    /// Where the storage can (Linux `renameat2(RENAME_EXCHANGE)`), the
    /// new cache and the old one swap places in one step, so the target is
    /// never absent; elsewhere the old cache is renamed aside first, leaving
    /// the target absent for the width of one rename.
    ///
    /// # Errors
    /// [`Error::Io`] naming the failing rename or fsync. On error the previous
    /// cache (if any) is back in place and the temp dir is removed.
    pub fn publish(mut self) -> Result<()> {
        let s = self.storage.clone();
        let parent = parent_of(&self.tmp).to_path_buf();
        s.sync_dir(&self.tmp)?;
        crate::util::fault_point("publish:before-rename");
        if !s.exists(&self.target) {
            s.rename(&self.tmp, &self.target)?;
            self.armed = false;
            crate::util::fault_point("publish:after-rename");
            return s.sync_dir(&parent);
        }
        let mut old = parent.join(LeftoverKind::Old.fresh_name(&file_name(&self.target)?));
        if matches!(s.exchange(&self.tmp, &self.target), Ok(true)) {
            // The new cache is in; the old one now sits at the temp name.
            self.armed = false;
            crate::util::fault_point("publish:after-move-aside");
            if s.rename(&self.tmp, &old).is_err() {
                old = self.tmp.clone();
            }
        } else {
            s.rename(&self.target, &old)?;
            crate::util::fault_point("publish:after-move-aside");
            if let Err(e) = s.rename(&self.tmp, &self.target) {
                // Put the previous generation back; the temp dir is removed on drop.
                let _ = s.rename(&old, &self.target);
                return Err(e);
            }
            self.armed = false;
        }
        crate::util::fault_point("publish:after-rename");
        s.sync_dir(&parent)?;
        // The new cache is durable; a failure here only leaves garbage that
        // `gc` (or the next build) removes.
        let _ = s.remove_dir_all(&old);
        Ok(())
    }
}

impl Drop for StagingDir {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.storage.remove_dir_all(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_staging_dir_is_removed() {
        let d = tempfile::tempdir().unwrap();
        let s = StagingDir::create(&crate::storage::local(), &d.path().join("c")).unwrap();
        let tmp = s.path().to_path_buf();
        std::fs::write(tmp.join("f"), b"x").unwrap();
        drop(s);
        assert!(!tmp.exists());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn leftovers_of_this_cache_only_are_removed() {
        let d = tempfile::tempdir().unwrap();
        for n in [".c_tmp_abc", ".c_old_def", ".cc_tmp_x", "c"] {
            std::fs::create_dir(d.path().join(n)).unwrap();
        }
        let removed = remove_leftovers(&crate::storage::local(), &d.path().join("c"));
        assert_eq!(removed.len(), 2);
        let mut left: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, vec![".cc_tmp_x", "c"]);
    }

    #[test]
    fn publish_replaces_existing_and_leaves_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("c");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("old"), b"1").unwrap();
        let s = StagingDir::create(&crate::storage::local(), &target).unwrap();
        std::fs::write(s.path().join("new"), b"2").unwrap();
        s.publish().unwrap();
        assert!(target.join("new").exists());
        assert!(!target.join("old").exists());
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("c")]);
    }

    #[test]
    fn leftover_names() {
        assert_eq!(
            parse_leftover(".ds_default_train_0123456789abcdef_tmp_ab12cd34"),
            Some((
                "ds_default_train_0123456789abcdef".into(),
                LeftoverKind::Temp
            ))
        );
        assert_eq!(
            parse_leftover(".c_old_zzzzzzzz"),
            Some(("c".into(), LeftoverKind::Old))
        );
        assert_eq!(parse_leftover(".c_tmp_short"), None);
        assert_eq!(parse_leftover("c_tmp_ab12cd34"), None);
        assert_eq!(parse_leftover(".c_tmp_AB12CD34"), None);
        let fresh = LeftoverKind::Temp.fresh_name("c");
        assert_eq!(
            parse_leftover(&fresh),
            Some(("c".into(), LeftoverKind::Temp))
        );
    }
}
