//! The metadata of each layout: its keys (the reference's first, in its
//! order, then ours), and the checks each layout's metadata must pass.

use crate::storage::Storage;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value as J;

use super::{CommonMetadata, WriterInfo};
use super::{
    LAYOUT_ARROW_SHARDS, LAYOUT_LANCE_ROWS, LAYOUT_LANCE_VIDEO_FRAMES, LAYOUT_LANCE_VIDEO_SEGMENTS,
};
use crate::error::{Error, Result};

/// Metadata of a `lance-rows` cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LanceRowsMetadata {
    /// Always 1.
    pub cache_format_version: i64,
    /// `lance`.
    pub format: String,
    /// `lance-rows`.
    pub layout: String,
    /// First 16 hex of sha256 of the features' Python repr.
    #[serde(default)]
    pub schema_fingerprint: String,
    /// Total rows.
    pub num_rows: u64,
    /// Provenance (reference key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage: Option<J>,
    /// Ours: rows per Lance fragment, in fragment order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fragment_row_counts: Option<Vec<u64>>,
    /// Ours: the Lance data storage version written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_storage_version: Option<String>,
    /// Ours: the compression asked of Lance for every column (`zstd`,
    /// `lz4` or `none`; absent: Lance's own choice per block).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<String>,
    /// Ours: the zstd level asked of Lance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression_level: Option<i32>,
    /// Ours: self-describing features.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<J>,
    /// Ours: stamps of the sources a builder declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<J>,
    /// Ours: the builder config (name and parameters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<J>,
    /// Ours: the writer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<WriterInfo>,
    /// Ours: the Lance version (of the dataset's own history) this cache
    /// version reads; absent: the latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lance_version: Option<u64>,
    /// Ours: the version an edit committed (absent for a build, version 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<crate::cache::versions::VersionInfo>,
    /// Ours: the self-checksum (always last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_xxh64: Option<String>,
}

impl LanceRowsMetadata {
    /// Parses and checks the metadata of a `lance-rows` cache (and that the
    /// Lance dataset's manifest directory is there).
    ///
    /// # Errors
    /// [`Error::Metadata`] for wrong keys or counts; [`Error::MissingShard`]
    /// when the Lance dataset is missing.
    pub fn from_common(dir: &Path, common: &CommonMetadata) -> Result<Self> {
        let m: LanceRowsMetadata =
            common.parse_as("lance", LAYOUT_LANCE_ROWS, "a Lance rows cache")?;
        check_lance_dataset(
            dir,
            &common.path,
            m.fragment_row_counts.as_deref(),
            m.num_rows,
        )?;
        Ok(m)
    }
}

/// One video of a `lance-video-frames` cache (reference keys, in order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VideoEntry {
    /// Position of the example in the generator (gaps where videos were skipped).
    pub id: i64,
    /// The example's key.
    #[serde(default)]
    pub key: J,
    /// The source file (for inline bytes: `<sha256><ext>`, an identifier only).
    #[serde(default)]
    pub path: Option<String>,
    /// The given checksum, else the sha256 hex of the source.
    #[serde(default)]
    pub checksum: Option<String>,
    /// Frames stored.
    #[serde(rename = "T")]
    pub t: u64,
    /// Stored frame height.
    #[serde(rename = "H")]
    pub h: u64,
    /// Stored frame width.
    #[serde(rename = "W")]
    pub w: u64,
    /// Row of the video's first frame.
    pub start_row: u64,
    /// The example's other scalar fields.
    #[serde(default)]
    pub metadata: serde_json::Map<String, J>,
}

