//! `shardset inspect` and `shardset verify`: what a cache (or every cache
//! under a root) holds and costs, and whether its bytes still match.

use std::path::{Path, PathBuf};

use serde_json::{json, Value as J};
use shardset::cache::metadata::LAYOUT_ARROW_SHARDS;
use shardset::layouts::inspect::report;
use shardset::layouts::verify::CHECKSUMS_FILE;
use shardset::{stamp_checksums, verify_cache};

use crate::fmt::{cache_or_root, count, human, CliError, CliResult};

fn s<'a>(j: &'a J, k: &str) -> &'a str {
    j.get(k).and_then(|v| v.as_str()).unwrap_or("")
}
fn u(j: &J, k: &str) -> u64 {
    j.get(k).and_then(|v| v.as_u64()).unwrap_or(0)
}

fn print_human(r: &J, arrow_checksum_hint: bool) {
    println!("cache        {}", s(r, "path"));
    println!(
        "layout       {} (format {})",
        s(r, "layout"),
        s(r, "format")
    );
    println!("rows         {}", count(u(r, "num_rows")));
    match r.get("compression_level").and_then(J::as_i64) {
        Some(l) => println!("compression  {} (level {l})", s(r, "compression")),
        None => println!("compression  {}", s(r, "compression")),
    }
    if u(r, "version") > 1 {
        println!(
            "version      {} (edited; `shardset log` lists the versions kept)",
            u(r, "version")
        );
    }
    if let Some(d) = r.get("dedup").filter(|d| !d.is_null()) {
        println!(
            "dedup        {} repeated cell(s) stored once, {} saved",
            count(u(d, "cells")),
            human(u(d, "bytes_saved"))
        );
    }
    if let Some(g) = r.get("segments").filter(|g| !g.is_null()) {
        let q = &g["quality"];
        let f = |k: &str| q.get(k).and_then(J::as_f64).unwrap_or(f64::NAN);
        let params = Some(s(g, "encoder_params"))
            .filter(|p| !p.is_empty())
            .map(|p| format!(", {p}"))
            .unwrap_or_default();
        println!(
            "video        {} ({} crf {}, preset {}, tune {}{params}), {} segment(s) of {} frames, closed GOPs",
            s(g, "codec"),
            s(g, "encoder"),
            u(g, "crf"),
            s(g, "preset"),
            Some(s(g, "tune"))
                .filter(|t| !t.is_empty())
                .unwrap_or("default"),
            count(u(g, "num_segments")),
            u(g, "frames_per_segment")
        );
        println!(
            "quality      PSNR (RGB) mean {:.2} dB, min {:.2} dB; SSIM (luma) mean {:.4}, min {:.4}",
            f("psnr_mean"),
            f("psnr_min"),
            f("ssim_mean"),
            f("ssim_min")
        );
    }
    println!("fingerprint  {}", s(r, "schema_fingerprint"));
    if let Some(w) = r.get("writer").filter(|w| !w.is_null()) {
        println!("writer       {} {}", s(w, "name"), s(w, "version"));
    }
    println!(
        "size         {} on disk; a full load takes {} in memory ({})",
        human(u(r, "bytes_on_disk")),
        human(u(r, "bytes_in_memory")),
        s(r, "column_bytes_in_memory")
    );
    let c = &r["checksums"];
    let shard_line = match (&c["shard_xxh64"], &c["verified"]) {
        (J::Bool(false), J::Null) if c["stamped"] == J::Bool(true) => {
            format!("absent; data files stamped in {CHECKSUMS_FILE} (not verified; use --verify)")
        }
        (J::Bool(false), J::Null) => "absent".to_string(),
        (_, v) if !v.is_null() => {
            let mut line = if v["ok"] == J::Bool(true) {
                "verified, no damage found".to_string()
            } else {
                format!(
                    "DAMAGED: {}",
                    v["damage"]
                        .as_array()
                        .map(|a| a
                            .iter()
                            .map(|d| format!("{} ({})", s(d, "path"), s(d, "reason")))
                            .collect::<Vec<_>>()
                            .join(", "))
                        .unwrap_or_default()
                )
            };
            for k in ["checked", "not_checked"] {
                for c in v[k].as_array().into_iter().flatten() {
                    line.push_str("\n               ");
                    line.push_str(c.as_str().unwrap_or(""));
                }
            }
            line
        }
        (_, J::Null) if arrow_checksum_hint => "present (not verified; use --verify)".into(),
        _ => "present".into(),
    };
    println!("checksums    shards (xxh64): {shard_line}");
    println!(
        "             metadata (xxh64): {}",
        if c["metadata_xxh64"] == J::Bool(true) {
            "present (checked on every open)"
        } else {
            "absent"
        }
    );
    println!(
        "             per row: {}",
        if c["row_xxh64"] == J::Bool(true) {
            "present"
        } else {
            "absent"
        }
    );
    let source = match s(r, "features_source") {
        "metadata" => "the cache's metadata",
        "inferred" => "the Arrow schema (no class names or shapes stored)",
        other => other,
    };
    println!(
        "columns      (features from {source}; bytes on disk {}, in memory {})",
        s(r, "column_bytes_on_disk"),
        s(r, "column_bytes_in_memory")
    );
    let cols = r["columns"].as_array().cloned().unwrap_or_default();
    let w = cols
        .iter()
        .map(|c| s(c, "name").len())
        .max()
        .unwrap_or(4)
        .max(4);
    let fw = cols
        .iter()
        .map(|c| s(c, "feature").len())
        .max()
        .unwrap_or(7)
        .max(7);
    println!(
        "  {:<w$}  {:<fw$}  {:>12}  {:>12}",
        "name", "feature", "on disk", "in memory"
    );
    for c in &cols {
        println!(
            "  {:<w$}  {:<fw$}  {:>12}  {:>12}",
            s(c, "name"),
            s(c, "feature"),
            human(u(c, "bytes_on_disk")),
            human(u(c, "bytes_in_memory"))
        );
    }
    let shards = r["shards"].as_array().cloned().unwrap_or_default();
    println!("shards       {}", shards.len());
    for (i, sh) in shards.iter().enumerate() {
        let bytes = sh["bytes"]
            .as_u64()
            .map(human)
            .unwrap_or_else(|| "-".into());
        println!(
            "  {i:>5}  {:<20} {:>12} rows  {bytes:>12}",
            s(sh, "name"),
            count(u(sh, "rows"))
        );
    }
}

