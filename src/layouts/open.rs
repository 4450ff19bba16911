//! `open_cache`: read `_metadata.json`, validate it, pick the backend by layout.

use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[cfg(not(feature = "lance"))]
use crate::cache::metadata::LAYOUT_LANCE_ROWS;
#[cfg(not(feature = "video"))]
use crate::cache::metadata::LAYOUT_LANCE_VIDEO_FRAMES;
use crate::cache::metadata::{
    ArrowShardsMetadata, CacheMetadata, LanceRowsMetadata, VideoFramesMetadata, METADATA_FILE,
};
use crate::error::{Error, Result};
use crate::features::decode::{DecodeOptions, RowDecoder};
use crate::features::describe::{feature_to_json, features_from_json};
use crate::features::Features;
use crate::layouts::arrow_shards::integrity::verify_shards;
use crate::layouts::arrow_shards::ipc::read_footer;
use crate::layouts::arrow_shards::read::DEFAULT_DECOMPRESSED_CACHE_BYTES;
use crate::layouts::{ArrowShards, Backend};
#[cfg(feature = "lance")]
use crate::layouts::{LanceReadOptions, LanceRows};
use crate::storage::{storage_for, Storage, StorageRef};

/// Options of [`open_cache_with`]: private fields, validated when set
/// (the same pattern as the write options).
#[derive(Debug, Clone)]
pub struct OpenOptions {
    features: Option<Features>,
    verify_checksums: bool,
    decode_images: bool,
    #[cfg(feature = "video")]
    windows: crate::video::WindowSpec,
    cache_bytes: usize,
    lance_chunk_rows: Option<NonZeroU64>,
    verify_on_read: bool,
    in_memory: bool,
    memory_fraction: f64,
    in_memory_fallback: bool,
    version: Option<u64>,
    trusted_roots: crate::features::trust::TrustedRoots,
}

/// The share of the available memory an in-memory open may take by
/// default ([`OpenOptions::try_with_memory_fraction`]).
pub const DEFAULT_MEMORY_FRACTION: f64 = 0.5;

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            features: None,
            verify_checksums: false,
            decode_images: true,
            #[cfg(feature = "video")]
            windows: crate::video::WindowSpec::default(),
            cache_bytes: DEFAULT_DECOMPRESSED_CACHE_BYTES,
            lance_chunk_rows: None,
            verify_on_read: false,
            in_memory: false,
            memory_fraction: DEFAULT_MEMORY_FRACTION,
            in_memory_fallback: false,
            version: None,
            trusted_roots: Default::default(),
        }
    }
}

impl OpenOptions {
    /// The features the caller expects: checked against the cache's
    /// fingerprint, and used to decode (needed for reference caches, which
    /// do not store class names or array shapes).
    pub fn with_features(mut self, f: Features) -> Self {
        self.features = Some(f);
        self
    }

    /// Recompute every shard's xxh64 on open (reads every byte; default off).
    pub fn with_verify_checksums(mut self, yes: bool) -> Self {
        self.verify_checksums = yes;
        self
    }

    /// How a `lance-video-frames` cache is cut into windows (default: one
    /// frame per window).
    #[cfg(feature = "video")]
    pub fn with_windows(mut self, spec: crate::video::WindowSpec) -> Self {
        self.windows = spec;
        self
    }

    /// Whether `get` decodes images to pixels (default true).
    pub fn with_decode_images(mut self, yes: bool) -> Self {
        self.decode_images = yes;
        self
    }

    /// Bytes of decoded data the backend keeps for reuse: decompressed
    /// record batches of compressed Arrow shards, decoded Lance chunks
    /// (default [`DEFAULT_DECOMPRESSED_CACHE_BYTES`], 256 MiB; 0 keeps
    /// nothing). Memory for reading stays within it plus what one read needs.
    pub fn with_cache_bytes(mut self, bytes: usize) -> Self {
        self.cache_bytes = bytes;
        self
    }

    /// Rows a Lance cache reads together on a random access (default 64;
    /// 1 reads only the row asked for). For a video cache these are frames:
    /// a `lance-video-segments` cache reads the segments that hold about
    /// that many frames (at least one).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0.
    pub fn try_with_lance_chunk_rows(mut self, rows: u64) -> Result<Self> {
        let rows = NonZeroU64::new(rows)
            .ok_or_else(|| Error::InvalidArgument("lance_chunk_rows must be at least 1".into()))?;
        self.lance_chunk_rows = Some(rows);
        Ok(self)
    }

