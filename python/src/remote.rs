//! Distributed builds and clean-up on object storage: a part uploaded
//! under its build's prefix, the parts committed together, and the
//! prefixes of builds that never committed removed.

use std::path::PathBuf;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::error::{OrPy, PyRes};

/// Uploads a part of a distributed build (a local arrow-shards cache written
/// with the build's id) under the build prefix of `uri`; returns its record
/// (JSON) for `_commit_parts`.
#[pyfunction]
pub(crate) fn _publish_part(
    py: Python<'_>,
    local_dir: PathBuf,
    uri: PathBuf,
    build: String,
    unit: usize,
) -> PyRes<String> {
    let rec = py
        .detach(move || shardset::cache::remote::publish_part(&local_dir, &uri, &build, unit))
        .py()?;
    Ok(rec.to_string())
}

/// Commits a distributed build from its parts' records in work-unit order;
/// returns (build, shards, replaced).
#[pyfunction]
pub(crate) fn _commit_parts(
    py: Python<'_>,
    uri: PathBuf,
    build: String,
    parts: Vec<String>,
) -> PyRes<(String, usize, bool)> {
    let parts: Vec<serde_json::Value> = parts
        .iter()
        .map(|p| serde_json::from_str(p))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| PyValueError::new_err(format!("a part record: {e}")))?;
    let r = py
        .detach(move || shardset::cache::remote::commit_parts(&uri, &build, &parts))
        .py()?;
    Ok((r.build, r.files, r.replaced))
}

/// Removes the uncommitted build prefixes of the cache at `uri` older than
/// `min_age_s`; returns the prefixes removed.
#[pyfunction]
#[pyo3(signature = (uri, min_age_s=3600.0, dry_run=false))]
pub(crate) fn _gc_object_store(
    py: Python<'_>,
    uri: PathBuf,
    min_age_s: f64,
    dry_run: bool,
) -> PyRes<Vec<String>> {
    let r = py
        .detach(move || {
            shardset::cache::remote::collect_object_garbage(
                &uri,
                std::time::Duration::from_secs_f64(min_age_s.max(0.0)),
                dry_run,
            )
        })
        .py()?;
    Ok(r.removed
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect())
}

/// Makes `options_json` (a `StorageOptions` object: region, endpoint,
/// access_key_id, secret_access_key, session_token, part_bytes) this
/// process's object-store settings, over its environment's.
#[pyfunction]
pub(crate) fn _install_storage_options(options_json: &str) -> PyRes<()> {
    let o: shardset::storage::object::StorageOptions = serde_json::from_str(options_json)
        .map_err(|e| crate::error::BadInputError::new_err(format!("storage options: {e}")))?;
    o.install().py()
}

/// The object-store settings in effect in this process (installed over the
/// environment's), as JSON: what a Ray task gets from its driver.
#[pyfunction]
pub(crate) fn _storage_options() -> PyRes<String> {
    let o = shardset::storage::object::StorageOptions::effective().py()?;
    serde_json::to_string(&o).map_err(|e| PyValueError::new_err(e.to_string()))
}
