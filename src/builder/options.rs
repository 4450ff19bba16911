//! What [`load`](super::load) is asked and what it reports: the layout to
//! build ([`StorageFormat`]), [`LoadOptions`] and [`LoadReport`].

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::layouts::arrow_shards::write::ArrowWriteOptions;

/// The physical layout `load` builds.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum StorageFormat {
    /// Arrow IPC shards (default).
    #[default]
    Arrow,
    /// A Lance dataset of rows.
    Lance,
    /// A `lance-video-frames` cache: every frame of the one
    /// `Video(storage='frames')` column as a WebP image
    /// ([`LoadOptions::with_video_frames_options`]).
    #[serde(rename = "video-frames")]
    #[value(name = "video-frames")]
    VideoFrames,
}

impl StorageFormat {
    /// The spelling in the cache key (the reference's `arrow` and `lance`;
    /// `lance-video-frames` for frames caches).
    pub fn as_str(self) -> &'static str {
        match self {
            StorageFormat::Arrow => "arrow",
            StorageFormat::Lance => "lance",
            StorageFormat::VideoFrames => "lance-video-frames",
        }
    }
}

impl std::str::FromStr for StorageFormat {
    type Err = Error;

    /// Parses `arrow`, `lance` or `video-frames` (also `lance-video-frames`).
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "arrow" => Ok(StorageFormat::Arrow),
            "lance" => Ok(StorageFormat::Lance),
            "video-frames" | "lance-video-frames" => Ok(StorageFormat::VideoFrames),
            _ => Err(Error::InvalidArgument(format!(
                "format must be arrow, lance or video-frames, got '{s}'"
            ))),
        }
    }
}

/// Options of [`load`].
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// The cache root (default `$STABLE_DATASETS_CACHE_DIR`, else `~/.stable-datasets`).
    pub cache_root: Option<PathBuf>,
    /// The exact cache directory, overriding the root and the reference's
    /// naming (for one split; the command line's `--out`).
    pub cache_dir: Option<PathBuf>,
    /// The config (default: the builder's default).
    pub config: Option<String>,
    /// The layout to build.
    pub format: StorageFormat,
    /// Build afresh even if a cache exists (the old one is replaced atomically).
    pub rebuild: bool,
    /// Shard writer knobs (they never change the cache key).
    pub write: ArrowWriteOptions,
    /// Lance writer knobs, for [`StorageFormat::Lance`].
    #[cfg(feature = "lance")]
    pub lance_write: crate::layouts::lance_rows::write::LanceWriteOptions,
    /// Frames writer knobs, for [`StorageFormat::VideoFrames`].
    #[cfg(feature = "video")]
    pub video_frames: crate::layouts::video_frames::options::VideoFramesOptions,
    /// Work units generated at once (0 = one per core).
    pub unit_parallelism: usize,
    /// Where assets are downloaded (default `<cache root>/downloads`).
    pub download_dir: Option<PathBuf>,
    /// How assets are downloaded.
    pub download: crate::download::DownloadOptions,
}

impl LoadOptions {
    /// Sets the cache root.
    pub fn with_cache_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.cache_root = Some(root.into());
        self
    }
    /// Sets the exact cache directory (overrides the root and the naming).
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }
    /// Sets the config.
    pub fn with_config(mut self, config: impl Into<String>) -> Self {
        self.config = Some(config.into());
        self
    }
    /// Sets the layout.
    pub fn with_format(mut self, format: StorageFormat) -> Self {
        self.format = format;
        self
    }
    /// Forces a rebuild.
    pub fn with_rebuild(mut self, yes: bool) -> Self {
        self.rebuild = yes;
        self
    }
    /// Sets the writer options.
    pub fn with_write_options(mut self, w: ArrowWriteOptions) -> Self {
        self.write = w;
        self
    }
    /// Sets the Lance writer options.
    #[cfg(feature = "lance")]
    pub fn with_lance_write_options(
        mut self,
        w: crate::layouts::lance_rows::write::LanceWriteOptions,
    ) -> Self {
        self.lance_write = w;
        self
    }
    /// Sets the frames writer options (for [`StorageFormat::VideoFrames`];
    /// `load` sets their sources to the builder's).
    #[cfg(feature = "video")]
    pub fn with_video_frames_options(
        mut self,
        v: crate::layouts::video_frames::options::VideoFramesOptions,
    ) -> Self {
        self.video_frames = v;
        self
    }
    /// Sets how many work units run at once.
    pub fn with_unit_parallelism(mut self, n: usize) -> Self {
        self.unit_parallelism = n;
        self
    }
    /// Sets where assets are downloaded.
    pub fn with_download_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.download_dir = Some(dir.into());
        self
    }
    /// Sets how assets are downloaded.
    pub fn with_download(mut self, d: crate::download::DownloadOptions) -> Self {
        self.download = d;
        self
    }
}

/// What [`load_with_report`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadReport {
    /// The cache directory.
    pub dir: PathBuf,
    /// True when this call built the cache (false: it was warm, or another
    /// process built it while this one waited for the lock).
    pub built: bool,
    /// The config used.
    pub config: String,
    /// Rows taken over from a killed build (0 when nothing was resumed;
    /// for a `lance-video-frames` cache, the examples, one video each).
    pub resumed_rows: u64,
    /// Why the cache was (re)built, when it was.
    pub reasons: Vec<super::reasons::RebuildReason>,
}
