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
use crate::util::{fsync_dir, random_suffix};

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

/// Removes `.<name>_tmp_*` and `.<name>_old_*` beside `target`: what a killed
/// build or publish leaves. Call only while holding the cache's lock.
/// Returns the paths removed.
pub fn remove_leftovers(target: &Path) -> Vec<PathBuf> {
    let Ok(name) = file_name(target) else {
        return Vec::new();
    };
    let parent = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let (tmp, old) = (
        LeftoverKind::Temp.prefix(&name),
        LeftoverKind::Old.prefix(&name),
    );
    let mut removed = Vec::new();
    if let Ok(entries) = std::fs::read_dir(parent) {
        for e in entries.flatten() {
            let n = e.file_name();
            let n = n.to_string_lossy();
            if n.starts_with(&tmp) || n.starts_with(&old) {
                let p = e.path();
                if std::fs::remove_dir_all(&p).is_ok() {
                    removed.push(p);
                }
            }
        }
    }
    removed
}

/// Removes only `.<name>_old_*` beside `target` (replaced generations whose
/// deletion was interrupted). Call only while holding the cache's lock.
pub fn remove_leftovers_old(target: &Path) {
    let Ok(name) = file_name(target) else {
        return;
    };
    let parent = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let old = LeftoverKind::Old.prefix(&name);
    if let Ok(entries) = std::fs::read_dir(parent) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(&old) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

impl StagingDir {
    /// Takes over an existing temp dir (a killed build being resumed).
    pub fn adopt(tmp: &Path, target: &Path) -> Self {
        StagingDir {
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
    pub fn create(target: &Path) -> Result<Self> {
        let name = file_name(target)?;
        let parent = target
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(|e| Error::io("create directory", parent, e))?;
        loop {
            let tmp = parent.join(LeftoverKind::Temp.fresh_name(&name));
            match std::fs::create_dir(&tmp) {
                Ok(()) => {
                    return Ok(StagingDir {
                        tmp,
                        target: target.to_path_buf(),
                        armed: true,
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io("create directory", &tmp, e)),
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

    /// Makes the temp dir the cache, replacing any existing one atomically.
    /// The caller must hold the cache lock and have fsynced every file.
    ///
    /// Where the filesystem can (Linux `renameat2(RENAME_EXCHANGE)`), the
    /// new cache and the old one swap places in one step, so the target is
    /// never absent; elsewhere the old cache is renamed aside first, leaving
    /// the target absent for the width of one rename.
    ///
    /// # Errors
    /// [`Error::Io`] naming the failing rename or fsync. On error the previous
    /// cache (if any) is back in place and the temp dir is removed.
    pub fn publish(mut self) -> Result<()> {
        let parent = self.tmp.parent().unwrap_or(Path::new(".")).to_path_buf();
        fsync_dir(&self.tmp)?;
        crate::util::fault_point("publish:before-rename");
        if std::fs::symlink_metadata(&self.target).is_err() {
            std::fs::rename(&self.tmp, &self.target)
                .map_err(|e| Error::io("publish (rename)", &self.target, e))?;
            self.armed = false;
            crate::util::fault_point("publish:after-rename");
            return fsync_dir(&parent);
        }
        let mut old = parent.join(LeftoverKind::Old.fresh_name(&file_name(&self.target)?));
        match exchange(&self.tmp, &self.target) {
            Ok(()) => {
                // The new cache is in; the old one now sits at the temp name.
                self.armed = false;
                crate::util::fault_point("publish:after-move-aside");
                if std::fs::rename(&self.tmp, &old).is_err() {
                    old = self.tmp.clone();
                }
            }
            Err(_) => {
                std::fs::rename(&self.target, &old)
                    .map_err(|e| Error::io("move aside old cache", &self.target, e))?;
                crate::util::fault_point("publish:after-move-aside");
                if let Err(e) = std::fs::rename(&self.tmp, &self.target) {
                    // Put the previous generation back; the temp dir is removed on drop.
                    let _ = std::fs::rename(&old, &self.target);
                    return Err(Error::io("publish (rename)", &self.target, e));
                }
                self.armed = false;
            }
        }
        crate::util::fault_point("publish:after-rename");
        fsync_dir(&parent)?;
        // The new cache is durable; a failure here only leaves garbage that
        // `gc` (or the next build) removes.
        let _ = std::fs::remove_dir_all(&old);
        Ok(())
    }
}

/// Swaps two directory entries in one step (Linux `renameat2` with
/// `RENAME_EXCHANGE`). An error where the kernel or filesystem does not
/// support it; the caller falls back to two renames.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let ca = CString::new(a.as_os_str().as_bytes())?;
    let cb = CString::new(b.as_os_str().as_bytes())?;
    // SAFETY: two valid NUL-terminated paths, relative to the working directory.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

impl Drop for StagingDir {
    fn drop(&mut self) {
        if self.armed {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// Temp dirs of `target` (`.<name>_tmp_*`).
pub fn temp_dirs(target: &Path) -> Vec<PathBuf> {
    let Some(name) = target.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    let prefix = LeftoverKind::Temp.prefix(name);
    let parent = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut out: Vec<PathBuf> = std::fs::read_dir(parent)
        .map(|it| {
            it.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_staging_dir_is_removed() {
        let d = tempfile::tempdir().unwrap();
        let s = StagingDir::create(&d.path().join("c")).unwrap();
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
        let removed = remove_leftovers(&d.path().join("c"));
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
        let s = StagingDir::create(&target).unwrap();
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
