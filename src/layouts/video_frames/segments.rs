//! Frames of a `lance-video-segments` cache: a read takes the rows of the
//! segments its frames fall in (one batched take), decodes each segment
//! from its keyframe with a decoder of its own, stops after the last frame
//! asked of it, and converts only the frames asked for to RGB, each
//! straight into the caller's output as the decoder puts it out (while it
//! is in the CPU's caches). Segments decode in parallel on the read pool.
//! The frames of the last segment decoded are kept as the
//! decoder gave them (planar YUV in the decoder's own buffers), so a read
//! of frames it holds (overlapping windows) decodes nothing. With the frame
//! each packet presents (`packet_frames`), a segment leaves out the
//! pictures nothing refers to whose frames are not asked for (H.264
//! pictures with `nal_ref_idc` 0, AV1 temporal units that refresh no
//! reference slot).

use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::RecordBatch;
use rayon::prelude::*;

use crate::cache::metadata::{VideoFramesMetadata, METADATA_FILE};
use crate::error::{Error, Result};
use crate::layouts::backend::Backend;
use crate::layouts::LanceRows;
use crate::video::segment::{
    decode_segment_frames, is_permutation, DecodedFrame, SegmentCodec, SegmentRead,
    MAX_FRAMES_PER_SEGMENT,
};

use super::format::{packet_frames_at, PACKET_FRAMES};

/// The decoded frames of one segment, by position in it.
#[derive(Debug)]
struct Decoded {
    row: u64,
    frames: BTreeMap<usize, DecodedFrame>,
}

/// The segments of a cache, read as frames.
#[derive(Debug)]
pub(super) struct SegmentFrames {
    pub(super) rows: LanceRows,
    codec: SegmentCodec,
    per: u64,
    dir: PathBuf,
    last: Mutex<Option<Arc<Decoded>>>,
    /// Segments decoded so far.
    decoded: AtomicU64,
}

/// What a read asks of one segment.
struct Ask {
    row: u64,
    video: usize,
    segment: u64,
    /// (position in the segment, slot in the output).
    frames: Vec<(usize, usize)>,
}

/// One segment's part of a read: what it asks, where each frame goes, and
/// the decoded segment when the last one decoded holds every frame.
struct Work<'a> {
    ask: Ask,
    outs: Vec<(usize, &'a mut [MaybeUninit<u8>])>,
    cached: Option<Arc<Decoded>>,
    /// Row of the segment in the batch of taken rows.
    k: usize,
}

impl SegmentFrames {
    pub(super) fn new(dir: &Path, meta: &VideoFramesMetadata, rows: LanceRows) -> Result<Self> {
        let s = meta
            .segments
            .as_ref()
            .ok_or_else(|| Error::corrupt(dir, "a segments cache without its description"))?;
        let codec: SegmentCodec = s
            .codec
            .parse()
            .map_err(|e: Error| Error::corrupt(dir, e.to_string()))?;
        // No build writes longer segments: a longer one is damage, and would
        // let a few rows claim billions of frames (windows are per frame).
        if s.frames_per_segment > MAX_FRAMES_PER_SEGMENT {
            return Err(Error::metadata(
                dir.join(METADATA_FILE),
                format!(
                    "segments of {} frames; a segment holds at most {MAX_FRAMES_PER_SEGMENT}",
                    s.frames_per_segment
                ),
            ));
        }
        Ok(SegmentFrames {
            rows,
            codec,
            per: u64::from(s.frames_per_segment.max(1)),
            dir: dir.to_path_buf(),
            last: Mutex::new(None),
            decoded: AtomicU64::new(0),
        })
    }

    /// Segments decoded since the reader opened.
    pub(super) fn decoded(&self) -> u64 {
        self.decoded.load(Ordering::Relaxed)
    }

    fn bad(&self, reason: String) -> Error {
        Error::Video {
            path: self.dir.clone(),
            reason,
        }
    }

