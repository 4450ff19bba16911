//! The dataset author's side: the [`DatasetBuilder`] trait, versions,
//! configs, splits and work units, and [`load`], which opens a warm cache or
//! builds a missing one under the cache lock.
//!
//! `load` resolves the cache directory exactly as the reference does
//! (`$STABLE_DATASETS_CACHE_DIR` or `~/.stable-datasets`, `processed/`, the
//! reference's directory name), so a cache built by either side is found by
//! the other.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{bounded, Receiver, Sender};

use crate::cache::arrow_writer::{write_arrow_cache_locked, ArrowWriteOptions};
use crate::cache::lock::CacheLock;
use crate::cache::metadata::METADATA_FILE;
use crate::cache::naming::{cache_fingerprint, cache_root};
use crate::cache::open::{open_cache_with, OpenOptions};
use crate::dataset::Dataset;
use crate::error::{BoxError, Error, Result};
use crate::features::Features;
use crate::value::Example;

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
}

impl BuilderConfig {
    /// A config with a name and a description.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        BuilderConfig {
            name: name.into(),
            description: description.into(),
        }
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
}

impl WorkUnit {
    /// A unit with this id.
    pub fn new(id: impl Into<String>) -> Self {
        WorkUnit { id: id.into() }
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

    /// The split names of a config (e.g. `train`, `test`).
    ///
    /// # Errors
    /// Whatever the author reports.
    fn splits(&self, config: &str) -> std::result::Result<Vec<String>, BoxError>;

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

/// The physical layout `load` builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StorageFormat {
    /// Arrow IPC shards (default).
    #[default]
    Arrow,
    /// A Lance dataset.
    Lance,
}

impl StorageFormat {
    /// The reference's spelling (part of the cache key).
    pub fn as_str(self) -> &'static str {
        match self {
            StorageFormat::Arrow => "arrow",
            StorageFormat::Lance => "lance",
        }
    }
}

/// Options of [`load`].
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// The cache root (default `$STABLE_DATASETS_CACHE_DIR`, else `~/.stable-datasets`).
    pub cache_root: Option<PathBuf>,
    /// The config (default: the builder's default).
    pub config: Option<String>,
    /// The layout to build.
    pub format: StorageFormat,
    /// Build afresh even if a cache exists (the old one is replaced atomically).
    pub rebuild: bool,
    /// Shard writer knobs (they never change the cache key).
    pub write: ArrowWriteOptions,
    /// Work units generated at once (0 = one per core).
    pub unit_parallelism: usize,
}

impl LoadOptions {
    /// Sets the cache root.
    pub fn with_cache_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.cache_root = Some(root.into());
        self
    }
    /// Sets the config.
    pub fn with_config(mut self, config: impl Into<String>) -> Self {
        self.config = Some(config.into());
        self
    }
    /// Sets the layout.
    pub fn with_format(mut self, format: StorageFormat) -> Self {
        self.format = format;
        self
    }
    /// Forces a rebuild.
    pub fn with_rebuild(mut self, yes: bool) -> Self {
        self.rebuild = yes;
        self
    }
    /// Sets the writer options.
    pub fn with_write_options(mut self, w: ArrowWriteOptions) -> Self {
        self.write = w;
        self
    }
    /// Sets how many work units run at once.
    pub fn with_unit_parallelism(mut self, n: usize) -> Self {
        self.unit_parallelism = n;
        self
    }
}

/// What [`load_with_report`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadReport {
    /// The cache directory.
    pub dir: PathBuf,
    /// True when this call built the cache (false: it was warm, or another
    /// process built it while this one waited for the lock).
    pub built: bool,
    /// The config used.
    pub config: String,
}

fn check_name(kind: &str, s: &str) -> Result<()> {
    if s.is_empty() || s.contains(['/', '\\', '\0']) || s == "." || s == ".." {
        return Err(Error::InvalidArgument(format!(
            "{kind} name {s:?} cannot be part of a directory name (no '/', '\\\\', '..' or empty names)"
        )));
    }
    Ok(())
}

fn author(what: &str, e: BoxError) -> Error {
    Error::InvalidArgument(format!("{what}: {e}"))
}

