//! Which packets a read of some frames of a segment sends to the decoder: a
//! window that starts inside a segment decodes the pictures its frames
//! depend on, not every picture before them.

use super::bitstream::h264_disposable;
use super::settings::SegmentCodec;
use crate::video::av1::{UnitUse, Units};

/// How a read of the frames the packets in `wanted` present sends each
/// packet of a segment to the decoder. H.264: every packet up to the last
/// wanted but the unwanted ones no other picture refers to. AV1: the
/// frames the wanted ones depend on ([`Units`]), units cut
/// down to them.
pub(super) fn packet_uses(
    codec: SegmentCodec,
    data: &[u8],
    packet_offsets: &[u64],
    wanted: &[bool],
) -> Vec<UnitUse> {
    match codec {
        SegmentCodec::Av1 => Units::parse(data, packet_offsets).plan(data, packet_offsets, wanted),
        SegmentCodec::H264 => {
            let last = wanted.iter().rposition(|&w| w);
            packet_offsets
                .windows(2)
                .enumerate()
                .map(|(j, w)| {
                    let bytes = usize::try_from(w[0])
                        .ok()
                        .zip(usize::try_from(w[1]).ok())
                        .and_then(|(a, b)| data.get(a..b));
                    if last.is_none_or(|l| j > l)
                        || (!wanted[j] && bytes.is_some_and(h264_disposable))
                    {
                        UnitUse::Skip
                    } else {
                        UnitUse::Whole
                    }
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{
        decode_segment_picked, encode_segment, frames, is_permutation, EncodedSegment,
        SegmentParams, SegmentRead, SegmentSettings,
    };
    use super::*;

    /// 32 frames encoded as one segment at the codec's default settings,
    /// with the frame of each packet recorded.
    fn default_segment_of_32(
        codec: SegmentCodec,
        w: u32,
        h: u32,
    ) -> (SegmentParams, EncodedSegment) {
        let p = SegmentSettings::new(codec).params(w, h);
        let seg = encode_segment(&p, &frames(32, w as usize, h as usize)).unwrap();
        assert!(
            is_permutation(&seg.packet_frames, 32),
            "{:?}",
            seg.packet_frames
        );
        (p, seg)
    }

    /// The frames at `keep` of a segment, decoded with or without its
    /// packets' frames: the frames decoded up to, and the frames in order.
    fn decode_kept(
        p: &SegmentParams,
        seg: &EncodedSegment,
        frames: Option<&[i64]>,
        keep: std::ops::Range<usize>,
    ) -> (usize, Vec<Vec<u8>>) {
        let mut got = Vec::new();
        let end = keep.end;
        let n = decode_segment_picked(
            &SegmentRead {
                codec: p.codec,
                coded: (p.width, p.height),
                crop: (p.width, p.height),
                data: &seg.data,
                packet_offsets: &seg.packet_offsets,
                packet_frames: frames,
                pick: &|i| keep.contains(&i),
                upto: end,
            },
            |i, rgb| got.push((i, rgb.to_vec())),
        )
        .unwrap();
        got.sort_by_key(|(i, _)| *i);
        (n, got.into_iter().map(|(_, f)| f).collect())
    }

    /// Every window (lengths 1, 5 and 16, at every start) of a 32-frame
    /// segment, read with only the packets (or frames) it needs, equals those
    /// frames of the whole segment decoded; returns the whole.
    fn every_window_equals_a_full_decode(p: &SegmentParams, seg: &EncodedSegment) -> Vec<Vec<u8>> {
        let (n, full) = decode_kept(p, seg, None, 0..32);
        assert_eq!((n, full.len()), (32, 32));
        for start in 0..32 {
            for len in [1usize, 5, 16] {
                let keep = start..(start + len).min(32);
                let (n, got) = decode_kept(p, seg, Some(&seg.packet_frames), keep.clone());
                assert_eq!(n, keep.end, "window {keep:?}");
                assert!(got == full[keep.clone()], "window {keep:?}");
            }
        }
        full
    }

    #[test]
    fn h264_windows_leave_out_unreferenced_pictures_and_equal_a_full_decode() {
        // The layout's default encoding: segments of 32, B-frames.
        let (p, seg) = default_segment_of_32(SegmentCodec::H264, 64, 48);
        assert!(
            seg.packet_frames
                .iter()
                .enumerate()
                .any(|(j, &f)| f != j as i64),
            "B-frames: packets out of frame order {:?}",
            seg.packet_frames
        );
        let packets: Vec<&[u8]> = seg
            .packet_offsets
            .windows(2)
            .map(|o| &seg.data[o[0] as usize..o[1] as usize])
            .collect();
        let disposable = packets.iter().filter(|b| h264_disposable(b)).count();
        assert!(
            disposable >= 8 && !h264_disposable(packets[0]),
            "{disposable} of 32 pictures unreferenced"
        );
        let full = every_window_equals_a_full_decode(&p, &seg);
        // Packets out of step with their list (a damaged row) decode every
        // packet, counted as they come out.
        let (n, got) = decode_kept(&p, &seg, Some(&seg.packet_frames[1..]), 3..9);
        assert_eq!((n, got), (9, full[3..9].to_vec()));
    }

    #[test]
    fn av1_windows_decode_only_the_frames_they_depend_on_and_equal_a_full_decode() {
        // The layout's default AV1 encoding: segments of 32, SVT-AV1's
        // hierarchical prediction (frames decoded early and shown later,
        // several to a unit).
        let (p, seg) = default_segment_of_32(SegmentCodec::Av1, 64, 64);
        let units = Units::parse(&seg.data, &seg.packet_offsets);
        let frames = units.frame_count();
        assert!(frames > 40, "{frames} frames in 32 units");
        let wanted = |r: std::ops::Range<usize>| -> Vec<bool> {
            let r = r.start as i64..r.end as i64;
            seg.packet_frames.iter().map(|f| r.contains(f)).collect()
        };
        // Every frame for the whole segment; for its last 16 frames, or
        // its last frame, fewer (not the hidden frames of the first half),
        // with units cut down to some of their frames.
        assert_eq!(units.decoded(&wanted(0..32)), (frames, 0));
        let (last16, opaque) = units.decoded(&wanted(16..32));
        let (last1, _) = units.decoded(&wanted(31..32));
        assert!(
            opaque == 0 && last16 + 6 <= frames && last1 < last16 && last1 >= 5,
            "{last16} and {last1} of {frames} frames"
        );
        let plan = units.plan(&seg.data, &seg.packet_offsets, &wanted(31..32));
        assert!(
            plan.iter().any(|u| matches!(u, UnitUse::Part(_))),
            "{plan:?}"
        );
        let full = every_window_equals_a_full_decode(&p, &seg);
        // Distinct frames: a frame left out and another shown in its place
        // would not compare equal.
        assert!(full.windows(2).all(|f| f[0] != f[1]));
        // A segment whose units this reader cannot follow is decoded whole:
        // with its sequence header damaged, every unit up to the last
        // wanted is sent whole.
        let mut damaged = seg.data.clone();
        let at = damaged.iter().position(|&b| b == 0x0a).unwrap();
        damaged[at] = 0x80;
        let units = Units::parse(&damaged, &seg.packet_offsets);
        let last = wanted(3..4).iter().rposition(|&w| w).unwrap();
        assert_eq!(units.decoded(&wanted(3..4)), (0, last + 1));
    }
}
