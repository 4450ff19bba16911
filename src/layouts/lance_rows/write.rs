//! The `lance-rows` writer: the same encode pipeline as the Arrow writer,
//! streamed into Lance through a bounded channel, so peak memory is a few
//! batches whatever the row count. Rows are committed one data file at a
//! time (`max_rows_per_file` rows, a Lance version each), so the fragments
//! are those of a single write, and a build can resume after its last
//! committed file: the resume log (`_lance_progress.jsonl`, see
//! [`crate::cache::build`]) records each commit's version, rows and the
//! work units finished.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::cache::build::{ends_up_to, Build, Extra, LogLine, ResumeLog, ResumePoint};
use crate::cache::checksums::write_file_checksums;
use crate::cache::lock::CacheLock;
use crate::cache::metadata::{
    LanceRowsMetadata, WriterInfo, CACHE_FORMAT_VERSION, LAYOUT_LANCE_ROWS,
};
use crate::cache::pipeline::{self, PipelineOptions};
use crate::error::{BoxError, Error, Result};
use crate::features::describe::features_to_json;
use crate::features::Features;
use crate::lance::{block_on, fragment_rows, lance_err, rewind_dataset, LanceSegments};
use crate::layouts::arrow_shards::format::Codec;
use crate::storage::storage_for;
use crate::value::Example;
use arrow_array::RecordBatch;

pub use super::options::{LanceStorageVersion, LanceWriteOptions};

/// What a finished Lance write produced.
#[derive(Debug, Clone)]
pub struct WrittenLance {
    /// The published cache directory.
    pub dir: PathBuf,
    /// Its metadata.
    pub metadata: LanceRowsMetadata,
    /// Rows taken over from a killed build of the same cache (0 for a fresh build).
    pub resumed_rows: u64,
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
    crate::cache::location::write_at(cache_dir, |dir, lock| {
        write_lance_cache_locked(examples, features, dir, opts, lock)
    })
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
    lock: &CacheLock,
) -> Result<WrittenLance>
where
    I: IntoIterator<Item = std::result::Result<Example, E>>,
    E: Into<BoxError>,
{
    let build = Build::fresh(&storage_for(cache_dir), cache_dir, lock)?;
    let prepared = PreparedLance {
        build,
        log: None,
        version: 0,
        resume: ResumePoint::default(),
    };
    prepared.run(examples, features, opts, Extra::default())
}

/// The zstd level Lance compresses at when none is given.
pub const LANCE_ZSTD_DEFAULT_LEVEL: i32 = 3;

/// The resume log of a `lance-rows` build, in its temp dir.
pub(crate) const PROGRESS_FILE: &str = "_lance_progress.jsonl";

/// What a `lance-rows` build is; a resumed build must match it exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LanceBuildHeader {
    /// The cache directory's name.
    pub cache_name: String,
    /// Schema fingerprint of the features.
    pub schema_fingerprint: String,
    /// Rows per record batch.
    pub batch_size: u64,
    /// Rows per data file (and per commit).
    pub max_rows_per_file: u64,
    /// The Lance data storage version asked for.
    pub data_storage_version: Option<LanceStorageVersion>,
    /// How PNG pixels are deflated.
    pub png: String,
    /// The compression asked of Lance (`codec` or `codec:level`).
    #[serde(default)]
    pub compression: Option<String>,
    /// Stamp of the declared sources and the config.
    pub sources_digest: String,
    /// The writing crate's version.
    pub writer: String,
}

impl LanceBuildHeader {
    /// The header of a build of `cache_dir` with these options and inputs.
    pub fn new(
        cache_dir: &Path,
        features: &Features,
        opts: &LanceWriteOptions,
        sources_digest: String,
    ) -> Self {
        LanceBuildHeader {
            cache_name: cache_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            schema_fingerprint: features.fingerprint(),
            batch_size: opts.batch_size.get() as u64,
            max_rows_per_file: opts.max_rows_per_file.get() as u64,
            data_storage_version: opts.data_storage_version,
            png: format!("{:?}", opts.png),
            compression: opts.compression.map(|c| match c.level() {
                Some(l) => format!("{}:{l}", c.compression()),
                None => c.compression().to_string(),
            }),
            sources_digest,
            writer: WriterInfo::current().version,
        }
    }
}

/// One committed Lance version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LanceCommit {
    /// The Lance version.
    version: u64,
    /// Rows committed so far.
    rows: u64,
    /// Cumulative row counts at which work units ended, up to `rows`.
    unit_ends: Vec<u64>,
}

