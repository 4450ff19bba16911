//! `shardset demo`: a synthetic image + label dataset built through a
//! `DatasetBuilder`, reopened, split, iterated and verified; then three short
//! clips shipped in the binary built into a `lance-video-frames` cache,
//! inspected, and a window of frames read back.

use std::path::PathBuf;
use std::time::Instant;

use shardset::error::BoxError;
use shardset::{
    load_with_report, BuilderConfig, Compression, DatasetBuilder, DatasetInfo, Dtype, Example,
    ExampleStream, Feature, Features, ImageData, LoadOptions, Loader, LoaderOptions, Order,
    Partition, TestSize, Value, WithinShard, WorkUnit,
};

use crate::fmt::{human, CliError, CliResult};

const CLASSES: [&str; 10] = [
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

/// A 32x32 RGB image whose pattern depends on the class, so labels are learnable.
fn synthetic_image(i: usize, label: usize) -> ImageData {
    let (h, w) = (32u32, 32u32);
    let mut px = Vec::with_capacity((h * w * 3) as usize);
    let phase = (i as u32).wrapping_mul(2654435761);
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

/// The demo dataset as a builder: two splits, four work units each.
struct SyntheticImages {
    rows: usize,
}

impl SyntheticImages {
    fn split_rows(&self, split: &str) -> usize {
        if split == "train" {
            self.rows
        } else {
            self.rows / 5
        }
    }
}

impl DatasetBuilder for SyntheticImages {
    fn name(&self) -> &str {
        "SyntheticImages"
    }
    fn version(&self) -> &str {
        "1.0.0"
    }
    fn configs(&self) -> Vec<BuilderConfig> {
        vec![BuilderConfig::new(
            format!("n{}", self.rows),
            "synthetic 32x32 RGB images, 10 classes",
        )]
    }
    fn info(&self, _config: &str) -> Result<DatasetInfo, BoxError> {
        Ok(DatasetInfo {
            features: Features::new()
                .with("image", Feature::image())
                .with("label", Feature::class_label(CLASSES)?)
                .with("id", Feature::value(Dtype::Int64)),
            description: "Striped synthetic images whose pattern encodes the class.".into(),
            license: "CC0".into(),
            ..Default::default()
        })
    }
    fn splits(&self, _config: &str) -> Result<Vec<String>, BoxError> {
        Ok(vec!["train".into(), "test".into()])
    }
    fn work_units(&self, _c: &str, split: &str) -> Result<Vec<WorkUnit>, BoxError> {
        let n = self.split_rows(split);
        Ok((0..4)
            .map(|k| WorkUnit::new(format!("{}..{}", n * k / 4, n * (k + 1) / 4)))
            .collect())
    }
    fn generate<'a>(
        &'a self,
        _config: &'a str,
        split: &'a str,
        unit: &'a WorkUnit,
    ) -> Result<ExampleStream<'a>, BoxError> {
        let (a, b) = unit.id.split_once("..").ok_or("bad unit")?;
        let (a, b): (usize, usize) = (a.parse()?, b.parse()?);
        let offset = if split == "train" { 0 } else { 1 << 40 };
        Ok(Box::new((a..b).map(move |i| {
            let label = i % CLASSES.len();
            Ok((
                format!("{split}-{i}"),
                Example::with_capacity(3)
                    .with("image", synthetic_image(i + offset, label))
                    .with("label", label)
                    .with("id", i as i64),
            ))
        })))
    }
}

/// Build a small synthetic image + label dataset, reopen it and print a summary.
#[derive(clap::Args)]
pub struct DemoArgs {
    /// Cache root (default: $STABLE_DATASETS_CACHE_DIR, else a fresh temp dir removed afterwards).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Number of training examples (the test split gets a fifth).
    #[arg(long, default_value_t = 5000)]
    pub rows: usize,
    /// Shard byte budget, e.g. 256KB, 64MB. The demo's 5,000 small images
    /// come to about 6 MB, so it uses 1MB rather than the library's
    /// 256 MiB default, to show several shards and shard-aware shuffling.
    #[arg(long, default_value = "1MB")]
    pub shard_size: String,
    /// IPC compression.
    #[arg(long, value_enum, default_value_t = Compression::None)]
    pub compression: Compression,
    /// Encode threads (0 = one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Examples per record batch.
    #[arg(long, default_value_t = 1000)]
    pub batch_size: usize,
    /// Build even if the cache exists.
    #[arg(long)]
    pub rebuild: bool,
    /// Print one JSON line instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// arrow (Arrow IPC shards) or lance (a Lance dataset).
    #[arg(long, value_enum, default_value_t = shardset::Layout::Arrow)]
    pub format: shardset::Layout,
    /// lance: rows per data file, each committed on its own (default 1,048,576).
    #[arg(long)]
    pub max_rows_per_file: Option<usize>,
}

