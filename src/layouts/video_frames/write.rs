//! The `lance-video-frames` writer: every input video is decoded with
//! FFmpeg, optionally resized, and each frame stored as one lossy WebP row
//! (`video_id int32, frame_idx int32, bytes large_binary`) of a Lance dataset.
//!
//! Videos are decoded and encoded in parallel on a rayon pool (one video per
//! job, jobs started in order, `threads + 1` running at once); their frames
//! stream back in chunks, and are written in video order by the one Lance
//! writer. A video that finishes before the ones ahead of it (a short clip
//! behind a long one) waits in memory, so the other cores keep working
//! instead of idling behind the long video; what waits counts against
//! [`VideoFramesOptions::with_buffer_bytes`], and a job whose video is not the one
//! being written pauses when that is spent. Memory is therefore bounded by
//! that budget plus a few chunks per running job, whatever the number or
//! length of the videos. Decoded frames go to WebP as YUV 4:2:0 planes, as
//! the decoder gives them (no RGB round trip). The Lance side commits in
//! segments at checkpoints, which makes a build with a sources stamp
//! resumable (see `frames_resume`).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_schema::SchemaRef;
use crossbeam_channel::{select, unbounded, Receiver};
use serde_json::Value as J;

use crate::cache::checksums::write_file_checksums;
use crate::cache::lock::CacheLock;
use crate::cache::metadata::{
    VideoEntry, VideoFramesMetadata, WriterInfo, CACHE_FORMAT_VERSION, LAYOUT_LANCE_VIDEO_FRAMES,
};
use crate::error::{BoxError, Error, Result};
use crate::features::describe::features_to_json;
use crate::features::{Feature, Features, VideoStorage};
use crate::lance::LanceSegments;
use crate::lance::{fragment_rows, fsync_tree, lance_err};
use crate::layouts::video_frames::format::{frames_schema, INPUTS_DIR};
use crate::layouts::video_frames::resume::{
    Checkpoint, ProgressFile, ProgressHeader, Resumed, PROGRESS_FILE,
};
use crate::storage::storage_for;
use crate::value::Example;
use crate::video::webp::WebpEncoder;

use super::jobs::*;
pub use super::options::{ResizeMode, VideoFramesOptions};

/// What a finished frames build produced.
#[derive(Debug, Clone)]
pub struct WrittenVideoFrames {
    /// The published cache directory.
    pub dir: PathBuf,
    /// Its metadata.
    pub metadata: VideoFramesMetadata,
    /// Videos (written or skipped) taken over from an interrupted build of
    /// the same cache (0 when nothing was resumed).
    pub resumed_videos: u64,
}

/// Builds a `lance-video-frames` cache at `cache_dir` from examples whose
/// video column holds a path (`Value::Path`/`Value::Str`), inline bytes
/// (`Value::Bytes`, with the first allowed extension) or a [`crate::VideoRef`].
/// Each example's other scalar fields become the video's `metadata`; keys
/// are the examples' positions.
///
/// # Errors
/// See [`try_write_video_frames_cache`].
pub fn write_video_frames_cache<I>(
    examples: I,
    features: &Features,
    cache_dir: &Path,
    opts: &VideoFramesOptions,
) -> Result<WrittenVideoFrames>
where
    I: IntoIterator<Item = Example>,
{
    try_write_video_frames_cache(
        examples
            .into_iter()
            .enumerate()
            .map(|(i, e)| Ok::<_, std::convert::Infallible>((J::from(i as u64), e))),
        features,
        cache_dir,
        opts,
    )
}

/// Like [`write_video_frames_cache`], for a generator of `(key, example)`
/// pairs that can fail.
///
/// # Errors
/// [`Error::InvalidArgument`] for a missing or ambiguous video column or bad
/// options; [`Error::Encode`] for an input that is not a video file or has
/// a disallowed extension; [`Error::Video`] naming the file for an
/// unreadable video when `skip_corrupt` is off, or when every video failed;
/// [`Error::Generator`]; I/O and Lance errors. Nothing is published then.
pub fn try_write_video_frames_cache<I, E>(
    items: I,
    features: &Features,
    cache_dir: &Path,
    opts: &VideoFramesOptions,
) -> Result<WrittenVideoFrames>
where
    I: IntoIterator<Item = std::result::Result<(J, Example), E>>,
    E: Into<BoxError>,
{
    video_column(features, opts.video_column())?;
    let lock = CacheLock::acquire(cache_dir)?;
    write_video_frames_cache_locked(items, features, cache_dir, opts, &lock)
}

