//! Opening from Python (`open_cache`, `open_parquet`, `open_hf`) and how a dataset was
//! opened: the library's `OpenOptions` (serialisable) kept with a dataset,
//! so a pickled dataset opens the same data the same way in another
//! process (`_reopen`).

use std::path::PathBuf;

use pyo3::prelude::*;

use shardset::features::describe::features_from_json;
use shardset::features::limits::DecodeLimits;
use shardset::features::trust::TrustedRoots;
use shardset::{Dataset, Error, OpenOptions, WindowSpec};

use crate::dataset::PyDataset;
use crate::error::{BadInputError, OrPy, PyRes};

/// What a dataset needs to be opened again: where, which columns, how.
#[derive(Clone, Debug)]
pub(crate) struct OpenSpec {
    pub(crate) path: PathBuf,
    pub(crate) columns: Option<Vec<String>>,
    pub(crate) options: OpenOptions,
    /// What is at `path`.
    pub(crate) source: Source,
}

/// What a dataset was opened from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Source {
    /// A cache (`open_cache`).
    Cache,
    /// Parquet files (`open_parquet`).
    Parquet,
    /// A split of a Hugging Face `save_to_disk` directory (`open_hf`).
    Hf(Option<String>),
}

impl Source {
    /// As kept in a pickle: `cache`, `parquet`, `hf` or `hf:<split>`.
    pub(crate) fn key(&self) -> String {
        match self {
            Source::Cache => "cache".into(),
            Source::Parquet => "parquet".into(),
            Source::Hf(None) => "hf".into(),
            Source::Hf(Some(s)) => format!("hf:{s}"),
        }
    }

    fn from_key(k: &str) -> Option<Source> {
        Some(match k {
            "cache" => Source::Cache,
            "parquet" => Source::Parquet,
            "hf" => Source::Hf(None),
            _ => Source::Hf(Some(k.strip_prefix("hf:")?.to_string())),
        })
    }
}

impl OpenSpec {
    pub(crate) fn open(&self) -> shardset::Result<Dataset> {
        let (path, o) = (&self.path, &self.options);
        let ds = match &self.source {
            Source::Cache => Dataset::new(shardset::open_cache_with(path, o)?),
            Source::Parquet => {
                Dataset::from_backend(std::sync::Arc::new(shardset::open_parquet_with(path, o)?))
            }
            Source::Hf(split) => Dataset::from_backend(std::sync::Arc::new(
                shardset::open_hf_with(path, split.as_deref(), o)?,
            )),
        };
        match &self.columns {
            Some(cols) => {
                let cols: Vec<&str> = cols.iter().map(String::as_str).collect();
                ds.select_columns(&cols)
            }
            None => Ok(ds),
        }
    }
}

/// `open_cache`'s keywords, as the library's options (each checked by its setter).
#[derive(Default)]
pub(crate) struct OpenKeywords {
    pub(crate) decode_images: bool,
    pub(crate) window: Option<(u32, u32, u32)>,
    pub(crate) lance_chunk_rows: Option<u64>,
    pub(crate) features: Option<String>,
    pub(crate) verify_on_read: bool,
    pub(crate) in_memory: bool,
    pub(crate) memory_fraction: Option<f64>,
    pub(crate) in_memory_fallback: bool,
    pub(crate) version: Option<u64>,
    pub(crate) trusted_roots: Vec<PathBuf>,
    pub(crate) max_image_pixels: Option<u64>,
    pub(crate) max_frame_pixels: Option<u64>,
    pub(crate) max_window_frames: Option<u64>,
}

impl OpenKeywords {
    pub(crate) fn options(&self) -> shardset::Result<OpenOptions> {
        let mut o = OpenOptions::default()
            .with_decode_images(self.decode_images)
            .with_verify_on_read(self.verify_on_read)
            .with_in_memory(self.in_memory)
            .with_in_memory_fallback(self.in_memory_fallback);
        if let Some((t, skip, hop)) = self.window {
            o = o.with_windows(WindowSpec::try_new(t, skip, hop)?);
        }
        if let Some(c) = self.lance_chunk_rows {
            o = o.try_with_lance_chunk_rows(c)?;
        }
        if let Some(f) = &self.features {
            let j: serde_json::Value = serde_json::from_str(f)
                .map_err(|e| Error::InvalidFeature(format!("features description: {e}")))?;
            o = o.with_features(features_from_json(&j)?);
        }
        if !self.trusted_roots.is_empty() {
            o = o.with_trusted_roots(TrustedRoots::try_new(&self.trusted_roots)?);
        }
        if let Some(f) = self.memory_fraction {
            o = o.try_with_memory_fraction(f)?;
        }
        if let Some(v) = self.version {
            o = o.with_version(v);
        }
        let mut limits = DecodeLimits::default();
        if let Some(n) = self.max_image_pixels {
            limits = limits.try_with_max_image_pixels(n)?;
        }
        if let Some(n) = self.max_frame_pixels {
            limits = limits.try_with_max_frame_pixels(n)?;
        }
        if let Some(n) = self.max_window_frames {
            limits = limits.try_with_max_window_frames(n)?;
        }
        Ok(o.with_decode_limits(limits))
    }
}

