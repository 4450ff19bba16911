//! The `arrow-shards` writer: examples to `shard-NNNNN.arrow` IPC files.
//!
//! Rotation follows the reference exactly: a shard accumulates the in-memory
//! size of each batch written to it (pyarrow's `RecordBatch.nbytes`), and is
//! closed after a *full* batch that brings it to the budget; the last partial
//! batch never triggers a rotation, and shards are opened lazily, so no empty
//! shard is ever written.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::cache::build::{Build, ResumePoint};
use crate::cache::lock::CacheLock;
use crate::cache::metadata::{
    ArrowShardsMetadata, DedupInfo, WriterInfo, CACHE_FORMAT_VERSION,
    CACHE_FORMAT_VERSION_EXTENDED, LAYOUT_ARROW_SHARDS,
};
use crate::cache::pipeline::{self, checked_batch_size, PipelineOptions, DEFAULT_BATCH_SIZE};
use crate::error::{BoxError, Error, Result};
use crate::features::describe::features_to_json;
use crate::features::image::PngCompression;
use crate::features::Features;
use crate::layouts::arrow_shards::format::{Codec, Compression, ShardRecord};
use crate::layouts::arrow_shards::manifest::{
    committed_shard_ok, drop_uncommitted, ManifestHeader, ManifestShard, MANIFEST_FILE,
};
use crate::storage::storage_for;
use crate::value::Example;

pub use crate::layouts::arrow_shards::shard_writer::{ShardWriter, UnitEnds};

/// Options of [`write_arrow_cache`]: private fields, validated when set, so
/// a writer never checks them again (arrow-rs's `IpcWriteOptions` is the model).
#[derive(Debug, Clone)]
pub struct ArrowWriteOptions {
    batch_size: NonZeroUsize,
    shard_size_bytes: Option<u64>,
    compression: Compression,
    encode_threads: usize,
    lineage: Option<serde_json::Value>,
    build_id: Option<String>,
    record_checksums: bool,
    progress: Option<Arc<AtomicU64>>,
    png: PngCompression,
    dedup: Option<u64>,
}

/// The shard byte budget unless one is set: 256 MiB, the one default of the
/// library, the CLI and builders (big enough that per-shard costs vanish,
/// small enough that shard-aware shuffling has shards to shuffle).
pub const DEFAULT_SHARD_SIZE_BYTES: u64 = 256 << 20;

/// The zstd level arrow-rs's IPC writer compresses at (zstd's default; not
/// settable through arrow-rs 58).
pub const ARROW_ZSTD_LEVEL: i32 = 3;

impl Default for ArrowWriteOptions {
    fn default() -> Self {
        ArrowWriteOptions {
            batch_size: DEFAULT_BATCH_SIZE,
            shard_size_bytes: Some(DEFAULT_SHARD_SIZE_BYTES),
            compression: Compression::None,
            encode_threads: 0,
            lineage: None,
            build_id: None,
            record_checksums: false,
            progress: None,
            png: PngCompression::Fast,
            dedup: None,
        }
    }
}

impl ArrowWriteOptions {
    /// Examples per IPC record batch (default 1000).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0.
    pub fn try_with_batch_size(mut self, n: usize) -> Result<Self> {
        self.batch_size = checked_batch_size(n)?;
        Ok(self)
    }

    /// Soft byte budget per shard: a shard closes after the full batch that
    /// brings its in-memory size (pyarrow `nbytes`) to the budget (default
    /// [`DEFAULT_SHARD_SIZE_BYTES`]). `None` writes one shard, as the
    /// reference does by default.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `Some(0)`.
    pub fn try_with_shard_size_bytes(mut self, bytes: Option<u64>) -> Result<Self> {
        if bytes == Some(0) {
            return Err(Error::InvalidArgument(
                "shard_size_bytes must be positive (None for one shard)".into(),
            ));
        }
        self.shard_size_bytes = bytes;
        Ok(self)
    }

    /// IPC buffer compression (default none).
    pub fn with_compression(mut self, c: Compression) -> Self {
        self.compression = c;
        self
    }

    /// IPC compression as one value, codec and level. arrow-rs 58's IPC
    /// writer compresses zstd at its default level ([`ARROW_ZSTD_LEVEL`])
    /// and LZ4 frames with no level, and exposes neither: so a zstd level is
    /// accepted only where it is what the writer does (3), and refused
    /// otherwise rather than recorded and ignored. The level written is
    /// recorded in the metadata (`compression_level`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zstd level other than 3.
    pub fn try_with_codec(mut self, codec: Codec) -> Result<Self> {
        match codec {
            Codec::Zstd { level: Some(l) } if l != ARROW_ZSTD_LEVEL => Err(Error::InvalidArgument(format!(
                "zstd level {l}: Arrow IPC shards are compressed by arrow-rs, whose writer uses zstd level {ARROW_ZSTD_LEVEL} only (Lance caches take levels 1 to 22)"
            ))),
            c => {
                self.compression = c.compression();
                Ok(self)
            }
        }
    }

