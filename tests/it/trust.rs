//! Untrusted caches: a `Video(storage='path')` cell may only name a regular
//! file inside its cache (or a root the user trusts), and FFmpeg opens it
//! with the `file` protocol and the container demuxers alone. Each hostile
//! cache is the reference's golden `arrow_video_path` cache with its stored
//! paths rewritten, as a crafted cache would be.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray, StructArray};
use shardset::features::trust::TrustedRoots;
use shardset::{open_cache_with, Dataset, OpenOptions, Value, VideoDecode};

use crate::common::{copy_dir, golden, shardset_cli, succeeded};

/// The golden path cache with every stored path replaced by `stored`.
fn crafted(t: &Path, name: &str, stored: &str) -> PathBuf {
    let dir = t.join(name);
    copy_dir(&golden().join("arrow_video_path"), &dir);
    let shard = dir.join("shard-00000.arrow");
    let f = std::fs::File::open(&shard).unwrap();
    let r = arrow_ipc::reader::FileReader::try_new(f, None).unwrap();
    let schema = r.schema();
    let batches: Vec<RecordBatch> = r.map(|b| b.unwrap()).collect();
    let out = std::fs::File::create(&shard).unwrap();
    let mut w = arrow_ipc::writer::FileWriter::try_new(out, &schema).unwrap();
    for b in batches {
        let cols: Vec<ArrayRef> = b
            .columns()
            .iter()
            .map(|c| match c.as_struct_opt() {
                Some(s) if s.column_by_name("path").is_some() => {
                    let (fields, arrays, nulls) = s.clone().into_parts();
                    let arrays = fields
                        .iter()
                        .zip(arrays)
                        .map(|(f, a)| {
                            if f.name() == "path" {
                                Arc::new(StringArray::from(vec![stored; a.len()])) as ArrayRef
                            } else {
                                a
                            }
                        })
                        .collect();
                    Arc::new(StructArray::new(fields, arrays, nulls)) as ArrayRef
                }
                _ => c.clone(),
            })
            .collect();
        w.write(&RecordBatch::try_new(schema.clone(), cols).unwrap())
            .unwrap();
    }
    w.finish().unwrap();
    dir
}

fn assets(dir: &Path) -> PathBuf {
    dir.join("_assets/video")
}

/// Row 0 read twice: as a video reference, then decoded by FFmpeg.
fn read(
    dir: &Path,
    opts: &OpenOptions,
) -> (
    shardset::Result<shardset::Row>,
    shardset::Result<shardset::Row>,
) {
    let ds = Dataset::new(open_cache_with(dir, opts).unwrap());
    let plain = ds.get(0);
    let decoded = ds
        .with_video_decode(Some(VideoDecode::new(2)))
        .and_then(|d| d.get(0));
    (plain, decoded)
}

/// Runs `f` with a deadline: a read that opens a FIFO would block for ever.
fn within_deadline<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the read hung: something opened a FIFO")
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

fn refused(r: &shardset::Result<shardset::Row>, stored: &str, why: &str) {
    let e = r.as_ref().expect_err("a refused path");
    let msg = e.to_string();
    assert!(msg.contains("is refused"), "{stored}: {msg}");
    assert!(msg.contains(why), "{stored}: expected {why:?} in {msg}");
    assert!(msg.contains(&format!("{stored:?}")), "{stored}: {msg}");
}

#[test]
fn every_path_kind_outside_the_cache_is_refused_before_any_file_is_opened() {
    let t = tempfile::tempdir().unwrap();
    // An outside file that is a FIFO: opening it would block this test.
    let outside = t.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let fifo_out = outside.join("secret.mp4");
    mkfifo(&fifo_out);
    let real_out = outside.join("real.mp4");
    std::fs::copy(golden().join("sources/clip_a.mp4"), &real_out).unwrap();

    let mut cases: Vec<(String, PathBuf, &str)> = Vec::new();
    let abs = fifo_out.display().to_string();
    cases.push((
        abs.clone(),
        crafted(t.path(), "abs", &abs),
        "outside the cache",
    ));
    let up = "../../../outside/secret.mp4".to_string();
    cases.push((
        up.clone(),
        crafted(t.path(), "up", &up),
        "outside the cache",
    ));
    let link = crafted(t.path(), "link", "link.mp4");
    std::os::unix::fs::symlink(&real_out, assets(&link).join("link.mp4")).unwrap();
    cases.push(("link.mp4".into(), link, "outside the cache"));
    cases.push((
        "/dev/zero".into(),
        crafted(t.path(), "zero", "/dev/zero"),
        "outside the cache",
    ));
    let fifo_in = crafted(t.path(), "fifo", "pipe.mp4");
    mkfifo(&assets(&fifo_in).join("pipe.mp4"));
    cases.push(("pipe.mp4".into(), fifo_in, "is a FIFO"));
    for s in [
        "concat:a.mp4|b.mp4",
        "http://127.0.0.1:9/x.mp4",
        "subfile,,0,0,:/etc/passwd",
    ] {
        cases.push((
            s.into(),
            crafted(t.path(), &format!("p{}", cases.len()), s),
            "protocol",
        ));
    }
    for (stored, dir, why) in cases {
        let d = dir.clone();
        let (plain, decoded) = within_deadline(move || read(&d, &OpenOptions::default()));
        refused(&plain, &stored, why);
        refused(&decoded, &stored, why);
    }
    // The device, trusted by name, is still refused: it is no regular file.
    let dev = crafted(t.path(), "dev-trusted", "/dev/zero");
    let opts = OpenOptions::default().with_trusted_roots(TrustedRoots::try_new(["/dev"]).unwrap());
    let (plain, _) = read(&dev, &opts);
    refused(&plain, "/dev/zero", "is a device");
}