/// Runs `shardset demo`; any failure exits 1.
pub fn run(args: DemoArgs) -> CliResult {
    demo(args).map_err(CliError::Failed)
}

fn demo(a: DemoArgs) -> Result<(), String> {
    // An explicit --root, else $STABLE_DATASETS_CACHE_DIR, else a temp dir
    // removed afterwards (the demo never fills a home directory uninvited).
    let env_root =
        std::env::var_os(shardset::cache::naming::CACHE_DIR_ENV).filter(|v| !v.is_empty());
    let tmp_root = a.root.is_none() && env_root.is_none();
    let root = match (&a.root, env_root) {
        (Some(r), _) => r.clone(),
        (None, Some(_)) => shardset::cache_root(),
        (None, None) => std::env::temp_dir().join(format!("shardset-demo-{}", std::process::id())),
    };
    // The demo's options by name; the library's spec says which apply.
    let mut given = serde_json::Map::new();
    given.insert("batch_size".into(), a.batch_size.into());
    if a.threads != 0 {
        given.insert("threads".into(), a.threads.into());
    }
    if !a.compression.is_none() {
        given.insert("compression".into(), a.compression.name().into());
    }
    if a.format == shardset::Layout::Arrow {
        given.insert("shard_size".into(), a.shard_size.clone().into());
    }
    if let Some(n) = a.max_rows_per_file {
        given.insert("max_rows_per_file".into(), n.into());
    }
    let spec = shardset::WriteSpec::from_options(a.format, &given).map_err(|e| e.to_string())?;
    let opts = LoadOptions::default()
        .with_cache_root(&root)
        .with_rebuild(a.rebuild)
        .with_write_spec(spec);
    let builder = SyntheticImages { rows: a.rows };
    let mut result = run_demo(&builder, &opts, &a);
    #[cfg(feature = "video")]
    if result.is_ok() && !a.json {
        result = video_demo(&root, a.rebuild, a.threads);
    }
    if tmp_root {
        let _ = std::fs::remove_dir_all(&root);
    }
    result
}

fn run_demo(builder: &SyntheticImages, opts: &LoadOptions, a: &DemoArgs) -> Result<(), String> {
    let t = Instant::now();
    let (ds, report) = load_with_report(builder, "train", opts).map_err(|e| e.to_string())?;
    let load_s = t.elapsed().as_secs_f64();
    let meta = ds.cache().map(|c| c.metadata.clone());
    let fingerprint = meta
        .as_ref()
        .map_or(String::new(), |m| m.schema_fingerprint().to_string());
    let build_id = meta.as_ref().and_then(|m| m.build_id()).map(str::to_string);
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "built": report.built,
                "resumed_rows": report.resumed_rows,
                "dir": report.dir,
                "rows": ds.len(),
                "num_shards": ds.backend().num_shards(),
                "schema_fingerprint": fingerprint,
                "build_id": build_id,
                "seconds": load_s,
            })
        );
        return Ok(());
    }
    let total = shardset::layouts::stats::dir_size(&report.dir).map_err(|e| e.to_string())?;
    println!(
        "shardset demo: {} synthetic 32x32 RGB images, 10 classes",
        ds.len()
    );
    println!("  features:    {}", ds.features().fingerprint_data());
    if report.built {
        println!(
            "  built:       {} rows in {} shard(s), {} on disk, {:.0} rows/s (generate + PNG encode + write)",
            ds.len(),
            ds.backend().num_shards(),
            human(total),
            ds.len() as f64 / load_s
        );
    } else {
        println!(
            "  warm cache:  opened in {:.2} ms (nothing rebuilt)",
            load_s * 1e3
        );
    }
    println!("  cache:       {}", report.dir.display());
    println!("  fingerprint: {fingerprint}");
    for i in [0i64, 1, -1] {
        let row = ds.get(i).map_err(|e| e.to_string())?;
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
    let (train, test) = ds
        .train_test_split(TestSize::Fraction(0.1), 0, Some("label"))
        .map_err(|e| e.to_string())?;
    println!(
        "  split:       {} train / {} held out, stratified by label",
        train.len(),
        test.len()
    );
    let t = Instant::now();
    let loader = Loader::new(
        train,
        LoaderOptions::default()
            .with_order(Order::ShardShuffle(WithinShard::Random))
            .with_seed(0)
            .with_partition(Partition::single())
            .try_with_batch_size(256)
            .map_err(|e| e.to_string())?,
    );
    let mut counts = [0u64; 10];
    let mut n = 0u64;
    for batch in loader {
        for row in batch.map_err(|e| e.to_string())? {
            if let Some(Value::Label(l)) = row.get("label") {
                counts[l.id as usize] += 1;
            }
            n += 1;
        }
    }
    println!(
        "  one epoch:   {n} rows, shard-shuffled, images decoded, in {:.1} ms; per-class {:?}",
        t.elapsed().as_secs_f64() * 1e3,
        counts
    );
    let bad = ds
        .cache_dir()
        .map(shardset::verify_checksums)
        .transpose()
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    println!(
        "  checksums:   {} shard(s) verified, {} mismatch(es)",
        ds.backend().num_shards(),
        bad.len()
    );
    Ok(())
}

