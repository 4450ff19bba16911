//! [`OpenOptions`]: how a cache is opened (features expected, checks on
//! open and on read, memory, the version), validated when set.

use std::num::NonZeroU64;

use crate::error::{Error, Result};
use crate::features::Features;
use crate::layouts::arrow_shards::read::DEFAULT_DECOMPRESSED_CACHE_BYTES;
#[cfg(feature = "lance")]
use crate::layouts::LanceReadOptions;

/// Options of [`open_cache_with`](super::open_cache_with): private fields, validated when set
/// (the same pattern as the write options); serialisable, its stored form
/// checked like a built one (see `serial`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(
    try_from = "super::serial::RawOpenOptions",
    into = "super::serial::RawOpenOptions"
)]
pub struct OpenOptions {
    pub(super) features: Option<Features>,
    pub(super) verify_checksums: bool,
    pub(super) decode_images: bool,
    #[cfg(feature = "video")]
    pub(super) windows: crate::video::WindowSpec,
    pub(super) cache_bytes: usize,
    pub(super) lance_chunk_rows: Option<NonZeroU64>,
    pub(super) verify_on_read: bool,
    pub(super) in_memory: bool,
    pub(super) memory_fraction: f64,
    pub(super) in_memory_fallback: bool,
    pub(super) version: Option<u64>,
    pub(super) trusted_roots: crate::features::trust::TrustedRoots,
    pub(super) decode_limits: crate::features::limits::DecodeLimits,
}

/// The share of the available memory an in-memory open may take by
/// default ([`OpenOptions::try_with_memory_fraction`]).
pub const DEFAULT_MEMORY_FRACTION: f64 = 0.5;

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            features: None,
            verify_checksums: false,
            decode_images: true,
            #[cfg(feature = "video")]
            windows: crate::video::WindowSpec::default(),
            cache_bytes: DEFAULT_DECOMPRESSED_CACHE_BYTES,
            lance_chunk_rows: None,
            verify_on_read: false,
            in_memory: false,
            memory_fraction: DEFAULT_MEMORY_FRACTION,
            in_memory_fallback: false,
            version: None,
            trusted_roots: Default::default(),
            decode_limits: Default::default(),
        }
    }
}

impl OpenOptions {
    /// The features the caller expects: checked against the cache's
    /// fingerprint, and used to decode (needed for reference caches, which
    /// do not store class names or array shapes).
    pub fn with_features(mut self, f: Features) -> Self {
        self.features = Some(f);
        self
    }

    /// Recompute every shard's xxh64 on open (reads every byte; default off).
    pub fn with_verify_checksums(mut self, yes: bool) -> Self {
        self.verify_checksums = yes;
        self
    }

    /// How a `lance-video-frames` cache is cut into windows (default: one
    /// frame per window).
    #[cfg(feature = "video")]
    pub fn with_windows(mut self, spec: crate::video::WindowSpec) -> Self {
        self.windows = spec;
        self
    }

    /// Whether `get` decodes images to pixels (default true).
    pub fn with_decode_images(mut self, yes: bool) -> Self {
        self.decode_images = yes;
        self
    }

    /// Bytes of decoded data the backend keeps for reuse: decompressed
    /// record batches of compressed Arrow shards, decoded Lance chunks
    /// (default [`DEFAULT_DECOMPRESSED_CACHE_BYTES`], 256 MiB; 0 keeps
    /// nothing). Memory for reading stays within it plus what one read needs.
    pub fn with_cache_bytes(mut self, bytes: usize) -> Self {
        self.cache_bytes = bytes;
        self
    }

    /// Rows a Lance cache reads together on a random access (default 64;
    /// 1 reads only the row asked for). For a video cache these are frames:
    /// a `lance-video-segments` cache reads the segments that hold about
    /// that many frames (at least one).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0.
    pub fn try_with_lance_chunk_rows(mut self, rows: u64) -> Result<Self> {
        let rows = NonZeroU64::new(rows)
            .ok_or_else(|| Error::InvalidArgument("lance_chunk_rows must be at least 1".into()))?;
        self.lance_chunk_rows = Some(rows);
        Ok(self)
    }

    /// Check every row read against its stored checksum (default off): a
    /// row whose bytes changed on disk is an [`Error::ChecksumMismatch`]
    /// naming the row, the changed columns and the file. Needs a cache
    /// written with per-record checksums (`arrow-shards` only); opening
    /// another is an [`Error::InvalidArgument`] naming it.
    pub fn with_verify_on_read(mut self, yes: bool) -> Self {
        self.verify_on_read = yes;
        self
    }

