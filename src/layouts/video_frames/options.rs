//! Options of a frames build, shared by the build loop and its video jobs.

use std::sync::Arc;

use serde_json::Value as J;

use crate::video::webp::WebpSettings;

pub use crate::video::ResizeMode;

/// Options of [`write_video_frames_cache`].
#[derive(Debug, Clone)]
pub struct VideoFramesOptions {
    /// The `Video(storage='frames')` column (default: the only one).
    pub video_column: Option<String>,
    /// WebP quality and method (default 65 and 4, the reference's through OpenCV).
    pub webp: WebpSettings,
    /// Resize bound in pixels (None: keep the size).
    pub resize: Option<u32>,
    /// How `resize` applies.
    pub resize_mode: ResizeMode,
    /// Videos decoded at once (0 = one per core).
    pub threads: usize,
    /// Skip (and count) videos that cannot be opened or hold no frame;
    /// off, such a video fails the build (default on).
    pub skip_corrupt: bool,
    /// Rows per Lance data file.
    pub max_rows_per_file: usize,
    /// Provenance recorded under `lineage`.
    pub lineage: Option<J>,
    /// Frames written so far (for a progress display).
    pub progress: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// A stamp of the input files recorded as `sources` (see `builder::Sources::stamp`).
    pub sources: Option<J>,
    /// Encoded frames that may wait in memory for their video's turn to be
    /// written, in bytes (default 128 MiB). Videos are written in order, so
    /// the frames of a video that finishes early wait until the videos
    /// before it are written; when this is spent, jobs other than the
    /// video being written pause.
    pub buffer_bytes: usize,
    /// Frames between checkpoints (default 65,536): at the first video
    /// boundary after this many frames, or after `checkpoint_interval`,
    /// what was written is committed to Lance and recorded. When `sources`
    /// is set, a build of the same cache that was killed or failed is
    /// resumed from its last checkpoint by the next build with the same
    /// options and sources.
    pub checkpoint_frames: u64,
    /// Time between checkpoints (default two minutes; see `checkpoint_frames`).
    pub checkpoint_interval: std::time::Duration,
}

impl Default for VideoFramesOptions {
    fn default() -> Self {
        VideoFramesOptions {
            video_column: None,
            webp: WebpSettings::default(),
            resize: None,
            resize_mode: ResizeMode::Square,
            threads: 0,
            skip_corrupt: true,
            max_rows_per_file: 1024 * 1024,
            lineage: None,
            progress: None,
            sources: None,
            buffer_bytes: 128 << 20,
            checkpoint_frames: 1 << 16,
            checkpoint_interval: std::time::Duration::from_secs(120),
        }
    }
}

/// Frames per record batch sent to Lance (and per message from a video job).
pub(super) const FRAMES_PER_BATCH: usize = 32;