    /// Encode threads (0, the default: one per core).
    pub fn with_encode_threads(mut self, n: usize) -> Self {
        self.encode_threads = n;
        self
    }

    /// Also keeps one xxh64 per row (`_row_xxh64/`), so that `verify` can
    /// name the exact rows of a damaged shard (a hash per row at write time).
    pub fn with_record_checksums(mut self, yes: bool) -> Self {
        self.record_checksums = yes;
        self
    }

    /// Stores each binary cell (image, array, `binary` value) of at least
    /// `threshold` bytes once: a later cell with the same bytes (xxh3-128
    /// and length, in the same column) is stored as a ref to the first (see
    /// [`crate::layouts::arrow_shards::dedup`]). Reads return the bytes
    /// written. A cache where something repeated is marked as needing
    /// shardset to read it (`cache_format_version` 2, `requires: ["dedup"]`);
    /// one where nothing did is the cache a write without dedup makes.
    /// [`DEFAULT_DEDUP_THRESHOLD`](crate::layouts::arrow_shards::dedup::DEFAULT_DEDUP_THRESHOLD)
    /// is 4 KiB.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a threshold of 0.
    pub fn try_with_dedup(mut self, threshold: Option<u64>) -> Result<Self> {
        if threshold == Some(0) {
            return Err(Error::InvalidArgument(
                "the dedup threshold must be at least 1 byte".into(),
            ));
        }
        self.dedup = threshold;
        Ok(self)
    }

    /// The dedup threshold, when dedup is on.
    pub fn dedup_threshold(&self) -> Option<u64> {
        self.dedup
    }

    /// How PNG images given as pixels are deflated (default
    /// [`PngCompression::Fast`]; `PngCompression::level(6)` writes what the
    /// reference's PIL writes). Images given as encoded bytes are stored as
    /// they are.
    pub fn with_png_compression(mut self, png: PngCompression) -> Self {
        self.png = png;
        self
    }

    /// Provenance recorded under `lineage` (the reference's key).
    pub fn with_lineage(mut self, lineage: serde_json::Value) -> Self {
        self.lineage = Some(lineage);
        self
    }

    /// The id stamped into every shard's footer. Left unset, each write gets
    /// a random one; builders set a deterministic one so that a resumed build
    /// is byte-identical to an uninterrupted one.
    pub fn with_build_id(mut self, id: impl Into<String>) -> Self {
        self.build_id = Some(id.into());
        self
    }

    /// A counter the writer adds each batch's rows to once the batch is
    /// written (rows committed by a resumed build are added at the start),
    /// so a caller can show progress from another thread. One relaxed atomic
    /// add per batch.
    pub fn with_progress(mut self, counter: Arc<AtomicU64>) -> Self {
        self.progress = Some(counter);
        self
    }

    /// Examples per record batch.
    pub fn batch_size(&self) -> usize {
        self.batch_size.get()
    }

    /// The shard byte budget (`None`: one shard).
    pub fn shard_size_bytes(&self) -> Option<u64> {
        self.shard_size_bytes
    }

    /// The IPC compression.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Encode threads (0: one per core).
    pub fn encode_threads(&self) -> usize {
        self.encode_threads
    }

    /// Whether per-record checksums are kept.
    pub fn record_checksums(&self) -> bool {
        self.record_checksums
    }

    /// The lineage recorded, if any.
    pub fn lineage(&self) -> Option<&serde_json::Value> {
        self.lineage.as_ref()
    }

    /// The build id set, if any.
    pub fn build_id(&self) -> Option<&str> {
        self.build_id.as_deref()
    }

    /// The progress counter, if any.
    pub fn progress(&self) -> Option<&Arc<AtomicU64>> {
        self.progress.as_ref()
    }
}

/// What a finished write produced.
#[derive(Debug, Clone)]
pub struct WrittenCache {
    /// The published cache directory.
    pub dir: PathBuf,
    /// Its metadata as written.
    pub metadata: ArrowShardsMetadata,
    /// Rows taken over from a killed build of the same cache (0 for a fresh build).
    pub resumed_rows: u64,
}

/// Writes examples into an `arrow-shards` cache at `cache_dir`, replacing any
/// cache there atomically.
///
/// # Errors
/// Any encode, generator, I/O or Arrow error; on error nothing is published
/// and the temp dir is removed.
pub fn write_arrow_cache<I>(
    examples: I,
    features: &Features,
    cache_dir: &Path,
    opts: &ArrowWriteOptions,
) -> Result<WrittenCache>
where
    I: IntoIterator<Item = Example>,
{
    try_write_arrow_cache(
        examples.into_iter().map(Ok::<_, std::convert::Infallible>),
        features,
        cache_dir,
        opts,
    )
}