/// Metadata of a `lance-video-frames` cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VideoFramesMetadata {
    /// Always 1.
    pub cache_format_version: i64,
    /// `lance`.
    pub format: String,
    /// `lance-video-frames`.
    pub layout: String,
    /// First 16 hex of sha256 of the features' Python repr.
    #[serde(default)]
    pub schema_fingerprint: String,
    /// Total frames (rows).
    pub num_rows: u64,
    /// Total frames (rows), again (reference key).
    #[serde(default)]
    pub total_rows: u64,
    /// Videos stored.
    pub n_videos: u64,
    /// Videos skipped as unreadable.
    #[serde(default)]
    pub n_skipped: u64,
    /// `webp`.
    pub encoding: String,
    /// WebP quality.
    pub quality: J,
    /// The resize asked for (null: none).
    #[serde(default)]
    pub resize: Option<u64>,
    /// The video column of the source features.
    pub video_column: String,
    /// The videos, in row order.
    pub videos: Vec<VideoEntry>,
    /// Provenance (reference key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage: Option<J>,
    /// Ours: `square` (the reference's rule) or `shorter_side`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resize_mode: Option<crate::video::ResizeMode>,
    /// Ours: the WebP method (effort 0..=6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webp_method: Option<u8>,
    /// Ours: what the WebP encoder was given, `rgb` (as the reference) or `yuv`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webp_input: Option<crate::video::WebpInput>,
    /// Ours: why each skipped video was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<Vec<J>>,
    /// Ours: the codec and what it cost, for a `lance-video-segments`
    /// cache (whose `start_row` of a video is its first segment's row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<SegmentsInfo>,
    /// Ours: the stamp of the input files (as library builds record it), to
    /// tell a stale cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<J>,
    /// Ours: rows per Lance fragment, in fragment order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fragment_row_counts: Option<Vec<u64>>,
    /// Ours: the Lance version (of the dataset's own history) this cache
    /// reads (a cache published to object storage names its build's
    /// version); absent: the latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lance_version: Option<u64>,
    /// Ours: self-describing source features.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<J>,
    /// Ours: the writer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<WriterInfo>,
    /// Ours: the self-checksum (always last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_xxh64: Option<String>,
}

/// How a `lance-video-segments` cache was encoded, and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentsInfo {
    /// `h264` or `av1`.
    pub codec: String,
    /// The FFmpeg encoder (`libx264`, `libsvtav1`).
    pub encoder: String,
    /// The FFmpeg codec library that encoded.
    pub encoder_version: String,
    /// Constant rate factor.
    pub crf: u32,
    /// The encoder's speed preset.
    pub preset: String,
    /// The encoder's tuning (x264 `--tune`, SVT-AV1 `tune`); absent: the
    /// encoder's own default (caches written before it was recorded used
    /// that).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tune: String,
    /// More of the encoder's own parameters, `key=value` joined by `:`
    /// (x264's `x264-params`, SVT-AV1's `svtav1-params`, after the
    /// layout's own); absent: none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub encoder_params: String,
    /// Frames per segment (the last of a video may have fewer).
    pub frames_per_segment: u32,
    /// Every segment is a closed group of pictures starting with a keyframe.
    pub closed_gop: bool,
    /// Scene-cut keyframes (always off: keyframes only at segment starts).
    pub scene_cut: bool,
    /// Pixel format of the coded frames (`yuv420p`).
    pub pixel_format: String,
    /// Codec extradata, base64 (empty: parameter sets are in the stream).
    pub extradata: String,
    /// Frame width when every video has the same.
    pub width: Option<u64>,
    /// Frame height when every video has the same.
    pub height: Option<u64>,
    /// Segments stored (Lance rows).
    pub num_segments: u64,
    /// The cost of the encoding, measured at build time.
    pub quality: SegmentQuality,
    /// The rows have a `packet_frames` column: the frame each packet
    /// presents (absent from caches written before it existed, whose
    /// windows decode every packet from the keyframe; a window read with
    /// it decodes only what the window's frames need).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub packet_frames: bool,
}

/// Quality of a segments cache's frames against their source frames.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentQuality {
    /// What `psnr_*` measure.
    pub psnr: String,
    /// What `ssim_*` measure.
    pub ssim: String,
    /// Mean PSNR over every frame (dB).
    pub psnr_mean: f64,
    /// Lowest PSNR of a frame (dB).
    pub psnr_min: f64,
    /// Mean SSIM over every frame.
    pub ssim_mean: f64,
    /// Lowest SSIM of a frame.
    pub ssim_min: f64,
}

impl VideoFramesMetadata {
    /// Whether this is a `lance-video-segments` cache.
    pub fn is_segments(&self) -> bool {
        self.segments.is_some()
    }

    /// Lance rows of the video at `v` (frames, or segments).
    pub fn rows_of(&self, v: &VideoEntry) -> u64 {
        match &self.segments {
            Some(s) => v.t.div_ceil(u64::from(s.frames_per_segment.max(1))),
            None => v.t,
        }
    }

