//! The benchmark workloads, timed once each, printed as JSON lines.
//!
//! `cargo bench --bench workloads` runs everything; `-- --only scalar` one
//! workload; `-- rss --rows N` writes N scalar rows and prints the process's
//! peak RSS (run it at 1 M and 4 M rows to see memory stay flat).
//! `benches/compare.py` runs this and the pyarrow equivalents and prints ratios.

#[path = "common/mod.rs"]
mod common;
#[path = "workloads/versus.rs"]
mod versus;

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use arrow_array::cast::AsArray;
use common::*;
use shardset::{
    open_cache, write_arrow_cache, ArrowWriteOptions, Compression, Dataset, Example, Features,
    IterOptions, Loader, LoaderOptions, Order, Partition, WithinShard,
};
#[cfg(feature = "lance")]
use shardset::{write_lance_cache, LanceWriteOptions};
use versus::*;

fn emit(workload: &str, op: &str, rows: u64, secs: f64) {
    println!(
        "{{\"side\": \"shardset\", \"workload\": \"{workload}\", \"op\": \"{op}\", \"rows\": {rows}, \"seconds\": {secs:.6}, \"rows_per_s\": {:.1}}}",
        rows as f64 / secs
    );
}

/// Best of three full writes (each replaces the cache atomically).
fn write<I: IntoIterator<Item = Example>>(
    name: &str,
    rows: impl Fn() -> I,
    n: u64,
    f: &Features,
    dir: &Path,
    opts: ArrowWriteOptions,
) {
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        write_arrow_cache(rows(), f, dir, &opts).unwrap();
        best = best.min(t.elapsed().as_secs_f64());
    }
    emit(name, "write", n, best);
}

/// get, take-128 and iteration on an opened cache.
fn reads(name: &str, dir: &Path, n: usize, gets: usize, takes: usize) {
    let cache = open_cache(dir).unwrap();
    let b = cache.backend.clone();
    // Warm the page cache and the batch index the way a second epoch would be.
    for r in b.iter_batches(&IterOptions::default()).unwrap() {
        black_box(r.unwrap());
    }
    let idx = random_indices(n, gets, 1);
    let t = Instant::now();
    for &i in &idx {
        black_box(b.get(i).unwrap());
    }
    emit(name, "get", gets as u64, t.elapsed().as_secs_f64());

    let idx = random_indices(n, 128 * takes, 2);
    let t = Instant::now();
    for chunk in idx.chunks(128) {
        let batch = b.take(chunk).unwrap();
        black_box(b.decoder().decode_batch(&batch).unwrap());
    }
    emit(
        name,
        "take128",
        (128 * takes) as u64,
        t.elapsed().as_secs_f64(),
    );
    let t = Instant::now();
    for chunk in idx.chunks(128) {
        black_box(b.take(chunk).unwrap());
    }
    emit(
        name,
        "take128_arrow",
        (128 * takes) as u64,
        t.elapsed().as_secs_f64(),
    );

    let t = Instant::now();
    let mut rows = 0u64;
    for r in b.iter_batches(&IterOptions::default()).unwrap() {
        let batch = r.unwrap();
        rows += b.decoder().decode_batch(&batch).unwrap().len() as u64;
    }
    emit(name, "iterate", rows, t.elapsed().as_secs_f64());
    let t = Instant::now();
    let mut rows = 0u64;
    for r in b.iter_batches(&IterOptions::default()).unwrap() {
        let batch = r.unwrap();
        rows += black_box(batch.num_rows()) as u64;
        black_box(batch.column(0).to_data().len());
    }
    emit(name, "iterate_arrow", rows, t.elapsed().as_secs_f64());
}

fn first_row(name: &str, dir: &Path) {
    let reps = 20;
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        let c = open_cache(dir).unwrap();
        black_box(c.backend.get(0).unwrap());
        best = best.min(t.elapsed().as_secs_f64());
    }
    // Reported as seconds to the first row (rows = 1).
    emit(name, "first_row", 1, best);
}

