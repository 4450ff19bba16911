//! Read-time decoding of `Video(path)` / `Video(bytes)` cells: a policy
//! ([`VideoDecode`]) that picks frame numbers, decodes exactly those frames
//! and shapes them into a tensor. Nothing of it is stored in the cache.

use std::path::{Path, PathBuf};

use super::decode::{read_frames_rgb_from, FrameIndex, VideoFile};
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::value::{Tensor, VideoRef};

/// Which frames a clip takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    /// `num_frames` spread evenly over the video (stride ignored).
    Uniform,
    /// A random start (seeded per sample when a seed is set).
    Random,
    /// The span centred in the video.
    Center,
    /// From frame 0.
    Start,
}

/// Axis order of the output tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClipLayout {
    /// frames, channels, height, width.
    Tchw,
    /// frames, height, width, channels.
    Thwc,
    /// channels, frames, height, width.
    Cthw,
}

/// What to do when a video is shorter than the clip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pad {
    /// An error naming the video.
    Error,
    /// Repeat the last frame.
    RepeatLast,
    /// Start again from the first sampled frame.
    Loop,
}

/// A read-time video decoding policy.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoDecode {
    /// Frames per clip (>= 1).
    pub num_frames: usize,
    /// How frames are chosen.
    pub sampling: Sampling,
    /// Distance between two frames (>= 1) for random, center and start.
    pub frame_stride: usize,
    /// Output `(height, width)`; None keeps the video's size.
    pub resize: Option<(usize, usize)>,
    /// Axis order.
    pub layout: ClipLayout,
    /// `UInt8` (0..=255) or `Float32` (scaled to 0..=1).
    pub dtype: Dtype,
    /// Short-video policy.
    pub pad: Pad,
    /// Seed of random sampling (per sample: `seed + sample_index`); None draws a fresh start.
    pub seed: Option<u64>,
}

/// A decoded clip.
#[derive(Debug, Clone, PartialEq)]
pub struct Clip {
    /// The frames, shaped by the layout.
    pub frames: Tensor,
    /// The frame numbers decoded, in clip order.
    pub frame_indices: Vec<u64>,
    /// Frames in the video.
    pub video_frames: u64,
}

impl VideoDecode {
    /// `num_frames` uniformly sampled frames, u8 THWC at the video's size.
    pub fn new(num_frames: usize) -> Self {
        VideoDecode {
            num_frames,
            sampling: Sampling::Uniform,
            frame_stride: 1,
            resize: None,
            layout: ClipLayout::Thwc,
            dtype: Dtype::UInt8,
            pad: Pad::Error,
            seed: None,
        }
    }

    /// Checks the policy.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the bad field.
    pub fn validate(&self) -> Result<()> {
        if self.num_frames < 1 {
            return Err(Error::InvalidArgument(format!(
                "num_frames must be >= 1, got {}",
                self.num_frames
            )));
        }
        if self.frame_stride < 1 {
            return Err(Error::InvalidArgument(format!(
                "frame_stride must be >= 1, got {}",
                self.frame_stride
            )));
        }
        if !matches!(self.dtype, Dtype::UInt8 | Dtype::Float32) {
            return Err(Error::InvalidArgument(format!(
                "video clips are uint8 or float32, got {}",
                self.dtype.name()
            )));
        }
        if let Some((h, w)) = self.resize {
            if h == 0 || w == 0 {
                return Err(Error::InvalidArgument(format!(
                    "resize must be positive, got ({h}, {w})"
                )));
            }
        }
        Ok(())
    }

    /// The frame numbers of a clip from a video of `t` frames (sample
    /// `sample_index`, which seeds random sampling).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] with the error pad policy when the video
    /// is too short, or for an empty video.
    pub fn frame_indices(&self, t: u64, sample_index: u64) -> Result<Vec<u64>> {
        self.validate()?;
        if t == 0 {
            return Err(Error::InvalidArgument("the video has no frames".into()));
        }
        let n = self.num_frames as u64;
        let stride = self.frame_stride as u64;
        let base: Vec<u64> = match self.sampling {
            Sampling::Uniform => {
                if t >= n {
                    if n == 1 {
                        return Ok(vec![0]);
                    }
                    // numpy's rint(linspace(0, t-1, n)): round half to even.
                    return Ok((0..n)
                        .map(|i| {
                            ((i as f64) * ((t - 1) as f64) / ((n - 1) as f64)).round_ties_even()
                                as u64
                        })
                        .collect());
                }
                (0..t).collect()
            }
            _ => {
                let span = (n - 1) * stride + 1;
                if t >= span {
                    let start = match self.sampling {
                        Sampling::Start => 0,
                        Sampling::Center => (t - span) / 2,
                        Sampling::Random => {
                            let seed = match self.seed {
                                Some(s) => s.wrapping_add(sample_index),
                                None => fresh_seed(),
                            };
                            crate::util::SplitMix64::new(seed).below(t - span + 1)
                        }
                        Sampling::Uniform => unreachable!("handled above"),
                    };
                    return Ok((0..n).map(|j| start + j * stride).collect());
                }
                (0..t).step_by(stride as usize).take(n as usize).collect()
            }
        };
        self.pad_indices(base)
    }

