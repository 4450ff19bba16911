//! The one error type of the crate.
//!
//! Every failure that touches the file system names the path; every failure
//! caused by an example names the column and the row. Nothing in the library
//! panics on bad input: a corrupt shard, an edited `_metadata.json` or a wrong
//! dtype all come back as one of these variants.

use std::path::{Path, PathBuf};

/// Boxed error produced by a dataset author's generator.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result alias used throughout shardset.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in shardset.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done ("open", "write", "rename", ...).
        op: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// `_metadata.json` is missing, unparsable or inconsistent.
    #[error("bad cache metadata {path}: {reason}")]
    Metadata {
        /// Path of the metadata file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// The cache was written with a format version this build does not read.
    #[error("unsupported cache format version {found} in {path} (this build reads version 1); rebuild the cache")]
    UnsupportedVersion {
        /// Path of the metadata file.
        path: PathBuf,
        /// The version found.
        found: i64,
    },

    /// The cache's layout is unknown or not implemented by this build.
    #[error("cache {path} has layout '{layout}', which this build cannot read{hint}")]
    UnsupportedLayout {
        /// The cache directory.
        path: PathBuf,
        /// The layout named in its metadata.
        layout: String,
        /// Extra guidance (may be empty).
        hint: String,
    },

    /// A shard listed in the metadata is not on disk.
    #[error("missing shard file {path}")]
    MissingShard {
        /// The expected shard path.
        path: PathBuf,
    },

    /// A shard file exists but cannot be read as the metadata says it should.
    #[error("corrupt shard {path}: {reason}")]
    CorruptShard {
        /// The shard path.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// A row read with `verify_on_read` does not match its stored checksum:
    /// its bytes changed on disk after the cache was written.
    #[error("row {row} (row {local} of {path}) does not match its stored checksum{}; the data changed after the cache was written", columns_named(.columns))]
    ChecksumMismatch {
        /// The shard file.
        path: PathBuf,
        /// The row in the cache.
        row: u64,
        /// The row in the shard.
        local: u64,
        /// The columns whose bytes changed (empty when the cache records no
        /// column checksums, or they cannot tell).
        columns: Vec<String>,
    },

    /// A download failed from every URL it may come from.
    #[error("could not download {path}: {}", .failures.join("; "))]
    Download {
        /// The local file it was to become.
        path: PathBuf,
        /// Each URL tried, with why it failed, in the order tried.
        failures: Vec<String>,
    },

    /// A downloaded file's checksum is not the one declared (the partial
    /// file is deleted).
    #[error("checksum mismatch for {url} (to {path}): expected {expected}, got {got}")]
    DownloadChecksum {
        /// The local file it was to become.
        path: PathBuf,
        /// The URL that served it.
        url: String,
        /// `algo:hex` declared.
        expected: String,
        /// `algo:hex` of the bytes received.
        got: String,
    },

    /// An in-memory open of a cache larger than the memory it may take.
    #[error("cache {path} takes {needed} bytes in memory, more than {:.0}% of the {available} bytes available; open it mapped (without in_memory), allow the fallback to maps, or raise the memory fraction", .fraction * 100.0)]
    OutOfMemory {
        /// The cache directory.
        path: PathBuf,
        /// Bytes the cache would take in memory.
        needed: u64,
        /// Bytes of memory available at open.
        available: u64,
        /// The share of `available` it may take.
        fraction: f64,
    },

    /// A decode a cache asks for is larger than the read's limits allow
    /// (an image or frame of too many pixels, a window of too many frames).
    #[error("{what}: above the limit of {limit} ({setting}); if the cache is trusted, raise the limit (OpenOptions::with_decode_limits, or open_cache({setting}=...))")]
    LimitExceeded {
        /// What was asked for.
        what: String,
        /// The limit.
        limit: u64,
        /// The setting that holds it.
        setting: &'static str,
    },

    /// A commit of staged edits found the cache at another version than the
    /// one the edits were staged on.
    #[error("cache {path} is at version {found}, but these edits were staged on version {expected}; nothing was written: stage them again on the current version")]
    EditConflict {
        /// The cache directory.
        path: PathBuf,
        /// The version the edits were staged on.
        expected: u64,
        /// The version the cache is at.
        found: u64,
    },

    /// The features the caller expects do not match those the cache was built with.
    #[error("schema fingerprint mismatch for {path}: cache has {found}, expected {expected}{detail}. Delete the cache or bump the builder's VERSION (or rebuild)")]
    SchemaMismatch {
        /// The cache directory.
        path: PathBuf,
        /// The fingerprint the caller's features produce.
        expected: String,
        /// The fingerprint stored in the cache.
        found: String,
        /// What differs, when known (starts with "; ").
        detail: String,
    },

    /// A value of an example does not fit its feature.
    #[error("cannot encode column '{column}' of example {row}: {reason}")]
    Encode {
        /// The feature (column) name.
        column: String,
        /// The example's position in the generator's output.
        row: u64,
        /// Why it does not fit.
        reason: String,
    },

    /// A stored cell could not be decoded (e.g. corrupt image bytes).
    #[error("cannot decode column '{column}': {reason}")]
    Decode {
        /// The feature (column) name.
        column: String,
        /// Why.
        reason: String,
    },

    /// A video file FFmpeg cannot open or decode, or a frame that does not decode.
    #[error("cannot read video {path}: {reason}")]
    Video {
        /// The video file (or the cache holding the frame).
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },

    /// The features definition itself is invalid.
    #[error("invalid feature definition: {0}")]
    InvalidFeature(String),

    /// An argument is out of its domain (bad option, bad range).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A row index is outside the dataset.
    #[error("index {index} out of range for dataset of length {len}")]
    IndexOutOfRange {
        /// The index asked for (as given, possibly negative).
        index: i64,
        /// The number of rows.
        len: u64,
    },

    /// The author's generator returned an error; nothing was published.
    #[error("generator failed after {rows} examples: {source}")]
    Generator {
        /// Examples successfully received before the failure.
        rows: u64,
        /// The generator's error.
        #[source]
        source: BoxError,
    },

    /// A worker thread panicked; nothing was published.
    #[error("{what} panicked: {message}")]
    Panic {
        /// Which stage.
        what: &'static str,
        /// The panic payload, when it is a string.
        message: String,
    },

    /// An input file of a ready-made source (image folder, JSON lines, CSV)
    /// is missing, empty or holds data that does not fit.
    #[error("{path}{location}: {reason}")]
    Input {
        /// The file or directory.
        path: PathBuf,
        /// Where in it, e.g. `:7` for line 7 (may be empty).
        location: String,
        /// What is wrong, and how to fix it when the user can.
        reason: String,
    },

    /// An Arrow operation failed.
    #[error("arrow error{}: {source}", path.as_ref().map(|p| format!(" in {}", p.display())).unwrap_or_default())]
    Arrow {
        /// The file involved, when known.
        path: Option<PathBuf>,
        /// The underlying error.
        #[source]
        source: arrow_schema::ArrowError,
    },
}

impl Error {
    pub(crate) fn io(op: &'static str, path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.as_ref().to_path_buf(),
            source,
        }
    }

    pub(crate) fn metadata(path: impl AsRef<Path>, reason: impl Into<String>) -> Self {
        Error::Metadata {
            path: path.as_ref().to_path_buf(),
            reason: reason.into(),
        }
    }

    pub(crate) fn corrupt(path: impl AsRef<Path>, reason: impl Into<String>) -> Self {
        Error::CorruptShard {
            path: path.as_ref().to_path_buf(),
            reason: reason.into(),
        }
    }

    pub(crate) fn arrow(path: Option<&Path>, source: arrow_schema::ArrowError) -> Self {
        Error::Arrow {
            path: path.map(Path::to_path_buf),
            source,
        }
    }

    pub(crate) fn input(
        path: impl AsRef<Path>,
        line: Option<u64>,
        reason: impl Into<String>,
    ) -> Self {
        Error::Input {
            path: path.as_ref().to_path_buf(),
            location: line.map(|l| format!(":{l}")).unwrap_or_default(),
            reason: reason.into(),
        }
    }

    pub(crate) fn encode(column: &str, row: u64, reason: impl Into<String>) -> Self {
        Error::Encode {
            column: column.to_string(),
            row,
            reason: reason.into(),
        }
    }

    pub(crate) fn decode(column: &str, reason: impl Into<String>) -> Self {
        Error::Decode {
            column: column.to_string(),
            reason: reason.into(),
        }
    }

    pub(crate) fn from_panic(what: &'static str, payload: Box<dyn std::any::Any + Send>) -> Self {
        let message = if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "non-string panic payload".to_string()
        };
        Error::Panic { what, message }
    }
}

fn columns_named(columns: &[String]) -> String {
    match columns.len() {
        0 => String::new(),
        1 => format!(" in column '{}'", columns[0]),
        _ => format!(" in columns '{}'", columns.join("', '")),
    }
}
