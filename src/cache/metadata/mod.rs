//! `_metadata.json`: the reference's keys, in the reference's order, plus ours.
//!
//! A cache is complete exactly when its `_metadata.json` exists: the file is
//! written last, fsynced, and published with the directory by one rename.

use crate::storage::Storage;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value as J;

use crate::error::{Error, Result};

mod layouts;
pub use layouts::*;

/// The cache format version this build reads and writes.
pub const CACHE_FORMAT_VERSION: i64 = 1;

/// The cache format version of a cache that uses an extension of ours the
/// reference does not read (listed under `requires`): the reference reads
/// version 1 only, so it refuses such a cache instead of misreading it.
pub const CACHE_FORMAT_VERSION_EXTENDED: i64 = 2;

/// The extensions this version reads (`requires` of a version-2 cache).
pub const KNOWN_REQUIREMENTS: &[&str] = &["dedup"];
/// The metadata file name.
pub const METADATA_FILE: &str = "_metadata.json";
/// `layout` of Arrow IPC shard caches.
pub const LAYOUT_ARROW_SHARDS: &str = "arrow-shards";
/// `layout` of Lance row caches.
pub const LAYOUT_LANCE_ROWS: &str = "lance-rows";
/// `layout` of Lance frame caches.
pub const LAYOUT_LANCE_VIDEO_FRAMES: &str = "lance-video-frames";
/// `layout` of Lance video segment caches (ours; the reference does not read it).
pub const LAYOUT_LANCE_VIDEO_SEGMENTS: &str = "lance-video-segments";
/// The columns of a `lance-video-segments` dataset, in order: the six that
/// place and hold a segment, then its four quality measures.
pub const SEGMENT_COLUMNS: [&str; 10] = [
    "video_id",
    "segment_idx",
    "first_frame",
    "frame_count",
    "data",
    "packet_offsets",
    "psnr",
    "psnr_min",
    "ssim",
    "ssim_min",
];

/// The column of a `lance-video-segments` dataset after
/// [`SEGMENT_COLUMNS`], in caches whose metadata says `packet_frames`: the
/// frame each packet presents.
pub const SEGMENT_PACKET_FRAMES: &str = "packet_frames";

/// Who wrote a cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriterInfo {
    /// Always `shardset` for caches we write.
    pub name: String,
    /// The crate version.
    pub version: String,
}

