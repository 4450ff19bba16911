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
use std::sync::Mutex;

use crossbeam_channel::{bounded, Receiver, Sender};

use crate::cache::lock::CacheLock;
use crate::cache::metadata::METADATA_FILE;
use crate::cache::naming::{cache_fingerprint, cache_root};
use crate::dataset::Dataset;
use crate::error::{BoxError, Error, Result};
use crate::features::Features;
use crate::layouts::arrow_shards::manifest::ManifestHeader;
use crate::layouts::arrow_shards::write::{prepare_resumable, ArrowWriteOptions, Extra, UnitEnds};
use crate::layouts::open::Cache;
use crate::layouts::open::{open_cache_with, OpenOptions};
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
}

impl WorkUnit {
    /// A unit with this id.
    pub fn new(id: impl Into<String>) -> Self {
        WorkUnit { id: id.into() }
    }
}

/// Source files a split is built from. A changed source (by size and
/// modification time, or by content hash on request) makes the next `load`
/// rebuild the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sources {
    /// The directory paths are recorded relative to (so a moved tree still matches).
    pub root: PathBuf,
    /// The files, relative to `root` or absolute inside it.
    pub files: Vec<PathBuf>,
    /// Stamp by sha256 of the content instead of size and mtime.
    pub content_hash: bool,
}

impl Sources {
    /// Files under a root, stamped by size and mtime.
    pub fn new(
        root: impl Into<PathBuf>,
        files: impl IntoIterator<Item = impl Into<PathBuf>>,
    ) -> Self {
        Sources {
            root: root.into(),
            files: files.into_iter().map(Into::into).collect(),
            content_hash: false,
        }
    }

    /// Stamps by content hash (slower, immune to touched-but-unchanged files).
    pub fn by_content(mut self) -> Self {
        self.content_hash = true;
        self
    }

    /// The stamps of the files as they are now.
    ///
    /// # Errors
    /// [`Error::Io`] naming a missing or unreadable source.
    pub fn stamp(&self) -> Result<serde_json::Value> {
        self.stamp_with(false)
    }

    /// Stamps, skipping missing files when `lenient` (they then read as removed).
    fn stamp_with(&self, lenient: bool) -> Result<serde_json::Value> {
        let mut files = Vec::with_capacity(self.files.len());
        for f in &self.files {
            let abs = if f.is_absolute() {
                f.clone()
            } else {
                self.root.join(f)
            };
            let rel = abs
                .strip_prefix(&self.root)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| abs.to_string_lossy().into_owned());
            let meta = match std::fs::metadata(&abs) {
                Ok(m) => m,
                Err(_) if lenient => continue,
                Err(e) => return Err(Error::io("stat source", &abs, e)),
            };
            if self.content_hash {
                use sha2::Digest;
                let mut h = sha2::Sha256::new();
                let mut file =
                    std::fs::File::open(&abs).map_err(|e| Error::io("open source", &abs, e))?;
                std::io::copy(&mut file, &mut h).map_err(|e| Error::io("read source", &abs, e))?;
                files.push(serde_json::json!({"path": rel, "size": meta.len(), "sha256": crate::util::hex(&h.finalize())}));
            } else {
                let mtime_ns = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos() as u64);
                files.push(
                    serde_json::json!({"path": rel, "size": meta.len(), "mtime_ns": mtime_ns}),
                );
            }
        }
        Ok(serde_json::json!({
            "root": self.root,
            "content_hash": self.content_hash,
            "files": files,
        }))
    }
}

/// Why the cache at `dir` is out of date as far as it can tell by itself:
/// damaged, or a recorded source changed. (Features and config values need
/// the builder: see [`why`].) Empty when up to date.
///
/// # Errors
/// Never for a damaged cache (that is a reason); only for internal failures.
pub fn why_cache(dir: &Path) -> Result<Vec<String>> {
    Ok(why_cache_report(dir)?.reasons)
}

/// [`why_cache`]'s reasons, with what was checked to find them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WhyReport {
    /// Reasons to rebuild, one line each (empty: up to date).
    pub reasons: Vec<String>,
    /// What the verification checked and could not check, in words.
    pub checked: String,
    /// True when the cache records its sources (so changes could be seen).
    pub sources_recorded: bool,
}

