//! What both Lance layouts (`lance-rows`, `lance-video-frames`) need from the
//! `lance` crate: a tokio runtime hidden behind a synchronous API, errors
//! naming the dataset, a record-batch reader fed by a channel (how encoded
//! batches reach `Dataset::write`), and the fsync of a written dataset.
//!
//! The runtime is per process: after a `fork` the child's first Lance call
//! builds its own (the parent's worker threads do not exist in the child), so
//! nothing Lance-related is shared across fork.

use std::future::Future;
use std::sync::{Arc, Mutex};

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use crossbeam_channel::Receiver;
use lance::dataset::Dataset;
use std::path::Path;

use crate::error::{Error, Result};

type Rt = Arc<tokio::runtime::Runtime>;

/// The process's Lance runtime.
///
/// # Errors
/// [`Error::InvalidArgument`] when the runtime cannot start (out of threads).
pub fn runtime() -> Result<Rt> {
    static RT: Mutex<Option<(u32, Rt)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut g = RT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((p, rt)) = &*g {
        if *p == pid {
            return Ok(rt.clone());
        }
    }
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("shardset-lance")
            .enable_all()
            .build()
            .map_err(|e| Error::InvalidArgument(format!("cannot start the Lance runtime: {e}")))?,
    );
    if let Some((_, parent)) = g.take() {
        // Inherited across fork: its threads are gone, dropping it could hang.
        std::mem::forget(parent);
    }
    *g = Some((pid, rt.clone()));
    Ok(rt)
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
    let rt = runtime()?;
    if tokio::runtime::Handle::try_current().is_ok() {
        return std::thread::scope(|s| {
            s.spawn(|| rt.block_on(fut))
                .join()
                .map_err(|p| Error::from_panic("lance", p))
        });
    }
    Ok(rt.block_on(fut))
}

/// A local directory as the URI Lance takes.
///
/// # Errors
/// [`Error::InvalidArgument`] when the path is not UTF-8.
pub(crate) fn dir_uri(dir: &std::path::Path) -> Result<String> {
    dir.to_str()
        .map(str::to_string)
        .ok_or_else(|| Error::InvalidArgument(format!("{} is not UTF-8", dir.display())))
}

/// A Lance error as ours, naming the dataset.
pub fn lance_err(path: &std::path::Path, e: impl std::fmt::Display) -> Error {
    Error::CorruptShard {
        path: path.to_path_buf(),
        reason: format!("lance: {e}"),
    }
}

/// Reads every row of the Lance dataset at `dir` (the `columns` given), one
/// fragment after another and in row order, handing each decoded batch to
/// `f`; returns each fragment's row count. Memory stays at a batch or so.
///
/// # Errors
/// [`Error::CorruptShard`] naming the dataset when Lance cannot open it or a
/// batch does not decode.
pub fn scan_dataset<F>(dir: &std::path::Path, columns: &[String], mut f: F) -> Result<Vec<u64>>
where
    F: FnMut(&arrow_array::RecordBatch) + Send,
{
    use futures::StreamExt;
    let uri = dir_uri(dir)?;
    block_on(async move {
        let ds = Arc::new(lance::Dataset::open(&uri).await?);
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

pub(crate) fn fsync_tree(dir: &Path) -> Result<()> {
    for e in std::fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))? {
        let e = e.map_err(|e| Error::io("read directory", dir, e))?;
        let p = e.path();
        if p.is_dir() {
            fsync_tree(&p)?;
        } else {
            let f = std::fs::File::open(&p).map_err(|e| Error::io("open", &p, e))?;
            f.sync_all().map_err(|e| Error::io("fsync", &p, e))?;
        }
    }
    crate::util::fsync_dir(dir)
}
