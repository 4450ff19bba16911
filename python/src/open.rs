//! How a cache was opened: the options kept with a dataset, so a pickled
//! dataset opens the same cache the same way in another process.

use std::path::PathBuf;

use shardset::features::describe::features_from_json;
use shardset::{Dataset, Error, OpenOptions, WindowSpec};

/// How a cache was opened: what a pickled dataset needs to open it again.
#[derive(Clone, Debug)]
pub(crate) struct OpenSpec {
    pub(crate) path: PathBuf,
    pub(crate) columns: Option<Vec<String>>,
    pub(crate) decode_images: bool,
    pub(crate) window: Option<(u32, u32, u32)>,
    pub(crate) lance_chunk_rows: Option<u64>,
    /// The features as JSON, for a cache that does not describe its own.
    pub(crate) features: Option<String>,
    /// How rows are read: verify_on_read, in_memory, memory_fraction,
    /// in_memory_fallback, version.
    pub(crate) modes: ReadModes,
}

/// `open_cache`'s read modes: (verify_on_read, in_memory, memory_fraction,
/// in_memory_fallback, version, trusted_roots).
pub(crate) type ReadModes = (bool, bool, Option<f64>, bool, Option<u64>, Vec<PathBuf>);

impl OpenSpec {
    pub(crate) fn open(&self) -> shardset::Result<Dataset> {
        let mut o = OpenOptions::default().with_decode_images(self.decode_images);
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
        let (verify, in_memory, fraction, fallback, version, ref trusted) = self.modes;
        if !trusted.is_empty() {
            o = o.with_trusted_roots(shardset::features::trust::TrustedRoots::try_new(trusted)?);
        }
        o = o
            .with_verify_on_read(verify)
            .with_in_memory(in_memory)
            .with_in_memory_fallback(fallback);
        if let Some(f) = fraction {
            o = o.try_with_memory_fraction(f)?;
        }
        if let Some(v) = version {
            o = o.with_version(v);
        }
        let cache = shardset::open_cache_with(&self.path, &o)?;
        let ds = Dataset::new(cache);
        match &self.columns {
            Some(cols) => {
                let cols: Vec<&str> = cols.iter().map(String::as_str).collect();
                ds.select_columns(&cols)
            }
            None => Ok(ds),
        }
    }
}

/// `open_cache`'s arguments, as a pickled dataset carries them.
pub(crate) type OpenArgs = (
    PathBuf,
    Option<Vec<String>>,
    bool,
    Option<(u32, u32, u32)>,
    Option<u64>,
    Option<String>,
    ReadModes,
);
