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
    SegmentQuality, SegmentsInfo, VideoEntry, VideoFramesMetadata, WriterInfo,
    CACHE_FORMAT_VERSION, LAYOUT_LANCE_VIDEO_FRAMES, LAYOUT_LANCE_VIDEO_SEGMENTS,
};
use crate::error::{BoxError, Error, Result};
use crate::features::describe::features_to_json;
use crate::features::{Feature, Features, VideoStorage};
use crate::lance::LanceSegments;
use crate::lance::{fragment_rows, fsync_tree, lance_err};
use crate::layouts::video_frames::format::{
    frames_schema, segments_schema, INPUTS_DIR, PACKET_FRAMES,
};
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
    #[cfg(feature = "s3")]
    if crate::storage::is_object_uri(cache_dir) {
        let mut w = crate::cache::remote::write_staged(cache_dir, |dir, lock| {
            write_video_frames_cache_locked(items, features, dir, opts, lock)
        })?;
        w.dir = cache_dir.to_path_buf();
        return Ok(w);
    }
    let lock = CacheLock::acquire(cache_dir)?;
    write_video_frames_cache_locked(items, features, cache_dir, opts, &lock)
}

fn video_column(features: &Features, asked: Option<&str>) -> Result<(String, VideoStorage)> {
    let layout_column = |f: &Feature| match f {
        Feature::Video(v) if v.storage.is_layout() => Some(v.storage),
        _ => None,
    };
    let found: Vec<(String, VideoStorage)> = features
        .iter()
        .filter_map(|(n, f)| layout_column(f).map(|s| (n.to_string(), s)))
        .collect();
    match asked {
        Some(c) => match features.get(c) {
            Some(f) => layout_column(f).map(|s| (c.to_string(), s)).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "video column '{c}' is not a Video(storage='frames') or Video(storage='segments') feature"
                ))
            }),
            None => Err(Error::InvalidArgument(format!(
                "video column '{c}' is not a feature"
            ))),
        },
        None if found.len() == 1 => Ok(found[0].clone()),
        None => Err(Error::InvalidArgument(format!(
            "a video cache needs exactly one Video(storage='frames') or Video(storage='segments') column, or an explicit video column; found {:?}",
            found.iter().map(|(n, _)| n).collect::<Vec<_>>()
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
    let (column, storage) = video_column(features, opts.video_column())?;
    write_locked(items, features, &column, storage, cache_dir, opts, lock)
}

fn write_locked<I, E>(
    items: I,
    features: &Features,
    column: &str,
    storage: VideoStorage,
    cache_dir: &Path,
    opts: &VideoFramesOptions,
    lock: &CacheLock,
) -> Result<WrittenVideoFrames>
where
    I: IntoIterator<Item = std::result::Result<(J, Example), E>>,
    E: Into<BoxError>,
{
    let segments = storage == VideoStorage::Segments;
    // The encoder's configuration, made once before any video so that a
    // refusal (an unknown preset, a codec this FFmpeg lacks) fails the
    // build instead of every video.
    if segments {
        check_segment_encoder(opts)?;
    } else {
        WebpEncoder::new(opts.webp()).map_err(Error::InvalidArgument)?;
    }
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
        segments: segments.then(|| opts.segments().clone()),
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
    // A build resumed from checkpoints written before the `packet_frames`
    // column existed keeps their schema.
    let packet_frames = segments
        && (resumed.version == 0
            || crate::layouts::LanceRows::dataset_schema(&data_dir)?
                .field_with_name(PACKET_FRAMES)
                .is_ok());
    let schema = if segments {
        segments_schema(packet_frames)
    } else {
        frames_schema()
    };
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
        return Err(Error::InvalidArgument(format!(
            "cannot build a {} cache from an empty generator",
            if segments {
                LAYOUT_LANCE_VIDEO_SEGMENTS
            } else {
                LAYOUT_LANCE_VIDEO_FRAMES
            }
        )));
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
    let lance_rows = if segments {
        let per = u64::from(opts.segments().frames_per_segment());
        videos.iter().map(|v| v.t.div_ceil(per)).sum()
    } else {
        num_rows
    };
    if fragment_rows.iter().sum::<u64>() != lance_rows {
        return Err(lance_err(
            &data_dir,
            "Lance wrote a different number of rows than were sent",
        ));
    }
    let segments_info = if segments {
        Some(segments_info(
            &data_dir,
            opts,
            &videos,
            lance_rows,
            packet_frames,
        )?)
    } else {
        None
    };
    fsync_tree(&data_dir)?;
    // Every data file's xxh64, so `verify` checks a frames cache's bytes as
    // it does an Arrow cache's (the progress file goes at publication).
    write_file_checksums(storage.as_ref(), &data_dir, &[PROGRESS_FILE, INPUTS_DIR])?;
    let quality = if segments {
        J::Null
    } else if opts.webp().quality().fract() == 0.0 {
        J::from(opts.webp().quality() as i64)
    } else {
        J::from(f64::from(opts.webp().quality()))
    };
    let metadata = VideoFramesMetadata {
        cache_format_version: CACHE_FORMAT_VERSION,
        format: "lance".into(),
        layout: if segments {
            LAYOUT_LANCE_VIDEO_SEGMENTS
        } else {
            LAYOUT_LANCE_VIDEO_FRAMES
        }
        .into(),
        schema_fingerprint: features.fingerprint(),
        num_rows,
        total_rows: num_rows,
        n_videos: videos.len() as u64,
        n_skipped: tasks - videos.len() as u64,
        encoding: if segments {
            opts.segments().codec().as_str()
        } else {
            "webp"
        }
        .into(),
        quality,
        resize: opts.resize().map(u64::from),
        video_column: column.to_string(),
        videos,
        lineage: opts.lineage().cloned(),
        resize_mode: opts.resize().map(|_| opts.resize_mode()),
        webp_method: (!segments).then(|| opts.webp().method()),
        webp_input: (!segments).then(|| opts.webp().input()),
        segments: segments_info,
        skipped: (!skipped.is_empty()).then_some(skipped),
        sources: opts.sources().cloned(),
        fragment_row_counts: Some(fragment_rows),
        lance_version: None,
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

/// Opens the segment encoder once on a small frame, so that a codec this
/// FFmpeg lacks or a preset it refuses fails the build up front.
fn check_segment_encoder(opts: &VideoFramesOptions) -> Result<()> {
    let s = opts.segments();
    // SVT-AV1 prints its configuration to stderr for every encoder it opens
    // (one per segment) unless its log level says otherwise; a user's own
    // SVT_LOG is kept.
    if s.codec() == crate::video::segment::SegmentCodec::Av1
        && std::env::var_os("SVT_LOG").is_none()
    {
        std::env::set_var("SVT_LOG", "1");
    }
    let side = 64u32;
    let frame = vec![128u8; (side * side * 3 / 2) as usize];
    // The encoders take a parameter they cannot parse with a warning and go
    // on without it: refused here instead, naming it.
    let (encoded, log) = crate::video::decode::capture_log(|| {
        crate::video::segment::encode_segment(&s.params(side, side), &[frame])
    });
    let unparsed: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("Error parsing option"))
        .collect();
    let encoded = if unparsed.is_empty() {
        encoded
    } else {
        Err(format!(
            "the encoder does not take {}",
            unparsed
                .iter()
                .map(|l| format!("'{l}'"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    };
    encoded.map(|_| ()).map_err(|e| {
        Error::InvalidArgument(format!(
            "cannot encode {} segments with {} (preset '{}', tune '{}', crf {}, \
                 encoder parameters '{}'): {e}",
            s.codec().as_str(),
            s.codec().encoder_name(),
            s.preset(),
            s.tune(),
            s.crf(),
            s.encoder_params()
        ))
    })
}

/// The segments part of the metadata: the encoder and its parameters, the
/// frame size when every video has the same, and the quality the encoding
/// cost, summed up from the segment rows (so a resumed build counts the
/// segments of its checkpoints too).
fn segments_info(
    dir: &Path,
    opts: &VideoFramesOptions,
    videos: &[VideoEntry],
    num_segments: u64,
    packet_frames: bool,
) -> Result<SegmentsInfo> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int32Type};
    let s = opts.segments();
    let (mut frames, mut psnr_sum, mut ssim_sum) = (0u64, 0f64, 0f64);
    let (mut psnr_min, mut ssim_min) = (f64::INFINITY, f64::INFINITY);
    let mut bad = None;
    let cols: Vec<String> = ["frame_count", "psnr", "psnr_min", "ssim", "ssim_min"]
        .iter()
        .map(|c| c.to_string())
        .collect();
    crate::lance::scan_dataset(dir, None, &cols, |b| {
        let (Some(n), Some(p), Some(pm), Some(ss), Some(sm)) = (
            b.column(0).as_primitive_opt::<Int32Type>(),
            b.column(1).as_primitive_opt::<Float64Type>(),
            b.column(2).as_primitive_opt::<Float64Type>(),
            b.column(3).as_primitive_opt::<Float64Type>(),
            b.column(4).as_primitive_opt::<Float64Type>(),
        ) else {
            bad = Some("the quality columns have unexpected types");
            return;
        };
        for i in 0..b.num_rows() {
            let k = n.value(i).max(0) as u64;
            frames += k;
            psnr_sum += p.value(i) * k as f64;
            ssim_sum += ss.value(i) * k as f64;
            psnr_min = psnr_min.min(pm.value(i));
            ssim_min = ssim_min.min(sm.value(i));
        }
    })?;
    if let Some(why) = bad {
        return Err(lance_err(dir, why));
    }
    let k = frames.max(1) as f64;
    let (w, h) = (videos[0].w, videos[0].h);
    let same = videos.iter().all(|v| (v.w, v.h) == (w, h));
    Ok(SegmentsInfo {
        codec: s.codec().as_str().into(),
        encoder: s.codec().encoder_name().into(),
        encoder_version: crate::video::segment::codec_library_version(),
        crf: s.crf(),
        preset: s.preset().to_string(),
        tune: s.tune().to_string(),
        encoder_params: s.encoder_params().to_string(),
        frames_per_segment: s.frames_per_segment(),
        closed_gop: true,
        scene_cut: false,
        pixel_format: "yuv420p".into(),
        extradata: String::new(),
        width: same.then_some(w),
        height: same.then_some(h),
        num_segments,
        packet_frames,
        quality: SegmentQuality {
            psnr: "mean over frames of the PSNR of RGB samples against the source frames (exact frames count 100 dB)".into(),
            ssim: "mean over frames of the SSIM of BT.601 luma from RGB, 11x11 Gaussian window".into(),
            psnr_mean: psnr_sum / k,
            psnr_min,
            ssim_mean: ssim_sum / k,
            ssim_min,
        },
    })
}
