//! [`OpenOptions`] as data (serde): what a pickled Python dataset, a
//! DataLoader worker or another process needs to open a cache the same way,
//! in one checked form instead of each caller's tuple. Deserialising goes
//! through the same setters, so a stored form is validated like a built one.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::OpenOptions;
use crate::error::{Error, Result};
use crate::features::describe::{features_from_json, features_to_json};

/// The stored form of [`OpenOptions`].
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOpenOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    features: Option<serde_json::Value>,
    #[serde(default)]
    verify_checksums: bool,
    decode_images: bool,
    #[cfg(feature = "video")]
    #[serde(default)]
    windows: crate::video::WindowSpec,
    cache_bytes: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lance_chunk_rows: Option<u64>,
    #[serde(default)]
    verify_on_read: bool,
    #[serde(default)]
    in_memory: bool,
    memory_fraction: f64,
    #[serde(default)]
    in_memory_fallback: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    trusted_roots: Vec<PathBuf>,
    #[serde(default, skip_serializing_if = "is_default")]
    decode_limits: crate::features::limits::DecodeLimits,
}

/// Defaults are left out of the stored form (it travels with every
/// pickled dataset).
fn is_default(l: &crate::features::limits::DecodeLimits) -> bool {
    *l == crate::features::limits::DecodeLimits::default()
}

impl From<OpenOptions> for RawOpenOptions {
    fn from(o: OpenOptions) -> Self {
        RawOpenOptions {
            features: o.features.as_ref().map(features_to_json),
            verify_checksums: o.verify_checksums,
            decode_images: o.decode_images,
            #[cfg(feature = "video")]
            windows: o.windows,
            cache_bytes: o.cache_bytes,
            lance_chunk_rows: o.lance_chunk_rows(),
            verify_on_read: o.verify_on_read,
            in_memory: o.in_memory,
            memory_fraction: o.memory_fraction,
            in_memory_fallback: o.in_memory_fallback,
            version: o.version,
            trusted_roots: o.trusted_roots.roots().to_vec(),
            decode_limits: o.decode_limits,
        }
    }
}

impl TryFrom<RawOpenOptions> for OpenOptions {
    type Error = Error;

    fn try_from(r: RawOpenOptions) -> Result<Self> {
        let mut o = OpenOptions::default()
            .with_verify_checksums(r.verify_checksums)
            .with_decode_images(r.decode_images)
            .with_cache_bytes(r.cache_bytes)
            .with_verify_on_read(r.verify_on_read)
            .with_in_memory(r.in_memory)
            .try_with_memory_fraction(r.memory_fraction)?
            .with_in_memory_fallback(r.in_memory_fallback)
            .with_decode_limits(r.decode_limits);
        #[cfg(feature = "video")]
        {
            o = o.with_windows(r.windows);
        }
        if let Some(f) = &r.features {
            o = o.with_features(features_from_json(f)?);
        }
        if let Some(n) = r.lance_chunk_rows {
            o = o.try_with_lance_chunk_rows(n)?;
        }
        if let Some(v) = r.version {
            o = o.with_version(v);
        }
        if !r.trusted_roots.is_empty() {
            o = o.with_trusted_roots(crate::features::trust::TrustedRoots::try_new(
                &r.trusted_roots,
            )?);
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::Dtype;
    use crate::features::Feature;

    #[test]
    fn options_round_trip_and_a_stored_form_is_checked() {
        let o = OpenOptions::default()
            .with_features(Features::new().with("x", Feature::value(Dtype::Int64)))
            .with_decode_images(false)
            .try_with_lance_chunk_rows(8)
            .unwrap()
            .try_with_memory_fraction(0.25)
            .unwrap()
            .with_version(3)
            .with_trusted_roots(
                crate::features::trust::TrustedRoots::try_new([std::env::temp_dir()]).unwrap(),
            );
        let j = serde_json::to_string(&o).unwrap();
        let back: OpenOptions = serde_json::from_str(&j).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), j);
        assert_eq!(back.version(), Some(3));
        let mut v: serde_json::Value = serde_json::from_str(&j).unwrap();
        v["memory_fraction"] = serde_json::json!(2.0);
        let e = serde_json::from_value::<OpenOptions>(v)
            .unwrap_err()
            .to_string();
        assert!(e.contains("memory_fraction"), "{e}");
        let mut v: serde_json::Value = serde_json::from_str(&j).unwrap();
        v["trusted_roots"] = serde_json::json!(["/no/such/root"]);
        assert!(serde_json::from_value::<OpenOptions>(v).is_err());
    }

    use crate::features::Features;
}
