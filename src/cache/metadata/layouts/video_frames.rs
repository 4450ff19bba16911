//! The metadata of a `lance-video-frames` or `lance-video-segments`
//! cache: its videos, the segments' codec and quality, and the checks
//! that the videos' frame counts add up.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value as J;

use crate::cache::metadata::{
    CommonMetadata, WriterInfo, LAYOUT_LANCE_VIDEO_FRAMES, LAYOUT_LANCE_VIDEO_SEGMENTS,
};
use crate::error::{Error, Result};

use super::check_lance_dataset;

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