impl WriterInfo {
    /// This build.
    pub fn current() -> Self {
        WriterInfo {
            name: env!("CARGO_PKG_NAME").to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// The keys every layout shares, read first to route and give good errors.
#[derive(Debug, Clone)]
pub struct CommonMetadata {
    /// Path of the metadata file.
    pub path: PathBuf,
    /// The whole document.
    pub raw: J,
    /// `format`.
    pub format: String,
    /// `layout`.
    pub layout: String,
}

impl CommonMetadata {
    /// `build_dir`: the metadata of a Lance-layout cache published to object
    /// storage by shardset 0.1's first publisher is a commit marker naming
    /// the committed build's own complete cache (`_builds/<id>`; today's
    /// publisher names a version of the dataset at the root instead, see
    /// `cache::remote`); `None` for any other.
    ///
    /// # Errors
    /// [`Error::Metadata`] for a `build_dir` that is not `_builds/<name>`.
    pub fn build_dir(&self) -> Result<Option<String>> {
        let Some(v) = self.raw.get("build_dir") else {
            return Ok(None);
        };
        let ok = v
            .as_str()
            .and_then(|s| s.strip_prefix(&format!("{BUILDS_DIR}/")))
            .is_some_and(|id| {
                !id.is_empty()
                    && id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            });
        if !ok {
            return Err(Error::metadata(
                &self.path,
                format!("build_dir {v} is not {BUILDS_DIR}/<build id>"),
            ));
        }
        Ok(v.as_str().map(str::to_string))
    }

    /// `num_rows`, when it is a count.
    pub fn num_rows(&self) -> Option<u64> {
        self.raw.get("num_rows").and_then(J::as_u64)
    }

    /// The whole document as a layout's metadata, after checking that it is
    /// that format and layout (`what` names it in the error).
    ///
    /// # Errors
    /// [`Error::Metadata`] for another format or layout, or a field of the wrong type.
    pub fn parse_as<T: serde::de::DeserializeOwned>(
        &self,
        format: &str,
        layout: &str,
        what: &str,
    ) -> Result<T> {
        if self.format != format || self.layout != layout {
            return Err(Error::metadata(
                &self.path,
                format!(
                    "not {what} (format={}, layout={})",
                    self.format, self.layout
                ),
            ));
        }
        serde_json::from_value(self.raw.clone())
            .map_err(|e| Error::metadata(&self.path, format!("unexpected field value: {e}")))
    }
}

/// Reads and minimally checks `<dir>/_metadata.json`.
///
/// # Errors
/// [`Error::Metadata`] when missing, unparsable, not an object or without
/// `format`/`layout`; [`Error::UnsupportedVersion`] for a version other than 1.
pub fn read_common(dir: &Path) -> Result<CommonMetadata> {
    read_common_in(crate::storage::storage_for(dir).as_ref(), dir)
}

/// [`read_common`] through `storage`.
///
/// # Errors
/// As [`read_common`].
pub fn read_common_in(storage: &dyn Storage, dir: &Path) -> Result<CommonMetadata> {
    let path = dir.join(METADATA_FILE);
    // A failed look (a misconfigured object store) is that error, not "absent".
    if !storage.stat(&path)?.is_some_and(|e| e.is_file()) {
        let reason = if storage.is_dir(dir) {
            "no _metadata.json: not a cache, or a build that never finished"
        } else {
            "the cache directory does not exist"
        };
        return Err(Error::metadata(&path, reason));
    }
    read_common_at(storage, &path)
}

/// Reads and minimally checks a metadata file at `path` (`_metadata.json`,
/// or a kept version's copy of it).
///
/// # Errors
/// As [`read_common`].
pub fn read_common_at(storage: &dyn Storage, path: &Path) -> Result<CommonMetadata> {
    let path = path.to_path_buf();
    let text = storage.read(&path)?;
    let raw: J = serde_json::from_slice(&text)
        .map_err(|e| Error::metadata(&path, format!("not valid JSON ({e})")))?;
    check_self_checksum(&text, &raw).map_err(|r| Error::metadata(&path, r))?;
    let obj = raw
        .as_object()
        .ok_or_else(|| Error::metadata(&path, "not a JSON object"))?;
    let version = obj
        .get("cache_format_version")
        .ok_or_else(|| Error::metadata(&path, "missing required 'cache_format_version'"))?;
    let version = version
        .as_i64()
        .ok_or_else(|| Error::metadata(&path, "'cache_format_version' is not an integer"))?;
    let extended = version == CACHE_FORMAT_VERSION_EXTENDED && {
        let req = obj.get("requires").and_then(J::as_array);
        req.is_some_and(|r| {
            r.iter()
                .all(|x| x.as_str().is_some_and(|x| KNOWN_REQUIREMENTS.contains(&x)))
        })
    };
    if version != CACHE_FORMAT_VERSION && !extended {
        return Err(Error::UnsupportedVersion {
            path,
            found: version,
        });
    }
    let get = |k: &str| -> Result<String> {
        obj.get(k)
            .ok_or_else(|| {
                Error::metadata(
                    &path,
                    format!("missing required '{k}'; rebuild the cache with a current writer"),
                )
            })?
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| Error::metadata(&path, format!("'{k}' is not a string")))
    };
    let format = get("format")?;
    let layout = get("layout")?;
    Ok(CommonMetadata {
        path,
        raw,
        format,
        layout,
    })
}

/// The prefix under which a cache published to object storage keeps each
/// build's files (`_builds/<build id>/...`); its `_metadata.json` names the
/// shards of the committed build with it.
pub const BUILDS_DIR: &str = "_builds";

/// A cache's `_metadata.json`, parsed and checked once: one variant per
/// layout. Everything that reads metadata goes through it; nothing outside
/// this module reads a raw key.
#[derive(Debug, Clone, PartialEq)]
// Parsed once per open and never moved in a loop: the variants' sizes do
// not matter, and boxing would only add a step to every key read.
#[allow(clippy::large_enum_variant)]
pub enum CacheMetadata {
    /// `arrow-shards`.
    ArrowShards(ArrowShardsMetadata),
    /// `lance-rows`.
    LanceRows(LanceRowsMetadata),
    /// `lance-video-frames`.
    VideoFrames(VideoFramesMetadata),
}

impl CacheMetadata {
    /// Reads, checks and parses the `_metadata.json` of the cache at `dir`
    /// (the self-checksum, the format version, the layout's own rules).
    ///
    /// # Errors
    /// [`Error::Metadata`] naming the file and the reason,
    /// [`Error::UnsupportedVersion`], [`Error::UnsupportedLayout`] for a
    /// layout this version does not know.
    pub fn read(dir: &Path) -> Result<Self> {
        Self::read_in(crate::storage::storage_for(dir).as_ref(), dir)
    }

    /// [`CacheMetadata::read`] through `storage`.
    ///
    /// # Errors
    /// As [`CacheMetadata::read`].
    pub fn read_in(storage: &dyn Storage, dir: &Path) -> Result<Self> {
        Self::from_common(storage, dir, read_common_in(storage, dir)?)
    }

    /// Reads the metadata file at `path` as that of the cache at `dir` (a
    /// kept version's metadata: see [`crate::cache::versions`]).
    ///
    /// # Errors
    /// As [`CacheMetadata::read`].
    pub fn read_at(storage: &dyn Storage, dir: &Path, path: &Path) -> Result<Self> {
        Self::from_common(storage, dir, read_common_at(storage, path)?)
    }

    /// The layout's metadata from its already read common part (what
    /// [`CacheMetadata::read_in`] does after reading).
    ///
    /// # Errors
    /// As [`CacheMetadata::read`].
    pub fn from_common(storage: &dyn Storage, dir: &Path, common: CommonMetadata) -> Result<Self> {
        Ok(match common.layout.as_str() {
            LAYOUT_ARROW_SHARDS => {
                CacheMetadata::ArrowShards(ArrowShardsMetadata::from_common(storage, dir, &common)?)
            }
            LAYOUT_LANCE_ROWS => {
                CacheMetadata::LanceRows(LanceRowsMetadata::from_common(dir, &common)?)
            }
            LAYOUT_LANCE_VIDEO_FRAMES | LAYOUT_LANCE_VIDEO_SEGMENTS => {
                CacheMetadata::VideoFrames(VideoFramesMetadata::from_common(dir, &common)?)
            }
            other => {
                return Err(Error::UnsupportedLayout {
                    path: dir.to_path_buf(),
                    layout: other.to_string(),
                    hint: String::new(),
                })
            }
        })
    }

    /// The layout name.
    pub fn layout(&self) -> &'static str {
        match self {
            CacheMetadata::ArrowShards(_) => LAYOUT_ARROW_SHARDS,
            CacheMetadata::LanceRows(_) => LAYOUT_LANCE_ROWS,
            CacheMetadata::VideoFrames(m) if m.segments.is_some() => LAYOUT_LANCE_VIDEO_SEGMENTS,
            CacheMetadata::VideoFrames(_) => LAYOUT_LANCE_VIDEO_FRAMES,
        }
    }

    /// The `format` key (`arrow` or `lance`).
    pub fn format(&self) -> &str {
        match self {
            CacheMetadata::ArrowShards(m) => &m.format,
            CacheMetadata::LanceRows(m) => &m.format,
            CacheMetadata::VideoFrames(m) => &m.format,
        }
    }

    /// Rows (frames, for a frames cache).
    pub fn num_rows(&self) -> u64 {
        match self {
            CacheMetadata::ArrowShards(m) => m.num_rows,
            CacheMetadata::LanceRows(m) => m.num_rows,
            CacheMetadata::VideoFrames(m) => m.num_rows,
        }
    }

    /// The schema fingerprint (empty when the writer recorded none).
    pub fn schema_fingerprint(&self) -> &str {
        match self {
            CacheMetadata::ArrowShards(m) => &m.schema_fingerprint,
            CacheMetadata::LanceRows(m) => &m.schema_fingerprint,
            CacheMetadata::VideoFrames(m) => &m.schema_fingerprint,
        }
    }

    /// The features' description, when the writer recorded it.
    pub fn features(&self) -> Option<&J> {
        match self {
            CacheMetadata::ArrowShards(m) => m.features.as_ref(),
            CacheMetadata::LanceRows(m) => m.features.as_ref(),
            CacheMetadata::VideoFrames(m) => m.features.as_ref(),
        }
    }

    /// The stamps of the sources a builder declared.
    pub fn sources(&self) -> Option<&J> {
        match self {
            CacheMetadata::ArrowShards(m) => m.sources.as_ref(),
            CacheMetadata::LanceRows(m) => m.sources.as_ref(),
            CacheMetadata::VideoFrames(m) => m.sources.as_ref(),
        }
    }

    /// The builder config (name and parameters).
    pub fn config(&self) -> Option<&J> {
        match self {
            CacheMetadata::ArrowShards(m) => m.config.as_ref(),
            CacheMetadata::LanceRows(m) => m.config.as_ref(),
            CacheMetadata::VideoFrames(_) => None,
        }
    }

    /// The writer, when recorded (not by the reference).
    pub fn writer(&self) -> Option<&WriterInfo> {
        match self {
            CacheMetadata::ArrowShards(m) => m.writer.as_ref(),
            CacheMetadata::LanceRows(m) => m.writer.as_ref(),
            CacheMetadata::VideoFrames(m) => m.writer.as_ref(),
        }
    }

    /// The build id stamped into the shards (Arrow caches we wrote).
    pub fn build_id(&self) -> Option<&str> {
        match self {
            CacheMetadata::ArrowShards(m) => m.build_id.as_deref(),
            _ => None,
        }
    }

    /// Whether the file carries its own checksum (`metadata_xxh64`).
    pub fn has_self_checksum(&self) -> bool {
        match self {
            CacheMetadata::ArrowShards(m) => m.metadata_xxh64.is_some(),
            CacheMetadata::LanceRows(m) => m.metadata_xxh64.is_some(),
            CacheMetadata::VideoFrames(m) => m.metadata_xxh64.is_some(),
        }
    }

    /// The Arrow layout's metadata, if this is an Arrow cache.
    pub fn as_arrow_shards(&self) -> Option<&ArrowShardsMetadata> {
        match self {
            CacheMetadata::ArrowShards(m) => Some(m),
            _ => None,
        }
    }

    /// The frames layout's metadata, if this is a frames cache.
    pub fn as_video_frames(&self) -> Option<&VideoFramesMetadata> {
        match self {
            CacheMetadata::VideoFrames(m) => Some(m),
            _ => None,
        }
    }

    /// The metadata as JSON, keys in the file's order (for display).
    pub fn to_json(&self) -> J {
        let v = match self {
            CacheMetadata::ArrowShards(m) => serde_json::to_value(m),
            CacheMetadata::LanceRows(m) => serde_json::to_value(m),
            CacheMetadata::VideoFrames(m) => serde_json::to_value(m),
        };
        v.unwrap_or(J::Null)
    }
}

/// The key of the metadata's self-checksum.
pub const SELF_CHECKSUM_KEY: &str = "metadata_xxh64";
const ZERO16: &str = "0000000000000000";

fn self_checksum_span(bytes: &[u8]) -> Option<usize> {
    let needle = format!("\"{SELF_CHECKSUM_KEY}\": \"");
    let n = needle.as_bytes();
    let pos = bytes.windows(n.len()).rposition(|w| w == n)?;
    let start = pos + n.len();
    (start + 16 <= bytes.len()).then_some(start)
}

/// Checks the self-checksum of metadata bytes, if they carry one.
///
/// # Errors
/// A reason string when the checksum does not match.
pub fn check_self_checksum(bytes: &[u8], doc: &J) -> std::result::Result<(), String> {
    let Some(recorded) = doc.get(SELF_CHECKSUM_KEY) else {
        return Ok(());
    };
    let recorded = recorded.as_str().ok_or("metadata_xxh64 is not a string")?;
    let start = self_checksum_span(bytes).ok_or("metadata_xxh64 is not where it should be")?;
    let mut copy = bytes.to_vec();
    copy[start..start + 16].copy_from_slice(ZERO16.as_bytes());
    let got = format!("{:016x}", xxhash_rust::xxh64::xxh64(&copy, 0));
    if got != recorded {
        return Err(format!(
            "checksum mismatch (recorded {recorded}, computed {got}): the file was edited or is corrupt"
        ));
    }
    Ok(())
}

/// Writes any metadata document with `metadata_xxh64` as its last key,
/// atomically and durably.
///
/// # Errors
/// [`Error::Io`] naming the file.
pub fn write_json_checksummed(
    storage: &dyn Storage,
    path: &Path,
    doc: &impl Serialize,
) -> Result<()> {
    let bytes = json_checksummed(path, doc)?;
    storage.write_atomic(path, &bytes)
}

/// The bytes [`write_json_checksummed`] writes: `doc` as pretty JSON with
/// `metadata_xxh64` as its last key.
///
/// # Errors
/// [`Error::Metadata`] naming `path` when `doc` is not a JSON object.
pub fn json_checksummed(path: &Path, doc: &impl Serialize) -> Result<Vec<u8>> {
    let mut v = serde_json::to_value(doc)
        .map_err(|e| Error::metadata(path, format!("cannot serialise: {e}")))?;
    let obj = v
        .as_object_mut()
        .ok_or_else(|| Error::metadata(path, "metadata must be an object"))?;
    obj.remove(SELF_CHECKSUM_KEY);
    obj.insert(SELF_CHECKSUM_KEY.to_string(), J::String(ZERO16.to_string()));
    let mut bytes = serde_json::to_vec_pretty(&v)
        .map_err(|e| Error::metadata(path, format!("cannot serialise: {e}")))?;
    let start = self_checksum_span(&bytes)
        .ok_or_else(|| Error::metadata(path, "self-checksum placeholder missing"))?;
    let sum = format!("{:016x}", xxhash_rust::xxh64::xxh64(&bytes, 0));
    bytes[start..start + 16].copy_from_slice(sum.as_bytes());
    Ok(bytes)
}