    /// Check every row read against its stored checksum (default off): a
    /// row whose bytes changed on disk is an [`Error::ChecksumMismatch`]
    /// naming the row, the changed columns and the file. Needs a cache
    /// written with per-record checksums (`arrow-shards` only); opening
    /// another is an [`Error::InvalidArgument`] naming it.
    pub fn with_verify_on_read(mut self, yes: bool) -> Self {
        self.verify_on_read = yes;
        self
    }

    /// Load the whole cache into memory at open for the fastest random
    /// access (default off): an `arrow-shards` cache's files are read into
    /// heap buffers and every batch decoded (decompressed once), a
    /// `lance-rows` cache's chunks are all read and kept decoded. Refused
    /// with [`Error::OutOfMemory`] naming both sizes when the cache would
    /// take more than the memory fraction of what is available
    /// ([`Self::try_with_memory_fraction`]), unless
    /// [`Self::with_in_memory_fallback`] asks to read it mapped instead.
    pub fn with_in_memory(mut self, yes: bool) -> Self {
        self.in_memory = yes;
        self
    }

    /// The share of the memory available at open that an in-memory cache
    /// may take (default [`DEFAULT_MEMORY_FRACTION`], half).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] outside `(0, 1]`.
    pub fn try_with_memory_fraction(mut self, fraction: f64) -> Result<Self> {
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(Error::InvalidArgument(format!(
                "memory_fraction must be in (0, 1], got {fraction}"
            )));
        }
        self.memory_fraction = fraction;
        Ok(self)
    }

    /// Read a cache too large for memory mapped, as without
    /// [`Self::with_in_memory`], instead of refusing it (default off).
    pub fn with_in_memory_fallback(mut self, yes: bool) -> Self {
        self.in_memory_fallback = yes;
        self
    }

    /// Opens version `id` of a cache edited by commits (see
    /// [`crate::cache::versions`]) rather than the current one.
    pub fn with_version(mut self, id: u64) -> Self {
        self.version = Some(id);
        self
    }

    /// Directories outside the cache whose files its video path cells may
    /// name (validated when made: [`crate::features::trust::TrustedRoots::try_new`]),
    /// besides those `SHARDSET_TRUSTED_ROOTS` names. By default a cell may
    /// only name a file inside the cache (see [`crate::features::trust`]).
    pub fn with_trusted_roots(mut self, roots: crate::features::trust::TrustedRoots) -> Self {
        self.trusted_roots = roots;
        self
    }

    /// The trusted roots set with [`OpenOptions::with_trusted_roots`].
    pub fn trusted_roots(&self) -> &crate::features::trust::TrustedRoots {
        &self.trusted_roots
    }

    /// The version asked for (`None`: the current one).
    pub fn version(&self) -> Option<u64> {
        self.version
    }

    /// Whether rows are checked against their checksums as they are read.
    pub fn verify_on_read(&self) -> bool {
        self.verify_on_read
    }

    /// Whether the cache is loaded into memory at open.
    pub fn in_memory(&self) -> bool {
        self.in_memory
    }

    /// The share of available memory an in-memory open may take.
    pub fn memory_fraction(&self) -> f64 {
        self.memory_fraction
    }

    /// Whether a cache too large for memory is read mapped instead.
    pub fn in_memory_fallback(&self) -> bool {
        self.in_memory_fallback
    }

    /// The expected features, if set.
    pub fn features(&self) -> Option<&Features> {
        self.features.as_ref()
    }

    /// Whether shard checksums are recomputed on open.
    pub fn verify_checksums(&self) -> bool {
        self.verify_checksums
    }

    /// Whether `get` decodes images.
    pub fn decode_images(&self) -> bool {
        self.decode_images
    }

    /// The windows of a `lance-video-frames` cache.
    #[cfg(feature = "video")]
    pub fn windows(&self) -> crate::video::WindowSpec {
        self.windows
    }

    /// The byte budget of decoded data kept for reuse.
    pub fn cache_bytes(&self) -> usize {
        self.cache_bytes
    }

    /// The rows a Lance cache reads together, if set (`None`: the Lance
    /// backend's default, 64).
    pub fn lance_chunk_rows(&self) -> Option<u64> {
        self.lance_chunk_rows.map(NonZeroU64::get)
    }

    #[cfg(feature = "lance")]
    fn lance_read_options(&self) -> LanceReadOptions {
        let d = LanceReadOptions::default();
        LanceReadOptions {
            cache_bytes: if self.in_memory {
                usize::MAX
            } else {
                self.cache_bytes
            },
            chunk_rows: self.lance_chunk_rows.unwrap_or(d.chunk_rows),
            ..d
        }
    }
}

