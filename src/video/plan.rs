//! The window ("segment") plan of a `lance-video-frames` cache: which frames
//! make sample `i`, computed from the per-video frame counts at read time
//! (reference-spec §4.4, same order and formulas).

use std::num::NonZeroU32;

use crate::error::{Error, Result};

/// How windows are cut from each video: private fields, checked when made
/// ([`WindowSpec::try_new`]), so a plan never meets a window of 0 frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WindowSpec {
    window_length: NonZeroU32,
    frame_skip: u32,
    hop_size: NonZeroU32,
    min_video_frames: Option<u32>,
}

impl Default for WindowSpec {
    fn default() -> Self {
        WindowSpec {
            window_length: NonZeroU32::MIN,
            frame_skip: 0,
            hop_size: NonZeroU32::MIN,
            min_video_frames: None,
        }
    }
}

impl WindowSpec {
    /// Windows of `window_length` frames, `frame_skip` frames skipped
    /// between two frames of a window, starting every `hop_size` frames.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming a window length or hop of 0.
    pub fn try_new(window_length: u32, frame_skip: u32, hop_size: u32) -> Result<Self> {
        let positive = |name: &str, v: u32| {
            NonZeroU32::new(v).ok_or_else(|| {
                Error::InvalidArgument(format!("{name} must be at least 1, got {v}"))
            })
        };
        Ok(WindowSpec {
            window_length: positive("window_length", window_length)?,
            frame_skip,
            hop_size: positive("hop_size", hop_size)?,
            min_video_frames: None,
        })
    }

    /// Videos with fewer frames give no window (default: the window span).
    pub fn with_min_video_frames(mut self, frames: Option<u32>) -> Self {
        self.min_video_frames = frames;
        self
    }

    /// Frames per window.
    pub fn window_length(&self) -> u32 {
        self.window_length.get()
    }

    /// Frames skipped between two frames of a window (stride = skip + 1).
    pub fn frame_skip(&self) -> u32 {
        self.frame_skip
    }

    /// Frames between the starts of two windows.
    pub fn hop_size(&self) -> u32 {
        self.hop_size.get()
    }

    /// The least frames a video needs to give a window, if set.
    pub fn min_video_frames(&self) -> Option<u32> {
        self.min_video_frames
    }

    /// Distance between two frames of a window.
    pub fn stride(&self) -> u64 {
        u64::from(self.frame_skip) + 1
    }

    /// Frames a window covers, first to last.
    pub fn span(&self) -> u64 {
        (u64::from(self.window_length()) - 1) * self.stride() + 1
    }
}

/// Windows of every video, video-major then ascending start.
#[derive(Debug, Clone)]
pub struct SegmentPlan {
    spec: WindowSpec,
    /// First window of each video (and a final sentinel).
    starts: Vec<u64>,
}

impl SegmentPlan {
    /// Plans windows over videos of `frames[v]` frames.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when no video is long enough for one window.
    pub fn new(frames: &[u64], spec: WindowSpec) -> Result<Self> {
        let span = spec.span();
        let min_t = span.max(spec.min_video_frames.map_or(span, u64::from));
        let mut starts = Vec::with_capacity(frames.len() + 1);
        let mut total = 0u64;
        for &t in frames {
            starts.push(total);
            if t >= min_t {
                total += (t - span) / u64::from(spec.hop_size()) + 1;
            }
        }
        starts.push(total);
        if total == 0 {
            return Err(Error::InvalidArgument(format!(
                "no valid segments: every video has fewer than span={span} frames (or min_video_frames)"
            )));
        }
        Ok(SegmentPlan { spec, starts })
    }

    /// The spec.
    pub fn spec(&self) -> WindowSpec {
        self.spec
    }

    /// Number of windows.
    pub fn len(&self) -> u64 {
        *self.starts.last().expect("sentinel")
    }

    /// True when there is no window (never, for a built plan).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Windows of video `v`.
    pub fn windows_of(&self, v: usize) -> std::ops::Range<u64> {
        self.starts[v]..self.starts[v + 1]
    }

    /// Number of videos.
    pub fn num_videos(&self) -> usize {
        self.starts.len() - 1
    }

    /// Video position and start frame of window `i` (< len).
    pub fn locate(&self, i: u64) -> (usize, u64) {
        let v = self.starts.partition_point(|&s| s <= i) - 1;
        (v, (i - self.starts[v]) * u64::from(self.spec.hop_size()))
    }

    /// Frame numbers of window `i` within its video.
    pub fn frame_indices(&self, i: u64) -> Vec<u64> {
        let (_, start) = self.locate(i);
        (0..u64::from(self.spec.window_length()))
            .map(|j| start + j * self.spec.stride())
            .collect()
    }

    /// `n` windows drawn at random with `seed` (with replacement). With
    /// `balanced`, a video is drawn first (uniformly among videos that have
    /// windows), then one of its windows, so long videos do not dominate.
    pub fn sample(&self, n: usize, seed: u64, balanced: bool) -> Vec<u64> {
        let mut rng = crate::util::SplitMix64::new(seed);
        if !balanced {
            return (0..n).map(|_| rng.below(self.len())).collect();
        }
        let with: Vec<usize> = (0..self.num_videos())
            .filter(|&v| !self.windows_of(v).is_empty())
            .collect();
        (0..n)
            .map(|_| {
                let v = with[rng.below(with.len() as u64) as usize];
                let r = self.windows_of(v);
                r.start + rng.below(r.end - r.start)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_vectors() {
        // T=[10,4], window 3, skip 1, hop 2: span 5, starts [0,2,4] of video 0 only.
        let p = SegmentPlan::new(&[10, 4], WindowSpec::try_new(3, 1, 2).unwrap()).unwrap();
        assert_eq!(p.len(), 3);
        let starts: Vec<_> = (0..3).map(|i| p.locate(i)).collect();
        assert_eq!(starts, vec![(0, 0), (0, 2), (0, 4)]);
        assert_eq!(p.frame_indices(2), vec![4, 6, 8]);
        // T=5, window 3, hop 2: two samples [0,1,2] and [2,3,4].
        let p = SegmentPlan::new(&[5], WindowSpec::try_new(3, 0, 2).unwrap()).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p.frame_indices(0), vec![0, 1, 2]);
        assert_eq!(p.frame_indices(1), vec![2, 3, 4]);
        // min_video_frames drops short videos.
        let spec = WindowSpec::try_new(3, 0, 2)
            .unwrap()
            .with_min_video_frames(Some(6));
        assert!(SegmentPlan::new(&[5], spec).is_err());
        assert!(WindowSpec::try_new(0, 0, 1).is_err());
        assert!(WindowSpec::try_new(2, 0, 0)
            .unwrap_err()
            .to_string()
            .contains("hop_size"));
        assert!(WindowSpec::try_new(1, 0, 0).is_err());
    }

    #[test]
    fn balanced_sampling_visits_videos_evenly() {
        let p =
            SegmentPlan::new(&[1000, 10, 0, 10], WindowSpec::try_new(4, 0, 1).unwrap()).unwrap();
        let s = p.sample(3000, 7, true);
        let mut per = [0usize; 4];
        for i in s {
            per[p.locate(i).0] += 1;
        }
        assert_eq!(per[2], 0);
        for v in [0, 1, 3] {
            assert!((800..1200).contains(&per[v]), "{per:?}");
        }
        let plain = p.sample(3000, 7, false);
        assert!(plain.iter().filter(|&&i| p.locate(i).0 == 0).count() > 2800);
        assert_eq!(p.sample(10, 1, true), p.sample(10, 1, true));
    }
}
