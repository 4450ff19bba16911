//! A video cell: how a video is kept (a file staged in the cache, bytes
//! inline, or a layout of its own), and the reference to it an author
//! yields and a reader gets back.

use std::borrow::Cow;
use std::path::PathBuf;

/// How a video is kept in an Arrow cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VideoStorage {
    /// File staged into `_assets/video/` inside the cache; the cell holds its name.
    Path,
    /// The file's bytes inline in the cell.
    Bytes,
    /// One WebP frame per Lance row (the `lance-video-frames` layout).
    Frames,
    /// Closed segments of frames encoded with a video codec, one per Lance
    /// row (the `lance-video-segments` layout, ours: the reference does not
    /// read it).
    Segments,
}

impl VideoStorage {
    /// Whether the storage is a layout of its own (frames or segments)
    /// rather than a cell of a row.
    pub fn is_layout(self) -> bool {
        matches!(self, VideoStorage::Frames | VideoStorage::Segments)
    }

    /// The reference's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            VideoStorage::Path => "path",
            VideoStorage::Bytes => "bytes",
            VideoStorage::Frames => "frames",
            VideoStorage::Segments => "segments",
        }
    }

    /// Parses the reference's spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "path" => Some(VideoStorage::Path),
            "bytes" => Some(VideoStorage::Bytes),
            "frames" => Some(VideoStorage::Frames),
            "segments" => Some(VideoStorage::Segments),
            _ => None,
        }
    }
}

/// A reference to a video: what a `Video` cell holds, and what an author may
/// yield to give a checksum or an extension along with the file or bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VideoRef {
    /// `path` or `bytes` (None on input: the feature decides).
    pub mode: Option<VideoStorage>,
    /// On input: the source file. On output: the staged file, resolved inside the cache.
    pub path: Option<PathBuf>,
    /// On output: the `path` cell exactly as the cache stores it (relative to
    /// `_assets/video/` or absolute, as the reference writes it); `None` on input.
    pub stored_path: Option<String>,
    /// Inline bytes.
    pub bytes: Option<Vec<u8>>,
    /// Lowercase extension with its dot, e.g. `.mp4`.
    pub extension: Option<String>,
    /// Media type, e.g. `video/mp4`.
    pub media_type: Option<String>,
    /// Size in bytes.
    pub size: Option<i64>,
    /// Checksum (the given one, else the sha256 hex of the content).
    pub checksum: Option<String>,
}

impl VideoRef {
    /// Input from a file.
    pub fn from_path(path: impl Into<PathBuf>) -> Self {
        VideoRef {
            path: Some(path.into()),
            ..Default::default()
        }
    }

    /// Input from bytes with their extension (e.g. `.mp4`).
    pub fn from_bytes(bytes: Vec<u8>, extension: Option<&str>) -> Self {
        VideoRef {
            bytes: Some(bytes),
            extension: extension.map(str::to_string),
            ..Default::default()
        }
    }

    /// Sets a known checksum (kept instead of computing one).
    pub fn with_checksum(mut self, checksum: impl Into<String>) -> Self {
        self.checksum = Some(checksum.into());
        self
    }

    /// The video's bytes: inline ones, else the file's content.
    ///
    /// # Errors
    /// [`crate::Error::Io`] when the file cannot be read; [`crate::Error::InvalidArgument`]
    /// when the reference has neither bytes nor a path.
    pub fn read_bytes(&self) -> crate::Result<Cow<'_, [u8]>> {
        if let Some(b) = &self.bytes {
            return Ok(Cow::Borrowed(b));
        }
        if let Some(p) = &self.path {
            return std::fs::read(p)
                .map(Cow::Owned)
                .map_err(|e| crate::Error::io("read", p, e));
        }
        Err(crate::Error::InvalidArgument(
            "video reference has neither bytes nor a path".into(),
        ))
    }
}
