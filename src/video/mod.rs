//! Video: FFmpeg decoding, WebP frames, the window plan of frames caches,
//! and read-time clip decoding of `Video(path|bytes)` cells.

pub mod decode;
pub mod plan;
pub mod sample;
pub mod webp;

pub use plan::{SegmentPlan, WindowSpec};
pub use sample::{Clip, ClipLayout, Pad, Sampling, VideoDecode};
pub use webp::{WebpInput, WebpSettings};

/// How `resize` is applied to each video (decided on its stream size).
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
#[serde(rename_all = "snake_case")]
pub enum ResizeMode {
    /// The reference's rule: when the longer side exceeds `resize`, every
    /// frame becomes `resize x resize` (aspect ratio not kept).
    #[default]
    Square,
    /// Aspect-preserving: when the shorter side exceeds `resize`, scale so it equals `resize`.
    #[value(name = "shorter-side", alias = "shorter_side")]
    ShorterSide,
}

impl ResizeMode {
    /// `square` or `shorter_side`, as the metadata records it.
    pub fn name(self) -> &'static str {
        match self {
            ResizeMode::Square => "square",
            ResizeMode::ShorterSide => "shorter_side",
        }
    }

    /// Output size `(w, h)` of a `w x h` video.
    pub fn apply(self, resize: Option<u32>, w: usize, h: usize) -> (usize, usize) {
        let Some(r) = resize.map(|r| r as usize) else {
            return (w, h);
        };
        match self {
            ResizeMode::Square if w.max(h) > r => (r, r),
            ResizeMode::ShorterSide if w.min(h) > r => {
                if w <= h {
                    (r, ((h * r) as f64 / w as f64).round().max(1.0) as usize)
                } else {
                    (((w * r) as f64 / h as f64).round().max(1.0) as usize, r)
                }
            }
            _ => (w, h),
        }
    }
}

impl std::str::FromStr for ResizeMode {
    type Err = crate::error::Error;

    /// Parses `square`, `shorter-side` or `shorter_side`.
    fn from_str(s: &str) -> crate::error::Result<Self> {
        match s {
            "square" => Ok(ResizeMode::Square),
            "shorter-side" | "shorter_side" => Ok(ResizeMode::ShorterSide),
            _ => Err(crate::error::Error::InvalidArgument(format!(
                "resize mode must be square or shorter-side, got '{s}'"
            ))),
        }
    }
}