    /// Parses and checks the metadata of a `lance-video-frames` or
    /// `lance-video-segments` cache.
    ///
    /// # Errors
    /// [`Error::Metadata`] for wrong keys, no videos, or frame counts that do
    /// not add up; [`Error::MissingShard`] when the Lance dataset is missing.
    pub fn from_common(dir: &Path, common: &CommonMetadata) -> Result<Self> {
        let path = &common.path;
        let segments = common.layout == LAYOUT_LANCE_VIDEO_SEGMENTS;
        let m: VideoFramesMetadata = if segments {
            common.parse_as(
                "lance",
                LAYOUT_LANCE_VIDEO_SEGMENTS,
                "a Lance video segments cache",
            )?
        } else {
            common.parse_as(
                "lance",
                LAYOUT_LANCE_VIDEO_FRAMES,
                "a Lance video frames cache",
            )?
        };
        if m.videos.is_empty() {
            return Err(Error::metadata(path, "no videos recorded"));
        }
        if segments {
            let s = m.segments.as_ref().ok_or_else(|| {
                Error::metadata(path, "a segments cache without its 'segments' description")
            })?;
            if s.frames_per_segment == 0 || !matches!(s.codec.as_str(), "h264" | "av1") {
                return Err(Error::metadata(
                    path,
                    format!(
                        "segments of {} frames in codec '{}' (expected at least 1 frame, h264 or av1)",
                        s.frames_per_segment, s.codec
                    ),
                ));
            }
        } else if m.segments.is_some() {
            return Err(Error::metadata(
                path,
                "a frames cache with a 'segments' description",
            ));
        }
        let mut row = 0u64;
        let mut lance_rows = 0u64;
        for v in &m.videos {
            // WebP holds at most 16383 pixels a side: a larger size is damage,
            // and readers size their frame buffers from it.
            if v.h > WEBP_MAX_SIDE || v.w > WEBP_MAX_SIDE {
                return Err(Error::metadata(
                    path,
                    format!(
                        "video {} is {}x{} (W x H); WebP frames are at most {WEBP_MAX_SIDE} a side",
                        v.id, v.w, v.h
                    ),
                ));
            }
            if v.start_row != lance_rows || v.t == 0 || v.h == 0 || v.w == 0 {
                return Err(Error::metadata(
                    path,
                    format!(
                        "video {} starts at row {} with T={} H={} W={}; expected start {lance_rows} and non-zero sizes",
                        v.id, v.start_row, v.t, v.h, v.w
                    ),
                ));
            }
            let overflow = || {
                Error::metadata(
                    path,
                    format!("video {} has T={}: the frame count overflows", v.id, v.t),
                )
            };
            lance_rows = lance_rows.checked_add(m.rows_of(v)).ok_or_else(overflow)?;
            row = row.checked_add(v.t).ok_or_else(overflow)?;
        }
        if row != m.num_rows || m.n_videos != m.videos.len() as u64 {
            return Err(Error::metadata(
                path,
                format!(
                    "{} videos of {row} frames, but n_videos is {} and num_rows {}",
                    m.videos.len(),
                    m.n_videos,
                    m.num_rows
                ),
            ));
        }
        if let Some(s) = &m.segments {
            if s.num_segments != lance_rows {
                return Err(Error::metadata(
                    path,
                    format!(
                        "{} segments recorded, but the videos' frame counts make {lance_rows}",
                        s.num_segments
                    ),
                ));
            }
        }
        check_lance_dataset(dir, path, m.fragment_row_counts.as_deref(), lance_rows)?;
        Ok(m)
    }
}

/// The largest width or height of a WebP frame.
pub const WEBP_MAX_SIDE: u64 = 16383;

/// IPC buffer compression of `arrow-shards` shards. One spelling
/// everywhere: `none`, `lz4`, `zstd` (CLI flags, `FromStr`, serde, the
/// manifest); in `_metadata.json` the key is absent when uncompressed, as the
/// reference writes it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// Uncompressed: shards are memory-mapped and read zero-copy (default).
    #[default]
    None,
    /// LZ4 frame.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl Compression {
    /// The name: `none`, `lz4` or `zstd`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// The metadata spelling (`None` for uncompressed: the key is absent).
    pub fn as_metadata(self) -> Option<&'static str> {
        match self {
            Compression::None => None,
            c => Some(c.name()),
        }
    }

    /// True when uncompressed.
    pub fn is_none(&self) -> bool {
        *self == Compression::None
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Compression {
    type Err = Error;

    /// Parses `none`, `lz4` or `zstd` (any case).
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(Compression::None),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd),
            _ => Err(Error::InvalidArgument(format!(
                "compression must be none, lz4 or zstd, got '{s}'"
            ))),
        }
    }
}