/// Resolves the config a load uses.
///
/// # Errors
/// [`Error::InvalidArgument`] for an unknown config name.
pub fn resolve_config(builder: &dyn DatasetBuilder, asked: Option<&str>) -> Result<String> {
    let configs = builder.configs();
    if configs.is_empty() {
        let name = asked.unwrap_or("default").to_string();
        check_name("config", &name)?;
        return Ok(name);
    }
    let name = asked
        .map(str::to_string)
        .or_else(|| builder.default_config())
        .unwrap_or_else(|| configs[0].name.clone());
    if !configs.iter().any(|c| c.name == name) {
        let names: Vec<&str> = configs.iter().map(|c| c.name.as_str()).collect();
        return Err(Error::InvalidArgument(format!(
            "Unknown config '{name}'. Available: {names:?}"
        )));
    }
    check_name("config", &name)?;
    Ok(name)
}

/// The cache directory of a builder's split, exactly as the reference names it.
///
/// # Errors
/// [`Error::InvalidArgument`] for a bad version, config or split name.
pub fn cache_dir_for(
    builder: &dyn DatasetBuilder,
    config: &str,
    split: &str,
    opts: &LoadOptions,
) -> Result<PathBuf> {
    let version = Version::parse(builder.version())?;
    check_name("split", split)?;
    check_name("config", config)?;
    let root = opts.cache_root.clone().unwrap_or_else(cache_root);
    Ok(root.join("processed").join(cache_fingerprint(
        builder.name(),
        &version.to_string(),
        config,
        split,
        opts.format.as_str(),
    )))
}

/// Opens `split` of the builder's dataset, building it first if needed.
///
/// # Errors
/// See [`load_with_report`].
pub fn load(builder: &dyn DatasetBuilder, split: &str, opts: &LoadOptions) -> Result<Dataset> {
    load_with_report(builder, split, opts).map(|(d, _)| d)
}

/// Whether an open error means "the cache on disk is damaged: build it again"
/// (as opposed to a features mismatch, which the user must decide about).
fn damaged(e: &Error) -> bool {
    matches!(
        e,
        Error::Metadata { .. }
            | Error::MissingShard { .. }
            | Error::CorruptShard { .. }
            | Error::UnsupportedVersion { .. }
    )
}

/// Like [`load`], also saying whether it built the cache.
///
/// A warm cache is opened without taking the lock or touching any file. A
/// missing or damaged one is built under `<dir>.lock`; a second process
/// asking for the same cache waits for the lock and then opens what the first
/// one published. A cache built with different features under the same
/// version is an error naming what differs (bump the version, or rebuild).
///
/// # Errors
/// [`Error::InvalidArgument`] for a bad version, config or split or an
/// author error in `info`/`splits`/`work_units`; [`Error::SchemaMismatch`];
/// any build error (nothing is published then).
pub fn load_with_report(
    builder: &dyn DatasetBuilder,
    split: &str,
    opts: &LoadOptions,
) -> Result<(Dataset, LoadReport)> {
    if opts.format == StorageFormat::Lance {
        return Err(Error::UnsupportedLayout {
            path: PathBuf::from(builder.name()),
            layout: "lance-rows".into(),
            hint: "; Lance layouts are not part of this build yet (use StorageFormat::Arrow)"
                .into(),
        });
    }
    let config = resolve_config(builder, opts.config.as_deref())?;
    let info = builder
        .info(&config)
        .map_err(|e| author(&format!("{}.info({config})", builder.name()), e))?;
    let splits = builder
        .splits(&config)
        .map_err(|e| author(&format!("{}.splits({config})", builder.name()), e))?;
    if !splits.iter().any(|s| s == split) {
        return Err(Error::InvalidArgument(format!(
            "Split '{split}' not found. Available: {splits:?}"
        )));
    }
    let dir = cache_dir_for(builder, &config, split, opts)?;
    let open_opts = OpenOptions::default().with_features(info.features.clone());
    let report = |built| LoadReport {
        dir: dir.clone(),
        built,
        config: config.clone(),
    };

    if !opts.rebuild && dir.join(METADATA_FILE).exists() {
        match open_cache_with(&dir, &open_opts) {
            Ok(c) => return Ok((Dataset::new(c), report(false))),
            Err(e) if damaged(&e) => {}
            Err(e) => return Err(e),
        }
    }
    let lock = CacheLock::acquire(&dir)?;
    if !opts.rebuild && dir.join(METADATA_FILE).exists() {
        match open_cache_with(&dir, &open_opts) {
            Ok(c) => return Ok((Dataset::new(c), report(false))),
            Err(e) if damaged(&e) => {}
            Err(e) => return Err(e),
        }
    }
    let units = builder.work_units(&config, split).map_err(|e| {
        author(
            &format!("{}.work_units({config}, {split})", builder.name()),
            e,
        )
    })?;
    build_units(builder, &config, split, &units, opts, |stream| {
        write_arrow_cache_locked(stream, &info.features, &dir, &opts.write, &lock).map(|_| ())
    })?;
    drop(lock);
    let c = open_cache_with(&dir, &open_opts)?;
    Ok((Dataset::new(c), report(true)))
}