/// How the features of an opened cache were obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeaturesSource {
    /// Given by the caller (and matched the fingerprint).
    Caller,
    /// Read from the cache's own description (and matched the fingerprint).
    Metadata,
    /// Inferred from the Arrow schema of a reference cache (no class names, no array shapes).
    Inferred,
}

/// An opened cache.
#[derive(Debug, Clone)]
pub struct Cache {
    /// The cache directory.
    pub dir: PathBuf,
    /// Its layout.
    pub layout: String,
    /// Its `_metadata.json`, parsed.
    pub metadata: CacheMetadata,
    /// Where the features came from.
    pub features_source: FeaturesSource,
    /// The backend serving the rows.
    pub backend: Arc<dyn Backend>,
    /// The storage the cache is read from.
    pub storage: StorageRef,
    /// True when the cache was loaded into memory at open
    /// ([`OpenOptions::with_in_memory`]); false when read mapped, also
    /// after a fallback.
    pub in_memory: bool,
}

impl Cache {
    /// Number of rows.
    pub fn len(&self) -> u64 {
        self.backend.len()
    }
    /// True when there is no row.
    pub fn is_empty(&self) -> bool {
        self.backend.is_empty()
    }
    /// The features.
    pub fn features(&self) -> &Arc<Features> {
        self.backend.features()
    }
}

/// Opens the cache at `dir`, using the features it describes (or inferring them).
///
/// # Errors
/// See [`open_cache_with`].
pub fn open_cache(dir: impl AsRef<Path>) -> Result<Cache> {
    open_cache_with(dir, &OpenOptions::default())
}

/// Opens the cache at `dir`.
///
/// # Errors
/// [`Error::Metadata`] (missing, garbled, inconsistent metadata),
/// [`Error::UnsupportedVersion`], [`Error::UnsupportedLayout`],
/// [`Error::MissingShard`], [`Error::CorruptShard`] (size or checksum), or
/// [`Error::SchemaMismatch`] when the given features differ from the cache's.
pub fn open_cache_with(dir: impl AsRef<Path>, opts: &OpenOptions) -> Result<Cache> {
    let dir = dir.as_ref();
    let storage = storage_for(dir);
    let metadata = match opts.version {
        None => {
            let common = crate::cache::metadata::read_common_in(storage.as_ref(), dir)?;
            // A Lance-layout cache published by the first publisher: its
            // metadata names the committed build, a complete cache of its own.
            if let Some(build) = common.build_dir()? {
                return open_cache_with(dir.join(build), opts);
            }
            CacheMetadata::from_common(storage.as_ref(), dir, common)?
        }
        Some(id) => crate::cache::versions::read_version(storage.as_ref(), dir, id)?,
    };
    let path = dir.join(METADATA_FILE);
    if opts.verify_on_read {
        let recorded = metadata
            .as_arrow_shards()
            .is_some_and(|m| m.row_checksums == Some(true));
        if !recorded {
            return Err(Error::InvalidArgument(format!(
                "verify_on_read needs per-record checksums, and {} records none ({} caches written with record checksums have them; rebuild with them, or open without verify_on_read)",
                dir.display(),
                crate::cache::metadata::LAYOUT_ARROW_SHARDS
            )));
        }
    }
    if opts.in_memory && matches!(metadata, CacheMetadata::VideoFrames(_)) {
        return Err(Error::InvalidArgument(format!(
            "{} is a {} cache, which is not loaded into memory (in_memory reads arrow-shards and lance-rows caches)",
            dir.display(),
            metadata.layout()
        )));
    }
    let (backend, features_source) = match &metadata {
        CacheMetadata::ArrowShards(m) => open_arrow_shards(&storage, dir, &path, m, opts)?,
        CacheMetadata::LanceRows(m) => open_lance_rows(dir, &path, m, opts)?,
        CacheMetadata::VideoFrames(m) => open_video_frames(dir, &path, m, opts)?,
    };
    let in_memory = opts.in_memory && load_into_memory(&storage, dir, &backend, opts)?;
    Ok(Cache {
        dir: dir.to_path_buf(),
        layout: metadata.layout().to_string(),
        metadata,
        features_source,
        backend,
        storage,
        in_memory,
    })
}