/// `compression` in `_metadata.json`: absent or null when uncompressed.
mod compression_key {
    use super::Compression;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(c: &Compression, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(c.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Compression, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(Compression::None),
            Some(s) => match s.as_str() {
                "lz4" => Ok(Compression::Lz4),
                "zstd" => Ok(Compression::Zstd),
                _ => Err(serde::de::Error::custom(format!(
                    "unknown compression '{s}' (zstd or lz4)"
                ))),
            },
        }
    }
}

/// Metadata of an `arrow-shards` cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArrowShardsMetadata {
    /// Always 1.
    pub cache_format_version: i64,
    /// `arrow`.
    pub format: String,
    /// `arrow-shards`.
    pub layout: String,
    /// First 16 hex of sha256 of the features' Python repr.
    #[serde(default)]
    pub schema_fingerprint: String,
    /// Total rows.
    pub num_rows: u64,
    /// Number of shard files.
    pub num_shards: u64,
    /// Rows per shard.
    pub shard_row_counts: Vec<u64>,
    /// `shard-NNNNN.arrow` names.
    pub shard_filenames: Vec<String>,
    /// The byte budget (null when unbounded).
    #[serde(default)]
    pub shard_size_target_bytes: Option<u64>,
    /// `zstd` or `lz4`, absent when uncompressed.
    #[serde(
        default,
        skip_serializing_if = "Compression::is_none",
        with = "compression_key"
    )]
    pub compression: Compression,
    /// Ours: the zstd level the shards were compressed at (absent for lz4,
    /// which has none, and when uncompressed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression_level: Option<i32>,
    /// Provenance of derived caches (reference key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage: Option<J>,
    /// Ours: size in bytes of each shard file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_num_bytes: Option<Vec<u64>>,
    /// Ours: xxh64 (16 hex chars) of each shard file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_xxh64: Option<Vec<String>>,
    /// Ours: rows per IPC record batch when written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<u64>,
    /// Ours: self-describing features (see `features::describe`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<J>,
    /// Ours: stamps of the sources a builder declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<J>,
    /// Ours: the builder config (name and parameters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<J>,
    /// Ours: the writer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<WriterInfo>,
    /// Ours: an id stamped into every shard's footer, so a reader can tell
    /// shards of a replaced cache from its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
    /// Ours: `true` when `_row_xxh64/` holds one checksum per row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_checksums: Option<bool>,
    /// Ours: what a reader must know to read this cache (with
    /// `cache_format_version` 2): `dedup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires: Option<Vec<String>>,
    /// Ours: large repeated cells stored once (see
    /// `layouts::arrow_shards::dedup`); absent when none were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup: Option<DedupInfo>,
    /// Ours: the version an edit committed (absent for a build, version 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<crate::cache::versions::VersionInfo>,
    /// Ours, always last: xxh64 of this file's bytes with these 16 hex digits
    /// zeroed, so that any changed byte of the metadata is detected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_xxh64: Option<String>,
}

/// The `dedup` key of an `arrow-shards` cache whose repeated cells are stored once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DedupInfo {
    /// Cells of at least this many bytes were deduped.
    pub threshold_bytes: u64,
    /// The content key: `xxh3-128` (with the length and the column).
    pub hash: String,
    /// The columns dedup applied to.
    pub columns: Vec<String>,
    /// Refs (deduped cells) per shard, in shard order.
    pub shard_refs: Vec<u64>,
    /// Deduped cells in all.
    pub cells: u64,
    /// Bytes those cells did not take.
    pub bytes_saved: u64,
}

/// Checks a Lance cache's recorded fragment row counts against `num_rows`
/// and that its dataset's manifest directory is there.
///
/// # Errors
/// [`Error::Metadata`] naming `path`; [`Error::MissingShard`] for `_versions`.
fn check_lance_dataset(
    dir: &Path,
    path: &Path,
    fragments: Option<&[u64]>,
    num_rows: u64,
) -> Result<()> {
    if let Some(c) = fragments {
        let sum: u64 = c.iter().sum();
        if sum != num_rows {
            return Err(Error::metadata(
                path,
                format!("fragment row counts add up to {sum}, but num_rows is {num_rows}"),
            ));
        }
    }
    let versions = dir.join("_versions");
    if !crate::storage::storage_for(&versions).is_dir(&versions) {
        return Err(Error::MissingShard { path: versions });
    }
    Ok(())
}

fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains('\\')
        && !name.contains('\0')
}

