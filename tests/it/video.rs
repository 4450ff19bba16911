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

use crate::cli::{ok, run};
use crate::common::{golden, golden_copy, require_ffmpeg, sha256, snapshot};

/// A synthetic clip of `frames` frames (testsrc: every frame differs).
fn make_video(dir: &Path, name: &str, frames: u32, size: &str, codec_args: &[&str]) -> PathBuf {
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

fn frames_features() -> Features {
    Features::new()
        .with("video", Feature::video(VideoStorage::Frames))
        .with("label", Feature::value(Dtype::Int64))
        .with("caption", Feature::value(Dtype::String))
}

fn golden_examples() -> Vec<Example> {
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

fn window_json(w: &shardset::Window) -> (String, f64) {
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
fn unreadable_videos_are_skipped_or_fail_the_build_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("frames");
    let strict = VideoFramesOptions::default().with_skip_corrupt(false);
    let e =
        write_video_frames_cache(golden_examples(), &frames_features(), &dir, &strict).unwrap_err();
    assert!(
        matches!(&e, Error::Video { path, .. } if path.ends_with("broken.mp4")),
        "{e}"
    );
    assert!(!dir.exists(), "nothing published");
    assert!(
        crate::common::dot_entries(tmp.path()).is_empty(),
        "no temp dir left"
    );
    // Every video broken: an error, not an unusable cache.
    let broken =
        vec![Example::new().with("video", Value::Path(golden().join("sources/broken.mp4")))];
    let f = Features::new().with("video", Feature::video(VideoStorage::Frames));
    let e = write_video_frames_cache(broken, &f, &dir, &VideoFramesOptions::default()).unwrap_err();
    assert!(e.to_string().contains("broken.mp4"), "{e}");
    assert!(!dir.exists());
    // A missing file, a wrong extension, no frames column, an empty generator.
    let missing = vec![Example::new().with("video", Value::Path(tmp.path().join("nope.mp4")))];
    let e =
        write_video_frames_cache(missing, &f, &dir, &VideoFramesOptions::default()).unwrap_err();
    assert!(e.to_string().contains("nope.mp4"), "{e}");
    let txt = tmp.path().join("notes.txt");
    std::fs::write(&txt, b"hello").unwrap();
    let e = write_video_frames_cache(
        vec![Example::new().with("video", Value::Path(txt))],
        &f,
        &dir,
        &VideoFramesOptions::default(),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("unsupported video extension '.txt'"),
        "{e}"
    );
    let plain = Features::new().with("video", Feature::video(VideoStorage::Path));
    assert!(matches!(
        write_video_frames_cache(Vec::new(), &plain, &dir, &VideoFramesOptions::default()),
        Err(Error::InvalidArgument(_))
    ));
    let e =
        write_video_frames_cache(Vec::new(), &f, &dir, &VideoFramesOptions::default()).unwrap_err();
    assert!(e.to_string().contains("empty generator"), "{e}");
    assert!(!dir.exists());
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
fn inline_bytes_videos_build_and_clean_up() {
    require_ffmpeg();
    let tmp = tempfile::tempdir().unwrap();
    let v = make_video(tmp.path(), "in.mp4", 5, "32x32", &["-c:v", "libx264"]);
    let bytes = std::fs::read(&v).unwrap();
    let f = Features::new()
        .with("video", Feature::video(VideoStorage::Frames))
        .with("k", Feature::value(Dtype::Int64));
    let dir = tmp.path().join("frames");
    let ex = vec![Example::new()
        .with("video", Value::Bytes(bytes.clone().into()))
        .with("k", 7i64)];
    let w = write_video_frames_cache(ex, &f, &dir, &VideoFramesOptions::default()).unwrap();
    let e = &w.metadata.videos[0];
    assert_eq!(e.t, 5);
    assert_eq!(e.checksum.as_deref(), Some(sha256(&bytes).as_str()));
    assert_eq!(
        e.path.as_deref(),
        Some(format!("{}.mp4", sha256(&bytes)).as_str())
    );
    assert_eq!(e.metadata["k"], 7);
    assert!(
        !dir.join("_video_inputs").exists(),
        "temporary inputs removed"
    );
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

#[test]
fn cli_builds_video_folders_in_every_storage_and_exports_windows() {
    require_ffmpeg();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let vids = tmp.path().join("clips");
    for (class, name, n) in [
        ("cats", "a.mp4", 10),
        ("cats", "b.webm", 12),
        ("dogs", "c.mkv", 9),
    ] {
        std::fs::create_dir_all(vids.join(class)).unwrap();
        let codec: &[&str] = if name.ends_with(".webm") {
            &["-c:v", "libvpx-vp9", "-deadline", "realtime"]
        } else {
            &["-c:v", "libx264"]
        };
        let p = make_video(tmp.path(), name, n, "48x32", codec);
        std::fs::rename(p, vids.join(class).join(name)).unwrap();
    }
    std::fs::write(vids.join("dogs").join("broken.mp4"), b"not a video").unwrap();
    let v = vids.to_str().unwrap();
    // frames: one lance-video-frames cache; the broken file is skipped and counted.
    let out = ok(
        &root,
        &[
            "build",
            "videofolder",
            v,
            "--storage",
            "frames",
            "--json",
            "--out",
            tmp.path().join("f").to_str().unwrap(),
        ],
    );
    let j: J = serde_json::from_str(out.trim()).unwrap();
    let c = &j["caches"][0];
    assert_eq!(
        (
            c["videos"].as_u64(),
            c["skipped"].as_u64(),
            c["frames"].as_u64()
        ),
        (Some(3), Some(1), Some(31))
    );
    let dir = tmp.path().join("f/train");
    let cache = open_cache(&dir).unwrap();
    assert_eq!(
        cache.metadata.to_json()["videos"][2]["metadata"]["label"],
        1,
        "dogs"
    );
    // Run again: up to date.
    let again = ok(
        &root,
        &[
            "build",
            "videofolder",
            v,
            "--storage",
            "frames",
            "--out",
            tmp.path().join("f").to_str().unwrap(),
        ],
    );
    assert!(again.contains("up to date"), "{again}");
    // A changed input file: rebuilt, with its new frames (and a one-byte
    // buffer for videos that finish ahead of their turn).
    let shorter = make_video(tmp.path(), "a6.mp4", 6, "48x32", &["-c:v", "libx264"]);
    std::fs::rename(shorter, vids.join("cats").join("a.mp4")).unwrap();
    let out = ok(
        &root,
        &[
            "build",
            "videofolder",
            v,
            "--storage",
            "frames",
            "--buffer",
            "1",
            "--json",
            "--out",
            tmp.path().join("f").to_str().unwrap(),
        ],
    );
    let j: J = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(j["caches"][0]["built"], true, "{out}");
    assert_eq!(j["caches"][0]["frames"], 27);
    // --strict: the broken file fails the build, naming it; nothing published.
    let o = run(
        &root,
        &[
            "build",
            "videofolder",
            v,
            "--storage",
            "frames",
            "--strict",
            "--out",
            tmp.path().join("s").to_str().unwrap(),
        ],
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("broken.mp4"));
    assert!(!tmp.path().join("s/train").exists());
    let o = run(
        &root,
        &[
            "build",
            "videofolder",
            v,
            "--storage",
            "frames",
            "--buffer",
            "lots",
        ],
    );
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--buffer"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // export: a window of 4 frames as PNGs and a GIF.
    let ex = tmp.path().join("ex");
    let out = ok(
        &root,
        &[
            "export",
            dir.to_str().unwrap(),
            "--row",
            "2",
            "--window",
            "4",
            "--out",
            ex.to_str().unwrap(),
            "--json",
        ],
    );
    let j: J = serde_json::from_str(out.trim()).unwrap();
    let files: Vec<String> = j["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(files.iter().filter(|f| f.ends_with(".png")).count(), 4);
    let gif = files.iter().find(|f| f.ends_with(".gif")).unwrap();
    assert_eq!(&std::fs::read(gif).unwrap()[..6], b"GIF89a");
    let png = shardset::features::image::decode(&std::fs::read(&files[0]).unwrap()).unwrap();
    assert_eq!((png.width, png.height), (48, 32));
    // path storage (remove the broken file first: path caches stage every file).
    std::fs::remove_file(vids.join("dogs").join("broken.mp4")).unwrap();
    let out = ok(
        &root,
        &["build", "videofolder", v, "--storage", "path", "--json"],
    );
    let j: J = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(j["caches"][0]["rows"], 3);
    let pdir = PathBuf::from(j["caches"][0]["dir"].as_str().unwrap());
    let ex2 = tmp.path().join("ex2");
    let out = ok(
        &root,
        &[
            "export",
            pdir.to_str().unwrap(),
            "--row",
            "0",
            "--window",
            "3",
            "--out",
            ex2.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(out.matches(".png").count(), 3, "{out}");
    // inspect and cat work on the frames cache.
    let out = ok(&root, &["inspect", dir.to_str().unwrap(), "--json"]);
    assert!(out.contains("lance-video-frames"), "{out}");
    let out = ok(&root, &["cat", dir.to_str().unwrap(), "--rows", "0..2"]);
    assert_eq!(out.lines().count(), 2, "{out}");
    // Bad storage name, missing folder.
    let o = run(&root, &["build", "videofolder", v, "--storage", "film"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(
        &root,
        &[
            "build",
            "videofolder",
            tmp.path().join("none").to_str().unwrap(),
            "--storage",
            "frames",
        ],
    );
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("none"));
}

#[test]
fn the_loader_reads_windows_shard_shuffled() {
    use shardset::{Loader, LoaderOptions, Order, Partition, Remainder, WithinShard};
    let (_t, dir) = golden_copy("lance_video_frames");
    let c = open_cache_with(
        &dir,
        &OpenOptions::default().with_windows(WindowSpec::try_new(4, 1, 3).unwrap()),
    )
    .unwrap();
    let ds = Dataset::new(c);
    let mut seen = Vec::new();
    for worker in 0..3 {
        let loader = Loader::new(
            ds.clone(),
            LoaderOptions::default()
                .with_order(Order::ShardShuffle(WithinShard::Random))
                .with_seed(3)
                .with_partition(Partition::new(0, 1, worker, 3, Remainder::Partial).unwrap())
                .try_with_batch_size(2)
                .unwrap(),
        );
        for batch in loader {
            for row in batch.unwrap() {
                let Value::Tensor(t) = row.get("video").unwrap() else {
                    panic!()
                };
                assert_eq!(t.shape[0], 4);
                seen.push(row.get("sample_idx").unwrap().as_i64().unwrap());
            }
        }
    }
    seen.sort();
    assert_eq!(
        seen,
        (0..9).collect::<Vec<_>>(),
        "every window once across the three workers"
    );
}

#[test]
fn videos_of_mixed_lengths_are_written_in_order_whatever_the_buffer() {
    require_ffmpeg();
    // A long video first, short ones and an unreadable one behind it: the
    // short ones finish first and wait (or pause, with a one-byte buffer)
    // for their turn. Every build must hold the same rows in video order.
    let tmp = tempfile::tempdir().unwrap();
    let long = make_video(tmp.path(), "long.mp4", 100, "48x32", &["-c:v", "libx264"]);
    let broken = tmp.path().join("broken.mp4");
    std::fs::write(&broken, b"not a video at all").unwrap();
    let mut files = vec![long];
    for i in 0..6 {
        let n = 3 + 7 * i;
        files.push(make_video(
            tmp.path(),
            &format!("s{i}.mp4"),
            n,
            "48x32",
            &["-c:v", "libx264"],
        ));
        if i == 2 {
            files.push(broken.clone());
        }
    }
    let f = Features::new()
        .with("video", Feature::video(VideoStorage::Frames))
        .with("k", Feature::value(Dtype::Int64));
    let examples = || {
        files
            .iter()
            .enumerate()
            .map(|(k, p)| {
                Example::new()
                    .with("video", Value::Path(p.clone()))
                    .with("k", k as i64)
            })
            .collect::<Vec<_>>()
    };
    let mut builds = Vec::new();
    for (name, threads, buffer_bytes) in [
        ("serial", 1, 128 << 20),
        ("parallel", 2, 128 << 20),
        ("one_byte_buffer", 2, 1),
        ("many_threads", 5, 1),
    ] {
        let dir = tmp.path().join(name);
        let o = VideoFramesOptions::default()
            .with_threads(threads)
            .with_buffer_bytes(buffer_bytes);
        let w = write_video_frames_cache(examples(), &f, &dir, &o).unwrap();
        let m = &w.metadata;
        assert_eq!(m.n_videos, 7, "{name}");
        assert_eq!(m.n_skipped, 1, "{name}");
        let ts: Vec<u64> = m.videos.iter().map(|v| v.t).collect();
        assert_eq!(ts, vec![100, 3, 10, 17, 24, 31, 38], "{name}");
        let ids: Vec<i64> = m.videos.iter().map(|v| v.id).collect();
        assert_eq!(
            ids,
            vec![0, 1, 2, 3, 5, 6, 7],
            "{name}: the broken one is id 4"
        );
        let mut start = 0;
        for v in &m.videos {
            assert_eq!(v.start_row, start, "{name}");
            assert_eq!(v.metadata["k"], v.id, "{name}");
            start += v.t;
        }
        // The Lance rows themselves: video_id and frame_idx in order.
        let c = open_cache_with(
            &dir,
            &OpenOptions::default().with_windows(WindowSpec::try_new(1, 0, 1).unwrap()),
        )
        .unwrap();
        let raw = c.backend.slice(0, c.backend.len()).unwrap();
        let be = c
            .backend
            .as_any()
            .downcast_ref::<shardset::LanceVideoFrames>()
            .unwrap();
        assert_eq!(raw.num_rows() as u64, start);
        let all: Vec<i64> = (0..be.len() as i64).collect();
        builds.push((name, be.windows_batch(&all).unwrap().frames.data));
    }
    // WebP encoding is deterministic: every schedule stores the same frames.
    for (name, frames) in &builds[1..] {
        assert!(
            frames == &builds[0].1,
            "{name} differs from the serial build"
        );
    }
}

#[test]
fn window_batches_stack_the_same_frames_as_single_windows() {
    let (_t, dir) = golden_copy("lance_video_frames");
    let c = open_cache_with(
        &dir,
        &OpenOptions::default().with_windows(WindowSpec::try_new(4, 1, 3).unwrap()),
    )
    .unwrap();
    let be = c
        .backend
        .as_any()
        .downcast_ref::<shardset::LanceVideoFrames>()
        .unwrap();
    // Golden videos differ in size, so stack windows of one video at a time,
    // in a scrambled order with a repeat and a negative index.
    let n = be.len() as i64;
    let by_video = |v: usize| -> Vec<i64> {
        (0..n)
            .filter(|&i| be.window(i).unwrap().video_idx == v)
            .collect()
    };
    for v in 0..be.metadata().videos.len() {
        let mut idx = by_video(v);
        if idx.is_empty() {
            continue;
        }
        idx.reverse();
        idx.push(idx[0]);
        if idx[0] == n - 1 {
            idx.push(-1);
        }
        let b = be.windows_batch(&idx).unwrap();
        let singles = be.windows(&idx).unwrap();
        let (t, h, w) = (
            singles[0].frames.shape[0],
            singles[0].frames.shape[1],
            singles[0].frames.shape[2],
        );
        assert_eq!(b.frames.shape, vec![idx.len(), t, h, w, 3]);
        let per = t * h * w * 3;
        for (k, s) in singles.iter().enumerate() {
            assert_eq!(&b.frames.data[k * per..(k + 1) * per], &s.frames.data[..]);
            assert_eq!(b.video_idx[k], s.video_idx);
            assert_eq!(b.start_frame[k], s.start_frame);
            assert_eq!(b.frame_indices[k], s.frame_indices);
            assert_eq!(b.sample_idx[k], s.sample_idx);
        }
    }
    // Windows of videos of different sizes do not stack: a typed error.
    let sizes: std::collections::BTreeSet<(u64, u64)> =
        be.metadata().videos.iter().map(|v| (v.w, v.h)).collect();
    if sizes.len() > 1 {
        let e = be.windows_batch(&(0..n).collect::<Vec<_>>()).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("cannot share")),
            "{e}"
        );
    }
    assert!(matches!(
        be.windows_batch(&[n]),
        Err(Error::IndexOutOfRange { .. })
    ));
    let empty = be.windows_batch(&[]).unwrap();
    assert_eq!(empty.frames.shape[0], 0);
}

/// A video of a frames cache: id, T, start_row, path and metadata.
type VideoSummary = (i64, u64, u64, Option<String>, J);

/// Every window-1 frame of a frames cache, decoded, with its video list and
/// the ids of the skipped videos.
fn frames_and_videos(dir: &Path) -> (Vec<u8>, Vec<VideoSummary>, J) {
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

#[test]
fn an_interrupted_frames_build_resumes_from_its_last_checkpoint() {
    require_ffmpeg();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let mut files = Vec::new();
    for (i, n) in [8u32, 5, 12, 6, 7].iter().enumerate() {
        files.push(make_video(
            &src,
            &format!("v{i}.mp4"),
            *n,
            "48x32",
            &["-c:v", "libx264"],
        ));
    }
    let good4 = std::fs::read(&files[4]).unwrap();
    let broken = tmp.path().join("broken.mp4");
    std::fs::write(&broken, b"not a video").unwrap();
    let f = Features::new()
        .with("video", Feature::video(VideoStorage::Frames))
        .with("k", Feature::value(Dtype::Int64));
    let items = |paths: &[PathBuf], fail_at: Option<usize>| {
        paths
            .iter()
            .enumerate()
            .take(fail_at.map_or(paths.len(), |k| k + 1))
            .map(|(k, p)| {
                if Some(k) == fail_at {
                    Err("the generator was interrupted".to_string())
                } else {
                    Ok((
                        J::from(k as u64),
                        Example::new()
                            .with("video", Value::Path(p.clone()))
                            .with("k", k as i64),
                    ))
                }
            })
            .collect::<Vec<_>>()
    };
    let strict = VideoFramesOptions::default()
        .with_threads(2)
        .with_skip_corrupt(false)
        .with_checkpoint_frames(1)
        .with_sources(Some(serde_json::json!({"stamp": "inputs-1"})));
    let temp_dirs = |root: &Path| -> Vec<PathBuf> {
        crate::common::dot_entries(root)
            .into_iter()
            .map(|n| root.join(n))
            .collect()
    };
    // The uninterrupted build everything is compared with.
    let fresh = tmp.path().join("fresh");
    shardset::try_write_video_frames_cache(
        items(&files, None),
        &f,
        &fresh,
        &strict
            .clone()
            .with_sources(None)
            .with_checkpoint_frames(1 << 16),
    )
    .unwrap();
    let want = frames_and_videos(&fresh);

    // Video 4 unreadable in strict mode: the build fails there, after
    // checkpoints for videos 0-3, and keeps its temp dir for the next build.
    let root = tmp.path().join("a");
    std::fs::create_dir_all(&root).unwrap();
    let dir = root.join("frames");
    std::fs::copy(&broken, &files[4]).unwrap();
    let e =
        shardset::try_write_video_frames_cache(items(&files, None), &f, &dir, &strict).unwrap_err();
    assert!(
        matches!(&e, Error::Video { path, .. } if path.ends_with("v4.mp4")),
        "{e}"
    );
    assert!(!dir.exists(), "nothing published");
    let kept = temp_dirs(&root);
    assert_eq!(kept.len(), 1, "the checkpoints are kept");
    // A crash between a Lance commit and its progress line: drop that line.
    let pf = kept[0].join("_frames_progress.jsonl");
    let text = std::fs::read_to_string(&pf).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + 4, "a header and one checkpoint per video");
    std::fs::write(&pf, lines[..lines.len() - 1].join("\n") + "\n").unwrap();
    // The input fixed, the next build resumes: videos 0-2 are taken over,
    // video 3's unrecorded commit is undone and it is encoded again.
    std::fs::write(&files[4], &good4).unwrap();
    let w = shardset::try_write_video_frames_cache(items(&files, None), &f, &dir, &strict).unwrap();
    assert_eq!(w.resumed_videos, 3);
    assert_eq!(
        frames_and_videos(&dir),
        want,
        "the same cache as a build in one go"
    );
    assert!(temp_dirs(&root).is_empty(), "nothing left over");
    assert!(!dir.join("_frames_progress.jsonl").exists());
    assert_eq!(w.metadata.num_rows, 8 + 5 + 12 + 6 + 7);
    // pylance reads the resumed cache (several segments and versions) in order.
    {
        crate::common::require_python_module("lance");
        let j: J = crate::common::python_json("import lance, sys, json; ds = lance.dataset(sys.argv[1]); t = ds.to_table(columns=['video_id', 'frame_idx']); print(json.dumps({'rows': list(zip(t.column('video_id').to_pylist(), t.column('frame_idx').to_pylist())), 'fragments': len(ds.get_fragments())}))", &[&dir]);
        let want_rows: Vec<(i64, u64)> = w
            .metadata
            .videos
            .iter()
            .flat_map(|v| (0..v.t).map(move |f| (v.id, f)))
            .collect();
        assert_eq!(j["rows"], serde_json::json!(want_rows));
        assert!(j["fragments"].as_u64().unwrap() > 1, "{j}");
    }

    // Skipping mode, a broken video in the middle and a generator that
    // stops: the resumed cache equals a build in one go, skip record included.
    let mut with_broken = files.clone();
    with_broken.insert(2, broken.clone());
    let lenient = strict.clone().with_skip_corrupt(true);
    let fresh_b = tmp.path().join("fresh_b");
    shardset::try_write_video_frames_cache(
        items(&with_broken, None),
        &f,
        &fresh_b,
        &lenient.clone().with_sources(None),
    )
    .unwrap();
    let root = tmp.path().join("b");
    std::fs::create_dir_all(&root).unwrap();
    let dir = root.join("frames");
    let e =
        shardset::try_write_video_frames_cache(items(&with_broken, Some(5)), &f, &dir, &lenient)
            .unwrap_err();
    assert!(matches!(e, Error::Generator { .. }), "{e}");
    // How far the interrupted build got depends on when the generator's
    // error reached the writer; its last checkpoint says exactly where.
    let kept = temp_dirs(&root);
    assert_eq!(kept.len(), 1, "the checkpoints are kept");
    let checkpointed = std::fs::read_to_string(kept[0].join("_frames_progress.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<J>(l).ok())
        .filter_map(|l| l.get("tasks").and_then(J::as_u64))
        .max()
        .unwrap_or(0);
    assert!(checkpointed <= 5, "{checkpointed}");
    let w = shardset::try_write_video_frames_cache(items(&with_broken, None), &f, &dir, &lenient)
        .unwrap();
    assert_eq!(w.resumed_videos, checkpointed);
    assert_eq!(frames_and_videos(&dir), frames_and_videos(&fresh_b));
    assert_eq!(w.metadata.n_skipped, 1);

    // Checkpoints whose inputs changed are dropped, with a typed error, and
    // the next build starts over; another sources stamp starts over too.
    let root = tmp.path().join("c");
    std::fs::create_dir_all(&root).unwrap();
    let dir = root.join("frames");
    std::fs::copy(&broken, &files[4]).unwrap();
    shardset::try_write_video_frames_cache(items(&files, None), &f, &dir, &strict).unwrap_err();
    std::fs::write(&files[4], &good4).unwrap();
    let mut swapped = files.clone();
    swapped.swap(0, 1);
    let e = shardset::try_write_video_frames_cache(items(&swapped, None), &f, &dir, &strict)
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("differ") && m.contains("example 0")),
        "{e}"
    );
    assert!(temp_dirs(&root).is_empty(), "stale checkpoints dropped");
    let w =
        shardset::try_write_video_frames_cache(items(&swapped, None), &f, &dir, &strict).unwrap();
    assert_eq!(w.resumed_videos, 0);
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::copy(&broken, &files[4]).unwrap();
    shardset::try_write_video_frames_cache(items(&files, None), &f, &dir, &strict).unwrap_err();
    std::fs::write(&files[4], &good4).unwrap();
    let other = strict
        .clone()
        .with_sources(Some(serde_json::json!({"stamp": "inputs-2"})));
    let w = shardset::try_write_video_frames_cache(items(&files, None), &f, &dir, &other).unwrap();
    assert_eq!(w.resumed_videos, 0, "another stamp is another build");
    let got = frames_and_videos(&dir);
    assert_eq!(got.1, want.1, "videos");
    assert_eq!(got.2, want.2, "skipped");
    assert_eq!(got.0.len(), want.0.len(), "frame bytes");
    assert!(got.0 == want.0, "decoded frames differ");
    assert!(temp_dirs(&root).is_empty());
}

/// Both Lance layouts record every data file's xxh64 when they are written
/// (`_checksums.json`, beside the metadata, nothing of the build's own
/// files), so `verify` checks their data bytes as it does an Arrow cache's
/// and names a data file with a flipped byte.
#[test]
fn lance_caches_record_their_data_checksums_at_build_time() {
    require_ffmpeg();
    let tmp = tempfile::tempdir().unwrap();
    let v = make_video(tmp.path(), "in.mp4", 6, "32x32", &["-c:v", "libx264"]);
    let frames = tmp.path().join("frames");
    let f = Features::new().with("video", Feature::video(VideoStorage::Frames));
    let ex = vec![Example::new().with("video", Value::Path(v.clone()))];
    write_video_frames_cache(ex, &f, &frames, &VideoFramesOptions::default()).unwrap();
    let rows = tmp.path().join("rows");
    shardset::write_lance_cache(
        (0..50).map(|i| Example::new().with("x", i as i64)),
        &Features::new().with("x", Feature::value(Dtype::Int64)),
        &rows,
        &shardset::LanceWriteOptions::default(),
    )
    .unwrap();
    for dir in [&frames, &rows] {
        let stamp: J =
            serde_json::from_slice(&std::fs::read(dir.join("_checksums.json")).unwrap()).unwrap();
        let paths: Vec<&str> = stamp["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap())
            .collect();
        assert!(paths.iter().any(|p| p.ends_with(".lance")), "{paths:?}");
        assert!(
            paths.iter().all(|p| !p.starts_with('_')
                || p.starts_with("_versions")
                || p.starts_with("_transactions")),
            "no build-time files: {paths:?}"
        );
        let rep = shardset::verify_cache(dir).unwrap();
        assert!(rep.is_ok(), "{dir:?}: {:?}", rep.damage);
        assert!(rep.data_bytes_verified, "{dir:?}: {:?}", rep.not_checked);
        let data = std::fs::read_dir(dir.join("data"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "lance"))
            .unwrap();
        let mut b = std::fs::read(&data).unwrap();
        let at = b.len() / 2;
        b[at] ^= 1;
        std::fs::write(&data, b).unwrap();
        let rep = shardset::verify_cache(dir).unwrap();
        assert!(
            rep.damage.iter().any(|d| d.path == data),
            "{dir:?}: {:?}",
            rep.damage
        );
        let e = shardset::stamp_checksums(dir).unwrap_err();
        assert!(e.to_string().contains("already"), "{e}");
    }
}
