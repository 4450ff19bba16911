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

use std::collections::HashMap;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as Key;
use object_store::{
    BackoffConfig, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig,
    UpdateVersion,
};

use super::disk_cache::DiskCache;
use super::{Entry, EntryKind, LockGuard, RangedFile, Storage, StorageRef, WriteFile};
use crate::error::{Error, Result};

/// Times a failed request is retried.
pub const MAX_RETRIES: usize = 8;
/// How long a request is retried at most.
pub const RETRY_TIMEOUT: Duration = Duration::from_secs(120);

/// Range requests of one object in flight at once ([`RangedFile::read_ranges`]).
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

/// An S3 bucket (or S3-compatible server) as a [`Storage`].
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

/// Files up to this size are put in one request; larger ones are uploaded
/// in parts of this size (S3 takes at most 5 GiB in one put, and parts of
/// 5 MiB at least). `SHARDSET_OBJECT_PART_BYTES` sets it.
pub const DEFAULT_PART_BYTES: u64 = 64 << 20;

/// S3's smallest part but the last.
const MIN_PART_BYTES: u64 = 5 << 20;

/// Parts in flight at once in one upload.
const PARTS_IN_FLIGHT: usize = 4;

/// The part size the environment names (`SHARDSET_OBJECT_PART_BYTES`).
fn part_bytes_from_env() -> std::result::Result<u64, String> {
    match std::env::var("SHARDSET_OBJECT_PART_BYTES") {
        Err(_) => Ok(DEFAULT_PART_BYTES),
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(n) if (MIN_PART_BYTES..=(5 << 30)).contains(&n) => Ok(n),
            _ => Err(format!(
                "SHARDSET_OBJECT_PART_BYTES must be a number of bytes from {MIN_PART_BYTES} (5 MiB) to 5 GiB, not {v:?}"
            )),
        },
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
            part_bytes: part_bytes_from_env(),
        }
    }

    /// Writes `bytes` at `path` once: one conditional put
    /// (`If-None-Match: *`) up to the part size, else a multipart upload
    /// (several parts in flight) after a check that nothing is there (S3
    /// has no condition on a multipart upload's start; the names written
    /// this way, a build's, are its own). An object already there is an
    /// [`Error::Io`] of kind `AlreadyExists`. A failed upload is aborted,
    /// so no part stays stored.
    ///
    /// # Errors
    /// [`Error::Io`] naming the path; [`Error::InvalidArgument`] for a bad
    /// `SHARDSET_OBJECT_PART_BYTES`.
    pub fn put_once(&self, path: &Path, bytes: Bytes) -> Result<()> {
        let part = self
            .part_bytes
            .clone()
            .map_err(|e| Error::InvalidArgument(format!("{}: {e}", path.display())))?;
        if bytes.len() as u64 <= part {
            return self.put(path, bytes, PutMode::Create).map(|_| ());
        }
        if self.stat(path)?.is_some() {
            return Err(Error::io(
                "put",
                path,
                std::io::Error::new(std::io::ErrorKind::AlreadyExists, "the object exists"),
            ));
        }
        let store = self.store(path)?;
        let key = self.key(path)?;
        let part = part as usize;
        runtime_block_on(async move {
            let upload = store.put_multipart(&key).await?;
            let mut w = object_store::WriteMultipart::new_with_chunk_size(upload, part);
            let mut at = 0;
            while at < bytes.len() {
                let end = (at + part).min(bytes.len());
                if let Err(e) = w.wait_for_capacity(PARTS_IN_FLIGHT).await {
                    let _ = w.abort().await;
                    return Err(e);
                }
                w.put(bytes.slice(at..end));
                at = end;
            }
            w.finish().await.map(|_| ())
        })?
        .map_err(|e| store_error("upload", path, e))
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

/// The region: `AWS_REGION`, `AWS_DEFAULT_REGION`, else `us-east-1`.
fn region() -> String {
    std::env::var("AWS_REGION")
        .or_else(|_| std::env::var("AWS_DEFAULT_REGION"))
        .unwrap_or_else(|_| "us-east-1".to_string())
}

/// The endpoint override: `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL` or
/// `AWS_ENDPOINT`.
fn endpoint() -> Option<String> {
    std::env::var("AWS_ENDPOINT_URL_S3")
        .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
        .or_else(|_| std::env::var("AWS_ENDPOINT"))
        .ok()
}

/// The configuration of [`ObjectStorage`] as Lance storage options, for
/// Lance's own S3 client (Lance reads the credentials from the AWS
/// environment itself): region, endpoint override, plain HTTP for an
/// `http://` endpoint, and the same retries.
#[cfg(feature = "lance")]
pub(crate) fn lance_storage_options() -> HashMap<String, String> {
    let mut o = HashMap::new();
    o.insert("aws_region".to_string(), region());
    if let Some(ep) = endpoint() {
        if ep.starts_with("http://") {
            o.insert("aws_allow_http".to_string(), "true".to_string());
        }
        o.insert("aws_endpoint".to_string(), ep);
    }
    o.insert("client_max_retries".to_string(), MAX_RETRIES.to_string());
    o.insert(
        "client_retry_timeout".to_string(),
        RETRY_TIMEOUT.as_secs().to_string(),
    );
    o
}

/// The S3 client's configuration for `bucket`, from the environment.
fn store_config(bucket: &str) -> std::result::Result<AmazonS3Builder, String> {
    // https endpoints: reqwest's rustls with ring as the process's provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut b = AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_retry(RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(15),
                base: 2.0,
            },
            max_retries: MAX_RETRIES,
            retry_timeout: RETRY_TIMEOUT,
        });
    b = b.with_region(region());
    if let Some(ep) = endpoint() {
        if ep.starts_with("http://") {
            b = b.with_allow_http(true);
        }
        b = b.with_endpoint(ep);
    }
    Ok(b)
}