/// Clips shipped with the binary (made with the ffmpeg CLI's test sources).
#[cfg(feature = "video")]
const CLIPS: [(&str, &str, &[u8]); 3] = [
    (
        "patterns",
        "bars.mp4",
        include_bytes!("../../../assets/demo/bars.mp4"),
    ),
    (
        "patterns",
        "cellauto.webm",
        include_bytes!("../../../assets/demo/cellauto.webm"),
    ),
    (
        "fractals",
        "mandelbrot.mp4",
        include_bytes!("../../../assets/demo/mandelbrot.mp4"),
    ),
];

/// Builds the shipped clips into a frames cache (as `shardset build
/// videofolder --storage frames` does), prints its inspect table and reads a
/// window of frames back.
#[cfg(feature = "video")]
fn video_demo(root: &std::path::Path, rebuild: bool, threads: usize) -> Result<(), String> {
    use shardset::sources::VideoFolder;
    use shardset::{open_cache_with, LanceVideoFrames, OpenOptions, VideoStorage, WindowSpec};
    let videos = root.join("demo-videos");
    for (class, name, bytes) in CLIPS {
        let d = videos.join(class);
        std::fs::create_dir_all(&d).map_err(|e| format!("create {}: {e}", d.display()))?;
        let p = d.join(name);
        if std::fs::read(&p).ok().as_deref() != Some(bytes) {
            std::fs::write(&p, bytes).map_err(|e| format!("write {}: {e}", p.display()))?;
        }
    }
    let folder = VideoFolder::open(&videos, VideoStorage::Frames).map_err(|e| e.to_string())?;
    let dir = root.join("processed").join(shardset::cache_fingerprint(
        folder.name(),
        folder.version(),
        "videofolder-frames",
        "train",
        "lance-video-frames",
    ));
    println!();
    let t = Instant::now();
    if rebuild || shardset::open_cache(&dir).is_err() {
        let items = folder
            .examples("train")
            .into_iter()
            .map(|(k, e)| Ok::<_, std::convert::Infallible>((serde_json::Value::from(k), e)));
        let opts = shardset::VideoFramesOptions::default().with_threads(threads);
        let w = shardset::try_write_video_frames_cache(items, &folder.features(), &dir, &opts)
            .map_err(|e| e.to_string())?;
        let secs = t.elapsed().as_secs_f64();
        println!(
            "shardset demo: {} clips decoded with FFmpeg, {} frames stored as WebP (quality 65) in {:.2} s ({:.0} frames/s)",
            w.metadata.n_videos,
            w.metadata.num_rows,
            secs,
            w.metadata.num_rows as f64 / secs
        );
    } else {
        println!("shardset demo: the clips' frames cache is up to date");
    }
    crate::inspect::inspect(crate::inspect::InspectArgs {
        path: dir.clone(),
        json: false,
        verify: false,
    })
    .map_err(|e| format!("{e:?}"))?;
    let spec = WindowSpec::try_new(8, 1, 4).map_err(|e| e.to_string())?;
    let c = open_cache_with(&dir, &OpenOptions::default().with_windows(spec))
        .map_err(|e| e.to_string())?;
    let be = c
        .backend
        .as_any()
        .downcast_ref::<LanceVideoFrames>()
        .ok_or("not a frames cache")?;
    let i = be.sample(1, 7, true)[0];
    let t = Instant::now();
    let w = be.window(i).map_err(|e| e.to_string())?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let mean = w.frames.data.iter().map(|&p| p as f64).sum::<f64>() / w.frames.data.len() as f64;
    println!(
        "  window {i} of {} (8 frames, every other frame, hop 4): video {} ({}), frames {:?}, RGB {:?}, mean pixel {mean:.1}, read + decoded in {ms:.1} ms",
        c.len(),
        w.video_idx,
        w.filename.as_deref().and_then(|f| std::path::Path::new(f).file_name()).map_or("?".into(), |f| f.to_string_lossy()),
        w.frame_indices,
        w.frames.shape,
    );
    Ok(())
}
