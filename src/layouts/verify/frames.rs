//! The rows of a video cache checked against its videos' entries as a
//! scan goes: each frame a WebP of the recorded size, each segment
//! decoding to exactly its frames.

/// Checks frames rows against the videos' entries as a scan goes.
pub(super) struct FrameCheck<'a> {
    pub(super) videos: &'a [crate::cache::metadata::VideoEntry],
    pub(super) video: usize,
    pub(super) bad: Option<String>,
    /// A segments cache's codec and frames per segment.
    pub(super) segments: Option<(crate::video::segment::SegmentCodec, u64)>,
}

impl FrameCheck<'_> {
    pub(super) fn batch(&mut self, first_row: u64, batch: &arrow_array::RecordBatch) {
        use arrow_array::cast::AsArray;
        use arrow_array::types::Int32Type;
        if self.bad.is_some() {
            return;
        }
        if let Some((codec, per)) = self.segments {
            if let Err(bad) = self.segment_batch(codec, per, first_row, batch) {
                self.bad = Some(bad);
            }
            return;
        }
        let (Some(ids), Some(idx), Some(bytes)) = (
            batch.column(0).as_primitive_opt::<Int32Type>(),
            batch.column(1).as_primitive_opt::<Int32Type>(),
            batch.column(2).as_binary_opt::<i64>(),
        ) else {
            self.bad = Some("the frames table does not have the frames schema".into());
            return;
        };
        for r in 0..batch.num_rows() {
            let row = first_row + r as u64;
            while self
                .videos
                .get(self.video)
                .is_some_and(|v| row >= v.start_row + v.t)
            {
                self.video += 1;
            }
            let Some(v) = self.videos.get(self.video) else {
                self.bad = Some(format!("row {row} belongs to no recorded video"));
                return;
            };
            let want_idx = row - v.start_row;
            if i64::from(ids.value(r)) != v.id || u64::try_from(idx.value(r)).ok() != Some(want_idx)
            {
                self.bad = Some(format!(
                    "row {row} is video {} frame {}, the metadata says video {} frame {want_idx}",
                    ids.value(r),
                    idx.value(r),
                    v.id
                ));
                return;
            }
            match crate::video::webp::dimensions(bytes.value(r)) {
                Ok((w, h)) if w as u64 == v.w && h as u64 == v.h => {}
                Ok((w, h)) => {
                    self.bad = Some(format!(
                        "row {row} (video {} frame {want_idx}) is {w}x{h}, the metadata says {}x{}",
                        v.id, v.w, v.h
                    ));
                    return;
                }
                Err(e) => {
                    self.bad = Some(format!(
                        "row {row} (video {} frame {want_idx}) is not a WebP frame: {e}",
                        v.id
                    ));
                    return;
                }
            }
        }
    }
}

impl FrameCheck<'_> {
    /// Segment rows: each the next segment of its video, with the frames
    /// it should hold, decoding (without conversion) to exactly them.
    fn segment_batch(
        &mut self,
        codec: crate::video::segment::SegmentCodec,
        per: u64,
        first_row: u64,
        batch: &arrow_array::RecordBatch,
    ) -> std::result::Result<(), String> {
        use arrow_array::cast::AsArray;
        use arrow_array::types::{Int32Type, Int64Type};
        let (Some(ids), Some(seg), Some(first), Some(count), Some(data), Some(offsets)) = (
            batch.column(0).as_primitive_opt::<Int32Type>(),
            batch.column(1).as_primitive_opt::<Int32Type>(),
            batch.column(2).as_primitive_opt::<Int64Type>(),
            batch.column(3).as_primitive_opt::<Int32Type>(),
            batch.column(4).as_binary_opt::<i64>(),
            batch.column(5).as_list_opt::<i32>(),
        ) else {
            return Err("the segments table does not have the segments schema".into());
        };
        for r in 0..batch.num_rows() {
            let row = first_row + r as u64;
            let rows_of = |v: &crate::cache::metadata::VideoEntry| v.t.div_ceil(per);
            while self
                .videos
                .get(self.video)
                .is_some_and(|v| row >= v.start_row + rows_of(v))
            {
                self.video += 1;
            }
            let v = self
                .videos
                .get(self.video)
                .ok_or_else(|| format!("row {row} belongs to no recorded video"))?;
            let s = row - v.start_row;
            let (want_first, want_count) = (s * per, per.min(v.t - s * per));
            if i64::from(ids.value(r)) != v.id
                || i64::from(seg.value(r)) != s as i64
                || first.value(r) != want_first as i64
                || i64::from(count.value(r)) != want_count as i64
            {
                return Err(format!(
                    "row {row} is video {} segment {} (frames {}..+{}), the metadata says video {} segment {s} (frames {want_first}..+{want_count})",
                    ids.value(r),
                    seg.value(r),
                    first.value(r),
                    count.value(r),
                    v.id
                ));
            }
            let offs: Vec<u64> = offsets
                .value(r)
                .as_primitive_opt::<Int64Type>()
                .map(|o| o.values().iter().map(|&x| x.max(0) as u64).collect())
                .unwrap_or_default();
            // The frame each packet presents, when the cache records them:
            // none (the encoder gave no timestamps) or each frame once.
            if let Some(list) = batch.columns().get(6) {
                match crate::layouts::video_frames::format::packet_frames_at(list, r) {
                    Some(f)
                        if f.is_empty()
                            || (f.len() + 1 == offs.len()
                                && crate::video::segment::is_permutation(
                                    &f,
                                    want_count as usize,
                                )) => {}
                    _ => {
                        return Err(format!(
                            "row {row} (video {} segment {s}): its packet frames do not name each of its {want_count} frames once, one per packet",
                            v.id
                        ))
                    }
                }
            }
            let (w, h) = (v.w as u32, v.h as u32);
            let n = crate::video::segment::decode_segment_picked(
                &crate::video::segment::SegmentRead {
                    codec,
                    coded: (w + (w & 1), h + (h & 1)),
                    crop: (w, h),
                    data: data.value(r),
                    packet_offsets: &offs,
                    packet_frames: None,
                    pick: &|_| false,
                    upto: usize::MAX,
                },
                |_, _| {},
            )
            .map_err(|e| format!("row {row} (video {} segment {s}): {e}", v.id))?;
            if n as u64 != want_count {
                return Err(format!(
                    "row {row} (video {} segment {s}) decodes to {n} frames, it holds {want_count}",
                    v.id
                ));
            }
        }
        Ok(())
    }
}
