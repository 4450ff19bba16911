//! The `lance-rows` writer: the same encode pipeline as the Arrow writer,
//! streamed into one `lance::Dataset::write` through a bounded channel, so
//! peak memory is a few batches whatever the row count.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use arrow_array::RecordBatch;
use crossbeam_channel::bounded;
use lance::dataset::{Dataset, WriteMode, WriteParams};

use crate::cache::checksums::write_file_checksums;
use crate::cache::lock::CacheLock;
use crate::cache::metadata::{
    write_json_checksummed, LanceRowsMetadata, WriterInfo, CACHE_FORMAT_VERSION, LAYOUT_LANCE_ROWS,
    METADATA_FILE,
};
use crate::cache::pipeline::{self, checked_batch_size, PipelineOptions, DEFAULT_BATCH_SIZE};
use crate::cache::publish::{remove_leftovers, StagingDir};
use crate::error::{BoxError, Error, Result};
use crate::features::describe::features_to_json;
use crate::features::image::PngCompression;
use crate::features::Features;
use crate::lance::{block_on, fragment_rows, fsync_tree, lance_err, ChannelReader};
use crate::value::Example;

/// The Lance file format version of the data files (`data_storage_version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
pub enum LanceStorageVersion {
    /// The legacy (0.1) format.
    #[serde(rename = "legacy")]
    #[value(name = "legacy")]
    Legacy,
    /// 2.0.
    #[serde(rename = "2.0")]
    #[value(name = "2.0")]
    V2_0,
    /// 2.1.
    #[serde(rename = "2.1")]
    #[value(name = "2.1")]
    V2_1,
    /// 2.2.
    #[serde(rename = "2.2")]
    #[value(name = "2.2")]
    V2_2,
    /// The library's current stable version.
    #[serde(rename = "stable")]
    #[value(name = "stable")]
    Stable,
}

impl LanceStorageVersion {
    /// The name as Lance and `_metadata.json` spell it.
    pub fn name(self) -> &'static str {
        match self {
            LanceStorageVersion::Legacy => "legacy",
            LanceStorageVersion::V2_0 => "2.0",
            LanceStorageVersion::V2_1 => "2.1",
            LanceStorageVersion::V2_2 => "2.2",
            LanceStorageVersion::Stable => "stable",
        }
    }

    fn to_lance(self) -> lance_file::version::LanceFileVersion {
        use lance_file::version::LanceFileVersion as V;
        match self {
            LanceStorageVersion::Legacy => V::Legacy,
            LanceStorageVersion::V2_0 => V::V2_0,
            LanceStorageVersion::V2_1 => V::V2_1,
            LanceStorageVersion::V2_2 => V::V2_2,
            LanceStorageVersion::Stable => V::Stable,
        }
    }
}

impl std::fmt::Display for LanceStorageVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for LanceStorageVersion {
    type Err = Error;

    /// Parses `legacy` (or `0.1`), `2.0`, `2.1`, `2.2` or `stable`.
    fn from_str(v: &str) -> Result<Self> {
        Ok(match v {
            "legacy" | "0.1" => LanceStorageVersion::Legacy,
            "2.0" => LanceStorageVersion::V2_0,
            "2.1" => LanceStorageVersion::V2_1,
            "2.2" => LanceStorageVersion::V2_2,
            "stable" => LanceStorageVersion::Stable,
            other => {
                return Err(Error::InvalidArgument(format!(
                "Lance data storage version must be legacy, 2.0, 2.1, 2.2 or stable, got '{other}'"
            )))
            }
        })
    }
}

/// Options of [`write_lance_cache`]: private fields, validated when set.
#[derive(Debug, Clone)]
pub struct LanceWriteOptions {
    batch_size: NonZeroUsize,
    max_rows_per_file: NonZeroUsize,
    data_storage_version: Option<LanceStorageVersion>,
    encode_threads: usize,
    lineage: Option<serde_json::Value>,
    progress: Option<Arc<AtomicU64>>,
    png: PngCompression,
}

