//! Building the splits: the command line's options as the library's load
//! options, then each split built (or found up to date) with progress and
//! summed up, in words or as JSON.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Map, Value as J};
use shardset::builder::why;
use shardset::layouts::stats::dir_size;
use shardset::{load_with_report, DatasetBuilder, Layout, LoadOptions, WriteSpec};

use super::BuildOpts;
use crate::fmt::{count, human, CliError, CliResult};
use crate::progress::{self, Progress};

/// The load options of a build: the command line's write options by name
/// (only those given, and the source's batch size for the row layouts), the
/// library's spec deciding which apply to the layout.
pub(super) fn load_options(
    o: &BuildOpts,
    counter: Arc<AtomicU64>,
    batch: usize,
    video: Option<&Map<String, J>>,
) -> CliResult<LoadOptions> {
    let mut given = Map::new();
    let mut put = |k: &str, v: Option<J>| {
        if let Some(v) = v {
            given.insert(k.into(), v);
        }
    };
    put("shard_size", o.shard_size.clone().map(J::from));
    put("compression", o.compression.map(|c| J::from(c.name())));
    put("compression_level", o.compression_level.map(J::from));
    put(
        "record_checksums",
        o.record_checksums.then_some(J::Bool(true)),
    );
    put("dedup", o.dedup.clone().map(J::from));
    put("threads", (o.threads != 0).then(|| J::from(o.threads)));
    let layout = match video {
        Some(v) => {
            given.extend(v.clone());
            Layout::VideoFrames
        }
        None => {
            put("batch_size", Some(J::from(o.batch_size.unwrap_or(batch))));
            o.format
        }
    };
    let spec = WriteSpec::from_options(layout, &given).map_err(flag_error)?;
    Ok(LoadOptions::default()
        .with_write_spec(spec)
        .with_progress(counter)
        .with_rebuild(o.rebuild)
        .with_unit_parallelism(o.threads))
}

/// A write option's error in the command line's words: each option is the
/// flag of the same name with dashes (`dedup` is `--dedup`).
fn flag_error(e: shardset::Error) -> CliError {
    let mut m = e.to_string();
    for key in [
        "codec",
        "crf",
        "preset",
        "tune",
        "encoder_params",
        "frames_per_segment",
    ] {
        let flag = format!("--{}", key.replace('_', "-"));
        m = m.replace(
            &format!("write option segments.{key}:"),
            &format!("{flag}:"),
        );
    }
    for o in shardset::layouts::spec::OPTIONS {
        let flag = format!("--{}", o.name.replace('_', "-"));
        m = m
            .replace(&format!("write option '{}'", o.name), &flag)
            .replace(&format!("write option {}:", o.name), &format!("{flag}:"));
    }
    CliError::Usage(m)
}

pub(super) type RowCounter<'a> = &'a dyn Fn() -> CliResult<Option<u64>>;

/// Builds (or finds up to date) every split, with progress, then prints the summary.
pub(super) fn build_splits(
    b: &dyn DatasetBuilder,
    kind: &str,
    splits: &[(String, Option<u64>)],
    o: &BuildOpts,
    default_batch: usize,
    count_rows: RowCounter<'_>,
    frames: Option<Map<String, J>>,
) -> CliResult {
    let mut summaries = Vec::new();
    for (split, total) in splits {
        let counter = Arc::new(AtomicU64::new(0));
        let mut opts = load_options(o, counter.clone(), default_batch, frames.as_ref())?;
        if let Some(out) = &o.out {
            opts = opts.with_cache_dir(out.join(split));
        }
        let reasons = why(b, split, &opts)?;
        // Changed data can change inferred features (a new class folder, a
        // column that became float): that is a rebuild, not a mismatch.
        if reasons
            .iter()
            .any(|r| matches!(r, shardset::builder::RebuildReason::FeaturesChanged { .. }))
        {
            opts.rebuild = true;
        }
        let building = opts.rebuild || !reasons.is_empty();
        let show = progress::wanted(o.quiet) && building;
        let total = match total {
            // The counter counts frames, whose total is not known ahead.
            _ if frames.is_some() => None,
            Some(t) => Some(*t),
            None if show => count_rows()?,
            None => None,
        };
        let unit = if frames.is_some() { "frames" } else { "rows" };
        let bar = show.then(|| Progress::start(split.clone(), unit, total, counter.clone()));
        let t = Instant::now();
        let res = load_with_report(b, split, &opts);
        if let Some(bar) = bar {
            bar.finish();
        }
        let (ds, report) = res?;
        let secs = t.elapsed().as_secs_f64();
        let bytes = dir_size(&report.dir)?;
        let mut s = json!({
            "split": split,
            "dir": report.dir,
            "built": report.built,
            "resumed_rows": report.resumed_rows,
            "reasons": report.reasons,
            "rows": ds.len(),
            "shards": ds.backend().num_shards(),
            "layout": ds.cache().map(|c| c.layout.clone()),
            "bytes_on_disk": bytes,
            "seconds": secs,
        });
        let video = ds.cache().and_then(|c| {
            c.metadata
                .as_video_frames()
                .map(|m| (m.n_videos, m.n_skipped, m.num_rows))
        });
        if let Some((videos, skipped, frames)) = video {
            s["videos"] = json!(videos);
            s["skipped"] = json!(skipped);
            s["frames"] = json!(frames);
            s["resumed_videos"] = json!(report.resumed_rows);
        }
        if !o.quiet && !o.json {
            if let Some((videos, skipped, frames)) = video {
                if report.built {
                    let resumed = if report.resumed_rows > 0 {
                        format!(
                            ", {} of them taken over from an interrupted build",
                            report.resumed_rows
                        )
                    } else {
                        String::new()
                    };
                    println!(
                        "{split}: built {videos} videos ({skipped} skipped{resumed}), {} frames, {}, {:.1} s ({} frames/s) -> {}",
                        count(frames),
                        human(bytes),
                        secs,
                        count((frames as f64 / secs.max(1e-3)) as u64),
                        report.dir.display()
                    );
                } else {
                    println!(
                        "{split}: up to date, {videos} videos, {} frames -> {}",
                        count(frames),
                        report.dir.display()
                    );
                }
            } else if report.built {
                println!(
                    "{split}: built {} rows in {} shard(s), {}, {:.1} s ({} rows/s) -> {}",
                    count(ds.len()),
                    ds.backend().num_shards(),
                    human(bytes),
                    secs,
                    count((ds.len() as f64 / secs.max(1e-3)) as u64),
                    report.dir.display()
                );
            } else {
                println!(
                    "{split}: up to date, {} rows -> {}",
                    count(ds.len()),
                    report.dir.display()
                );
            }
        }
        summaries.push(s);
    }
    if o.json {
        println!(
            "{}",
            json!({
                "source": kind,
                "name": b.name(),
                "caches": summaries,
            })
        );
    }
    Ok(())
}
