//! Caches on object storage: publishing with a commit marker, and removing
//! builds that never committed.
//!
//! An object store has no atomic directory rename, so a cache at
//! `s3://bucket/prefix` is published in two steps:
//!
//! 1. every file of the build (built and checked in a local staging
//!    directory by the usual writers) is put under the build's own prefix,
//!    `s3://bucket/prefix/_builds/<build id>/...`, each with
//!    `If-None-Match: *`, so no object is ever overwritten;
//! 2. `s3://bucket/prefix/_metadata.json` is put last, naming the shards
//!    with that prefix (`_builds/<id>/shard-00000.arrow`): with
//!    `If-None-Match: *` for a first build, with `If-Match: <ETag>` of the
//!    metadata the build replaces otherwise. That put is the commit point.
//!
//! Readers open `_metadata.json`, so they see a committed build or the one
//! before it, never a part of one; a reader holding the previous build
//! keeps reading it, since its objects stay until [`collect_object_garbage`]
//! removes the prefixes no committed metadata names (and that are older
//! than a grace period, so a build still uploading is left alone). Two
//! builds committing at once: one wins, the other's put fails its condition
//! and it reports so.
//!
//! A Lance-layout cache is one Lance dataset at the cache's root, as the
//! reference writes it, and its builds are that dataset's versions: the
//! build's data files go to `data/` under their own unique names, one Lance
//! commit (an `Overwrite` of those fragments, Lance's own atomic manifest
//! put) makes them the newest version, and the root `_metadata.json`,
//! put last and conditionally as above, names that version
//! (`"lance_version"`), which our readers check out. `gc` removes versions
//! older than the committed one, and undoes a newer version no metadata
//! names (a build that died between its two commits). Caches published
//! before this layout keep working: their metadata names a whole build
//! under `_builds/<id>` (`"build_dir"`), which `open_cache` follows.
//!
//! A distributed build ([`publish_part`], [`commit_parts`]) publishes the
//! same way, to an object store or to a directory of a file system the
//! machines share: there the files are written once (`create` refuses an
//! existing one) and the commit replaces `_metadata.json` atomically under
//! the cache's lock.
//!
//! A copy of the committed cache (`aws s3 sync`, say) is a plain local
//! cache: the reference joins the shard names to the directory, and ours
//! accepts names under `_builds/<id>/`; for the Lance layouts the reference
//! opens the dataset's newest version, the committed one. Row checksums and dedup refs live
//! beside their shard, under the same build prefix.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use rayon::prelude::*;

use crate::cache::lock::CacheLock;
use crate::cache::metadata::{json_checksummed, CacheMetadata, BUILDS_DIR, METADATA_FILE};
use crate::cache::versions::VERSIONS_DIR;
use crate::error::{Error, Result};
use crate::storage::object::{is_object_uri, object_storage, update_mode, ObjectStorage};
use crate::storage::{local, storage_for, Entry, EntryKind, Storage, StorageRef};

/// What [`publish_to_object_store`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishReport {
    /// The cache's location.
    pub uri: PathBuf,
    /// The build's id (its prefix is `_builds/<build>/`).
    pub build: String,
    /// Files put under the build prefix.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// True when the commit replaced an earlier build.
    pub replaced: bool,
    /// The Lance version committed (the Lance layouts, whose builds are
    /// versions of the one dataset at the cache's root).
    pub lance_version: Option<u64>,
}

/// Where a cache is published from parts: an object store (conditional
/// puts) or a directory of a (shared) file system (the cache's lock and
/// atomic replacement).
enum Target {
    Object(Arc<ObjectStorage>),
    Files(StorageRef),
}

impl Target {
    fn of(uri: &Path) -> Self {
        if is_object_uri(uri) {
            Target::Object(object_storage(uri))
        } else {
            Target::Files(storage_for(uri))
        }
    }

    fn storage(&self) -> &dyn Storage {
        match self {
            Target::Object(o) => o.as_ref(),
            Target::Files(s) => s.as_ref(),
        }
    }

