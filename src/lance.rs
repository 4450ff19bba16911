//! What both Lance layouts (`lance-rows`, `lance-video-frames`) need from the
//! `lance` crate: a tokio runtime hidden behind a synchronous API, errors
//! naming the dataset, a record-batch reader fed by a channel (how encoded
//! batches reach `Dataset::write`), and the fsync of a written dataset.
//!
//! The runtime is per process: after a `fork` the child's first Lance call
//! builds its own (the parent's worker threads do not exist in the child), so
//! nothing Lance-related is shared across fork.

use std::future::Future;
use std::sync::Arc;

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use crossbeam_channel::{bounded, Receiver, Sender};
use lance::dataset::{Dataset, WriteMode, WriteParams};

use crate::error::{Error, Result};

type Rt = Arc<tokio::runtime::Runtime>;

/// The process's runtime Lance runs on (the library's one I/O runtime).
///
/// # Errors
/// [`Error::InvalidArgument`] when the runtime cannot start (out of threads).
pub fn runtime() -> Result<Rt> {
    crate::util::io_runtime()
}

/// Runs a future to completion from synchronous code, also when the caller
/// is itself inside a tokio runtime (then on a helper thread).
///
/// # Errors
/// As [`runtime`].
pub fn block_on<F>(fut: F) -> Result<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    crate::util::block_on(fut)
}

/// Opens the Lance dataset at `uri`: a local directory, or an `s3://`
/// location read through [`s3::session`]'s object store (our S3 client,
/// configured from the AWS environment as every `s3://` cache is).
///
/// # Errors
/// Lance's, for a dataset that cannot be opened.
pub(crate) async fn open_dataset(uri: &str) -> lance::Result<Dataset> {
    #[cfg(feature = "s3")]
    if uri.starts_with(crate::storage::object::S3_SCHEME) {
        return lance::dataset::builder::DatasetBuilder::from_uri(uri)
            .with_session(s3::session())
            .load()
            .await;
    }
    Dataset::open(uri).await
}

/// Lance reading `s3://` datasets through Lance's own object store layer,
/// with a provider for the scheme built on the S3 client of
/// [`crate::storage::object`] (rather than Lance's `aws` feature, which
/// would bring the AWS SDK, OpenDAL and a second TLS library): the same
/// configuration, endpoint override and retries as every other read of a
/// cache on object storage.
#[cfg(feature = "s3")]
mod s3 {
    use std::sync::{Arc, OnceLock};

    use lance::session::Session;
    use lance_io::object_store::{
        ObjectStore, ObjectStoreParams, ObjectStoreProvider, ObjectStoreRegistry,
    };

    /// Lance's default block size for object stores (its `infer_block_size`).
    const BLOCK_SIZE: usize = 64 * 1024;
    /// Concurrent requests Lance makes to the store.
    const IO_PARALLELISM: usize = 16;

    #[derive(Debug)]
    struct S3Provider;

    #[async_trait::async_trait]
    impl ObjectStoreProvider for S3Provider {
        async fn new_store(
            &self,
            base_path: url::Url,
            _params: &ObjectStoreParams,
        ) -> lance::Result<ObjectStore> {
            let bucket = base_path.host_str().unwrap_or_default().to_string();
            let client = crate::storage::object::s3_client(&bucket).map_err(|e| {
                lance::Error::invalid_input(format!(
                    "cannot configure the S3 client for bucket {bucket}: {e}"
                ))
            })?;
            Ok(ObjectStore::new(
                Arc::new(client),
                base_path,
                Some(BLOCK_SIZE),
                None,
                false,
                true,
                IO_PARALLELISM,
                crate::storage::object::MAX_RETRIES,
                None,
            ))
        }
    }

    /// The process's Lance session for `s3://` datasets.
    pub(super) fn session() -> Arc<Session> {
        static S: OnceLock<Arc<Session>> = OnceLock::new();
        S.get_or_init(|| {
            let registry = ObjectStoreRegistry::default();
            registry.insert("s3", Arc::new(S3Provider));
            Arc::new(Session::new(
                lance::dataset::DEFAULT_INDEX_CACHE_SIZE,
                lance::dataset::DEFAULT_METADATA_CACHE_SIZE,
                Arc::new(registry),
            ))
        })
        .clone()
    }
}

/// A local directory as the URI Lance takes.
///
/// # Errors
/// [`Error::InvalidArgument`] when the path is not UTF-8.
pub(crate) fn dir_uri(dir: &std::path::Path) -> Result<String> {
    crate::storage::storage_for(dir).lance_uri(dir)
}

