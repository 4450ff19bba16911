//! Removing old versions of an edited cache ([`gc_versions`]) and the
//! files of a commit that never reached its commit point.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::cache::lock::CacheLock;
use crate::cache::metadata::CacheMetadata;
#[cfg(feature = "lance")]
use crate::cache::metadata::LanceRowsMetadata;
use crate::cache::rowsum;
#[cfg(feature = "lance")]
use crate::cache::versions::VERSIONS_DIR;
use crate::cache::versions::{kept_version_ids, version_id, version_path};
use crate::error::{Error, Result};
#[cfg(feature = "lance")]
use crate::layouts::lance_rows::edit as lance_edit;

/// Removes the shard files (and their row checksums) named after
/// `version`, and its version file.
pub(super) fn remove_version_files(
    storage: &dyn crate::storage::Storage,
    dir: &Path,
    version: u64,
) -> Result<()> {
    let suffix = format!(".v{version}.arrow");
    for e in storage.list(dir)? {
        let name = e.name();
        if e.is_file() && name.starts_with("shard-") && name.ends_with(&suffix) {
            remove_shard(storage, dir, &name)?;
        }
    }
    let v = version_path(dir, version);
    if storage.is_file(&v) {
        storage.remove_file(&v)?;
    }
    Ok(())
}

/// Removes a shard file and its row checksum files, if any.
fn remove_shard(storage: &dyn crate::storage::Storage, dir: &Path, name: &str) -> Result<u64> {
    let mut freed = 0;
    for p in [
        dir.join(name),
        rowsum::sidecar(dir, name),
        rowsum::column_sidecar(dir, name),
    ] {
        if let Some(st) = storage.stat(&p)? {
            freed += st.len;
            storage.remove_file(&p)?;
        }
    }
    Ok(freed)
}

/// What [`gc_versions`] removed (or would remove, on a dry run).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionGc {
    /// Version ids whose metadata files were removed.
    pub versions: Vec<u64>,
    /// Shard files named by no kept version.
    pub files: Vec<PathBuf>,
    /// Bytes those files (and their row checksums) held.
    pub bytes: u64,
}

/// Keeps the newest `keep` versions of the `arrow-shards` cache at `dir`
/// (the current one always) and removes the older versions' metadata
/// files and every shard file that no kept version names, under the
/// cache's lock. A reader still holding a removed version keeps the shards
/// it has mapped; the shards it has not opened yet are gone.
///
/// # Errors
/// [`Error::InvalidArgument`] for `keep == 0`; a metadata or I/O error
/// naming the file.
pub fn gc_versions(dir: &Path, keep: usize, dry_run: bool) -> Result<VersionGc> {
    if keep == 0 {
        return Err(Error::InvalidArgument(
            "keep at least one version (the current one)".into(),
        ));
    }
    let storage = crate::storage::storage_for(dir);
    let storage = storage.as_ref();
    let _lock = CacheLock::acquire(dir)?;
    let current = CacheMetadata::read_in(storage, dir)?;
    let now = version_id(&current);
    let ids: Vec<u64> = kept_version_ids(storage, dir)?
        .into_iter()
        .filter(|&id| id < now)
        .collect();
    let older = ids.len().saturating_sub(keep - 1);
    let (drop, kept) = ids.split_at(older);
    #[cfg(feature = "lance")]
    if let CacheMetadata::LanceRows(m) = &current {
        return gc_lance_versions(storage, dir, m, now, drop, kept, dry_run);
    }
    let mut named: BTreeSet<String> = BTreeSet::new();
    if let Some(m) = current.as_arrow_shards() {
        named.extend(m.shard_filenames.iter().cloned());
    }
    for &id in kept {
        // Below the current version: its own file (read_version would read
        // `_metadata.json` again for each).
        let meta = CacheMetadata::read_at(storage, dir, &version_path(dir, id))?;
        if let Some(m) = meta.as_arrow_shards() {
            named.extend(m.shard_filenames.iter().cloned());
        }
    }
    let mut out = VersionGc {
        versions: drop.to_vec(),
        ..VersionGc::default()
    };
    // Files of versions above the current one (a commit that never reached
    // its commit point) are named by nothing and go too.
    for e in storage.list(dir)? {
        let name = e.name();
        if e.is_file()
            && name.starts_with("shard-")
            && name.ends_with(".arrow")
            && !named.contains(&name)
        {
            out.files.push(e.path.clone());
            if dry_run {
                out.bytes += e.len;
            } else {
                out.bytes += remove_shard(storage, dir, &name)?;
            }
        }
    }
    for id in kept_version_ids(storage, dir)? {
        let stale = id > now || drop.contains(&id);
        if stale && !dry_run {
            storage.remove_file(&version_path(dir, id))?;
        }
    }
    if !dry_run {
        storage.sync_dir(dir)?;
    }
    Ok(out)
}

/// [`gc_versions`] of a `lance-rows` cache: the dropped versions' files go,
/// a Lance commit whose cache version never became current is undone, and
/// Lance's cleanup removes the Lance versions older than the oldest kept
/// one with the data files only they use.
#[cfg(feature = "lance")]
fn gc_lance_versions(
    storage: &dyn crate::storage::Storage,
    dir: &Path,
    current: &LanceRowsMetadata,
    now: u64,
    drop: &[u64],
    kept: &[u64],
    dry_run: bool,
) -> Result<VersionGc> {
    let lance_of = |id: u64| -> Result<Option<u64>> {
        Ok(
            match CacheMetadata::read_at(storage, dir, &version_path(dir, id))? {
                CacheMetadata::LanceRows(m) => m.lance_version,
                _ => None,
            },
        )
    };
    let current_lance = crate::layouts::open::lance_version_of(storage, dir, current)?;
    let mut out = VersionGc {
        versions: drop.to_vec(),
        ..VersionGc::default()
    };
    // A build never edited records no Lance version: nothing to clean.
    let Some(current_lance) = current_lance else {
        return Ok(out);
    };
    let mut keep_lance = vec![current_lance];
    for &id in kept {
        keep_lance.extend(lance_of(id)?);
    }
    let used = lance_edit::data_files_of(dir, &keep_lance)?;
    let data = dir.join("data");
    if storage.is_dir(&data) {
        for e in storage.list(&data)? {
            if e.is_file() && !used.contains(&e.name()) {
                out.bytes += e.len;
                out.files.push(e.path.clone());
            }
        }
    }
    if dry_run {
        return Ok(out);
    }
    if lance_edit::latest_version(dir)? != current_lance {
        lance_edit::restore(dir, current_lance)?;
    }
    for id in kept_version_ids(storage, dir)? {
        if id > now || drop.contains(&id) {
            storage.remove_file(&version_path(dir, id))?;
        }
    }
    let oldest = keep_lance.iter().copied().min().unwrap_or(current_lance);
    lance_edit::cleanup_before(dir, oldest)?;
    if storage.is_file(&dir.join(crate::cache::checksums::CHECKSUMS_FILE)) {
        crate::cache::checksums::update_file_checksums(storage, dir, &[VERSIONS_DIR])?;
    }
    storage.sync_dir(dir)?;
    Ok(out)
}