    /// Writes `b` at `to` once: an object or file of the same size there
    /// already (a retried unit, a publish run again) is kept.
    fn put_once(&self, to: &Path, b: Bytes) -> Result<()> {
        let n = b.len() as u64;
        let r = match self {
            Target::Object(o) => o.put_once(to, b),
            Target::Files(s) => {
                if let Some(dir) = to.parent() {
                    s.create_dir_all(dir)?;
                }
                s.create(to).and_then(|mut f| {
                    std::io::Write::write_all(&mut f, &b).map_err(|e| Error::io("write", to, e))?;
                    f.finish()
                })
            }
        };
        match r {
            Err(Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::AlreadyExists
                    && self.storage().stat(to)?.is_some_and(|e| e.len == n) =>
            {
                Ok(())
            }
            r => r,
        }
    }

    /// Makes `bytes` the `_metadata.json` of the cache at `uri`: `None`
    /// when it is that already, else whether a cache was replaced.
    fn commit(&self, uri: &Path, bytes: Vec<u8>) -> Result<Option<bool>> {
        // Every file of the build is in place; the commit has not happened.
        crate::util::fault_point("remote:before-commit");
        let meta = uri.join(METADATA_FILE);
        match self {
            Target::Object(o) => {
                let current = o.get_with_etag(&meta)?;
                if current.as_ref().is_some_and(|(b, _)| b[..] == bytes[..]) {
                    return Ok(None);
                }
                let replaced = current.is_some();
                o.put(
                    &meta,
                    Bytes::from(bytes),
                    update_mode(current.and_then(|(_, e)| e)),
                )
                .map_err(lost_commit)?;
                Ok(Some(replaced))
            }
            Target::Files(s) => {
                s.create_dir_all(uri)?;
                let _lock = CacheLock::acquire_in(s, uri)?;
                let current = if s.is_file(&meta) {
                    Some(s.read(&meta)?)
                } else {
                    None
                };
                if current.as_deref() == Some(&bytes[..]) {
                    return Ok(None);
                }
                s.write_atomic(&meta, &bytes)?;
                s.sync_dir(uri)?;
                Ok(Some(current.is_some()))
            }
        }
    }

    /// Every file under `dir` (none when it is absent), with its size and
    /// modification time.
    fn walk(&self, dir: &Path) -> Result<Vec<Entry>> {
        match self {
            Target::Object(o) => o.list_recursive(dir),
            Target::Files(s) => {
                fn go(s: &dyn Storage, d: &Path, out: &mut Vec<Entry>) -> Result<()> {
                    for e in s.list(d)? {
                        match e.kind {
                            EntryKind::Dir => go(s, &e.path, out)?,
                            EntryKind::File => out.push(e),
                            EntryKind::Other => {}
                        }
                    }
                    Ok(())
                }
                let mut out = Vec::new();
                if s.is_dir(dir) {
                    go(s.as_ref(), dir, &mut out)?;
                }
                Ok(out)
            }
        }
    }
}

/// The local directory a build of the object-store cache `uri` is written
/// in before it is published: under the disk cache's `staging/`, named by
/// the location (so a killed build resumes there) and ending in the
/// location's last component (which build ids are derived from).
///
/// Its parent is created.
///
/// # Errors
/// [`Error::InvalidArgument`] for a location that is not `s3://bucket/key`;
/// [`Error::Io`] when the parent cannot be created.
pub fn staging_dir(uri: &Path) -> Result<PathBuf> {
    let (bucket, key) = crate::storage::object::split_uri(uri)?;
    let storage = object_storage(uri);
    let h = xxhash_rust::xxh3::xxh3_64(format!("{bucket}/{key}").as_bytes());
    let name = key
        .rsplit('/')
        .next()
        .filter(|n| !n.is_empty())
        .unwrap_or(&bucket);
    let parent = storage
        .disk_cache()
        .root()
        .join("staging")
        .join(format!("{h:016x}"));
    std::fs::create_dir_all(&parent).map_err(|e| Error::io("create directory", &parent, e))?;
    Ok(parent.join(name))
}

/// Runs `write` into the local staging directory of the object-store cache
/// `uri` under its lock, then publishes what it wrote there
/// ([`publish_to_object_store`]) and removes the staging copy: how every
/// writer writes to an `s3://` location.
///
/// # Errors
/// What `write` returns (nothing is published then), or a publish error.
pub fn write_staged<T>(
    uri: &Path,
    write: impl FnOnce(&Path, &CacheLock) -> Result<T>,
) -> Result<T> {
    let staging = staging_dir(uri)?;
    let lock = CacheLock::acquire(&staging)?;
    let out = write(&staging, &lock)?;
    publish_to_object_store(&staging, uri)?;
    let _ = std::fs::remove_dir_all(&staging);
    Ok(out)
}

/// Publishes the complete local cache at `local_dir` as the cache at `uri`
/// (see the module documentation for the commit protocol).
///
/// # Errors
/// [`Error::Metadata`] and the open errors of a damaged local cache;
/// [`Error::Io`] naming the object for a failed put; its source's kind is
/// `AlreadyExists` when another build committed first.
pub fn publish_to_object_store(local_dir: &Path, uri: &Path) -> Result<PublishReport> {
    let fs = local();
    let meta_path = local_dir.join(METADATA_FILE);
    let meta = CacheMetadata::read_in(fs.as_ref(), local_dir)?;
    let own_meta = fs.read(&meta_path)?;
    let arrow = meta.as_arrow_shards();
    let build = arrow
        .and_then(|a| a.build_id.clone())
        .filter(|b| {
            !b.is_empty()
                && b.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
        // A cache that records no id (written by another tool): one derived
        // from its metadata, so publishing it again reuses the prefix.
        .unwrap_or_else(|| format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&own_meta)));
    if arrow.is_none() {
        return publish_lance(local_dir, uri, &meta_path, &own_meta, build);
    }
    let target = Target::of(uri);
    let prefix = uri.join(BUILDS_DIR).join(&build);

    // 1. The build's files, each written once under its prefix.
    let files: Vec<PathBuf> = fs
        .walk_files(local_dir)?
        .into_iter()
        .filter(|rel| publishable(rel))
        .collect();
    let bytes: Vec<u64> = crate::util::in_pool(|| {
        files
            .par_iter()
            .map(|rel| put_file(&target, &local_dir.join(rel), &prefix.join(rel)))
            .collect::<Result<_>>()
    })??;
    target.put_once(&prefix.join(METADATA_FILE), Bytes::from(own_meta.clone()))?;

    // 2. The commit: the root metadata naming the shards under the prefix,
    // where the reference reads them too.
    let mut doc: serde_json::Value = serde_json::from_slice(&own_meta)
        .map_err(|e| Error::metadata(&meta_path, e.to_string()))?;
    let names = doc
        .get_mut("shard_filenames")
        .and_then(|v| v.as_array_mut())
        .ok_or_else(|| Error::metadata(&meta_path, "no shard_filenames"))?;
    for n in names.iter_mut() {
        let name = n
            .as_str()
            .ok_or_else(|| Error::metadata(&meta_path, "a shard name is not a string"))?;
        *n = serde_json::Value::String(format!("{BUILDS_DIR}/{build}/{name}"));
    }
    commit_doc(
        &target,
        uri,
        &doc,
        build,
        files.len() + 1,
        bytes.iter().sum(),
        None,
    )
}

/// Commits `doc` as the root `_metadata.json` of the cache at `uri` (the
/// commit point of a publish) and reports the build.
fn commit_doc(
    target: &Target,
    uri: &Path,
    doc: &serde_json::Value,
    build: String,
    files: usize,
    bytes: u64,
    lance_version: Option<u64>,
) -> Result<PublishReport> {
    let commit = json_checksummed(&uri.join(METADATA_FILE), doc)?;
    // `None`: this very build is committed already (a publish run again).
    let replaced = target.commit(uri, commit)?.unwrap_or(false);
    Ok(PublishReport {
        uri: uri.to_path_buf(),
        build,
        files,
        bytes,
        replaced,
        lance_version,
    })
}

/// Publishes a Lance-layout cache: the cache's root is one Lance dataset,
/// as the reference writes it, whose versions are the builds.
///
/// 1. The data files of the local dataset's latest version go to
///    `<uri>/data/` under their own (unique) names, written once.
/// 2. One Lance `Overwrite` commit of those fragments makes them the
///    dataset's newest version (Lance's own atomic manifest put).
/// 3. `_metadata.json` naming that version (`lance_version`) is put last,
///    conditionally, as for arrow-shards: the commit point. Our readers
///    check out the version the metadata names, so they see committed
///    builds only.
///
/// Between 2 and 3 the dataset's newest version is a build no metadata
/// names: a reader that opens the newest Lance version (the reference, on
/// a downloaded copy) would see it. Publishing again commits the metadata
/// (the version is reused), and [`collect_object_garbage`] makes the
/// committed version the newest again.
#[cfg(feature = "lance")]
fn publish_lance(
    local_dir: &Path,
    uri: &Path,
    meta_path: &Path,
    own_meta: &[u8],
    build: String,
) -> Result<PublishReport> {
    let target = Target::of(uri);
    let local = crate::lance::LocalBuild::open(local_dir)?;
    let files = local.data_files()?;
    let bytes: Vec<u64> = crate::util::in_pool(|| {
        files
            .par_iter()
            .map(|f| {
                put_file(
                    &target,
                    &local_dir.join(LANCE_DATA_DIR).join(f),
                    &uri.join(LANCE_DATA_DIR).join(f),
                )
            })
            .collect::<Result<_>>()
    })??;
    let version = local.commit_to(uri)?;
    let mut doc: serde_json::Value =
        serde_json::from_slice(own_meta).map_err(|e| Error::metadata(meta_path, e.to_string()))?;
    let obj = doc
        .as_object_mut()
        .ok_or_else(|| Error::metadata(meta_path, "not a JSON object"))?;
    obj.insert("lance_version".into(), serde_json::Value::from(version));
    commit_doc(
        &target,
        uri,
        &doc,
        build,
        files.len() + 1,
        bytes.iter().sum(),
        Some(version),
    )
}

#[cfg(not(feature = "lance"))]
fn publish_lance(
    local_dir: &Path,
    _uri: &Path,
    _meta_path: &Path,
    _own_meta: &[u8],
    _build: String,
) -> Result<PublishReport> {
    Err(without_lance(local_dir))
}

/// A Lance-layout cache met by a build of shardset without Lance.
#[cfg(not(feature = "lance"))]
fn without_lance(path: &Path) -> Error {
    Error::InvalidArgument(format!(
        "{} is a Lance-layout cache, and this build of shardset has no Lance support (the `lance` cargo feature)",
        path.display()
    ))
}

/// Where a Lance dataset keeps its data files.
#[cfg(feature = "lance")]
const LANCE_DATA_DIR: &str = "data";

/// Files of a local cache that a published build carries: all but its
/// metadata (written as the commit), its edit history and hidden files.
fn publishable(rel: &Path) -> bool {
    let first = rel
        .components()
        .next()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = rel
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    rel != Path::new(METADATA_FILE)
        && first != VERSIONS_DIR
        && !first.starts_with('.')
        && !name.starts_with('.')
}

/// Puts the local file `from` at `to` unless a file of the same size is
/// there (a publish run again after a failure); returns its bytes.
fn put_file(target: &Target, from: &Path, to: &Path) -> Result<u64> {
    let b = local().map(from)?;
    let n = b.len() as u64;
    target.put_once(to, b)?;
    Ok(n)
}

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
}

