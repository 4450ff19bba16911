//! Video windows through the input pipeline: a frames cache and a
//! segments cache, one crop and flip per window for all its frames, each
//! layout, every window once.

use std::path::{Path, PathBuf};
use std::process::Command;

use shardset::pipeline::{Batch, Element, Layout, Pipeline, PipelineOptions};
use shardset::{
    open_cache_with, Dataset, Dtype, Example, Feature, Features, LanceVideoFrames, LoaderOptions,
    OpenOptions, Order, Partition, Remainder, SegmentCodec, SegmentSettings, Value,
    VideoFramesOptions, VideoStorage, WindowSpec, WithinShard,
};

use crate::common::{golden_copy, require_ffmpeg};

fn windows(dir: &Path, spec: WindowSpec) -> Dataset {
    Dataset::new(open_cache_with(dir, &OpenOptions::default().with_windows(spec)).unwrap())
}

fn frames_of(ds: &Dataset) -> &LanceVideoFrames {
    ds.backend().as_any().downcast_ref().unwrap()
}

fn segments_cache(tmp: &Path) -> PathBuf {
    require_ffmpeg();
    let src = tmp.join("clip.mp4");
    let o = Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "testsrc=size=48x40:rate=25",
        ])
        .args(["-frames:v", "30", "-c:v", "libx264", "-pix_fmt", "yuv420p"])
        .arg(&src)
        .output()
        .expect("ffmpeg runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = tmp.join("segments");
    let f = Features::new()
        .with("video", Feature::video(VideoStorage::Segments))
        .with("label", Feature::value(Dtype::Int64));
    let opts = VideoFramesOptions::default().with_segments(
        SegmentSettings::new(SegmentCodec::H264)
            .try_with_frames_per_segment(8)
            .unwrap(),
    );
    let ex = vec![Example::new()
        .with("video", Value::Path(src))
        .with("label", 0i64)];
    shardset::write_video_frames_cache(ex, &f, &dir, &opts).unwrap();
    dir
}

fn pipeline(ds: &Dataset, ops: &str, layout: Layout, threads: usize) -> Pipeline {
    let l = LoaderOptions::default()
        .with_order(Order::ShardShuffle(WithinShard::Random))
        .with_seed(5)
        .with_partition(Partition::new(0, 1, 0, 1, Remainder::Partial).unwrap())
        .try_with_batch_size(2)
        .unwrap();
    let opts = PipelineOptions::default()
        .with_loader(l)
        .try_with_threads(threads)
        .unwrap()
        .with_layout(layout)
        .try_with_ops_json("video", ops)
        .unwrap();
    Pipeline::new(ds.clone(), opts).unwrap()
}

/// Frame `f` of window `i` of a `[B, C, T, H, W]` or `[B, T, C, H, W]` batch, as HWC.
fn frame(b: &Batch, layout: Layout, i: usize, f: usize) -> Vec<u8> {
    let c = b.column("video").unwrap();
    let s = &c.shape;
    let (t, h, w) = match layout {
        Layout::Cthw => (s[2], s[3], s[4]),
        Layout::Chw => (s[1], s[3], s[4]),
        Layout::Hwc => (s[1], s[2], s[3]),
    };
    let mut out = vec![0u8; h * w * 3];
    for y in 0..h {
        for x in 0..w {
            for ch in 0..3 {
                let at = match layout {
                    Layout::Cthw => (((i * 3 + ch) * t + f) * h + y) * w + x,
                    Layout::Chw => (((i * t + f) * 3 + ch) * h + y) * w + x,
                    Layout::Hwc => (((i * t + f) * h + y) * w + x) * 3 + ch,
                };
                out[(y * w + x) * 3 + ch] = c.data[at];
            }
        }
    }
    out
}

/// The centre `ch × cw` of an HWC frame, mirrored when `flip`.
fn centre(px: &[u8], h: usize, w: usize, ch: usize, cw: usize, flip: bool) -> Vec<u8> {
    // torchvision's: int(round((h - ch) / 2.0)), Python's round half to even.
    let top = ((h - ch) as f64 / 2.0).round_ties_even() as usize;
    let left = ((w - cw) as f64 / 2.0).round_ties_even() as usize;
    let mut out = Vec::with_capacity(ch * cw * 3);
    for y in 0..ch {
        for x in 0..cw {
            let sx = if flip { cw - 1 - x } else { x };
            let at = ((top + y) * w + left + sx) * 3;
            out.extend_from_slice(&px[at..at + 3]);
        }
    }
    out
}

