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

mod codec;
mod collect;

use std::path::{Path, PathBuf};

use serde_json::Value as J;

use crate::cache::checksums::write_file_checksums;
use crate::cache::lock::CacheLock;
use crate::cache::metadata::{
    VideoFramesMetadata, WriterInfo, CACHE_FORMAT_VERSION, LAYOUT_LANCE_VIDEO_FRAMES,
    LAYOUT_LANCE_VIDEO_SEGMENTS,
};
use crate::error::{BoxError, Error, Result};
use crate::features::describe::features_to_json;
use crate::features::{Feature, Features, VideoStorage};
use crate::lance::LanceSegments;
use crate::lance::{fragment_rows, fsync_tree, lance_err};
use crate::layouts::video_frames::format::{
    frames_schema, segments_schema, INPUTS_DIR, PACKET_FRAMES,
};
use crate::layouts::video_frames::resume::{ProgressHeader, PROGRESS_FILE};
use crate::storage::storage_for;
use crate::value::Example;
use crate::video::webp::WebpEncoder;

pub use super::options::{ResizeMode, VideoFramesOptions};
use codec::{check_segment_encoder, segments_info};
use collect::{collect, skip_resumed};

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
    crate::cache::location::write_at(cache_dir, |dir, lock| {
        write_video_frames_cache_locked(items, features, dir, opts, lock)
    })
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

impl crate::cache::location::WrittenAt for WrittenVideoFrames {
    fn published_at(&mut self, dir: PathBuf) {
        self.dir = dir;
    }
}
