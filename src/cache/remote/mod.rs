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

mod gc;
mod parts;
mod target;

use std::path::{Path, PathBuf};

use bytes::Bytes;
use rayon::prelude::*;

use crate::cache::lock::CacheLock;
use crate::cache::metadata::{json_checksummed, CacheMetadata, BUILDS_DIR, METADATA_FILE};
use crate::cache::versions::VERSIONS_DIR;
use crate::error::{Error, Result};
use crate::storage::local;
use crate::storage::object::object_storage;

pub use gc::{collect_object_garbage, is_publish_location, ObjectGcReport};
pub use parts::{commit_parts, publish_part};
use target::Target;

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
