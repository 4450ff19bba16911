//! The segments layout against bad settings, bad inputs and damaged
//! caches (typed errors; `verify` finds a damaged packet list), and a
//! killed build resumed to equal a build in one go (helpers in
//! `video_segments.rs`).

use std::path::Path;

use serde_json::Value as J;
use shardset::layouts::backend::Backend;
use shardset::{
    open_cache, write_video_frames_cache, Error, Feature, SegmentCodec, SegmentSettings,
    VideoFramesOptions, VideoStorage, WindowSpec,
};

use crate::cli::{ok, run};
use crate::common::require_ffmpeg;

use crate::video_segments::*;

#[test]
fn bad_settings_inputs_and_damaged_caches_are_typed_errors() {
    require_ffmpeg();
    let tmp = tempfile::tempdir().unwrap();
    // Settings, checked when set.
    let h = SegmentSettings::new(SegmentCodec::H264);
    assert!(matches!(
        h.clone().try_with_crf(52),
        Err(Error::InvalidArgument(_))
    ));
    assert!(SegmentSettings::new(SegmentCodec::Av1)
        .try_with_crf(63)
        .is_ok());
    assert!(matches!(
        h.clone().try_with_frames_per_segment(0),
        Err(Error::InvalidArgument(_))
    ));
    // SVT-AV1 would ignore a tune it cannot parse: refused when set.
    let av1 = SegmentSettings::new(SegmentCodec::Av1);
    assert_eq!(av1.tune(), "1");
    assert!(matches!(
        av1.clone().try_with_tune("psnr"),
        Err(Error::InvalidArgument(m)) if m.contains("'psnr'")
    ));
    assert_eq!(av1.try_with_tune("0").unwrap().tune(), "0");
    let files = vec![
        clip(tmp.path(), "a.mp4", 20, "64x48", H264),
        clip(tmp.path(), "b.mp4", 12, "64x48", H264),
    ];
    // A preset the encoder refuses fails the build up front, nothing published.
    let dir = tmp.path().join("bad-preset");
    let e = write_video_frames_cache(
        examples(&files),
        &features(),
        &dir,
        &VideoFramesOptions::default().with_segments(h.clone().with_preset("warp9")),
    )
    .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("warp9")),
        "{e}"
    );
    assert!(!dir.exists());
    // So does a tune x264 does not know.
    let dir = tmp.path().join("bad-tune");
    let e = write_video_frames_cache(
        examples(&files),
        &features(),
        &dir,
        &VideoFramesOptions::default().with_segments(h.clone().try_with_tune("crisp").unwrap()),
    )
    .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("tune 'crisp'")),
        "{e}"
    );
    assert!(!dir.exists());
    // An encoder parameter SVT-AV1 refuses: the build fails up front
    // naming it, nothing published.
    let dir = tmp.path().join("bad-params");
    let e = write_video_frames_cache(
        examples(&files),
        &features(),
        &dir,
        &VideoFramesOptions::default().with_segments(
            SegmentSettings::new(SegmentCodec::Av1)
                .try_with_encoder_params("hierarchical-levels=9")
                .unwrap(),
        ),
    )
    .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("encoder parameters 'hierarchical-levels=9'")),
        "{e}"
    );
    assert!(!dir.exists());
    // Two layout columns and no choice between them.
    let two = features().with("other", Feature::video(VideoStorage::Frames));
    let e = write_video_frames_cache(
        examples(&files),
        &two,
        &tmp.path().join("two"),
        &VideoFramesOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    // A segments column cannot go into Arrow shards.
    let e = shardset::write_arrow_cache(
        examples(&files),
        &features(),
        &tmp.path().join("arrow"),
        &shardset::ArrowWriteOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("lance-video-segments"), "{e}");

    // An unreadable file is skipped and recorded, or (strict) fails the
    // build naming it, as in a frames build.
    let broken = tmp.path().join("broken.mp4");
    std::fs::write(&broken, b"not a video").unwrap();
    let with_broken = vec![files[0].clone(), broken.clone(), files[1].clone()];
    let w = write_video_frames_cache(
        examples(&with_broken),
        &features(),
        &tmp.path().join("skip"),
        &VideoFramesOptions::default(),
    )
    .unwrap();
    assert_eq!((w.metadata.n_videos, w.metadata.n_skipped), (2, 1));
    assert_eq!(
        w.metadata.videos[1].start_row, 1,
        "20 frames make one segment of 32"
    );
    let e = write_video_frames_cache(
        examples(&with_broken),
        &features(),
        &tmp.path().join("strict"),
        &VideoFramesOptions::default().with_skip_corrupt(false),
    )
    .unwrap_err();
    assert!(
        matches!(&e, Error::Video { path, .. } if path.ends_with("broken.mp4")),
        "{e}"
    );
    assert!(!tmp.path().join("strict").exists());

    let good = tmp.path().join("good");
    let opts = VideoFramesOptions::default()
        .with_segments(h.clone().try_with_frames_per_segment(8).unwrap());
    write_video_frames_cache(examples(&files), &features(), &good, &opts).unwrap();
    // Damaged metadata: each a typed error naming the metadata file.
    type Edit = fn(&mut J);
    let edits: [(&str, Edit); 5] = [
        ("segment length", |m| {
            m["segments"]["frames_per_segment"] = J::from(16)
        }),
        ("segment count", |m| {
            m["segments"]["num_segments"] = J::from(9)
        }),
        ("codec", |m| m["segments"]["codec"] = J::from("vp9")),
        ("no description", |m| {
            m.as_object_mut().unwrap().remove("segments");
        }),
        ("start row", |m| m["videos"][1]["start_row"] = J::from(2)),
    ];
    for (what, f) in edits {
        let d = tmp.path().join(format!("m-{}", what.replace(' ', "-")));
        crate::common::copy_dir(&good, &d);
        edit_metadata(&d, f);
        match open_cache(&d) {
            Err(Error::Metadata { path, .. }) => {
                assert!(path.ends_with("_metadata.json"), "{what}")
            }
            Err(e) => panic!("{what}: {e}"),
            Ok(_) => panic!("{what}: opened"),
        }
    }
    // A frames cache that claims segments.
    let d = tmp.path().join("claims");
    crate::common::copy_dir(&good, &d);
    edit_metadata(&d, |m| m["layout"] = J::from("lance-video-frames"));
    assert!(matches!(open_cache(&d), Err(Error::Metadata { .. })));

    // A segment whose bytes were zeroed on disk: reading it is an
    // Error::Video naming the cache and the segment; other segments still
    // read; verify reports the damage.
    let d = tmp.path().join("zeroed");
    crate::common::copy_dir(&good, &d);
    let first = {
        let c = windows_of(&good, WindowSpec::try_new(1, 0, 1).unwrap());
        c.backend.len()
    };
    assert_eq!(first, 32);
    zero_segment_bytes(&d, 1);
    let c = windows_of(&d, WindowSpec::try_new(4, 0, 4).unwrap());
    let be = backend(&c);
    assert!(be.window(0).is_ok(), "segment 0 is intact");
    match be.window(2) {
        Err(Error::Video { path, reason }) => {
            assert_eq!(path, d);
            assert!(reason.contains("segment 1 of video 0"), "{reason}");
        }
        other => panic!("a typed error, got {other:?}"),
    }
    let rep = shardset::verify_cache(&d).unwrap();
    assert!(!rep.is_ok(), "verify finds the damage");
}

