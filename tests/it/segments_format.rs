//! What a segments cache holds: metadata describing the codec, rows of raw
//! elementary streams, odd sizes coded one pixel larger and read at their
//! size (helpers in `video_segments.rs`).

use std::process::Command;

use serde_json::Value as J;
use shardset::{
    write_video_frames_cache, SegmentCodec, SegmentSettings, VideoFramesOptions, WindowSpec,
};

use crate::common::{python_json, require_ffmpeg, require_python_module};

use crate::video_segments::*;

#[test]
fn odd_sizes_are_coded_one_pixel_larger_and_read_at_their_size() {
    require_ffmpeg();
    let tmp = tempfile::tempdir().unwrap();
    // FFV1 keeps the odd size in 4:2:0 (x264 cannot).
    let src = clip(
        tmp.path(),
        "odd.mkv",
        20,
        "97x71",
        &["-c:v", "ffv1", "-pix_fmt", "yuv420p"],
    );
    let dir = tmp.path().join("seg");
    let w = build_one(&src, &dir, &lossless(8));
    let v = &w.metadata.videos[0];
    assert_eq!((v.w, v.h, v.t), (97, 71, 20));
    let q = &w.metadata.segments.as_ref().unwrap().quality;
    assert_eq!(q.psnr_min, 100.0, "lossless, {q:?}");
    let c = windows_of(&dir, WindowSpec::try_new(5, 0, 5).unwrap());
    let be = backend(&c);
    let win = be.window(1).unwrap();
    assert_eq!(win.frames.shape, vec![5, 71, 97, 3]);
    // Exactly the source decoded to RGB at its own size: the padding is
    // cut before the conversion, so chroma is interpolated as the source's.
    let (want, ww, wh) =
        shardset::video::decode::read_frames_rgb(&src, &[5, 6, 7, 8, 9], None, None).unwrap();
    assert_eq!((ww, wh), (97, 71));
    for (k, f) in win.frames.data.chunks(97 * 71 * 3).enumerate() {
        assert!(f == want[k].as_slice(), "frame {}", 5 + k);
    }
}

#[test]
fn metadata_describes_the_codec_and_rows_are_raw_elementary_streams() {
    require_ffmpeg();
    require_python_module("lance");
    let tmp = tempfile::tempdir().unwrap();
    let files = vec![
        clip(tmp.path(), "a.mp4", 20, "64x48", H264),
        clip(tmp.path(), "b.mp4", 9, "64x48", H264),
    ];
    let dir = tmp.path().join("seg");
    let opts = VideoFramesOptions::default().with_segments(
        SegmentSettings::new(SegmentCodec::H264)
            .try_with_frames_per_segment(8)
            .unwrap(),
    );
    write_video_frames_cache(examples(&files), &features(), &dir, &opts).unwrap();
    let m: J = serde_json::from_str(&std::fs::read_to_string(dir.join("_metadata.json")).unwrap())
        .unwrap();
    assert_eq!(m["layout"], "lance-video-segments");
    assert_eq!(m["format"], "lance");
    assert_eq!(m["encoding"], "h264");
    assert_eq!(m["num_rows"], 29, "frames");
    let s = &m["segments"];
    for (k, v) in [
        ("codec", J::from("h264")),
        ("encoder", J::from("libx264")),
        ("crf", J::from(SegmentCodec::H264.default_crf())),
        ("preset", J::from("medium")),
        // x264's own tuning: not recorded.
        ("tune", J::Null),
        ("frames_per_segment", J::from(8)),
        ("closed_gop", J::from(true)),
        ("scene_cut", J::from(false)),
        ("pixel_format", J::from("yuv420p")),
        ("extradata", J::from("")),
        ("width", J::from(64)),
        ("height", J::from(48)),
        ("num_segments", J::from(3 + 2)),
        ("packet_frames", J::from(true)),
    ] {
        assert_eq!(s[k], v, "segments.{k}");
    }
    assert!(s["encoder_version"]
        .as_str()
        .unwrap()
        .starts_with("libavcodec "));
    let q = &s["quality"];
    for k in ["psnr_mean", "psnr_min", "ssim_mean", "ssim_min"] {
        assert!(q[k].as_f64().unwrap() > 0.0, "quality.{k}");
    }
    assert!(q["psnr"].as_str().unwrap().contains("RGB"));
    assert!(q["ssim"].as_str().unwrap().contains("luma"));
    assert!(q["psnr_min"].as_f64() <= q["psnr_mean"].as_f64());
    let videos = m["videos"].as_array().unwrap();
    assert_eq!(
        videos
            .iter()
            .map(|v| (
                v["T"].clone(),
                v["H"].clone(),
                v["W"].clone(),
                v["start_row"].clone()
            ))
            .collect::<Vec<_>>(),
        vec![
            (J::from(20), J::from(48), J::from(64), J::from(0)),
            (J::from(9), J::from(48), J::from(64), J::from(3))
        ]
    );
    // pylance reads the rows; each segment's bytes alone are an H.264
    // elementary stream FFmpeg decodes to exactly its frames.
    let out = tmp.path().join("streams");
    std::fs::create_dir_all(&out).unwrap();
    let j = python_json(
        "import lance, sys, json, os\n\
         t = lance.dataset(sys.argv[1]).to_table()\n\
         rows = []\n\
         for i in range(t.num_rows):\n\
         \x20   r = {c: t.column(c)[i].as_py() for c in ['video_id', 'segment_idx', 'first_frame', 'frame_count', 'packet_offsets', 'packet_frames', 'psnr', 'ssim']}\n\
         \x20   d = t.column('data')[i].as_py()\n\
         \x20   r['bytes'] = len(d)\n\
         \x20   open(os.path.join(sys.argv[2], f'{i}.h264'), 'wb').write(d)\n\
         \x20   rows.append(r)\n\
         print(json.dumps(rows))",
        &[dir.as_os_str(), out.as_os_str()],
    );
    let rows = j.as_array().unwrap();
    let want = [
        (0, 0, 0, 8),
        (0, 1, 8, 8),
        (0, 2, 16, 4),
        (1, 0, 0, 8),
        (1, 1, 8, 1),
    ];
    assert_eq!(rows.len(), want.len());
    for (i, (r, w)) in rows.iter().zip(want).enumerate() {
        assert_eq!(
            (
                r["video_id"].as_i64().unwrap(),
                r["segment_idx"].as_i64().unwrap(),
                r["first_frame"].as_i64().unwrap(),
                r["frame_count"].as_i64().unwrap()
            ),
            w,
            "row {i}"
        );
        let offs = r["packet_offsets"].as_array().unwrap();
        assert_eq!(offs[0], 0);
        assert_eq!(offs.last().unwrap(), &r["bytes"]);
        // The frame each packet presents: each frame once, one per packet.
        let mut frames: Vec<i64> = r["packet_frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_i64().unwrap())
            .collect();
        assert_eq!(frames.len(), offs.len() - 1, "row {i}");
        frames.sort_unstable();
        assert_eq!(frames, (0..w.3).collect::<Vec<_>>(), "row {i}");
        let probe = Command::new("ffprobe")
            .args([
                "-v",
                "error",
                "-count_frames",
                "-select_streams",
                "v:0",
                "-show_entries",
                "stream=nb_read_frames,codec_name",
                "-of",
                "csv=p=0",
            ])
            .arg(out.join(format!("{i}.h264")))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&probe.stdout).trim(),
            format!("h264,{}", w.3),
            "row {i}"
        );
    }
}
