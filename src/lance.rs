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
/// location read through Lance's own S3 support (its `aws` feature), given
/// the configuration every `s3://` cache uses (`lance_storage_options`).
///
/// # Errors
/// Lance's, for a dataset that cannot be opened.
pub(crate) async fn open_dataset(uri: &str) -> lance::Result<Dataset> {
    #[cfg(feature = "s3")]
    if uri.starts_with(crate::storage::object::S3_SCHEME) {
        return lance::dataset::builder::DatasetBuilder::from_uri(uri)
            .with_storage_options(crate::storage::object::lance_storage_options())
            .load()
            .await;
    }
    Dataset::open(uri).await
}

/// The object store parameters Lance writes an `s3://` dataset with: the
/// same region, endpoint, plain-HTTP permission and retries as every other
/// request to a cache on object storage (Lance reads the credentials from
/// the AWS environment itself).
#[cfg(feature = "s3")]
pub(crate) fn store_params() -> lance_io::object_store::ObjectStoreParams {
    use lance_io::object_store::{ObjectStoreParams, StorageOptionsAccessor};
    ObjectStoreParams {
        storage_options_accessor: Some(Arc::new(StorageOptionsAccessor::with_static_options(
            crate::storage::object::lance_storage_options(),
        ))),
        ..Default::default()
    }
}

/// The latest version of a local Lance dataset (a build in its staging
/// directory), opened once, to be published as a version of a dataset on
/// object storage.
#[cfg(feature = "s3")]
pub(crate) struct LocalBuild {
    dir: PathBuf,
    ds: Dataset,
}

#[cfg(feature = "s3")]
impl LocalBuild {
    /// Opens the dataset in `dir`.
    ///
    /// # Errors
    /// [`Error::CorruptShard`] naming the dataset when Lance cannot open it.
    pub(crate) fn open(dir: &Path) -> Result<Self> {
        let uri = dir_uri(dir)?;
        let ds =
            block_on(async move { open_dataset(&uri).await })?.map_err(|e| lance_err(dir, e))?;
        Ok(LocalBuild {
            dir: dir.to_path_buf(),
            ds,
        })
    }

    /// Its data files (paths under `data/`): what [`LocalBuild::commit_to`]
    /// needs uploaded first.
    ///
    /// # Errors
    /// [`Error::CorruptShard`] naming the dataset when a fragment has deleted
    /// rows or a data file in another base (which a copy would not carry).
    pub(crate) fn data_files(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for f in self.ds.fragments().iter() {
            if f.deletion_file.is_some() {
                return Err(lance_err(
                    &self.dir,
                    format!("fragment {} has deleted rows (a deletion file)", f.id),
                ));
            }
            for d in &f.files {
                if d.base_id.is_some() {
                    return Err(lance_err(
                        &self.dir,
                        format!(
                            "data file {} of fragment {} is in another base",
                            d.path, f.id
                        ),
                    ));
                }
                out.push(d.path.clone());
            }
        }
        Ok(out)
    }

    /// Commits it as the newest version of the dataset at `remote` (an
    /// `s3://` location; created when absent): one Lance `Overwrite` of the
    /// same fragments and schema, whose data files the caller has put under
    /// `remote/data/` already. Lance's commit is its own atomic manifest put.
    /// Returns the version; when the newest version there already holds
    /// exactly these data files (a publish run again), that one, with no
    /// new commit.
    ///
    /// # Errors
    /// [`Error::CorruptShard`] naming the dataset for a Lance error.
    pub(crate) fn commit_to(&self, remote: &Path) -> Result<u64> {
        use lance::dataset::transaction::{Operation, Transaction};
        use lance::dataset::CommitBuilder;
        let ruri = dir_uri(remote)?;
        let src = &self.ds;
        let fragments = src.fragments().as_ref().clone();
        let at = ruri.clone();
        let existing = block_on(async move {
            match open_dataset(&at).await {
                Ok(d) => Ok(Some(d)),
                Err(lance::Error::DatasetNotFound { .. } | lance::Error::NotFound { .. }) => {
                    Ok(None)
                }
                Err(e) => Err(e),
            }
        })?
        .map_err(|e| lance_err(remote, e))?;
        let files_of = |f: &lance::table::format::Fragment| -> Vec<String> {
            f.files.iter().map(|d| d.path.clone()).collect()
        };
        if let Some(d) = &existing {
            let there = d.fragments();
            if there.len() == fragments.len()
                && there
                    .iter()
                    .zip(&fragments)
                    .all(|(a, b)| files_of(a) == files_of(b) && a.physical_rows == b.physical_rows)
            {
                return Ok(d.version().version);
            }
        }
        let config = src.manifest().config.clone();
        let op = Operation::Overwrite {
            schema: src.schema().clone(),
            fragments,
            config_upsert_values: (!config.is_empty()).then_some(config),
            initial_bases: None,
        };
        let format = src
            .manifest()
            .data_storage_format
            .lance_file_format()
            .to_selector();
        let done = block_on(async move {
            match existing {
                Some(d) => {
                    let read = d.version().version;
                    // The build's file format, also where the dataset's
                    // previous versions had another.
                    CommitBuilder::new(Arc::new(d))
                        .with_storage_format(format)
                        .execute(Transaction::new(read, op, None))
                        .await
                }
                None => {
                    CommitBuilder::new(ruri.as_str())
                        .with_store_params(store_params())
                        .with_storage_format(format)
                        .execute(Transaction::new(0, op, None))
                        .await
                }
            }
        })?
        .map_err(|e| lance_err(remote, e))?;
        Ok(done.version().version)
    }
}

