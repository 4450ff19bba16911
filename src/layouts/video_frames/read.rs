//! The `lance-video-frames` backend: a row is a *window* of frames cut from
//! one video by a [`SegmentPlan`] (window length, frame skip, hop, minimum
//! video length), computed at open time from the per-video frame counts.
//!
//! Raw rows hold the window's WebP frames (`list<large_binary>`) with
//! `video_idx`, `filename`, `start_frame`, `frame_indices`, `sample_idx` and
//! the video's stored metadata as columns; decoded rows hold the frames as
//! one RGB u8 tensor `[T, H, W, 3]` under the cache's real video column
//! name. Frames are read through the `lance-rows` backend (open fragment
//! sessions, cached 64-frame chunks) and decoded in parallel. Videos with
//! at least one window are the shards.

use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::Array;
use arrow_array::{ArrayRef, Int64Array, ListArray, RecordBatch, StringArray};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field, Schema};
use rayon::prelude::*;
use serde_json::Value as J;

use crate::cache::metadata::{
    VideoFramesMetadata, LAYOUT_LANCE_VIDEO_FRAMES, LAYOUT_LANCE_VIDEO_SEGMENTS,
};
use crate::error::{Error, Result};
use crate::features::decode::{DecodeOptions, RowDecoder};
use crate::features::{Dtype, Feature, Features, VideoStorage};
use crate::layouts::backend::{
    normalize_index, shard_order, Backend, BatchIter, IterOptions, RowsCore,
};
use crate::layouts::video_frames::format::{frames_schema, segments_schema};
use crate::layouts::video_frames::segments::SegmentFrames;
use crate::layouts::{LanceReadOptions, LanceRows};
use crate::value::{Row, Tensor};
use crate::video::plan::{SegmentPlan, WindowSpec};

/// The Arrow type of a decoded window cell (a segments cache's raw video
/// column): `struct<shape: list<int64>, data: large_binary>`, the RGB u8
/// frames `[T, H, W, 3]` in C order.
pub fn decoded_window_type() -> DataType {
    DataType::Struct(decoded_window_fields())
}

fn decoded_window_fields() -> arrow_schema::Fields {
    arrow_schema::Fields::from(vec![
        Field::new(
            "shape",
            DataType::List(Arc::new(Field::new("item", DataType::Int64, true))),
            false,
        ),
        Field::new("data", DataType::LargeBinary, false),
    ])
}

/// Decoded window cells: each window's shape and its frames concatenated.
fn decoded_window_array(
    shapes: impl Iterator<Item = [i64; 4]>,
    frames: impl Iterator<Item = Vec<u8>>,
) -> std::result::Result<ArrayRef, arrow_schema::ArrowError> {
    use arrow_array::builder::{LargeBinaryBuilder, ListBuilder};
    let mut shape = ListBuilder::new(Int64Builder::new());
    let mut data = LargeBinaryBuilder::new();
    for (s, f) in shapes.zip(frames) {
        shape.values().append_slice(&s);
        shape.append(true);
        data.append_value(f);
    }
    let (_, o, v, _) = shape.finish().into_parts();
    let shape = ListArray::try_new(
        Arc::new(Field::new("item", DataType::Int64, true)),
        o,
        v,
        None,
    )?;
    Ok(Arc::new(arrow_array::StructArray::try_new(
        decoded_window_fields(),
        vec![Arc::new(shape), Arc::new(data.finish())],
        None,
    )?))
}

/// Windows per batch when iterating.
const ITER_WINDOWS: usize = 8;

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

/// A `lance-video-frames` cache seen as windows.
#[derive(Debug, Clone)]
pub struct LanceVideoFrames {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Windows are the rows, videos with at least one window the shards.
    core: RowsCore,
    meta: VideoFramesMetadata,
    plan: SegmentPlan,
    source: Source,
    /// The read options asked for (`chunk_rows` in frames).
    read_opts: LanceReadOptions,
    /// Metadata columns (name, type) after the built-in ones.
    meta_cols: Vec<(String, DataType)>,
    /// Videos with at least one window (the shards).
    shard_videos: Vec<usize>,
}