    /// Writes packed RGB of each `(video, frame)` asked for (duplicates
    /// allowed) into its output in `outs` (one per frame asked, in order,
    /// each the frame's size at its video's stored size). Every output is
    /// written when this returns `Ok`.
    pub(super) fn read_into(
        &self,
        meta: &VideoFramesMetadata,
        wanted: &[(usize, u64)],
        outs: Vec<&mut [MaybeUninit<u8>]>,
    ) -> Result<()> {
        if outs.len() != wanted.len() {
            return Err(self.bad(format!(
                "{} outputs for {} frames",
                outs.len(),
                wanted.len()
            )));
        }
        let mut asks: BTreeMap<u64, Ask> = BTreeMap::new();
        for (slot, &(v, f)) in wanted.iter().enumerate() {
            let video = &meta.videos[v];
            if f >= video.t {
                return Err(self.bad(format!(
                    "frame {f} of video {v}, which has {} frames",
                    video.t
                )));
            }
            let segment = f / self.per;
            let row = video.start_row + segment;
            asks.entry(row)
                .or_insert_with(|| Ask {
                    row,
                    video: v,
                    segment,
                    frames: Vec::new(),
                })
                .frames
                .push(((f % self.per) as usize, slot));
        }
        // Served by the segment decoded last, when it holds every frame asked.
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut outs: Vec<Option<&mut [MaybeUninit<u8>]>> = outs.into_iter().map(Some).collect();
        let mut rows = Vec::new();
        let work: Vec<Work> = asks
            .into_values()
            .map(|ask| {
                let cached = last
                    .as_ref()
                    .filter(|c| {
                        c.row == ask.row && ask.frames.iter().all(|(p, _)| c.frames.contains_key(p))
                    })
                    .cloned();
                let k = rows.len();
                if cached.is_none() {
                    rows.push(ask.row as i64);
                }
                let outs = ask
                    .frames
                    .iter()
                    .map(|&(p, slot)| (p, outs[slot].take().expect("one ask per slot")))
                    .collect();
                Work {
                    ask,
                    outs,
                    cached,
                    k,
                }
            })
            .collect();
        let batch = if rows.is_empty() {
            None
        } else {
            Some(self.rows.take(&rows)?)
        };
        // On the read pool even for one segment: the decoder's buffers are
        // the read pool threads' own, reused from segment to segment.
        // Only the last segment decoded is kept; the others' frames go back
        // to their decoder's buffers as soon as they are converted. Kept to
        // the end of a read, they grew the decoders' buffer pools, which
        // keep what they allocate: a process at 164 MB after one window
        // stayed at 435 MB after a batch of 128 testsrc2 windows was
        // dropped (179 MB now).
        let kept = work.iter().rposition(|w| w.cached.is_none());
        let decoded: Vec<Option<Decoded>> = crate::util::in_pool(|| {
            work.into_par_iter()
                .enumerate()
                .map(|(j, mut w)| match w.cached {
                    // Converted here, one after another: a second
                    // thread's conversions of the same frames cost more in
                    // moving them between the CPUs' caches than they gain.
                    Some(d) => {
                        for (p, out) in &mut w.outs {
                            d.frames[p].to_rgb(out).map_err(|e| {
                                self.bad(format!(
                                    "frame {p} of segment {} of video {}: {e}",
                                    w.ask.segment, w.ask.video
                                ))
                            })?;
                        }
                        Ok(None)
                    }
                    None => {
                        let b = batch.as_ref().ok_or_else(|| {
                            self.bad("a segment to decode without its row".into())
                        })?;
                        let d = self.decode(meta, b, w.k, &w.ask, &mut w.outs)?;
                        Ok((kept == Some(j)).then_some(d))
                    }
                })
                .collect::<Result<Vec<_>>>()
        })??;
        if let Some(d) = decoded.into_iter().flatten().last() {
            *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(d));
        }
        Ok(())
    }

    /// Decodes row `k` of `batch`, the segment `a` asks of, converting each
    /// frame asked into its outputs (by position) as it comes out.
    fn decode(
        &self,
        meta: &VideoFramesMetadata,
        batch: &RecordBatch,
        k: usize,
        a: &Ask,
        outs: &mut [(usize, &mut [MaybeUninit<u8>])],
    ) -> Result<Decoded> {
        let where_ = || format!("segment {} of video {} (row {})", a.segment, a.video, a.row);
        let col = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or_else(|| self.bad(format!("{}: no '{name}' column", where_())))
        };
        let first = col("first_frame")?
            .as_primitive_opt::<Int64Type>()
            .map(|c| c.value(k));
        let count = col("frame_count")?
            .as_primitive_opt::<Int32Type>()
            .map(|c| c.value(k));
        let data = col("data")?.as_binary_opt::<i64>().map(|c| c.value(k));
        let offsets = col("packet_offsets")?
            .as_list_opt::<i32>()
            .map(|c| c.value(k));
        let (Some(first), Some(count), Some(data), Some(offsets)) = (first, count, data, offsets)
        else {
            return Err(self.bad(format!(
                "{}: the segment columns have unexpected types",
                where_()
            )));
        };
        let offsets: Vec<u64> = offsets
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| self.bad(format!("{}: packet offsets are not int64", where_())))?
            .values()
            .iter()
            .map(|&o| o.max(0) as u64)
            .collect();
        // The frame each packet presents, when the cache has them; a row
        // whose list does not name each frame once decodes every packet.
        let packet_frames: Option<Vec<i64>> = match batch.column_by_name(PACKET_FRAMES) {
            None => None,
            Some(c) => {
                let frames = packet_frames_at(c, k).ok_or_else(|| {
                    self.bad(format!("{}: packet frames are not int32 lists", where_()))
                })?;
                is_permutation(&frames, count.max(0) as usize).then_some(frames)
            }
        };
        let video = &meta.videos[a.video];
        let want_first = a.segment * self.per;
        let want_count = self.per.min(video.t - want_first);
        if first != want_first as i64 || count as i64 != want_count as i64 {
            return Err(self.bad(format!(
                "{} holds frames {first}..+{count}, the metadata says {want_first}..+{want_count}",
                where_()
            )));
        }
        let (w, h) = (video.w as u32, video.h as u32);
        let coded = (w + (w & 1), h + (h & 1));
        let picked: Vec<bool> = {
            let mut p = vec![false; want_count as usize];
            for &(pos, _) in &a.frames {
                p[pos] = true;
            }
            p
        };
        let upto = a.frames.iter().map(|(p, _)| p + 1).max().unwrap_or(0);
        self.decoded.fetch_add(1, Ordering::Relaxed);
        let (n, frames) = decode_segment_frames(
            &SegmentRead {
                codec: self.codec,
                coded,
                crop: (w, h),
                data,
                packet_offsets: &offsets,
                packet_frames: packet_frames.as_deref(),
                pick: &|i| picked.get(i).copied().unwrap_or(false),
                upto,
            },
            &mut |i, f| {
                for (_, out) in outs.iter_mut().filter(|(p, _)| *p == i) {
                    f.to_rgb(out).map_err(|e| format!("frame {i}: {e}"))?;
                }
                Ok(())
            },
        )
        .map_err(|e| self.bad(format!("{}: {e}", where_())))?;
        let frames: BTreeMap<usize, DecodedFrame> = frames.into_iter().collect();
        if n < upto || a.frames.iter().any(|(p, _)| !frames.contains_key(p)) {
            return Err(self.bad(format!(
                "{} decoded to {n} frames, {upto} were needed",
                where_()
            )));
        }
        Ok(Decoded { row: a.row, frames })
    }
}
