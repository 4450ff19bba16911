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

crate::util::named_enum! {
    /// What a frame goes into libwebp as.
    ///
    /// The reference encodes with OpenCV's `imencode('.webp')`: the decoder's
    /// YUV 4:2:0 is converted to packed RGB, and libwebp converts that back to
    /// YUV 4:2:0 with its own averaging of each 2x2 block of chroma. That round
    /// trip smooths chroma noise, so on noisy content its frames are smaller (and
    /// a little less faithful) than frames encoded from the decoder's planes at
    /// the same quality.
    #[derive(Default)]
    pub enum WebpInput("WebP input") {
        /// Packed RGB through libwebp's RGB import, as the reference's encoder:
        /// the same quality gives the same size as the reference's frames.
        #[default]
        Rgb = "rgb",
        /// The decoder's YUV 4:2:0 planes, no RGB round trip: faster to encode,
        /// keeps chroma detail, larger on noisy content.
        Yuv = "yuv",
    }
}

crate::util::named_enum! {
    /// How `resize` is applied to each video (decided on its stream size).
    #[derive(Default)]
    pub enum ResizeMode("resize mode") {
        /// The reference's rule: when the longer side exceeds `resize`, every
        /// frame becomes `resize x resize` (aspect ratio not kept).
        #[default]
        Square = "square",
        /// Aspect-preserving: when the shorter side exceeds `resize`, scale
        /// so it equals `resize`. `shorter_side` as the metadata records it.
        ShorterSide = "shorter_side" | "shorter-side",
    }
}

impl ResizeMode {
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
