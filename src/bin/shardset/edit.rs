//! `shardset edit` (cells set, rows deleted and appended, committed as a new
//! version) and `shardset log` (the versions of a cache).

use std::path::PathBuf;

use serde_json::{json, Value as J};
use shardset::cache::versions::{list_versions, VersionEntry};
use shardset::layouts::edit::{EditPlan, Staging};
use shardset::sources::{read_rows, set_cells};
use shardset::storage::storage_for;
use shardset::{open_cache, Features};

use crate::fmt::{human, CliError, CliResult};

/// Edit an arrow-shards or lance-rows cache and commit the edits as a new version:
/// cells set (rows numbered as in the current version), then rows
/// deleted (numbered as in the current version), then rows appended.
/// Only the shards holding changed rows are written anew; the rest are
/// shared with the previous version, which stays openable.
#[derive(clap::Args)]
pub struct EditArgs {
    /// The cache directory.
    pub path: PathBuf,
    /// JSON lines of cells to set: {"row": N, "<column>": value, ...}.
    #[arg(long)]
    pub set: Option<PathBuf>,
    /// Rows to append: JSON lines of {"<column>": value, ...}, or a CSV file with a header.
    #[arg(long)]
    pub append: Option<PathBuf>,
    /// Rows to delete: N, A..B (end excluded), comma-separated.
    #[arg(long)]
    pub delete: Option<String>,
    /// A message kept with the version.
    #[arg(long, short)]
    pub message: Option<String>,
    /// Only say what a commit would write.
    #[arg(long)]
    pub dry_run: bool,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

/// Row numbers from `3,7,10..20` (ranges end-exclusive).
fn parse_row_list(spec: &str) -> CliResult<Vec<u64>> {
    let mut rows = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |s: &str| {
            s.trim().parse::<u64>().map_err(|_| {
                CliError::Usage(format!("--delete: '{part}' is not a row or a range A..B"))
            })
        };
        match part.split_once("..") {
            Some((a, b)) => rows.extend(num(a)?..num(b)?),
            None => rows.push(num(part)?),
        }
    }
    Ok(rows)
}

fn plan_json(p: &EditPlan) -> J {
    json!({
        "base_version": p.base_version, "version": p.version,
        "rows_before": p.rows_before, "rows_after": p.rows_after,
        "shards_rewritten": p.rewritten, "shards_reused": p.reused.len(),
        "shards_removed": p.removed, "rows_appended": p.appended_rows,
        "bytes_estimate": p.bytes_estimate,
    })
}

/// Stages the edits the files name: cells set first (rows numbered as in
/// the current version), then deletions (also numbered as in the current
/// version), then appended rows.
fn stage(args: &EditArgs, staging: &mut Staging, features: &Features) -> CliResult {
    if let Some(path) = &args.set {
        set_cells(staging, path, features)?;
    }
    if let Some(spec) = &args.delete {
        let mut rows = parse_row_list(spec)?;
        rows.sort_unstable();
        rows.dedup();
        // Highest first, so each number still means the current version's row.
        for r in rows.into_iter().rev() {
            staging.delete(r as i64)?;
        }
    }
    if let Some(path) = &args.append {
        for ex in read_rows(path, features)? {
            staging.append(ex)?;
        }
    }
    Ok(())
}

/// Runs `shardset edit`.
pub fn edit(args: EditArgs) -> CliResult {
    if args.set.is_none() && args.append.is_none() && args.delete.is_none() {
        return Err(CliError::Usage(
            "nothing to do: give --set, --append and/or --delete".into(),
        ));
    }
    let cache = open_cache(&args.path)?;
    let features = cache.features().clone();
    let mut staging = cache.edit()?;
    if let Some(m) = &args.message {
        staging = staging.with_message(m.clone());
    }
    stage(&args, &mut staging, &features)?;
    let plan = staging.plan()?;
    if args.dry_run {
        if args.json {
            println!("{}", json!({"dry_run": true, "plan": plan_json(&plan)}));
        } else {
            println!(
                "would commit version {} of {}: {} -> {} rows; rewrite {} shard(s), reuse {}, drop {}, append {} row(s); about {} written",
                plan.version,
                args.path.display(),
                plan.rows_before,
                plan.rows_after,
                plan.rewritten.len(),
                plan.reused.len(),
                plan.removed.len(),
                plan.appended_rows,
                human(plan.bytes_estimate)
            );
        }
        return Ok(());
    }
    let report = staging.commit()?;
    let c = &report.change;
    if args.json {
        println!(
            "{}",
            json!({"version": report.version, "plan": plan_json(&report.plan),
                   "bytes_written": c.bytes_written, "shards_new": c.shards_new,
                   "rows": report.metadata.num_rows(), "seconds": report.seconds})
        );
    } else {
        println!(
            "committed version {} of {}: {} rows; {} shard(s) rewritten, {} reused, {} new, {} dropped; {} written in {:.2} s",
            report.version,
            args.path.display(),
            report.metadata.num_rows(),
            c.shards_rewritten,
            c.shards_reused,
            c.shards_new,
            c.shards_removed,
            human(c.bytes_written),
            report.seconds
        );
    }
    Ok(())
}

fn entry_json(v: &VersionEntry) -> J {
    let info = v.info.as_ref();
    json!({
        "id": v.id, "current": v.current, "rows": v.num_rows, "shards": v.num_shards,
        "parent": info.map(|i| i.parent),
        "created_unix_ms": info.map(|i| i.created_unix_ms),
        "change": info.map(|i| serde_json::to_value(&i.change).unwrap_or(J::Null)),
    })
}

/// List the versions of a cache: id, rows, shards, what changed.
#[derive(clap::Args)]
pub struct LogArgs {
    /// The cache directory.
    pub path: PathBuf,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

/// Runs `shardset log`.
pub fn log(args: LogArgs) -> CliResult {
    let LogArgs {
        path,
        json: json_out,
    } = args;
    let versions = list_versions(storage_for(&path).as_ref(), &path)?;
    if json_out {
        let all: Vec<J> = versions.iter().map(entry_json).collect();
        println!("{}", J::Array(all));
        return Ok(());
    }
    for v in versions.iter().rev() {
        let mark = if v.current { " (current)" } else { "" };
        let what = match &v.info {
            None => "built".to_string(),
            Some(i) => {
                let c = &i.change;
                let mut parts = Vec::new();
                for (n, what) in [
                    (c.rows_set, "row(s) set"),
                    (c.cells_set, "cell(s) set"),
                    (c.rows_deleted, "row(s) deleted"),
                    (c.rows_appended, "row(s) appended"),
                ] {
                    if n > 0 {
                        parts.push(format!("{n} {what}"));
                    }
                }
                let when =
                    std::time::UNIX_EPOCH + std::time::Duration::from_millis(i.created_unix_ms);
                let ago = std::time::SystemTime::now()
                    .duration_since(when)
                    .unwrap_or_default();
                format!(
                    "edited from version {}, {} ago: {}; {} shard(s) rewritten, {} new, {} written{}",
                    i.parent,
                    crate::fmt::age(ago),
                    if parts.is_empty() { "no change".into() } else { parts.join(", ") },
                    c.shards_rewritten,
                    c.shards_new,
                    human(c.bytes_written),
                    c.message
                        .as_deref()
                        .map(|m| format!(" \"{m}\""))
                        .unwrap_or_default()
                )
            }
        };
        println!(
            "version {}{mark}: {} rows, {} shard(s); {what}",
            v.id, v.num_rows, v.num_shards
        );
    }
    Ok(())
}