#[test]
fn windows_read_the_same_without_packet_frames_and_verify_finds_a_damaged_list() {
    require_ffmpeg();
    let tmp = tempfile::tempdir().unwrap();
    // 45 frames in segments of 16 (B-frames at the default preset),
    // lossless, so every frame compares with the source exactly.
    let src = clip(tmp.path(), "a.mp4", 45, "64x48", H264);
    let good = tmp.path().join("seg");
    let opts = VideoFramesOptions::default().with_segments(
        SegmentSettings::new(SegmentCodec::H264)
            .try_with_crf(0)
            .unwrap()
            .try_with_frames_per_segment(16)
            .unwrap(),
    );
    build_one(&src, &good, &opts);
    let want = sequential_rgb(&src, 64, 48);
    let frame = 64 * 48 * 3;
    let every_window_is_exact = |dir: &Path, what: &str| {
        let c = windows_of(dir, WindowSpec::try_new(6, 0, 1).unwrap());
        let be = backend(&c);
        for s in 0..be.len() as i64 {
            let win = be.window(s).unwrap();
            for (k, f) in win.frames.data.chunks(frame).enumerate() {
                assert!(
                    f == want[s as usize + k].as_slice(),
                    "{what}: window {s} frame {k}"
                );
            }
        }
        let all: Vec<i64> = (0..be.len() as i64).rev().collect();
        let b = be.windows_batch(&all).unwrap();
        for (i, &s) in all.iter().enumerate() {
            for k in 0..6 {
                let got = &b.frames.data[(i * 6 + k) * frame..][..frame];
                assert!(
                    got == want[s as usize + k].as_slice(),
                    "{what}: batch window {s}"
                );
            }
        }
    };
    every_window_is_exact(&good, "with packet frames");
    assert!(shardset::verify_cache(&good).unwrap().is_ok());

    // A cache written before the column existed: no column, no flag.
    let old = tmp.path().join("old");
    without_packet_frames(&good, &old);
    every_window_is_exact(&old, "without packet frames");

    // A row whose list names frame 0 for every packet: its windows decode
    // every packet (still exact), and verify names the damage.
    let bad = tmp.path().join("bad");
    crate::common::copy_dir(&good, &bad);
    rewrite_rows(
        &bad,
        "c = t.column('packet_frames').to_pylist()\n\
         c[1] = [0] * len(c[1])\n\
         i = t.schema.get_field_index('packet_frames')\n\
         t = t.set_column(i, t.schema.field(i), pa.array(c, t.schema.field(i).type))",
    );
    every_window_is_exact(&bad, "a damaged list");
    let rep = shardset::verify_cache(&bad).unwrap();
    let text = format!("{rep:?}");
    assert!(
        text.contains(
            "row 1 (video 0 segment 1): its packet frames do not name each of its 16 frames once"
        ),
        "{text}"
    );
}

