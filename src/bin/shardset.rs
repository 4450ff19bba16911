//! The `shardset` command line: a thin layer over the library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use shardset::{
    open_cache, write_arrow_cache, ArrowWriteOptions, Compression, Dtype, Example, Feature,
    Features, ImageData, Value,
};

#[derive(Parser)]
#[command(
    name = "shardset",
    version,
    about = "Build, inspect and read sharded dataset caches"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build a small synthetic image + label dataset, reopen it and print a summary.
    Demo {
        /// Where to write the cache (default: a fresh temp dir, removed afterwards).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Number of examples.
        #[arg(long, default_value_t = 5000)]
        rows: usize,
        /// Shard byte budget, e.g. 256KB, 64MB.
        #[arg(long, default_value = "1MB")]
        shard_size: String,
        /// none, lz4 or zstd.
        #[arg(long, default_value = "none")]
        compression: String,
        /// Encode threads (0 = one per core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
    },
    /// Print what a cache holds: layout, rows, shards, features.
    Inspect {
        /// The cache directory.
        path: PathBuf,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Recompute every shard checksum; exit non-zero on a mismatch.
    Verify {
        /// The cache directory.
        path: PathBuf,
    },
}

fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_uppercase();
    let (num, mul) = [
        ("GB", 1u64 << 30),
        ("MB", 1 << 20),
        ("KB", 1 << 10),
        ("B", 1),
    ]
    .iter()
    .find_map(|(suf, m)| t.strip_suffix(suf).map(|n| (n.trim().to_string(), *m)))
    .unwrap_or((t.clone(), 1));
    let v: f64 = num
        .parse()
        .map_err(|_| format!("cannot read size '{s}' (e.g. 256MB)"))?;
    if v <= 0.0 {
        return Err(format!("size '{s}' must be positive"));
    }
    Ok((v * mul as f64) as u64)
}

fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else if b >= (1 << 20) as f64 {
        format!("{:.2} MiB", b / (1 << 20) as f64)
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

/// A 32x32 RGB image whose pattern depends on the class, so labels are learnable.
fn synthetic_image(i: usize, label: usize) -> ImageData {
    let (h, w) = (32u32, 32u32);
    let mut px = Vec::with_capacity((h * w * 3) as usize);
    let phase = (i * 2654435761) as u32;
    for y in 0..h {
        for x in 0..w {
            let stripe = ((x + y * label as u32) / 4 % 2) as u8;
            let noise = ((x * 7 + y * 13 + phase) % 17) as u8;
            px.push(stripe * 180 + noise);
            px.push((label as u8) * 25 + noise);
            px.push(255 - stripe * 120 - noise);
        }
    }
    ImageData::new(h, w, 3, px).expect("consistent shape")
}

fn demo(
    out: Option<PathBuf>,
    rows: usize,
    shard_size: &str,
    compression: &str,
    threads: usize,
) -> Result<(), String> {
    let classes = [
        "airplane",
        "automobile",
        "bird",
        "cat",
        "deer",
        "dog",
        "frog",
        "horse",
        "ship",
        "truck",
    ];
    let features = Features::new()
        .with("image", Feature::image())
        .with(
            "label",
            Feature::class_label(classes).map_err(|e| e.to_string())?,
        )
        .with("id", Feature::value(Dtype::Int64));
    let tmp;
    let dir = match out {
        Some(d) => d,
        None => {
            tmp = std::env::temp_dir().join(format!("shardset-demo-{}", std::process::id()));
            tmp.join("synthetic_default_train")
        }
    };
    let opts = ArrowWriteOptions::default()
        .with_shard_size_bytes(Some(parse_size(shard_size)?))
        .with_compression(Compression::parse(compression).map_err(|e| e.to_string())?)
        .with_encode_threads(threads);
    println!("shardset demo: {rows} synthetic 32x32 RGB images with 10 labels");
    println!("  features:    {}", features.fingerprint_data());
    let t = Instant::now();
    let examples = (0..rows).map(|i| {
        let label = i % classes.len();
        Example::with_capacity(3)
            .with("image", synthetic_image(i, label))
            .with("label", label)
            .with("id", i as i64)
    });
    let written = write_arrow_cache(examples, &features, &dir, &opts).map_err(|e| e.to_string())?;
    let write_s = t.elapsed().as_secs_f64();
    let m = &written.metadata;
    let total: u64 = m.shard_num_bytes.as_ref().map_or(0, |v| v.iter().sum());
    println!(
        "  wrote:       {} rows in {} shard(s), {} on disk, {:.0} rows/s (PNG encode on {} thread(s))",
        m.num_rows,
        m.num_shards,
        human(total),
        m.num_rows as f64 / write_s,
        if threads == 0 { std::thread::available_parallelism().map_or(2, |n| n.get()) } else { threads }
    );
    println!("  cache:       {}", dir.display());
    println!("  fingerprint: {}", m.schema_fingerprint);

    let t = Instant::now();
    let cache = open_cache(&dir).map_err(|e| e.to_string())?;
    let b = &cache.backend;
    let first = b.get(0).map_err(|e| e.to_string())?;
    println!(
        "  reopened:    {} rows, first row in {:.2} ms",
        b.len(),
        t.elapsed().as_secs_f64() * 1e3
    );
    for i in [0i64, 1, -1] {
        let row = if i == 0 {
            first.clone()
        } else {
            b.get(i).map_err(|e| e.to_string())?
        };
        let (Some(Value::Image(img)), Some(Value::Label(l)), Some(id)) =
            (row.get("image"), row.get("label"), row.get("id"))
        else {
            return Err("unexpected row shape".into());
        };
        let mean = img.data.iter().map(|&p| p as f64).sum::<f64>() / img.data.len() as f64;
        println!(
            "  row {:>5}:   id={} label={} ({}) image {:?} mean pixel {:.1}",
            i,
            id.as_i64().unwrap_or(-1),
            l.id,
            l.name.as_deref().unwrap_or("?"),
            img.shape(),
            mean
        );
    }
    let t = Instant::now();
    let mut n = 0u64;
    let mut counts = [0u64; 10];
    for batch in b
        .iter_batches(&Default::default())
        .map_err(|e| e.to_string())?
    {
        let batch = batch.map_err(|e| e.to_string())?;
        use arrow_array::cast::AsArray;
        let labels = batch
            .column(1)
            .as_primitive::<arrow_array::types::Int64Type>();
        for l in labels.values() {
            counts[*l as usize] += 1;
        }
        n += batch.num_rows() as u64;
    }
    println!(
        "  iterated:    {n} rows in {:.2} ms; per-class counts {:?}",
        t.elapsed().as_secs_f64() * 1e3,
        counts
    );
    let idx: Vec<i64> = (0..128).map(|k| (k * 7919 % rows.max(1)) as i64).collect();
    let t = Instant::now();
    let taken = b.take(&idx).map_err(|e| e.to_string())?;
    let decoded = b
        .decoder()
        .decode_batch(&taken)
        .map_err(|e| e.to_string())?;
    println!(
        "  take(128):   {} rows gathered across shards and decoded in {:.2} ms",
        decoded.len(),
        t.elapsed().as_secs_f64() * 1e3
    );
    let bad = shardset::verify_checksums(&dir).map_err(|e| e.to_string())?;
    println!(
        "  checksums:   {} shard(s) verified, {} mismatch(es)",
        m.num_shards,
        bad.len()
    );
    if let Some(parent) = dir.parent() {
        if parent
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("shardset-demo-"))
        {
            let _ = std::fs::remove_dir_all(parent);
        }
    }
    Ok(())
}

