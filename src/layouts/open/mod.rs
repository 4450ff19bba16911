//! `open_cache`: read `_metadata.json`, validate it, pick the backend by layout.

mod features;
mod lance_layouts;
mod options;
mod serial;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cache::metadata::{ArrowShardsMetadata, CacheMetadata, METADATA_FILE};
use crate::error::{Error, Result};
use crate::features::decode::{DecodeOptions, RowDecoder};
use crate::features::Features;
use crate::layouts::arrow_shards::integrity::verify_shards;
#[cfg(feature = "lance")]
use crate::layouts::LanceRows;
use crate::layouts::{ArrowShards, Backend};
use crate::storage::{storage_for, StorageRef};

use features::resolve_features;
#[cfg(feature = "lance")]
pub(crate) use lance_layouts::lance_version_of;
use lance_layouts::{open_lance_rows, open_video_frames};
pub use options::{OpenOptions, DEFAULT_MEMORY_FRACTION};

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
    Ok(RowDecoder::new(
        features.clone(),
        decode_options(dir, opts)?,
    ))
}

/// How the cells of data at `dir` decode under the caller's options.
///
/// # Errors
/// [`Error::InvalidArgument`] for a bad `SHARDSET_TRUSTED_ROOTS`.
fn decode_options(dir: &Path, opts: &OpenOptions) -> Result<DecodeOptions> {
    let trusted = crate::features::trust::TrustedRoots::from_env()?.merged(&opts.trusted_roots);
    // Canonical once here, so video path cells are checked against it
    // without a lookup per cell (an object-store location stays as it is).
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    Ok(DecodeOptions::default()
        .with_decode_images(opts.decode_images)
        .with_cache_dir(dir)
        .with_trusted_roots(trusted)
        .with_limits(opts.decode_limits))
}

/// A Parquet file, or a directory of them, opened read-only as a dataset
/// backend ([`crate::layouts::parquet`]): the features from `opts`
/// ([`OpenOptions::with_features`]), else those the files give; images
/// decoded and limited as `opts` says.
///
/// # Errors
/// As [`crate::layouts::parquet::ParquetRows::open`].
#[cfg(feature = "parquet")]
pub fn open_parquet_with(
    path: &Path,
    opts: &OpenOptions,
) -> Result<crate::layouts::parquet::ParquetRows> {
    crate::layouts::parquet::ParquetRows::open(
        path,
        opts.features.clone(),
        decode_options(path, opts)?,
    )
}

/// A Hugging Face `save_to_disk` directory's `split`, opened read-only as
/// a dataset backend ([`crate::layouts::hf_arrow`]): the features from
/// `opts`, else those the directory gives; images decoded and limited as
/// `opts` says.
///
/// # Errors
/// As [`crate::layouts::hf_arrow::HfArrow::open`].
pub fn open_hf_with(
    path: &Path,
    split: Option<&str>,
    opts: &OpenOptions,
) -> Result<crate::layouts::hf_arrow::HfArrow> {
    crate::layouts::hf_arrow::HfArrow::open(
        path,
        split,
        opts.features.clone(),
        decode_options(path, opts)?,
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
