//! The `lance-video-segments` layout: closed segments of frames encoded
//! with H.264 (or AV1), written by the video writer and read as windows by
//! the same backend as frames caches; frame-exact, measured, resumable.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as J;
use shardset::layouts::backend::Backend;
use shardset::video::segment::{read_yuv420, yuv420_to_rgb};
use shardset::{
    open_cache, open_cache_with, write_video_frames_cache, Dtype, Error, Example, Feature,
    Features, LanceVideoFrames, OpenOptions, SegmentCodec, SegmentSettings, Value,
    VideoFramesOptions, VideoStorage, WindowSpec,
};

use crate::cli::{ok, run};
use crate::common::{python_json, require_ffmpeg, require_python_module};

/// A clip of `frames` frames of ffmpeg's `testsrc` (a moving pattern and a
/// frame counter: every frame differs from its neighbours).
fn clip(dir: &Path, name: &str, frames: u32, size: &str, codec: &[&str]) -> PathBuf {
    clip_of(
        dir,
        name,
        frames,
        &format!("testsrc=size={size}:rate=25"),
        codec,
    )
}

/// A clip whose neighbouring frames differ a lot: `testsrc` with its hue
/// turned by 100 degrees a frame, so a frame off by one is far from it.
fn spinning_clip(dir: &Path, name: &str, frames: u32, size: &str) -> PathBuf {
    clip_of(
        dir,
        name,
        frames,
        &format!("testsrc=size={size}:rate=25,hue=H=2*PI*t*7:s=2"),
        &["-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", "10"],
    )
}