/// Where frames come from: a WebP image per row, or encoded segments.
#[derive(Debug)]
enum Source {
    Webp(LanceRows),
    Segments(SegmentFrames),
}

impl Source {
    fn rows(&self) -> &LanceRows {
        match self {
            Source::Webp(r) => r,
            Source::Segments(s) => &s.rows,
        }
    }
}

const BUILTIN: [&str; 5] = [
    "video_idx",
    "filename",
    "start_frame",
    "frame_indices",
    "sample_idx",
];

fn infer_type(values: impl Iterator<Item = Option<J>>) -> DataType {
    let (mut int, mut float, mut boolean, mut other, mut any) = (true, true, true, false, false);
    for v in values.flatten() {
        match v {
            J::Null => continue,
            J::Bool(_) => {
                int = false;
                float = false;
            }
            J::Number(n) => {
                boolean = false;
                if !(n.is_i64() || n.is_u64() && n.as_i64().is_some()) {
                    int = false;
                }
            }
            _ => other = true,
        }
        any = true;
    }
    if !any || other {
        DataType::Utf8
    } else if boolean && !int {
        DataType::Boolean
    } else if int {
        DataType::Int64
    } else if float && !boolean {
        DataType::Float64
    } else {
        DataType::Utf8
    }
}

impl LanceVideoFrames {
    /// A windows backend over a frames cache with parsed metadata.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad window spec or when no video is
    /// long enough for one window.
    pub fn new(
        dir: &Path,
        meta: VideoFramesMetadata,
        fragment_rows: &[u64],
        spec: WindowSpec,
        opts: LanceReadOptions,
    ) -> Result<Self> {
        let counts: Vec<u64> = meta.videos.iter().map(|v| v.t).collect();
        let plan = SegmentPlan::new(&counts, spec)?;
        let segments = meta.is_segments();
        let source = if segments {
            // `chunk_rows` counts frames for a video cache: a random read
            // takes about as many frames' bytes from either layout.
            let per = meta
                .segments
                .as_ref()
                .map_or(1, |s| u64::from(s.frames_per_segment.max(1)));
            let rows_opts = LanceReadOptions {
                chunk_rows: std::num::NonZeroU64::new(opts.chunk_rows.get().div_ceil(per))
                    .expect("at least one"),
                ..opts
            };
            Source::Segments(SegmentFrames::new(
                dir,
                &meta,
                LanceRows::with_schema(
                    dir,
                    fragment_rows,
                    segments_schema(meta.segments.as_ref().is_some_and(|s| s.packet_frames)),
                    rows_opts,
                )
                .with_lance_version(meta.lance_version),
            )?)
        } else {
            Source::Webp(
                LanceRows::with_schema(dir, fragment_rows, frames_schema(), opts)
                    .with_lance_version(meta.lance_version),
            )
        };
        let storage = if segments {
            VideoStorage::Segments
        } else {
            VideoStorage::Frames
        };
        let mut meta_cols: Vec<(String, DataType)> = Vec::new();
        for v in &meta.videos {
            for k in v.metadata.keys() {
                if k != &meta.video_column
                    && !BUILTIN.contains(&k.as_str())
                    && !meta_cols.iter().any(|(n, _)| n == k)
                {
                    meta_cols.push((k.clone(), DataType::Null));
                }
            }
        }
        for (k, t) in &mut meta_cols {
            *t = infer_type(
                meta.videos
                    .iter()
                    .map(|v| v.metadata.get(k.as_str()).cloned()),
            );
        }
        let mut features = Features::new()
            .with(meta.video_column.clone(), Feature::video(storage))
            .with("video_idx", Feature::value(Dtype::Int64))
            .with("filename", Feature::value(Dtype::String))
            .with("start_frame", Feature::value(Dtype::Int64))
            .with(
                "frame_indices",
                Feature::sequence(Feature::value(Dtype::Int64)),
            )
            .with("sample_idx", Feature::value(Dtype::Int64));
        let video_type = if segments {
            decoded_window_type()
        } else {
            DataType::List(Arc::new(Field::new("item", DataType::LargeBinary, true)))
        };
        let mut fields = vec![
            Field::new(meta.video_column.clone(), video_type, true),
            Field::new("video_idx", DataType::Int64, true),
            Field::new("filename", DataType::Utf8, true),
            Field::new("start_frame", DataType::Int64, true),
            Field::new(
                "frame_indices",
                DataType::List(Arc::new(Field::new("item", DataType::Int64, true))),
                true,
            ),
            Field::new("sample_idx", DataType::Int64, true),
        ];
        for (k, t) in &meta_cols {
            let d = match t {
                DataType::Int64 => Dtype::Int64,
                DataType::Float64 => Dtype::Float64,
                DataType::Boolean => Dtype::Bool,
                _ => Dtype::String,
            };
            features.insert(k.clone(), Feature::value(d));
            fields.push(Field::new(k.clone(), t.clone(), true));
        }
        let features = Arc::new(features);
        let decoder = RowDecoder::new(
            features.clone(),
            DecodeOptions::default().with_cache_dir(dir),
        );
        let mut shard_videos = Vec::new();
        let mut shard_counts = Vec::new();
        for v in 0..plan.num_videos() {
            let r = plan.windows_of(v);
            if !r.is_empty() {
                shard_videos.push(v);
                shard_counts.push(r.end - r.start);
            }
        }
        Ok(LanceVideoFrames {
            inner: Arc::new(Inner {
                core: RowsCore::new(
                    dir,
                    features,
                    Arc::new(Schema::new(fields)),
                    decoder,
                    shard_counts,
                ),
                meta,
                plan,
                source,
                read_opts: opts,
                meta_cols,
                shard_videos,
            }),
        })
    }