/// Removes the build prefixes of the cache at `uri` (an `s3://` location or
/// a directory published from parts) that its committed
/// `_metadata.json` does not name and whose newest object is at least
/// `min_age` old (a build still uploading is younger).
///
/// # Errors
/// [`Error::Io`] naming the object a list or delete failed on;
/// [`Error::Metadata`] for a damaged committed metadata (nothing is removed).
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
                Target::Object(_) => {
                    for e in &entries {
                        store.remove_file(&e.path)?;
                    }
                }
                Target::Files(s) => s.remove_dir_all(&prefix)?,
            }
        }
        report.removed.push(prefix);
    }
    Ok(report)
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
        if referenced.contains(name) || age < min_age {
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

/// The name a part's file takes under the build prefix: `u<unit>-<name>`
/// beside its shard (`_row_xxh64/u00003-shard-00000.arrow.xxh`).
fn part_name(rel: &Path, unit: usize) -> PathBuf {
    let name = rel
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let renamed = format!("u{unit:05}-{name}");
    match rel.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => p.join(renamed),
        None => PathBuf::from(renamed),
    }
}

/// Uploads the local `arrow-shards` cache at `local_dir`, written for work
/// unit `unit` of the distributed build `build` (with `build` as its build
/// id), under the build prefix of the cache at `uri` (an `s3://` location,
/// or a directory of a shared file system), its files named by
/// the unit (`_builds/<build>/u<unit>-shard-00000.arrow`): a retried unit
/// puts the same names, so no row is ever stored twice. Returns the part's
/// record for [`commit_parts`]: its metadata, shard names as the committed
/// cache will name them. Nothing is visible to readers until the commit.
///
/// # Errors
/// [`Error::InvalidArgument`] for another layout, another build id, or a
/// cache with deduped cells (their refs point at rows of the part, not of
/// the whole cache); [`Error::Io`] naming the object a put failed on.
pub fn publish_part(
    local_dir: &Path,
    uri: &Path,
    build: &str,
    unit: usize,
) -> Result<serde_json::Value> {
    let fs = local();
    let meta = CacheMetadata::read_in(fs.as_ref(), local_dir)?;
    let Some(arrow) = meta.as_arrow_shards() else {
        return Err(Error::InvalidArgument(format!(
            "{}: a part of a distributed build must be an arrow-shards cache, not {}",
            local_dir.display(),
            meta.layout()
        )));
    };
    if arrow.build_id.as_deref() != Some(build) {
        return Err(Error::InvalidArgument(format!(
            "{}: the part was written with build id {:?}, the build is {build:?} (every part stamps the build's id into its shards)",
            local_dir.display(),
            arrow.build_id
        )));
    }
    if arrow.dedup.is_some() {
        return Err(Error::InvalidArgument(format!(
            "{}: deduped cells cannot be merged across parts (their refs name rows of the part); write parts without dedup",
            local_dir.display()
        )));
    }
    let target = Target::of(uri);
    let prefix = uri.join(BUILDS_DIR).join(build);
    let files: Vec<PathBuf> = fs
        .walk_files(local_dir)?
        .into_iter()
        .filter(|rel| publishable(rel))
        .collect();
    crate::util::in_pool(|| {
        files
            .par_iter()
            .map(|rel| {
                put_file(
                    &target,
                    &local_dir.join(rel),
                    &prefix.join(part_name(rel, unit)),
                )
            })
            .collect::<Result<Vec<_>>>()
    })??;
    let mut record = serde_json::to_value(arrow)
        .map_err(|e| Error::metadata(local_dir.join(METADATA_FILE), e.to_string()))?;
    record["shard_filenames"] = serde_json::Value::Array(
        arrow
            .shard_filenames
            .iter()
            .map(|n| {
                serde_json::Value::String(format!(
                    "{BUILDS_DIR}/{build}/{}",
                    part_name(Path::new(n), unit).display()
                ))
            })
            .collect(),
    );
    Ok(record)
}

