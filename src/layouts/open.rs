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
}

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
    /// 1 reads only the row asked for).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0.
    pub fn try_with_lance_chunk_rows(mut self, rows: u64) -> Result<Self> {
        let rows = NonZeroU64::new(rows)
            .ok_or_else(|| Error::InvalidArgument("lance_chunk_rows must be at least 1".into()))?;
        self.lance_chunk_rows = Some(rows);
        Ok(self)
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
            cache_bytes: self.cache_bytes,
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
    let metadata = CacheMetadata::read_in(storage.as_ref(), dir)?;
    let path = dir.join(METADATA_FILE);
    let (backend, features_source) = match &metadata {
        CacheMetadata::ArrowShards(m) => open_arrow_shards(&storage, dir, &path, m, opts)?,
        CacheMetadata::LanceRows(m) => open_lance_rows(dir, &path, m, opts)?,
        CacheMetadata::VideoFrames(m) => open_video_frames(dir, &path, m, opts)?,
    };
    Ok(Cache {
        dir: dir.to_path_buf(),
        layout: metadata.layout().to_string(),
        metadata,
        features_source,
        backend,
        storage,
    })
}

type Opened = (Arc<dyn Backend>, FeaturesSource);

/// The row decoder of a cache's features under the caller's options.
fn decoder(dir: &Path, features: &Arc<Features>, opts: &OpenOptions) -> RowDecoder {
    RowDecoder::new(
        features.clone(),
        DecodeOptions::default()
            .with_decode_images(opts.decode_images)
            .with_cache_dir(dir),
    )
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
    let decoder = decoder(dir, &features, opts);
    let backend = ArrowShards::new_in(
        storage.clone(),
        dir,
        &meta.shard_filenames,
        &meta.shard_row_counts,
        features,
        decoder,
        meta.build_id.clone(),
    )
    .with_cache_bytes(opts.cache_bytes);
    Ok((Arc::new(backend), source))
}

/// Fragment row counts, recorded or (reference caches record none) asked of
/// Lance, checked against the metadata's row count.
#[cfg(feature = "lance")]
fn lance_fragment_rows(
    dir: &Path,
    path: &Path,
    recorded: Option<&Vec<u64>>,
    num_rows: u64,
    what: &str,
) -> Result<Vec<u64>> {
    let counts = match recorded {
        Some(c) => c.clone(),
        None => LanceRows::fragment_row_counts(dir)?,
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
    let counts = lance_fragment_rows(
        dir,
        path,
        meta.fragment_row_counts.as_ref(),
        meta.num_rows,
        "rows",
    )?;
    let decoder = decoder(dir, &features, opts);
    let backend = LanceRows::new(dir, &counts, features, decoder, opts.lance_read_options());
    Ok((Arc::new(backend), source))
}

#[cfg(not(feature = "video"))]
fn open_video_frames(
    dir: &Path,
    _path: &Path,
    _meta: &VideoFramesMetadata,
    _opts: &OpenOptions,
) -> Result<Opened> {
    Err(compiled_without(dir, LAYOUT_LANCE_VIDEO_FRAMES, "video"))
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
        meta.num_rows,
        "frames",
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