/// A Lance error as ours, naming the dataset.
pub fn lance_err(path: &std::path::Path, e: impl std::fmt::Display) -> Error {
    Error::CorruptShard {
        path: path.to_path_buf(),
        reason: format!("lance: {e}"),
    }
}

/// Reads every row of the Lance dataset at `dir` (the `columns` given), one
/// fragment after another and in row order (of Lance version `version`;
/// None: the latest), handing each decoded batch to
/// `f`; returns each fragment's row count. Memory stays at a batch or so.
///
/// # Errors
/// [`Error::CorruptShard`] naming the dataset when Lance cannot open it or a
/// batch does not decode.
pub fn scan_dataset<F>(
    dir: &std::path::Path,
    version: Option<u64>,
    columns: &[String],
    mut f: F,
) -> Result<Vec<u64>>
where
    F: FnMut(&arrow_array::RecordBatch) + Send,
{
    use futures::StreamExt;
    let uri = dir_uri(dir)?;
    block_on(async move {
        let ds = crate::lance::open_dataset(&uri).await?;
        let ds = match version {
            Some(v) if ds.version().version != v => ds.checkout_version(v).await?,
            _ => ds,
        };
        let ds = Arc::new(ds);
        let mut counts = Vec::new();
        for frag in ds.get_fragments() {
            let mut scan = frag.scan();
            scan.project(columns)?;
            scan.scan_in_order(true);
            scan.batch_size(1024);
            let mut stream = scan.try_into_stream().await?;
            let mut rows = 0u64;
            while let Some(batch) = stream.next().await {
                let batch = batch?;
                rows += batch.num_rows() as u64;
                f(&batch);
            }
            counts.push(rows);
        }
        Ok::<_, lance::Error>(counts)
    })?
    .map_err(|e| lance_err(dir, e))
}

/// A `RecordBatchReader` fed by the encode pipeline.
pub(crate) struct ChannelReader {
    schema: SchemaRef,
    rx: Receiver<RecordBatch>,
}

impl ChannelReader {
    pub(crate) fn new(schema: SchemaRef, rx: Receiver<RecordBatch>) -> Self {
        ChannelReader { schema, rx }
    }
}

impl Iterator for ChannelReader {
    type Item = std::result::Result<RecordBatch, ArrowError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.rx.recv().ok().map(Ok)
    }
}

impl RecordBatchReader for ChannelReader {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// Rows of each fragment of a dataset just written.
pub(crate) fn fragment_rows(ds: &Dataset, dir: &Path) -> Result<Vec<u64>> {
    block_on(async {
        let mut counts = Vec::new();
        for f in ds.get_fragments() {
            counts.push(f.physical_rows().await.map(|n| n as u64));
        }
        counts
    })?
    .into_iter()
    .collect::<std::result::Result<Vec<u64>, _>>()
    .map_err(|e| lance_err(dir, e))
}

/// Makes everything Lance wrote under `dir` durable (the frames writer's).
#[cfg(feature = "video")]
pub(crate) fn fsync_tree(dir: &Path) -> Result<()> {
    crate::storage::storage_for(dir).sync_tree(dir)
}

/// Brings the Lance dataset in `dir` back to `version` (0: no dataset):
/// later commits are undone and data files no fragment of that version uses
/// are deleted. Top-level entries named in `keep` (a resume log) stay.
///
/// # Errors
/// I/O errors naming the path; [`Error::CorruptShard`] when Lance cannot
/// check out the version.
pub(crate) fn rewind_dataset(
    storage: &crate::storage::StorageRef,
    dir: &Path,
    version: u64,
    keep: &[&str],
) -> Result<()> {
    if version == 0 {
        for e in storage.list(dir)? {
            if !keep.contains(&e.name().as_str()) {
                if e.is_dir() {
                    storage.remove_dir_all(&e.path)?;
                } else {
                    storage.remove_file(&e.path)?;
                }
            }
        }
        return Ok(());
    }
    let uri = storage.lance_uri(dir)?;
    let used: Vec<String> = block_on(async move {
        let ds = crate::lance::open_dataset(&uri).await?;
        let ds = if ds.version().version == version {
            ds
        } else {
            let mut old = ds.checkout_version(version).await?;
            old.restore().await?;
            old
        };
        Ok::<_, lance::Error>(
            ds.fragments()
                .iter()
                .flat_map(|f| f.files.iter().map(|d| d.path.clone()))
                .collect(),
        )
    })?
    .map_err(|e| lance_err(dir, e))?;
    let data = dir.join("data");
    if storage.is_dir(&data) {
        for e in storage.list(&data)? {
            if !used.iter().any(|u| u == &e.name()) {
                let _ = storage.remove_file(&e.path);
            }
        }
    }
    Ok(())
}

type WriterThread = JoinHandle<Result<lance::Result<Dataset>>>;

/// The Lance side of a resumable build: batches stream into one
/// `Dataset::write` per segment (create, then append); each commit is a
/// Lance version a resume log can record.
pub(crate) struct LanceSegments {
    uri: String,
    dir: PathBuf,
    schema: SchemaRef,
    max_rows_per_file: usize,
    max_rows_per_group: Option<usize>,
    storage_version: Option<lance_file::version::LanceFileVersion>,
    exists: bool,
    current: Option<(Sender<RecordBatch>, WriterThread)>,
}

impl LanceSegments {
    pub(crate) fn new(
        dir: &Path,
        schema: SchemaRef,
        max_rows_per_file: usize,
        exists: bool,
    ) -> Result<Self> {
        Ok(LanceSegments {
            uri: dir_uri(dir)?,
            dir: dir.to_path_buf(),
            schema,
            max_rows_per_file,
            max_rows_per_group: None,
            storage_version: None,
            exists,
            current: None,
        })
    }