    /// Load the whole cache into memory at open for the fastest random
    /// access (default off): an `arrow-shards` cache's files are read into
    /// heap buffers and every batch decoded (decompressed once), a
    /// `lance-rows` cache's chunks are all read and kept decoded. Refused
    /// with [`Error::OutOfMemory`] naming both sizes when the cache would
    /// take more than the memory fraction of what is available
    /// ([`Self::try_with_memory_fraction`]), unless
    /// [`Self::with_in_memory_fallback`] asks to read it mapped instead.
    pub fn with_in_memory(mut self, yes: bool) -> Self {
        self.in_memory = yes;
        self
    }

    /// The share of the memory available at open that an in-memory cache
    /// may take (default [`DEFAULT_MEMORY_FRACTION`], half).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] outside `(0, 1]`.
    pub fn try_with_memory_fraction(mut self, fraction: f64) -> Result<Self> {
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(Error::InvalidArgument(format!(
                "memory_fraction must be in (0, 1], got {fraction}"
            )));
        }
        self.memory_fraction = fraction;
        Ok(self)
    }

    /// Read a cache too large for memory mapped, as without
    /// [`Self::with_in_memory`], instead of refusing it (default off).
    pub fn with_in_memory_fallback(mut self, yes: bool) -> Self {
        self.in_memory_fallback = yes;
        self
    }

    /// Opens version `id` of a cache edited by commits (see
    /// [`crate::cache::versions`]) rather than the current one.
    pub fn with_version(mut self, id: u64) -> Self {
        self.version = Some(id);
        self
    }

    /// Directories outside the cache whose files its video path cells may
    /// name (validated when made: [`crate::features::trust::TrustedRoots::try_new`]),
    /// besides those `SHARDSET_TRUSTED_ROOTS` names. By default a cell may
    /// only name a file inside the cache (see [`crate::features::trust`]).
    pub fn with_trusted_roots(mut self, roots: crate::features::trust::TrustedRoots) -> Self {
        self.trusted_roots = roots;
        self
    }

    /// How large an image, a video frame or a window a read may decode
    /// (default: PIL's decompression-bomb limit for images and frames,
    /// 4096 frames per window): a cache asking for more is refused with an
    /// error naming the limit, before anything is allocated.
    pub fn with_decode_limits(mut self, limits: crate::features::limits::DecodeLimits) -> Self {
        self.decode_limits = limits;
        self
    }

    /// The decode limits.
    pub fn decode_limits(&self) -> crate::features::limits::DecodeLimits {
        self.decode_limits
    }

    /// The trusted roots set with [`OpenOptions::with_trusted_roots`].
    pub fn trusted_roots(&self) -> &crate::features::trust::TrustedRoots {
        &self.trusted_roots
    }

    /// The version asked for (`None`: the current one).
    pub fn version(&self) -> Option<u64> {
        self.version
    }

    /// Whether rows are checked against their checksums as they are read.
    pub fn verify_on_read(&self) -> bool {
        self.verify_on_read
    }

    /// Whether the cache is loaded into memory at open.
    pub fn in_memory(&self) -> bool {
        self.in_memory
    }

    /// The share of available memory an in-memory open may take.
    pub fn memory_fraction(&self) -> f64 {
        self.memory_fraction
    }

    /// Whether a cache too large for memory is read mapped instead.
    pub fn in_memory_fallback(&self) -> bool {
        self.in_memory_fallback
    }

    /// The expected features, if set.
    pub fn features(&self) -> Option<&Features> {
        self.features.as_ref()
    }

    /// Whether shard checksums are recomputed on open.
    pub fn verify_checksums(&self) -> bool {
        self.verify_checksums
    }

    /// Whether `get` decodes images.
    pub fn decode_images(&self) -> bool {
        self.decode_images
    }

    /// The windows of a `lance-video-frames` cache.
    #[cfg(feature = "video")]
    pub fn windows(&self) -> crate::video::WindowSpec {
        self.windows
    }

    /// The byte budget of decoded data kept for reuse.
    pub fn cache_bytes(&self) -> usize {
        self.cache_bytes
    }

    /// The rows a Lance cache reads together, if set (`None`: the Lance
    /// backend's default, 64).
    pub fn lance_chunk_rows(&self) -> Option<u64> {
        self.lance_chunk_rows.map(NonZeroU64::get)
    }

    #[cfg(feature = "lance")]
    pub(super) fn lance_read_options(&self) -> LanceReadOptions {
        let d = LanceReadOptions::default();
        LanceReadOptions {
            cache_bytes: if self.in_memory {
                usize::MAX
            } else {
                self.cache_bytes
            },
            chunk_rows: self.lance_chunk_rows.unwrap_or(d.chunk_rows),
            ..d
        }
    }
}