impl LogLine for LanceBuildHeader {
    const KIND: &'static str = "header";
}

impl LogLine for LanceCommit {
    const KIND: &'static str = "commit";
}

/// A `lance-rows` build under the lock, ready to take examples: fresh, or
/// continuing a killed build of the same cache after its last commit.
pub struct PreparedLance {
    build: Build,
    log: Option<ResumeLog<LanceCommit>>,
    version: u64,
    resume: ResumePoint,
}

/// Prepares a resumable `lance-rows` build under the lock. A left-over temp
/// dir whose resume log's header equals `header` is continued: its Lance
/// dataset goes back to the last recorded commit (a commit the log does not
/// record is undone, its files deleted). Every other left-over is removed.
///
/// # Errors
/// [`Error::Io`] naming the directory or log.
pub fn prepare_resumable(
    cache_dir: &Path,
    lock: &CacheLock,
    header: &LanceBuildHeader,
) -> Result<PreparedLance> {
    let storage = storage_for(cache_dir);
    let (build, log, commits) = Build::resume(
        &storage,
        cache_dir,
        lock,
        PROGRESS_FILE,
        header,
        |_, c: &LanceCommit, before| {
            c.version > 0
                && before
                    .last()
                    .is_none_or(|p| c.version > p.version && c.rows > p.rows)
        },
        |dir, commits| {
            let version = commits.last().map_or(0, |c| c.version);
            rewind_dataset(&storage, dir, version, &[PROGRESS_FILE])
        },
    )?;
    let last = commits.last();
    Ok(PreparedLance {
        version: last.map_or(0, |c| c.version),
        resume: ResumePoint::new(
            last.map_or(0, |c| c.rows),
            last.map(|c| c.unit_ends.clone()).unwrap_or_default(),
        ),
        build,
        log: Some(log),
    })
}

impl PreparedLance {
    /// Where this build continues (the examples to give
    /// [`PreparedLance::run`] start after its `skip()` rows).
    pub fn resume_point(&self) -> &ResumePoint {
        &self.resume
    }

