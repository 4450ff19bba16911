//! Writing a cache from Python: examples pulled from a Python iterable,
//! each converted under the GIL while the library encodes with it
//! released, into any writable layout, the writers' options checked.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::exceptions::{PyStopIteration, PyValueError};
use pyo3::prelude::*;

use shardset::features::describe::features_from_json;
use shardset::{Error, Example, Features};

use crate::convert::example_from_py;
use crate::error::{BadInputError, OrPy, PyRes};

/// Examples pulled from a Python iterable, each converted under the GIL.
struct PyExamples {
    iter: Py<PyAny>,
    features: Arc<Features>,
    count: u64,
}

impl Iterator for PyExamples {
    type Item = Result<(serde_json::Value, Example), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        Python::attach(|py| {
            let it = self.iter.bind(py);
            let item = match it.call_method0("__next__") {
                Ok(v) => v,
                Err(e) if e.is_instance_of::<PyStopIteration>(py) => return None,
                Err(e) => {
                    return Some(Err(Error::InvalidArgument(format!(
                        "the examples iterable failed after {} examples: {e}",
                        self.count
                    ))))
                }
            };
            self.count += 1;
            Some(
                example_from_py(&item, &self.features, self.count - 1).map_err(|e| {
                    Error::InvalidArgument(format!("example {}: {e}", self.count - 1))
                }),
            )
        })
    }
}

/// Writes a cache from an iterable of examples; see `shardset.write_cache`.
#[pyfunction]
#[pyo3(signature = (examples, features_json, path, format="arrow", shard_size=None, compression=None, threads=None, png_level=None, max_rows_per_file=None, window_quality=None, batch_size=None, build_id=None, compression_level=None, record_checksums=false, dedup=None, segments=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_cache(
    py: Python<'_>,
    examples: &Bound<'_, PyAny>,
    features_json: &str,
    path: PathBuf,
    format: &str,
    shard_size: Option<u64>,
    compression: Option<String>,
    threads: Option<usize>,
    png_level: Option<u8>,
    max_rows_per_file: Option<usize>,
    window_quality: Option<f32>,
    batch_size: Option<usize>,
    build_id: Option<String>,
    compression_level: Option<i32>,
    record_checksums: bool,
    dedup: Option<u64>,
    segments: Option<String>,
) -> PyRes<u64> {
    let j: serde_json::Value = serde_json::from_str(features_json)
        .map_err(|e| BadInputError::new_err(format!("features description: {e}")))?;
    let features = Arc::new(features_from_json(&j).py()?);
    let iter = examples.try_iter()?.into_any().unbind();
    let examples = PyExamples {
        iter,
        features: features.clone(),
        count: 0,
    };
    let png = match png_level {
        Some(l) => shardset::PngCompression::level(l).py()?,
        None => shardset::PngCompression::Fast,
    };
    let codec = compression
        .as_deref()
        .map(|c| match c {
            "zstd" => Ok(shardset::Compression::Zstd),
            "lz4" => Ok(shardset::Compression::Lz4),
            "none" => Ok(shardset::Compression::None),
            other => Err(BadInputError::new_err(format!(
                "compression must be 'zstd', 'lz4' or 'none', got '{other}'"
            ))),
        })
        .transpose()?;
    if compression_level.is_some() && codec.is_none() {
        return Err(BadInputError::new_err(
            "compression_level needs compression='zstd'",
        ));
    }
    // What both row writers take: encode threads and rows per record batch.
    macro_rules! row_options {
        ($o:expr) => {{
            let mut o = $o.with_png_compression(png);
            if let Some(t) = threads {
                o = o.with_encode_threads(t);
            }
            if let Some(b) = batch_size {
                o = o.try_with_batch_size(b).py()?;
            }
            o
        }};
    }
    let rows = match format {
        "arrow" => {
            let mut o = row_options!(shardset::ArrowWriteOptions::default()
                .try_with_shard_size_bytes(shard_size)
                .py()?);
            if let Some(c) = codec {
                o = o.try_with_compression_level(c, compression_level).py()?;
            }
            o = o
                .with_record_checksums(record_checksums)
                .try_with_dedup(dedup)
                .py()?;
            if let Some(id) = build_id {
                o = o.with_build_id(id);
            }
            let rows = examples.map(|r| r.map(|(_, e)| e));
            py.detach(move || shardset::try_write_arrow_cache(rows, &features, &path, &o))
                .py()?
                .metadata
                .num_rows
        }
        "lance" => {
            let mut o = row_options!(shardset::LanceWriteOptions::default());
            if let Some(c) = codec {
                o = o.try_with_compression(c, compression_level).py()?;
            }
            if record_checksums || dedup.is_some() {
                return Err(BadInputError::new_err(
                    "record_checksums and dedup apply to format 'arrow' (Lance caches record a checksum per data file)",
                ));
            }
            if let Some(n) = max_rows_per_file {
                o = o.try_with_max_rows_per_file(n).py()?;
            }
            let rows = examples.map(|r| r.map(|(_, e)| e));
            py.detach(move || shardset::try_write_lance_cache(rows, &features, &path, &o))
                .py()?
                .metadata
                .num_rows
        }
        "video-frames" => {
            let mut o = shardset::VideoFramesOptions::default();
            if let Some(j) = segments {
                o = o.with_segments(segment_settings(&j)?);
            }
            if let Some(q) = window_quality {
                o = o.with_webp(shardset::WebpSettings::default().try_with_quality(q).py()?);
            }
            if let Some(t) = threads {
                o = o.with_threads(t);
            }
            if let Some(n) = max_rows_per_file {
                o = o.try_with_max_rows_per_file(n).py()?;
            }
            py.detach(move || {
                shardset::try_write_video_frames_cache(examples, &features, &path, &o)
            })
            .py()?
            .metadata
            .num_rows
        }
        other => {
            return Err(BadInputError::new_err(format!(
                "format must be 'arrow', 'lance' or 'video-frames', got '{other}'"
            )))
        }
    };
    Ok(rows)
}

