//! `shardset ls` (the caches under a root) and `shardset gc` (what killed
//! builds and interrupted publications left behind).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value as J};
use shardset::cache::lock::{lock_path, CacheLock};
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
    if root.is_dir() {
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

/// Runs `shardset ls`.
pub fn ls(root: Option<PathBuf>, json_out: bool) -> CliResult {
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
                let raw = read_common(dir).ok().map(|c| c.raw);
                json!({
                    "name": name, "path": dir,
                    "layout": raw.as_ref().and_then(|r| r.get("layout")).cloned(),
                    "rows": raw.as_ref().and_then(|r| r.get("num_rows")).cloned(),
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

/// What a left-over is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Leftover {
    /// `.<name>_tmp_<suffix>`: the temp dir of a build that never published.
    Temp,
    /// `.<name>_old_<suffix>`: a replaced cache whose deletion was interrupted.
    Old,
}

/// Parses a left-over's directory name into (cache name, kind): the naming
/// of `cache::publish` (`.<name>_tmp_<8 chars>`, `.<name>_old_<8 chars>`).
pub fn parse_leftover(file_name: &str) -> Option<(String, Leftover)> {
    let rest = file_name.strip_prefix('.')?;
    for (marker, kind) in [("_tmp_", Leftover::Temp), ("_old_", Leftover::Old)] {
        if let Some((name, suffix)) = rest.rsplit_once(marker) {
            let ok = suffix.len() == 8
                && suffix
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
            if ok && !name.is_empty() {
                return Some((name.to_string(), kind));
            }
        }
    }
    None
}

/// Runs `shardset gc`.
pub fn gc(
    root: Option<PathBuf>,
    dry_run: bool,
    older_than: Option<String>,
    json_out: bool,
) -> CliResult {
    let min_age = older_than
        .as_deref()
        .map(parse_duration)
        .transpose()
        .map_err(CliError::Usage)?
        .unwrap_or_default();
    let (root, explicit) = root_or_default(root);
    let mut removed = Vec::new();
    let mut kept = Vec::new();
    let mut freed = 0u64;
    let dirs = if missing_root(&root, explicit)? {
        Vec::new()
    } else {
        walk_dirs(&root)
    };
    for parent in dirs {
        if crate::fmt::is_cache(&parent) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&parent) else {
            continue;
        };
        let mut found: Vec<(PathBuf, String, Leftover)> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                parse_leftover(&n).map(|(name, kind)| (e.path(), name, kind))
            })
            .collect();
        found.sort();
        for (path, name, kind) in found {
            let what = match kind {
                Leftover::Temp => "temp dir of a build that did not finish",
                Leftover::Old => "replaced cache",
            };
            let ago = modified_ago(&path);
            let bytes = dir_size(&path).unwrap_or(0);
            let entry = |reason: &str| {
                json!({"path": path, "cache": parent.join(&name), "kind": what,
                       "bytes": bytes, "age_seconds": ago.as_secs(), "reason": reason})
            };
            if ago < min_age {
                kept.push(entry("younger than --older-than"));
                continue;
            }
            // A builder holds `<cache>.lock` for as long as it writes its temp
            // dir; no lock file means no builder ever locked this cache here.
            let lock_file = lock_path(&parent.join(&name));
            let guard = if lock_file.exists() {
                match CacheLock::try_acquire(&parent.join(&name))? {
                    Some(g) => Some(g),
                    None => {
                        kept.push(entry("a live build holds the cache's lock"));
                        continue;
                    }
                }
            } else {
                None
            };
            if !dry_run {
                if let Err(e) = std::fs::remove_dir_all(&path) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        return Err(shardset::Error::Io {
                            op: "remove",
                            path,
                            source: e,
                        }
                        .into());
                    }
                }
            }
            drop(guard);
            freed += bytes;
            removed.push(entry(what));
        }
    }
    if json_out {
        println!(
            "{}",
            json!({"root": root, "dry_run": dry_run, "removed": removed, "kept": kept, "bytes_freed": freed})
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftover_names() {
        assert_eq!(
            parse_leftover(".ds_default_train_0123456789abcdef_tmp_ab12cd34"),
            Some(("ds_default_train_0123456789abcdef".into(), Leftover::Temp))
        );
        assert_eq!(
            parse_leftover(".c_old_zzzzzzzz"),
            Some(("c".into(), Leftover::Old))
        );
        assert_eq!(parse_leftover(".c_tmp_short"), None);
        assert_eq!(parse_leftover("c_tmp_ab12cd34"), None);
        assert_eq!(parse_leftover(".c_tmp_AB12CD34"), None);
    }
}
