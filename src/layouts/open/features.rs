//! Which features a cache is read with: the caller's, its own
//! description, or inferred from its schema, each checked against the
//! recorded fingerprint, with the differences named on a mismatch.

use std::path::Path;
use std::sync::Arc;

use crate::cache::metadata::ArrowShardsMetadata;
use crate::error::{Error, Result};
use crate::features::describe::{feature_to_json, features_from_json};
use crate::features::Features;
use crate::layouts::arrow_shards::ipc::read_footer;
use crate::storage::Storage;

use super::FeaturesSource;

/// The features a cache describes in its metadata, if it does.
#[cfg(feature = "lance")]
pub(super) fn described_features(
    path: &Path,
    j: Option<&serde_json::Value>,
) -> Result<Option<Features>> {
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

pub(super) fn resolve_features(
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
pub(super) fn choose_features(
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
