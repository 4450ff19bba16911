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

mod rows;
mod windows;

use std::path::Path;
use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema};
use serde_json::Value as J;

use crate::cache::metadata::VideoFramesMetadata;
use crate::error::Result;
use crate::features::decode::{DecodeOptions, RowDecoder};
use crate::features::{Dtype, Feature, Features, VideoStorage};
use crate::layouts::backend::{normalize_index, Backend, RowsCore};
use crate::layouts::video_frames::format::{frames_schema, segments_schema};
use crate::layouts::video_frames::segments::SegmentFrames;
use crate::layouts::{LanceReadOptions, LanceRows};
use crate::video::plan::{SegmentPlan, WindowSpec};

pub use rows::decoded_window_type;
pub use windows::{Window, WindowBatch};

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
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a bad
    /// window spec or when no video is long enough for one window.
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

    /// `n` window indices drawn at random with a seed, balanced per video on request.
    pub fn sample(&self, n: usize, seed: u64, balanced: bool) -> Vec<i64> {
        self.inner
            .plan
            .sample(n, seed, balanced)
            .into_iter()
            .map(|i| i as i64)
            .collect()
    }
}
