//! `shardset ls` (the caches under a root), `shardset gc` (what killed
//! builds and interrupted publications left behind), `shardset download`
//! (one asset, as a builder fetches it) and `shardset why` (the reasons a
//! cache would be rebuilt).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value as J};
use shardset::cache::gc::LeftoverKind;
use shardset::cache::gc::{collect_garbage, GcOptions, GcReport, Kept, Leftover};
use shardset::cache::metadata::{read_common, METADATA_FILE};
use shardset::layouts::stats::dir_size;
use shardset::{cache_root, open_cache};

use crate::fmt::{age, count, find_caches, human, modified_ago, parse_duration, walk_dirs};
use crate::fmt::{CliError, CliResult};

/// The root given, else the default cache root; whether it was given.
fn root_or_default(root: Option<PathBuf>) -> (PathBuf, bool) {
    match root {
        Some(r) => (r, true),
        None => (cache_root(), false),
    }
}

fn missing_root(root: &Path, explicit: bool) -> CliResult<bool> {
    if shardset::storage::storage_for(root).is_dir(root) {
        return Ok(false);
    }
    if explicit {
        return Err(shardset::Error::Io {
            op: "open cache root",
            path: root.to_path_buf(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        }
        .into());
    }
    Ok(true)
}

/// List the caches under a root: name, layout, rows, size on disk, age.
#[derive(clap::Args)]
pub struct LsArgs {
    /// The root (default: $STABLE_DATASETS_CACHE_DIR, else ~/.stable-datasets).
    pub root: Option<PathBuf>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

/// Runs `shardset ls`.
pub fn ls(args: LsArgs) -> CliResult {
    let LsArgs {
        root,
        json: json_out,
    } = args;
    let (root, explicit) = root_or_default(root);
    let caches = if missing_root(&root, explicit)? {
        Vec::new()
    } else {
        find_caches(&root)
    };
    let mut rows = Vec::new();
    for dir in &caches {
        let name = dir
            .strip_prefix(&root)
            .ok()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(dir)
            .to_string_lossy()
            .into_owned();
        let bytes = dir_size(dir).unwrap_or(0);
        let age_s = modified_ago(&dir.join(METADATA_FILE)).as_secs();
        rows.push(match open_cache(dir) {
            Ok(c) => json!({
                "name": name, "path": dir, "layout": c.layout, "rows": c.len(),
                "bytes_on_disk": bytes, "age_seconds": age_s,
            }),
            Err(e) => {
                // What the metadata says, when it can be read at all.
                let common = read_common(dir).ok();
                json!({
                    "name": name, "path": dir,
                    "layout": common.as_ref().map(|c| c.layout.clone()),
                    "rows": common.as_ref().and_then(|c| c.num_rows()),
                    "bytes_on_disk": bytes, "age_seconds": age_s, "error": e.to_string(),
                })
            }
        });
    }
    if json_out {
        println!("{}", json!({"root": root, "caches": rows}));
        return Ok(());
    }
    if rows.is_empty() {
        println!("no caches under {}", root.display());
        return Ok(());
    }
    let w = rows
        .iter()
        .map(|r| r["name"].as_str().map_or(0, str::len))
        .max()
        .unwrap_or(4)
        .max(4);
    println!(
        "{:<w$}  {:<18}  {:>12}  {:>11}  {:>5}",
        "name", "layout", "rows", "size", "age"
    );
    for r in &rows {
        let rows_s = r["rows"].as_u64().map(count).unwrap_or_else(|| "?".into());
        let layout = r["layout"].as_str().unwrap_or("?");
        println!(
            "{:<w$}  {:<18}  {:>12}  {:>11}  {:>5}",
            r["name"].as_str().unwrap_or(""),
            layout,
            rows_s,
            human(r["bytes_on_disk"].as_u64().unwrap_or(0)),
            age(Duration::from_secs(r["age_seconds"].as_u64().unwrap_or(0)))
        );
        if let Some(e) = r.get("error").and_then(|e| e.as_str()) {
            println!("{:<w$}  (cannot open: {e})", "");
        }
    }
    println!("{} cache(s) under {}", rows.len(), root.display());
    Ok(())
}

/// Remove temp dirs of builds that did not finish and replaced caches
/// left behind, except those whose build lock a live build holds.
#[derive(clap::Args)]
pub struct GcArgs {
    /// The root (default: $STABLE_DATASETS_CACHE_DIR, else ~/.stable-datasets).
    pub root: Option<PathBuf>,
    /// Only say what would be removed.
    #[arg(long)]
    pub dry_run: bool,
    /// Only left-overs at least this old: 30m, 1h, 2d, 1w.
    #[arg(long)]
    pub older_than: Option<String>,
    /// Also keep only the newest N versions of each edited cache,
    /// removing older versions and the shard files only they name.
    #[arg(long)]
    pub keep_versions: Option<usize>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

/// Runs `shardset gc`: the library's [`collect_garbage`] under the root, printed.
pub fn gc(args: GcArgs) -> CliResult {
    let GcArgs {
        root,
        dry_run,
        older_than,
        keep_versions,
        json: json_out,
    } = args;
    let min_age = older_than
        .as_deref()
        .map(parse_duration)
        .transpose()
        .map_err(CliError::Usage)?
        .unwrap_or_default();
    let (root, explicit) = root_or_default(root);
    // An object store holds no temp dirs, replaced generations or partial
    // downloads: only build prefixes (below).
    #[cfg(feature = "s3")]
    let object = shardset::storage::is_object_uri(&root);
    #[cfg(not(feature = "s3"))]
    let object = false;
    let opts = GcOptions::default()
        .with_min_age(min_age)
        .with_dry_run(dry_run);
    let report = if object || missing_root(&root, explicit)? {
        GcReport::default()
    } else {
        collect_garbage(&root, &opts)?
    };
    let entry = |l: &Leftover, reason: &str| {
        let what = match l.kind {
            LeftoverKind::Temp => "temp dir of a build that did not finish",
            LeftoverKind::Old => "replaced cache",
        };
        json!({"path": l.path, "cache": l.cache, "kind": what,
               "bytes": l.bytes, "age_seconds": l.age.as_secs(),
               "reason": if reason.is_empty() { what } else { reason }})
    };
    let mut removed: Vec<J> = report.removed.iter().map(|l| entry(l, "")).collect();
    let mut kept: Vec<J> = report
        .kept
        .iter()
        .map(|(l, why)| {
            entry(
                l,
                match why {
                    Kept::TooYoung => "younger than --older-than",
                    Kept::Locked => "a live build holds the cache's lock",
                },
            )
        })
        .collect();
    let mut freed = report.bytes_freed;
    // Partial downloads no process is resuming.
    let partials = if object {
        Vec::new()
    } else {
        shardset::download::remove_stale_partials(
            &shardset::download::downloads_dir(&root),
            min_age,
            dry_run,
        )?
    };
    let partials: Vec<J> = partials
        .iter()
        .map(|p| {
            freed += p.bytes;
            json!({"path": p.path, "cache": J::Null, "kind": "partial download",
                   "bytes": p.bytes, "age_seconds": p.age.as_secs(),
                   "reason": "partial download"})
        })
        .collect();
    removed.extend(partials);
    let mut versions = Vec::new();
    let mut aborted = 0usize;
    // Caches on object storage, or committed from parts into a shared
    // directory: their uncommitted or replaced build prefixes (and the
    // Lance versions of a Lance-layout cache on object storage).
    // A first build killed before its commit left builds and no metadata.
    #[cfg(feature = "s3")]
    let locations = walk_dirs(&root)
        .into_iter()
        .filter(|d| shardset::cache::remote::is_publish_location(d));
    #[cfg(feature = "s3")]
    for dir in locations {
        let builds = dir.join(shardset::cache::metadata::BUILDS_DIR);
        if !shardset::storage::object::is_object_uri(&dir)
            && !shardset::storage::storage_for(&builds).is_dir(&builds)
        {
            continue;
        }
        let r = shardset::cache::remote::collect_object_garbage(&dir, min_age, dry_run)?;
        freed += r.bytes;
        aborted += r.uploads_aborted;
        let entry = |p: &PathBuf, reason: &str| {
            json!({"path": p, "cache": dir, "kind": "uncommitted or replaced build",
                   "bytes": J::Null, "age_seconds": J::Null, "reason": reason})
        };
        removed.extend(r.removed.iter().map(|p| {
            if p.to_string_lossy().contains("/_builds/") {
                entry(p, "no committed metadata names it")
            } else {
                entry(p, "no kept Lance version uses it")
            }
        }));
        if r.lance_versions_removed > 0 || r.lance_restored.is_some() {
            versions.push(
                json!({"cache": dir, "lance_versions_removed": r.lance_versions_removed,
                                 "lance_restored": r.lance_restored}),
            );
        }
        kept.extend(
            r.kept_young
                .iter()
                .map(|p| entry(p, "younger than --older-than (it may still be uploading)")),
        );
    }
    if let Some(keep) = keep_versions {
        for dir in find_caches(&root) {
            let edited = shardset::cache::versions::kept_version_ids(
                shardset::storage::storage_for(&dir).as_ref(),
                &dir,
            )?;
            if edited.is_empty() {
                continue;
            }
            let g = shardset::layouts::edit::gc_versions(&dir, keep, dry_run)?;
            freed += g.bytes;
            versions.push(
                json!({"cache": dir, "versions": g.versions, "files": g.files, "bytes": g.bytes}),
            );
        }
    }
    if json_out {
        println!(
            "{}",
            json!({"root": root, "dry_run": dry_run, "removed": removed, "kept": kept,
                   "versions_removed": versions, "bytes_freed": freed,
                   "uploads_aborted": aborted})
        );
        return Ok(());
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    let line = |j: &J| {
        format!(
            "{}  ({}, {}, {} old)",
            j["path"].as_str().unwrap_or(""),
            j["kind"].as_str().unwrap_or(""),
            human(j["bytes"].as_u64().unwrap_or(0)),
            age(Duration::from_secs(j["age_seconds"].as_u64().unwrap_or(0)))
        )
    };
    for r in &removed {
        println!("{verb}  {}", line(r));
    }
    for k in &kept {
        println!("kept  {}: {}", line(k), k["reason"].as_str().unwrap_or(""));
    }
    if aborted > 0 {
        println!("aborted  {aborted} unfinished multipart upload(s) of those builds");
    }
    for v in &versions {
        if let Some(n) = v.get("lance_versions_removed") {
            println!(
                "{verb}  {n} Lance version(s) of {}{}",
                v["cache"].as_str().unwrap_or(""),
                match v["lance_restored"].as_u64() {
                    Some(r) =>
                        format!("; the committed version restored as the newest (version {r})"),
                    None => String::new(),
                }
            );
            continue;
        }
        println!(
            "{verb}  versions {} of {} and {} shard file(s) only they named ({})",
            v["versions"],
            v["cache"].as_str().unwrap_or(""),
            v["files"].as_array().map_or(0, Vec::len),
            human(v["bytes"].as_u64().unwrap_or(0))
        );
    }
    println!(
        "gc {}: {} left-over(s) {verb}, {} {}; {} kept",
        root.display(),
        removed.len(),
        human(freed),
        if dry_run { "to free" } else { "freed" },
        kept.len()
    );
    Ok(())
}

/// Download a file as a builder's asset is downloaded (resumable,
/// retried, fallbacks in order, checksum checked, once across
/// processes) and print its local path.
#[derive(clap::Args)]
pub struct DownloadArgs {
    /// The primary URL (it names the local file).
    pub url: String,
    /// A URL tried when the ones before it fail (repeatable, in order).
    #[arg(long = "fallback")]
    pub fallbacks: Vec<String>,
    /// `sha256:<hex>` or `md5:<hex>`.
    #[arg(long)]
    pub checksum: Option<String>,
    /// The local file name's stem and suffix (default: the URL's).
    #[arg(long)]
    pub filename: Option<String>,
    /// The folder (default: the cache root's `downloads/`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Attempts per URL after the first, on transient failures.
    #[arg(long, default_value_t = 3)]
    pub retries: u32,
    /// No progress display.
    #[arg(long)]
    pub quiet: bool,
}

/// `shardset download`: one asset into the downloads folder; prints its path.
pub fn download(args: DownloadArgs) -> CliResult {
    let DownloadArgs {
        url,
        fallbacks,
        checksum,
        filename,
        out,
        retries,
        quiet,
    } = args;
    let info = shardset::download::DownloadInfo {
        url,
        fallbacks,
        checksum,
        filename,
    };
    let dir = out.unwrap_or_else(|| {
        shardset::download::downloads_dir(&shardset::cache::naming::cache_root())
    });
    let mut opts = shardset::download::DownloadOptions::default().with_retries(retries);
    let bytes = std::sync::Arc::new(shardset::download::DownloadProgress::default());
    let shown = (!quiet && crate::progress::wanted(false)).then(|| {
        opts = opts.clone().with_progress(bytes.clone());
        crate::progress::Progress::start_download(bytes.clone())
    });
    let res = shardset::download::download(&info, &dir, &opts);
    if let Some(p) = shown {
        p.finish();
    }
    let path = res?;
    println!("{}", path.display());
    Ok(())
}

/// Say why a cache would be rebuilt (damage, changed sources); exit 1 if it would.
#[derive(clap::Args)]
pub struct WhyArgs {
    /// The cache directory.
    pub path: PathBuf,
}

/// Runs `shardset why`: the library's reasons to rebuild, one a line.
pub fn why(args: WhyArgs) -> CliResult {
    let why = shardset::builder::why_cache_report(&args.path)?;
    let reasons = why.reasons;
    if reasons.is_empty() {
        println!(
            "up to date: {}; {}",
            if why.sources_recorded {
                "no recorded source changed"
            } else {
                "no sources recorded"
            },
            why.checked
        );
        return Ok(());
    }
    for r in &reasons {
        println!("{r}");
    }
    Err(CliError::Failed(format!(
        "{} reason(s) to rebuild",
        reasons.len()
    )))
}