/// [`why_cache`] with what was checked.
///
/// # Errors
/// As [`why_cache`].
pub fn why_cache_report(dir: &Path) -> Result<WhyReport> {
    let rep = match crate::layouts::verify::verify_cache(dir) {
        Ok(r) => r,
        Err(e) => {
            return Ok(WhyReport {
                reasons: vec![format!("the cache is missing or damaged: {e}")],
                checked: String::new(),
                sources_recorded: false,
            })
        }
    };
    let mut out: Vec<String> = rep
        .damage
        .iter()
        .map(|d| {
            if d.reason.starts_with("xxh64") {
                let what = if d.path.extension().is_some_and(|e| e == "arrow") {
                    "shard "
                } else {
                    ""
                };
                format!("{what}{} does not match its checksum", d.path.display())
            } else {
                format!("the cache is damaged: {}: {}", d.path.display(), d.reason)
            }
        })
        .collect();
    let checked = rep.summary();
    let c = match crate::layouts::open::open_cache(dir) {
        Ok(c) => c,
        Err(_) => {
            return Ok(WhyReport {
                reasons: out,
                checked,
                sources_recorded: false,
            })
        }
    };
    let sources_recorded = c.metadata.get("sources").is_some();
    if let Some(rec) = c.metadata.get("sources") {
        let files = rec
            .get("files")
            .and_then(|f| f.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.get("path").and_then(|p| p.as_str()).map(PathBuf::from))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let src = Sources {
            root: rec
                .get("root")
                .and_then(|r| r.as_str())
                .map(PathBuf::from)
                .unwrap_or_default(),
            files,
            content_hash: rec
                .get("content_hash")
                .and_then(|b| b.as_bool())
                .unwrap_or(false),
        };
        out.extend(source_changes(rec, &src.stamp_with(true)?));
    }
    Ok(WhyReport {
        reasons: out,
        checked,
        sources_recorded,
    })
}