#[test]
fn trusted_roots_allow_exactly_what_they_name() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("videos-a");
    let b = t.path().join("videos-b");
    for d in [&a, &b] {
        std::fs::create_dir(d).unwrap();
        std::fs::copy(golden().join("sources/clip_a.mp4"), d.join("c.mp4")).unwrap();
    }
    // Absolute paths, as a reference cache written from elsewhere has.
    let in_a = crafted(t.path(), "in-a", a.join("c.mp4").to_str().unwrap());
    let in_b = crafted(t.path(), "in-b", b.join("c.mp4").to_str().unwrap());
    let (plain, _) = read(&in_a, &OpenOptions::default());
    let msg = plain.unwrap_err().to_string();
    assert!(
        msg.contains("trusted_roots") && msg.contains(a.to_str().unwrap()),
        "{msg}"
    );
    let trust_a = OpenOptions::default().with_trusted_roots(TrustedRoots::try_new([&a]).unwrap());
    let (plain, decoded) = read(&in_a, &trust_a);
    let row = plain.unwrap();
    match row.get("video") {
        Some(Value::Video(v)) => assert_eq!(v.path.as_deref(), Some(a.join("c.mp4").as_path())),
        other => panic!("{other:?}"),
    }
    assert!(decoded.is_ok(), "{decoded:?}");
    let (plain, _) = read(&in_b, &trust_a);
    assert!(plain.unwrap_err().to_string().contains("outside the cache"));
    // A `..` from inside a trusted root up and out of it is outside it.
    let escape = format!("{}/../videos-b/c.mp4", a.display());
    let (plain, _) = read(&crafted(t.path(), "escape", &escape), &trust_a);
    assert!(plain.unwrap_err().to_string().contains("outside the cache"));
    // The CLI: refused with the same words, and allowed through the
    // environment variable that names trusted roots.
    let out = shardset_cli()
        .args(["cat", in_a.to_str().unwrap(), "--rows", "0"])
        .env_remove("SHARDSET_TRUSTED_ROOTS")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is refused") && err.contains("SHARDSET_TRUSTED_ROOTS"),
        "{err}"
    );
    let out = succeeded(
        shardset_cli()
            .args(["cat", in_a.to_str().unwrap(), "--rows", "0"])
            .env("SHARDSET_TRUSTED_ROOTS", &a),
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(a.to_str().unwrap()));
    // A root that does not exist is refused when named.
    let e = TrustedRoots::try_new([t.path().join("nope")]).unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
    // The golden cache's own staged files open as before.
    let (plain, decoded) = read(&golden().join("arrow_video_path"), &OpenOptions::default());
    assert!(plain.is_ok() && decoded.is_ok(), "{plain:?} {decoded:?}");
}

#[test]
fn a_playlist_or_concat_script_inside_the_cache_opens_nothing_it_names() {
    let t = tempfile::tempdir().unwrap();
    let outside = t.path().join("outside.mp4");
    // A FIFO: FFmpeg opening it would block (and fail the deadline).
    mkfifo(&outside);
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    server.set_nonblocking(true).unwrap();
    let url = format!("http://{}/seg.ts", server.local_addr().unwrap());
    let playlist = format!(
        "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:1\n#EXTINF:1.0,\n{}\n#EXTINF:1.0,\n{url}\n#EXT-X-ENDLIST\n",
        outside.display()
    );
    let concat = format!(
        "ffconcat version 1.0\nfile '{}'\nfile '{url}'\n",
        outside.display()
    );
    for (name, body) in [("hls", playlist), ("concat", concat)] {
        let dir = crafted(t.path(), name, "x.mp4");
        std::fs::write(assets(&dir).join("x.mp4"), body).unwrap();
        let d = dir.clone();
        let (plain, decoded) = within_deadline(move || read(&d, &OpenOptions::default()));
        // The reference resolves inside the cache: fine; decoding it is not.
        assert!(plain.is_ok(), "{plain:?}");
        let msg = decoded.unwrap_err().to_string();
        assert!(msg.contains("cannot open video"), "{name}: {msg}");
    }
    assert!(
        server.accept().is_err(),
        "a playlist in the cache made FFmpeg connect to the local server"
    );
}
