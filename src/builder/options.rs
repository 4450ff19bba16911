//! What [`load`](super::load) is asked and what it reports:
//! [`LoadOptions`] (where, and the [`WriteSpec`] of the layout to build)
//! and [`LoadReport`].

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::layouts::spec::{Layout, WriteSpec};

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
    /// Build afresh even if a cache exists (the old one is replaced atomically).
    pub rebuild: bool,
    /// The layout and its writer's options (they never change the cache
    /// key, but for the layout).
    pub write: WriteSpec,
    /// Counts rows (frames for a video cache) as they are written.
    pub progress: Option<Arc<AtomicU64>>,
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
    /// Forces a rebuild.
    pub fn with_rebuild(mut self, yes: bool) -> Self {
        self.rebuild = yes;
        self
    }
    /// Sets the layout and its writer's options.
    pub fn with_write_spec(mut self, spec: WriteSpec) -> Self {
        self.write = spec;
        self
    }
    /// Counts rows (frames for a video cache) in `counter` as they are written.
    pub fn with_progress(mut self, counter: Arc<AtomicU64>) -> Self {
        self.progress = Some(counter);
        self
    }
    /// The layout built.
    pub fn layout(&self) -> Layout {
        self.write.layout()
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
