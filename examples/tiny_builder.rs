//! A complete small dataset builder: a "shapes" dataset of 16x16 grayscale
//! images (filled squares or rings) with a class label and a size, two
//! splits, and one work unit per "source file".
//!
//! Run it with `cargo run --release --example tiny_builder [CACHE_ROOT]`:
//! the first run builds the cache, later runs open it warm.

use std::time::Instant;

use shardset::error::BoxError;
use shardset::{
    load_with_report, BuilderConfig, DatasetBuilder, DatasetInfo, Dtype, Example, ExampleStream,
    Feature, Features, ImageData, LoadOptions, Loader, LoaderOptions, Order, Partition, TestSize,
    Value, WithinShard, WorkUnit,
};

/// The builder: configs choose the image size.
struct Shapes;

const PER_FILE: u64 = 2_000;

impl DatasetBuilder for Shapes {
    fn name(&self) -> &str {
        "Shapes"
    }

    fn version(&self) -> &str {
        "1.0.0"
    }

    fn configs(&self) -> Vec<BuilderConfig> {
        vec![
            BuilderConfig::new("px16", "16x16 images"),
            BuilderConfig::new("px32", "32x32 images"),
        ]
    }

    fn info(&self, _config: &str) -> Result<DatasetInfo, BoxError> {
        Ok(DatasetInfo {
            features: Features::new()
                .with("image", Feature::image())
                .with("shape", Feature::class_label(["square", "ring"])?)
                .with("size", Feature::value(Dtype::UInt8)),
            description: "Filled squares and rings of random sizes.".into(),
            citation: "none".into(),
            homepage: "https://example.invalid/shapes".into(),
            license: "CC0-1.0".into(),
        })
    }

    fn splits(&self, _config: &str) -> Result<Vec<String>, BoxError> {
        Ok(vec!["train".into(), "test".into()])
    }

    /// Real datasets list their source files here; each becomes a unit
    /// generated in parallel, and the cache keeps file order.
    fn work_units(&self, _config: &str, split: &str) -> Result<Vec<WorkUnit>, BoxError> {
        let files = if split == "train" { 4 } else { 1 };
        Ok((0..files)
            .map(|i| WorkUnit::new(format!("{split}-{i:02}.bin")))
            .collect())
    }

    fn generate<'a>(
        &'a self,
        config: &'a str,
        _split: &'a str,
        unit: &'a WorkUnit,
    ) -> Result<ExampleStream<'a>, BoxError> {
        let side: u32 = config.trim_start_matches("px").parse()?;
        // A deterministic stream per "file": same cache on every machine.
        let seed = u64::from_str_radix(&shardset::sha256_hex(unit.id.as_bytes())[..16], 16)?;
        let mut state = shardset::SplitMix64::new(seed);
        Ok(Box::new((0..PER_FILE).map(move |k| {
            let ring = state.below(2) == 1;
            let size = 4 + state.below((side / 2) as u64) as u32;
            let (cx, cy) = (side / 2, side / 2);
            let mut px = vec![0u8; (side * side) as usize];
            for y in 0..side {
                for x in 0..side {
                    let d = (x as i32 - cx as i32)
                        .unsigned_abs()
                        .max((y as i32 - cy as i32).unsigned_abs());
                    let inside = d <= size / 2;
                    let on = if ring {
                        inside && d + 2 > size / 2
                    } else {
                        inside
                    };
                    px[(y * side + x) as usize] = if on { 230 } else { 20 };
                }
            }
            let img = ImageData::new(side, side, 1, px)?;
            Ok((
                format!("{}#{k}", unit.id),
                Example::new()
                    .with("image", img)
                    .with("shape", if ring { "ring" } else { "square" })
                    .with("size", size as u8),
            ))
        })))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut opts = LoadOptions::default().with_config("px16");
    if let Some(root) = std::env::args().nth(1) {
        opts = opts.with_cache_root(root);
    }
    let t = Instant::now();
    let (train, report) = load_with_report(&Shapes, "train", &opts)?;
    println!(
        "{} {} rows of Shapes/{} in {:.1} ms: {}",
        if report.built { "built" } else { "opened warm" },
        train.len(),
        report.config,
        t.elapsed().as_secs_f64() * 1e3,
        report.dir.display()
    );
    let row = train.get(0)?;
    if let (Some(Value::Image(img)), Some(Value::Label(shape))) =
        (row.get("image"), row.get("shape"))
    {
        println!(
            "row 0: a {} of size {:?}, image {:?}",
            shape.name.as_deref().unwrap_or("?"),
            row.get("size"),
            img.shape()
        );
    }
    let (fit, val) = train.train_test_split(TestSize::Fraction(0.2), 0, Some("shape"))?;
    println!(
        "split: {} to fit, {} to validate (stratified by shape)",
        fit.len(),
        val.len()
    );
    let rings = fit.filter(|r| matches!(r.get("shape"), Some(Value::Label(l)) if l.id == 1))?;
    println!("rings in the fitting part: {}", rings.len());
    // Two data-parallel ranks, two workers each: rank 0 / worker 1's share.
    let part = Partition::new(0, 2, 1, 2, shardset::Remainder::DropLast)?;
    let mut loader = Loader::new(
        fit,
        LoaderOptions::default()
            .with_order(Order::ShardShuffle(WithinShard::Random))
            .with_seed(7)
            .with_partition(part)
            .try_with_batch_size(64)?,
    );
    let first = loader.next_batch().transpose()?.map_or(0, |b| b.len());
    let saved = serde_json::to_string(&loader.state())?;
    println!("first batch: {first} rows; loader state to checkpoint: {saved}");
    let rest: usize = loader
        .map(|b| b.map(|b| b.len()))
        .sum::<Result<usize, _>>()?;
    println!("rest of this consumer's epoch: {rest} rows");
    Ok(())
}
