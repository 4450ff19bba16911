//! Writing a cache from Python: examples pulled from a Python iterable,
//! each converted under the GIL while the library encodes with it
//! released, into any writable layout, the writers' options checked.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyStopIteration, PyValueError};
use pyo3::prelude::*;

use shardset::features::describe::features_from_json;
use shardset::{Error, Example, Features, Layout, WriteSpec};

use crate::convert::example_from_py;
use crate::error::{BadInputError, OrPy, PyRes};

/// Examples pulled from a Python iterable, each converted under the GIL.
struct PyExamples {
    iter: Py<PyAny>,
    features: Arc<Features>,
    count: u64,
    progress: Option<Progress>,
}

/// A Python callable told the rows written, at most every 100 ms (called
/// while the next example is pulled, the GIL held then anyway).
struct Progress {
    call: Py<PyAny>,
    rows: Arc<AtomicU64>,
    last: Instant,
}

impl Progress {
    fn tell(&mut self, py: Python<'_>, rows: u64) -> PyResult<()> {
        self.last = Instant::now();
        self.call.bind(py).call1((rows,)).map(|_| ())
    }
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
            if let Some(p) = &mut self.progress {
                if p.last.elapsed() >= Duration::from_millis(100) {
                    let rows = p.rows.load(Ordering::Relaxed);
                    if let Err(e) = p.tell(py, rows) {
                        return Some(Err(Error::InvalidArgument(format!(
                            "the progress callable failed: {e}"
                        ))));
                    }
                }
            }
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
/// `options_json` is an object of write options by name (the library's
/// table decides which apply to `layout`); `progress`, a callable told the
/// rows written (as they are, and once at the end); returns the rows
/// written.
#[pyfunction]
#[pyo3(signature = (examples, features_json, path, layout, options_json, progress=None))]
pub(crate) fn write_cache(
    py: Python<'_>,
    examples: &Bound<'_, PyAny>,
    features_json: &str,
    path: PathBuf,
    layout: &str,
    options_json: &str,
    progress: Option<Py<PyAny>>,
) -> PyRes<u64> {
    let j: serde_json::Value = serde_json::from_str(features_json)
        .map_err(|e| BadInputError::new_err(format!("features description: {e}")))?;
    let features = Arc::new(features_from_json(&j).py()?);
    let spec = spec(layout, options_json)?;
    let iter = examples.try_iter()?.into_any().unbind();
    let rows = Arc::new(AtomicU64::new(0));
    let call = progress.as_ref().map(|c| c.clone_ref(py));
    let examples = PyExamples {
        iter,
        features: features.clone(),
        count: 0,
        progress: progress.map(|call| Progress {
            call,
            rows: rows.clone(),
            last: Instant::now(),
        }),
    };
    let counter = call.as_ref().map(|_| rows);
    let written = py
        .detach(move || shardset::write_cache(examples, &features, &path, &spec, counter))
        .py()?;
    if let Some(c) = call {
        c.bind(py).call1((written.num_rows,))?;
    }
    Ok(written.num_rows)
}

fn spec(layout: &str, options_json: &str) -> PyRes<WriteSpec> {
    let options: serde_json::Map<String, serde_json::Value> = serde_json::from_str(options_json)
        .map_err(|e| BadInputError::new_err(format!("write options: {e}")))?;
    WriteSpec::from_options(layout.parse::<Layout>().py()?, &options).py()
}

/// Checks write options for `layout` (as `write_cache` would, before any
/// example is read).
#[pyfunction]
pub(crate) fn _check_write_options(layout: &str, options_json: &str) -> PyRes<()> {
    spec(layout, options_json).map(drop)
}

/// The write options: `(name, layouts, help)` for each, from the library's
/// one table (for `shardset.write_cache`'s errors and docs).
#[pyfunction]
pub(crate) fn write_options() -> Vec<(&'static str, Vec<&'static str>, &'static str)> {
    shardset::layouts::spec::OPTIONS
        .iter()
        .map(|o| (o.name, o.layouts.iter().map(|l| l.name()).collect(), o.help))
        .collect()
}

/// The fingerprint of a features description (the reference's schema fingerprint).
#[pyfunction]
pub(crate) fn features_fingerprint(features_json: &str) -> PyRes<String> {
    let j: serde_json::Value = serde_json::from_str(features_json)
        .map_err(|e| PyValueError::new_err(format!("features description: {e}")))?;
    Ok(features_from_json(&j).py()?.fingerprint())
}

/// Converts data another tool wrote (`kind`: parquet, hf, webdataset) into
/// a cache per split under `out`; see `shardset.convert`. Returns each
/// split's rows.
#[pyfunction]
#[pyo3(signature = (kind, path, out, layout, options_json, features_json=None, rebuild=false))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn convert(
    py: Python<'_>,
    kind: &str,
    path: PathBuf,
    out: PathBuf,
    layout: &str,
    options_json: &str,
    features_json: Option<&str>,
    rebuild: bool,
) -> PyRes<Vec<(String, u64)>> {
    let kind: shardset::sources::InputKind = kind.parse().py()?;
    let features = features_json
        .map(|f| {
            let j: serde_json::Value = serde_json::from_str(f)
                .map_err(|e| BadInputError::new_err(format!("features description: {e}")))?;
            features_from_json(&j).py()
        })
        .transpose()?;
    let spec = spec(layout, options_json)?;
    py.detach(move || {
        let input = shardset::sources::open_input(kind, &path, features, None)?;
        input
            .splits
            .iter()
            .map(|(split, _)| {
                let opts = shardset::LoadOptions::default()
                    .with_write_spec(spec.clone())
                    .with_cache_dir(out.join(split))
                    .with_rebuild(rebuild);
                let (ds, _) = shardset::load_with_report(input.builder.as_ref(), split, &opts)?;
                Ok((split.clone(), ds.len()))
            })
            .collect::<shardset::Result<Vec<_>>>()
    })
    .py()
}
