//! Decoded windows, one by one or stacked for a training step: WebP frames
//! decoded in parallel, or segments decoded with each frame converted
//! straight into its place in the output.

use arrow_array::cast::AsArray;
use arrow_array::RecordBatch;
use rayon::prelude::*;
use serde_json::Value as J;

use crate::error::{Error, Result};
use crate::features::Dtype;
use crate::layouts::backend::Backend;
use crate::layouts::video_frames::segments::SegmentFrames;
use crate::layouts::LanceRows;
use crate::value::Tensor;

use super::{LanceVideoFrames, Source};

/// One decoded window.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// The frames, RGB u8 `[T, H, W, 3]`.
    pub frames: Tensor,
    /// Position of the video in the cache's `videos` list.
    pub video_idx: usize,
    /// The video's recorded path.
    pub filename: Option<String>,
    /// First frame of the window.
    pub start_frame: u64,
    /// Frame numbers of the window, within its video.
    pub frame_indices: Vec<u64>,
    /// The window's index.
    pub sample_idx: u64,
    /// The video's stored metadata.
    pub metadata: serde_json::Map<String, J>,
}

/// Decoded windows stacked for a training step: the frames of every window
/// in one RGB u8 tensor `[B, T, H, W, 3]`, decoded straight into place, with
/// each window's position. The videos' paths and metadata are in
/// [`LanceVideoFrames::metadata`] under `video_idx`.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowBatch {
    /// The frames, RGB u8 `[B, T, H, W, 3]`.
    pub frames: Tensor,
    /// Position of each window's video in the cache's `videos` list.
    pub video_idx: Vec<usize>,
    /// First frame of each window.
    pub start_frame: Vec<u64>,
    /// Frame numbers of each window, within its video.
    pub frame_indices: Vec<Vec<u64>>,
    /// Each window's index.
    pub sample_idx: Vec<u64>,
}