/// What [`collect_remote_versions`] did to a Lance dataset on object storage.
#[cfg(feature = "s3")]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RemoteLanceGc {
    /// The new newest version restoring the committed one, when a newer
    /// version no metadata names was the newest.
    pub restored: Option<u64>,
    /// Versions removed (or, in a dry run, that would be).
    pub versions: u64,
    /// Objects Lance's cleanup removed: manifests, transaction files, data files.
    pub objects: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// Garbage of the Lance dataset at `uri` (an `s3://` cache's root) whose
/// committed version is `committed`:
/// - a newer version that no metadata names (a build that died between its
///   Lance commit and its metadata commit, or lost the race to commit) is
///   undone when it is at least `min_age` old: the committed version is
///   restored as the newest, so a reader of the newest version (the
///   reference, on a downloaded copy) sees the committed rows again;
/// - versions older than the committed one (and, once it is the newest
///   again, the undone ones after it) and at least `min_age` old are
///   removed, with the files only they use (Lance's cleanup).
///
/// Returns that, and the data files (names under `data/`) the versions
/// that stay use: the caller removes the others (uploads of builds that
/// never committed to Lance) once they are old enough.
///
/// # Errors
/// [`Error::CorruptShard`] naming the dataset for a Lance error.
#[cfg(feature = "s3")]
pub(crate) fn collect_remote_versions(
    uri: &Path,
    committed: u64,
    min_age: std::time::Duration,
    dry_run: bool,
) -> Result<(RemoteLanceGc, std::collections::HashSet<String>)> {
    use lance::dataset::cleanup::{cleanup_old_versions, CleanupPolicy};
    let luri = dir_uri(uri)?;
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs() as i64;
    let old_enough = |ts: i64| now_s.saturating_sub(ts) >= min_age.as_secs() as i64;
    block_on(async move {
        let mut ds = open_dataset(&luri).await?;
        let versions = ds.versions().await?;
        let latest = ds.version().version;
        let mut restored = None;
        if latest != committed {
            let newest_ts = versions
                .iter()
                .find(|v| v.version == latest)
                .map_or(now_s, |v| v.timestamp.timestamp());
            if old_enough(newest_ts) && !dry_run {
                let mut old = ds.checkout_version(committed).await?;
                old.restore().await?;
                restored = Some(old.version().version);
                ds = old;
            }
        }
        // Older than the committed version; once the committed one is the
        // newest again, the undone versions after it too.
        let drop: std::collections::HashSet<u64> = versions
            .iter()
            .filter(|v| {
                (v.version < committed || (restored.is_some() && v.version > committed))
                    && old_enough(v.timestamp.timestamp())
            })
            .map(|v| v.version)
            .collect();
        let mut stats = None;
        if !drop.is_empty() && !dry_run {
            let policy = CleanupPolicy {
                versions: Some(drop.clone()),
                error_if_tagged_old_versions: false,
                ..CleanupPolicy::default()
            };
            stats = Some(cleanup_old_versions(&ds, policy).await?);
        }
        // The data files the versions that stay use.
        let mut referenced = std::collections::HashSet::new();
        for v in ds.versions().await? {
            if dry_run && drop.contains(&v.version) {
                continue;
            }
            let at = ds.checkout_version(v.version).await?;
            for f in at.fragments().iter() {
                for d in &f.files {
                    referenced.insert(d.path.clone());
                }
            }
        }
        let gc = RemoteLanceGc {
            restored,
            versions: drop.len() as u64,
            objects: stats.as_ref().map_or(0, |st| {
                (st.old_versions + st.data_files_removed + st.transaction_files_removed) as usize
            }),
            bytes: stats.as_ref().map_or(0, |st| st.bytes_removed),
        };
        Ok::<_, lance::Error>((gc, referenced))
    })?
    .map_err(|e| lance_err(uri, e))
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