/// Segment settings from `{"codec", "crf", "preset", "tune",
/// "encoder_params", "frames_per_segment"}`.
fn segment_settings(j: &str) -> PyRes<shardset::SegmentSettings> {
    let bad = |m: String| BadInputError::new_err(format!("segments: {m}"));
    let j: serde_json::Value = serde_json::from_str(j).map_err(|e| bad(e.to_string()))?;
    let obj = j.as_object().ok_or_else(|| {
        bad("a dict of codec, crf, preset, tune, encoder_params, frames_per_segment".into())
    })?;
    for k in obj.keys() {
        if ![
            "codec",
            "crf",
            "preset",
            "tune",
            "encoder_params",
            "frames_per_segment",
        ]
        .contains(&k.as_str())
        {
            return Err(bad(format!("unknown key '{k}'")));
        }
    }
    let codec: shardset::SegmentCodec = match obj.get("codec").and_then(|c| c.as_str()) {
        Some(c) => c.parse().py()?,
        None => shardset::SegmentCodec::H264,
    };
    let mut s = shardset::SegmentSettings::new(codec);
    if let Some(c) = obj.get("crf") {
        let c = c
            .as_u64()
            .ok_or_else(|| bad("crf is a non-negative integer".into()))?;
        s = s.try_with_crf(u32::try_from(c).unwrap_or(u32::MAX)).py()?;
    }
    if let Some(p) = obj.get("preset") {
        s = s.with_preset(p.as_str().map_or_else(|| p.to_string(), str::to_string));
    }
    if let Some(t) = obj.get("tune") {
        s = s
            .try_with_tune(t.as_str().map_or_else(|| t.to_string(), str::to_string))
            .py()?;
    }
    if let Some(p) = obj.get("encoder_params") {
        let p = p.as_str().ok_or_else(|| {
            bad("encoder_params is a string of key=value pairs joined by ':'".into())
        })?;
        s = s.try_with_encoder_params(p).py()?;
    }
    if let Some(n) = obj.get("frames_per_segment") {
        let n = n
            .as_u64()
            .ok_or_else(|| bad("frames_per_segment is a positive integer".into()))?;
        s = s
            .try_with_frames_per_segment(u32::try_from(n).unwrap_or(u32::MAX))
            .py()?;
    }
    Ok(s)
}

/// The fingerprint of a features description (the reference's schema fingerprint).
#[pyfunction]
pub(crate) fn features_fingerprint(features_json: &str) -> PyRes<String> {
    let j: serde_json::Value = serde_json::from_str(features_json)
        .map_err(|e| PyValueError::new_err(format!("features description: {e}")))?;
    Ok(features_from_json(&j).py()?.fingerprint())
}