/// What an [`ObjectStorage`] is configured from: the `AWS_*` and
/// `SHARDSET_OBJECT_*` variables, as one string.
fn config_key() -> String {
    let mut vars: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("AWS_") || k.starts_with("SHARDSET_OBJECT_"))
        .collect();
    vars.sort();
    let mut key = String::new();
    for (k, v) in vars {
        key.push_str(&k);
        key.push('=');
        key.push_str(&v);
        key.push('\n');
    }
    key
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

/// A file being written to an object store: kept in memory, put with
/// `If-None-Match: *` on [`WriteFile::finish`].
#[derive(Debug)]
struct ObjectFile {
    store: Arc<AmazonS3>,
    key: Key,
    path: PathBuf,
    buf: Vec<u8>,
}

impl Write for ObjectFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl WriteFile for ObjectFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn len(&self) -> u64 {
        self.buf.len() as u64
    }

    fn sync_data(&mut self) -> Result<()> {
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<()> {
        let (store, key) = (self.store.clone(), self.key.clone());
        let bytes = Bytes::from(self.buf);
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        runtime_block_on(async move {
            store
                .put_opts(&key, PutPayload::from_bytes(bytes), opts)
                .await
        })?
        .map(|_| ())
        .map_err(|e| store_error("put", &self.path, e))
    }
}

/// A byte range source over one object, read through the disk cache.
#[derive(Debug)]
struct ObjectRanges {
    client: Arc<Client>,
    disk: Arc<DiskCache>,
    path: PathBuf,
    key: Key,
    object: String,
    version: String,
    len: u64,
}

impl ObjectRanges {
    /// An error naming the object for a range outside it.
    fn check(&self, range: &Range<u64>) -> Result<()> {
        if range.end > self.len || range.start > range.end {
            return Err(Error::corrupt(
                &self.path,
                format!(
                    "range {}..{} is outside the object's {} bytes",
                    range.start, range.end, self.len
                ),
            ));
        }
        Ok(())
    }
}