    /// The window plan.
    pub fn plan(&self) -> &SegmentPlan {
        &self.inner.plan
    }

    /// Segments this reader has decoded since it was opened (always 0 for
    /// a frames cache): a read of frames the segment decoded last still
    /// holds decodes none, so a count that grows by less than the segments
    /// read shows overlapping windows served without decoding.
    pub fn segments_decoded(&self) -> u64 {
        match &self.inner.source {
            Source::Webp(_) => 0,
            Source::Segments(s) => s.decoded(),
        }
    }

    /// The cache's metadata (videos, sizes, encoding).
    pub fn metadata(&self) -> &VideoFramesMetadata {
        &self.inner.meta
    }

    /// The same cache cut into other windows.
    ///
    /// # Errors
    /// As [`LanceVideoFrames::new`].
    pub fn with_windows(&self, spec: WindowSpec) -> Result<Self> {
        let i = &self.inner;
        LanceVideoFrames::new(
            &i.core.dir,
            i.meta.clone(),
            i.source.rows().shard_row_counts(),
            spec,
            i.read_opts,
        )
    }

    /// Where window `i` is: video position, start frame, frame numbers, rows.
    fn locate(&self, i: u64) -> (usize, u64, Vec<u64>) {
        let (v, start) = self.inner.plan.locate(i);
        (v, start, self.inner.plan.frame_indices(i))
    }

    /// Window numbers of `indices` (negative counts from the end).
    fn window_numbers(&self, indices: &[i64]) -> Result<Vec<u64>> {
        let n = self.len();
        indices.iter().map(|&i| normalize_index(i, n)).collect()
    }