/// Commits the distributed build `build` of the cache at `uri` from the
/// records [`publish_part`] returned, in work-unit order: one
/// `_metadata.json` whose rows are the parts' rows in that order (shard
/// names, row counts, sizes and checksums concatenated; the rest is the
/// parts' own, which must agree), put with the same conditional commit as
/// [`publish_to_object_store`].
///
/// # Errors
/// [`Error::InvalidArgument`] for no parts, or parts that disagree
/// (features, schema, compression, build id, row checksums);
/// [`Error::Io`] for a failed or lost commit (as [`publish_to_object_store`]).
pub fn commit_parts(uri: &Path, build: &str, parts: &[serde_json::Value]) -> Result<PublishReport> {
    use crate::cache::metadata::ArrowShardsMetadata;
    let root_meta = uri.join(METADATA_FILE);
    let parsed: Vec<ArrowShardsMetadata> = parts
        .iter()
        .map(|p| {
            serde_json::from_value(p.clone())
                .map_err(|e| Error::InvalidArgument(format!("a part record of {build}: {e}")))
        })
        .collect::<Result<_>>()?;
    let Some(first) = parsed.first() else {
        return Err(Error::InvalidArgument(format!(
            "{}: a distributed build of no parts commits nothing",
            uri.display()
        )));
    };
    let mut merged = first.clone();
    merged.shard_filenames.clear();
    merged.shard_row_counts.clear();
    let mut sizes = Some(Vec::new());
    let mut sums = Some(Vec::new());
    for (k, p) in parsed.iter().enumerate() {
        let same = p.schema_fingerprint == first.schema_fingerprint
            && p.features == first.features
            && p.compression == first.compression
            && p.compression_level == first.compression_level
            && p.row_checksums == first.row_checksums
            && p.build_id.as_deref() == Some(build)
            && p.dedup.is_none()
            && p.version.is_none();
        if !same {
            return Err(Error::InvalidArgument(format!(
                "{}: part {k} of build {build} disagrees with part 0 (features, compression, checksums or build id), or holds deduped cells or edits",
                uri.display()
            )));
        }
        merged
            .shard_filenames
            .extend(p.shard_filenames.iter().cloned());
        merged.shard_row_counts.extend(&p.shard_row_counts);
        sizes = sizes.zip(p.shard_num_bytes.as_ref()).map(|(mut a, b)| {
            a.extend(b);
            a
        });
        sums = sums.zip(p.shard_xxh64.as_ref()).map(|(mut a, b)| {
            a.extend(b.iter().cloned());
            a
        });
    }
    merged.num_rows = merged.shard_row_counts.iter().sum();
    merged.num_shards = merged.shard_filenames.len() as u64;
    merged.shard_num_bytes = sizes;
    merged.shard_xxh64 = sums;
    merged.metadata_xxh64 = None;
    let commit = json_checksummed(&root_meta, &merged)?;
    let target = Target::of(uri);
    let replaced = target.commit(uri, commit)?.unwrap_or(false);
    // Read back through the checks every reader applies (every shard
    // present at its recorded size).
    CacheMetadata::read_in(target.storage(), uri)?;
    Ok(PublishReport {
        uri: uri.to_path_buf(),
        build: build.to_string(),
        files: merged.shard_filenames.len(),
        bytes: merged.shard_num_bytes.iter().flatten().sum(),
        replaced,
        lance_version: None,
    })
}

/// A failed conditional commit as the error that says so.
fn lost_commit(e: Error) -> Error {
    match e {
        Error::Io { source, path, .. } if source.kind() == std::io::ErrorKind::AlreadyExists => {
            Error::Io {
                op: "commit",
                path,
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "another build committed this cache first (its _metadata.json changed during this publish); nothing of this build is visible",
                ),
            }
        }
        e => e,
    }
}