fn peak_rss_kb() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    match args.first().map(String::as_str) {
        Some("versus-write") => return versus_write(&args),
        Some("versus-read") => return versus_read(&args),
        #[cfg(feature = "video")]
        Some("versus-clips") => return versus_clips(&args),
        Some("codecs") => return codecs(&args),
        Some("seed-systems") => return common::seed::seed_systems(&args),
        #[cfg(feature = "video")]
        Some("versus-frames-build") => return versus_frames_build(&args),
        #[cfg(feature = "video")]
        Some("versus-windows") => return versus_windows(&args),
        #[cfg(feature = "video")]
        Some("webp-decode") => return webp_decode(&args),
        #[cfg(feature = "video")]
        Some("segments-build") => return segments_build(&args),
        _ => {}
    }
    let tmp = tempfile::tempdir().unwrap();
    #[cfg(feature = "video")]
    if args.first().map(String::as_str) == Some("video-rss") {
        // Build a frames cache of the first N videos of --video-dir; print peak RSS.
        let n: usize = arg(&args, "--videos")
            .and_then(|v| v.parse().ok())
            .unwrap_or(8);
        let files = video_files(&args);
        let dir = tmp.path().join("frames");
        let t = Instant::now();
        let w = build_frames(&files[..n.min(files.len())], &dir, 4);
        let secs = t.elapsed().as_secs_f64();
        println!("{{\"side\": \"shardset\", \"workload\": \"video_rss\", \"videos\": {n}, \"frames\": {}, \"seconds\": {secs:.3}, \"peak_rss_kb\": {}}}", w.metadata.num_rows, peak_rss_kb());
        return;
    }
    if args.first().map(String::as_str) == Some("rss") {
        let n: usize = args
            .iter()
            .position(|a| a == "--rows")
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000_000);
        let dir = tmp.path().join("rss");
        let lance = args.iter().any(|a| a == "--lance");
        let t = Instant::now();
        #[cfg(feature = "lance")]
        if lance {
            write_lance_cache(
                scalar_rows(n),
                &scalar_features(),
                &dir,
                &LanceWriteOptions::default(),
            )
            .unwrap();
        }
        if !lance || cfg!(not(feature = "lance")) {
            write_arrow_cache(
                scalar_rows(n),
                &scalar_features(),
                &dir,
                &ArrowWriteOptions::default()
                    .try_with_shard_size_bytes(Some(64 << 20))
                    .unwrap(),
            )
            .unwrap();
        }
        let secs = t.elapsed().as_secs_f64();
        let name = if lance && cfg!(feature = "lance") {
            "rss_lance"
        } else {
            "rss"
        };
        println!("{{\"side\": \"shardset\", \"workload\": \"{name}\", \"rows\": {n}, \"seconds\": {secs:.3}, \"peak_rss_kb\": {}}}", peak_rss_kb());
        return;
    }
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let scale: f64 = args
        .iter()
        .position(|a| a == "--scale")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.0);
    let run = |w: &str| only.as_deref().is_none_or(|o| o == w);
    let sz = |n: usize| ((n as f64 * scale) as usize).max(1000);

    if run("scalar") {
        let n = sz(1_000_000);
        let dir = tmp.path().join("scalar");
        write(
            "scalar",
            || scalar_rows(n),
            n as u64,
            &scalar_features(),
            &dir,
            ArrowWriteOptions::default(),
        );
        reads("scalar", &dir, n, 500_000, 2_000);
    }
    if run("binary") {
        let n = sz(100_000);
        let dir = tmp.path().join("binary");
        write(
            "binary",
            || binary_rows(n),
            n as u64,
            &binary_features(),
            &dir,
            ArrowWriteOptions::default(),
        );
        reads("binary", &dir, n, 300_000, 2_000);
        let dir = tmp.path().join("binary_8m");
        write(
            "binary_8mib_shards",
            || binary_rows(n),
            n as u64,
            &binary_features(),
            &dir,
            ArrowWriteOptions::default()
                .try_with_shard_size_bytes(Some(8 << 20))
                .unwrap(),
        );
        reads("binary_8mib_shards", &dir, n, 300_000, 2_000);
        let dir = tmp.path().join("binary_zstd");
        write(
            "binary_zstd",
            || binary_rows(n),
            n as u64,
            &binary_features(),
            &dir,
            ArrowWriteOptions::default().with_compression(Compression::Zstd),
        );
        first_row("binary_zstd", &dir);
        reads("binary_zstd", &dir, n, 300_000, 2_000);
    }
    if run("epoch") {
        // One epoch of 1 M rows through the loader (batches of 256 decoded
        // rows) in each order, on a cache of ~60 shards.
        let n = sz(1_000_000);
        let dir = tmp.path().join("epoch");
        write_arrow_cache(
            scalar_rows(n),
            &scalar_features(),
            &dir,
            &ArrowWriteOptions::default()
                .try_with_shard_size_bytes(Some(200_000))
                .unwrap(),
        )
        .unwrap();
        let ds = Dataset::new(open_cache(&dir).unwrap());
        for (name, order) in [
            ("epoch_sequential", Order::Sequential),
            (
                "epoch_shard_shuffle_seq",
                Order::ShardShuffle(WithinShard::Sequential),
            ),
            (
                "epoch_shard_shuffle",
                Order::ShardShuffle(WithinShard::Random),
            ),
            ("epoch_full_random", Order::Random),
        ] {
            let t = Instant::now();
            let loader = Loader::new(
                ds.clone(),
                LoaderOptions::default()
                    .with_order(order)
                    .with_seed(1)
                    .with_partition(Partition::single())
                    .try_with_batch_size(256)
                    .unwrap(),
            );
            let mut rows = 0u64;
            for b in loader {
                rows += black_box(b.unwrap()).len() as u64;
            }
            emit("scalar", name, rows, t.elapsed().as_secs_f64());
        }
    }
    #[cfg(feature = "lance")]
    if run("lance") {
        let n = sz(1_000_000);
        let dir = tmp.path().join("lance_scalar");
        let t = Instant::now();
        write_lance_cache(
            scalar_rows(n),
            &scalar_features(),
            &dir,
            &LanceWriteOptions::default(),
        )
        .unwrap();
        emit("lance_scalar", "write", n as u64, t.elapsed().as_secs_f64());
        reads("lance_scalar", &dir, n, 500_000, 2_000);
        let n = sz(100_000);
        let dir = tmp.path().join("lance_binary");
        let t = Instant::now();
        write_lance_cache(
            binary_rows(n),
            &binary_features(),
            &dir,
            &LanceWriteOptions::default(),
        )
        .unwrap();
        emit("lance_binary", "write", n as u64, t.elapsed().as_secs_f64());
        reads("lance_binary", &dir, n, 300_000, 2_000);
    }
    if run("image") {
        let n = sz(20_000);
        let dir = tmp.path().join("image");
        write(
            "image",
            || image_rows(n),
            n as u64,
            &image_features(),
            &dir,
            ArrowWriteOptions::default().with_encode_threads(2),
        );
        reads("image", &dir, n, 50_000, 200);
    }
    #[cfg(feature = "video")]
    if run("video") {
        video_workloads(&args, tmp.path());
    }
    // Keep the row-type import used in every configuration.
    let _ = |b: &arrow_array::RecordBatch| {
        b.column(0)
            .as_primitive_opt::<arrow_array::types::Int32Type>()
            .is_some()
    };
}