#[test]
fn a_killed_segments_build_resumes_and_equals_a_build_in_one_go() {
    require_ffmpeg();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let vids = tmp.path().join("clips");
    for (class, name, n) in [
        ("a", "v0.mp4", 12),
        ("a", "v1.mp4", 7),
        ("b", "v2.mp4", 10),
        ("b", "v3.mp4", 5),
    ] {
        std::fs::create_dir_all(vids.join(class)).unwrap();
        clip(&vids.join(class), name, n, "48x32", H264);
    }
    let v = vids.to_str().unwrap();
    let build = |out: &Path, fault: Option<&str>| {
        let mut c = crate::common::shardset_cli();
        c.env("STABLE_DATASETS_CACHE_DIR", &root).args([
            "build",
            "videofolder",
            v,
            "--storage",
            "segments",
            "--frames-per-segment",
            "4",
            "--encoder-params",
            "bframes=2",
            "--checkpoint-frames",
            "1",
            "--json",
            "--out",
            out.to_str().unwrap(),
        ]);
        if let Some(f) = fault {
            c.env("SHARDSET_FAULT_POINT", f);
        }
        c.output().unwrap()
    };
    let fresh = tmp.path().join("fresh");
    let o = build(&fresh, None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = tmp.path().join("killed");
    // Killed after its first checkpoint, then again between a Lance commit
    // and the line recording it (which the next build undoes).
    for fault in ["video:after-checkpoint", "video:after-lance-commit"] {
        let o = build(&out, Some(fault));
        assert!(!o.status.success(), "{fault}: the process was killed");
        assert!(!out.join("train").exists(), "{fault}: nothing published");
    }
    let o = build(&out, None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: J = serde_json::from_slice(&o.stdout).unwrap();
    assert!(j["caches"][0]["resumed_rows"].as_u64().unwrap() >= 1, "{j}");
    let read = |d: &Path| {
        let c = windows_of(&d.join("train"), WindowSpec::try_new(1, 0, 1).unwrap());
        let be = backend(&c);
        let all: Vec<i64> = (0..be.len() as i64).collect();
        let m = be.metadata().clone();
        (
            be.windows_batch(&all).unwrap().frames.data,
            m.videos
                .iter()
                .map(|v| (v.id, v.t, v.start_row, v.key.clone()))
                .collect::<Vec<_>>(),
            m.segments.map(|s| (s.num_segments, s.quality.psnr_mean)),
        )
    };
    let (a, b) = (read(&fresh), read(&out));
    assert_eq!(a.1, b.1, "videos");
    assert_eq!(a.2, b.2, "segments and quality");
    assert!(a.0 == b.0, "decoded frames differ");
    assert!(shardset::verify_cache(&out.join("train")).unwrap().is_ok());
    // The CLI's other paths: inspect shows the quality, export a window.
    let dir = out.join("train");
    let text = ok(&root, &["inspect", dir.to_str().unwrap()]);
    assert!(text.contains("lance-video-segments"), "{text}");
    assert!(text.contains("PSNR (RGB) mean"), "{text}");
    assert!(text.contains("tune default, bframes=2)"), "{text}");
    // A key the layout sets is a usage error naming the flag, before any
    // build.
    let o = crate::common::shardset_cli()
        .env("STABLE_DATASETS_CACHE_DIR", &root)
        .args([
            "build",
            "videofolder",
            v,
            "--storage",
            "segments",
            "--encoder-params",
            "keyint=8",
            "--out",
            tmp.path().join("refused").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--encoder-params") && err.contains("keyint"),
        "{err}"
    );
    assert!(!tmp.path().join("refused").exists());
    let ex = tmp.path().join("ex");
    let o = ok(
        &root,
        &[
            "export",
            dir.to_str().unwrap(),
            "--row",
            "3",
            "--window",
            "6",
            "--out",
            ex.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(o.matches(".png").count(), 6, "{o}");
    assert!(o.contains(".gif"), "{o}");
    let o = run(
        &root,
        &[
            "build",
            "videofolder",
            v,
            "--storage",
            "segments",
            "--crf",
            "99",
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