    /// Rows per row group of the data files (default: Lance's).
    pub(crate) fn with_rows_per_group(mut self, n: usize) -> Self {
        self.max_rows_per_group = Some(n);
        self
    }

    /// The data storage version of a dataset this creates (default: Lance's).
    pub(crate) fn with_storage_version(
        mut self,
        v: Option<lance_file::version::LanceFileVersion>,
    ) -> Self {
        self.storage_version = v;
        self
    }

    /// Creates the dataset with no row (what a write of nothing makes).
    pub(crate) fn create_empty(mut self) -> Result<Dataset> {
        self.start()?;
        self.commit()?
            .ok_or_else(|| lance_err(&self.dir, "no dataset was created"))
    }

    /// Sends a batch to the current segment (starting one if needed).
    pub(crate) fn send(&mut self, batch: RecordBatch) -> Result<()> {
        self.start()?;
        let (tx, _) = self.current.as_ref().expect("a segment");
        if tx.send(batch).is_err() {
            // The writer stopped early: its own error says why.
            return Err(match self.commit() {
                Err(e) => e,
                Ok(_) => lance_err(&self.dir, "the Lance writer stopped early"),
            });
        }
        Ok(())
    }

    /// Starts a segment unless one is open.
    fn start(&mut self) -> Result<()> {
        if self.current.is_none() {
            let (tx, rx) = bounded::<RecordBatch>(4);
            let reader = ChannelReader::new(self.schema.clone(), rx);
            let uri = self.uri.clone();
            let d = WriteParams::default();
            let params = WriteParams {
                max_rows_per_file: self.max_rows_per_file,
                max_rows_per_group: self.max_rows_per_group.unwrap_or(d.max_rows_per_group),
                data_storage_version: self.storage_version,
                mode: if self.exists {
                    WriteMode::Append
                } else {
                    WriteMode::Create
                },
                ..d
            };
            let h = std::thread::Builder::new()
                .name("shardset-lance".into())
                .spawn(move || {
                    block_on(
                        async move { Dataset::write(reader, uri.as_str(), Some(params)).await },
                    )
                })
                .map_err(|e| Error::io("start the Lance writer for", &self.dir, e))?;
            self.current = Some((tx, h));
        }
        Ok(())
    }

    /// Ends the current segment and returns its commit (None when nothing
    /// was sent since the last one).
    pub(crate) fn commit(&mut self) -> Result<Option<Dataset>> {
        let Some((tx, h)) = self.current.take() else {
            return Ok(None);
        };
        drop(tx);
        let ds = h
            .join()
            .map_err(|p| Error::from_panic("lance writer", p))??
            .map_err(|e| lance_err(&self.dir, e))?;
        self.exists = true;
        Ok(Some(ds))
    }
}

impl LanceSegments {
    /// Ends the build's last segment and returns the dataset (None when
    /// nothing was ever committed).
    pub(crate) fn finish(&mut self) -> Result<Option<Dataset>> {
        if let Some(ds) = self.commit()? {
            return Ok(Some(ds));
        }
        if !self.exists {
            return Ok(None);
        }
        let uri = self.uri.clone();
        block_on(async move { crate::lance::open_dataset(&uri).await })?
            .map(Some)
            .map_err(|e| lance_err(&self.dir, e))
    }
}

impl Drop for LanceSegments {
    fn drop(&mut self) {
        // An abandoned segment still commits; a resumed build undoes it.
        // Waiting here keeps the writer from racing the temp dir's removal.
        if let Some((tx, h)) = self.current.take() {
            drop(tx);
            let _ = h.join();
        }
    }
}
