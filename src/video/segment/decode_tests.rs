//! The segment decode's tests: H.264 and AV1 segments decode to exactly
//! their frames, and kept frames convert to the frames a decode hands out.

use super::super::{encode_segment, frames, SegmentParams, SegmentSettings};
use super::*;

#[test]
fn h264_segments_decode_to_exactly_their_frames() {
    let (w, h) = (64u32, 48u32);
    let p = SegmentParams {
        codec: SegmentCodec::H264,
        width: w,
        height: h,
        crf: 20,
        preset: "medium".into(),
        tune: String::new(),
        encoder_params: String::new(),
    };
    for n in [1usize, 2, 7, 16] {
        let src = frames(n, w as usize, h as usize);
        let seg = encode_segment(&p, &src).unwrap();
        assert_eq!(seg.frames, n);
        assert_eq!(*seg.packet_offsets.last().unwrap(), seg.data.len() as u64);
        // Every frame, and a window from the middle.
        let mut got = Vec::new();
        let total = decode_segment(
            p.codec,
            w,
            h,
            &seg.data,
            &seg.packet_offsets,
            0..n,
            |i, rgb| got.push((i, rgb.to_vec())),
        )
        .unwrap();
        assert_eq!(total, n);
        assert_eq!(got.len(), n);
        assert!(got
            .iter()
            .enumerate()
            .all(|(k, (i, f))| *i == k && f.len() == (w * h * 3) as usize));
        // Each frame is close to its source (gray-ish gradient: compare luma-ish).
        for (i, rgb) in &got {
            let y0 = src[*i][0] as i32;
            let g = rgb[1] as i32;
            assert!((y0 - g).abs() < 40, "frame {i}: {y0} vs {g}");
        }
        if n > 3 {
            let mut kept = Vec::new();
            decode_segment(
                p.codec,
                w,
                h,
                &seg.data,
                &seg.packet_offsets,
                2..4,
                |i, rgb| kept.push((i, rgb.to_vec())),
            )
            .unwrap();
            assert_eq!(kept, got[2..4].to_vec());
        }
    }
}

#[test]
fn kept_frames_convert_to_the_frames_a_decode_hands_out() {
    // Stored sizes whose RGB rows swscale pads (90 * 3 bytes) and odd
    // sides coded one pixel larger, at both codecs' sizes.
    for (codec, (w, h)) in [
        (SegmentCodec::H264, (90u32, 48u32)),
        (SegmentCodec::H264, (63, 47)),
        (SegmentCodec::Av1, (90, 66)),
    ] {
        let coded = (w + (w & 1), h + (h & 1));
        let p = SegmentSettings::new(codec).params(coded.0, coded.1);
        let seg = encode_segment(&p, &frames(12, coded.0 as usize, coded.1 as usize)).unwrap();
        // Every frame, every packet decoded.
        let every = SegmentRead {
            codec,
            coded,
            crop: (w, h),
            data: &seg.data,
            packet_offsets: &seg.packet_offsets,
            packet_frames: None,
            pick: &|_| true,
            upto: 12,
        };
        let mut want = Vec::new();
        decode_segment_picked(&every, |i, rgb| want.push((i, rgb.to_vec()))).unwrap();
        assert_eq!(want.len(), 12);
        let rgb = |f: &DecodedFrame| {
            let mut out = vec![MaybeUninit::new(0xa5u8); f.rgb_len()];
            f.to_rgb(&mut out).unwrap();
            out.iter()
                .map(|b| unsafe { b.assume_init() })
                .collect::<Vec<u8>>()
        };
        // Frames 5..8 asked for: each goes to the callee as it comes
        // out, and every frame out up to the last one is kept, those
        // not asked for too.
        let mut handed = Vec::new();
        let (n, kept) = decode_segment_frames(
            &SegmentRead {
                packet_frames: Some(&seg.packet_frames),
                pick: &|i| (5..8).contains(&i),
                upto: 8,
                ..every
            },
            &mut |i, f| {
                handed.push((i, rgb(f)));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(n, 8, "{codec:?} {w}x{h}");
        for i in 5..8 {
            assert!(kept.iter().any(|(k, _)| *k == i), "{codec:?} frame {i}");
        }
        assert!(kept.iter().all(|(i, _)| *i < 8));
        handed.sort();
        assert_eq!(
            handed.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            [5, 6, 7]
        );
        for (i, f) in &handed {
            assert!(*f == want[*i].1, "{codec:?} {w}x{h} handed frame {i}");
        }
        for (i, f) in &kept {
            assert_eq!(f.rgb_len(), (w * h * 3) as usize);
            assert!(rgb(f) == want[*i].1, "{codec:?} {w}x{h} frame {i}");
        }
        // Without packet frames every frame up to the last is kept.
        let (n, all) = decode_segment_frames(
            &SegmentRead {
                pick: &|i| i == 6,
                upto: 7,
                ..every
            },
            &mut |_, _| Ok(()),
        )
        .unwrap();
        assert_eq!(n, 7);
        assert_eq!(
            all.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            (0..7).collect::<Vec<_>>()
        );
        for (i, f) in &all {
            assert!(
                rgb(f) == want[*i].1,
                "{codec:?} {w}x{h} frame {i}, every packet"
            );
        }
        // A huge `upto` hands out the same frames and returns (the
        // frames to wait for are counted over the packets).
        let mut wide = Vec::new();
        decode_segment_picked(
            &SegmentRead {
                packet_frames: Some(&seg.packet_frames),
                pick: &|i| i % 5 == 0,
                upto: usize::MAX,
                ..every
            },
            |i, rgb| wide.push((i, rgb.to_vec())),
        )
        .unwrap();
        wide.sort();
        assert_eq!(wide.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [0, 5, 10]);
        assert!(wide.iter().all(|(i, f)| *f == want[*i].1));
        // The error of a picked frame's callee ends the decode.
        let e = decode_segment_frames(
            &SegmentRead {
                pick: &|i| i == 2,
                upto: 7,
                ..every
            },
            &mut |i, _| Err(format!("stop at {i}")),
        )
        .unwrap_err();
        assert_eq!(e, "stop at 2");
        // An output of another size is an error, and left alone.
        let mut short = vec![MaybeUninit::new(7u8); all[0].1.rgb_len() - 1];
        let e = all[0].1.to_rgb(&mut short).unwrap_err();
        assert!(e.contains("RGB bytes"), "{e}");
        assert!(short.iter().all(|b| unsafe { b.assume_init() } == 7));
    }
}

#[test]
fn av1_segments_decode_to_exactly_their_frames() {
    let (w, h) = (64u32, 64u32);
    let p = SegmentParams {
        codec: SegmentCodec::Av1,
        width: w,
        height: h,
        crf: 40,
        preset: "8".into(),
        tune: "1".into(),
        encoder_params: String::new(),
    };
    let small = SegmentParams {
        height: 48,
        ..p.clone()
    };
    assert!(encode_segment(&small, &frames(1, 64, 48))
        .unwrap_err()
        .contains("64x64"));
    let src = frames(9, w as usize, h as usize);
    let seg = encode_segment(&p, &src).unwrap();
    let mut n = 0;
    let total = decode_segment(
        p.codec,
        w,
        h,
        &seg.data,
        &seg.packet_offsets,
        0..9,
        |i, _| {
            assert_eq!(i, n);
            n += 1;
        },
    )
    .unwrap();
    assert_eq!((total, n), (9, 9));
}