impl LanceVideoFrames {
    /// The WebP bytes of each frame row read by [`Self::frame_bytes`].
    fn webp_frames<'a>(&self, batch: &'a RecordBatch) -> Result<Vec<&'a [u8]>> {
        let bytes = batch.column(2).as_binary_opt::<i64>().ok_or_else(|| {
            Error::corrupt(&self.inner.core.dir, "frame bytes are not large_binary")
        })?;
        Ok(bytes.iter().map(|b| b.unwrap_or_default()).collect())
    }

    /// The frame rows of windows, concatenated (a WebP cache's).
    pub(super) fn frame_bytes(
        &self,
        frames: &LanceRows,
        windows: &[u64],
    ) -> Result<(RecordBatch, usize)> {
        let t = self.inner.plan.spec().window_length() as usize;
        let mut rows = Vec::with_capacity(windows.len() * t);
        for &w in windows {
            let (v, _, idx) = self.locate(w);
            let base = self.inner.meta.videos[v].start_row;
            rows.extend(idx.iter().map(|f| (base + f) as i64));
        }
        Ok((frames.take(&rows)?, t))
    }

    /// Window `w` (of video `v`, from `start`, frames `idx`) with its frames.
    fn window_of(&self, w: u64, v: usize, start: u64, idx: Vec<u64>, frames: Tensor) -> Window {
        let video = &self.inner.meta.videos[v];
        Window {
            frames,
            video_idx: v,
            filename: video.path.clone(),
            start_frame: start,
            frame_indices: idx,
            sample_idx: w,
            metadata: video.metadata.clone(),
        }
    }

    /// The places of the windows at `indices` (negative counts from the
    /// end): each one's video, first frame and window number; nothing read.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for a bad index.
    pub fn window_places(&self, indices: &[i64]) -> Result<Vec<(usize, u64, u64)>> {
        Ok(self
            .window_numbers(indices)?
            .into_iter()
            .map(|w| {
                let (v, start, _) = self.locate(w);
                (v, start, w)
            })
            .collect())
    }

    /// Decoded window `index` (negative counts from the end).
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`], a Lance read error, or [`Error::Video`]
    /// naming the cache when a frame does not decode.
    pub fn window(&self, index: i64) -> Result<Window> {
        Ok(self.windows(&[index])?.pop().expect("one window"))
    }

    /// Decoded windows at `indices` (order kept, duplicates allowed), frames
    /// read in one batched take and decoded in parallel.
    ///
    /// # Errors
    /// As [`LanceVideoFrames::window`].
    pub fn windows(&self, indices: &[i64]) -> Result<Vec<Window>> {
        let ws = self.window_numbers(indices)?;
        let rows = match &self.inner.source {
            Source::Webp(r) => r,
            Source::Segments(s) => {
                let bufs = self.segment_windows(s, &ws, 1)?;
                let t = self.inner.plan.spec().window_length() as usize;
                return Ok(ws
                    .iter()
                    .zip(bufs)
                    .map(|(&w, data)| {
                        let (v, start, idx) = self.locate(w);
                        let video = &self.inner.meta.videos[v];
                        let (vw, vh) = (video.w as usize, video.h as usize);
                        self.window_of(
                            w,
                            v,
                            start,
                            idx,
                            Tensor {
                                dtype: Dtype::UInt8,
                                shape: vec![t, vh, vw, 3],
                                data,
                            },
                        )
                    })
                    .collect());
            }
        };
        let (batch, t) = self.frame_bytes(rows, &ws)?;
        let frames = self.webp_frames(&batch)?;
        let dir = &self.inner.core.dir;
        crate::util::in_pool(|| {
            ws.par_iter()
                .enumerate()
                .map(|(k, &w)| {
                    let (v, start, idx) = self.locate(w);
                    let tensor = crate::video::webp::decode_window(&frames[k * t..(k + 1) * t])
                        .map_err(|reason| Error::Video {
                            path: dir.clone(),
                            reason: format!("window {w} of video {v}: {reason}"),
                        })?;
                    Ok(self.window_of(w, v, start, idx, tensor))
                })
                .collect()
        })?
    }

    /// Decoded windows at `indices` stacked into one `[B, T, H, W, 3]`
    /// tensor (order kept, duplicates allowed): one batched read, every frame
    /// decoded in parallel straight into the batch, and one allocation for
    /// the whole batch instead of one per window.
    ///
    /// # Errors
    /// As [`LanceVideoFrames::window`], and [`Error::InvalidArgument`] when
    /// the windows come from videos of different frame sizes (they cannot
    /// share a tensor; read them with [`LanceVideoFrames::windows`]).
    pub fn windows_batch(&self, indices: &[i64]) -> Result<WindowBatch> {
        let ws = self.window_numbers(indices)?;
        let located: Vec<(usize, u64, Vec<u64>)> = ws.iter().map(|&w| self.locate(w)).collect();
        let videos = &self.inner.meta.videos;
        let (w, h) = located
            .first()
            .map_or((0, 0), |l| (videos[l.0].w as usize, videos[l.0].h as usize));
        if let Some(other) = located
            .iter()
            .find(|l| (videos[l.0].w as usize, videos[l.0].h as usize) != (w, h))
        {
            return Err(Error::InvalidArgument(format!(
                "windows of {w}x{h} and {}x{} videos cannot share one batch tensor; read them with windows()",
                videos[other.0].w, videos[other.0].h
            )));
        }
        let t = self.inner.plan.spec().window_length() as usize;
        let rows = match &self.inner.source {
            Source::Webp(r) => r,
            Source::Segments(s) => {
                let data = self
                    .segment_windows(s, &ws, ws.len())?
                    .pop()
                    .unwrap_or_default();
                return Ok(self.batch_of(ws, located, t, w, h, data));
            }
        };
        let (batch, t) = self.frame_bytes(rows, &ws)?;
        let frames = self.webp_frames(&batch)?;
        let data = crate::video::webp::decode_frames(&frames, w, h).map_err(|(i, reason)| {
            let k = i / t.max(1);
            Error::Video {
                path: self.inner.core.dir.clone(),
                reason: format!(
                    "window {} of video {}: frame {}: {reason}",
                    ws[k],
                    located[k].0,
                    i % t.max(1)
                ),
            }
        })?;
        Ok(self.batch_of(ws, located, t, w, h, data))
    }

    /// A batch of windows from their decoded frames.
    fn batch_of(
        &self,
        ws: Vec<u64>,
        located: Vec<(usize, u64, Vec<u64>)>,
        t: usize,
        w: usize,
        h: usize,
        data: Vec<u8>,
    ) -> WindowBatch {
        let mut out = WindowBatch {
            frames: Tensor {
                dtype: crate::features::Dtype::UInt8,
                shape: vec![ws.len(), t, h, w, 3],
                data,
            },
            video_idx: Vec::with_capacity(ws.len()),
            start_frame: Vec::with_capacity(ws.len()),
            frame_indices: Vec::with_capacity(ws.len()),
            sample_idx: ws,
        };
        for (v, start, idx) in located {
            out.video_idx.push(v);
            out.start_frame.push(start);
            out.frame_indices.push(idx);
        }
        out
    }

    /// The packed RGB frames of windows from a segments cache, window after
    /// window, in one buffer per `group` windows (the last buffer holds the
    /// rest): each frame is converted straight into its place.
    pub(super) fn segment_windows(
        &self,
        s: &SegmentFrames,
        ws: &[u64],
        group: usize,
    ) -> Result<Vec<Vec<u8>>> {
        let t = self.inner.plan.spec().window_length() as usize;
        let mut wanted = Vec::with_capacity(ws.len() * t);
        let mut sizes = Vec::with_capacity(ws.len());
        for &w in ws {
            let (v, _, idx) = self.locate(w);
            wanted.extend(idx.iter().map(|&f| (v, f)));
            let video = &self.inner.meta.videos[v];
            sizes.push(
                (video.w as usize)
                    .saturating_mul(video.h as usize)
                    .saturating_mul(3),
            );
        }
        let groups: Vec<&[usize]> = sizes.chunks(group.max(1)).collect();
        let mut bufs: Vec<(Vec<u8>, usize)> = Vec::with_capacity(groups.len());
        for g in &groups {
            let bytes = g
                .iter()
                .try_fold(0usize, |n, &size| n.checked_add(size.checked_mul(t)?))
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "{} windows of {t} frames overflow memory",
                        g.len()
                    ))
                })?;
            let mut buf = Vec::new();
            buf.try_reserve_exact(bytes).map_err(|e| {
                Error::InvalidArgument(format!("{} windows of {bytes} bytes: {e}", g.len()))
            })?;
            bufs.push((buf, bytes));
        }
        let mut outs = Vec::with_capacity(wanted.len());
        for ((buf, bytes), g) in bufs.iter_mut().zip(&groups) {
            let mut rest = &mut buf.spare_capacity_mut()[..*bytes];
            for &size in *g {
                for _ in 0..t {
                    let (frame, tail) = std::mem::take(&mut rest).split_at_mut(size);
                    outs.push(frame);
                    rest = tail;
                }
            }
        }
        s.read_into(&self.inner.meta, &wanted, outs)?;
        Ok(bufs
            .into_iter()
            .map(|(mut buf, bytes)| {
                // SAFETY: `read_into` returned Ok, so it wrote every output,
                // and the outputs tile the first `bytes` of the capacity.
                unsafe { buf.set_len(bytes) };
                buf
            })
            .collect())
    }
}