    fn pad_indices(&self, base: Vec<u64>) -> Result<Vec<u64>> {
        let n = self.num_frames;
        match self.pad {
            Pad::Error => Err(Error::InvalidArgument(format!(
                "Video has only {} sampled frames, but num_frames={n}.",
                base.len()
            ))),
            Pad::RepeatLast => {
                let last = *base.last().expect("non-empty");
                let mut v = base;
                v.resize(n, last);
                Ok(v)
            }
            Pad::Loop => Ok((0..n).map(|i| base[i % base.len()]).collect()),
        }
    }

    /// Decodes a clip of the video a cell refers to.
    ///
    /// # Errors
    /// [`Error::Video`] naming the file (or the cell) and the reason.
    pub fn decode(&self, video: &VideoRef, sample_index: u64) -> Result<Clip> {
        self.decode_within(
            video,
            sample_index,
            &crate::util::limits::DecodeLimits::default(),
        )
    }

    /// [`VideoDecode::decode`] within `limits`: the stream's frame size and
    /// the clip's frame count are checked before any frame is decoded.
    ///
    /// # Errors
    /// As [`VideoDecode::decode`]; [`Error::LimitExceeded`] above a limit.
    pub fn decode_within(
        &self,
        video: &VideoRef,
        sample_index: u64,
        limits: &crate::util::limits::DecodeLimits,
    ) -> Result<Clip> {
        self.validate()?;
        let (path, _tmp) = materialise(video)?;
        let verr = |reason: String| Error::Video {
            path: path.clone(),
            reason,
        };
        // One open for both the packet index and the frames.
        let mut file = VideoFile::open(&path).map_err(verr)?;
        let (w, h) = (file.info().width as u64, file.info().height as u64);
        limits.check_frame(&path, 0, w, h)?;
        let index = FrameIndex::read_from(&mut file, &path).map_err(verr)?;
        let indices = self.frame_indices(index.packets, sample_index)?;
        limits.check_window(u32::try_from(indices.len()).unwrap_or(u32::MAX))?;
        let (frames, w, h) = read_frames_rgb_from(
            file,
            &path,
            &indices,
            self.resize.map(|(h, w)| (w, h)),
            Some(&index),
        )
        .map_err(verr)?;
        Ok(Clip {
            frames: shape_clip(&frames, w, h, self.layout, self.dtype),
            frame_indices: indices,
            video_frames: index.packets,
        })
    }
}

fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// Removes a temporary copy of an inline video when dropped.
struct TempVideo(PathBuf);

