//! `s3://bucket/prefix` locations as a [`Storage`], over the `object_store`
//! crate's S3 client (the one Lance uses).
//!
//! Configuration is the usual AWS environment (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION` or
//! `AWS_DEFAULT_REGION`, default `us-east-1`) with an endpoint override for
//! S3-compatible servers (`AWS_ENDPOINT_URL`; an `http://` endpoint allows
//! plain HTTP). Requests are retried with exponential backoff on transient
//! errors (up to [`MAX_RETRIES`] times within [`RETRY_TIMEOUT`]).
//!
//! What an object store can do differs from a directory tree, and the
//! differences are explicit:
//! - there are no directories: a "directory" is a key prefix, present when
//!   some object is under it; creating one does nothing;
//! - there is no rename: a cache is published by writing its files under a
//!   build prefix of their own and then `_metadata.json` with a conditional
//!   put ([`crate::cache::remote`]), and [`Storage::rename`] is an error;
//! - [`Storage::create`] is a conditional put (`If-None-Match: *`), so a
//!   file is still written once; [`Storage::write_atomic`] is one put;
//! - locks are this machine's: they live in the disk cache's directory;
//! - [`Storage::map`] downloads the whole object (checksums, small files);
//!   shard reads go through [`Storage::ranged`] and the disk cache instead,
//!   fetching only the byte ranges they need;
//! - [`Storage::lance_uri`] is the `s3://` location itself: Lance reads
//!   and writes it with its own S3 support, given the same configuration
//!   (`lance_storage_options`, see `crate::lance`).
//!
//! [`Storage`]: crate::storage::Storage
//! [`Storage::rename`]: crate::storage::Storage::rename
//! [`Storage::create`]: crate::storage::Storage::create
//! [`Storage::write_atomic`]: crate::storage::Storage::write_atomic
//! [`Storage::map`]: crate::storage::Storage::map
//! [`Storage::ranged`]: crate::storage::Storage::ranged
//! [`Storage::lance_uri`]: crate::storage::Storage::lance_uri

mod config;
mod files;
mod options;
mod ranged;
mod retry_after;
mod stream;
mod upload;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

use super::disk_cache::DiskCache;
use super::{Entry, EntryKind, StorageRef};
use crate::error::{Error, Result};

#[cfg(feature = "lance")]
pub(crate) use config::lance_storage_options;
pub use config::DEFAULT_PART_BYTES;
use config::{config_key, part_bytes, store_config};
pub use options::StorageOptions;
pub use upload::{uploaded_object, UPLOADS_DIR};

/// Times a failed request is retried.
pub const MAX_RETRIES: usize = 8;
/// How long a request is retried at most.
pub const RETRY_TIMEOUT: Duration = Duration::from_secs(120);

/// Range requests of one object in flight at once ([`RangedFile::read_ranges`](crate::storage::RangedFile::read_ranges)).
pub const CONCURRENT_RANGES: usize = 8;

/// The scheme of object-store locations.
pub const S3_SCHEME: &str = "s3://";

/// True when `path` names an object-store location (`s3://...`).
pub fn is_object_uri(path: &Path) -> bool {
    path.to_str().is_some_and(|s| s.starts_with(S3_SCHEME))
}

/// The bucket and key of `path` (`s3://bucket/a/b` is `("bucket", "a/b")`);
/// empty components and `.` are dropped.
///
/// # Errors
/// [`Error::InvalidArgument`] for a path that is not `s3://bucket[/key]`,
/// or that holds `..`.
pub fn split_uri(path: &Path) -> Result<(String, String)> {
    let s = path
        .to_str()
        .ok_or_else(|| Error::InvalidArgument(format!("{} is not valid UTF-8", path.display())))?;
    let rest = s
        .strip_prefix(S3_SCHEME)
        .ok_or_else(|| Error::InvalidArgument(format!("{s} is not an s3:// location")))?;
    let mut parts = rest.split('/').filter(|p| !p.is_empty() && *p != ".");
    let bucket = parts
        .next()
        .ok_or_else(|| Error::InvalidArgument(format!("{s} names no bucket (s3://bucket/prefix)")))?
        .to_string();
    let key: Vec<&str> = parts.collect();
    if key.contains(&"..") {
        return Err(Error::InvalidArgument(format!(
            "{s}: `..` is not allowed in an object-store location"
        )));
    }
    Ok((bucket, key.join("/")))
}

