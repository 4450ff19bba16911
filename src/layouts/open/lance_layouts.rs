//! Opening the Lance layouts (`lance-rows`, `lance-video-frames`,
//! `lance-video-segments`): the Lance version a cache version reads and
//! its fragment row counts, or the error of a build compiled without the
//! layout's feature.

use std::path::Path;
#[cfg(feature = "lance")]
use std::sync::Arc;

#[cfg(feature = "lance")]
use crate::cache::metadata::CacheMetadata;
#[cfg(not(feature = "lance"))]
use crate::cache::metadata::LAYOUT_LANCE_ROWS;
#[cfg(not(feature = "video"))]
use crate::cache::metadata::LAYOUT_LANCE_VIDEO_FRAMES;
use crate::cache::metadata::{LanceRowsMetadata, VideoFramesMetadata};
use crate::error::{Error, Result};
#[cfg(feature = "lance")]
use crate::features::Features;
#[cfg(feature = "lance")]
use crate::layouts::LanceRows;

#[cfg(feature = "lance")]
use super::decoder;
#[cfg(feature = "lance")]
use super::features::{choose_features, described_features};
#[cfg(feature = "video")]
use super::FeaturesSource;
use super::{OpenOptions, Opened};

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
    let total = counts.iter().try_fold(0u64, |a, &n| a.checked_add(n));
    if total != Some(num_rows) {
        let total = total.map_or("more than 2^64".into(), |t| t.to_string());
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
pub(super) fn open_lance_rows(
    dir: &Path,
    _path: &Path,
    _meta: &LanceRowsMetadata,
    _opts: &OpenOptions,
) -> Result<Opened> {
    Err(compiled_without(dir, LAYOUT_LANCE_ROWS, "lance"))
}

#[cfg(feature = "lance")]
pub(super) fn open_lance_rows(
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
pub(super) fn open_video_frames(
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
pub(super) fn open_video_frames(
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
    // Every window is decoded into one buffer of its frames: the sizes the
    // metadata records are checked against the limits before any is.
    opts.decode_limits
        .check_window(opts.windows.window_length())?;
    for (v, video) in meta.videos.iter().enumerate() {
        opts.decode_limits.check_frame(dir, v, video.w, video.h)?;
    }
    let backend = crate::layouts::LanceVideoFrames::new(
        dir,
        meta.clone(),
        &counts,
        opts.windows,
        opts.lance_read_options(),
    )?;
    Ok((Arc::new(backend), source))
}