fn clip_of(dir: &Path, name: &str, frames: u32, source: &str, codec: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let o = Command::new("ffmpeg")
        .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
        .arg(source)
        .args(["-frames:v", &frames.to_string()])
        .args(codec)
        .arg(&out)
        .output()
        .expect("ffmpeg runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

const H264: &[&str] = &["-c:v", "libx264", "-pix_fmt", "yuv420p"];

fn features() -> Features {
    Features::new()
        .with("video", Feature::video(VideoStorage::Segments))
        .with("label", Feature::value(Dtype::Int64))
}

fn examples(files: &[PathBuf]) -> Vec<Example> {
    files
        .iter()
        .enumerate()
        .map(|(i, p)| {
            Example::new()
                .with("video", Value::Path(p.clone()))
                .with("label", i as i64)
        })
        .collect()
}

/// Lossless H.264 (CRF 0) in segments of `per` frames.
fn lossless(per: u32) -> VideoFramesOptions {
    VideoFramesOptions::default().with_threads(2).with_segments(
        SegmentSettings::new(SegmentCodec::H264)
            .try_with_crf(0)
            .unwrap()
            .try_with_frames_per_segment(per)
            .unwrap(),
    )
}

/// Builds the segments cache of one video.
fn build_one(src: &Path, dir: &Path, opts: &VideoFramesOptions) -> shardset::WrittenVideoFrames {
    write_video_frames_cache(
        examples(std::slice::from_ref(&src.to_path_buf())),
        &features(),
        dir,
        opts,
    )
    .unwrap()
}

fn windows_of(dir: &Path, spec: WindowSpec) -> shardset::Cache {
    open_cache_with(dir, &OpenOptions::default().with_windows(spec)).unwrap()
}

fn backend(c: &shardset::Cache) -> &LanceVideoFrames {
    c.backend
        .as_any()
        .downcast_ref::<LanceVideoFrames>()
        .expect("a segments cache opens as a video backend")
}

/// The source's frames as RGB, decoded one after another from the start
/// (FFmpeg, then the same YUV to RGB conversion the reader uses).
fn sequential_rgb(path: &Path, w: u32, h: u32) -> Vec<Vec<u8>> {
    read_yuv420(path, w, h)
        .unwrap()
        .iter()
        .map(|f| yuv420_to_rgb(f, w, h).unwrap())
        .collect()
}

#[test]
fn windows_are_frame_exact_at_every_start_across_segment_boundaries() {
    require_ffmpeg();
    let tmp = tempfile::tempdir().unwrap();
    // 45 frames in segments of 8: five full segments and a last one of 5.
    let src = clip(tmp.path(), "a.mp4", 45, "64x48", H264);
    let dir = tmp.path().join("seg");
    let w = build_one(&src, &dir, &lossless(8));
    assert_eq!(w.metadata.layout, "lance-video-segments");
    let q = &w.metadata.segments.as_ref().unwrap().quality;
    assert_eq!(
        (q.psnr_min, q.ssim_min),
        (100.0, 1.0),
        "CRF 0 is lossless: every frame exact"
    );
    let want = sequential_rgb(&src, 64, 48);
    assert_eq!(want.len(), 45);
    let frame = 64 * 48 * 3;
    // Windows of 10 at every start: each crosses one or two boundaries.
    let c = windows_of(&dir, WindowSpec::try_new(10, 0, 1).unwrap());
    let be = backend(&c);
    assert_eq!(be.len(), 36);
    for s in 0..36i64 {
        let win = be.window(s).unwrap();
        assert_eq!(win.frames.shape, vec![10, 48, 64, 3]);
        assert_eq!(win.start_frame, s as u64);
        for (k, f) in win.frames.data.chunks(frame).enumerate() {
            assert!(
                f == want[s as usize + k].as_slice(),
                "window {s} frame {k} is not source frame {}",
                s as usize + k
            );
        }
    }
    // The same windows in batches (segments decoded once per batch, in
    // parallel), in a shuffled order with repeats.
    let order: Vec<i64> = vec![35, 0, 7, 8, 9, 35, 16, 3, 24, 31, 30, 12];
    let b = be.windows_batch(&order).unwrap();
    assert_eq!(b.frames.shape, vec![order.len(), 10, 48, 64, 3]);
    for (i, &s) in order.iter().enumerate() {
        for k in 0..10 {
            let got = &b.frames.data[(i * 10 + k) * frame..][..frame];
            assert!(got == want[s as usize + k].as_slice(), "batch window {s}");
        }
    }
    let list = be.windows(&order).unwrap();
    for (i, w) in list.iter().enumerate() {
        assert_eq!(
            w.frames.data,
            b.frames.data[i * 10 * frame..(i + 1) * 10 * frame]
        );
    }
    // Frames skipped inside a window: frames s, s+3, s+6, s+9.
    let c = windows_of(&dir, WindowSpec::try_new(4, 2, 1).unwrap());
    let be = backend(&c);
    for s in 0..be.len() as i64 {
        let win = be.window(s).unwrap();
        for (k, f) in win.frames.data.chunks(frame).enumerate() {
            let i = win.frame_indices[k] as usize;
            assert_eq!(i, s as usize + 3 * k);
            assert!(f == want[i].as_slice(), "skip window {s} frame {k}");
        }
    }
    // Raw rows and decoded rows of the Backend API hold the same window.
    let c = windows_of(&dir, WindowSpec::try_new(3, 0, 1).unwrap());
    let row = c.backend.get(40).unwrap();
    match row.get("video") {
        Some(Value::Tensor(t)) => {
            assert_eq!(t.shape, vec![3, 48, 64, 3]);
            assert!(t.data[..frame] == want[40][..]);
        }
        other => panic!("a decoded window tensor, got {other:?}"),
    }
    let raw = c.backend.take(&[0, 42]).unwrap();
    assert_eq!(raw.num_rows(), 2);
}

#[test]
fn lossy_windows_hold_the_frame_of_their_index() {
    require_ffmpeg();
    let tmp = tempfile::tempdir().unwrap();
    let src = spinning_clip(tmp.path(), "a.mp4", 40, "96x64");
    let dir = tmp.path().join("seg");
    // The default: H.264 at its default CRF, segments of 32.
    let opts = VideoFramesOptions::default().with_threads(2);
    let w = build_one(&src, &dir, &opts);
    let s = w.metadata.segments.as_ref().unwrap();
    assert_eq!(
        (s.codec.as_str(), s.crf),
        ("h264", SegmentCodec::H264.default_crf())
    );
    assert_eq!(s.frames_per_segment, 32);
    let want = sequential_rgb(&src, 96, 64);
    let c = windows_of(&dir, WindowSpec::try_new(1, 0, 1).unwrap());
    let be = backend(&c);
    let all: Vec<i64> = (0..40).collect();
    let got = be.windows_batch(&all).unwrap().frames.data;
    let frame = 96 * 64 * 3;
    let psnr = shardset::video::quality::psnr;
    for i in 0..40usize {
        let f = &got[i * frame..(i + 1) * frame];
        let own = psnr(&want[i], f);
        assert!(own > 28.0, "frame {i}: {own:.2} dB");
        // Closer to its own source frame than to any neighbour.
        for (j, wj) in want
            .iter()
            .enumerate()
            .take((i + 3).min(40))
            .skip(i.saturating_sub(2))
        {
            if j != i {
                let other = psnr(wj, f);
                assert!(
                    own > other + 1.0,
                    "frame {i} ({own:.2} dB) looks like source frame {j} ({other:.2} dB)"
                );
            }
        }
    }
    // The recorded quality is what the frames cost.
    let mean: f64 = (0..40)
        .map(|i| psnr(&want[i], &got[i * frame..(i + 1) * frame]).min(100.0))
        .sum::<f64>()
        / 40.0;
    assert!(
        (mean - s.quality.psnr_mean).abs() < 1e-6,
        "{mean} vs {}",
        s.quality.psnr_mean
    );
}

#[test]
fn every_frame_count_from_one_to_three_segments_round_trips() {
    require_ffmpeg();
    let tmp = tempfile::tempdir().unwrap();
    let per = 4u32;
    let files: Vec<PathBuf> = (1..=3 * per)
        .map(|n| clip(tmp.path(), &format!("v{n:02}.mp4"), n, "32x32", H264))
        .collect();
    let dir = tmp.path().join("seg");
    let w = write_video_frames_cache(examples(&files), &features(), &dir, &lossless(per)).unwrap();
    let m = &w.metadata;
    assert_eq!(m.n_videos, 12);
    let mut row = 0;
    for (k, v) in m.videos.iter().enumerate() {
        let n = k as u64 + 1;
        assert_eq!((v.t, v.h, v.w, v.start_row), (n, 32, 32, row));
        row += n.div_ceil(u64::from(per));
    }
    assert_eq!(m.segments.as_ref().unwrap().num_segments, row);
    let c = windows_of(&dir, WindowSpec::try_new(1, 0, 1).unwrap());
    let be = backend(&c);
    let all: Vec<i64> = (0..be.len() as i64).collect();
    let got = be.windows_batch(&all).unwrap();
    let frame = 32 * 32 * 3;
    let mut at = 0;
    for (k, f) in files.iter().enumerate() {
        let want = sequential_rgb(f, 32, 32);
        assert_eq!(want.len(), k + 1);
        for (i, wf) in want.iter().enumerate() {
            assert!(
                &got.frames.data[at * frame..(at + 1) * frame] == wf.as_slice(),
                "video of {} frames, frame {i}",
                k + 1
            );
            assert_eq!(got.video_idx[at], k);
            at += 1;
        }
    }
    assert_eq!(at as u64, m.num_rows);
    // verify decodes every segment to exactly its frames.
    let rep = shardset::verify_cache(&dir).unwrap();
    assert!(rep.is_ok(), "{rep:?}");
    assert!(
        rep.checked.iter().any(|c| c.contains("every segment")),
        "{:?}",
        rep.checked
    );
}

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

/// Reads every window of `t` frames of the AV1 segments cache `good` (one
/// 64x64 video, `src`; `n` windows) and of its copy without `packet_frames`
/// (every unit decoded): the same bytes, window by window and as one batch,
/// and each frame the source's frame of its index (near it, and nearer it
/// than its neighbours).
fn windows_equal_the_every_unit_read(tmp: &Path, good: &Path, src: &Path, t: u32, n: u64) {
    let old = tmp.join("old");
    without_packet_frames(good, &old);
    let spec = WindowSpec::try_new(t, 0, 1).unwrap();
    let (a, b) = (windows_of(good, spec), windows_of(&old, spec));
    let (a, b) = (backend(&a), backend(&b));
    assert_eq!(a.len(), n);
    let want = sequential_rgb(src, 64, 64);
    for s in 0..a.len() as i64 {
        let (x, y) = (a.window(s).unwrap(), b.window(s).unwrap());
        assert!(x.frames.data == y.frames.data, "window {s}");
        for (k, f) in x.frames.data.chunks(64 * 64 * 3).enumerate() {
            let i = s as usize + k;
            let own = shardset::video::quality::psnr(&want[i], f);
            assert!(own > 20.0, "window {s} frame {i}: {own:.2} dB");
            for j in [i.wrapping_sub(1), i + 1] {
                if let Some(next) = want.get(j) {
                    let other = shardset::video::quality::psnr(next, f);
                    assert!(
                        own > other + 1.0,
                        "window {s} frame {i}: {own:.2} dB, against {j}: {other:.2}"
                    );
                }
            }
        }
    }
    let all: Vec<i64> = (0..a.len() as i64).rev().collect();
    assert!(
        a.windows_batch(&all).unwrap().frames.data == b.windows_batch(&all).unwrap().frames.data
    );
}

/// A copy of the segments cache `from` at `to` as written before the
/// `packet_frames` column existed: no column, no flag in the metadata.
fn without_packet_frames(from: &Path, to: &Path) {
    crate::common::copy_dir(from, to);
    rewrite_rows(to, "t = t.drop_columns(['packet_frames'])");
    edit_metadata(to, |m| {
        m["segments"]
            .as_object_mut()
            .unwrap()
            .remove("packet_frames");
    });
}

/// Rewrites `_metadata.json` with `f` applied (its self-checksum dropped,
/// so the layout's own checks are what answer).
fn edit_metadata(dir: &Path, f: impl FnOnce(&mut J)) {
    let p = dir.join("_metadata.json");
    let mut m: J = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    m.as_object_mut().unwrap().remove("metadata_xxh64");
    f(&mut m);
    std::fs::write(&p, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
}

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

/// Rewrites the Lance dataset of the cache at `dir` with pylance, the
/// table changed by the Python statements `edit` (on `t`, a pyarrow table).
fn rewrite_rows(dir: &Path, edit: &str) {
    require_python_module("lance");
    let code = format!(
        "import lance, sys, json, pyarrow as pa\n\
         t = lance.dataset(sys.argv[1]).to_table()\n\
         {edit}\n\
         lance.write_dataset(t, sys.argv[1], mode='overwrite')\n\
         print(json.dumps(t.num_rows))"
    );
    python_json(&code, &[dir.as_os_str()]);
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

/// Zeroes the packet bytes of Lance row `row` where they lie in the
/// dataset's data file.
fn zero_segment_bytes(dir: &Path, row: usize) {
    require_python_module("lance");
    let j = python_json(
        "import lance, sys, json\n\
         t = lance.dataset(sys.argv[1]).to_table(columns=['data'])\n\
         print(json.dumps(list(t.column('data')[int(sys.argv[2])].as_py())))",
        &[dir.as_os_str(), std::ffi::OsStr::new(&row.to_string())],
    );
    let bytes: Vec<u8> = j
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap() as u8)
        .collect();
    let mut hit = false;
    for e in walkdir(dir.join("data")) {
        let mut f = std::fs::read(&e).unwrap();
        if let Some(at) = f.windows(bytes.len()).position(|w| w == bytes.as_slice()) {
            f[at..at + bytes.len()].fill(0);
            std::fs::write(&e, f).unwrap();
            hit = true;
        }
    }
    assert!(hit, "the segment's bytes are in a data file");
}

fn walkdir(d: PathBuf) -> Vec<PathBuf> {
    std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
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

#[test]
fn the_segment_decoded_last_serves_the_frames_it_holds_without_decoding() {
    require_ffmpeg();
    let tmp = tempfile::tempdir().unwrap();
    // 45 frames in segments of 16, lossless: segment 1 holds frames 16..32.
    let src = clip(tmp.path(), "a.mp4", 45, "64x48", H264);
    let good = tmp.path().join("seg");
    build_one(&src, &good, &lossless(16));
    // Without packet frames every packet decodes, so a window keeps every
    // frame of its segment up to its last one.
    let old = tmp.path().join("old");
    without_packet_frames(&good, &old);
    let want = sequential_rgb(&src, 64, 48);
    let frame = 64 * 48 * 3;
    let exact = |data: &[u8], starts: &[i64], what: &str| {
        let mut frames = data.chunks(frame);
        for &s in starts {
            for k in 0..6 {
                let f = frames.next().unwrap();
                assert!(f == want[s as usize + k].as_slice(), "{what}: window {s}");
            }
        }
        assert!(frames.next().is_none(), "{what}");
    };
    let c = windows_of(&old, WindowSpec::try_new(6, 0, 1).unwrap());
    let be = backend(&c);
    assert_eq!(be.segments_decoded(), 0);
    // Frames 20..26 decode frames 16..26 of segment 1.
    exact(&be.window(20).unwrap().frames.data, &[20], "first read");
    assert_eq!(be.segments_decoded(), 1);
    // Windows inside what it holds, picked or not, decode nothing.
    for s in [20, 17, 16, 18] {
        exact(&be.window(s).unwrap().frames.data, &[s], "held");
        assert_eq!(be.segments_decoded(), 1, "window {s}");
    }
    exact(
        &be.windows_batch(&[19, 16, 19]).unwrap().frames.data,
        &[19, 16, 19],
        "held, batched",
    );
    assert_eq!(be.segments_decoded(), 1);
    // Frame 26 was not decoded: segment 1 again, once.
    exact(&be.window(21).unwrap().frames.data, &[21], "one frame more");
    assert_eq!(be.segments_decoded(), 2);
    // Across the boundary: segment 1's part is held, segment 0 decodes.
    exact(&be.window(12).unwrap().frames.data, &[12], "across");
    assert_eq!(be.segments_decoded(), 3);
    // Segment 0 is now the one held.
    exact(&be.window(10).unwrap().frames.data, &[10], "segment 0");
    assert_eq!(be.segments_decoded(), 3);
    // A reader opened afresh holds nothing.
    let again = windows_of(&old, WindowSpec::try_new(6, 0, 1).unwrap());
    exact(
        &backend(&again).window(17).unwrap().frames.data,
        &[17],
        "fresh",
    );
    assert_eq!(backend(&again).segments_decoded(), 1);

    // With packet frames, the same window twice decodes once, and every
    // window of a reader read in a shuffled order is exact.
    let c = windows_of(&good, WindowSpec::try_new(6, 0, 1).unwrap());
    let be = backend(&c);
    exact(&be.window(20).unwrap().frames.data, &[20], "packet frames");
    exact(
        &be.window(20).unwrap().frames.data,
        &[20],
        "packet frames again",
    );
    assert_eq!(be.segments_decoded(), 1);
    let mut order: Vec<i64> = (0..be.len() as i64).collect();
    order.sort_by_key(|&s| (s * 7919) % 40);
    for s in order {
        exact(&be.window(s).unwrap().frames.data, &[s], "shuffled");
    }
}
