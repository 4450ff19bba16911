//! The dataset author's side: the [`DatasetBuilder`] trait, versions,
//! configs, splits and work units ([`mod@self`]); the sources a split is built
//! from and why a cache is stale ([`sources`]); [`load`], which opens a warm
//! cache or builds a missing one under the cache lock ([`mod@load`]); and the
//! parallel generation of work units merged back in unit order ([`merge`]).
//!
//! `load` resolves the cache directory exactly as the reference does
//! (`$STABLE_DATASETS_CACHE_DIR` or `~/.stable-datasets`, `processed/`, the
//! reference's directory name), so a cache built by either side is found by
//! the other.

pub mod load;
mod merge;
pub mod options;
mod reasons;
pub mod sources;

use crate::error::{BoxError, Error, Result};
use crate::features::Features;
use crate::value::Example;

pub use load::{
    cache_dir_for, cache_status, fresh_features, load, load_with_report, resolve_config, why,
    LoadOptions, LoadReport,
};
pub use reasons::RebuildReason;
pub use sources::{source_changes, why_cache, why_cache_report, Sources, WhyReport};

/// A `major.minor.patch` version.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version {
    /// Major.
    pub major: u32,
    /// Minor.
    pub minor: u32,
    /// Patch.
    pub patch: u32,
}

impl Version {
    /// Parses exactly three dot-separated integers without leading zeros
    /// (the reference accepts `01.0.0`, equal to `1.0.0` yet caching apart).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] with the reference's message.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = || {
            Error::InvalidArgument(format!(
                "Version string must be 'major.minor.patch', got '{s}'"
            ))
        };
        let parts: Vec<&str> = s.split('.').collect();
        if parts.len() != 3 {
            return Err(bad());
        }
        let mut nums = [0u32; 3];
        for (n, p) in nums.iter_mut().zip(&parts) {
            if p.is_empty()
                || !p.bytes().all(|b| b.is_ascii_digit())
                || (p.len() > 1 && p.starts_with('0'))
            {
                return Err(bad());
            }
            *n = p.parse().map_err(|_| bad())?;
        }
        Ok(Version {
            major: nums[0],
            minor: nums[1],
            patch: nums[2],
        })
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// A named configuration of a dataset (e.g. one subset of a collection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuilderConfig {
    /// The name (part of the cache directory name).
    pub name: String,
    /// What it holds.
    pub description: String,
    /// Parameters that shape the data (recorded; a change makes the next load rebuild).
    pub params: serde_json::Value,
}

impl BuilderConfig {
    /// A config with a name and a description.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        BuilderConfig {
            name: name.into(),
            description: description.into(),
            params: serde_json::Value::Null,
        }
    }

    /// Sets the parameters.
    pub fn with_params(mut self, params: serde_json::Value) -> Self {
        self.params = params;
        self
    }
}

/// What a dataset is.
#[derive(Debug, Clone, Default)]
pub struct DatasetInfo {
    /// The columns.
    pub features: Features,
    /// Free text.
    pub description: String,
    /// How to cite it.
    pub citation: String,
    /// Where it lives.
    pub homepage: String,
    /// Its license.
    pub license: String,
}

impl DatasetInfo {
    /// Info with features only.
    pub fn new(features: Features) -> Self {
        DatasetInfo {
            features,
            ..Default::default()
        }
    }
}

/// An independent piece of a split (e.g. one source file), generated in
/// parallel with the others; the cache keeps unit order, then example order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkUnit {
    /// What the author needs to find the unit's data (e.g. a file path).
    pub id: String,
    /// The local paths of the split's downloaded assets (see
    /// [`DatasetBuilder::assets`]), in the order declared; set by `load`.
    pub files: Vec<std::path::PathBuf>,
}

impl WorkUnit {
    /// A unit with this id.
    pub fn new(id: impl Into<String>) -> Self {
        WorkUnit {
            id: id.into(),
            files: Vec::new(),
        }
    }
}

/// The split an asset key feeds, as the reference maps them: `train`,
/// `test`, `val` → `validation`; any other key is its own split.
pub fn asset_split(key: &str) -> &str {
    match key {
        "val" => "validation",
        k => k,
    }
}
/// Examples of one work unit: `(key, example)` pairs.
pub type ExampleStream<'a> =
    Box<dyn Iterator<Item = std::result::Result<(String, Example), BoxError>> + Send + 'a>;

/// What a dataset author implements.
pub trait DatasetBuilder: Send + Sync {
    /// The class name, used in cache directory names (e.g. `CIFAR10`).
    fn name(&self) -> &str;

    /// `major.minor.patch`; bump it whenever the generated data changes.
    fn version(&self) -> &str;

    /// Named configs; empty means one config called `default`.
    fn configs(&self) -> Vec<BuilderConfig> {
        Vec::new()
    }

    /// The config used when none is asked for (default: the first).
    fn default_config(&self) -> Option<String> {
        None
    }

    /// Features and documentation of a config.
    ///
    /// # Errors
    /// Whatever the author reports.
    fn info(&self, config: &str) -> std::result::Result<DatasetInfo, BoxError>;

    /// The split names of a config (e.g. `train`, `test`). By default, the
    /// splits of the declared [`assets`](DatasetBuilder::assets), in order.
    ///
    /// # Errors
    /// Whatever the author reports; by default, a builder that declares
    /// no assets.
    fn splits(&self, config: &str) -> std::result::Result<Vec<String>, BoxError> {
        let assets = self.assets(config)?;
        if assets.is_empty() {
            return Err(format!(
                "{}: no assets are declared; cannot infer splits (declare assets or list the splits)",
                self.name()
            )
            .into());
        }
        let mut out: Vec<String> = Vec::new();
        for (key, _) in &assets {
            let s = asset_split(key).to_string();
            if !out.contains(&s) {
                out.push(s);
            }
        }
        Ok(out)
    }

    /// Files to download before a split is built, by asset key (`train`,
    /// `test`, `val` for `validation`, or the split's own name): `load`
    /// downloads a missing split's assets (in parallel, resumable,
    /// checksummed, with fallbacks; see [`crate::download`]) into the
    /// downloads folder, gives their local paths to every work unit
    /// ([`WorkUnit::files`]), and records them as the split's sources, so
    /// a changed URL or checksum rebuilds the cache. Default: none.
    ///
    /// # Errors
    /// Whatever the author reports.
    fn assets(
        &self,
        _config: &str,
    ) -> std::result::Result<Vec<(String, crate::download::DownloadInfo)>, BoxError> {
        Ok(Vec::new())
    }

    /// The work units of a split (default: one unit, `all`).
    ///
    /// # Errors
    /// Whatever the author reports.
    fn work_units(
        &self,
        _config: &str,
        _split: &str,
    ) -> std::result::Result<Vec<WorkUnit>, BoxError> {
        Ok(vec![WorkUnit::new("all")])
    }

    /// Source files of a split; when they change, the next load rebuilds.
    ///
    /// # Errors
    /// Whatever the author reports.
    fn sources(
        &self,
        _config: &str,
        _split: &str,
    ) -> std::result::Result<Option<Sources>, BoxError> {
        Ok(None)
    }

    /// The examples of one work unit, in a deterministic order.
    ///
    /// # Errors
    /// Whatever the author reports.
    fn generate<'a>(
        &'a self,
        config: &'a str,
        split: &'a str,
        unit: &'a WorkUnit,
    ) -> std::result::Result<ExampleStream<'a>, BoxError>;
}