fn inspect(path: PathBuf, json: bool) -> Result<(), String> {
    let cache = open_cache(&path).map_err(|e| e.to_string())?;
    let m = &cache.metadata;
    if json {
        let out = serde_json::json!({
            "path": path,
            "layout": cache.layout,
            "num_rows": cache.len(),
            "num_shards": cache.backend.num_shards(),
            "shard_row_counts": cache.backend.shard_row_counts(),
            "shard_num_bytes": m.get("shard_num_bytes"),
            "compression": m.get("compression"),
            "schema_fingerprint": m.get("schema_fingerprint"),
            "features": shardset::features::describe::features_to_json(cache.features()),
            "features_source": format!("{:?}", cache.features_source),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    println!("cache        {}", path.display());
    println!("layout       {}", cache.layout);
    println!("rows         {}", cache.len());
    println!(
        "compression  {}",
        m.get("compression")
            .and_then(|c| c.as_str())
            .unwrap_or("none")
    );
    println!(
        "fingerprint  {}",
        m.get("schema_fingerprint")
            .and_then(|c| c.as_str())
            .unwrap_or("")
    );
    println!("features     ({:?})", cache.features_source);
    for (name, f) in cache.features().iter() {
        println!("  {name:<16} {}", shardset::features::repr::feature_repr(f));
    }
    let sizes = m.get("shard_num_bytes").and_then(|v| v.as_array()).cloned();
    println!("shards       {}", cache.backend.num_shards());
    for (i, rows) in cache.backend.shard_row_counts().iter().enumerate() {
        let size = sizes
            .as_ref()
            .and_then(|s| s.get(i))
            .and_then(|v| v.as_u64())
            .map(human)
            .unwrap_or_else(|| "?".into());
        println!("  {i:>5}  {rows:>10} rows  {size:>12}");
    }
    Ok(())
}

fn verify(path: PathBuf) -> Result<(), String> {
    let bad = shardset::verify_checksums(&path).map_err(|e| e.to_string())?;
    if bad.is_empty() {
        println!("ok: every shard matches its recorded xxh64");
        Ok(())
    } else {
        for b in &bad {
            eprintln!(
                "checksum mismatch: {} (recorded {}, found {})",
                b.path.display(),
                b.expected,
                b.found
            );
        }
        Err(format!("{} shard(s) do not match", bad.len()))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Demo {
            out,
            rows,
            shard_size,
            compression,
            threads,
        } => demo(out, rows, &shard_size, &compression, threads),
        Cmd::Inspect { path, json } => inspect(path, json),
        Cmd::Verify { path } => verify(path),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
