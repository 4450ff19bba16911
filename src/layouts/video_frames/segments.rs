//! Frames of a `lance-video-segments` cache: a read takes the rows of the
//! segments its frames fall in (one batched take), decodes each segment
//! from its keyframe with a decoder of its own, stops after the last frame
//! asked of it, and converts only the frames asked for to RGB. Segments
//! decode in parallel on the read pool; the last one decoded is kept, so
//! a read of frames it already holds (overlapping windows) decodes
//! nothing. With the frame each packet presents (`packet_frames`), a
//! segment leaves out the pictures nothing refers to whose frames are not
//! asked for (H.264 pictures with `nal_ref_idc` 0, AV1 temporal units that
//! refresh no reference slot).
//!
//! Decoded frames live in buffers of the reader's own pool: a buffer the
//! last holder drops goes back to the pool, and the next decode fills it
//! again. Frames are allocated on the read pool's threads and dropped on
//! the caller's; through the allocator, glibc gave that memory back to the
//! system and faulted it in again at every read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::RecordBatch;
use rayon::prelude::*;

use crate::cache::metadata::VideoFramesMetadata;
use crate::error::{Error, Result};
use crate::layouts::backend::Backend;
use crate::layouts::LanceRows;
use crate::video::segment::{decode_segment_picked, is_permutation, SegmentCodec};

use super::format::{packet_frames_at, PACKET_FRAMES};

/// Bytes of idle frame buffers a reader keeps for its next decodes (a
/// window of 16 frames of 1280x720 is 44 MB; 320x240 frames, 291 buffers).
const POOL_BYTES: usize = 64 << 20;

/// Idle frame buffers of one reader.
#[derive(Debug, Default)]
struct FramePool {
    free: Mutex<(Vec<Vec<u8>>, usize)>,
}

impl FramePool {
    /// A buffer holding `bytes`: an idle one when there is one.
    fn filled(self: &Arc<Self>, bytes: &[u8]) -> FrameBuf {
        let reused = {
            let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
            let (bufs, held) = &mut *free;
            let b = bufs
                .iter()
                .rposition(|b| b.capacity() >= bytes.len())
                .map(|i| bufs.swap_remove(i));
            if let Some(b) = &b {
                *held -= b.capacity();
            }
            b
        };
        let mut buf = reused.unwrap_or_else(|| Vec::with_capacity(bytes.len()));
        buf.clear();
        buf.extend_from_slice(bytes);
        FrameBuf {
            bytes: buf,
            pool: Arc::downgrade(self),
        }
    }

    /// Takes a buffer back, unless the pool holds its budget already.
    fn put(&self, buf: Vec<u8>) {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let (bufs, held) = &mut *free;
        if *held + buf.capacity() <= POOL_BYTES {
            *held += buf.capacity();
            bufs.push(buf);
        }
    }
}

/// The packed RGB bytes of one decoded frame, in a buffer that goes back to
/// its reader's pool when dropped.
#[derive(Debug)]
pub(super) struct FrameBuf {
    bytes: Vec<u8>,
    pool: Weak<FramePool>,
}

impl std::ops::Deref for FrameBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for FrameBuf {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.put(std::mem::take(&mut self.bytes));
        }
    }
}

/// The decoded frames of one segment, by position in it.
#[derive(Debug)]
struct Decoded {
    row: u64,
    frames: BTreeMap<usize, Arc<FrameBuf>>,
}

/// The segments of a cache, read as frames.
#[derive(Debug)]
pub(super) struct SegmentFrames {
    pub(super) rows: LanceRows,
    codec: SegmentCodec,
    per: u64,
    dir: PathBuf,
    last: Mutex<Option<Arc<Decoded>>>,
    pool: Arc<FramePool>,
}