/// Loads an opened cache into memory when it fits the memory guard;
/// returns whether it did (false: too large, and the fallback to maps is
/// on).
///
/// # Errors
/// [`Error::OutOfMemory`] naming both sizes; a read error.
fn load_into_memory(
    storage: &StorageRef,
    dir: &Path,
    backend: &Arc<dyn Backend>,
    opts: &OpenOptions,
) -> Result<bool> {
    let any = backend.as_any();
    let needed = if let Some(a) = any.downcast_ref::<ArrowShards>() {
        a.in_memory_bytes()?
    } else {
        storage.dir_size(dir)?
    };
    let available = crate::util::available_memory().ok_or_else(|| {
        Error::InvalidArgument(format!(
            "cannot tell how much memory is available to load {} into memory (no /proc/meminfo)",
            dir.display()
        ))
    })?;
    let allowed = (available as f64 * opts.memory_fraction) as u64;
    if needed > allowed {
        if opts.in_memory_fallback {
            return Ok(false);
        }
        return Err(Error::OutOfMemory {
            path: dir.to_path_buf(),
            needed,
            available,
            fraction: opts.memory_fraction,
        });
    }
    if let Some(a) = any.downcast_ref::<ArrowShards>() {
        a.load_into_memory()?;
    }
    #[cfg(feature = "lance")]
    if let Some(l) = any.downcast_ref::<LanceRows>() {
        l.load_into_memory()?;
    }
    Ok(true)
}

type Opened = (Arc<dyn Backend>, FeaturesSource);

/// The row decoder of a cache's features under the caller's options.
///
/// # Errors
/// [`Error::InvalidArgument`] for a bad `SHARDSET_TRUSTED_ROOTS`.
fn decoder(dir: &Path, features: &Arc<Features>, opts: &OpenOptions) -> Result<RowDecoder> {
    let trusted = crate::features::trust::TrustedRoots::from_env()?.merged(&opts.trusted_roots);
    // Canonical once here, so video path cells are checked against it
    // without a lookup per cell (an object-store location stays as it is).
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    Ok(RowDecoder::new(
        features.clone(),
        DecodeOptions::default()
            .with_decode_images(opts.decode_images)
            .with_cache_dir(dir)
            .with_trusted_roots(trusted),
    ))
}

fn open_arrow_shards(
    storage: &StorageRef,
    dir: &Path,
    path: &Path,
    meta: &ArrowShardsMetadata,
    opts: &OpenOptions,
) -> Result<Opened> {
    let (features, source) =
        resolve_features(storage.as_ref(), dir, path, meta, opts.features.as_ref())?;
    if opts.verify_checksums {
        verify_shards(storage.as_ref(), dir, meta)?;
    }
    let decoder = decoder(dir, &features, opts)?;
    let backend = ArrowShards::new_in(
        storage.clone(),
        dir,
        &meta.shard_filenames,
        &meta.shard_row_counts,
        features,
        decoder,
        meta.build_id.clone(),
    )
    .with_cache_bytes(opts.cache_bytes)
    .with_verify_on_read(opts.verify_on_read);
    let backend = match &meta.dedup {
        Some(d) => {
            let schema = backend.schema();
            let columns = d
                .columns
                .iter()
                .map(|name| {
                    schema.index_of(name).map_err(|_| {
                        Error::metadata(
                            path,
                            format!("dedup names column '{name}', which the cache does not have"),
                        )
                    })
                })
                .collect::<Result<Vec<usize>>>()?;
            backend.with_dedup(columns, d.shard_refs.clone())
        }
        None => backend,
    };
    Ok((Arc::new(backend), source))
}

/// Fragment row counts, recorded or (reference caches record none) asked of
/// Lance, checked against the metadata's row count.
#[cfg(feature = "lance")]
fn lance_fragment_rows(
    dir: &Path,
    path: &Path,
    recorded: Option<&Vec<u64>>,
    version: Option<u64>,
    num_rows: u64,
    what: &str,
) -> Result<Vec<u64>> {
    let counts = match recorded {
        Some(c) => c.clone(),
        None => LanceRows::fragment_row_counts(dir, version)?,
    };
    let total: u64 = counts.iter().sum();
    if total != num_rows {
        return Err(Error::metadata(
            path,
            format!("the Lance dataset has {total} {what}, metadata records {num_rows}"),
        ));
    }
    Ok(counts)
}

