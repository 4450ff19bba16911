//! Windows as Arrow rows: the raw window rows the `Backend` trait reads and
//! iterates (WebP frames as a list, or a segments cache's decoded window
//! and its shape), with each video's metadata as columns.

use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, StringBuilder};
use arrow_array::Array;
use arrow_array::{ArrayRef, Int64Array, ListArray, RecordBatch, StringArray};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field};
use serde_json::Value as J;

use crate::cache::metadata::{LAYOUT_LANCE_VIDEO_FRAMES, LAYOUT_LANCE_VIDEO_SEGMENTS};
use crate::error::{Error, Result};
use crate::layouts::backend::{
    normalize_index, shard_order, Backend, BatchIter, IterOptions, RowsCore,
};
use crate::value::Row;

use super::{LanceVideoFrames, Source};

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

impl LanceVideoFrames {
    /// Raw window rows for window numbers (already in range).
    fn raw(&self, ws: &[u64]) -> Result<RecordBatch> {
        let n = ws.len();
        let t = self.inner.plan.spec().window_length() as usize;
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
