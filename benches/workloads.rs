//! The benchmark workloads, timed once each, printed as JSON lines.
//!
//! `cargo bench --bench workloads` runs everything; `-- --only scalar` one
//! workload; `-- rss --rows N` writes N scalar rows and prints the process's
//! peak RSS (run it at 1 M and 4 M rows to see memory stay flat).
//! `benches/compare.py` runs this and the pyarrow equivalents and prints ratios.

#[path = "common/mod.rs"]
mod common;

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

// ------------------------------------------------------------- versus ---
// `versus-write` and `versus-read`: the Rust side of benches/versus.py, which
// runs the reference's own package on the same files with the same
// operations (same indices, read from a file) and prints the table.

/// Reads little-endian i64 row indices written by versus.py.
fn read_indices(path: &str) -> Vec<i64> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The features of a versus.py dataset kind.
fn versus_features(kind: &str) -> Features {
    use shardset::{Dtype, Feature};
    match kind {
        "scalar" => Features::new()
            .with("x", Feature::value(Dtype::Int32))
            .with("label", Feature::class_label_n(10).unwrap()),
        "binary" => Features::new()
            .with("data", Feature::value(Dtype::Binary))
            .with("idx", Feature::value(Dtype::Int64)),
        "image" => Features::new()
            .with("image", Feature::image())
            .with("label", Feature::value(Dtype::Int64)),
        "video_path" => Features::new()
            .with("video", Feature::video(shardset::VideoStorage::Path))
            .with("label", Feature::value(Dtype::Int64)),
        other => panic!("unknown kind {other}"),
    }
}

/// The photographs of a versus.py payload file: for each, its height and
/// width (u32 little-endian) then its RGB pixels, row by row.
fn read_photos(bytes: &[u8]) -> Vec<shardset::ImageData> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let h = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        let w = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap());
        let n = (w * h * 3) as usize;
        let px = bytes[at + 8..at + 8 + n].to_vec();
        out.push(shardset::ImageData::new(h, w, 3, px).unwrap());
        at += 8 + n;
    }
    out
}

/// `codecs --payload FILE [--reps N]`: decode speed of the photographs
/// (pixels as `versus-write --kind image` reads them), PNG at zlib level 6
/// and JPEG as our writer encodes them, through the library's direct
/// decoders (`png`, `jpeg-decoder`: what `features::image::decode` uses for
/// these two) and through the `image` crate's (its `png` and `zune-jpeg`), on
/// one thread. Prints one JSON line per format with images/s for each, and
/// whether the pixels agree. `--dump DIR` also writes each encoded image
/// and both decoders' pixels there (`<format>-<i>.{bin,direct,image}`), to
/// compare them with another decoder (the reference's PIL).
fn codecs(args: &[String]) {
    use shardset::features::image::{decode, encode_with};
    let photos = read_photos(&std::fs::read(arg(args, "--payload").expect("--payload")).unwrap());
    let reps: usize = arg(args, "--reps").map_or(5, |r| r.parse().unwrap());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    for (name, format, png) in [
        (
            "png_level6",
            shardset::ImageFormat::Png,
            shardset::PngCompression::level(6).unwrap(),
        ),
        (
            "jpeg_q75",
            shardset::ImageFormat::Jpeg,
            shardset::PngCompression::Fast,
        ),
    ] {
        let encoded: Vec<Vec<u8>> = photos
            .iter()
            .map(|p| encode_with(p, format, png).unwrap())
            .collect();
        let image_format = match format {
            shardset::ImageFormat::Png => image::ImageFormat::Png,
            shardset::ImageFormat::Jpeg => image::ImageFormat::Jpeg,
        };
        let ours = |b: &[u8]| decode(b).unwrap().data;
        let theirs = |b: &[u8]| {
            image::load_from_memory_with_format(b, image_format)
                .unwrap()
                .into_rgb8()
                .into_raw()
        };
        if let Some(dir) = arg(args, "--dump") {
            let dir = Path::new(dir);
            std::fs::create_dir_all(dir).unwrap();
            for (i, b) in encoded.iter().enumerate() {
                std::fs::write(dir.join(format!("{name}-{i}.bin")), b).unwrap();
                std::fs::write(dir.join(format!("{name}-{i}.direct")), ours(b)).unwrap();
                std::fs::write(dir.join(format!("{name}-{i}.image")), theirs(b)).unwrap();
            }
        }
        // Same pixels? (PNG is lossless: must be equal; JPEG decoders may
        // round the inverse DCT differently.)
        let max_diff = encoded
            .iter()
            .map(|b| {
                ours(b)
                    .iter()
                    .zip(theirs(b))
                    .map(|(x, y)| x.abs_diff(y))
                    .max()
                    .unwrap_or(0)
            })
            .max()
            .unwrap_or(0);
        let time = |f: &(dyn Fn(&[u8]) -> Vec<u8> + Sync)| {
            pool.install(|| {
                let t = Instant::now();
                for _ in 0..reps {
                    for b in &encoded {
                        std::hint::black_box(f(b));
                    }
                }
                (reps * encoded.len()) as f64 / t.elapsed().as_secs_f64()
            })
        };
        // Alternate, so drift on a noisy machine hits both sides alike.
        let (a1, b1, a2, b2) = (time(&ours), time(&theirs), time(&ours), time(&theirs));
        let (a, b) = ((a1 + a2) / 2.0, (b1 + b2) / 2.0);
        let pixels: usize = photos.iter().map(|p| p.data.len()).sum::<usize>() / photos.len();
        println!(
            "{{\"workload\": \"decode_{name}\", \"threads\": 1, \"images\": {}, \"mean_pixel_bytes\": {pixels}, \"direct_images_per_s\": {a:.1}, \"image_crate_images_per_s\": {b:.1}, \"direct_over_image_crate\": {:.2}, \"max_pixel_diff\": {max_diff}}}",
            encoded.len(),
            a / b
        );
    }
}

