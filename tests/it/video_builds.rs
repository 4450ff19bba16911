//! Building frames caches: unreadable and inline videos, the CLI's video
//! folders in every storage, videos of mixed lengths, a build interrupted
//! and resumed, and the checksums a build records (the reads are in
//! `video.rs`, whose helpers these share).

use std::path::{Path, PathBuf};

use serde_json::Value as J;
use shardset::layouts::backend::Backend;
use shardset::{
    open_cache_with, write_video_frames_cache, Dtype, Error, Example, Feature, Features,
    OpenOptions, Value, VideoFramesOptions, VideoStorage, WindowSpec,
};

use crate::common::{golden, require_ffmpeg, sha256};

use crate::video::*;

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