impl RangedFile for ObjectRanges {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_range(&self, range: Range<u64>) -> Result<Bytes> {
        self.check(&range)?;
        self.disk
            .get_or_fetch(&self.object, &self.version, range.clone(), || {
                let store = self.client.store(&self.path)?;
                let key = self.key.clone();
                let r = range.clone();
                runtime_block_on(async move { store.get_range(&key, r).await })?
                    .map_err(|e| store_error("read", &self.path, e))
            })
    }

    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let mut out: Vec<Option<Bytes>> = Vec::with_capacity(ranges.len());
        let mut missing = Vec::new();
        for (i, r) in ranges.iter().enumerate() {
            self.check(r)?;
            let hit = self.disk.get(&self.object, &self.version, r);
            if hit.is_none() {
                missing.push((i, r.clone()));
            }
            out.push(hit);
        }
        if !missing.is_empty() {
            let store = self.client.store(&self.path)?;
            let key = self.key.clone();
            let want: Vec<Range<u64>> = missing.iter().map(|(_, r)| r.clone()).collect();
            let fetched = runtime_block_on(async move {
                futures::stream::iter(want.into_iter().map(|r| {
                    let (store, key) = (store.clone(), key.clone());
                    async move { store.get_range(&key, r).await }
                }))
                .buffered(CONCURRENT_RANGES)
                .try_collect::<Vec<Bytes>>()
                .await
            })?
            .map_err(|e| store_error("read", &self.path, e))?;
            for ((i, r), b) in missing.into_iter().zip(fetched) {
                self.disk
                    .insert(&self.object, &self.version, r, b.clone())?;
                out[i] = Some(b);
            }
        }
        Ok(out
            .into_iter()
            .map(|b| b.expect("every range read"))
            .collect())
    }

    fn is_cached(&self, range: &Range<u64>) -> bool {
        self.disk.contains(&self.object, &self.version, range)
    }

    fn cached_bytes(&self) -> u64 {
        self.disk.object_bytes(&self.object, &self.version)
    }
}

