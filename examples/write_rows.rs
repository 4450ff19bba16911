//! Writes a small cache of every common feature kind with the Rust library:
//! the rows the Python package's byte-identity test writes from Python
//! (`python/tests/test_read_write.py`), so the two caches can be compared.
//!
//! `cargo run --example write_rows -- DIR BUILD_ID ROWS`

use shardset::{
    write_arrow_cache, ArrowWriteOptions, Dtype, Example, Feature, Features, ImageData, Tensor,
    Value,
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, build_id, rows] = args.as_slice() else {
        eprintln!("usage: write_rows DIR BUILD_ID ROWS");
        std::process::exit(2);
    };
    let n: u32 = rows.parse().expect("ROWS is a number");
    let features = Features::new()
        .with("x", Feature::value(Dtype::Int32))
        .with("name", Feature::value(Dtype::String))
        .with(
            "label",
            Feature::class_label(["a", "b", "c"]).expect("names"),
        )
        .with("img", Feature::image())
        .with(
            "arr",
            Feature::array(vec![2, 3, 4], Dtype::Float32).expect("shape"),
        );
    let examples = (0..n).map(|i| {
        let pixels: Vec<u8> = (0..4 * 5 * 3).map(|k| ((i * 7 + k) % 256) as u8).collect();
        let arr: Vec<f32> = (0..24).map(|k| k as f32 + i as f32).collect();
        Example::new()
            .with("x", Value::Int(i as i64))
            .with(
                "name",
                if i % 4 == 0 {
                    Value::Null
                } else {
                    Value::Str(format!("row {i}"))
                },
            )
            .with("label", Value::Int((i % 3) as i64))
            .with(
                "img",
                Value::Image(Box::new(ImageData::new(4, 5, 3, pixels).expect("pixels"))),
            )
            .with(
                "arr",
                Value::Tensor(Box::new(Tensor::from_vec(vec![2, 3, 4], arr).expect("arr"))),
            )
    });
    let opts = ArrowWriteOptions::default()
        .with_build_id(build_id.as_str())
        .try_with_batch_size(7)
        .expect("batch size")
        .try_with_shard_size_bytes(Some(4096))
        .expect("shard size");
    write_arrow_cache(examples, &features, dir.as_ref(), &opts).expect("write");
}
