//! Video: FFmpeg decoding, WebP frames, the window plan of frames caches,
//! and read-time clip decoding of `Video(path|bytes)` cells.

pub mod decode;
pub mod plan;
pub mod sample;
pub mod webp;

pub use plan::{SegmentPlan, WindowSpec};
pub use sample::{Clip, ClipLayout, Pad, Sampling, VideoDecode};
pub use webp::{WebpInput, WebpSettings};
