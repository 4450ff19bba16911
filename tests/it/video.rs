//! Video: the lance-video-frames writer and backend, FFmpeg decoding of the
//! common containers, frame-exact reads and read-time clip decoding.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as J;
use shardset::layouts::backend::Backend;
use shardset::video::decode::{read_frames_rgb, FrameIndex, PixelTarget, VideoFile};
use shardset::{
    open_cache, open_cache_with, write_video_frames_cache, ClipLayout, Dataset, Dtype, Error,
    Example, Feature, Features, OpenOptions, Pad, ResizeMode, Sampling, Value, VideoDecode,
    VideoFramesOptions, VideoStorage, WindowSpec,
};

use crate::common::{golden, golden_copy, require_ffmpeg, sha256, snapshot};

/// A synthetic clip of `frames` frames (testsrc: every frame differs).
pub(crate) fn make_video(
    dir: &Path,
    name: &str,
    frames: u32,
    size: &str,
    codec_args: &[&str],
) -> PathBuf {
    let out = dir.join(name);
    let mut cmd = Command::new("ffmpeg");
    cmd.args(["-v", "error", "-y", "-f", "lavfi", "-i"])
        .arg(format!("testsrc=size={size}:rate=25"))
        .args(["-frames:v", &frames.to_string()])
        .args(codec_args)
        .arg(&out);
    let o = cmd.output().expect("ffmpeg runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

pub(crate) fn frames_features() -> Features {
    Features::new()
        .with("video", Feature::video(VideoStorage::Frames))
        .with("label", Feature::value(Dtype::Int64))
        .with("caption", Feature::value(Dtype::String))
}

pub(crate) fn golden_examples() -> Vec<Example> {
    let src = golden().join("sources");
    ["clip_a.mp4", "broken.mp4", "clip_b.mp4"]
        .iter()
        .enumerate()
        .map(|(i, f)| {
            Example::new()
                .with("video", Value::Path(src.join(f)))
                .with("label", i as i64)
                .with("caption", format!("clip {i}"))
        })
        .collect()
}

pub(crate) fn window_json(w: &shardset::Window) -> (String, f64) {
    let mean =
        w.frames.data.iter().map(|&b| f64::from(b)).sum::<f64>() / w.frames.data.len() as f64;
    (sha256(&w.frames.data), mean)
}

#[test]
fn reference_frames_cache_reproduces_the_expected_windows() {
    let (_t, dir) = golden_copy("lance_video_frames");
    let expected: J = serde_json::from_slice(
        &std::fs::read(golden().join("expected_video_windows.json")).unwrap(),
    )
    .unwrap();
    let c = open_cache_with(
        &dir,
        &OpenOptions::default().with_windows(WindowSpec::try_new(4, 1, 3).unwrap()),
    )
    .unwrap();
    assert_eq!(c.layout, "lance-video-frames");
    assert_eq!(c.len(), expected["num_windows"].as_u64().unwrap());
    let be = c
        .backend
        .as_any()
        .downcast_ref::<shardset::LanceVideoFrames>()
        .unwrap();
    let all: Vec<i64> = (0..c.len() as i64).collect();
    let windows = be.windows(&all).unwrap();
    for (w, e) in windows.iter().zip(expected["windows"].as_array().unwrap()) {
        assert_eq!(w.video_idx as u64, e["video_idx"].as_u64().unwrap());
        assert_eq!(w.filename.as_deref(), e["filename"].as_str());
        assert_eq!(w.start_frame, e["start_frame"].as_u64().unwrap());
        let fi: Vec<u64> = e["frame_indices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        assert_eq!(w.frame_indices, fi);
        let shape: Vec<usize> = e["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(w.frames.shape, shape);
        let (digest, mean) = window_json(w);
        assert_eq!(
            digest,
            e["sha256"].as_str().unwrap(),
            "pixels of window {}",
            w.sample_idx
        );
        assert!((mean - e["mean"].as_f64().unwrap()).abs() < 1e-9);
        assert_eq!(w.metadata["label"], e["label"]);
        assert_eq!(w.metadata["caption"], e["caption"]);
    }
    // The same through the generic row API: the tensor under the real column name.
    let row = c.backend.get(-1).unwrap();
    let Value::Tensor(t) = row.get("video").unwrap() else {
        panic!("{row:?}")
    };
    assert_eq!(
        sha256(&t.data),
        expected["windows"][8]["sha256"].as_str().unwrap()
    );
    assert_eq!(row.get("caption").and_then(|v| v.as_str()), Some("clip 2"));
    assert_eq!(row.get("sample_idx").and_then(|v| v.as_i64()), Some(8));
    // Raw batches hold the WebP frames; take keeps order and duplicates.
    let b = c.backend.take(&[3, 0, 3]).unwrap();
    assert_eq!(b.num_rows(), 3);
    let starts = b.column_by_name("start_frame").unwrap();
    let starts = starts
        .as_any()
        .downcast_ref::<arrow_array::Int64Array>()
        .unwrap();
    assert_eq!(starts.values().to_vec(), vec![9, 0, 9]);
    // Shards are the videos; iteration covers every window once.
    assert_eq!(c.backend.shard_row_counts(), &[6, 3]);
    let n: usize = c
        .backend
        .iter_batches(&Default::default())
        .unwrap()
        .map(|b| b.unwrap().num_rows())
        .sum();
    assert_eq!(n, 9);
    // Another plan over the same cache.
    let one = be.with_windows(WindowSpec::default()).unwrap();
    assert_eq!(one.len(), 39);
    assert!(
        be.with_windows(WindowSpec::try_new(30, 0, 1).unwrap())
            .is_err(),
        "no video has 30 frames"
    );
}

#[test]
fn frames_cache_of_the_reference_sources() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("frames");
    let opts = VideoFramesOptions::default()
        .with_webp(shardset::WebpSettings::try_new(80.0, 4).unwrap())
        .with_threads(2);
    let w = write_video_frames_cache(golden_examples(), &frames_features(), &dir, &opts).unwrap();
    let m = &w.metadata;
    let gold: J = serde_json::from_slice(
        &std::fs::read(golden().join("lance_video_frames/_metadata.json")).unwrap(),
    )
    .unwrap();
    // The reference's keys and values (paths and checksums aside).
    let ours: J =
        serde_json::from_slice(&std::fs::read(dir.join("_metadata.json")).unwrap()).unwrap();
    for k in [
        "cache_format_version",
        "format",
        "layout",
        "schema_fingerprint",
        "num_rows",
        "total_rows",
        "n_videos",
        "n_skipped",
        "encoding",
        "quality",
        "resize",
        "video_column",
    ] {
        assert_eq!(ours[k], gold[k], "key {k}");
    }
    for (o, g) in ours["videos"]
        .as_array()
        .unwrap()
        .iter()
        .zip(gold["videos"].as_array().unwrap())
    {
        for k in ["id", "T", "H", "W", "start_row", "metadata"] {
            assert_eq!(o[k], g[k], "video key {k}");
        }
        assert!(o["path"]
            .as_str()
            .unwrap()
            .ends_with(g["path"].as_str().unwrap()));
        assert_eq!(o["checksum"].as_str().unwrap().len(), 64);
    }
    assert_eq!(m.videos[0].key, J::from(0));
    assert_eq!(m.skipped.as_ref().unwrap()[0]["id"], 1);
    // Windows read back with the same plan as the reference's cache, and
    // pixels close to it (both are lossy WebP of the same decoded frames).
    let spec = WindowSpec::try_new(4, 1, 3).unwrap();
    let ours = open_cache_with(&dir, &OpenOptions::default().with_windows(spec)).unwrap();
    let (_g, gdir) = golden_copy("lance_video_frames");
    let theirs = open_cache_with(&gdir, &OpenOptions::default().with_windows(spec)).unwrap();
    assert_eq!(ours.len(), theirs.len());
    let a = ours
        .backend
        .as_any()
        .downcast_ref::<shardset::LanceVideoFrames>()
        .unwrap();
    let b = theirs
        .backend
        .as_any()
        .downcast_ref::<shardset::LanceVideoFrames>()
        .unwrap();
    for i in 0..ours.len() as i64 {
        let (x, y) = (a.window(i).unwrap(), b.window(i).unwrap());
        assert_eq!(x.frames.shape, y.frames.shape);
        assert_eq!(x.frame_indices, y.frame_indices);
        let mad = x
            .frames
            .data
            .iter()
            .zip(&y.frames.data)
            .map(|(p, q)| (i32::from(*p) - i32::from(*q)).abs() as f64)
            .sum::<f64>()
            / x.frames.data.len() as f64;
        assert!(mad < 6.0, "window {i}: mean abs difference {mad}");
    }
    // The default encoder input is the reference's (packed RGB through
    // libwebp's import, as OpenCV's imencode): the same clips and quality
    // give the very same WebP bytes, so the same sizes.
    let frame_hashes = |d: &Path| {
        use arrow_array::cast::AsArray;
        use arrow_array::Array;
        let mut out = Vec::new();
        shardset::lance::scan_dataset(d, None, &["bytes".to_string()], |b| {
            let a = b.column(0).as_binary::<i64>();
            out.extend((0..a.len()).map(|i| sha256(a.value(i))));
        })
        .unwrap();
        out
    };
    let (ours_bytes, theirs_bytes) = (frame_hashes(&dir), frame_hashes(&gdir));
    assert_eq!(ours_bytes.len(), 39);
    assert_eq!(ours_bytes, theirs_bytes);
    // pylance opens it with the reference's schema.
    {
        crate::common::require_python_module("lance");
        let j: J = crate::common::python_json("import lance, sys, json; ds = lance.dataset(sys.argv[1]); t = ds.to_table(columns=['video_id', 'frame_idx']); print(json.dumps({'schema': str(ds.schema), 'n': ds.count_rows(), 'ids': sorted(set(t.column('video_id').to_pylist())), 'last': t.column('frame_idx').to_pylist()[-1]}))", &[&dir]);
        assert_eq!(
            j["schema"],
            "video_id: int32\nframe_idx: int32\nbytes: large_binary"
        );
        assert_eq!(j["n"], 39);
        assert_eq!(j["ids"], serde_json::json!([0, 2]));
        assert_eq!(j["last"], 14);
    }
}

#[test]
fn containers_decode_and_reads_are_frame_exact() {
    require_ffmpeg();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let gop = ["-g", "8", "-bf", "2"];
    let videos = vec![
        make_video(
            d,
            "a.mp4",
            30,
            "64x48",
            &[&["-c:v", "libx264", "-pix_fmt", "yuv420p"][..], &gop[..]].concat(),
        ),
        make_video(
            d,
            "b.avi",
            30,
            "64x48",
            &[&["-c:v", "mpeg4"][..], &gop[..]].concat(),
        ),
        make_video(
            d,
            "c.webm",
            30,
            "64x48",
            &["-c:v", "libvpx-vp9", "-g", "8", "-deadline", "realtime"],
        ),
        make_video(
            d,
            "d.mkv",
            30,
            "64x48",
            &[&["-c:v", "libx264", "-pix_fmt", "yuv444p"][..], &gop[..]].concat(),
        ),
    ];
    for v in &videos {
        // Sequential decode: every frame, in order.
        let mut all = Vec::new();
        let mut f = VideoFile::open(v).unwrap();
        let n = f
            .for_each_frame(v, PixelTarget::Rgb, None, |_, fr| {
                let (w, h, s) = (64usize, 48usize, fr.stride(0));
                let mut px = Vec::new();
                for y in 0..h {
                    px.extend_from_slice(&fr.data(0)[y * s..y * s + w * 3]);
                }
                all.push(px);
                Ok(true)
            })
            .unwrap();
        assert_eq!(n, 30, "{}", v.display());
        let ix = FrameIndex::read(v).unwrap();
        assert_eq!(ix.packets, 30, "{}", v.display());
        // Random reads (seeking to keyframes) give exactly the same frames.
        for want in [vec![29u64, 3, 17, 17, 0], vec![8, 9, 24], vec![15]] {
            let (got, w, h) = read_frames_rgb(v, &want, None, Some(&ix)).unwrap();
            assert_eq!((w, h), (64, 48));
            for (g, &i) in got.iter().zip(&want) {
                assert!(
                    g == &all[i as usize],
                    "{}: frame {i} differs from the sequential decode",
                    v.display()
                );
            }
        }
        assert!(read_frames_rgb(v, &[30], None, Some(&ix)).is_err());
        // One open for the index and the frames: the same frames, read from
        // a file left at its end by indexing; and without an index too.
        for (want, indexed) in [(vec![29u64, 3, 17, 17, 0], true), (vec![0, 12, 5], false)] {
            let mut file = VideoFile::open(v).unwrap();
            let ix2 = FrameIndex::read_from(&mut file, v).unwrap();
            assert_eq!((ix2.packets, &ix2.pts), (ix.packets, &ix.pts));
            let (got, ..) = shardset::video::decode::read_frames_rgb_from(
                file,
                v,
                &want,
                None,
                indexed.then_some(&ix2),
            )
            .unwrap();
            for (g, &i) in got.iter().zip(&want) {
                assert!(
                    g == &all[i as usize],
                    "{}: frame {i} (one open, indexed {indexed}) differs",
                    v.display()
                );
            }
        }
    }
    // Each container builds into a frames cache with every frame.
    let f = Features::new().with("video", Feature::video(VideoStorage::Frames));
    let dir = d.join("frames");
    let ex = videos
        .iter()
        .map(|p| Example::new().with("video", Value::Path(p.clone())));
    let w = write_video_frames_cache(ex, &f, &dir, &VideoFramesOptions::default().with_threads(3))
        .unwrap();
    assert_eq!(
        w.metadata.videos.iter().map(|v| v.t).collect::<Vec<_>>(),
        vec![30; 4]
    );
    assert_eq!(w.metadata.n_skipped, 0);
    let c = open_cache(&dir).unwrap();
    assert_eq!(c.len(), 120);
}

#[test]
fn resize_rules() {
    require_ffmpeg();
    assert_eq!(ResizeMode::Square.apply(Some(8), 32, 16), (8, 8));
    assert_eq!(ResizeMode::Square.apply(Some(64), 32, 16), (32, 16));
    assert_eq!(ResizeMode::ShorterSide.apply(Some(24), 64, 48), (32, 24));
    assert_eq!(ResizeMode::ShorterSide.apply(Some(24), 48, 64), (24, 32));
    assert_eq!(ResizeMode::ShorterSide.apply(None, 48, 64), (48, 64));
    let tmp = tempfile::tempdir().unwrap();
    let v = make_video(tmp.path(), "r.mp4", 6, "64x48", &["-c:v", "libx264"]);
    let f = Features::new().with("video", Feature::video(VideoStorage::Frames));
    for (mode, want) in [
        (ResizeMode::Square, (32, 32)),
        (ResizeMode::ShorterSide, (43, 32)),
    ] {
        let dir = tmp.path().join(format!("{mode:?}"));
        let o = VideoFramesOptions::default()
            .try_with_resize(Some(32))
            .unwrap()
            .with_resize_mode(mode);
        let w = write_video_frames_cache(
            vec![Example::new().with("video", Value::Path(v.clone()))],
            &f,
            &dir,
            &o,
        )
        .unwrap();
        assert_eq!((w.metadata.videos[0].w, w.metadata.videos[0].h), want);
        assert_eq!(w.metadata.resize, Some(32));
        let c = open_cache(&dir).unwrap();
        let Value::Tensor(t) = c.backend.get(0).unwrap().get("video").unwrap().clone() else {
            panic!()
        };
        assert_eq!(t.shape, vec![1, want.1 as usize, want.0 as usize, 3]);
    }
}

#[test]
fn bad_frames_caches_are_typed_errors() {
    let (_t, dir) = golden_copy("lance_video_frames");
    let before = snapshot(&dir);
    let meta_path = dir.join("_metadata.json");
    let good = std::fs::read_to_string(&meta_path).unwrap();
    let edit = |f: &dyn Fn(&mut J)| {
        let mut j: J = serde_json::from_str(&good).unwrap();
        f(&mut j);
        std::fs::write(&meta_path, serde_json::to_vec(&j).unwrap()).unwrap();
        open_cache(&dir)
    };
    assert!(matches!(
        edit(&|j| j["videos"] = serde_json::json!([])),
        Err(Error::Metadata { .. })
    ));
    assert!(matches!(
        edit(&|j| j["videos"][1]["start_row"] = 3.into()),
        Err(Error::Metadata { .. })
    ));
    assert!(matches!(
        edit(&|j| j["num_rows"] = 40.into()),
        Err(Error::Metadata { .. })
    ));
    assert!(matches!(
        edit(&|j| j["videos"][0]["T"] = "x".into()),
        Err(Error::Metadata { .. })
    ));
    std::fs::write(&meta_path, b"{not json").unwrap();
    assert!(matches!(open_cache(&dir), Err(Error::Metadata { .. })));
    std::fs::write(&meta_path, &good).unwrap();
    // The caller's features are checked against the fingerprint.
    let other = Features::new().with("video", Feature::video(VideoStorage::Frames));
    assert!(matches!(
        open_cache_with(&dir, &OpenOptions::default().with_features(other)),
        Err(Error::SchemaMismatch { .. })
    ));
    assert_eq!(snapshot(&dir), before, "reading changed nothing");
    // A deleted data file: an error naming the cache on read, never a panic.
    let data = dir.join("data");
    for e in std::fs::read_dir(&data).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    let r = open_cache(&dir).and_then(|c| c.backend.get(0).map(|_| ()));
    assert!(r.is_err());
}

#[test]
fn path_and_bytes_videos_decode_at_read_time() {
    for name in ["arrow_video_path", "arrow_video_bytes"] {
        let (_t, dir) = golden_copy(name);
        let ds = Dataset::new(open_cache(&dir).unwrap());
        let Value::Video(r) = ds.get(0).unwrap().get("video").unwrap().clone() else {
            panic!()
        };
        let mut p = VideoDecode::new(4);
        let clip = p.decode(&r, 0).unwrap();
        assert_eq!(clip.frames.shape, vec![4, 48, 64, 3]);
        assert_eq!(clip.video_frames, 24);
        assert_eq!(clip.frame_indices, vec![0, 8, 15, 23]);
        // The uniform frames are exactly the sequentially decoded ones.
        let src = golden().join("sources/clip_a.mp4");
        let (seq, _, _) = read_frames_rgb(&src, &[0, 8, 15, 23], None, None).unwrap();
        assert_eq!(clip.frames.data, seq.concat());
        p.layout = ClipLayout::Tchw;
        p.dtype = Dtype::Float32;
        p.resize = Some((24, 32));
        p.sampling = Sampling::Random;
        p.seed = Some(5);
        let c2 = p.decode(&r, 3).unwrap();
        assert_eq!(c2.frames.shape, vec![4, 3, 24, 32]);
        assert_eq!(c2.frames.dtype, Dtype::Float32);
        assert_eq!(c2.frame_indices, p.decode(&r, 3).unwrap().frame_indices);
        p.num_frames = 40;
        p.sampling = Sampling::Start;
        assert!(p.decode(&r, 0).is_err(), "too short with pad=error");
        p.pad = Pad::Loop;
        assert_eq!(p.decode(&r, 0).unwrap().frame_indices[24], 0);
        // Through the dataset: the column becomes a clip tensor.
        let dv = ds.with_video_decode(Some(VideoDecode::new(2))).unwrap();
        let Value::Tensor(t) = dv.get(2).unwrap().get("video").unwrap().clone() else {
            panic!()
        };
        assert_eq!(t.shape[0], 2);
        let Value::Video(_) = ds.get(2).unwrap().get("video").unwrap() else {
            panic!("the original dataset is unchanged")
        };
        assert!(ds.with_video_decode(Some(VideoDecode::new(0))).is_err());
    }
    let (_t, dir) = golden_copy("arrow_multi_shard");
    let ds = Dataset::new(open_cache(&dir).unwrap());
    assert!(
        ds.with_video_decode(Some(VideoDecode::new(2))).is_err(),
        "no video column"
    );
}

/// A video of a frames cache: id, T, start_row, path and metadata.
pub(crate) type VideoSummary = (i64, u64, u64, Option<String>, J);

/// Every window-1 frame of a frames cache, decoded, with its video list and
/// the ids of the skipped videos.
pub(crate) fn frames_and_videos(dir: &Path) -> (Vec<u8>, Vec<VideoSummary>, J) {
    let c = open_cache_with(
        dir,
        &OpenOptions::default().with_windows(WindowSpec::try_new(1, 0, 1).unwrap()),
    )
    .unwrap();
    let be = c
        .backend
        .as_any()
        .downcast_ref::<shardset::LanceVideoFrames>()
        .unwrap();
    let all: Vec<i64> = (0..be.len() as i64).collect();
    let frames = be.windows_batch(&all).unwrap().frames.data;
    let m = be.metadata();
    let videos = m
        .videos
        .iter()
        .map(|v| {
            (
                v.id,
                v.t,
                v.start_row,
                v.path.clone(),
                J::Object(v.metadata.clone()),
            )
        })
        .collect();
    let skipped: Vec<J> = m
        .skipped
        .clone()
        .unwrap_or_default()
        .iter()
        .map(|s| s["id"].clone())
        .collect();
    (frames, videos, J::from(skipped))
}
