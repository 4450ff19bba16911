//! The `lance-video-segments` layout: closed segments of frames encoded
//! with H.264 (or AV1), written by the video writer and read as windows by
//! the same backend as frames caches; frame-exact, measured, resumable.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as J;
use shardset::layouts::backend::Backend;
use shardset::video::segment::{read_yuv420, yuv420_to_rgb};
use shardset::{
    open_cache_with, write_video_frames_cache, Dtype, Example, Feature, Features, LanceVideoFrames,
    OpenOptions, SegmentCodec, SegmentSettings, Value, VideoFramesOptions, VideoStorage,
    WindowSpec,
};

use crate::common::{python_json, require_ffmpeg, require_python_module};

/// A clip of `frames` frames of ffmpeg's `testsrc` (a moving pattern and a
/// frame counter: every frame differs from its neighbours).
pub(crate) fn clip(dir: &Path, name: &str, frames: u32, size: &str, codec: &[&str]) -> PathBuf {
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
pub(crate) fn spinning_clip(dir: &Path, name: &str, frames: u32, size: &str) -> PathBuf {
    clip_of(
        dir,
        name,
        frames,
        &format!("testsrc=size={size}:rate=25,hue=H=2*PI*t*7:s=2"),
        &["-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", "10"],
    )
}

pub(crate) fn clip_of(
    dir: &Path,
    name: &str,
    frames: u32,
    source: &str,
    codec: &[&str],
) -> PathBuf {
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

pub(crate) const H264: &[&str] = &["-c:v", "libx264", "-pix_fmt", "yuv420p"];

pub(crate) fn features() -> Features {
    Features::new()
        .with("video", Feature::video(VideoStorage::Segments))
        .with("label", Feature::value(Dtype::Int64))
}

pub(crate) fn examples(files: &[PathBuf]) -> Vec<Example> {
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
pub(crate) fn lossless(per: u32) -> VideoFramesOptions {
    VideoFramesOptions::default().with_threads(2).with_segments(
        SegmentSettings::new(SegmentCodec::H264)
            .try_with_crf(0)
            .unwrap()
            .try_with_frames_per_segment(per)
            .unwrap(),
    )
}

/// Builds the segments cache of one video.
pub(crate) fn build_one(
    src: &Path,
    dir: &Path,
    opts: &VideoFramesOptions,
) -> shardset::WrittenVideoFrames {
    write_video_frames_cache(
        examples(std::slice::from_ref(&src.to_path_buf())),
        &features(),
        dir,
        opts,
    )
    .unwrap()
}

pub(crate) fn windows_of(dir: &Path, spec: WindowSpec) -> shardset::Cache {
    open_cache_with(dir, &OpenOptions::default().with_windows(spec)).unwrap()
}

pub(crate) fn backend(c: &shardset::Cache) -> &LanceVideoFrames {
    c.backend
        .as_any()
        .downcast_ref::<LanceVideoFrames>()
        .expect("a segments cache opens as a video backend")
}

/// The source's frames as RGB, decoded one after another from the start
/// (FFmpeg, then the same YUV to RGB conversion the reader uses).
pub(crate) fn sequential_rgb(path: &Path, w: u32, h: u32) -> Vec<Vec<u8>> {
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

/// Reads every window of `t` frames of the AV1 segments cache `good` (one
/// 64x64 video, `src`; `n` windows) and of its copy without `packet_frames`
/// (every unit decoded): the same bytes, window by window and as one batch,
/// and each frame the source's frame of its index (near it, and nearer it
/// than its neighbours).
pub(crate) fn windows_equal_the_every_unit_read(
    tmp: &Path,
    good: &Path,
    src: &Path,
    t: u32,
    n: u64,
) {
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
pub(crate) fn without_packet_frames(from: &Path, to: &Path) {
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
pub(crate) fn edit_metadata(dir: &Path, f: impl FnOnce(&mut J)) {
    let p = dir.join("_metadata.json");
    let mut m: J = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    m.as_object_mut().unwrap().remove("metadata_xxh64");
    f(&mut m);
    std::fs::write(&p, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
}

/// Rewrites the Lance dataset of the cache at `dir` with pylance, the
/// table changed by the Python statements `edit` (on `t`, a pyarrow table).
pub(crate) fn rewrite_rows(dir: &Path, edit: &str) {
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

/// Zeroes the packet bytes of Lance row `row` where they lie in the
/// dataset's data file.
pub(crate) fn zero_segment_bytes(dir: &Path, row: usize) {
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

pub(crate) fn walkdir(d: PathBuf) -> Vec<PathBuf> {
    std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
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