/// Differences between recorded and current source stamps, one line each.
pub fn source_changes(recorded: &serde_json::Value, now: &serde_json::Value) -> Vec<String> {
    let files = |j: &serde_json::Value| -> Vec<(String, serde_json::Value)> {
        j.get("files")
            .and_then(|f| f.as_array())
            .map(|a| {
                a.iter()
                    .map(|f| {
                        (
                            f.get("path")
                                .and_then(|p| p.as_str())
                                .unwrap_or("")
                                .to_string(),
                            f.clone(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    if recorded.get("content_hash") != now.get("content_hash") {
        return vec!["sources are now stamped differently (content hash vs size+mtime)".into()];
    }
    let (old, new) = (files(recorded), files(now));
    let mut out = Vec::new();
    for (p, f) in &new {
        match old.iter().find(|(q, _)| q == p) {
            None => out.push(format!("source {p} was added")),
            Some((_, g)) if g != f => {
                let what = if f.get("sha256") != g.get("sha256") && f.get("sha256").is_some() {
                    "content"
                } else if f.get("size") != g.get("size") {
                    "size"
                } else {
                    "modification time"
                };
                out.push(format!("source {p} changed ({what})"));
            }
            _ => {}
        }
    }
    for (p, _) in &old {
        if !new.iter().any(|(q, _)| q == p) {
            out.push(format!("source {p} was removed"));
        }
    }
    out
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
    /// The exact cache directory, overriding the root and the reference's
    /// naming (for one split; the command line's `--out`).
    pub cache_dir: Option<PathBuf>,
    /// The config (default: the builder's default).
    pub config: Option<String>,
    /// The layout to build.
    pub format: StorageFormat,
    /// Build afresh even if a cache exists (the old one is replaced atomically).
    pub rebuild: bool,
    /// Shard writer knobs (they never change the cache key).
    pub write: ArrowWriteOptions,
    /// Lance writer knobs, for [`StorageFormat::Lance`].
    #[cfg(feature = "lance")]
    pub lance_write: crate::layouts::lance_rows::write::LanceWriteOptions,
    /// Work units generated at once (0 = one per core).
    pub unit_parallelism: usize,
}

impl LoadOptions {
    /// Sets the cache root.
    pub fn with_cache_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.cache_root = Some(root.into());
        self
    }
    /// Sets the exact cache directory (overrides the root and the naming).
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
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
    /// Sets the Lance writer options.
    #[cfg(feature = "lance")]
    pub fn with_lance_write_options(
        mut self,
        w: crate::layouts::lance_rows::write::LanceWriteOptions,
    ) -> Self {
        self.lance_write = w;
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
    /// Rows taken over from a killed build (0 when nothing was resumed).
    pub resumed_rows: u64,
    /// Why the cache was (re)built, when it was.
    pub reasons: Vec<String>,
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
    if let Some(dir) = &opts.cache_dir {
        return Ok(dir.clone());
    }
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

enum Warm {
    Ready(Cache),
    Stale(Vec<String>),
}

/// Whether the cache at `dir` can be used as is; `Stale` says why not.
fn check_warm(
    dir: &Path,
    open_opts: &OpenOptions,
    stamp: Option<&serde_json::Value>,
    config_json: &serde_json::Value,
) -> Result<Warm> {
    if !dir.join(METADATA_FILE).exists() {
        return Ok(Warm::Stale(vec!["no cache has been built yet".into()]));
    }
    match open_cache_with(dir, open_opts) {
        Ok(c) => {
            let mut reasons = Vec::new();
            match (c.metadata.get("sources"), stamp) {
                (Some(r), Some(n)) => reasons.extend(source_changes(r, n)),
                (None, Some(_)) => {
                    reasons.push("sources are declared now, but the cache recorded none".into())
                }
                (Some(_), None) => {
                    reasons.push("the cache recorded sources that are no longer declared".into())
                }
                (None, None) => {}
            }
            if let Some(rc) = c.metadata.get("config") {
                if rc != config_json {
                    reasons.push(format!(
                        "config changed: the cache has {rc}, the builder now gives {config_json}"
                    ));
                }
            }
            Ok(if reasons.is_empty() {
                Warm::Ready(c)
            } else {
                Warm::Stale(reasons)
            })
        }
        Err(e) if damaged(&e) => Ok(Warm::Stale(vec![format!("the cache is damaged: {e}")])),
        Err(e) => Err(e),
    }
}

/// Everything `load` needs to know about a builder's split before touching the cache.
struct Plan {
    config: String,
    info: DatasetInfo,
    dir: PathBuf,
    stamp: Option<serde_json::Value>,
    config_json: serde_json::Value,
    open_opts: OpenOptions,
}

fn plan(builder: &dyn DatasetBuilder, split: &str, opts: &LoadOptions) -> Result<Plan> {
    let config = resolve_config(builder, opts.config.as_deref())?;
    let params = builder
        .configs()
        .into_iter()
        .find(|c| c.name == config)
        .map(|c| c.params)
        .unwrap_or(serde_json::Value::Null);
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
    let stamp = builder
        .sources(&config, split)
        .map_err(|e| author(&format!("{}.sources({config}, {split})", builder.name()), e))?
        .map(|s| s.stamp())
        .transpose()?;
    let config_json = serde_json::json!({"name": config, "params": params});
    let open_opts = OpenOptions::default().with_features(info.features.clone());
    Ok(Plan {
        config,
        info,
        dir,
        stamp,
        config_json,
        open_opts,
    })
}

/// Why `load` would (re)build this split now; empty when the cache is up to
/// date. Names the source, config value or feature that changed.
///
/// # Errors
/// As [`load`], except that a features mismatch is a reason, not an error.
pub fn why(builder: &dyn DatasetBuilder, split: &str, opts: &LoadOptions) -> Result<Vec<String>> {
    let p = plan(builder, split, opts)?;
    match check_warm(&p.dir, &p.open_opts, p.stamp.as_ref(), &p.config_json) {
        Ok(Warm::Ready(_)) => Ok(Vec::new()),
        Ok(Warm::Stale(r)) => Ok(r),
        Err(e @ Error::SchemaMismatch { .. }) => Ok(vec![format!("features changed: {e}")]),
        Err(e) => Err(e),
    }
}

/// Like [`load`], also saying whether it built the cache.
///
/// A warm cache is opened without taking the lock or touching any file. A
/// missing, damaged or stale one (a declared source or a config parameter
/// changed) is built under `<dir>.lock`; a second process asking for the same
/// cache waits for the lock and then opens what the first one published. A
/// killed build of the same cache is resumed from its last committed shard.
/// A cache built with different features under the same version is an error
/// naming what differs (bump the version, or rebuild).
///
/// # Errors
/// [`Error::InvalidArgument`] for a bad version, config or split or an
/// author error in `info`/`splits`/`work_units`/`sources`;
/// [`Error::SchemaMismatch`]; any build error (nothing is published then).
pub fn load_with_report(
    builder: &dyn DatasetBuilder,
    split: &str,
    opts: &LoadOptions,
) -> Result<(Dataset, LoadReport)> {
    let p = plan(builder, split, opts)?;
    let report = |built, resumed_rows, reasons| LoadReport {
        dir: p.dir.clone(),
        built,
        config: p.config.clone(),
        resumed_rows,
        reasons,
    };
    if !opts.rebuild {
        if let Warm::Ready(c) = check_warm(&p.dir, &p.open_opts, p.stamp.as_ref(), &p.config_json)?
        {
            return Ok((Dataset::new(c), report(false, 0, Vec::new())));
        }
    }
    let lock = CacheLock::acquire(&p.dir)?;
    let reasons = if opts.rebuild {
        vec!["a rebuild was requested".to_string()]
    } else {
        match check_warm(&p.dir, &p.open_opts, p.stamp.as_ref(), &p.config_json)? {
            Warm::Ready(c) => return Ok((Dataset::new(c), report(false, 0, Vec::new()))),
            Warm::Stale(r) => r,
        }
    };
    let units = builder.work_units(&p.config, split).map_err(|e| {
        author(
            &format!("{}.work_units({}, {split})", builder.name(), p.config),
            e,
        )
    })?;
    #[cfg(not(feature = "lance"))]
    if opts.format == StorageFormat::Lance {
        return Err(Error::UnsupportedLayout {
            path: p.dir.clone(),
            layout: "lance-rows".into(),
            hint: "; this build was compiled without the `lance` feature".into(),
        });
    }
    #[cfg(feature = "lance")]
    if opts.format == StorageFormat::Lance {
        let sink: UnitEnds = Default::default();
        build_units(
            builder,
            &p.config,
            split,
            &units,
            opts,
            0,
            &[],
            sink,
            |stream| {
                crate::layouts::lance_rows::write::write_lance_cache_locked(
                    stream,
                    &p.info.features,
                    &p.dir,
                    &opts.lance_write,
                    &lock,
                )
            },
        )?;
        drop(lock);
        let c = open_cache_with(&p.dir, &p.open_opts)?;
        return Ok((Dataset::new(c), report(true, 0, reasons)));
    }
    let w = &opts.write;
    let sources_digest = p
        .stamp
        .as_ref()
        .map(|s| crate::util::sha256_hex(s.to_string().as_bytes()))
        .unwrap_or_default();
    let name = p
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let fingerprint = p.info.features.fingerprint();
    // Same inputs, same build id: a resumed build is byte-identical to an
    // uninterrupted one. An explicit rebuild is a new generation.
    let build_id = if opts.rebuild {
        crate::layouts::arrow_shards::write::random_build_id()
    } else {
        let key = format!(
            "{name}|{fingerprint}|{sources_digest}|{}|{}|{:?}|{:?}",
            p.config_json, w.batch_size, w.shard_size_bytes, w.compression
        );
        crate::util::sha256_hex(key.as_bytes())[..16].to_string()
    };
    let header = ManifestHeader {
        cache_name: name,
        schema_fingerprint: fingerprint,
        build_id,
        batch_size: w.batch_size as u64,
        shard_size_bytes: w.shard_size_bytes,
        compression: w.compression.as_metadata().map(str::to_string),
        sources_digest: crate::util::sha256_hex(
            format!("{sources_digest}|{}", p.config_json).as_bytes(),
        ),
        row_checksums: w.record_checksums,
    };
    let prepared = prepare_resumable(&p.info.features, &p.dir, w, &lock, header)?;
    let skip = prepared.skip();
    let known = prepared.unit_ends().to_vec();
    let sink = prepared.unit_ends_sink();
    let extra = Extra {
        sources: p.stamp.clone(),
        config: Some(p.config_json.clone()),
    };
    let written = build_units(
        builder,
        &p.config,
        split,
        &units,
        opts,
        skip,
        &known,
        sink,
        |stream| prepared.run(stream, &p.info.features, w, extra),
    )?;
    drop(lock);
    let c = open_cache_with(&p.dir, &p.open_opts)?;
    Ok((Dataset::new(c), report(true, written.resumed_rows, reasons)))
}

type Item = std::result::Result<Example, BoxError>;

/// The examples of the units in order, recording where each unit ends.
struct Merged<'r> {
    rxs: &'r [Receiver<Item>],
    cur: usize,
    pos: u64,
    sink: UnitEnds,
}

impl Iterator for Merged<'_> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        while self.cur < self.rxs.len() {
            match self.rxs[self.cur].recv() {
                Ok(item) => {
                    self.pos += 1;
                    return Some(item);
                }
                Err(_) => {
                    if let Ok(mut v) = self.sink.lock() {
                        v.push(self.pos);
                    }
                    self.cur += 1;
                }
            }
        }
        None
    }
}

/// Runs the units' generators on up to `unit_parallelism` threads and hands
/// `consume` one stream in unit order, then example order, starting at row
/// `skip` of the whole build: units known to end at or before it are not run
/// at all.
#[allow(clippy::too_many_arguments)]
fn build_units<F, T>(
    builder: &dyn DatasetBuilder,
    config: &str,
    split: &str,
    all_units: &[WorkUnit],
    opts: &LoadOptions,
    skip: u64,
    known_ends: &[u64],
    sink: UnitEnds,
    consume: F,
) -> Result<T>
where
    F: FnOnce(&mut dyn Iterator<Item = Item>) -> Result<T>,
{
    let k = known_ends
        .iter()
        .take_while(|&&e| e <= skip)
        .count()
        .min(all_units.len());
    let start_k = if k == 0 { 0 } else { known_ends[k - 1] };
    if let Ok(mut v) = sink.lock() {
        v.extend_from_slice(&known_ends[..k]);
    }
    let units = &all_units[k..];
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
        let merged = Merged {
            rxs: &receivers,
            cur: 0,
            pos: start_k,
            sink,
        };
        let mut stream = merged.skip((skip - start_k) as usize);
        let result = consume(&mut stream);
        // Unblock producers still running (their sends now fail) before the scope joins them.
        drop(stream);
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