/// A layout this build was compiled without.
#[cfg(any(not(feature = "lance"), not(feature = "video")))]
fn compiled_without(dir: &Path, layout: &str, feature: &str) -> Error {
    Error::UnsupportedLayout {
        path: dir.to_path_buf(),
        layout: layout.to_string(),
        hint: format!("; this build was compiled without the `{feature}` feature"),
    }
}

#[cfg(not(feature = "lance"))]
fn open_lance_rows(
    dir: &Path,
    _path: &Path,
    _meta: &LanceRowsMetadata,
    _opts: &OpenOptions,
) -> Result<Opened> {
    Err(compiled_without(dir, LAYOUT_LANCE_ROWS, "lance"))
}

#[cfg(feature = "lance")]
fn open_lance_rows(
    dir: &Path,
    path: &Path,
    meta: &LanceRowsMetadata,
    opts: &OpenOptions,
) -> Result<Opened> {
    let described = described_features(path, meta.features.as_ref())?;
    let (features, source) = choose_features(
        dir,
        path,
        &meta.schema_fingerprint,
        described,
        opts.features.as_ref(),
        || LanceRows::dataset_schema(dir).and_then(|s| Features::infer_from_schema(&s)),
    )?;
    let version = lance_version_of(crate::storage::storage_for(dir).as_ref(), dir, meta)?;
    let counts = lance_fragment_rows(
        dir,
        path,
        meta.fragment_row_counts.as_ref(),
        version,
        meta.num_rows,
        "rows",
    )?;
    let decoder = decoder(dir, &features, opts)?;
    let backend = LanceRows::new(dir, &counts, features, decoder, opts.lance_read_options())
        .with_lance_version(version);
    Ok((Arc::new(backend), source))
}

/// The Lance version a `lance-rows` cache version reads: the one its
/// metadata records; for a build that records none, the one its kept
/// version file records (an edit writes it before committing to Lance);
/// else the latest.
#[cfg(feature = "lance")]
pub(crate) fn lance_version_of(
    storage: &dyn crate::storage::Storage,
    dir: &Path,
    meta: &LanceRowsMetadata,
) -> Result<Option<u64>> {
    if meta.lance_version.is_some() {
        return Ok(meta.lance_version);
    }
    let id = meta.version.as_ref().map_or(1, |v| v.id);
    let kept = crate::cache::versions::version_path(dir, id);
    if !storage.is_file(&kept) {
        return Ok(None);
    }
    Ok(match CacheMetadata::read_at(storage, dir, &kept)? {
        CacheMetadata::LanceRows(m) => m.lance_version,
        _ => None,
    })
}

#[cfg(not(feature = "video"))]
fn open_video_frames(
    dir: &Path,
    _path: &Path,
    meta: &VideoFramesMetadata,
    _opts: &OpenOptions,
) -> Result<Opened> {
    Err(compiled_without(
        dir,
        if meta.is_segments() {
            crate::cache::metadata::LAYOUT_LANCE_VIDEO_SEGMENTS
        } else {
            LAYOUT_LANCE_VIDEO_FRAMES
        },
        "video",
    ))
}

#[cfg(feature = "video")]
fn open_video_frames(
    dir: &Path,
    path: &Path,
    meta: &VideoFramesMetadata,
    opts: &OpenOptions,
) -> Result<Opened> {
    // The source features: the caller's, else our description; the
    // fingerprint is checked either way (the reference never checks it).
    let described = described_features(path, meta.features.as_ref())?;
    let expected = opts.features.clone().or(described);
    let source = match expected {
        Some(f) => {
            let fp = f.fingerprint();
            if !meta.schema_fingerprint.is_empty() && fp != meta.schema_fingerprint {
                return Err(Error::SchemaMismatch {
                    path: dir.to_path_buf(),
                    expected: fp,
                    found: meta.schema_fingerprint.clone(),
                    detail: String::new(),
                });
            }
            if opts.features.is_some() {
                FeaturesSource::Caller
            } else {
                FeaturesSource::Metadata
            }
        }
        None => FeaturesSource::Inferred,
    };
    let counts = lance_fragment_rows(
        dir,
        path,
        meta.fragment_row_counts.as_ref(),
        meta.lance_version,
        meta.segments
            .as_ref()
            .map_or(meta.num_rows, |s| s.num_segments),
        if meta.is_segments() {
            "segments"
        } else {
            "frames"
        },
    )?;
    let backend = crate::layouts::LanceVideoFrames::new(
        dir,
        meta.clone(),
        &counts,
        opts.windows,
        opts.lance_read_options(),
    )?;
    Ok((Arc::new(backend), source))
}

