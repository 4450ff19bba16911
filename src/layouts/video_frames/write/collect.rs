//! Pulling a build's examples: those an interrupted build already did are
//! checked against its records and skipped, the rest are fed to the video
//! jobs on the pool, and the jobs' frames are written in video order, with
//! checkpoints along the way.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;

use arrow_schema::SchemaRef;
use crossbeam_channel::{select, unbounded, Receiver};
use serde_json::Value as J;

use crate::cache::metadata::VideoEntry;
use crate::error::{BoxError, Error, Result};
use crate::lance::fsync_tree;
use crate::lance::LanceSegments;
use crate::layouts::video_frames::jobs::*;
use crate::layouts::video_frames::resume::{Checkpoint, ProgressFile, Resumed};
use crate::value::Example;

use super::VideoFramesOptions;

/// Videos dispatched ahead of the one being written, at most (their jobs
/// finished or running; each holds a task and, for inline bytes, a temp file).
const MAX_AHEAD: usize = 256;

/// The collector: feeds jobs to the pool, forwards their frames in video
/// order, and returns the videos written and the ones skipped.
#[allow(clippy::too_many_arguments)]
pub(super) fn collect<I, E>(
    items: I,
    column: &str,
    allowed: &[String],
    inputs_dir: &Path,
    opts: &VideoFramesOptions,
    schema: &SchemaRef,
    lance: &mut LanceSegments,
    progress: &mut ProgressFile,
    resumed: Resumed,
    lance_dir: &Path,
) -> Result<(Vec<VideoEntry>, Vec<J>, u64)>
where
    I: IntoIterator<Item = std::result::Result<(J, Example), E>>,
    E: Into<BoxError>,
{
    let (pool, threads) = crate::cache::pipeline::thread_pool(opts.threads(), "video")?;
    let budget = Arc::new(Budget::new(opts.buffer_bytes()));
    let _close = CloseOnDrop(budget.clone());
    // Each job says here when it ends, so a new one starts while the writer
    // still waits on an earlier, longer video.
    let (ended_tx, ended_rx) = unbounded::<()>();
    let mut running = 0usize;
    let mut items = items.into_iter();
    let mut queue: VecDeque<(Task, Receiver<Msg>)> = VecDeque::new();
    let mut next_id = resumed.tasks as i64;
    let mut exhausted = false;
    let mut videos = resumed.videos;
    let mut skipped = resumed.skipped;
    let mut row: u64 = resumed.rows;
    // What the next checkpoint records: videos and skips from these positions.
    let (mut videos_from, mut skipped_from) = (videos.len(), skipped.len());
    let segments = schema.field_with_name("segment_idx").is_ok();
    let mut since_checkpoint = 0u64;
    let mut last_checkpoint = std::time::Instant::now();
    // The head video's frame size, and frames and rows written so far.
    let mut size = (0usize, 0usize);
    let mut frames = 0u64;
    let mut rows = 0u64;
    loop {
        while !exhausted && running <= threads && queue.len() < MAX_AHEAD {
            match items.next() {
                None => exhausted = true,
                Some(Err(e)) => {
                    return Err(Error::Generator {
                        rows: next_id as u64,
                        source: e.into(),
                    })
                }
                Some(Ok((key, ex))) => {
                    let task = resolve(next_id, key, ex, column, allowed, inputs_dir)?;
                    let id = next_id;
                    next_id += 1;
                    let (tx, rx) = unbounded::<Msg>();
                    let file = task.file.clone();
                    let o = opts.clone();
                    let b = budget.clone();
                    let ended = ended_tx.clone();
                    running += 1;
                    pool.spawn_fifo(move || {
                        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            if segments {
                                encode_video_segments(id, &file, &o, &tx, &b)
                            } else {
                                encode_video(id, &file, &o, &tx, &b)
                            }
                        }))
                        .unwrap_or_else(|p| Err(Error::from_panic("video encoder", p).to_string()));
                        let _ = tx.send(match r {
                            Ok(n) => Msg::Done(n),
                            Err(e) => Msg::Failed(e),
                        });
                        let _ = ended.send(());
                    });
                    queue.push_back((task, rx));
                }
            }
        }
        let Some((task, rx)) = queue.front() else {
            if exhausted {
                break;
            }
            // Every queued video is written, but a job's "ended" signal can
            // lag its last message, so the jobs still count as running and
            // no example was pulled: wait for one to end, then pull more.
            // (Breaking here dropped the remaining examples without an error.)
            ended_rx
                .recv()
                .map_err(|_| Error::InvalidArgument("the video jobs' channel closed".into()))?;
            running -= 1;
            continue;
        };
        budget.set_head(task.id);
        let msg = select! {
            recv(rx) -> m => m,
            recv(ended_rx) -> _ => {
                running -= 1;
                continue;
            }
        };
        let outcome = match msg {
            Ok(Msg::Size(w, h)) => {
                size = (w, h);
                continue;
            }
            Ok(Msg::Rows(c)) => {
                let b = c.batch(schema, task.id, rows)?;
                frames += c.frames();
                rows += c.rows();
                lance.send(b)?;
                budget.release(c.bytes());
                if let Some(p) = opts.progress() {
                    p.fetch_add(c.frames(), std::sync::atomic::Ordering::Relaxed);
                }
                continue;
            }
            Ok(Msg::Done(n)) => Ok(n),
            Ok(Msg::Failed(e)) => Err(e),
            Err(_) => Err("the video job ended without a result".to_string()),
        };
        let (task, _) = queue.pop_front().expect("the head video");
        let done_tasks = task.id as u64 + 1;
        let written = std::mem::take(&mut frames);
        let video_rows = std::mem::take(&mut rows);
        let (w, h) = std::mem::take(&mut size);
        if task.temp {
            let _ = std::fs::remove_file(&task.file);
        }
        match outcome {
            Ok(n) => {
                debug_assert_eq!(n, written);
                videos.push(VideoEntry {
                    id: task.id,
                    key: task.key,
                    path: Some(task.recorded),
                    checksum: task.checksum,
                    t: n,
                    h: h as u64,
                    w: w as u64,
                    start_row: row,
                    metadata: task.metadata,
                });
                row += video_rows;
                since_checkpoint += n;
            }
            Err(reason) if written > 0 => {
                return Err(Error::Video {
                    path: task.file,
                    reason: format!("failed after {written} frames were written: {reason}"),
                })
            }
            Err(reason) if opts.skip_corrupt() => {
                skipped.push(
                    serde_json::json!({"id": task.id, "path": task.recorded, "reason": reason}),
                );
            }
            Err(reason) => {
                return Err(Error::Video {
                    path: task.file,
                    reason,
                })
            }
        }
        if since_checkpoint > 0
            && (since_checkpoint >= opts.checkpoint_frames()
                || last_checkpoint.elapsed() >= opts.checkpoint_interval())
        {
            if let Some(ds) = lance.commit()? {
                fsync_tree(lance_dir)?;
                crate::util::fault_point("video:after-lance-commit");
                progress.append(&Checkpoint {
                    version: ds.version().version,
                    tasks: done_tasks,
                    rows: row,
                    videos: videos[videos_from..].to_vec(),
                    skipped: skipped[skipped_from..].to_vec(),
                })?;
                (videos_from, skipped_from) = (videos.len(), skipped.len());
                crate::util::fault_point("video:after-checkpoint");
            }
            since_checkpoint = 0;
            last_checkpoint = std::time::Instant::now();
        }
    }
    Ok((videos, skipped, next_id as u64))
}