    /// Encodes and writes `examples` (those after [`ResumePoint::skip`]),
    /// committing one data file at a time, then publishes. On error a
    /// resumable build keeps its temp dir and commits for the next build.
    ///
    /// # Errors
    /// As [`write_lance_cache`].
    pub fn run<I, E>(
        self,
        examples: I,
        features: &Features,
        opts: &LanceWriteOptions,
        extra: Extra,
    ) -> Result<WrittenLance>
    where
        I: IntoIterator<Item = std::result::Result<Example, E>>,
        E: Into<BoxError>,
    {
        if let Some((name, _)) = features.iter().find(|(n, _)| n.contains('.')) {
            return Err(Error::InvalidFeature(format!(
                "column '{name}': Lance does not allow '.' in a top-level column name (it reads it as a struct path); rename the column, or write the arrow layout"
            )));
        }
        check_scalar_index(features, &opts.scalar_index)?;
        let PreparedLance {
            build,
            mut log,
            version,
            resume,
        } = self;
        let (skip, sink) = (resume.skip(), resume.unit_ends_sink());
        let storage = build.storage().clone();
        let data_dir = build.dir().to_path_buf();
        let per_file = opts.max_rows_per_file.get() as u64;
        let schema = opts.lance_schema(features);
        let mut lance = LanceSegments::new(
            &data_dir,
            schema.clone(),
            opts.max_rows_per_file.get(),
            version > 0,
        )?
        .with_rows_per_group(opts.batch_size.get().min(1024))
        .with_storage_version(opts.data_storage_version.map(LanceStorageVersion::to_lance));
        if let Some(p) = &opts.progress {
            p.fetch_add(skip, Ordering::Relaxed);
        }
        // Rows sent to the open segment, and in all.
        let (mut in_segment, mut sent) = (0u64, skip);
        let mut commit = |lance: &mut LanceSegments, sent: u64| -> Result<()> {
            if let Some(ds) = lance.commit()? {
                if let Some(log) = &mut log {
                    storage.sync_tree(&data_dir)?;
                    log.append(&LanceCommit {
                        version: ds.version().version,
                        rows: sent,
                        unit_ends: ends_up_to(&sink, sent),
                    })?;
                }
            }
            Ok(())
        };
        pipeline::run(
            examples,
            Arc::new(features.clone()),
            &data_dir,
            PipelineOptions {
                batch_size: opts.batch_size,
                threads: opts.encode_threads,
                png: opts.png,
                row_offset: skip,
            },
            |batch| {
                let n = batch.num_rows() as u64;
                let mut at = 0u64;
                // A data file's worth of rows per commit: the batch is cut
                // where a file fills up.
                while at < n {
                    let take = (n - at).min(per_file - in_segment);
                    let piece = batch.slice(at as usize, take as usize);
                    let piece = RecordBatch::try_new(schema.clone(), piece.columns().to_vec())
                        .map_err(|e| Error::arrow(Some(&data_dir), e))?;
                    lance.send(piece)?;
                    (at, in_segment, sent) = (at + take, in_segment + take, sent + take);
                    if in_segment == per_file {
                        commit(&mut lance, sent)?;
                        in_segment = 0;
                    }
                }
                if let Some(p) = &opts.progress {
                    p.fetch_add(n, Ordering::Relaxed);
                }
                Ok(())
            },
        )?;
        commit(&mut lance, sent)?;
        let ds = match lance.finish()? {
            Some(ds) => ds,
            // No row at all: an empty dataset, as a single write makes.
            None => lance.create_empty()?,
        };
        let ds = scalar_indices(ds, &opts.scalar_index, &data_dir)?;
        let fragment_rows = fragment_rows(&ds, &data_dir)?;
        let num_rows: u64 = fragment_rows.iter().sum();
        if num_rows != sent {
            return Err(lance_err(
                &data_dir,
                format!("Lance holds {num_rows} rows, {sent} were written"),
            ));
        }
        storage.sync_tree(&data_dir)?;
        // Every data file's xxh64, so `verify` checks a Lance cache's bytes as
        // it does an Arrow cache's.
        write_file_checksums(storage.as_ref(), &data_dir, &[PROGRESS_FILE])?;
        let metadata = LanceRowsMetadata {
            cache_format_version: CACHE_FORMAT_VERSION,
            format: "lance".into(),
            layout: LAYOUT_LANCE_ROWS.into(),
            schema_fingerprint: features.fingerprint(),
            num_rows,
            lineage: opts.lineage.clone(),
            fragment_row_counts: Some(fragment_rows),
            data_storage_version: opts.data_storage_version.map(|v| v.name().to_string()),
            compression: opts.compression.map(Codec::compression),
            compression_level: opts.compression.and_then(|c| match c {
                Codec::Zstd { level } => Some(level.unwrap_or(LANCE_ZSTD_DEFAULT_LEVEL)),
                _ => None,
            }),
            features: Some(features_to_json(features)),
            sources: extra.sources,
            config: extra.config,
            writer: Some(WriterInfo::current()),
            lance_version: Some(ds.version().version),
            version: None,
            metadata_xxh64: None,
        };
        let dir = build.publish(&metadata, &[PROGRESS_FILE])?;
        Ok(WrittenLance {
            dir,
            metadata,
            resumed_rows: skip,
        })
    }
}

impl crate::cache::location::WrittenAt for WrittenLance {
    fn published_at(&mut self, dir: PathBuf) {
        self.dir = dir;
    }
}

/// Checks that each column to index is a scalar column of `features`.
fn check_scalar_index(features: &Features, columns: &[String]) -> Result<()> {
    use crate::features::{Dtype, Feature};
    for c in columns {
        match features.get(c) {
            Some(Feature::ClassLabel(_)) => {}
            Some(Feature::Value(d)) if *d != Dtype::Binary => {}
            Some(f) => {
                return Err(Error::InvalidArgument(format!(
                    "write option scalar_index: column '{c}' is {}, and only Value (not binary) and ClassLabel columns take a scalar index",
                    f.class_name()
                )))
            }
            None => {
                return Err(Error::InvalidArgument(format!(
                    "write option scalar_index: no column '{c}' (columns: {:?})",
                    features.names()
                )))
            }
        }
    }
    Ok(())
}

/// `ds` with a BTree index on each of `columns` (a new Lance version when
/// there is any): the version the metadata then names.
fn scalar_indices(
    mut ds: lance::Dataset,
    columns: &[String],
    dir: &Path,
) -> Result<lance::Dataset> {
    use lance::index::DatasetIndexExt;
    if columns.is_empty() {
        return Ok(ds);
    }
    let columns = columns.to_vec();
    block_on(async move {
        let params = lance_index::scalar::ScalarIndexParams::default();
        for c in &columns {
            ds.create_index(
                &[c.as_str()],
                lance_index::IndexType::BTree,
                None,
                &params,
                true,
            )
            .await?;
        }
        Ok::<_, lance::Error>(ds)
    })?
    .map_err(|e| lance_err(dir, format!("creating a scalar index: {e}")))
}