impl Default for LanceWriteOptions {
    fn default() -> Self {
        LanceWriteOptions {
            batch_size: DEFAULT_BATCH_SIZE,
            max_rows_per_file: NonZeroUsize::new(1024 * 1024).expect("positive"),
            data_storage_version: None,
            encode_threads: 0,
            lineage: None,
            progress: None,
            png: PngCompression::Fast,
        }
    }
}

impl LanceWriteOptions {
    /// Examples per record batch (default 1000).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0.
    pub fn try_with_batch_size(mut self, n: usize) -> Result<Self> {
        self.batch_size = checked_batch_size(n)?;
        Ok(self)
    }

    /// Rows per Lance data file: more fragments for more parallel reads
    /// (default 1,048,576, pylance's).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0.
    pub fn try_with_max_rows_per_file(mut self, n: usize) -> Result<Self> {
        self.max_rows_per_file = NonZeroUsize::new(n)
            .ok_or_else(|| Error::InvalidArgument("max_rows_per_file must be at least 1".into()))?;
        Ok(self)
    }

    /// The Lance data storage version (default: the library's).
    pub fn with_data_storage_version(mut self, v: LanceStorageVersion) -> Self {
        self.data_storage_version = Some(v);
        self
    }

    /// Encode threads (0, the default: one per core).
    pub fn with_encode_threads(mut self, n: usize) -> Self {
        self.encode_threads = n;
        self
    }

    /// How PNG images given as pixels are deflated (see
    /// [`ArrowWriteOptions::with_png_compression`](crate::ArrowWriteOptions::with_png_compression)).
    pub fn with_png_compression(mut self, png: PngCompression) -> Self {
        self.png = png;
        self
    }

    /// Provenance recorded under `lineage`.
    pub fn with_lineage(mut self, lineage: serde_json::Value) -> Self {
        self.lineage = Some(lineage);
        self
    }

    /// A counter the writer adds each batch's rows to once the batch is
    /// handed to Lance (see [`ArrowWriteOptions::with_progress`](crate::ArrowWriteOptions::with_progress)).
    pub fn with_progress(mut self, counter: Arc<AtomicU64>) -> Self {
        self.progress = Some(counter);
        self
    }

    /// Examples per record batch.
    pub fn batch_size(&self) -> usize {
        self.batch_size.get()
    }

    /// Rows per Lance data file.
    pub fn max_rows_per_file(&self) -> usize {
        self.max_rows_per_file.get()
    }

    /// The data storage version set, if any.
    pub fn data_storage_version(&self) -> Option<LanceStorageVersion> {
        self.data_storage_version
    }

    /// Encode threads (0: one per core).
    pub fn encode_threads(&self) -> usize {
        self.encode_threads
    }
}

/// What a finished Lance write produced.
#[derive(Debug, Clone)]
pub struct WrittenLance {
    /// The published cache directory.
    pub dir: PathBuf,
    /// Its metadata.
    pub metadata: LanceRowsMetadata,
}

/// Writes examples into a `lance-rows` cache at `cache_dir` (replacing one there atomically).
///
/// # Errors
/// Any encode, generator, I/O or Lance error; nothing is published then.
pub fn write_lance_cache<I>(
    examples: I,
    features: &Features,
    cache_dir: &Path,
    opts: &LanceWriteOptions,
) -> Result<WrittenLance>
where
    I: IntoIterator<Item = Example>,
{
    try_write_lance_cache(
        examples.into_iter().map(Ok::<_, std::convert::Infallible>),
        features,
        cache_dir,
        opts,
    )
}

/// Like [`write_lance_cache`], for a generator that can fail.
///
/// # Errors
/// As [`write_lance_cache`].
pub fn try_write_lance_cache<I, E>(
    examples: I,
    features: &Features,
    cache_dir: &Path,
    opts: &LanceWriteOptions,
) -> Result<WrittenLance>
where
    I: IntoIterator<Item = std::result::Result<Example, E>>,
    E: Into<BoxError>,
{
    let lock = CacheLock::acquire(cache_dir)?;
    write_lance_cache_locked(examples, features, cache_dir, opts, &lock)
}