/// Like [`write_arrow_cache`], for a generator that can fail.
///
/// # Errors
/// See [`write_arrow_cache`]; a generator error comes back as [`Error::Generator`].
pub fn try_write_arrow_cache<I, E>(
    examples: I,
    features: &Features,
    cache_dir: &Path,
    opts: &ArrowWriteOptions,
) -> Result<WrittenCache>
where
    I: IntoIterator<Item = std::result::Result<Example, E>>,
    E: Into<BoxError>,
{
    crate::cache::location::write_at(cache_dir, |dir, lock| {
        write_arrow_cache_locked(examples, features, dir, opts, lock)
    })
}

/// The writer proper, for callers that already hold the cache's lock.
///
/// # Errors
/// See [`try_write_arrow_cache`].
pub fn write_arrow_cache_locked<I, E>(
    examples: I,
    features: &Features,
    cache_dir: &Path,
    opts: &ArrowWriteOptions,
    lock: &CacheLock,
) -> Result<WrittenCache>
where
    I: IntoIterator<Item = std::result::Result<Example, E>>,
    E: Into<BoxError>,
{
    // Under the lock nobody else is building this cache: temp or replaced
    // directories beside it are left-overs of a killed process.
    let build = Build::fresh(&storage_for(cache_dir), cache_dir, lock)?;
    let build_id = opts.build_id.clone().unwrap_or_else(random_build_id);
    let shards = ShardWriter::new(
        build.storage().clone(),
        build.dir(),
        features.arrow_schema(),
        opts.batch_size.get(),
        opts.shard_size_bytes,
        opts.compression,
        build_id.clone(),
    )?
    .with_record_checksums(opts.record_checksums);
    let shards = match opts.dedup {
        Some(t) => shards.with_dedup(t),
        None => shards,
    };
    let extra = Extra::default();
    finish_build(examples, features, build, opts, shards, build_id, 0, extra)
}

/// A random build id (each direct write is a new generation).
pub fn random_build_id() -> String {
    crate::util::random_suffix() + &crate::util::random_suffix()
}

pub use crate::cache::build::Extra;

/// A build under the lock, ready to take examples: either fresh, or
/// continuing a killed build of the same cache from its last committed shard.
pub struct PreparedBuild {
    build: Build,
    shards: ShardWriter,
    build_id: String,
    resume: ResumePoint,
}

impl PreparedBuild {
    /// Where this build continues (the examples to give
    /// [`PreparedBuild::run`] start after its `skip()` rows).
    pub fn resume_point(&self) -> &ResumePoint {
        &self.resume
    }

    /// Encodes and writes `examples` (those after [`ResumePoint::skip`]),
    /// then publishes. On error the temp dir and its committed shards stay,
    /// for the next build to resume.
    ///
    /// # Errors
    /// As [`try_write_arrow_cache`].
    pub fn run<I, E>(
        self,
        examples: I,
        features: &Features,
        opts: &ArrowWriteOptions,
        extra: Extra,
    ) -> Result<WrittenCache>
    where
        I: IntoIterator<Item = std::result::Result<Example, E>>,
        E: Into<BoxError>,
    {
        let PreparedBuild {
            build,
            shards,
            build_id,
            resume,
        } = self;
        let skip = resume.skip();
        // A failed attempt keeps its committed work; the next build resumes it.
        finish_build(
            examples, features, build, opts, shards, build_id, skip, extra,
        )
    }
}