impl Drop for TempVideo {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The file to decode: the cell's path, or its bytes written to a private
/// temporary file that is removed afterwards (never leaked).
fn materialise(video: &VideoRef) -> Result<(PathBuf, Option<TempVideo>)> {
    if let Some(b) = &video.bytes {
        let ext = video.extension.clone().unwrap_or_else(|| ".video".into());
        let p = std::env::temp_dir().join(format!(
            "shardset-video-{}-{}{ext}",
            std::process::id(),
            crate::util::random_suffix()
        ));
        std::fs::write(&p, b).map_err(|e| Error::io("write", &p, e))?;
        return Ok((p.clone(), Some(TempVideo(p))));
    }
    match &video.path {
        Some(p) if Path::new(p).exists() => Ok((p.clone(), None)),
        Some(p) => Err(Error::Video {
            path: p.clone(),
            reason: "the video file does not exist".into(),
        }),
        None => Err(Error::InvalidArgument(
            "the video cell has neither bytes nor a path".into(),
        )),
    }
}

/// Packs RGB frames (each `h * w * 3`) into a tensor of the chosen layout and dtype.
pub fn shape_clip(
    frames: &[Vec<u8>],
    w: usize,
    h: usize,
    layout: ClipLayout,
    dtype: Dtype,
) -> Tensor {
    let t = frames.len();
    let n = t * h * w * 3;
    let mut u8s = Vec::with_capacity(n);
    match layout {
        ClipLayout::Thwc => {
            for f in frames {
                u8s.extend_from_slice(f);
            }
        }
        ClipLayout::Tchw => {
            for f in frames {
                for c in 0..3 {
                    u8s.extend(f.iter().skip(c).step_by(3));
                }
            }
        }
        ClipLayout::Cthw => {
            for c in 0..3 {
                for f in frames {
                    u8s.extend(f.iter().skip(c).step_by(3));
                }
            }
        }
    }
    let shape = match layout {
        ClipLayout::Thwc => vec![t, h, w, 3],
        ClipLayout::Tchw => vec![t, 3, h, w],
        ClipLayout::Cthw => vec![3, t, h, w],
    };
    if dtype == Dtype::Float32 {
        let mut data = Vec::with_capacity(n * 4);
        for &b in &u8s {
            data.extend_from_slice(&(f32::from(b) / 255.0).to_le_bytes());
        }
        Tensor {
            dtype: Dtype::Float32,
            shape,
            data,
        }
    } else {
        Tensor {
            dtype: Dtype::UInt8,
            shape,
            data: u8s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_rules() {
        let mut d = VideoDecode::new(4);
        // rint(linspace(0, 9, 4)) = [0, 3, 6, 9]; linspace(0, 4, 4) = [0, 1.33, 2.67, 4] -> [0, 1, 3, 4]
        assert_eq!(d.frame_indices(10, 0).unwrap(), vec![0, 3, 6, 9]);
        assert_eq!(d.frame_indices(5, 0).unwrap(), vec![0, 1, 3, 4]);
        // half to even: linspace(0, 5, 3) = [0, 2.5, 5] -> [0, 2, 5]
        d.num_frames = 3;
        assert_eq!(d.frame_indices(6, 0).unwrap(), vec![0, 2, 5]);
        d.num_frames = 4;
        assert!(d.frame_indices(3, 0).is_err());
        d.pad = Pad::RepeatLast;
        assert_eq!(d.frame_indices(3, 0).unwrap(), vec![0, 1, 2, 2]);
        d.pad = Pad::Loop;
        assert_eq!(d.frame_indices(3, 0).unwrap(), vec![0, 1, 2, 0]);
        d.sampling = Sampling::Center;
        d.frame_stride = 2;
        assert_eq!(d.frame_indices(11, 0).unwrap(), vec![2, 4, 6, 8]);
        d.sampling = Sampling::Start;
        assert_eq!(d.frame_indices(11, 0).unwrap(), vec![0, 2, 4, 6]);
        assert_eq!(d.frame_indices(5, 0).unwrap(), vec![0, 2, 4, 0]);
        d.sampling = Sampling::Random;
        d.seed = Some(9);
        let a = d.frame_indices(100, 3).unwrap();
        assert_eq!(a, d.frame_indices(100, 3).unwrap());
        assert!(a.windows(2).all(|p| p[1] == p[0] + 2) && a[3] < 100);
        let starts: std::collections::HashSet<u64> = (0..50)
            .map(|s| d.frame_indices(100, s).unwrap()[0])
            .collect();
        assert!(starts.len() > 10);
        d.num_frames = 0;
        assert!(d.validate().is_err());
    }

    #[test]
    fn layouts_and_dtypes() {
        // Two 1x2 frames: pixel p of frame t has RGB (10t+p, 100+p, 200).
        let f = |t: u8| vec![10 * t, 100, 200, 10 * t + 1, 101, 200];
        let frames = vec![f(0), f(1)];
        let thwc = shape_clip(&frames, 2, 1, ClipLayout::Thwc, Dtype::UInt8);
        assert_eq!(thwc.shape, vec![2, 1, 2, 3]);
        let tchw = shape_clip(&frames, 2, 1, ClipLayout::Tchw, Dtype::UInt8);
        assert_eq!(tchw.shape, vec![2, 3, 1, 2]);
        assert_eq!(&tchw.data[..6], &[0, 1, 100, 101, 200, 200]);
        let cthw = shape_clip(&frames, 2, 1, ClipLayout::Cthw, Dtype::UInt8);
        assert_eq!(cthw.shape, vec![3, 2, 1, 2]);
        assert_eq!(&cthw.data[..4], &[0, 1, 10, 11]);
        let f32s = shape_clip(&frames, 2, 1, ClipLayout::Thwc, Dtype::Float32);
        let v = f32s.to_vec::<f32>().unwrap();
        assert!((v[1] - 100.0 / 255.0).abs() < 1e-6 && v.iter().all(|x| (0.0..=1.0).contains(x)));
    }
}
