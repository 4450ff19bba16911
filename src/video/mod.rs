//! Video: FFmpeg decoding, WebP frames, the window plan of frames caches,
//! and read-time clip decoding of `Video(path|bytes)` cells. The option
//! enums a frames cache's metadata records ([`ResizeMode`], [`WebpInput`])
//! are here without the `video` feature too, so a build without it still
//! reads that metadata (and says the layout was compiled out).

#[cfg(feature = "video")]
mod av1;
#[cfg(feature = "video")]
pub mod decode;
#[cfg(feature = "video")]
pub mod plan;
#[cfg(feature = "video")]
pub mod quality;
#[cfg(feature = "video")]
pub mod sample;
#[cfg(feature = "video")]
pub mod segment;
#[cfg(feature = "video")]
pub mod webp;

#[cfg(feature = "video")]
pub use plan::{SegmentPlan, WindowSpec};
#[cfg(feature = "video")]
pub use sample::{Clip, ClipLayout, Pad, Sampling, VideoDecode};
#[cfg(feature = "video")]
pub use webp::WebpSettings;

/// What a frame goes into libwebp as.
///
/// The reference encodes with OpenCV's `imencode('.webp')`: the decoder's
/// YUV 4:2:0 is converted to packed RGB, and libwebp converts that back to
/// YUV 4:2:0 with its own averaging of each 2x2 block of chroma. That round
/// trip smooths chroma noise, so on noisy content its frames are smaller (and
/// a little less faithful) than frames encoded from the decoder's planes at
/// the same quality.
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
pub enum WebpInput {
    /// Packed RGB through libwebp's RGB import, as the reference's encoder:
    /// the same quality gives the same size as the reference's frames.
    #[default]
    Rgb,
    /// The decoder's YUV 4:2:0 planes, no RGB round trip: faster to encode,
    /// keeps chroma detail, larger on noisy content.
    Yuv,
}

impl WebpInput {
    /// `rgb` or `yuv`.
    pub fn name(self) -> &'static str {
        match self {
            WebpInput::Rgb => "rgb",
            WebpInput::Yuv => "yuv",
        }
    }
}

impl std::str::FromStr for WebpInput {
    type Err = crate::error::Error;

    /// Parses `rgb` or `yuv`.
    fn from_str(s: &str) -> crate::error::Result<Self> {
        match s {
            "rgb" => Ok(WebpInput::Rgb),
            "yuv" => Ok(WebpInput::Yuv),
            _ => Err(crate::error::Error::InvalidArgument(format!(
                "WebP input must be rgb or yuv, got '{s}'"
            ))),
        }
    }
}

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
