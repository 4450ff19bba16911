//! What both Lance layouts (`lance-rows`, `lance-video-frames`) need from the
//! `lance` crate: a tokio runtime hidden behind a synchronous API, errors
//! naming the dataset, reads of a whole dataset, and the fsync of a written
//! dataset; the resumable writes (`segments`) and the publication and
//! clean-up of datasets on object storage (`remote`) have modules of their
//! own.
//!
//! The runtime is per process: after a `fork` the child's first Lance call
//! builds its own (the parent's worker threads do not exist in the child), so
//! nothing Lance-related is shared across fork.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use lance::dataset::Dataset;

use crate::error::{Error, Result};

mod files;
#[cfg(feature = "s3")]
mod remote;
mod segments;

pub(crate) use files::{check_fragment_files, check_uncounted, open_checked};

#[cfg(feature = "s3")]
pub(crate) use remote::{collect_remote_versions, LocalBuild};
pub(crate) use segments::{rewind_dataset, LanceSegments};

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

/// Opens the Lance dataset at `uri` at `version` (None: the latest),
/// reading only that version's manifest.
///
/// # Errors
/// Lance's, for a dataset or version that cannot be opened.
pub(crate) async fn open_dataset_at(uri: &str, version: Option<u64>) -> lance::Result<Dataset> {
    let Some(v) = version else {
        return open_dataset(uri).await;
    };
    let builder = lance::dataset::builder::DatasetBuilder::from_uri(uri).with_version(v);
    #[cfg(feature = "s3")]
    let builder = if uri.starts_with(crate::storage::object::S3_SCHEME) {
        builder.with_storage_options(crate::storage::object::lance_storage_options())
    } else {
        builder
    };
    builder.load().await
}

/// [`block_on`] for a read of the dataset at `dir`. Lance trusts offsets
/// and lengths in its files and panics on some damaged ones (a slice past
/// a manifest's end, ...): such a panic is an [`Error::CorruptShard`]
/// naming the dataset, never the caller's.
///
/// # Errors
/// As [`block_on`]; a panic of Lance as above.
pub(crate) fn block_on_read<F>(dir: &Path, fut: F) -> Result<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let message = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| block_on(fut))) {
        Ok(Err(Error::Panic { message, .. })) => message,
        Ok(r) => return r,
        Err(p) => match Error::from_panic("lance", p) {
            Error::Panic { message, .. } => message,
            e => e.to_string(),
        },
    };
    Err(lance_err(
        dir,
        format!("a damaged file made Lance panic ({message})"),
    ))
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
/// Every data file is checked first ([`check_fragment_files`]).
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
    let ds = block_on_read(dir, async move { open_dataset_at(&uri, version).await })?
        .map_err(|e| lance_err(dir, e))?;
    let storage = crate::storage::storage_for(dir);
    for frag in ds.get_fragments() {
        check_fragment_files(storage.as_ref(), dir, &frag)?;
    }
    let ds = Arc::new(ds);
    block_on_read(dir, async move {
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
