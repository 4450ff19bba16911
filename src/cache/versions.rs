//! Versions of a cache made by edits: each commit of staged edits writes the
//! new version's metadata to `_cache_versions/<id>.json` and then replaces
//! `_metadata.json` with the same bytes (the commit point). A build is
//! version 1 and records no `version` key; the first commit keeps a copy of
//! its metadata as `_cache_versions/1.json`, so every version stays openable
//! until `gc` removes it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cache::metadata::CacheMetadata;
use crate::error::{Error, Result};
use crate::storage::Storage;

/// The directory of version files inside a cache (not `_versions`, which
/// is a Lance dataset's own).
pub const VERSIONS_DIR: &str = "_cache_versions";

/// The metadata file of version `id`.
pub fn version_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(VERSIONS_DIR).join(format!("{id}.json"))
}

/// What made a version (the `version` key of its metadata).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionInfo {
    /// This version (a build is 1; each commit adds one).
    pub id: u64,
    /// The version the edits were staged on.
    pub parent: u64,
    /// When it was committed, in milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
    /// What changed.
    pub change: ChangeSummary,
}

/// What a commit changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeSummary {
    /// Whole rows replaced.
    pub rows_set: u64,
    /// Single cells replaced.
    pub cells_set: u64,
    /// Rows deleted.
    pub rows_deleted: u64,
    /// Rows appended.
    pub rows_appended: u64,
    /// Shards written anew because rows in them changed.
    pub shards_rewritten: u64,
    /// Shards shared, unchanged, with the parent version.
    pub shards_reused: u64,
    /// Shards holding appended rows.
    pub shards_new: u64,
    /// Shards dropped because every row in them was deleted.
    pub shards_removed: u64,
    /// Bytes of shard files written.
    pub bytes_written: u64,
    /// The committer's message, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One version of a cache, as `shardset log` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionEntry {
    /// The version id.
    pub id: u64,
    /// Rows in that version.
    pub num_rows: u64,
    /// Shards in that version.
    pub num_shards: u64,
    /// How it was made (`None` for the build, version 1).
    pub info: Option<VersionInfo>,
    /// True for the version `_metadata.json` holds.
    pub current: bool,
}

/// The version id a cache's metadata records (1 when it records none).
pub fn version_id(meta: &CacheMetadata) -> u64 {
    version_info(meta).map_or(1, |v| v.id)
}

/// The `version` key of a cache's metadata (layouts that are edited).
pub fn version_info(meta: &CacheMetadata) -> Option<&VersionInfo> {
    match meta {
        CacheMetadata::ArrowShards(m) => m.version.as_ref(),
        CacheMetadata::LanceRows(m) => m.version.as_ref(),
        _ => None,
    }
}

/// Reads the metadata of version `id` of the cache at `dir` (the current
/// one from `_metadata.json`, older ones from their version files).
///
/// # Errors
/// [`Error::Metadata`] naming the version file when there is no such
/// version (never committed, or removed by `gc`), or any error of
/// [`CacheMetadata::read_in`].
pub fn read_version(storage: &dyn Storage, dir: &Path, id: u64) -> Result<CacheMetadata> {
    let current = CacheMetadata::read_in(storage, dir)?;
    let now = version_id(&current);
    if id == now {
        return Ok(current);
    }
    let path = version_path(dir, id);
    if id > now || !storage.is_file(&path) {
        return Err(Error::metadata(
            &path,
            format!(
                "no version {id} of this cache (the current one is {now}; `shardset log` lists those kept)"
            ),
        ));
    }
    CacheMetadata::read_at(storage, dir, &path)
}

/// The versions of the cache at `dir`, oldest first: those whose version
/// files are kept, and the current one. Files of a commit that never
/// reached its commit point (ids above the current one) are not versions.
///
/// # Errors
/// As [`CacheMetadata::read_in`]; a damaged version file is an error naming it.
pub fn list_versions(storage: &dyn Storage, dir: &Path) -> Result<Vec<VersionEntry>> {
    let current = CacheMetadata::read_in(storage, dir)?;
    let now = version_id(&current);
    let mut out = Vec::new();
    for id in kept_version_ids(storage, dir)? {
        if id >= now {
            continue;
        }
        let m = CacheMetadata::read_at(storage, dir, &version_path(dir, id))?;
        out.push(VersionEntry {
            id,
            num_rows: m.num_rows(),
            num_shards: shard_count(&m),
            info: version_info(&m).cloned(),
            current: false,
        });
    }
    out.push(VersionEntry {
        id: now,
        num_rows: current.num_rows(),
        num_shards: shard_count(&current),
        info: version_info(&current).cloned(),
        current: true,
    });
    Ok(out)
}

/// Shards (Arrow files or Lance fragments) a version records.
fn shard_count(meta: &CacheMetadata) -> u64 {
    match meta {
        CacheMetadata::ArrowShards(m) => m.num_shards,
        CacheMetadata::LanceRows(m) => m.fragment_row_counts.as_ref().map_or(0, |c| c.len() as u64),
        CacheMetadata::VideoFrames(_) => 0,
    }
}

/// The ids of the version files under `dir`, sorted.
///
/// # Errors
/// [`Error::Io`] naming the directory.
pub fn kept_version_ids(storage: &dyn Storage, dir: &Path) -> Result<Vec<u64>> {
    let vdir = dir.join(VERSIONS_DIR);
    if !storage.is_dir(&vdir) {
        return Ok(Vec::new());
    }
    let mut ids: Vec<u64> = storage
        .list(&vdir)?
        .into_iter()
        .filter_map(|e| e.name().strip_suffix(".json")?.parse().ok())
        .collect();
    ids.sort_unstable();
    Ok(ids)
}