/// The features a cache describes in its metadata, if it does.
#[cfg(feature = "lance")]
fn described_features(path: &Path, j: Option<&serde_json::Value>) -> Result<Option<Features>> {
    j.map(|j| {
        features_from_json(j)
            .map_err(|e| Error::metadata(path, format!("bad 'features' description: {e}")))
    })
    .transpose()
}

fn describe_diff(stored: &Features, wanted: &Features) -> String {
    let mut diffs = Vec::new();
    for (name, f) in wanted.iter() {
        match stored.get(name) {
            None => diffs.push(format!("'{name}' is not in the cache")),
            Some(s) if s != f => diffs.push(format!(
                "'{name}' is {} in the cache, {} now",
                feature_to_json(s),
                feature_to_json(f)
            )),
            _ => {}
        }
    }
    for (name, _) in stored.iter() {
        if wanted.get(name).is_none() {
            diffs.push(format!("'{name}' is in the cache but not in the features"));
        }
    }
    let stored_names = stored.names();
    let wanted_names = wanted.names();
    if diffs.is_empty() && stored_names != wanted_names {
        diffs.push(format!(
            "column order differs: {stored_names:?} vs {wanted_names:?}"
        ));
    }
    if diffs.is_empty() {
        String::new()
    } else {
        format!("; {}", diffs.join("; "))
    }
}

fn resolve_features(
    storage: &dyn Storage,
    dir: &Path,
    meta_path: &Path,
    meta: &ArrowShardsMetadata,
    given: Option<&Features>,
) -> Result<(Arc<Features>, FeaturesSource)> {
    let described =
        match &meta.features {
            Some(j) => Some(features_from_json(j).map_err(|e| {
                Error::metadata(meta_path, format!("bad 'features' description: {e}"))
            })?),
            None => None,
        };
    choose_features(
        dir,
        meta_path,
        &meta.schema_fingerprint,
        described,
        given,
        || {
            // A reference cache: read what the first shard's schema tells.
            let Some(first) = meta.shard_filenames.first() else {
                return Ok(Features::new());
            };
            // Mapped, not read: parsing the footer touches the first page and
            // the last few, whatever the shard's size.
            let path = dir.join(first);
            let map = storage.map(&path)?;
            if map.len() < 18 {
                return Err(Error::corrupt(&path, "too short for an Arrow IPC file"));
            }
            let footer = read_footer(&path, &map)?;
            Features::infer_from_schema(&footer.schema)
        },
    )
}

/// The features to read with: the caller's (checked against the fingerprint),
/// else the cache's own description (checked too), else inferred.
fn choose_features(
    dir: &Path,
    meta_path: &Path,
    fingerprint: &str,
    described: Option<Features>,
    given: Option<&Features>,
    infer: impl FnOnce() -> Result<Features>,
) -> Result<(Arc<Features>, FeaturesSource)> {
    if let Some(f) = &described {
        if !fingerprint.is_empty() && f.fingerprint() != fingerprint {
            return Err(Error::metadata(
                meta_path,
                format!(
                    "the features description hashes to {}, but schema_fingerprint is {fingerprint} (edited metadata?)",
                    f.fingerprint()
                ),
            ));
        }
    }
    if let Some(wanted) = given {
        let fp = wanted.fingerprint();
        if !fingerprint.is_empty() && fp != fingerprint {
            let detail = described
                .as_ref()
                .map(|s| describe_diff(s, wanted))
                .unwrap_or_default();
            return Err(Error::SchemaMismatch {
                path: dir.to_path_buf(),
                expected: fp,
                found: fingerprint.to_string(),
                detail,
            });
        }
        return Ok((Arc::new(wanted.clone()), FeaturesSource::Caller));
    }
    if let Some(f) = described {
        return Ok((Arc::new(f), FeaturesSource::Metadata));
    }
    Ok((Arc::new(infer()?), FeaturesSource::Inferred))
}
