//! The Rust side of the side-by-side benchmarks (`benches/versus.py`,
//! `benches/segments.py`, the codec and WebP measures): each a command of
//! `cargo bench --bench workloads -- <command>`, dispatched from
//! `workloads.rs`, which keeps the issue's own workloads.

use std::path::Path;
use std::time::Instant;

use std::hint::black_box;

use super::*;

// ------------------------------------------------------------- versus ---
// `versus-write` and `versus-read`: the Rust side of benches/versus.py, which
// runs the reference's own package on the same files with the same
// operations (same indices, read from a file) and prints the table.

/// Reads little-endian i64 row indices written by versus.py.
pub(crate) fn read_indices(path: &str) -> Vec<i64> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The features of a versus.py dataset kind.
pub(crate) fn versus_features(kind: &str) -> Features {
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
pub(crate) fn read_photos(bytes: &[u8]) -> Vec<shardset::ImageData> {
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
pub(crate) fn codecs(args: &[String]) {
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
pub(crate) fn versus_write(args: &[String]) {
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
pub(crate) fn versus_read(args: &[String]) {
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
pub(crate) fn current_rss_kb() -> u64 {
    status_kb("VmRSS:")
}

/// A KiB figure of /proc/self/status.
pub(crate) fn status_kb(key: &str) -> u64 {
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
pub(crate) fn versus_frames_build(args: &[String]) {
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
pub(crate) fn segments_build(args: &[String]) {
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
pub(crate) fn dir_bytes(d: &Path) -> u64 {
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
pub(crate) fn timed_split<R>(idx: &[i64], threads: usize, read: impl Fn(i64) -> R + Sync) -> f64 {
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
pub(crate) fn versus_clips(args: &[String]) {
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
pub(crate) fn versus_windows(args: &[String]) {
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
pub(crate) fn webp_decode(args: &[String]) {
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