/// What a cache (or every cache under a root) holds and costs: layout,
/// rows, shards, bytes per column on disk and in memory, features, checksums.
#[derive(clap::Args)]
pub struct InspectArgs {
    /// A cache directory, or a root holding caches.
    pub path: PathBuf,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
    /// Verify the cache as `shardset verify` does (reads every byte); exit 1 on damage.
    #[arg(long)]
    pub verify: bool,
}

/// Runs `shardset inspect`.
pub fn inspect(args: InspectArgs) -> CliResult {
    let InspectArgs { path, json, verify } = args;
    let (single, dirs) = cache_or_root(&path)?;
    let mut reports = Vec::new();
    let mut failures = 0;
    for d in &dirs {
        match report(d, verify) {
            Ok(r) => reports.push(r),
            Err(e) if single => return Err(e.into()),
            Err(e) => {
                failures += 1;
                reports.push(json!({"path": d, "error": e.to_string()}));
            }
        }
    }
    let mismatched = reports
        .iter()
        .filter(|r| r["checksums"]["verified"]["ok"] == J::Bool(false))
        .count();
    if json {
        let out = if single {
            reports.pop().unwrap_or(J::Null)
        } else {
            json!({"root": path, "caches": reports})
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&out).unwrap_or_else(|_| out.to_string())
        );
    } else {
        for (i, r) in reports.iter().enumerate() {
            if i > 0 {
                println!();
            }
            match r.get("error") {
                Some(e) => println!(
                    "cache        {}\nerror        {}",
                    s(r, "path"),
                    e.as_str().unwrap_or("")
                ),
                None => print_human(r, !verify && s(r, "layout") == LAYOUT_ARROW_SHARDS),
            }
        }
    }
    if mismatched > 0 {
        return Err(CliError::Failed(format!(
            "{mismatched} cache(s) found damaged"
        )));
    }
    if failures > 0 {
        return Err(CliError::Failed(format!(
            "{failures} cache(s) cannot be read"
        )));
    }
    Ok(())
}

/// Verifies one cache; prints what it checked and found. `Ok(false)` on damage.
fn verify_one_cache(dir: &Path) -> CliResult<bool> {
    let rep = verify_cache(dir)?;
    if rep.is_ok() {
        println!("ok: {} ({}): no damage found", dir.display(), rep.layout);
    } else {
        eprintln!("damaged: {} ({})", dir.display(), rep.layout);
        for d in &rep.damage {
            let what = if d.reason.starts_with("xxh64") {
                "checksum mismatch"
            } else {
                "damage"
            };
            eprintln!("{what}: {}: {}", d.path.display(), d.reason);
            if !d.rows.is_empty() {
                let shown: Vec<String> = d.rows.iter().take(20).map(u64::to_string).collect();
                eprintln!(
                    "  {}: changed row(s) {}{}",
                    d.path.display(),
                    shown.join(", "),
                    if d.rows.len() > 20 { ", ..." } else { "" }
                );
            }
        }
    }
    for c in &rep.checked {
        println!("  checked: {c}");
    }
    for c in &rep.not_checked {
        println!("  not checked: {c}");
    }
    Ok(rep.is_ok())
}

/// Verify a cache (or every cache under a root): its structure always
/// (metadata, every shard or fragment opens and decodes, row counts,
/// schema), its data bytes where checksums are recorded; say which were
/// checked. Exit 0 when no damage is found, 1 naming each damaged file.
#[derive(clap::Args)]
pub struct VerifyArgs {
    /// A cache directory, or a root holding caches.
    pub path: PathBuf,
    /// Record the checksums of every data file of a cache that records
    /// none (in `_checksums.json`; nothing the reference reads changes).
    #[arg(long)]
    pub stamp: bool,
}

/// Runs `shardset verify` on a cache or on every cache under a root.
pub fn verify(args: VerifyArgs) -> CliResult {
    let VerifyArgs { path, stamp } = args;
    // A path that is no cache and holds none is a usage error (exit 2);
    // damage found in a cache is exit 1.
    let (single, dirs) = cache_or_root(&path).map_err(|e| CliError::Usage(e.to_string()))?;
    if stamp {
        for d in &dirs {
            let n = stamp_checksums(d)?;
            println!(
                "stamped: {} ({n} data file(s) recorded in {CHECKSUMS_FILE})",
                d.display()
            );
        }
        return Ok(());
    }
    let mut bad = 0;
    for d in &dirs {
        match verify_one_cache(d) {
            Ok(true) => {}
            Ok(false) => bad += 1,
            Err(e) if single => return Err(e),
            Err(e) => {
                eprintln!("error: {e}");
                bad += 1;
            }
        }
    }
    if bad > 0 {
        return Err(CliError::Failed(format!(
            "{bad} of {} cache(s) failed verification",
            dirs.len()
        )));
    }
    Ok(())
}