/// Opens a cache (any layout); see `shardset.open_cache`.
#[pyfunction]
#[pyo3(signature = (path, columns=None, decode_images=true, window=None, lance_chunk_rows=None, features=None, verify_on_read=false, in_memory=false, memory_fraction=None, in_memory_fallback=false, version=None, trusted_roots=Vec::new(), max_image_pixels=None, max_frame_pixels=None, max_window_frames=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn open_cache(
    py: Python<'_>,
    path: PathBuf,
    columns: Option<Vec<String>>,
    decode_images: bool,
    window: Option<(u32, u32, u32)>,
    lance_chunk_rows: Option<u64>,
    features: Option<String>,
    verify_on_read: bool,
    in_memory: bool,
    memory_fraction: Option<f64>,
    in_memory_fallback: bool,
    version: Option<u64>,
    trusted_roots: Vec<PathBuf>,
    max_image_pixels: Option<u64>,
    max_frame_pixels: Option<u64>,
    max_window_frames: Option<u64>,
) -> PyRes<PyDataset> {
    let options = OpenKeywords {
        decode_images,
        window,
        lance_chunk_rows,
        features,
        verify_on_read,
        in_memory,
        memory_fraction,
        in_memory_fallback,
        version,
        trusted_roots,
        max_image_pixels,
        max_frame_pixels,
        max_window_frames,
    }
    .options()
    .py()?;
    open_spec(
        py,
        OpenSpec {
            path,
            columns,
            options,
            source: Source::Cache,
        },
    )
}

/// Opens Parquet files (a file or a directory of them) read-only; see
/// `shardset.open_parquet`.
#[pyfunction]
#[pyo3(signature = (path, columns=None, features=None, decode_images=true))]
pub(crate) fn open_parquet(
    py: Python<'_>,
    path: PathBuf,
    columns: Option<Vec<String>>,
    features: Option<String>,
    decode_images: bool,
) -> PyRes<PyDataset> {
    open_foreign(py, path, Source::Parquet, columns, features, decode_images)
}

/// Opens a split of a Hugging Face `save_to_disk` directory read-only; see
/// `shardset.open_hf`.
#[pyfunction]
#[pyo3(signature = (path, split=None, columns=None, features=None, decode_images=true))]
pub(crate) fn open_hf(
    py: Python<'_>,
    path: PathBuf,
    split: Option<String>,
    columns: Option<Vec<String>>,
    features: Option<String>,
    decode_images: bool,
) -> PyRes<PyDataset> {
    open_foreign(
        py,
        path,
        Source::Hf(split),
        columns,
        features,
        decode_images,
    )
}

/// Data another tool wrote, opened read-only with the keywords both
/// `open_parquet` and `open_hf` take.
fn open_foreign(
    py: Python<'_>,
    path: PathBuf,
    source: Source,
    columns: Option<Vec<String>>,
    features: Option<String>,
    decode_images: bool,
) -> PyRes<PyDataset> {
    let options = OpenKeywords {
        decode_images,
        features,
        ..OpenKeywords::default()
    }
    .options()
    .py()?;
    open_spec(
        py,
        OpenSpec {
            path,
            columns,
            options,
            source,
        },
    )
}

fn open_spec(py: Python<'_>, spec: OpenSpec) -> PyRes<PyDataset> {
    let s = spec.clone();
    let ds = py.detach(move || s.open()).py()?;
    Ok(PyDataset::opened(ds, spec))
}

/// Unpickles a dataset: opens the cache again with the options it was
/// opened with (the library's serialised `OpenOptions`), then the view's rows.
#[pyfunction]
pub(crate) fn _reopen(
    py: Python<'_>,
    args: (PathBuf, Option<Vec<String>>, String, String),
    positions: Option<Vec<u8>>,
) -> PyRes<PyDataset> {
    let (path, columns, options, source) = args;
    let source = Source::from_key(&source)
        .ok_or_else(|| BadInputError::new_err(format!("opened from '{source}'")))?;
    let options: shardset::OpenOptions = serde_json::from_str(&options)
        .map_err(|e| BadInputError::new_err(format!("open options: {e}")))?;
    let d = open_spec(
        py,
        OpenSpec {
            path,
            columns,
            options,
            source,
        },
    )?;
    match positions {
        None => Ok(d),
        Some(p) => {
            let idx: Vec<i64> = p
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")) as i64)
                .collect();
            Ok(d.view(d.dataset().select(&idx).py()?))
        }
    }
}