/// Takes the examples an interrupted build already did off the front of
/// `items`, checking that each resolves to the input that was recorded.
/// Returns where and how they differ, if they do.
pub(super) fn skip_resumed<It, E>(
    items: &mut It,
    resumed: &Resumed,
    column: &str,
    allowed: &[String],
    inputs_dir: &Path,
) -> Result<Option<String>>
where
    It: Iterator<Item = std::result::Result<(J, Example), E>>,
    E: Into<BoxError>,
{
    let mut recorded: std::collections::HashMap<i64, (Option<&J>, Option<&str>)> = resumed
        .videos
        .iter()
        .map(|v| (v.id, (Some(&v.key), v.path.as_deref())))
        .collect();
    for s in &resumed.skipped {
        if let Some(id) = s.get("id").and_then(J::as_i64) {
            recorded.insert(id, (None, s.get("path").and_then(J::as_str)));
        }
    }
    let differ = |id: i64, why: String| Ok(Some(format!("at example {id}: {why}")));
    for id in 0..resumed.tasks as i64 {
        let (key, ex) = match items.next() {
            None => return differ(id, "the generator ended".into()),
            Some(Err(e)) => {
                return Err(Error::Generator {
                    rows: id as u64,
                    source: e.into(),
                })
            }
            Some(Ok(kv)) => kv,
        };
        let task = resolve(id, key, ex, column, allowed, inputs_dir)?;
        if task.temp {
            let _ = std::fs::remove_file(&task.file);
        }
        match recorded.get(&id) {
            Some((k, p))
                if *p == Some(task.recorded.as_str()) && k.is_none_or(|k| *k == task.key) => {}
            Some((_, p)) => {
                return differ(
                    id,
                    format!("recorded {}, now {}", p.unwrap_or("?"), task.recorded),
                )
            }
            None => return differ(id, "it was not recorded".into()),
        }
    }
    Ok(None)
}