fn store_error(op: &'static str, path: &Path, e: object_store::Error) -> Error {
    let kind = match &e {
        object_store::Error::NotFound { .. } => std::io::ErrorKind::NotFound,
        object_store::Error::AlreadyExists { .. } => std::io::ErrorKind::AlreadyExists,
        object_store::Error::Precondition { .. } => std::io::ErrorKind::AlreadyExists,
        object_store::Error::NotSupported { .. } | object_store::Error::NotImplemented { .. } => {
            std::io::ErrorKind::Unsupported
        }
        _ => std::io::ErrorKind::Other,
    };
    Error::io(op, path, std::io::Error::new(kind, e.to_string()))
}

/// Runs a request to completion from synchronous code, on the library's
/// one I/O runtime (per process: a forked child, as a data-loader worker,
/// makes its own, with its own connections).
fn runtime_block_on<F>(f: F) -> Result<F::Output>
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    crate::util::block_on(f)
}

/// An S3 bucket (or S3-compatible server) as a [`Storage`](crate::storage::Storage).
#[derive(Debug)]
pub struct ObjectStorage {
    client: Arc<Client>,
    disk: Arc<DiskCache>,
    part_bytes: std::result::Result<u64, String>,
}

/// The S3 client of a bucket, per process: a client's pooled connections
/// are driven by tasks of the runtime it ran on, which a forked child does
/// not have, so a child (also through a cache opened before the fork)
/// builds its own from the same configuration.
#[derive(Debug)]
struct Client {
    bucket: String,
    /// The configuration, read from the environment once.
    config: std::result::Result<AmazonS3Builder, String>,
    store: crate::util::ForkLocal<Arc<AmazonS3>>,
}

impl Client {
    fn store(&self, path: &Path) -> Result<Arc<AmazonS3>> {
        self.store
            .get_or_try_init(|| {
                let config = self.config.clone()?;
                config.build().map(Arc::new).map_err(|e| e.to_string())
            })
            .map_err(|e| {
                Error::InvalidArgument(format!(
                    "{}: cannot configure the S3 client for bucket {}: {e}",
                    path.display(),
                    self.bucket
                ))
            })
    }
}

impl ObjectStorage {
    /// The bucket `bucket` configured from the environment, reading through
    /// the disk cache the environment names.
    pub fn from_env(bucket: &str) -> Self {
        // A bad disk cache setting fails every request, naming it.
        let (disk, config) = match DiskCache::from_env() {
            Ok(d) => (Arc::new(d), store_config(bucket)),
            Err(e) => (
                Arc::new(DiskCache::new(
                    std::env::temp_dir().join("shardset-objects"),
                    super::disk_cache::DEFAULT_DISK_CACHE_BYTES,
                )),
                Err(e.to_string()),
            ),
        };
        ObjectStorage {
            client: Arc::new(Client {
                bucket: bucket.to_string(),
                config,
                store: crate::util::ForkLocal::new(),
            }),
            disk,
            part_bytes: part_bytes(),
        }
    }

    /// The disk cache reads go through.
    pub fn disk_cache(&self) -> &Arc<DiskCache> {
        &self.disk
    }

    fn store(&self, path: &Path) -> Result<Arc<AmazonS3>> {
        self.client.store(path)
    }

    fn key(&self, path: &Path) -> Result<Key> {
        let (bucket, key) = split_uri(path)?;
        if bucket != self.client.bucket {
            return Err(Error::InvalidArgument(format!(
                "{} is not in bucket {}",
                path.display(),
                self.client.bucket
            )));
        }
        Ok(Key::from(key.as_str()))
    }

    fn uri(&self, key: &str) -> PathBuf {
        PathBuf::from(format!("{S3_SCHEME}{}/{key}", self.client.bucket))
    }

    /// An object as a file entry.
    fn entry_of(&self, m: &object_store::ObjectMeta) -> Entry {
        Entry {
            path: self.uri(m.location.as_ref()),
            kind: EntryKind::File,
            len: m.size,
            modified: Some(m.last_modified.into()),
        }
    }