/// What a read asks of one segment.
struct Ask {
    row: u64,
    video: usize,
    segment: u64,
    /// (position in the segment, slot in the output).
    frames: Vec<(usize, usize)>,
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
        Ok(SegmentFrames {
            rows,
            codec,
            per: u64::from(s.frames_per_segment.max(1)),
            dir: dir.to_path_buf(),
            last: Mutex::new(None),
            pool: Arc::default(),
        })
    }

    fn bad(&self, reason: String) -> Error {
        Error::Video {
            path: self.dir.clone(),
            reason,
        }
    }

    /// Packed RGB of each `(video, frame)` asked for, in order (duplicates
    /// allowed), at the video's stored size.
    pub(super) fn frames(
        &self,
        meta: &VideoFramesMetadata,
        wanted: &[(usize, u64)],
    ) -> Result<Vec<Arc<FrameBuf>>> {
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
        let mut out: Vec<Option<Arc<FrameBuf>>> = vec![None; wanted.len()];
        // Served by the segment decoded last, when it holds every frame asked.
        let cached = self.last.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(c) = &cached {
            if let Some(a) = asks.get(&c.row) {
                if a.frames.iter().all(|(p, _)| c.frames.contains_key(p)) {
                    for &(p, slot) in &a.frames {
                        out[slot] = Some(c.frames[&p].clone());
                    }
                    asks.remove(&c.row);
                }
            }
        }
        if !asks.is_empty() {
            let rows: Vec<i64> = asks.keys().map(|&r| r as i64).collect();
            let batch = self.rows.take(&rows)?;
            let asks: Vec<Ask> = asks.into_values().collect();
            // On the read pool even for one segment: decoded on a caller's
            // main thread, the frames' buffers come from glibc's main heap,
            // which gives memory back and faults it in again at every read
            // (34 times the page faults, 9% slower windows, measured).
            let decoded: Vec<Decoded> = crate::util::in_read_pool(|| {
                asks.par_iter()
                    .enumerate()
                    .map(|(k, a)| self.decode(meta, &batch, k, a))
                    .collect::<Result<Vec<_>>>()
            })?;
            for (a, d) in asks.iter().zip(&decoded) {
                for &(p, slot) in &a.frames {
                    out[slot] = Some(d.frames[&p].clone());
                }
            }
            if let Some(d) = decoded.into_iter().last() {
                *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(d));
            }
        }
        Ok(out
            .into_iter()
            .map(|f| f.expect("every slot is filled"))
            .collect())
    }

    /// Decodes row `k` of `batch`, the segment `a` asks of.
    fn decode(
        &self,
        meta: &VideoFramesMetadata,
        batch: &RecordBatch,
        k: usize,
        a: &Ask,
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
        let mut frames = BTreeMap::new();
        let n = decode_segment_picked(
            self.codec,
            coded,
            (w, h),
            data,
            &offsets,
            packet_frames.as_deref(),
            &|i| picked.get(i).copied().unwrap_or(false),
            upto,
            |i, rgb| {
                frames.insert(i, Arc::new(self.pool.filled(rgb)));
            },
        )
        .map_err(|e| self.bad(format!("{}: {e}", where_())))?;
        if n < upto || frames.len() != picked.iter().filter(|&&p| p).count() {
            return Err(self.bad(format!(
                "{} decoded to {n} frames, {upto} were needed",
                where_()
            )));
        }
        Ok(Decoded { row: a.row, frames })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_frame_buffer_is_filled_again_and_the_pool_keeps_its_budget() {
        let pool = Arc::new(FramePool::default());
        let a = pool.filled(&[7u8; 1000]);
        let at = a.as_ptr();
        assert_eq!(&*a, &[7u8; 1000][..]);
        drop(a);
        // The same memory, holding the new bytes only (shorter ones too).
        let b = pool.filled(&[9u8; 600]);
        assert_eq!(b.as_ptr(), at);
        assert_eq!(&*b, &[9u8; 600][..]);
        // A buffer too small for a frame is not handed out for it.
        drop(b);
        let big = pool.filled(&[1u8; 5000]);
        assert_ne!(big.as_ptr(), at);
        assert_eq!(big.len(), 5000);
        drop(big);
        assert_eq!(pool.free.lock().unwrap().1, 1000 + 5000);
        // Beyond the budget, dropped buffers go back to the allocator.
        let many: Vec<FrameBuf> = (0..(POOL_BYTES / (1 << 20)) + 4)
            .map(|_| pool.filled(&vec![3u8; 1 << 20]))
            .collect();
        drop(many);
        let held = pool.free.lock().unwrap().1;
        assert!(
            held <= POOL_BYTES && held > POOL_BYTES - (2 << 20),
            "{held}"
        );
        // A buffer outliving its reader's pool is freed, not kept.
        let orphan = pool.filled(&[5u8; 10]);
        drop(pool);
        drop(orphan);
    }
}