impl Storage for ObjectStorage {
    fn name(&self) -> &'static str {
        "s3"
    }

    fn stat(&self, path: &Path) -> Result<Option<Entry>> {
        let store = self.store(path)?;
        let key = self.key(path)?;
        let k = key.clone();
        let head = runtime_block_on(async move { store.head(&k).await })?;
        match head {
            Ok(m) => {
                return Ok(Some(Entry {
                    path: path.to_path_buf(),
                    kind: EntryKind::File,
                    len: m.size,
                    modified: Some(m.last_modified.into()),
                }))
            }
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(store_error("stat", path, e)),
        }
        // A prefix with objects under it is a directory.
        let store = self.store(path)?;
        let prefix = (!key.as_ref().is_empty()).then_some(key);
        let any = runtime_block_on(async move {
            let mut s = store.list(prefix.as_ref());
            s.try_next().await
        })?
        .map_err(|e| store_error("stat", path, e))?;
        Ok(any.map(|_| Entry {
            path: path.to_path_buf(),
            kind: EntryKind::Dir,
            len: 0,
            modified: None,
        }))
    }

    fn list(&self, dir: &Path) -> Result<Vec<Entry>> {
        let store = self.store(dir)?;
        let key = self.key(dir)?;
        let prefix = (!key.as_ref().is_empty()).then_some(key);
        let r = runtime_block_on(async move { store.list_with_delimiter(prefix.as_ref()).await })?
            .map_err(|e| store_error("list", dir, e))?;
        if r.objects.is_empty() && r.common_prefixes.is_empty() {
            return Err(Error::io(
                "list",
                dir,
                std::io::Error::new(std::io::ErrorKind::NotFound, "no objects under this prefix"),
            ));
        }
        let mut out: Vec<Entry> = r
            .common_prefixes
            .iter()
            .map(|p| Entry {
                path: self.uri(p.as_ref()),
                kind: EntryKind::Dir,
                len: 0,
                modified: None,
            })
            .chain(r.objects.iter().map(|m| self.entry_of(m)))
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    fn read(&self, path: &Path) -> Result<Vec<u8>> {
        Ok(self.map(path)?.to_vec())
    }

    fn read_range(&self, path: &Path, range: Range<u64>) -> Result<Vec<u8>> {
        let store = self.store(path)?;
        let key = self.key(path)?;
        let r = range.clone();
        let b = runtime_block_on(async move { store.get_range(&key, r).await })?
            .map_err(|e| store_error("read", path, e))?;
        if b.len() as u64 != range.end - range.start {
            return Err(Error::io(
                "read",
                path,
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the object is shorter"),
            ));
        }
        Ok(b.to_vec())
    }

    fn map(&self, path: &Path) -> Result<Bytes> {
        match self.get_with_etag(path)? {
            Some((b, _)) => Ok(b),
            None => Err(Error::io(
                "open",
                path,
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such object"),
            )),
        }
    }

    fn ranged(&self, path: &Path) -> Result<Option<Arc<dyn RangedFile>>> {
        let store = self.store(path)?;
        let key = self.key(path)?;
        let k = key.clone();
        let s = store.clone();
        let meta = runtime_block_on(async move { s.head(&k).await })?
            .map_err(|e| store_error("open", path, e))?;
        let object = format!("{}/{}", self.client.bucket, key.as_ref());
        let version = format!("{}:{}", meta.size, meta.e_tag.unwrap_or_default());
        Ok(Some(Arc::new(ObjectRanges {
            client: self.client.clone(),
            disk: self.disk.clone(),
            path: path.to_path_buf(),
            key,
            object,
            version,
            len: meta.size,
        })))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteFile>> {
        Ok(Box::new(ObjectFile {
            store: self.store(path)?,
            key: self.key(path)?,
            path: path.to_path_buf(),
            buf: Vec::new(),
        }))
    }

    fn reopen_append(&self, path: &Path, _keep_bytes: u64) -> Result<Box<dyn WriteFile>> {
        Err(unsupported("append to", path))
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        self.put(path, Bytes::copy_from_slice(bytes), PutMode::Overwrite)
            .map(|_| ())
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.key(dir).map(|_| ())
    }

    fn create_dir(&self, dir: &Path) -> Result<bool> {
        self.key(dir)?;
        Ok(!self.exists(dir))
    }

    fn rename(&self, _from: &Path, to: &Path) -> Result<()> {
        Err(unsupported("rename to", to))
    }

    fn exchange(&self, _a: &Path, _b: &Path) -> Result<bool> {
        Ok(false)
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let store = self.store(path)?;
        let key = self.key(path)?;
        match runtime_block_on(async move { store.delete(&key).await })? {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(store_error("remove", path, e)),
        }
    }

    fn remove_dir_all(&self, dir: &Path) -> Result<()> {
        for e in self.list_recursive(dir)? {
            self.remove_file(&e.path)?;
        }
        Ok(())
    }

    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }

    fn sync_tree(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }

    fn lock(&self, path: &Path, wait: bool) -> Result<Option<Box<dyn LockGuard>>> {
        let (bucket, key) = split_uri(path)?;
        let name = format!(
            "{:032x}.lock",
            xxhash_rust::xxh3::xxh3_128(format!("{bucket}/{key}").as_bytes())
        );
        let dir = self.disk.root().join("locks");
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("create directory", &dir, e))?;
        super::local().lock(&dir.join(name), wait)
    }

    fn lance_uri(&self, dir: &Path) -> Result<String> {
        let (bucket, key) = split_uri(dir)?;
        Ok(format!("{S3_SCHEME}{bucket}/{key}"))
    }
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