    /// The WebP bytes of each frame row read by [`Self::frame_bytes`].
    fn webp_frames<'a>(&self, batch: &'a RecordBatch) -> Result<Vec<&'a [u8]>> {
        let bytes = batch.column(2).as_binary_opt::<i64>().ok_or_else(|| {
            Error::corrupt(&self.inner.core.dir, "frame bytes are not large_binary")
        })?;
        Ok(bytes.iter().map(|b| b.unwrap_or_default()).collect())
    }

    /// The frame rows of windows, concatenated (a WebP cache's).
    fn frame_bytes(&self, frames: &LanceRows, windows: &[u64]) -> Result<(RecordBatch, usize)> {
        let t = self.inner.plan.spec().window_length as usize;
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
                let t = self.inner.plan.spec().window_length as usize;
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
        let t = self.inner.plan.spec().window_length as usize;
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
    fn segment_windows(&self, s: &SegmentFrames, ws: &[u64], group: usize) -> Result<Vec<Vec<u8>>> {
        let t = self.inner.plan.spec().window_length as usize;
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

    /// `n` window indices drawn at random with a seed, balanced per video on request.
    pub fn sample(&self, n: usize, seed: u64, balanced: bool) -> Vec<i64> {
        self.inner
            .plan
            .sample(n, seed, balanced)
            .into_iter()
            .map(|i| i as i64)
            .collect()
    }

    /// Raw window rows for window numbers (already in range).
    fn raw(&self, ws: &[u64]) -> Result<RecordBatch> {
        let n = ws.len();
        let t = self.inner.plan.spec().window_length as usize;
        let frames: ArrayRef = match &self.inner.source {
            Source::Webp(rows) => {
                let (batch, t) = self.frame_bytes(rows, ws)?;
                let item = Arc::new(Field::new("item", DataType::LargeBinary, true));
                let bytes = batch.column(2).clone();
                let bytes = match bytes.data_type() {
                    DataType::LargeBinary => bytes,
                    other => {
                        return Err(Error::corrupt(
                            &self.inner.core.dir,
                            format!("frame bytes are {other}, not large_binary"),
                        ))
                    }
                };
                Arc::new(
                    ListArray::try_new(
                        item,
                        OffsetBuffer::from_lengths(std::iter::repeat_n(t, n)),
                        bytes,
                        None,
                    )
                    .map_err(|e| Error::arrow(Some(&self.inner.core.dir), e))?,
                )
            }
            Source::Segments(s) => {
                // No per-window encoded form: the raw cell is the decoded
                // window and its shape.
                let decoded = self.segment_windows(s, ws, 1)?;
                let shapes = ws.iter().map(|&w| {
                    let (v, _) = self.inner.plan.locate(w);
                    let video = &self.inner.meta.videos[v];
                    [t as i64, video.h as i64, video.w as i64, 3]
                });
                decoded_window_array(shapes, decoded.into_iter())
                    .map_err(|e| Error::arrow(Some(&self.inner.core.dir), e))?
            }
        };
        let mut vidx = Vec::with_capacity(n);
        let mut fname = StringBuilder::new();
        let mut start = Vec::with_capacity(n);
        let mut fidx = Vec::with_capacity(n * t);
        for &w in ws {
            let (v, s, idx) = self.locate(w);
            vidx.push(v as i64);
            fname.append_option(self.inner.meta.videos[v].path.as_deref());
            start.push(s as i64);
            fidx.extend(idx.iter().map(|&x| x as i64));
        }
        let fidx = ListArray::try_new(
            Arc::new(Field::new("item", DataType::Int64, true)),
            OffsetBuffer::from_lengths(std::iter::repeat_n(t, n)),
            Arc::new(Int64Array::from(fidx)),
            None,
        )
        .map_err(|e| Error::arrow(Some(&self.inner.core.dir), e))?;
        let mut cols: Vec<ArrayRef> = vec![
            frames,
            Arc::new(Int64Array::from(vidx)),
            Arc::new(fname.finish()),
            Arc::new(Int64Array::from(start)),
            Arc::new(fidx),
            Arc::new(Int64Array::from(
                ws.iter().map(|&w| w as i64).collect::<Vec<_>>(),
            )),
        ];
        for (k, t) in &self.inner.meta_cols {
            let vals = ws.iter().map(|&w| {
                let (v, _) = self.inner.plan.locate(w);
                self.inner.meta.videos[v]
                    .metadata
                    .get(k.as_str())
                    .cloned()
                    .unwrap_or(J::Null)
            });
            let col: ArrayRef = match t {
                DataType::Int64 => {
                    let mut b = Int64Builder::new();
                    vals.for_each(|j| b.append_option(j.as_i64()));
                    Arc::new(b.finish())
                }
                DataType::Float64 => {
                    let mut b = Float64Builder::new();
                    vals.for_each(|j| b.append_option(j.as_f64()));
                    Arc::new(b.finish())
                }
                DataType::Boolean => {
                    let mut b = BooleanBuilder::new();
                    vals.for_each(|j| b.append_option(j.as_bool()));
                    Arc::new(b.finish())
                }
                _ => Arc::new(StringArray::from_iter(vals.map(|j| match j {
                    J::Null => None,
                    J::String(s) => Some(s),
                    other => Some(other.to_string()),
                }))),
            };
            cols.push(col);
        }
        RecordBatch::try_new(self.inner.core.schema.clone(), cols)
            .map_err(|e| Error::arrow(Some(&self.inner.core.dir), e))
    }
}

impl Backend for LanceVideoFrames {
    fn layout(&self) -> &'static str {
        match self.inner.source {
            Source::Webp(_) => LAYOUT_LANCE_VIDEO_FRAMES,
            Source::Segments(_) => LAYOUT_LANCE_VIDEO_SEGMENTS,
        }
    }

    fn core(&self) -> &RowsCore {
        &self.inner.core
    }

    fn get_raw(&self, index: i64) -> Result<RecordBatch> {
        let w = normalize_index(index, self.len())?;
        self.raw(&[w])
    }

    fn get(&self, index: i64) -> Result<Row> {
        let b = self.get_raw(index)?;
        self.inner.core.decoder.decode_row(&b, 0)
    }

    fn take(&self, indices: &[i64]) -> Result<RecordBatch> {
        if indices.is_empty() {
            return Ok(RecordBatch::new_empty(self.schema()));
        }
        let n = self.len();
        let ws = indices
            .iter()
            .map(|&i| normalize_index(i, n))
            .collect::<Result<Vec<u64>>>()?;
        self.raw(&ws)
    }

    fn slice(&self, start: u64, len: u64) -> Result<RecordBatch> {
        let n = self.len();
        if start > n {
            return Err(Error::IndexOutOfRange {
                index: start.min(i64::MAX as u64) as i64,
                len: n,
            });
        }
        let end = start.saturating_add(len).min(n);
        if end == start {
            return Ok(RecordBatch::new_empty(self.schema()));
        }
        self.raw(&(start..end).collect::<Vec<_>>())
    }

    fn iter_batches(&self, opts: &IterOptions) -> Result<BatchIter<'_>> {
        let order = shard_order(opts, self.num_shards())?;
        let mut ranges = Vec::new();
        for s in order {
            let r = self.inner.plan.windows_of(self.inner.shard_videos[s]);
            let ws: Vec<u64> = r.collect();
            for c in ws.chunks(ITER_WINDOWS) {
                ranges.push(c.to_vec());
            }
        }
        let this = self.clone();
        Ok(Box::new(ranges.into_iter().map(move |ws| this.raw(&ws))))
    }

    fn reopened(&self) -> Box<dyn Backend> {
        let i = &self.inner;
        Box::new(
            LanceVideoFrames::new(
                &i.core.dir,
                i.meta.clone(),
                i.source.rows().shard_row_counts(),
                i.plan.spec(),
                i.read_opts,
            )
            .expect("the same plan was valid when this backend was made"),
        )
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
