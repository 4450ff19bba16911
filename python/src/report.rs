//! `shardset.report`: the HTML report of a cache (`shardset::report`).

use std::path::PathBuf;

use pyo3::prelude::*;
use shardset::features::trust::TrustedRoots;
use shardset::report::{write_report, ReportOptions};

use crate::error::{OrPy, PyRes};

/// Writes the report of the cache at `path` to `output`; returns what it
/// holds (bytes, rows read, images, windows).
#[pyfunction]
#[pyo3(signature = (path, output, seed, sample_rows, images, windows, trusted_roots))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn report(
    py: Python<'_>,
    path: PathBuf,
    output: PathBuf,
    seed: u64,
    sample_rows: u64,
    images: usize,
    windows: usize,
    trusted_roots: Vec<PathBuf>,
) -> PyRes<(u64, u64, usize, usize)> {
    let opts = ReportOptions::default()
        .with_seed(seed)
        .try_with_sample_rows(sample_rows)
        .and_then(|o| o.try_with_images(images))
        .and_then(|o| o.try_with_windows(windows))
        .and_then(|o| {
            let roots = TrustedRoots::from_env()?.merged(&TrustedRoots::try_new(&trusted_roots)?);
            Ok(o.with_trusted_roots(roots))
        })
        .py()?;
    let s = py
        .detach(move || write_report(&path, &output, &opts))
        .py()?;
    Ok((s.bytes, s.rows_read, s.images, s.windows))
}
