//! The decode limits a read of a cache stays within (defined in
//! `util::limits`, below the video decoders that check them too).

pub use crate::util::limits::{DecodeLimits, DEFAULT_MAX_IMAGE_PIXELS, DEFAULT_MAX_WINDOW_FRAMES};