/// Prepares a resumable build under the lock. A left-over temp dir whose
/// manifest header equals `header` is continued (its intact committed shards
/// kept, a torn tail and uncommitted files dropped); every other left-over
/// of this cache is removed.
///
/// # Errors
/// [`Error::Io`] naming the directory or manifest.
pub fn prepare_resumable(
    features: &Features,
    cache_dir: &Path,
    opts: &ArrowWriteOptions,
    lock: &CacheLock,
    header: ManifestHeader,
) -> Result<PreparedBuild> {
    let storage = storage_for(cache_dir);
    let (build, manifest, committed) = Build::resume(
        &storage,
        cache_dir,
        lock,
        MANIFEST_FILE,
        &header,
        |dir, s: &ManifestShard, before| committed_shard_ok(storage.as_ref(), dir, s, before),
        |dir, committed| drop_uncommitted(storage.as_ref(), dir, committed),
    )?;
    let resume = ResumePoint::new(
        committed.iter().map(|s| s.num_rows).sum(),
        committed
            .last()
            .map(|s| s.unit_ends.clone())
            .unwrap_or_default(),
    );
    let done = committed
        .into_iter()
        .map(|s| ShardRecord {
            filename: s.filename,
            num_rows: s.num_rows,
            num_bytes: s.num_bytes,
            xxh64: s.xxh64,
            refs: s.refs,
        })
        .collect();
    let shards = ShardWriter::new(
        storage.clone(),
        build.dir(),
        features.arrow_schema(),
        opts.batch_size.get(),
        opts.shard_size_bytes,
        opts.compression,
        header.build_id.clone(),
    )?
    .with_record_checksums(opts.record_checksums)
    .with_manifest(done, manifest, Some(resume.unit_ends_sink()));
    let shards = match opts.dedup {
        Some(t) => shards.with_dedup(t),
        None => shards,
    };
    Ok(PreparedBuild {
        build,
        shards,
        build_id: header.build_id,
        resume,
    })
}

#[allow(clippy::too_many_arguments)]
fn finish_build<I, E>(
    examples: I,
    features: &Features,
    build: Build,
    opts: &ArrowWriteOptions,
    mut shards: ShardWriter,
    build_id: String,
    skip: u64,
    extra: Extra,
) -> Result<WrittenCache>
where
    I: IntoIterator<Item = std::result::Result<Example, E>>,
    E: Into<BoxError>,
{
    let progress = opts.progress.as_deref();
    if let Some(p) = progress {
        p.fetch_add(skip, Ordering::Relaxed);
    }
    pipeline::run(
        examples,
        Arc::new(features.clone()),
        build.dir(),
        PipelineOptions {
            batch_size: opts.batch_size,
            threads: opts.encode_threads,
            png: opts.png,
            row_offset: skip,
        },
        |batch| {
            shards.write(&batch)?;
            if let Some(p) = progress {
                p.fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
            }
            Ok(())
        },
    )?;
    let totals = shards.dedup_totals();
    let records = shards.finish()?;
    let rows: u64 = records.iter().map(|r| r.num_rows).sum();
    // Refs in any shard (this run's or a resumed build's) mark the cache.
    let refs: u64 = records.iter().map(|r| r.refs).sum();
    let dedup = (refs > 0).then(|| {
        let schema = features.arrow_schema();
        DedupInfo {
            threshold_bytes: opts.dedup.unwrap_or(0),
            hash: "xxh3-128".into(),
            columns: crate::layouts::arrow_shards::dedup::eligible_columns(&schema)
                .into_iter()
                .map(|c| schema.field(c).name().clone())
                .collect(),
            shard_refs: records.iter().map(|r| r.refs).collect(),
            cells: refs,
            bytes_saved: totals.map_or(0, |t| t.1),
        }
    });
    let metadata = ArrowShardsMetadata {
        cache_format_version: if dedup.is_some() {
            CACHE_FORMAT_VERSION_EXTENDED
        } else {
            CACHE_FORMAT_VERSION
        },
        format: "arrow".into(),
        layout: LAYOUT_ARROW_SHARDS.into(),
        schema_fingerprint: features.fingerprint(),
        num_rows: rows,
        num_shards: records.len() as u64,
        shard_row_counts: records.iter().map(|r| r.num_rows).collect(),
        shard_filenames: records.iter().map(|r| r.filename.clone()).collect(),
        shard_size_target_bytes: opts.shard_size_bytes,
        compression: opts.compression,
        compression_level: (opts.compression == Compression::Zstd).then_some(ARROW_ZSTD_LEVEL),
        lineage: opts.lineage.clone(),
        shard_num_bytes: Some(records.iter().map(|r| r.num_bytes).collect()),
        shard_xxh64: Some(records.iter().map(|r| r.xxh64.clone()).collect()),
        batch_size: Some(opts.batch_size.get() as u64),
        features: Some(features_to_json(features)),
        sources: extra.sources,
        config: extra.config,
        writer: Some(WriterInfo::current()),
        build_id: Some(build_id),
        row_checksums: opts.record_checksums.then_some(true),
        requires: dedup
            .is_some()
            .then(|| vec![crate::layouts::arrow_shards::dedup::DEDUP_REQUIREMENT.to_string()]),
        dedup,
        version: None,
        metadata_xxh64: None,
    };
    // The manifest is build-time state; it goes just before publication.
    let dir = build.publish(&metadata, &[MANIFEST_FILE])?;
    Ok(WrittenCache {
        dir,
        metadata,
        resumed_rows: skip,
    })
}

impl crate::cache::location::WrittenAt for WrittenCache {
    fn published_at(&mut self, dir: PathBuf) {
        self.dir = dir;
    }
}
