//! The segments layout with AV1 (and the encoder's settings): windows read
//! through the same API as H.264, mini-GOPs of 32 frames, windows that
//! decode only the frames they need (helpers in `video_segments.rs`).

use serde_json::Value as J;
use shardset::{
    write_video_frames_cache, Error, SegmentCodec, SegmentSettings, VideoFramesOptions, WindowSpec,
};

use crate::common::require_ffmpeg;

use crate::video_segments::*;

#[test]
fn av1_segments_read_the_same_windows_api() {
    require_ffmpeg();
    let tmp = tempfile::tempdir().unwrap();
    let src = spinning_clip(tmp.path(), "a.mp4", 24, "64x64");
    let small = clip(tmp.path(), "small.mp4", 5, "48x32", H264);
    let dir = tmp.path().join("seg");
    let opts = VideoFramesOptions::default().with_segments(
        SegmentSettings::new(SegmentCodec::Av1)
            .try_with_frames_per_segment(16)
            .unwrap(),
    );
    // A video below SVT-AV1's 64x64 is skipped, with the reason.
    let w = write_video_frames_cache(
        examples(&[src.clone(), small.clone()]),
        &features(),
        &dir,
        &opts,
    )
    .unwrap();
    assert_eq!((w.metadata.n_videos, w.metadata.n_skipped), (1, 1));
    let why = w.metadata.skipped.as_ref().unwrap()[0]["reason"].to_string();
    assert!(why.contains("64x64"), "{why}");
    assert_eq!(w.metadata.encoding, "av1");
    let want = sequential_rgb(&src, 64, 64);
    let c = windows_of(&dir, WindowSpec::try_new(8, 0, 1).unwrap());
    let be = backend(&c);
    for s in [0i64, 9, 12, 16] {
        let win = be.window(s).unwrap();
        for (k, f) in win.frames.data.chunks(64 * 64 * 3).enumerate() {
            let i = s as usize + k;
            let own = shardset::video::quality::psnr(&want[i], f);
            assert!(own > 20.0, "frame {i}: {own:.2}");
            for j in [i.wrapping_sub(1), i + 1] {
                if let Some(n) = want.get(j) {
                    let other = shardset::video::quality::psnr(n, f);
                    assert!(
                        own > other + 1.0,
                        "frame {i}: {own:.2} dB, against {j}: {other:.2}"
                    );
                }
            }
        }
    }
    // Strict: the small video fails the build, naming it; nothing published.
    let strict = tmp.path().join("strict");
    let e = write_video_frames_cache(
        examples(&[src, small]),
        &features(),
        &strict,
        &opts.clone().with_skip_corrupt(false),
    )
    .unwrap_err();
    assert!(
        matches!(&e, Error::Video { path, reason } if path.ends_with("small.mp4") && reason.contains("64x64")),
        "{e}"
    );
    assert!(!strict.exists());
}

#[test]
#[cfg_attr(
    not(all(target_arch = "x86_64", unix)),
    ignore = "FFmpeg's warnings are taken on x86-64 Unix only (the log callback's argument list differs elsewhere)"
)]
fn an_encoder_parameter_the_encoder_cannot_parse_fails_the_build_up_front() {
    require_ffmpeg();
    let tmp = tempfile::tempdir().unwrap();
    let files = vec![clip(tmp.path(), "a.mp4", 6, "64x48", H264)];
    // x264 would go on without a key it does not know or a value it cannot
    // read (FFmpeg only warns): refused, naming it, nothing published.
    for (i, (params, named)) in [
        ("frobnicate=1", "frobnicate = 1"),
        ("bframes=many", "bframes = many"),
    ]
    .into_iter()
    .enumerate()
    {
        let dir = tmp.path().join(format!("bad-params-{i}"));
        let e = write_video_frames_cache(
            examples(&files),
            &features(),
            &dir,
            &VideoFramesOptions::default().with_segments(
                SegmentSettings::new(SegmentCodec::H264)
                    .try_with_encoder_params(params)
                    .unwrap(),
            ),
        )
        .unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains(named) && m.contains(&format!("encoder parameters '{params}'"))),
            "{e}"
        );
        assert!(!dir.exists());
    }
    // A key it takes builds.
    let dir = tmp.path().join("good");
    write_video_frames_cache(
        examples(&files),
        &features(),
        &dir,
        &VideoFramesOptions::default().with_segments(
            SegmentSettings::new(SegmentCodec::H264)
                .try_with_encoder_params("bframes=0")
                .unwrap(),
        ),
    )
    .unwrap();
}

#[test]
fn av1_mini_gops_of_32_read_frame_exact_windows_and_are_recorded() {
    require_ffmpeg();
    let tmp = tempfile::tempdir().unwrap();
    // Two segments of 32 and a partial one, each one mini-GOP of SVT-AV1's
    // five hierarchical levels: the frames a window decodes reach further
    // into each segment than with the default mini-GOPs of 16.
    let src = spinning_clip(tmp.path(), "a.mp4", 70, "64x64");
    let good = tmp.path().join("seg");
    let settings = SegmentSettings::new(SegmentCodec::Av1)
        .try_with_encoder_params("hierarchical-levels=5")
        .unwrap();
    build_one(
        &src,
        &good,
        &VideoFramesOptions::default().with_segments(settings),
    );
    let m: J = serde_json::from_str(&std::fs::read_to_string(good.join("_metadata.json")).unwrap())
        .unwrap();
    assert_eq!(m["segments"]["encoder_params"], "hierarchical-levels=5");
    assert_eq!(m["segments"]["num_segments"], 3);
    // The default build's segments are other bytes: the parameter reached
    // the encoder.
    let own = tmp.path().join("own");
    build_one(
        &src,
        &own,
        &VideoFramesOptions::default().with_segments(SegmentSettings::new(SegmentCodec::Av1)),
    );
    let m2: J = serde_json::from_str(&std::fs::read_to_string(own.join("_metadata.json")).unwrap())
        .unwrap();
    assert!(m2["segments"].get("encoder_params").is_none());
    assert_ne!(
        m["segments"]["quality"]["psnr_mean"], m2["segments"]["quality"]["psnr_mean"],
        "the same quality to the last digit: the parameter did not reach SVT-AV1"
    );
    // Every window, decoding only the frames it needs, against the
    // every-unit read and the source frame of its index.
    windows_equal_the_every_unit_read(tmp.path(), &good, &src, 16, 55);
}

#[test]
fn av1_windows_decoding_only_the_frames_they_need_equal_windows_decoding_every_unit() {
    require_ffmpeg();
    let tmp = tempfile::tempdir().unwrap();
    // Segments of 16 and one partial: SVT-AV1's hierarchical prediction
    // gives each frames a window need not decode, and units holding
    // several frames, of which a window may need only some.
    let src = spinning_clip(tmp.path(), "a.mp4", 45, "64x64");
    let good = tmp.path().join("seg");
    let opts = VideoFramesOptions::default().with_segments(
        SegmentSettings::new(SegmentCodec::Av1)
            .try_with_frames_per_segment(16)
            .unwrap(),
    );
    build_one(&src, &good, &opts);
    // The same cache as written before packet_frames: every unit decoded.
    windows_equal_the_every_unit_read(tmp.path(), &good, &src, 6, 40);
}