    /// Puts `bytes` at `path` with `mode`; returns the new ETag.
    ///
    /// # Errors
    /// [`Error::Io`] naming the path; its source's kind is `AlreadyExists`
    /// when the condition of a `Create` or `Update` put failed.
    pub fn put(&self, path: &Path, bytes: Bytes, mode: PutMode) -> Result<Option<String>> {
        let store = self.store(path)?;
        let key = self.key(path)?;
        let opts = PutOptions {
            mode,
            ..Default::default()
        };
        let r = runtime_block_on(async move {
            store
                .put_opts(&key, PutPayload::from_bytes(bytes), opts)
                .await
        })?
        .map_err(|e| store_error("put", path, e))?;
        Ok(r.e_tag)
    }

    /// The object at `path` with its ETag; `None` when absent.
    ///
    /// # Errors
    /// [`Error::Io`] naming the path.
    pub fn get_with_etag(&self, path: &Path) -> Result<Option<(Bytes, Option<String>)>> {
        let store = self.store(path)?;
        let key = self.key(path)?;
        let r = runtime_block_on(async move {
            let g = store.get(&key).await?;
            let etag = g.meta.e_tag.clone();
            let b = g.bytes().await?;
            Ok::<_, object_store::Error>((b, etag))
        })?;
        match r {
            Ok(v) => Ok(Some(v)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(store_error("get", path, e)),
        }
    }

    /// Every object under the prefix `dir` (recursively) with its size and
    /// last modification.
    ///
    /// # Errors
    /// [`Error::Io`] naming `dir`.
    pub fn list_recursive(&self, dir: &Path) -> Result<Vec<Entry>> {
        let store = self.store(dir)?;
        let key = self.key(dir)?;
        let prefix = (!key.as_ref().is_empty()).then_some(key);
        let metas =
            runtime_block_on(
                async move { store.list(prefix.as_ref()).try_collect::<Vec<_>>().await },
            )?
            .map_err(|e| store_error("list", dir, e))?;
        let mut out: Vec<Entry> = metas.iter().map(|m| self.entry_of(m)).collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }
}

/// The storage of the bucket of `path`, one per bucket and configuration
/// per process: a process whose environment changes (a Ray worker running
/// tasks of builds with other settings) gets a client of the new settings.
pub fn object_storage(path: &Path) -> Arc<ObjectStorage> {
    type Buckets = Arc<Mutex<HashMap<String, Arc<ObjectStorage>>>>;
    // Per process, as the runtime: a forked child opens its own clients.
    static BUCKETS: crate::util::ForkLocal<Buckets> = crate::util::ForkLocal::new();
    let buckets: Buckets = BUCKETS
        .get_or_try_init(|| Ok::<_, std::convert::Infallible>(Default::default()))
        .unwrap_or_else(|e| match e {});
    let bucket = split_uri(path).map(|(b, _)| b).unwrap_or_default();
    let key = format!("{bucket}\n{}", config_key());
    let mut m = buckets.lock().unwrap_or_else(|p| p.into_inner());
    m.entry(key)
        .or_insert_with(|| Arc::new(ObjectStorage::from_env(&bucket)))
        .clone()
}

/// [`object_storage`] as a [`StorageRef`].
pub(crate) fn storage_for_uri(path: &Path) -> StorageRef {
    object_storage(path)
}

fn unsupported(op: &'static str, path: &Path) -> Error {
    Error::io(
        op,
        path,
        std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "object stores have no rename or append; caches are published with a commit marker",
        ),
    )
}

/// The conditional put of a commit: `If-Match` the ETag of the metadata
/// read before, or `If-None-Match: *` when there was none.
pub fn update_mode(etag: Option<String>) -> PutMode {
    match etag {
        Some(e) => PutMode::Update(UpdateVersion {
            e_tag: Some(e),
            version: None,
        }),
        None => PutMode::Create,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_split_into_bucket_and_key() {
        assert_eq!(
            split_uri(Path::new("s3://b/a//b/./c/")).unwrap(),
            ("b".to_string(), "a/b/c".to_string())
        );
        assert_eq!(
            split_uri(&Path::new("s3://b/x").join("_metadata.json")).unwrap(),
            ("b".to_string(), "x/_metadata.json".to_string())
        );
        assert_eq!(split_uri(Path::new("s3://b")).unwrap().1, "");
        assert!(split_uri(Path::new("s3://")).is_err());
        assert!(split_uri(Path::new("s3://b/../c")).is_err());
        assert!(split_uri(Path::new("/tmp/x")).is_err());
        assert!(is_object_uri(Path::new("s3://b/x")));
        assert!(!is_object_uri(Path::new("./s3:/b")));
    }
}
