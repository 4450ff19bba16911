//! Decode limits: how large a decode a cache may ask for. A cache is data
//! from elsewhere; an image header or a video's recorded size that claims
//! gigapixels must be refused with an error naming the limit, before any
//! buffer is allocated, never answered with an abort or an out-of-memory
//! kill. The defaults follow PIL's decompression-bomb rule; a user who
//! trusts a cache of larger images raises them.

use std::num::{NonZeroU32, NonZeroU64};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Pixels above which an image is refused by default: PIL raises its
/// `DecompressionBombError` above twice its `MAX_IMAGE_PIXELS` (89,478,485).
pub const DEFAULT_MAX_IMAGE_PIXELS: u64 = 2 * 89_478_485;

/// Frames above which a window is refused by default.
pub const DEFAULT_MAX_WINDOW_FRAMES: u32 = 4096;

/// The limits a read decodes within.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecodeLimits {
    max_image_pixels: NonZeroU64,
    max_frame_pixels: NonZeroU64,
    max_window_frames: NonZeroU32,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_image_pixels: NonZeroU64::new(DEFAULT_MAX_IMAGE_PIXELS).expect("positive"),
            max_frame_pixels: NonZeroU64::new(DEFAULT_MAX_IMAGE_PIXELS).expect("positive"),
            max_window_frames: NonZeroU32::new(DEFAULT_MAX_WINDOW_FRAMES).expect("positive"),
        }
    }
}

fn positive(name: &str, v: u64) -> Result<NonZeroU64> {
    NonZeroU64::new(v)
        .ok_or_else(|| Error::InvalidArgument(format!("{name} must be at least 1, got {v}")))
}

impl DecodeLimits {
    /// Most pixels (width × height) of an image cell (default
    /// [`DEFAULT_MAX_IMAGE_PIXELS`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0.
    pub fn try_with_max_image_pixels(mut self, n: u64) -> Result<Self> {
        self.max_image_pixels = positive("max_image_pixels", n)?;
        Ok(self)
    }

    /// Most pixels of a video frame (default [`DEFAULT_MAX_IMAGE_PIXELS`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0.
    pub fn try_with_max_frame_pixels(mut self, n: u64) -> Result<Self> {
        self.max_frame_pixels = positive("max_frame_pixels", n)?;
        Ok(self)
    }

    /// Most frames of a window (default [`DEFAULT_MAX_WINDOW_FRAMES`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0 or more than `u32::MAX`.
    pub fn try_with_max_window_frames(mut self, n: u64) -> Result<Self> {
        self.max_window_frames = u32::try_from(positive("max_window_frames", n)?.get())
            .ok()
            .and_then(NonZeroU32::new)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "max_window_frames must be at most {}, got {n}",
                    u32::MAX
                ))
            })?;
        Ok(self)
    }

    /// The image pixel limit.
    pub fn max_image_pixels(&self) -> u64 {
        self.max_image_pixels.get()
    }

    /// The frame pixel limit.
    pub fn max_frame_pixels(&self) -> u64 {
        self.max_frame_pixels.get()
    }

    /// The window frame limit.
    pub fn max_window_frames(&self) -> u32 {
        self.max_window_frames.get()
    }

    /// An image of `width × height`, checked before its pixels are
    /// decoded; the message becomes the cell's decode error, which names
    /// the column.
    ///
    /// # Errors
    /// A message naming the size, the limit and the setting.
    pub fn check_image(&self, width: u64, height: u64) -> std::result::Result<(), String> {
        let px = width.saturating_mul(height);
        if px > self.max_image_pixels() {
            return Err(Error::LimitExceeded {
                what: format!("an image of {width}x{height} is {px} pixels"),
                limit: self.max_image_pixels(),
                setting: "max_image_pixels",
            }
            .to_string());
        }
        Ok(())
    }

    /// Video `video` of the cache at `dir`, with frames of `width × height`.
    ///
    /// # Errors
    /// [`Error::LimitExceeded`] above the frame pixel limit.
    pub fn check_frame(&self, dir: &Path, video: usize, width: u64, height: u64) -> Result<()> {
        let px = width.saturating_mul(height);
        if px > self.max_frame_pixels() {
            return Err(Error::LimitExceeded {
                what: format!(
                    "video {video} of {} has frames of {width}x{height}, {px} pixels",
                    dir.display()
                ),
                limit: self.max_frame_pixels(),
                setting: "max_frame_pixels",
            });
        }
        Ok(())
    }

    /// A window of `frames` frames.
    ///
    /// # Errors
    /// [`Error::LimitExceeded`] above the window frame limit.
    pub fn check_window(&self, frames: u32) -> Result<()> {
        if frames > self.max_window_frames() {
            return Err(Error::LimitExceeded {
                what: format!("a window of {frames} frames"),
                limit: u64::from(self.max_window_frames()),
                setting: "max_window_frames",
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_checked_when_set_and_name_themselves_when_exceeded() {
        let l = DecodeLimits::default();
        assert!(l.check_image(13_000, 13_000).is_ok());
        let e = l.check_image(20_000, 20_000).unwrap_err();
        assert!(
            e.contains("max_image_pixels") && e.contains("20000x20000"),
            "{e}"
        );
        let l = l.try_with_max_frame_pixels(100).unwrap();
        assert!(l.check_frame(Path::new("c"), 0, 10, 10).is_ok());
        let e = l
            .check_frame(Path::new("c"), 3, 11, 10)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("video 3") && e.contains("max_frame_pixels"),
            "{e}"
        );
        assert!(l.check_window(4097).is_err());
        assert!(DecodeLimits::default()
            .try_with_max_image_pixels(0)
            .is_err());
        assert!(DecodeLimits::default()
            .try_with_max_window_frames(u64::from(u32::MAX) + 1)
            .is_err());
        let j = serde_json::to_string(&l).unwrap();
        assert_eq!(serde_json::from_str::<DecodeLimits>(&j).unwrap(), l);
        assert!(serde_json::from_str::<DecodeLimits>(
            r#"{"max_image_pixels":0,"max_frame_pixels":1,"max_window_frames":1}"#
        )
        .is_err());
    }
}
