//! Removing what no committed build of a published cache uses: build
//! prefixes never committed (once older than a grace period), with the
//! multipart uploads their markers name aborted, and for the Lance layouts
//! old dataset versions and the data files only they use.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::cache::metadata::{CacheMetadata, BUILDS_DIR, METADATA_FILE};
use crate::error::Result;
use crate::storage::object::{uploaded_object, UPLOADS_DIR};
use crate::storage::Storage;

use super::target::Target;
#[cfg(not(feature = "lance"))]
use super::without_lance;
use super::LANCE_DATA_DIR;

/// What [`collect_object_garbage`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectGcReport {
    /// The committed build (none when the location has no metadata).
    pub committed: Option<String>,
    /// Build prefixes removed (or, in a dry run, that would be), and for a
    /// Lance-layout cache the data files no kept version uses.
    pub removed: Vec<PathBuf>,
    /// Their objects.
    pub objects: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Uncommitted prefixes left because they are younger than the grace period.
    pub kept_young: Vec<PathBuf>,
    /// A Lance-layout cache: versions of its dataset removed (older than
    /// the committed one and than the grace period).
    pub lance_versions_removed: u64,
    /// A Lance-layout cache: the version that made the committed one the
    /// newest again (a newer version no metadata names was undone).
    pub lance_restored: Option<u64>,
    /// Multipart uploads a killed build left unfinished, aborted (their
    /// parts deleted) with the build's prefix.
    pub uploads_aborted: usize,
}

/// Whether `dir` is a place [`collect_object_garbage`] has work in: a
/// cache, or a location whose first build never committed (build prefixes,
/// or upload markers of a Lance-layout build's data files).
pub fn is_publish_location(dir: &Path) -> bool {
    let has = |p: PathBuf| crate::storage::storage_for(&p).is_dir(&p);
    crate::cache::gc::is_cache(dir)
        || has(dir.join(BUILDS_DIR))
        || has(dir.join(LANCE_DATA_DIR).join(UPLOADS_DIR))
}

/// Removes the build prefixes of the cache at `uri` (an `s3://` location or
/// a directory published from parts) that its committed
/// `_metadata.json` does not name and whose newest object is at least
/// `min_age` old (a build still uploading is younger).
///
/// # Errors
/// [`Error::Io`](crate::error::Error::Io) naming the object a list or
/// delete failed on; [`Error::Metadata`](crate::error::Error::Metadata)
/// for a damaged committed metadata (nothing is removed).
pub fn collect_object_garbage(
    uri: &Path,
    min_age: Duration,
    dry_run: bool,
) -> Result<ObjectGcReport> {
    let target = Target::of(uri);
    let store = target.storage();
    let root_meta = uri.join(METADATA_FILE);
    let mut report = ObjectGcReport::default();
    let now = SystemTime::now();
    if store.is_file(&root_meta) {
        let common = crate::cache::metadata::read_common_in(store, uri)?;
        let meta = match common.build_dir()? {
            Some(b) => {
                report.committed = b
                    .strip_prefix(&format!("{BUILDS_DIR}/"))
                    .map(str::to_string);
                None
            }
            None => Some(CacheMetadata::read_in(store, uri)?),
        };
        if let Some(a) = meta.as_ref().and_then(|m| m.as_arrow_shards()) {
            report.committed = a.shard_filenames.iter().find_map(|n| {
                n.strip_prefix(&format!("{BUILDS_DIR}/"))
                    .and_then(|r| r.split('/').next())
                    .map(str::to_string)
            });
        }
        if let Some(v) = meta.as_ref().and_then(committed_lance_version) {
            collect_lance_versions(&target, uri, v, min_age, dry_run, now, &mut report)?;
        }
    }
    let builds_dir = uri.join(BUILDS_DIR);
    let objects = target.walk(&builds_dir)?;
    let mut by_build: std::collections::BTreeMap<String, Vec<crate::storage::Entry>> =
        Default::default();
    let base = format!("{}/", builds_dir.to_string_lossy().trim_end_matches('/'));
    for e in objects {
        let s = e.path.to_string_lossy().into_owned();
        if let Some(id) = s.strip_prefix(&base).and_then(|r| r.split('/').next()) {
            by_build.entry(id.to_string()).or_default().push(e);
        }
    }
    for (id, entries) in by_build {
        if report.committed.as_deref() == Some(id.as_str()) {
            continue;
        }
        let prefix = builds_dir.join(&id);
        let newest = entries
            .iter()
            .filter_map(|e| e.modified)
            .max()
            .unwrap_or(now);
        if now.duration_since(newest).unwrap_or_default() < min_age {
            report.kept_young.push(prefix);
            continue;
        }
        report.objects += entries.len();
        report.bytes += entries.iter().map(|e| e.len).sum::<u64>();
        if !dry_run {
            match &target {
                Target::Object(o) => {
                    report.uploads_aborted += abort_marked_uploads(o, &entries)?;
                    for e in &entries {
                        store.remove_file(&e.path)?;
                    }
                }
                Target::Files(s) => s.remove_dir_all(&prefix)?,
            }
        }
        report.removed.push(prefix);
    }
    collect_lance_uploads(&target, uri, min_age, dry_run, now, &mut report)?;
    Ok(report)
}