/// `versus-write --kind K --rows N --dir D [--payload FILE] [--zstd] [--lance]
/// [--threads T] [--png-level L]`: writes the kind's rows (binary payloads:
/// 1 KiB each from the file, as versus.py hands them to the reference;
/// images: row i is photograph i mod count, as pixels, PNG-encoded at zlib
/// level L, else fdeflate's fast mode) into one shard, the reference's
/// default, and prints the time of the write alone.
fn versus_write(args: &[String]) {
    let kind = arg(args, "--kind").unwrap().clone();
    let n: usize = arg(args, "--rows").unwrap().parse().unwrap();
    let dir = Path::new(arg(args, "--dir").unwrap());
    let threads: usize = arg(args, "--threads").map_or(1, |t| t.parse().unwrap());
    let payload = arg(args, "--payload").map(|p| std::fs::read(p).unwrap());
    let f = versus_features(&kind);
    let rows: Vec<Example> = match kind.as_str() {
        "scalar" => scalar_rows(n).collect(),
        "binary" => {
            let p = payload.as_ref().expect("--payload");
            (0..n)
                .map(|i| {
                    Example::with_capacity(2)
                        .with("data", p[i * 1024..(i + 1) * 1024].to_vec())
                        .with("idx", i as i64)
                })
                .collect()
        }
        "image" => {
            let photos = read_photos(payload.as_ref().expect("--payload"));
            (0..n)
                .map(|i| {
                    Example::with_capacity(2)
                        .with(
                            "image",
                            shardset::Value::Image(Box::new(photos[i % photos.len()].clone())),
                        )
                        .with("label", (i % photos.len()) as i64)
                })
                .collect()
        }
        "video_path" => {
            // The payload lists the clips, one path a line; row i is clip i mod count.
            let text = String::from_utf8(payload.clone().expect("--payload")).unwrap();
            let clips: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
            (0..n)
                .map(|i| {
                    Example::with_capacity(2)
                        .with(
                            "video",
                            shardset::Value::Path(clips[i % clips.len()].into()),
                        )
                        .with("label", (i % clips.len()) as i64)
                })
                .collect()
        }
        other => panic!("unknown kind {other}"),
    };
    let png = match arg(args, "--png-level") {
        Some(l) => shardset::PngCompression::level(l.parse().unwrap()).unwrap(),
        None => shardset::PngCompression::Fast,
    };
    let zstd = args.iter().any(|a| a == "--zstd");
    let t = Instant::now();
    #[cfg(feature = "lance")]
    if args.iter().any(|a| a == "--lance") {
        write_lance_cache(rows, &f, dir, &LanceWriteOptions::default()).unwrap();
        println!(
            "{{\"op\": \"write\", \"rows\": {n}, \"seconds\": {:.6}}}",
            t.elapsed().as_secs_f64()
        );
        return;
    }
    let mut o = ArrowWriteOptions::default()
        .try_with_shard_size_bytes(None)
        .unwrap()
        .with_png_compression(png)
        .with_encode_threads(threads);
    if zstd {
        o = o.with_compression(Compression::Zstd);
    }
    write_arrow_cache(rows, &f, dir, &o).unwrap();
    println!(
        "{{\"op\": \"write\", \"rows\": {n}, \"seconds\": {:.6}}}",
        t.elapsed().as_secs_f64()
    );
}

