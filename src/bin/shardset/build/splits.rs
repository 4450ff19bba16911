//! Building the splits: the command line's options as the library's load
//! options, then each split built (or found up to date) with progress and
//! summed up, in words or as JSON.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use shardset::builder::why;
use shardset::layouts::stats::dir_size;
use shardset::{load_with_report, ArrowWriteOptions, DatasetBuilder, LoadOptions, StorageFormat};

use super::BuildOpts;
use crate::fmt::{count, human, parse_size, CliError, CliResult};
use crate::progress::{self, Progress};

pub(super) fn load_options(
    o: &BuildOpts,
    counter: Arc<AtomicU64>,
    batch: usize,
) -> CliResult<LoadOptions> {
    let format = o.format;
    if format == StorageFormat::Lance
        && (o.shard_size.is_some() || o.record_checksums || o.dedup.is_some())
    {
        return Err(CliError::Usage(
            "--shard-size, --record-checksums and --dedup apply to --format arrow only".into(),
        ));
    }
    let batch = o.batch_size.unwrap_or(batch);
    let usage = |e: shardset::Error| CliError::Usage(format!("--batch-size: {e}"));
    let level = |e: shardset::Error| CliError::Usage(format!("--compression-level: {e}"));
    let arrow_level = if format == StorageFormat::Arrow {
        o.compression_level
    } else {
        None
    };
    let mut write = ArrowWriteOptions::default()
        .try_with_batch_size(batch)
        .map_err(usage)?
        .try_with_compression_level(o.compression.unwrap_or_default(), arrow_level)
        .map_err(level)?
        .with_record_checksums(o.record_checksums)
        .try_with_dedup(
            o.dedup
                .as_deref()
                .map(parse_size)
                .transpose()
                .map_err(|e| CliError::Usage(format!("--dedup: {e}")))?,
        )
        .map_err(|e| CliError::Usage(format!("--dedup: {e}")))?
        .with_encode_threads(o.threads)
        .with_progress(counter.clone());
    if let Some(s) = &o.shard_size {
        let shard = parse_size(s).map_err(CliError::Usage)?;
        write = write
            .try_with_shard_size_bytes(Some(shard))
            .map_err(|e| CliError::Usage(format!("--shard-size: {e}")))?;
    }
    let opts = LoadOptions::default()
        .with_format(format)
        .with_rebuild(o.rebuild)
        .with_unit_parallelism(o.threads)
        .with_write_options(write)
        // A builder's asset downloads show their own progress (bytes, rate, ETA).
        .with_download(
            shardset::download::DownloadOptions::default()
                .with_progress(std::io::IsTerminal::is_terminal(&std::io::stderr())),
        );
    #[cfg(feature = "lance")]
    let opts = {
        let mut lance = shardset::LanceWriteOptions::default()
            .try_with_batch_size(batch)
            .map_err(usage)?
            .with_encode_threads(o.threads)
            .with_progress(counter);
        if let (Some(c), StorageFormat::Lance) = (o.compression, format) {
            lance = lance
                .try_with_compression(c, o.compression_level)
                .map_err(level)?;
        }
        opts.with_lance_write_options(lance)
    };
    Ok(opts)
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
    frames: Option<shardset::VideoFramesOptions>,
) -> CliResult {
    let mut summaries = Vec::new();
    for (split, total) in splits {
        let counter = Arc::new(AtomicU64::new(0));
        let mut opts = load_options(o, counter.clone(), default_batch)?;
        #[cfg(feature = "video")]
        if let Some(v) = &frames {
            opts = opts
                .with_format(StorageFormat::VideoFrames)
                .with_video_frames_options(v.clone().with_progress(counter.clone()));
        }
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