/// A shard name inside the cache: a plain file name, or one under the
/// build prefix of a cache published to object storage
/// (`_builds/<build>/shard-00000.arrow`, see [`crate::cache::remote`]);
/// never `..`, an absolute path or an empty component.
fn safe_shard_name(name: &str) -> bool {
    match name.split('/').collect::<Vec<_>>()[..] {
        [plain] => safe_name(plain),
        [prefix, build, plain] => {
            prefix == crate::cache::metadata::BUILDS_DIR && safe_name(build) && safe_name(plain)
        }
        _ => false,
    }
}

impl ArrowShardsMetadata {
    /// Parses and validates the metadata of an `arrow-shards` cache, and
    /// checks that every shard file is present (and of the recorded size,
    /// when sizes are recorded).
    ///
    /// # Errors
    /// [`Error::Metadata`] for wrong keys or counts that do not add up,
    /// [`Error::MissingShard`] for an absent file, [`Error::CorruptShard`]
    /// for a file of the wrong size.
    pub fn from_common(storage: &dyn Storage, dir: &Path, common: &CommonMetadata) -> Result<Self> {
        let path = &common.path;
        let m: ArrowShardsMetadata =
            common.parse_as("arrow", LAYOUT_ARROW_SHARDS, "an Arrow sharded cache")?;
        m.validate(storage, dir, path)?;
        Ok(m)
    }

    fn validate(&self, storage: &dyn Storage, dir: &Path, path: &Path) -> Result<()> {
        let n = self.num_shards as usize;
        if self.shard_filenames.len() != n || self.shard_row_counts.len() != n {
            return Err(Error::metadata(
                path,
                format!(
                    "num_shards is {n} but there are {} filenames and {} row counts",
                    self.shard_filenames.len(),
                    self.shard_row_counts.len()
                ),
            ));
        }
        let sum: u64 = self.shard_row_counts.iter().sum();
        if sum != self.num_rows {
            return Err(Error::metadata(
                path,
                format!(
                    "shard row counts add up to {sum}, but num_rows is {}",
                    self.num_rows
                ),
            ));
        }
        if let Some(sizes) = &self.shard_num_bytes {
            if sizes.len() != n {
                return Err(Error::metadata(
                    path,
                    "shard_num_bytes has the wrong length",
                ));
            }
        }
        if let Some(h) = &self.shard_xxh64 {
            if h.len() != n {
                return Err(Error::metadata(path, "shard_xxh64 has the wrong length"));
            }
        }
        if let Some(d) = &self.dedup {
            if d.shard_refs.len() != n {
                return Err(Error::metadata(
                    path,
                    "dedup.shard_refs has the wrong length",
                ));
            }
        }
        let mut seen = std::collections::HashSet::new();
        // On an object store, one listing per directory of shards rather
        // than a request per shard (a cache of a thousand shards opens with
        // one LIST, not a thousand HEADs).
        let listed: std::collections::HashMap<std::path::PathBuf, u64> =
            if storage.name() == "local" {
                Default::default()
            } else {
                let parents: std::collections::BTreeSet<std::path::PathBuf> = self
                    .shard_filenames
                    .iter()
                    .filter_map(|n| dir.join(n).parent().map(Path::to_path_buf))
                    .collect();
                let mut m = std::collections::HashMap::new();
                for d in parents {
                    if let Ok(entries) = storage.list(&d) {
                        m.extend(
                            entries
                                .into_iter()
                                .filter(|e| e.is_file())
                                .map(|e| (e.path, e.len)),
                        );
                    }
                }
                m
            };
        for (i, name) in self.shard_filenames.iter().enumerate() {
            if !safe_shard_name(name) {
                return Err(Error::metadata(
                    path,
                    format!("shard file name {name:?} is not a plain file name"),
                ));
            }
            if !seen.insert(name) {
                return Err(Error::metadata(
                    path,
                    format!("shard {name} is listed twice"),
                ));
            }
            let p = dir.join(name);
            let len = match listed.get(&p) {
                Some(&len) => len,
                None => match storage.stat(&p)? {
                    Some(m) => m.len,
                    None => return Err(Error::MissingShard { path: p }),
                },
            };
            if let Some(sizes) = &self.shard_num_bytes {
                if len != sizes[i] {
                    return Err(Error::corrupt(
                        &p,
                        format!(
                            "file has {} bytes, metadata records {} (truncated or replaced)",
                            len, sizes[i]
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}
