//! The command line on video folders: builds in every storage and windows
//! exported (helpers in `video.rs`).

use std::path::PathBuf;

use serde_json::Value as J;
use shardset::open_cache;

use crate::cli::{ok, run};
use crate::common::require_ffmpeg;

use crate::video::*;

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
