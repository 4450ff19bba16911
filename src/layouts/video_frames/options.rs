//! Options of a frames build, shared by the build loop and its video jobs.

use std::num::{NonZeroU32, NonZeroUsize};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value as J;

use crate::error::{Error, Result};
use crate::video::segment::SegmentSettings;
use crate::video::webp::WebpSettings;

pub use crate::video::ResizeMode;

/// Options of [`write_video_frames_cache`](crate::write_video_frames_cache):
/// private fields, validated when set, so the writer never checks them
/// again (the same pattern as the other write options).
#[derive(Debug, Clone)]
pub struct VideoFramesOptions {
    video_column: Option<String>,
    webp: WebpSettings,
    segments: SegmentSettings,
    resize: Option<NonZeroU32>,
    resize_mode: ResizeMode,
    threads: usize,
    skip_corrupt: bool,
    max_rows_per_file: NonZeroUsize,
    lineage: Option<J>,
    progress: Option<Arc<AtomicU64>>,
    sources: Option<J>,
    buffer_bytes: usize,
    checkpoint_frames: u64,
    checkpoint_interval: Duration,
}

impl Default for VideoFramesOptions {
    fn default() -> Self {
        VideoFramesOptions {
            video_column: None,
            webp: WebpSettings::default(),
            segments: SegmentSettings::default(),
            resize: None,
            resize_mode: ResizeMode::Square,
            threads: 0,
            skip_corrupt: true,
            max_rows_per_file: NonZeroUsize::new(1024 * 1024).expect("positive"),
            lineage: None,
            progress: None,
            sources: None,
            buffer_bytes: 128 << 20,
            checkpoint_frames: 1 << 16,
            checkpoint_interval: Duration::from_secs(120),
        }
    }
}

impl VideoFramesOptions {
    /// The `Video(storage='frames')` column (default: the only one).
    pub fn with_video_column(mut self, column: impl Into<String>) -> Self {
        self.video_column = Some(column.into());
        self
    }

    /// WebP quality, method and input (default 65 and 4 from RGB, the
    /// reference's through OpenCV); checked when the settings are made.
    pub fn with_webp(mut self, webp: WebpSettings) -> Self {
        self.webp = webp;
        self
    }

    /// Codec, CRF, preset and segment length of a `Video(storage='segments')`
    /// column (default H.264 at its default CRF, segments of 32 frames);
    /// unused for a frames column.
    pub fn with_segments(mut self, segments: SegmentSettings) -> Self {
        self.segments = segments;
        self
    }

    /// Resize bound in pixels (`None`, the default: keep the size).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `Some(0)`.
    pub fn try_with_resize(mut self, resize: Option<u32>) -> Result<Self> {
        self.resize = match resize {
            None => None,
            Some(r) => Some(NonZeroU32::new(r).ok_or_else(|| {
                Error::InvalidArgument("resize must be at least 1 (None keeps the size)".into())
            })?),
        };
        Ok(self)
    }

    /// How the resize bound applies (default [`ResizeMode::Square`]).
    pub fn with_resize_mode(mut self, mode: ResizeMode) -> Self {
        self.resize_mode = mode;
        self
    }

    /// Videos decoded at once (0, the default: one per core).
    pub fn with_threads(mut self, n: usize) -> Self {
        self.threads = n;
        self
    }

    /// Skip (and count) videos that cannot be opened or hold no frame;
    /// off, such a video fails the build (default on).
    pub fn with_skip_corrupt(mut self, yes: bool) -> Self {
        self.skip_corrupt = yes;
        self
    }

    /// Rows per Lance data file (default 1,048,576).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0.
    pub fn try_with_max_rows_per_file(mut self, n: usize) -> Result<Self> {
        self.max_rows_per_file = NonZeroUsize::new(n)
            .ok_or_else(|| Error::InvalidArgument("max_rows_per_file must be at least 1".into()))?;
        Ok(self)
    }

    /// Provenance recorded under `lineage`.
    pub fn with_lineage(mut self, lineage: J) -> Self {
        self.lineage = Some(lineage);
        self
    }

    /// A counter the writer adds the frames it writes to (frames of a
    /// resumed build's checkpoints are added at the start), for a progress
    /// display on another thread.
    pub fn with_progress(mut self, counter: Arc<AtomicU64>) -> Self {
        self.progress = Some(counter);
        self
    }

    /// A stamp of the input files recorded as `sources` (see
    /// `builder::Sources::stamp`); with it, a build of the same cache that
    /// was killed or failed is resumed from its last checkpoint by the next
    /// build with the same options and sources. `None` (the default) records
    /// none and builds from scratch.
    pub fn with_sources(mut self, sources: Option<J>) -> Self {
        self.sources = sources;
        self
    }

    /// Encoded frames that may wait in memory for their video's turn to be
    /// written, in bytes (default 128 MiB). Videos are written in order, so
    /// the frames of a video that finishes early wait until the videos
    /// before it are written; when this is spent, jobs other than the
    /// video being written pause (one chunk always fits, so 0 behaves as 1).
    pub fn with_buffer_bytes(mut self, bytes: usize) -> Self {
        self.buffer_bytes = bytes;
        self
    }

    /// Frames between checkpoints (default 65,536): at the first video
    /// boundary after this many frames, or after the checkpoint interval,
    /// what was written is committed to Lance and recorded (0 behaves as 1:
    /// a checkpoint at every video boundary).
    pub fn with_checkpoint_frames(mut self, frames: u64) -> Self {
        self.checkpoint_frames = frames;
        self
    }

    /// Time between checkpoints (default two minutes; see
    /// [`Self::with_checkpoint_frames`]).
    pub fn with_checkpoint_interval(mut self, interval: Duration) -> Self {
        self.checkpoint_interval = interval;
        self
    }

    /// The video column asked for, if any.
    pub fn video_column(&self) -> Option<&str> {
        self.video_column.as_deref()
    }

    /// The WebP settings.
    pub fn webp(&self) -> WebpSettings {
        self.webp
    }

    /// The segment settings.
    pub fn segments(&self) -> &SegmentSettings {
        &self.segments
    }

    /// The resize bound, if any (never 0).
    pub fn resize(&self) -> Option<u32> {
        self.resize.map(NonZeroU32::get)
    }

    /// How the resize bound applies.
    pub fn resize_mode(&self) -> ResizeMode {
        self.resize_mode
    }

    /// Videos decoded at once (0: one per core).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Whether unreadable videos are skipped.
    pub fn skip_corrupt(&self) -> bool {
        self.skip_corrupt
    }

    /// Rows per Lance data file.
    pub fn max_rows_per_file(&self) -> usize {
        self.max_rows_per_file.get()
    }

    /// The lineage recorded, if any.
    pub fn lineage(&self) -> Option<&J> {
        self.lineage.as_ref()
    }

    /// The progress counter, if any.
    pub fn progress(&self) -> Option<&Arc<AtomicU64>> {
        self.progress.as_ref()
    }

    /// The sources stamp, if any.
    pub fn sources(&self) -> Option<&J> {
        self.sources.as_ref()
    }

    /// The byte budget of encoded frames waiting for their turn.
    pub fn buffer_bytes(&self) -> usize {
        self.buffer_bytes
    }

    /// Frames between checkpoints.
    pub fn checkpoint_frames(&self) -> u64 {
        self.checkpoint_frames
    }

    /// Time between checkpoints.
    pub fn checkpoint_interval(&self) -> Duration {
        self.checkpoint_interval
    }
}

/// Frames per record batch sent to Lance (and per message from a video job).
pub(super) const FRAMES_PER_BATCH: usize = 32;