type Item = std::result::Result<Example, BoxError>;

/// Runs the units' generators on up to `unit_parallelism` threads and hands
/// `consume` one stream in unit order, then example order.
fn build_units<F>(
    builder: &dyn DatasetBuilder,
    config: &str,
    split: &str,
    units: &[WorkUnit],
    opts: &LoadOptions,
    consume: F,
) -> Result<()>
where
    F: FnOnce(&mut dyn Iterator<Item = Item>) -> Result<()>,
{
    let workers = match opts.unit_parallelism {
        0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
        n => n,
    }
    .min(units.len().max(1));
    // One bounded channel per unit: a unit ahead of the consumer stalls after
    // a few thousand examples, so memory stays bounded.
    let (senders, receivers): (Vec<Sender<Item>>, Vec<Receiver<Item>>) =
        units.iter().map(|_| bounded(2048)).unzip();
    let senders = Mutex::new(senders.into_iter().map(Some).collect::<Vec<_>>());
    let next = AtomicUsize::new(0);
    let senders = &senders;
    let next = &next;
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(move || loop {
                // Units start in order, so the lowest unfinished unit always
                // runs and the in-order consumer never waits on an unstarted one.
                let u = next.fetch_add(1, Ordering::SeqCst);
                if u >= units.len() {
                    return;
                }
                let Some(tx) = senders.lock().map(|mut v| v[u].take()).ok().flatten() else {
                    return;
                };
                let unit = &units[u];
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match builder
                    .generate(config, split, unit)
                {
                    Ok(stream) => {
                        for item in stream {
                            let item = item.map(|(_, ex)| ex).map_err(|e| -> BoxError {
                                format!("work unit '{}': {e}", unit.id).into()
                            });
                            let stop = item.is_err();
                            if tx.send(item).is_err() || stop {
                                return;
                            }
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(format!("work unit '{}': {e}", unit.id).into()));
                    }
                }));
                if let Err(p) = run {
                    let msg = Error::from_panic("generator", p).to_string();
                    let _ = tx.send(Err(format!("work unit '{}': {msg}", unit.id).into()));
                }
            });
        }
        let mut merged = receivers.iter().flat_map(|rx| rx.iter());
        let result = consume(&mut merged);
        // Unblock producers still running (their sends now fail) before the scope joins them.
        drop(merged);
        drop(receivers);
        result
    })
}

/// A builder's cache directory and whether a cache is published there, without building.
///
/// # Errors
/// As [`cache_dir_for`].
pub fn cache_status(
    builder: &dyn DatasetBuilder,
    split: &str,
    opts: &LoadOptions,
) -> Result<(PathBuf, bool)> {
    let config = resolve_config(builder, opts.config.as_deref())?;
    let dir = cache_dir_for(builder, &config, split, opts)?;
    let exists = Path::new(&dir).join(METADATA_FILE).exists();
    Ok((dir, exists))
}

/// Keeps `Arc` in the public surface for builders stored behind one.
pub type SharedBuilder = Arc<dyn DatasetBuilder>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(Version::parse("1.2.3").unwrap().to_string(), "1.2.3");
        for bad in [
            "1.0", "1.0.0.0", "a.b.c", "01.0.0", "1..0", "", "1.0.-1", " 1.0.0",
        ] {
            let e = Version::parse(bad).unwrap_err().to_string();
            assert!(e.contains("major.minor.patch"), "{bad}: {e}");
        }
        assert!(Version::parse("0.10.0").unwrap() > Version::parse("0.9.9").unwrap());
    }

    #[test]
    fn names_that_escape_the_directory_are_refused() {
        for bad in ["a/b", "..", "", "x\\y"] {
            assert!(check_name("split", bad).is_err(), "{bad}");
        }
        assert!(check_name("split", "train").is_ok());
    }
}
