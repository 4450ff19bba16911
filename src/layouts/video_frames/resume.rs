//! Checkpoints that make a `lance-video-frames` build resumable.
//!
//! The frames go to Lance in segments: every `checkpoint_frames` frames, at
//! a video boundary, the current segment is committed (a Lance version),
//! its files fsynced, and a line appended (and fsynced) to
//! `_frames_progress.jsonl` in the build's temp dir, recording the version,
//! how many examples are done and the videos written or skipped since the
//! previous line. The file's first line describes the build; a later build
//! of the same cache with an equal header (same options, same stamp of the
//! input files) takes the temp dir over: the Lance dataset goes back to the
//! last recorded version (a commit the file does not record is undone, its
//! files deleted), the recorded examples are checked and skipped, and
//! encoding continues with the next video.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value as J;

use crate::cache::build::{Build, LogLine, ResumeLog};
use crate::cache::lock::CacheLock;
use crate::cache::metadata::VideoEntry;
use crate::error::Result;
use crate::layouts::video_frames::format::INPUTS_DIR;
use crate::storage::StorageRef;

/// The progress file inside a frames build's temp dir.
pub(crate) const PROGRESS_FILE: &str = "_frames_progress.jsonl";

/// What a frames build is; a resumed build must match it exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ProgressHeader {
    pub cache_name: String,
    pub schema_fingerprint: String,
    pub column: String,
    pub quality: f64,
    pub method: u8,
    /// `rgb` or `yuv` (absent in progress files of older builds: yuv).
    #[serde(default = "yuv")]
    pub webp_input: crate::video::WebpInput,
    pub resize: Option<u32>,
    pub resize_mode: crate::video::ResizeMode,
    pub max_rows_per_file: usize,
    pub skip_corrupt: bool,
    /// The segment settings of a segments build (absent for frames).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<crate::video::segment::SegmentSettings>,
    /// The stamp of the input files (`VideoFramesOptions::sources`).
    pub sources: J,
    /// The writing crate's version.
    pub writer: String,
}

/// One committed segment.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Checkpoint {
    /// The Lance version of the commit.
    pub version: u64,
    /// Examples done (written or skipped) so far.
    pub tasks: u64,
    /// Lance rows written so far (frames, or segments).
    #[serde(default)]
    pub rows: u64,
    /// Videos written since the previous checkpoint.
    pub videos: Vec<VideoEntry>,
    /// Videos skipped since the previous checkpoint.
    pub skipped: Vec<J>,
}

impl LogLine for ProgressHeader {
    const KIND: &'static str = "header";
}

impl LogLine for Checkpoint {
    const KIND: &'static str = "checkpoint";
}

/// The work recovered from an interrupted build (all checkpoints folded
/// into one; version 0 when nothing was committed).
pub(crate) type Resumed = Checkpoint;

/// Appends checkpoints to the progress file.
pub(crate) type ProgressFile = ResumeLog<Checkpoint>;

/// A checkpoint follows the ones before it: a later Lance version, no fewer
/// examples done.
fn follows(c: &Checkpoint, before: &[Checkpoint]) -> bool {
    before
        .last()
        .is_none_or(|p| c.version > p.version && c.tasks >= p.tasks)
        && c.version > 0
}

/// The checkpoints folded into one.
fn fold(checkpoints: Vec<Checkpoint>) -> Resumed {
    let mut done = Resumed::default();
    for c in checkpoints {
        done.version = c.version;
        done.tasks = c.tasks;
        done.rows = c.rows;
        done.videos.extend(c.videos);
        done.skipped.extend(c.skipped);
    }
    done
}

/// Sets up the build of a frames cache: a left-over temp dir with an equal
/// header is taken over (when `resumable`) and brought back to its last
/// checkpoint (its Lance dataset rewound, the inputs of unfinished videos
/// removed); every other left-over is removed. A resumable build keeps its
/// temp dir when it fails.
pub(crate) fn prepare(
    storage: &StorageRef,
    cache_dir: &Path,
    lock: &CacheLock,
    header: &ProgressHeader,
    resumable: bool,
) -> Result<(Build, ProgressFile, Resumed)> {
    if !resumable {
        let build = Build::fresh(storage, cache_dir, lock)?;
        let file = ProgressFile::create(storage, &build.dir().join(PROGRESS_FILE), header)?;
        return Ok((build, file, Resumed::default()));
    }
    let (build, file, checkpoints) = Build::resume(
        storage,
        cache_dir,
        lock,
        PROGRESS_FILE,
        header,
        |_, c: &Checkpoint, before| follows(c, before),
        |dir, checkpoints| {
            let version = checkpoints.last().map_or(0, |c| c.version);
            crate::lance::rewind_dataset(storage, dir, version, &[PROGRESS_FILE])?;
            storage.remove_dir_all(&dir.join(INPUTS_DIR))
        },
    )?;
    Ok((build, file, fold(checkpoints)))
}

fn yuv() -> crate::video::WebpInput {
    crate::video::WebpInput::Yuv
}
