//! A process that forks after using the library, as a PyTorch DataLoader
//! worker or a `multiprocessing.Pool` is made: the child (and its own
//! child) reads and writes every layout with the same values as the parent,
//! never waiting on the parent's pools, runtimes or locks, also when the
//! fork comes while another thread of the parent is in a parallel read.
//!
//! Forking a test harness whose other threads hold locks is unsafe in
//! itself, so the test runs again in a process of its own (one test
//! thread), and every child is awaited with a deadline: a hang fails the
//! test, naming the step the child was at.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use shardset::features::{Feature, Features};
use shardset::{
    open_cache, open_cache_with, write_arrow_cache, write_lance_cache, write_video_frames_cache,
    ArrowWriteOptions, Dataset, Dtype, Example, ImageData, ImageFormat, LanceVideoFrames,
    OpenOptions, Order, Sampler, SegmentCodec, SegmentSettings, Value, VideoFramesOptions,
    VideoStorage, WindowSpec,
};

use crate::common::golden;

const ROWS: usize = 24;
/// How long a child may take for every use before it counts as hung.
const DEADLINE: Duration = Duration::from_secs(120);

/// Runs the test named `name` again in a fresh process of this binary with
/// `SHARDSET_FORK_CASE` set, and fails with its output unless it passes.
/// Returns true in that fresh process (where the caller does the work).
fn in_fresh_process(name: &str) -> bool {
    if std::env::var_os("SHARDSET_FORK_CASE").is_some() {
        return true;
    }
    // The S3 server, started here: the fresh process inherits its
    // endpoint and keys through the environment.
    crate::object_storage::server();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env("SHARDSET_FORK_CASE", "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{name} failed:\n{text}");
    assert!(text.contains("1 passed"), "{name} ran no test:\n{text}");
    false
}

