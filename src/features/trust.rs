//! Which files a cache's cells may name.
//!
//! Caches are shared: users open caches a colleague, a hub or a bucket gave
//! them. A `Video(storage='path')` cell names a file, which the reference
//! resolves as given (absolute as is, relative under `_assets/video/`) and
//! FFmpeg then opens: a crafted cache could read any file of the machine
//! (`/etc/…`, `../../…`), hang its reader on a FIFO, or hand FFmpeg a
//! protocol string (`concat:`, `http:`). So a stored path must resolve,
//! after `..` and symlinks are resolved, to a regular file inside the
//! cache's own directory, or inside a root the user trusts by name
//! ([`TrustedRoots`]: `OpenOptions::with_trusted_roots`,
//! `open_cache(trusted_roots=[...])`, `SHARDSET_TRUSTED_ROOTS`). Anything else
//! is an error naming the path and what to pass, before any file is opened.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};

/// The environment variable naming trusted roots, separated by `:`.
pub const TRUSTED_ROOTS_ENV: &str = "SHARDSET_TRUSTED_ROOTS";

/// Directories outside a cache whose files its cells may name, kept
/// canonical (absolute, symlinks resolved).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedRoots(Arc<[PathBuf]>);

impl TrustedRoots {
    /// Trusts `roots` (and everything below them).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming a root that is not an existing
    /// directory.
    pub fn try_new<P: AsRef<Path>>(roots: impl IntoIterator<Item = P>) -> Result<Self> {
        let mut out = Vec::new();
        for r in roots {
            let r = r.as_ref();
            let c = std::fs::canonicalize(r).map_err(|e| {
                Error::InvalidArgument(format!(
                    "trusted root {}: {e}; name an existing directory",
                    r.display()
                ))
            })?;
            if !c.is_dir() {
                return Err(Error::InvalidArgument(format!(
                    "trusted root {} is not a directory",
                    r.display()
                )));
            }
            out.push(c);
        }
        Ok(TrustedRoots(out.into()))
    }

    /// The roots `SHARDSET_TRUSTED_ROOTS` names (none when it is unset).
    ///
    /// # Errors
    /// As [`TrustedRoots::try_new`], naming the variable.
    pub fn from_env() -> Result<Self> {
        match std::env::var_os(TRUSTED_ROOTS_ENV) {
            None => Ok(Self::default()),
            Some(v) => {
                let v = v.to_string_lossy().into_owned();
                Self::try_new(v.split(':').filter(|s| !s.is_empty()))
                    .map_err(|e| Error::InvalidArgument(format!("{TRUSTED_ROOTS_ENV}: {e}")))
            }
        }
    }

    /// These roots and `other`'s.
    pub fn merged(&self, other: &TrustedRoots) -> Self {
        let mut v: Vec<PathBuf> = self.0.to_vec();
        v.extend(other.0.iter().filter(|r| !self.0.contains(r)).cloned());
        TrustedRoots(v.into())
    }

    /// The canonical roots.
    pub fn roots(&self) -> &[PathBuf] {
        &self.0
    }
}

/// True for a string FFmpeg would take as a protocol or URL (`concat:a|b`,
/// `http://…`, `file:x`, `subfile,,…:x`): FFmpeg's own rule, a run of
/// scheme characters followed by a colon (spaces counted among them too,
/// which refuses a little more than FFmpeg would take as a protocol).
fn names_a_protocol(s: &str) -> bool {
    let scheme = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || "+-. ".contains(c)))
        .map_or(s, |i| &s[..i]);
    (!scheme.is_empty() && s[scheme.len()..].starts_with(':')) || s.starts_with("subfile,")
}

/// What kind of file `m` is, for an error.
fn kind_of(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// Resolves a stored video path cell: relative under `<cache>/_assets/video/`
/// (the reference's rule), absolute as is; then it must be a regular file
/// inside the cache's directory or a trusted root. `cache_dir` None (cells
/// decoded outside any cache): only trusted roots, and absolute paths.
///
/// # Errors
/// A message naming the stored path, where it resolves and why it is
/// refused (outside the cache, a FIFO, a device, a protocol string, missing),
/// with what to pass to trust its location.
pub fn resolve_stored_path(
    stored: &str,
    cache_dir: Option<&Path>,
    trusted: &TrustedRoots,
) -> std::result::Result<PathBuf, String> {
    let refuse = |why: String| format!("video path {stored:?} is refused: {why}");
    if stored.is_empty() || stored.contains('\0') {
        return Err(refuse("empty or holding a NUL byte".into()));
    }
    if names_a_protocol(stored) {
        return Err(refuse(
            "it names a protocol or URL, and a cache may only name files".into(),
        ));
    }
    let p = Path::new(stored);
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        match cache_dir {
            Some(d) => d.join(super::video::ASSETS_DIR).join(p),
            None => {
                return Err(refuse(
                    "a relative path outside any cache names no file".into(),
                ))
            }
        }
    };
    let real =
        std::fs::canonicalize(&joined).map_err(|e| refuse(format!("{}: {e}", joined.display())))?;
    // `real` is canonical, so a prefix of it names a real directory: a
    // cache directory already canonical (as `open_cache` passes it) needs
    // no lookup per cell.
    let inside_cache = cache_dir.is_some_and(|d| {
        real.starts_with(d) || std::fs::canonicalize(d).is_ok_and(|d| real.starts_with(d))
    });
    if !inside_cache && !trusted.roots().iter().any(|r| real.starts_with(r)) {
        let dir = real.parent().unwrap_or(Path::new("/"));
        return Err(refuse(format!(
            "it resolves to {}, outside the cache{}; a cache may only name files inside itself. If you trust that location, name it: OpenOptions::with_trusted_roots, open_cache(..., trusted_roots=[{:?}]) or {TRUSTED_ROOTS_ENV}={}",
            real.display(),
            cache_dir.map(|d| format!(" {}", d.display())).unwrap_or_default(),
            dir.display(),
            dir.display()
        )));
    }
    let m = std::fs::metadata(&real).map_err(|e| refuse(format!("{}: {e}", real.display())))?;
    if !m.is_file() {
        return Err(refuse(format!("{} is {}", real.display(), kind_of(&m))));
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_are_told_from_file_names() {
        for s in [
            "concat:a.mp4|b.mp4",
            "http://x/y",
            "file:a.mp4",
            "hls+http://x",
            "subfile,,0,:x",
            "c:",
        ] {
            assert!(names_a_protocol(s), "{s}");
        }
        for s in ["a.mp4", "/abs/a:b.mp4", "dir/x.mp4", "../a.mp4"] {
            assert!(!names_a_protocol(s), "{s}");
        }
    }
}