fn arg<'a>(args: &'a [String], name: &str) -> Option<&'a String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
}

/// The input videos: every file of `--video-dir`, sorted (made by compare.py
/// with the ffmpeg CLI), else 8 generated here.
#[cfg(feature = "video")]
fn video_files(args: &[String]) -> Vec<std::path::PathBuf> {
    if let Some(d) = arg(args, "--video-dir") {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        return v;
    }
    let d = std::env::temp_dir().join(format!("shardset-bench-videos-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    (0..8)
        .map(|i| {
            let p = d.join(format!("v{i:03}.mp4"));
            let ok = std::process::Command::new("ffmpeg")
                .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
                .arg(format!("testsrc2=size=320x240:rate=25,hue=h={}", i * 40))
                .args(["-frames:v", "100", "-c:v", "libx264", "-pix_fmt", "yuv420p"])
                .arg(&p)
                .status()
                .unwrap()
                .success();
            assert!(ok, "ffmpeg could not make a test video");
            p
        })
        .collect()
}

#[cfg(feature = "video")]
fn build_frames(
    files: &[std::path::PathBuf],
    dir: &Path,
    method: u8,
) -> shardset::WrittenVideoFrames {
    use shardset::{Feature, Value, VideoStorage};
    let f = Features::new()
        .with("video", Feature::video(VideoStorage::Frames))
        .with("label", Feature::value(shardset::Dtype::Int64));
    let ex = files.iter().enumerate().map(|(i, p)| {
        Example::new()
            .with("video", Value::Path(p.clone()))
            .with("label", i as i64)
    });
    let opts = shardset::VideoFramesOptions::default()
        .with_webp(shardset::WebpSettings::try_new(65.0, method).unwrap())
        .with_threads(2);
    shardset::write_video_frames_cache(ex, &f, dir, &opts).unwrap()
}

/// Build a frames cache (frames/s at WebP method 4, the reference's, and
/// method 0), then read random 16-frame windows one at a time (windows/s),
/// in takes of 8 and in stacked batches of 8.
#[cfg(feature = "video")]
fn video_workloads(args: &[String], tmp: &Path) {
    use shardset::{open_cache_with, LanceVideoFrames, OpenOptions, WindowSpec};
    let files = video_files(args);
    let dir = tmp.join("frames");
    for (op, method) in [("build", 4u8), ("build_method0", 0)] {
        let t = Instant::now();
        let w = build_frames(&files, &dir, method);
        emit("video", op, w.metadata.num_rows, t.elapsed().as_secs_f64());
    }
    let w = build_frames(&files, &dir, 4);
    let _ = w;
    let c = open_cache_with(
        &dir,
        &OpenOptions::default().with_windows(WindowSpec::try_new(16, 0, 1).unwrap()),
    )
    .unwrap();
    let be = c
        .backend
        .as_any()
        .downcast_ref::<LanceVideoFrames>()
        .unwrap();
    let n = 400;
    let picks = be.sample(n + 20, 1, false);
    for &i in &picks[..20] {
        black_box(be.window(i).unwrap());
    }
    let t = Instant::now();
    for &i in &picks[20..] {
        black_box(be.window(i).unwrap());
    }
    emit("video", "window_get", n as u64, t.elapsed().as_secs_f64());
    let t = Instant::now();
    for c in picks[20..].chunks(8) {
        black_box(be.windows(c).unwrap());
    }
    emit("video", "window_take8", n as u64, t.elapsed().as_secs_f64());
    let t = Instant::now();
    for c in picks[20..].chunks(8) {
        black_box(be.windows_batch(c).unwrap());
    }
    emit(
        "video",
        "window_batch8",
        n as u64,
        t.elapsed().as_secs_f64(),
    );
}