fn video_column(features: &Features, asked: Option<&str>) -> Result<String> {
    let frames: Vec<String> = features
        .iter()
        .filter(|(_, f)| matches!(f, Feature::Video(v) if v.storage == VideoStorage::Frames))
        .map(|(n, _)| n.to_string())
        .collect();
    match asked {
        Some(c) => match features.get(c) {
            Some(Feature::Video(v)) if v.storage == VideoStorage::Frames => Ok(c.to_string()),
            Some(_) => Err(Error::InvalidArgument(format!(
                "video column '{c}' is not a Video(storage='frames') feature"
            ))),
            None => Err(Error::InvalidArgument(format!(
                "video column '{c}' is not a feature"
            ))),
        },
        None if frames.len() == 1 => Ok(frames[0].clone()),
        None => Err(Error::InvalidArgument(format!(
            "a lance-video-frames cache needs exactly one Video(storage='frames') column or an explicit video column; found {frames:?}"
        ))),
    }
}

/// Videos dispatched ahead of the one being written, at most (their jobs
/// finished or running; each holds a task and, for inline bytes, a temp file).
const MAX_AHEAD: usize = 256;

/// The collector: feeds jobs to the pool, forwards their frames in video
/// order, and returns the videos written and the ones skipped.
#[allow(clippy::too_many_arguments)]
fn collect<I, E>(
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
    let mut row: u64 = videos.iter().map(|v| v.t).sum();
    // What the next checkpoint records: videos and skips from these positions.
    let (mut videos_from, mut skipped_from) = (videos.len(), skipped.len());
    let mut since_checkpoint = 0u64;
    let mut last_checkpoint = std::time::Instant::now();
    // The head video's frame size and frames written so far.
    let mut size = (0usize, 0usize);
    let mut frames = 0u64;
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
                            encode_video(id, &file, &o, &tx, &b)
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
            Ok(Msg::Frames(f)) => {
                let b = frames_batch(schema, task.id, frames, &f)?;
                frames += f.len() as u64;
                lance.send(b)?;
                budget.release(chunk_bytes(&f));
                if let Some(p) = opts.progress() {
                    p.fetch_add(f.len() as u64, std::sync::atomic::Ordering::Relaxed);
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
                row += n;
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
                progress.append(&Checkpoint {
                    version: ds.version().version,
                    tasks: done_tasks,
                    videos: videos[videos_from..].to_vec(),
                    skipped: skipped[skipped_from..].to_vec(),
                })?;
                (videos_from, skipped_from) = (videos.len(), skipped.len());
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
fn skip_resumed<It, E>(
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

/// The writer proper, for callers that hold the cache's lock (`load`).
///
/// # Errors
/// As [`try_write_video_frames_cache`].
pub fn write_video_frames_cache_locked<I, E>(
    items: I,
    features: &Features,
    cache_dir: &Path,
    opts: &VideoFramesOptions,
    lock: &CacheLock,
) -> Result<WrittenVideoFrames>
where
    I: IntoIterator<Item = std::result::Result<(J, Example), E>>,
    E: Into<BoxError>,
{
    let column = video_column(features, opts.video_column())?;
    write_locked(items, features, &column, cache_dir, opts, lock)
}

fn write_locked<I, E>(
    items: I,
    features: &Features,
    column: &str,
    cache_dir: &Path,
    opts: &VideoFramesOptions,
    lock: &CacheLock,
) -> Result<WrittenVideoFrames>
where
    I: IntoIterator<Item = std::result::Result<(J, Example), E>>,
    E: Into<BoxError>,
{
    // libwebp's configuration, made once before any video so that a
    // refusal fails the build instead of every video (the settings
    // themselves were checked when they were set).
    WebpEncoder::new(opts.webp()).map_err(Error::InvalidArgument)?;
    let allowed = match features.get(column) {
        Some(Feature::Video(v)) => v.allowed_extensions.clone(),
        _ => unreachable!("checked by video_column"),
    };
    crate::video::decode::init();
    let header = ProgressHeader {
        cache_name: cache_dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default(),
        schema_fingerprint: features.fingerprint(),
        column: column.to_string(),
        quality: f64::from(opts.webp().quality()),
        method: opts.webp().method(),
        webp_input: opts.webp().input(),
        resize: opts.resize(),
        resize_mode: opts.resize_mode(),
        max_rows_per_file: opts.max_rows_per_file(),
        skip_corrupt: opts.skip_corrupt(),
        sources: opts.sources().cloned().unwrap_or(J::Null),
        writer: WriterInfo::current().version,
    };
    // Only a build that knows its inputs (a sources stamp) can be resumed.
    let resumable = opts.sources().is_some();
    // A failed or killed resumable build leaves its checkpoints for the next one.
    let storage = storage_for(cache_dir);
    let (build, mut progress, resumed) = crate::layouts::video_frames::resume::prepare(
        &storage, cache_dir, lock, &header, resumable,
    )?;
    let data_dir = build.dir().to_path_buf();
    let inputs_dir = data_dir.join(INPUTS_DIR);
    let resumed_videos = resumed.tasks;
    let mut items = items.into_iter();
    if let Some(why) = skip_resumed(&mut items, &resumed, column, &allowed, &inputs_dir)? {
        // The inputs changed under the checkpoints: they are no use any more.
        drop(build);
        let _ = storage.remove_dir_all(&data_dir);
        return Err(Error::InvalidArgument(format!(
            "the examples differ from those of the interrupted build being resumed, {why}; its checkpoints were dropped, build again to start over"
        )));
    }
    if let Some(p) = opts.progress() {
        let frames: u64 = resumed.videos.iter().map(|v| v.t).sum();
        p.fetch_add(frames, std::sync::atomic::Ordering::Relaxed);
    }
    let schema = frames_schema();
    let mut lance = LanceSegments::new(
        &data_dir,
        schema.clone(),
        opts.max_rows_per_file(),
        resumed.version > 0,
    )?;
    let (videos, skipped, tasks) = collect(
        items,
        column,
        &allowed,
        &inputs_dir,
        opts,
        &schema,
        &mut lance,
        &mut progress,
        resumed,
        &data_dir,
    )?;
    let written = lance.finish()?;
    if tasks == 0 {
        return Err(Error::InvalidArgument(
            "cannot build a lance-video-frames cache from an empty generator".into(),
        ));
    }
    let ds = match written {
        Some(ds) if !videos.is_empty() => ds,
        _ => {
            let first = skipped.first().map(|j| j.to_string()).unwrap_or_default();
            return Err(Error::Video {
                path: cache_dir.to_path_buf(),
                reason: format!("every one of the {tasks} videos was unreadable (first: {first}); nothing published"),
            });
        }
    };
    let _ = storage.remove_dir_all(&inputs_dir);
    let fragment_rows = fragment_rows(&ds, &data_dir)?;
    let num_rows: u64 = videos.iter().map(|v| v.t).sum();
    if fragment_rows.iter().sum::<u64>() != num_rows {
        return Err(lance_err(
            &data_dir,
            "Lance wrote a different number of frames than were sent",
        ));
    }
    fsync_tree(&data_dir)?;
    // Every data file's xxh64, so `verify` checks a frames cache's bytes as
    // it does an Arrow cache's (the progress file goes at publication).
    write_file_checksums(storage.as_ref(), &data_dir, &[PROGRESS_FILE, INPUTS_DIR])?;
    let quality = if opts.webp().quality().fract() == 0.0 {
        J::from(opts.webp().quality() as i64)
    } else {
        J::from(f64::from(opts.webp().quality()))
    };
    let metadata = VideoFramesMetadata {
        cache_format_version: CACHE_FORMAT_VERSION,
        format: "lance".into(),
        layout: LAYOUT_LANCE_VIDEO_FRAMES.into(),
        schema_fingerprint: features.fingerprint(),
        num_rows,
        total_rows: num_rows,
        n_videos: videos.len() as u64,
        n_skipped: tasks - videos.len() as u64,
        encoding: "webp".into(),
        quality,
        resize: opts.resize().map(u64::from),
        video_column: column.to_string(),
        videos,
        lineage: opts.lineage().cloned(),
        resize_mode: opts.resize().map(|_| opts.resize_mode()),
        webp_method: Some(opts.webp().method()),
        webp_input: Some(opts.webp().input()),
        skipped: (!skipped.is_empty()).then_some(skipped),
        sources: opts.sources().cloned(),
        fragment_row_counts: Some(fragment_rows),
        features: Some(features_to_json(features)),
        writer: Some(WriterInfo::current()),
        metadata_xxh64: None,
    };
    drop(progress);
    // The progress file is build-time state; it goes just before publication.
    build.publish(&metadata, &[PROGRESS_FILE])?;
    Ok(WrittenVideoFrames {
        dir: cache_dir.to_path_buf(),
        metadata,
        resumed_videos,
    })
}
