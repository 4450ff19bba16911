//! What a cache holds and costs, as one JSON report: layout, rows, shards,
//! compression, versions, features, per-column bytes on disk and in memory,
//! and the state of its checksums (verified when asked). `shardset inspect`
//! prints it (as a table or as JSON); other reports start from it.

use std::path::Path;

use serde_json::{json, Value as J};

use crate::error::Result;
use crate::features::describe::features_to_json;
use crate::features::repr::feature_repr;
use crate::layouts::open::open_cache;
use crate::layouts::stats::cache_stats;
use crate::layouts::verify::{verify_cache, VerifyReport, CHECKSUMS_FILE};

/// A verification report as JSON: what was checked, what was not, and each
/// damaged place (`mismatches` keeps the checksum mismatches alone).
pub fn verify_json(rep: &VerifyReport) -> J {
    json!({
        "ok": rep.is_ok(),
        "checked": rep.checked,
        "not_checked": rep.not_checked,
        "data_bytes_verified": rep.data_bytes_verified,
        "damage": rep.damage.iter().map(|d| json!({
            "path": d.path, "rows": d.rows, "reason": d.reason
        })).collect::<Vec<_>>(),
        "mismatches": rep.damage.iter().filter(|d| d.reason.starts_with("xxh64")).map(|d| json!({
            "shard": d.path, "reason": d.reason
        })).collect::<Vec<_>>(),
    })
}

/// The report of one cache, as JSON (the human table is printed from it).
///
/// # Errors
/// When the cache cannot be opened or measured, or verification fails to run.
pub fn report(dir: &Path, verify: bool) -> Result<J> {
    report_of(&open_cache(dir)?, verify)
}

/// [`report`] of a cache already opened.
///
/// # Errors
/// When the cache cannot be measured, or verification fails to run.
pub fn report_of(cache: &crate::layouts::open::Cache, verify: bool) -> Result<J> {
    let dir = cache.dir.as_path();
    let m = &cache.metadata;
    let stats = cache_stats(cache)?;
    let verified = if verify {
        verify_json(&verify_cache(dir)?)
    } else {
        J::Null
    };
    let features = cache.features();
    let columns: Vec<J> = stats
        .columns
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "feature": features.get(&c.name).map(feature_repr),
                "bytes_on_disk": c.on_disk,
                "bytes_in_memory": c.in_memory,
            })
        })
        .collect();
    let raw = m.to_json();
    Ok(json!({
        "path": dir,
        "layout": cache.layout,
        "format": m.format(),
        "num_rows": cache.len(),
        "num_shards": cache.backend.num_shards(),
        "compression": m.as_arrow_shards().map_or_else(
            || raw.get("compression").and_then(J::as_str).unwrap_or("none").to_string(),
            |a| a.compression.name().to_string(),
        ),
        "compression_level": raw.get("compression_level").cloned().unwrap_or(J::Null),
        "version": crate::cache::versions::version_id(m),
        "dedup": raw.get("dedup").cloned().unwrap_or(J::Null),
        "segments": raw.get("segments").cloned().unwrap_or(J::Null),
        "schema_fingerprint": Some(m.schema_fingerprint()).filter(|f| !f.is_empty()),
        "writer": m.writer(),
        "build_id": m.build_id(),
        "features": features_to_json(features),
        "features_source": format!("{:?}", cache.features_source).to_lowercase(),
        "shards": stats.shards.iter().map(|s| json!({
            "name": s.name, "rows": s.rows, "bytes": s.bytes
        })).collect::<Vec<_>>(),
        "columns": columns,
        "column_bytes_on_disk": stats.on_disk_measure.as_str(),
        "column_bytes_in_memory": stats.in_memory_measure.as_str(),
        "bytes_on_disk": stats.total_bytes_on_disk,
        "bytes_in_memory": stats.in_memory_bytes(),
        "checksums": {
            "shard_xxh64": m.as_arrow_shards().is_some_and(|a| a.shard_xxh64.is_some()),
            "metadata_xxh64": m.has_self_checksum(),
            "row_xxh64": m.as_arrow_shards().and_then(|a| a.row_checksums).unwrap_or(false),
            "stamped": crate::storage::storage_for(dir).is_file(&dir.join(CHECKSUMS_FILE)),
            "verified": verified,
        },
    }))
}