/// Forks; the child runs `f` and exits 0 when it returns Ok, 1 otherwise
/// (saying why on stderr). The parent waits at most [`DEADLINE`], then
/// kills the child and fails.
fn fork_and_run(what: &str, f: impl FnOnce() -> Result<(), String>) {
    // SAFETY: the test process runs one test thread; the child runs only
    // `f` and leaves with `_exit`, never returning into the harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let code = match r {
            Ok(Ok(())) => 0,
            Ok(Err(e)) => {
                eprintln!("fork child ({what}): {e}");
                1
            }
            Err(_) => 2,
        };
        // SAFETY: leaves the child without running the parent's atexit
        // handlers or destructors.
        unsafe { libc::_exit(code) };
    }
    let t = Instant::now();
    let mut status = 0;
    loop {
        // SAFETY: waits on our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        assert!(r >= 0, "waitpid failed");
        if r == pid {
            break;
        }
        if t.elapsed() > DEADLINE {
            // SAFETY: our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            unsafe { libc::waitpid(pid, &mut status, 0) };
            panic!("the forked child ({what}) hung: still running after {DEADLINE:?} (its last step is on stderr)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the forked child ({what}) failed: status {status} (its reason is on stderr)"
    );
}

/// An image cache of `ROWS` rows of 200x150 images (wide enough that
/// jpeg-decoder splits a decode over threads) stored as `format`: JPEG,
/// PNG, or WebP bytes.
fn image_cache(dir: &Path, format: &str) -> PathBuf {
    let at = dir.join(format!("img-{format}"));
    let (w, h) = (200u32, 150u32);
    let rows = (0..ROWS).map(|i| {
        let px: Vec<u8> = (0..w * h * 3)
            .map(|k| ((k as usize * 7 + i * 13) % 251) as u8)
            .collect();
        let img = ImageData::new(h, w, 3, px.clone()).unwrap();
        let v = match format {
            "jpeg" => Value::Bytes(
                shardset::features::image::encode(&img, ImageFormat::Jpeg)
                    .unwrap()
                    .into(),
            ),
            "png" => Value::Image(Box::new(img)),
            _ => {
                let rgb = ::image::RgbImage::from_raw(w, h, px).unwrap();
                let mut out = std::io::Cursor::new(Vec::new());
                ::image::DynamicImage::ImageRgb8(rgb)
                    .write_to(&mut out, ::image::ImageFormat::WebP)
                    .unwrap();
                Value::Bytes(out.into_inner().into())
            }
        };
        Example::new().with("img", v).with("label", i as i64)
    });
    let f = Features::new()
        .with("img", Feature::image())
        .with("label", Feature::value(Dtype::Int64));
    write_arrow_cache(rows, &f, &at, &ArrowWriteOptions::default()).unwrap();
    at
}

fn scalar_rows(salt: i64) -> impl Iterator<Item = Example> {
    (0..ROWS as i64).map(move |i| {
        Example::new()
            .with("x", i * 3 + salt)
            .with("s", format!("row {i}"))
    })
}

fn scalar_features() -> Features {
    Features::new()
        .with("x", Feature::value(Dtype::Int64))
        .with("s", Feature::value(Dtype::String))
}

fn video_cache(dir: &Path, segments: bool) -> PathBuf {
    let at = dir.join(if segments { "segments" } else { "frames" });
    let f = Features::new()
        .with(
            "video",
            Feature::video(if segments {
                VideoStorage::Segments
            } else {
                VideoStorage::Frames
            }),
        )
        .with("label", Feature::value(Dtype::Int64));
    let src = golden().join("sources");
    let rows = ["clip_a.mp4", "clip_b.mp4"]
        .iter()
        .enumerate()
        .map(|(i, c)| {
            Example::new()
                .with("video", Value::Path(src.join(c)))
                .with("label", i as i64)
        });
    let mut opts = VideoFramesOptions::default().with_threads(2);
    if segments {
        opts = opts.with_segments(
            SegmentSettings::new(SegmentCodec::H264)
                .try_with_frames_per_segment(8)
                .unwrap(),
        );
    }
    write_video_frames_cache(rows, &f, &at, &opts).unwrap();
    at
}

struct Caches {
    tmp: PathBuf,
    images: Vec<PathBuf>,
    lance: PathBuf,
    frames: PathBuf,
    segments: PathBuf,
    s3: PathBuf,
}

fn make(tmp: &Path) -> Caches {
    let lance = tmp.join("lance");
    write_lance_cache(
        scalar_rows(0),
        &scalar_features(),
        &lance,
        &Default::default(),
    )
    .unwrap();
    // The S3 server of the object-storage tests, started by the outer test
    // process, whose environment (endpoint, keys) this process inherits.
    let s3 = PathBuf::from(format!(
        "s3://{}/fork-{}",
        crate::object_storage::BUCKET,
        std::process::id()
    ));
    write_arrow_cache(scalar_rows(1), &scalar_features(), &s3, &Default::default()).unwrap();
    Caches {
        tmp: tmp.to_path_buf(),
        images: ["jpeg", "png", "webp"]
            .iter()
            .map(|f| image_cache(tmp, f))
            .collect(),
        lance,
        frames: video_cache(tmp, false),
        segments: video_cache(tmp, true),
        s3,
    }
}

fn rows_of(path: &Path) -> Result<String, String> {
    let ds = Dataset::new(open_cache(path).map_err(|e| e.to_string())?);
    let idx: Vec<i64> = (0..ds.len() as i64).collect();
    let rows = ds.take(&idx).map_err(|e| e.to_string())?;
    Ok(shardset::sha256_hex(format!("{rows:?}").as_bytes()))
}

fn windows_of(path: &Path) -> Result<String, String> {
    let c = open_cache_with(
        path,
        &OpenOptions::default().with_windows(WindowSpec::try_new(4, 0, 2).unwrap()),
    )
    .map_err(|e| e.to_string())?;
    let v = c
        .backend
        .as_any()
        .downcast_ref::<LanceVideoFrames>()
        .ok_or("not a video cache")?;
    // The first video's windows (the videos differ in size).
    let idx: Vec<i64> = (0..8).collect();
    let b = v.windows_batch(&idx).map_err(|e| e.to_string())?;
    let last = v.window(c.len() as i64 - 1).map_err(|e| e.to_string())?;
    Ok(shardset::sha256_hex(
        format!("{:?} {:?} {:?}", b.frames, b.frame_indices, last.frames).as_bytes(),
    ))
}

/// Every use, in order, each with a digest of what it read; `who` names
/// the process (its writes go to paths of its own).
fn uses(c: &Caches, who: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut step = |name: &str, f: &dyn Fn() -> Result<String, String>| {
        eprintln!("{who}: {name}");
        let v = f().unwrap_or_else(|e| panic!("{who}: {name}: {e}"));
        out.push((name.to_string(), v));
    };
    for p in &c.images {
        step(&format!("decode {}", p.display()), &|| rows_of(p));
    }
    step("epoch order", &|| {
        let ds = Dataset::new(open_cache(&c.images[0]).map_err(|e| e.to_string())?);
        let order = Sampler::new(&ds, Order::Random, 5).epoch_order(2);
        let idx: Vec<i64> = order.iter().map(|&i| i as i64).collect();
        let rows = ds.take(&idx).map_err(|e| e.to_string())?;
        Ok(shardset::sha256_hex(
            format!("{order:?}{rows:?}").as_bytes(),
        ))
    });
    step("lance rows", &|| rows_of(&c.lance));
    step("frames windows", &|| windows_of(&c.frames));
    step("segments windows", &|| windows_of(&c.segments));
    step("s3 read", &|| rows_of(&c.s3));
    step("write arrow and lance", &|| {
        let a = c.tmp.join(format!("written-arrow-{who}"));
        let l = c.tmp.join(format!("written-lance-{who}"));
        write_arrow_cache(scalar_rows(2), &scalar_features(), &a, &Default::default())
            .map_err(|e| e.to_string())?;
        write_lance_cache(scalar_rows(2), &scalar_features(), &l, &Default::default())
            .map_err(|e| e.to_string())?;
        Ok(format!("{} {}", rows_of(&a)?, rows_of(&l)?))
    });
    step("write s3", &|| {
        let s = PathBuf::from(format!("{}-written-{who}", c.s3.display()));
        write_arrow_cache(scalar_rows(3), &scalar_features(), &s, &Default::default())
            .map_err(|e| e.to_string())?;
        rows_of(&s)
    });
    out
}

#[test]
fn a_child_forked_after_every_use_reads_and_writes_the_same_values() {
    if !in_fresh_process("fork::a_child_forked_after_every_use_reads_and_writes_the_same_values") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let c = make(tmp.path());
    let parent = uses(&c, "parent");
    // Without the parent's use first: a child of a process that has not
    // started anything yet reads the same.
    fork_and_run("before", || {
        let fresh = uses(&c, "fresh-child");
        (fresh == parent)
            .then_some(())
            .ok_or("values differ".into())
    });
    // A fork while another thread of the parent is inside parallel reads
    // (the pool, the I/O runtime and the S3 client busy, their locks
    // taken): the child makes its own; the parent's reads go on.
    let busy = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            (0..6)
                .map(|_| {
                    (
                        rows_of(&c.images[0]).unwrap(),
                        windows_of(&c.segments).unwrap(),
                        rows_of(&c.s3).unwrap(),
                    )
                })
                .collect::<Vec<_>>()
        });
        fork_and_run("child", || {
            let got = uses(&c, "child");
            if got != parent {
                return Err(format!("the child read {got:?}, the parent {parent:?}"));
            }
            // And a child of the child.
            fork_and_run("grandchild", || {
                let again = uses(&c, "grandchild");
                (again == parent)
                    .then_some(())
                    .ok_or("values differ".into())
            });
            Ok(())
        });
        reader.join().unwrap()
    });
    for (img, seg, s3) in busy {
        assert_eq!(img, parent[0].1);
        assert_eq!(seg, parent[6].1);
        assert_eq!(s3, parent[7].1);
    }
    // The parent still works after its children.
    assert_eq!(uses(&c, "parent-after"), parent);
}