/// The writer proper, for callers that hold the cache's lock.
///
/// # Errors
/// As [`write_lance_cache`].
pub fn write_lance_cache_locked<I, E>(
    examples: I,
    features: &Features,
    cache_dir: &Path,
    opts: &LanceWriteOptions,
    _lock: &CacheLock,
) -> Result<WrittenLance>
where
    I: IntoIterator<Item = std::result::Result<Example, E>>,
    E: Into<BoxError>,
{
    let version = opts.data_storage_version.map(LanceStorageVersion::to_lance);
    remove_leftovers(cache_dir);
    let staging = StagingDir::create(cache_dir)?;
    let data_dir = staging.path().to_path_buf();
    let uri = crate::lance::dir_uri(&data_dir)?;
    let schema = features.arrow_schema();
    let params = WriteParams {
        max_rows_per_file: opts.max_rows_per_file.get(),
        max_rows_per_group: opts.batch_size.get().min(1024),
        mode: WriteMode::Create,
        data_storage_version: version,
        ..Default::default()
    };
    let (tx, rx) = bounded::<RecordBatch>(4);
    let reader = ChannelReader::new(schema.clone(), rx);
    // A data dir that lance creates itself, inside the temp dir.
    let (rows, written) = std::thread::scope(|s| {
        let lance_thread = s.spawn(move || {
            block_on(async move { Dataset::write(reader, uri.as_str(), Some(params)).await })
        });
        let rows = pipeline::run(
            examples,
            Arc::new(features.clone()),
            &data_dir,
            PipelineOptions {
                batch_size: opts.batch_size,
                threads: opts.encode_threads,
                png: opts.png,
                row_offset: 0,
            },
            |batch| {
                let n = batch.num_rows() as u64;
                tx.send(batch)
                    .map_err(|_| lance_err(&data_dir, "the Lance writer stopped early"))?;
                if let Some(p) = &opts.progress {
                    p.fetch_add(n, Ordering::Relaxed);
                }
                Ok(())
            },
        );
        drop(tx);
        let written = lance_thread
            .join()
            .map_err(|p| Error::from_panic("lance writer", p))
            .and_then(|r| r);
        (rows, written)
    });
    let ds = match (rows, written) {
        (Ok(_), Ok(Ok(ds))) => ds,
        // The encode side's error is the cause when both failed.
        (Err(e), _) => return Err(e),
        (Ok(_), Ok(Err(e))) => return Err(lance_err(&data_dir, e)),
        (Ok(_), Err(e)) => return Err(e),
    };
    let fragment_rows = fragment_rows(&ds, &data_dir)?;
    let num_rows: u64 = fragment_rows.iter().sum();
    fsync_tree(&data_dir)?;
    // Every data file's xxh64, so `verify` checks a Lance cache's bytes as
    // it does an Arrow cache's.
    write_file_checksums(&data_dir, &[])?;
    let metadata = LanceRowsMetadata {
        cache_format_version: CACHE_FORMAT_VERSION,
        format: "lance".into(),
        layout: LAYOUT_LANCE_ROWS.into(),
        schema_fingerprint: features.fingerprint(),
        num_rows,
        lineage: opts.lineage.clone(),
        fragment_row_counts: Some(fragment_rows),
        data_storage_version: opts.data_storage_version.map(|v| v.name().to_string()),
        features: Some(features_to_json(features)),
        writer: Some(WriterInfo::current()),
        metadata_xxh64: None,
    };
    write_json_checksummed(&staging.path().join(METADATA_FILE), &metadata)?;
    staging.publish()?;
    Ok(WrittenLance {
        dir: cache_dir.to_path_buf(),
        metadata,
    })
}