/// `versus-read --dir D --op get|take128|iterate|first_row [--indices FILE]
/// [--threads T] [--cache-bytes B] [--lance-chunk-rows R]`: opens the cache (a fresh backend: in-process caches
/// empty) and times the operation over the given indices ("cold"), then the
/// same operations again on the same backend ("warm"). get: one decoded row
/// per index; take128: 128 indices at a time, taken and decoded to rows;
/// iterate: every batch decoded to rows; first_row: open + row 0. With T
/// threads the indices are split into T contiguous parts read at once.
fn versus_read(args: &[String]) {
    let dir = arg(args, "--dir").unwrap().clone();
    let op = arg(args, "--op").unwrap().clone();
    let threads: usize = arg(args, "--threads").map_or(1, |t| t.parse().unwrap());
    let idx = arg(args, "--indices")
        .map(|p| read_indices(p))
        .unwrap_or_default();
    let mut open_opts = shardset::OpenOptions::default();
    if let Some(b) = arg(args, "--cache-bytes") {
        open_opts = open_opts.with_cache_bytes(b.parse().unwrap());
    }
    if let Some(c) = arg(args, "--lance-chunk-rows") {
        open_opts = open_opts
            .try_with_lance_chunk_rows(c.parse().unwrap())
            .unwrap();
    }
    let t = Instant::now();
    let cache = shardset::open_cache_with(&dir, &open_opts).unwrap();
    let open_s = t.elapsed().as_secs_f64();
    // Memory before any row is read (maps and footers only): the constant
    // the decompressed-batch budget is added to.
    let rss_open_kb = current_rss_kb();
    let b = cache.backend.clone();
    if op == "rss_iterate" {
        // Every batch decoded, heap (RssAnon) sampled after each: what the
        // decompressed-batch budget bounds (mapped file pages are not heap).
        let anon_open = status_kb("RssAnon:");
        let mut peak = anon_open;
        let mut rows = 0u64;
        for r in b.iter_batches(&IterOptions::default()).unwrap() {
            let batch = r.unwrap();
            rows += black_box(b.decoder().decode_batch(&batch).unwrap()).len() as u64;
            drop(batch);
            peak = peak.max(status_kb("RssAnon:"));
        }
        println!(
            "{{\"op\": \"rss_iterate\", \"count\": {rows}, \"anon_open_kb\": {anon_open}, \"peak_anon_kb\": {peak}}}"
        );
        return;
    }
    if op == "first_row" {
        black_box(b.get(0).unwrap());
        println!(
            "{{\"op\": \"first_row\", \"count\": 1, \"cold\": {:.6}, \"warm\": null, \"open\": {open_s:.6}}}",
            t.elapsed().as_secs_f64()
        );
        return;
    }
    let run_once = || -> (u64, f64) {
        let t = Instant::now();
        let count: u64 = if op == "iterate" {
            let mut rows = 0u64;
            for r in b.iter_batches(&IterOptions::default()).unwrap() {
                let batch = r.unwrap();
                rows += black_box(b.decoder().decode_batch(&batch).unwrap()).len() as u64;
            }
            rows
        } else {
            let part = idx.len().div_ceil(threads.max(1)).max(1);
            std::thread::scope(|s| {
                let hs: Vec<_> = idx
                    .chunks(part)
                    .map(|chunk| {
                        let b = b.clone();
                        let op = op.clone();
                        s.spawn(move || {
                            if op == "get" {
                                for &i in chunk {
                                    black_box(b.get(i).unwrap());
                                }
                            } else {
                                for c in chunk.chunks(128) {
                                    let batch = b.take(c).unwrap();
                                    black_box(b.decoder().decode_batch(&batch).unwrap());
                                }
                            }
                            chunk.len() as u64
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum()
            })
        };
        (count, t.elapsed().as_secs_f64())
    };
    let (count, cold) = run_once();
    let (_, warm) = run_once();
    println!(
        "{{\"op\": \"{op}\", \"count\": {count}, \"cold\": {cold:.6}, \"warm\": {warm:.6}, \"open\": {open_s:.6}, \"rss_open_kb\": {rss_open_kb}, \"peak_rss_kb\": {}}}",
        peak_rss_kb()
    );
}

/// Resident set size now (VmRSS), in KiB.
fn current_rss_kb() -> u64 {
    status_kb("VmRSS:")
}

/// A KiB figure of /proc/self/status.
fn status_kb(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// `versus-frames-build --video-dir D --dir OUT [--threads T] [--method M]`:
/// builds a frames cache of every file of D (sorted), WebP quality 65, and
/// prints frames/s of the whole build (process start-up excluded).
#[cfg(feature = "video")]
fn versus_frames_build(args: &[String]) {
    let files = video_files(args);
    let dir = Path::new(arg(args, "--dir").unwrap());
    let threads: usize = arg(args, "--threads").map_or(2, |t| t.parse().unwrap());
    let method: u8 = arg(args, "--method").map_or(4, |t| t.parse().unwrap());
    use shardset::{Feature, Value, VideoStorage};
    let f = Features::new().with("video", Feature::video(VideoStorage::Frames));
    let ex = files
        .iter()
        .map(|p| Example::new().with("video", Value::Path(p.clone())));
    let opts = shardset::VideoFramesOptions::default()
        .with_webp(shardset::WebpSettings::try_new(65.0, method).unwrap())
        .with_threads(threads);
    let t = Instant::now();
    let w = shardset::write_video_frames_cache(ex, &f, dir, &opts).unwrap();
    println!(
        "{{\"op\": \"build\", \"count\": {}, \"seconds\": {:.6}}}",
        w.metadata.num_rows,
        t.elapsed().as_secs_f64()
    );
}

/// `segments-build --video-dir D --dir OUT --storage frames|h264|av1
/// [--threads T] [--crf N] [--preset P] [--encoder-params K=V:...]`: builds
/// a video cache of every file of D (sorted): WebP q65 frames (the frames
/// layout's defaults), or H.264 / AV1 segments of 32 frames at their
/// default CRF and preset (or those given, with the encoder's own
/// parameters if given); prints frames/s of the build, bytes per
/// frame (every file of the cache), and the quality of every stored frame
/// read back through the window API against the source frames decoded to
/// RGB (PSNR over RGB samples, SSIM over BT.601 luma; mean and lowest),
/// the same measure for every storage.
#[cfg(feature = "video")]
fn segments_build(args: &[String]) {
    use shardset::video::quality::{psnr, ssim_rgb};
    use shardset::{
        open_cache_with, Feature, LanceVideoFrames, OpenOptions, SegmentCodec, SegmentSettings,
        Value, VideoStorage, WindowSpec,
    };
    let files = video_files(args);
    let dir = Path::new(arg(args, "--dir").unwrap());
    let storage = arg(args, "--storage").unwrap().as_str();
    let threads: usize = arg(args, "--threads").map_or(2, |t| t.parse().unwrap());
    let (feature, opts) = match storage {
        "frames" => (
            VideoStorage::Frames,
            shardset::VideoFramesOptions::default(),
        ),
        "h264" | "av1" => {
            let mut settings = SegmentSettings::new(if storage == "av1" {
                SegmentCodec::Av1
            } else {
                SegmentCodec::H264
            });
            if let Some(crf) = arg(args, "--crf") {
                settings = settings.try_with_crf(crf.parse().unwrap()).unwrap();
            }
            if let Some(preset) = arg(args, "--preset") {
                settings = settings.with_preset(preset.as_str());
            }
            if let Some(params) = arg(args, "--encoder-params") {
                settings = settings.try_with_encoder_params(params.as_str()).unwrap();
            }
            (
                VideoStorage::Segments,
                shardset::VideoFramesOptions::default().with_segments(settings),
            )
        }
        other => panic!("--storage frames, h264 or av1, not {other}"),
    };
    let f = Features::new().with("video", Feature::video(feature));
    let ex = files
        .iter()
        .map(|p| Example::new().with("video", Value::Path(p.clone())));
    let t = Instant::now();
    let w = shardset::write_video_frames_cache(ex, &f, dir, &opts.with_threads(threads)).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let bytes = dir_bytes(dir);
    // Quality: every frame through the window API against the source.
    let c = open_cache_with(
        dir,
        &OpenOptions::default().with_windows(WindowSpec::try_new(1, 0, 1).unwrap()),
    )
    .unwrap();
    let be = c
        .backend
        .as_any()
        .downcast_ref::<LanceVideoFrames>()
        .unwrap();
    let (mut ps, mut ss) = (Vec::new(), Vec::new());
    let mut window = 0i64;
    for (v, entry) in be.metadata().videos.iter().enumerate() {
        let path = Path::new(entry.path.as_deref().unwrap());
        let all: Vec<u64> = (0..entry.t).collect();
        let (src, sw, sh) =
            shardset::video::decode::read_frames_rgb(path, &all, None, None).unwrap();
        assert_eq!((sw as u64, sh as u64), (entry.w, entry.h), "video {v}");
        let idx: Vec<i64> = (window..window + entry.t as i64).collect();
        window += entry.t as i64;
        for chunk in idx.chunks(64) {
            let b = be.windows_batch(chunk).unwrap();
            let frame = sw * sh * 3;
            for (k, &i) in chunk.iter().enumerate() {
                let got = &b.frames.data[k * frame..(k + 1) * frame];
                let want = &src[(i - idx[0]) as usize];
                ps.push(psnr(want, got).min(100.0));
                ss.push(ssim_rgb(want, got, sw, sh));
            }
        }
    }
    let n = ps.len() as f64;
    println!(
        "{{\"op\": \"build\", \"storage\": \"{storage}\", \"count\": {}, \"seconds\": {secs:.6}, \"bytes\": {bytes}, \"psnr_mean\": {:.4}, \"psnr_min\": {:.4}, \"ssim_mean\": {:.6}, \"ssim_min\": {:.6}, \"recorded\": {}}}",
        w.metadata.num_rows,
        ps.iter().sum::<f64>() / n,
        ps.iter().copied().fold(f64::INFINITY, f64::min),
        ss.iter().sum::<f64>() / n,
        ss.iter().copied().fold(f64::INFINITY, f64::min),
        serde_json::to_string(&w.metadata.segments.as_ref().map(|s| &s.quality)).unwrap()
    );
}

/// Bytes of every file under `d`.
#[cfg(feature = "video")]
fn dir_bytes(d: &Path) -> u64 {
    std::fs::read_dir(d)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                dir_bytes(&e.path())
            } else {
                m.len()
            }
        })
        .sum()
}

/// Seconds to call `read` on every index, the indices split into `threads`
/// contiguous parts read at once.
#[cfg(feature = "video")]
fn timed_split<R>(idx: &[i64], threads: usize, read: impl Fn(i64) -> R + Sync) -> f64 {
    let t = Instant::now();
    let part = idx.len().div_ceil(threads.max(1)).max(1);
    let read = &read;
    std::thread::scope(|s| {
        for chunk in idx.chunks(part) {
            s.spawn(move || {
                for &i in chunk {
                    read(i);
                }
            });
        }
    });
    t.elapsed().as_secs_f64()
}

/// `versus-clips --dir D --indices FILE [--frames 16] [--threads T]`: opens
/// a cache with a `Video(path|bytes)` column (fresh backend) and reads each
/// row of the indices with its clip decoded: `--frames` frames sampled
/// uniformly (the reference's default sampling), uint8, THWC, at the video's
/// size; once ("cold": a fresh dataset, nothing decoded yet), then again
/// ("warm"); with T threads the indices are split into T parts read at once.
#[cfg(feature = "video")]
fn versus_clips(args: &[String]) {
    let dir = arg(args, "--dir").unwrap().clone();
    let frames: usize = arg(args, "--frames").map_or(16, |t| t.parse().unwrap());
    let threads: usize = arg(args, "--threads").map_or(1, |t| t.parse().unwrap());
    let idx = read_indices(arg(args, "--indices").unwrap());
    let ds = shardset::Dataset::new(shardset::open_cache(&dir).unwrap())
        .with_video_decode(Some(shardset::video::VideoDecode::new(frames)))
        .unwrap();
    let ds = &ds;
    let cold = timed_split(&idx, threads, |i| black_box(ds.get(i).unwrap()));
    let warm = timed_split(&idx, threads, |i| black_box(ds.get(i).unwrap()));
    println!(
        "{{\"op\": \"clips\", \"count\": {}, \"cold\": {cold:.6}, \"warm\": {warm:.6}, \"frames\": {frames}}}",
        idx.len()
    );
}

/// `versus-windows --dir D --window 16 --indices FILE [--threads T]`: opens
/// the frames cache (fresh backend) and reads each window of the indices as
/// an RGB tensor, one at a time ("cold"), then again ("warm"); with T
/// threads the indices are split into T parts read at once.
#[cfg(feature = "video")]
fn versus_windows(args: &[String]) {
    use shardset::{open_cache_with, LanceVideoFrames, OpenOptions, WindowSpec};
    let dir = arg(args, "--dir").unwrap().clone();
    let window: u32 = arg(args, "--window").map_or(16, |t| t.parse().unwrap());
    let threads: usize = arg(args, "--threads").map_or(1, |t| t.parse().unwrap());
    let idx = read_indices(arg(args, "--indices").unwrap());
    let c = open_cache_with(
        &dir,
        &OpenOptions::default().with_windows(WindowSpec::try_new(window, 0, 1).unwrap()),
    )
    .unwrap();
    let be = c
        .backend
        .as_any()
        .downcast_ref::<LanceVideoFrames>()
        .unwrap();
    use shardset::Backend;
    let cold = timed_split(&idx, threads, |i| black_box(be.window(i).unwrap()));
    let warm = timed_split(&idx, threads, |i| black_box(be.window(i).unwrap()));
    println!(
        "{{\"op\": \"windows\", \"count\": {}, \"cold\": {cold:.6}, \"warm\": {warm:.6}, \"num_windows\": {}}}",
        idx.len(),
        be.len()
    );
}

/// libwebp alone, as the library builds it: frames/s decoding the WebP
/// frames in `--frames` (each a little-endian u32 length, then the bytes)
/// to packed RGB on one thread, once each, into one reused buffer.
#[cfg(feature = "video")]
fn webp_decode(args: &[String]) {
    use shardset::video::webp::{decode_rgb_into, dimensions};
    let raw = std::fs::read(arg(args, "--frames").expect("--frames")).unwrap();
    let mut frames: Vec<&[u8]> = Vec::new();
    let mut at = 0;
    while at < raw.len() {
        let n = u32::from_le_bytes(raw[at..at + 4].try_into().unwrap()) as usize;
        frames.push(&raw[at + 4..at + 4 + n]);
        at += 4 + n;
    }
    let mut out = Vec::new();
    let t = std::time::Instant::now();
    for f in &frames {
        // The frame's own size (a content may mix resolutions).
        let (w, h) = dimensions(f).unwrap();
        out.resize(w * h * 3, 0);
        decode_rgb_into(f, w, h, &mut out).unwrap();
        black_box(&out);
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{{\"op\": \"webp-decode\", \"count\": {}, \"seconds\": {secs:.6}}}",
        frames.len()
    );
}