/// Aborts the multipart uploads whose markers are among `entries` (their
/// parts are listed nowhere else) and returns how many; the markers
/// themselves are the caller's to remove.
fn abort_marked_uploads(
    o: &crate::storage::object::ObjectStorage,
    entries: &[crate::storage::Entry],
) -> Result<usize> {
    let mut n = 0;
    for e in entries {
        if let Some(object) = uploaded_object(&e.path) {
            let id = o.read(&e.path)?;
            o.abort_upload(&object, &String::from_utf8_lossy(&id))?;
            n += 1;
        }
    }
    Ok(n)
}

/// The uploads of a Lance-layout build's data files (`data/_uploads/`) left
/// unfinished by a killed build, at least `min_age` old: aborted, with
/// their markers. The data files themselves are the Lance side's
/// ([`collect_lance_versions`]) once a committed metadata says which stay.
fn collect_lance_uploads(
    target: &Target,
    uri: &Path,
    min_age: Duration,
    dry_run: bool,
    now: SystemTime,
    report: &mut ObjectGcReport,
) -> Result<()> {
    let Target::Object(o) = target else {
        return Ok(());
    };
    let markers = uri.join(LANCE_DATA_DIR).join(UPLOADS_DIR);
    let old: Vec<_> = target
        .walk(&markers)?
        .into_iter()
        .filter(|e| {
            e.modified
                .and_then(|m| now.duration_since(m).ok())
                .unwrap_or_default()
                >= min_age
        })
        .collect();
    report.objects += old.len();
    report.bytes += old.iter().map(|e| e.len).sum::<u64>();
    if !dry_run {
        report.uploads_aborted += abort_marked_uploads(o, &old)?;
        for e in &old {
            o.remove_file(&e.path)?;
        }
    }
    report.removed.extend(old.into_iter().map(|e| e.path));
    Ok(())
}

/// The Lance version a committed Lance-layout cache names (a cache on
/// object storage has its builds as versions of the dataset at its root).
fn committed_lance_version(meta: &CacheMetadata) -> Option<u64> {
    match meta {
        #[cfg(feature = "lance")]
        CacheMetadata::LanceRows(m) => m.lance_version,
        CacheMetadata::VideoFrames(m) => m.lance_version,
        _ => None,
    }
}

/// The Lance side of [`collect_object_garbage`]: the dataset's own garbage
/// (`crate::lance::collect_remote_versions`), then the data files no
/// remaining version uses and at least `min_age` old.
#[cfg(feature = "lance")]
fn collect_lance_versions(
    target: &Target,
    uri: &Path,
    committed: u64,
    min_age: Duration,
    dry_run: bool,
    now: SystemTime,
    report: &mut ObjectGcReport,
) -> Result<()> {
    let (lance, referenced) =
        crate::lance::collect_remote_versions(uri, committed, min_age, dry_run)?;
    report.lance_versions_removed = lance.versions;
    report.lance_restored = lance.restored;
    report.objects += lance.objects;
    report.bytes += lance.bytes;
    let data = uri.join(LANCE_DATA_DIR);
    let base = format!("{}/", data.to_string_lossy().trim_end_matches('/'));
    for e in target.walk(&data)? {
        let s = e.path.to_string_lossy().into_owned();
        let Some(name) = s.strip_prefix(&base) else {
            continue;
        };
        let age = e
            .modified
            .and_then(|m| now.duration_since(m).ok())
            .unwrap_or_default();
        // Upload markers are collect_lance_uploads'.
        if referenced.contains(name) || age < min_age || name.starts_with(UPLOADS_DIR) {
            continue;
        }
        report.objects += 1;
        report.bytes += e.len;
        if !dry_run {
            target.storage().remove_file(&e.path)?;
        }
        report.removed.push(e.path.clone());
    }
    Ok(())
}

#[cfg(not(feature = "lance"))]
fn collect_lance_versions(
    _target: &Target,
    uri: &Path,
    _committed: u64,
    _min_age: Duration,
    _dry_run: bool,
    _now: SystemTime,
    _report: &mut ObjectGcReport,
) -> Result<()> {
    Err(without_lance(uri))
}