fn check_cache(ds: &Dataset) {
    let fr = frames_of(ds);
    let ops =
        r#"[{"op": "center_crop", "size": [16, 20]}, {"op": "random_horizontal_flip", "p": 0.5}]"#;
    let mut flips = [0usize; 2];
    for layout in [Layout::Chw, Layout::Hwc, Layout::Cthw] {
        let mut seen = Vec::new();
        for b in pipeline(ds, ops, layout, 2) {
            let b = b.unwrap();
            let col = b.column("video").unwrap();
            assert_eq!(col.element, Element::UInt8);
            let n = b.len();
            let want_shape = match layout {
                Layout::Chw => vec![n, 4, 3, 16, 20],
                Layout::Hwc => vec![n, 4, 16, 20, 3],
                Layout::Cthw => vec![n, 3, 4, 16, 20],
            };
            assert_eq!(col.shape, want_shape, "{layout}");
            let ids: Vec<i64> = b
                .column("sample_idx")
                .unwrap()
                .data
                .chunks_exact(8)
                .map(|x| i64::from_ne_bytes(x.try_into().unwrap()))
                .collect();
            let wins = fr.windows(&ids).unwrap();
            for (i, win) in wins.iter().enumerate() {
                let (h, w) = (win.frames.shape[1], win.frames.shape[2]);
                let len = h * w * 3;
                let first = frame(&b, layout, i, 0);
                let flip = first != centre(&win.frames.data[..len], h, w, 16, 20, false);
                flips[usize::from(flip)] += 1;
                for f in 0..4 {
                    let src = &win.frames.data[f * len..(f + 1) * len];
                    assert_eq!(
                        frame(&b, layout, i, f),
                        centre(src, h, w, 16, 20, flip),
                        "{layout}: window {} frame {f}: one crop and flip for the whole window",
                        ids[i]
                    );
                }
            }
            seen.extend(ids);
        }
        seen.sort();
        assert_eq!(seen, (0..ds.len() as i64).collect::<Vec<_>>(), "{layout}");
    }
    assert!(
        flips[0] > 0 && flips[1] > 0,
        "some windows flipped, some not: {flips:?}"
    );
}

#[test]
fn frames_cache_windows_through_the_ops() {
    let (_t, dir) = golden_copy("lance_video_frames");
    let ds = windows(&dir, WindowSpec::try_new(4, 1, 1).unwrap());
    check_cache(&ds);
    // The same batches at another thread count.
    let ops = r#"[{"op": "random_resized_crop", "size": [12, 12]}]"#;
    let a: Vec<Vec<u8>> = pipeline(&ds, ops, Layout::Chw, 1)
        .map(|b| b.unwrap().column("video").unwrap().data.clone())
        .collect();
    let b: Vec<Vec<u8>> = pipeline(&ds, ops, Layout::Chw, 3)
        .map(|b| b.unwrap().column("video").unwrap().data.clone())
        .collect();
    assert_eq!(a, b);
}

#[test]
fn segments_cache_windows_through_the_ops() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = segments_cache(tmp.path());
    let ds = windows(&dir, WindowSpec::try_new(4, 0, 3).unwrap());
    assert!(ds.len() >= 8);
    check_cache(&ds);
}

#[test]
fn a_video_column_without_ops_or_with_bad_columns_is_refused() {
    let (_t, dir) = golden_copy("lance_video_frames");
    let ds = windows(&dir, WindowSpec::try_new(4, 1, 1).unwrap());
    let e = Pipeline::new(ds.clone(), PipelineOptions::default()).unwrap_err();
    assert!(
        e.to_string().contains("'video'") && e.to_string().contains("size"),
        "{e}"
    );
    let e = Pipeline::new(
        ds.clone(),
        PipelineOptions::default().with_columns(["video_idx", "label"]),
    )
    .unwrap_err();
    assert!(e.to_string().contains("'label'"), "{e}");
    // The places alone need no ops.
    let mut p = Pipeline::new(ds, PipelineOptions::default().with_columns(["sample_idx"])).unwrap();
    assert_eq!(p.next().unwrap().unwrap().columns.len(), 1);
}
