//! What `shardset verify` does, for every layout by one rule: check the
//! structure always, the data bytes where checksums are recorded, and say
//! exactly which of those were done.
//!
//! - **Structure**: the metadata parses and agrees with itself (opening the
//!   cache checks that), every shard or Lance fragment opens, every record
//!   batch decodes, the row counts add up to what the metadata records, every
//!   shard has the schema of the features; for frames caches every row is the
//!   frame its video's entry says, and every frame is a WebP of the recorded
//!   size.
//! - **Checksums**: the xxh64 of each shard recorded in `_metadata.json`
//!   (shardset-written Arrow caches), per-row checksums to name the rows of a
//!   damaged shard, and the file checksums of a [`CHECKSUMS_FILE`] that
//!   [`stamp_checksums`] recorded for a cache written without them.
//!
//! A cache that records no checksums (written by the reference, or a Lance
//! cache never stamped) can have a flipped byte in a data buffer that still
//! decodes: the report says its data bytes were not verified, never that
//! they match.

mod data_bytes;
#[cfg(feature = "video")]
mod frames;
mod structure;

use std::path::{Path, PathBuf};

use crate::cache::checksums::write_file_checksums;
use crate::cache::lock::CacheLock;
#[cfg(feature = "lance")]
use crate::cache::metadata::LAYOUT_LANCE_ROWS;
#[cfg(feature = "video")]
use crate::cache::metadata::LAYOUT_LANCE_VIDEO_FRAMES;
use crate::cache::metadata::{LAYOUT_ARROW_SHARDS, METADATA_FILE};
use crate::error::{Error, Result};
use crate::layouts::open::open_cache;
use crate::storage::storage_for;

use data_bytes::checksums;
use structure::structure_arrow;
#[cfg(feature = "lance")]
use structure::structure_lance;

/// File checksums recorded by [`stamp_checksums`] for a cache whose writer
/// recorded none. The reference never reads it, so stamping changes nothing
/// the reference sees.
pub use crate::cache::checksums::CHECKSUMS_FILE;

/// One damaged place a verification found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The damaged file (a shard, a Lance data file, the metadata).
    pub path: PathBuf,
    /// Global rows known to be changed, where per-row checksums tell.
    pub rows: Vec<u64>,
    /// What is wrong.
    pub reason: String,
}

/// What [`verify_cache`] checked and what it found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// The cache directory.
    pub dir: PathBuf,
    /// Its layout (empty when the metadata could not be read).
    pub layout: String,
    /// Each check that was made, in words.
    pub checked: Vec<String>,
    /// Each check that could not be made, and why.
    pub not_checked: Vec<String>,
    /// What was found damaged (empty: no damage found).
    pub damage: Vec<Damage>,
    /// True when checksums covered every data file's bytes.
    pub data_bytes_verified: bool,
}

impl VerifyReport {
    /// True when no damage was found.
    pub fn is_ok(&self) -> bool {
        self.damage.is_empty()
    }

    /// One line saying what was checked: for messages such as `why`'s.
    pub fn summary(&self) -> String {
        let mut parts = self.checked.clone();
        parts.extend(self.not_checked.iter().cloned());
        parts.join("; ")
    }

    fn damaged(&mut self, path: &Path, reason: impl Into<String>) {
        self.damage.push(Damage {
            path: path.to_path_buf(),
            rows: Vec::new(),
            reason: reason.into(),
        });
    }
}

/// The path of `e`'s file when it names one, else `fallback`.
fn error_path(e: &Error, fallback: &Path) -> PathBuf {
    match e {
        Error::Io { path, .. }
        | Error::Metadata { path, .. }
        | Error::CorruptShard { path, .. }
        | Error::MissingShard { path }
        | Error::SchemaMismatch { path, .. }
        | Error::UnsupportedVersion { path, .. }
        | Error::UnsupportedLayout { path, .. }
        | Error::Video { path, .. } => path.clone(),
        Error::Arrow { path: Some(p), .. } => p.clone(),
        _ => fallback.to_path_buf(),
    }
}

/// Verifies the cache at `dir` (see the module doc for what that means).
/// Damage is reported, not returned as an error.
///
/// # Errors
/// [`Error::Io`] when `dir` has no `_metadata.json` at all (not a cache).
pub fn verify_cache(dir: &Path) -> Result<VerifyReport> {
    let meta_path = dir.join(METADATA_FILE);
    if !crate::storage::storage_for(dir).is_file(&meta_path) {
        return Err(Error::io(
            "open",
            &meta_path,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "not a cache (no _metadata.json)",
            ),
        ));
    }
    let mut rep = VerifyReport {
        dir: dir.to_path_buf(),
        layout: String::new(),
        checked: Vec::new(),
        not_checked: Vec::new(),
        damage: Vec::new(),
        data_bytes_verified: false,
    };
    let cache = match open_cache(dir) {
        Ok(c) => c,
        Err(e) => {
            rep.damaged(&error_path(&e, &meta_path), e.to_string());
            return Ok(rep);
        }
    };
    rep.layout = cache.layout.clone();
    rep.checked.push(
        if cache.metadata.has_self_checksum() {
            "metadata consistent and matching its own checksum"
        } else {
            "metadata consistent (it records no checksum of itself)"
        }
        .into(),
    );
    match cache.layout.as_str() {
        LAYOUT_ARROW_SHARDS => structure_arrow(&cache, &mut rep),
        #[cfg(feature = "lance")]
        LAYOUT_LANCE_ROWS => structure_lance(&cache, &mut rep, false),
        #[cfg(feature = "video")]
        LAYOUT_LANCE_VIDEO_FRAMES | crate::cache::metadata::LAYOUT_LANCE_VIDEO_SEGMENTS => {
            structure_lance(&cache, &mut rep, true)
        }
        other => rep.not_checked.push(format!(
            "structure of the {other} layout not checked: this build lacks its feature"
        )),
    }
    checksums(&cache, &mut rep);
    Ok(rep)
}

/// Records the xxh64 of every data file of a cache that records none, in
/// [`CHECKSUMS_FILE`] beside its metadata, so that later [`verify_cache`]
/// runs check its data bytes. Nothing the reference reads changes. The
/// cache's structure is verified first: a damaged cache is not stamped.
/// Returns the number of files stamped.
///
/// # Errors
/// [`Error::InvalidArgument`] when the cache is already stamped or found
/// damaged; I/O errors naming the file.
pub fn stamp_checksums(dir: &Path) -> Result<usize> {
    let storage = storage_for(dir);
    let _lock = CacheLock::acquire_in(&storage, dir)?;
    let path = dir.join(CHECKSUMS_FILE);
    if storage.exists(&path) {
        return Err(Error::InvalidArgument(format!(
            "{} already exists: the cache is stamped",
            path.display()
        )));
    }
    let rep = verify_cache(dir)?;
    if let Some(d) = rep.damage.first() {
        return Err(Error::InvalidArgument(format!(
            "not stamping a damaged cache: {}: {}",
            d.path.display(),
            d.reason
        )));
    }
    write_file_checksums(storage.as_ref(), dir, &[])
}
