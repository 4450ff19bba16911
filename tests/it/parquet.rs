//! Parquet read as a dataset: files written by pyarrow (several row groups,
//! two files in a directory, nulls, lists, binary, dictionary strings, a
//! Hugging Face image struct and Hugging Face features in the metadata)
//! give pyarrow's own values through `get`, `take` in any order across row
//! groups and files, `slice` and iteration; filters work on them; bad input
//! is a typed error naming the file.

use std::path::Path;

use shardset::{open_parquet_with, Backend, Dataset, Error, OpenOptions, Value};

use crate::common::{python_json, row_json};

/// Writes `dir/part-0.parquet` and `dir/part-1.parquet` (row groups of 37
/// rows) and prints the rows pyarrow reads back, as JSON.
const WRITE: &str = r#"
import io, json, sys
import pyarrow as pa, pyarrow.parquet as pq
from PIL import Image

d = sys.argv[1]
def png(i):
    b = io.BytesIO()
    Image.new("RGB", (3 + i % 4, 2), (i % 256, 0, 0)).save(b, format="PNG")
    return b.getvalue()

hf = {"info": {"features": {
    "id": {"dtype": "int64", "_type": "Value"},
    "score": {"dtype": "float32", "_type": "Value"},
    "name": {"dtype": "string", "_type": "Value"},
    "flag": {"dtype": "bool", "_type": "Value"},
    "tags": {"feature": {"dtype": "int64", "_type": "Value"}, "_type": "Sequence"},
    "blob": {"dtype": "binary", "_type": "Value"},
    "label": {"names": ["cat", "dog", "bird"], "_type": "ClassLabel"},
    "image": {"_type": "Image"},
}}}
rows = []
for part, (lo, hi) in enumerate([(0, 100), (100, 180)]):
    ids = list(range(lo, hi))
    t = pa.table({
        "id": pa.array(ids, pa.int64()),
        "score": pa.array([None if i % 9 == 4 else i * 0.5 for i in ids], pa.float32()),
        "name": pa.array([f"n{i % 5}" for i in ids]).dictionary_encode(),
        "flag": pa.array([i % 3 == 0 for i in ids]),
        "tags": pa.array([list(range(i % 4)) for i in ids], pa.list_(pa.int64())),
        "blob": pa.array([bytes([i % 256, 7]) for i in ids], pa.large_binary()),
        "label": pa.array([i % 3 for i in ids], pa.int64()),
        "image": pa.array([{"bytes": png(i), "path": None} for i in ids],
                          pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
    })
    t = t.replace_schema_metadata({"huggingface": json.dumps(hf)})
    pq.write_table(t, f"{d}/part-{part}.parquet", row_group_size=37)
for part in range(2):
    t = pq.read_table(f"{d}/part-{part}.parquet")
    for r in t.to_pylist():
        r["blob"] = list(r["blob"])
        r["image"] = None
        rows.append(r)
print(json.dumps(rows))
"#;

fn written(dir: &Path) -> Vec<serde_json::Value> {
    python_json(WRITE, &[dir]).as_array().unwrap().clone()
}

#[test]
fn parquet_rows_read_as_pyarrow_reads_them() {
    let t = tempfile::tempdir().unwrap();
    let want = written(t.path());
    let rows = open_parquet_with(t.path(), &OpenOptions::default()).unwrap();
    assert_eq!(rows.len(), 180);
    // Row groups of 37 in files of 100 and 80 rows.
    assert_eq!(rows.shard_row_counts(), &[37, 37, 26, 37, 37, 6]);
    let ds = Dataset::from_backend(std::sync::Arc::new(rows.clone()));
    // Hugging Face's features: class names, a sequence, an image.
    let f = ds.features();
    assert_eq!(f.get("label").unwrap().class_name(), "ClassLabel");
    assert_eq!(f.get("image").unwrap().class_name(), "Image");
    let r = ds.get(101).unwrap();
    match r.get("label") {
        Some(Value::Label(l)) => assert_eq!(l.name.as_deref(), Some("bird")),
        other => panic!("{other:?}"),
    }
    match r.get("image") {
        Some(Value::Image(img)) => assert_eq!((img.width, img.height), (4, 2)),
        other => panic!("{other:?}"),
    }
    for i in 0..180 {
        assert_eq!(row_json(&ds, i), want[i as usize], "row {i}");
    }
    // Random take across row groups and files, in the order asked.
    let idx: Vec<i64> = vec![179, 0, 36, 37, 100, 99, 150, -1, 5, 5];
    let taken = ds.select(&idx).unwrap();
    for (k, &i) in idx.iter().enumerate() {
        let i = if i < 0 { 180 + i } else { i };
        assert_eq!(row_json(&taken, k as i64), want[i as usize], "take {k}");
    }
    // Slices across row groups, and whole iteration.
    let s = rows.slice(30, 50).unwrap();
    assert_eq!(s.num_rows(), 50);
    let n: usize = rows
        .iter_batches(&Default::default())
        .unwrap()
        .map(|b| b.unwrap().num_rows())
        .sum();
    assert_eq!(n, 180);
    // Filters work as on a cache.
    let kept = ds.filter_expr("label = 1 AND score > 20").unwrap();
    let expect: Vec<u64> = (0..180u64)
        .filter(|i| i % 3 == 1 && i % 9 != 4 && *i as f64 * 0.5 > 20.0)
        .collect();
    let got: Vec<u64> = (0..kept.len() as i64)
        .map(|i| kept.physical_index(i).unwrap())
        .collect();
    assert_eq!(got, expect);
}

#[test]
fn bad_parquet_input_is_a_typed_error_naming_the_file() {
    let t = tempfile::tempdir().unwrap();
    let not = t.path().join("not.parquet");
    std::fs::write(&not, b"PAR1 but not parquet at all").unwrap();
    match open_parquet_with(&not, &OpenOptions::default()) {
        Err(Error::CorruptShard { path, .. }) => assert_eq!(path, not),
        other => panic!("{other:?}"),
    }
    let empty = t.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    match open_parquet_with(&empty, &OpenOptions::default()) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("no .parquet"), "{m}"),
        other => panic!("{other:?}"),
    }
    // Two files of different columns in one directory.
    let mixed = t.path().join("mixed");
    std::fs::create_dir(&mixed).unwrap();
    python_json(
        r#"
import sys, pyarrow as pa, pyarrow.parquet as pq
pq.write_table(pa.table({"a": [1, 2]}), sys.argv[1] + "/a.parquet")
pq.write_table(pa.table({"b": ["x"]}), sys.argv[1] + "/b.parquet")
print("{}")
"#,
        &[&mixed],
    );
    match open_parquet_with(&mixed, &OpenOptions::default()) {
        Err(Error::CorruptShard { path, reason }) => {
            assert!(
                path.ends_with("b.parquet") && reason.contains("differ"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    // Features naming a column the files do not have.
    let f = shardset::Features::new().with("zzz", shardset::Feature::value(shardset::Dtype::Int64));
    match open_parquet_with(
        &mixed.join("a.parquet"),
        &OpenOptions::default().with_features(f),
    ) {
        Err(Error::InvalidFeature(m)) => assert!(m.contains("zzz"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_cli_converts_parquet_into_each_layout_with_the_same_values() {
    use crate::common::{shardset_cli, succeeded};
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let want = written(&src);
    for layout in ["arrow", "lance"] {
        let out = t.path().join(layout);
        succeeded(
            shardset_cli()
                .args(["build", "parquet"])
                .arg(&src)
                .args(["--format", layout, "--out"])
                .arg(&out),
        );
        let ds = Dataset::new(shardset::open_cache(out.join("train")).unwrap());
        assert_eq!(ds.len(), 180, "{layout}");
        assert_eq!(
            ds.features().get("label").unwrap().class_name(),
            "ClassLabel"
        );
        for i in [0i64, 36, 37, 99, 100, 179] {
            assert_eq!(row_json(&ds, i), want[i as usize], "{layout} row {i}");
        }
        match ds.get(101).unwrap().get("image") {
            Some(Value::Image(img)) => assert_eq!((img.width, img.height), (4, 2)),
            other => panic!("{layout}: {other:?}"),
        }
    }
}

#[test]
fn a_cache_exported_to_parquet_reads_back_with_its_features_in_pyarrow_and_in_shardset() {
    use crate::common::{shardset_cli, succeeded};
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let want = written(&src);
    let cache = t.path().join("cache");
    succeeded(
        shardset_cli()
            .args(["build", "parquet"])
            .arg(&src)
            .args(["--format", "lance", "--out"])
            .arg(&cache),
    );
    let file = t.path().join("out.parquet");
    succeeded(
        shardset_cli()
            .arg("export")
            .arg(cache.join("train"))
            .args(["--format", "parquet", "--out"])
            .arg(&file),
    );
    let back = open_parquet_with(&file, &OpenOptions::default()).unwrap();
    let ds = Dataset::from_backend(std::sync::Arc::new(back));
    assert_eq!(ds.len(), 180);
    for i in [0i64, 50, 101, 179] {
        assert_eq!(row_json(&ds, i), want[i as usize], "row {i}");
    }
    match ds.get(101).unwrap().get("label") {
        Some(Value::Label(l)) => assert_eq!(l.name.as_deref(), Some("bird")),
        other => panic!("{other:?}"),
    }
    // pyarrow reads it, with Hugging Face's features and image structs.
    let seen = python_json(
        r#"
import json, sys, pyarrow.parquet as pq
t = pq.read_table(sys.argv[1])
hf = json.loads(t.schema.metadata[b"huggingface"])["info"]["features"]
print(json.dumps({"ids": t.column("id").to_pylist()[:3], "label": hf["label"],
                  "image": hf["image"], "png": t.column("image")[101].as_py()["bytes"][:4].hex()}))
"#,
        &[&file],
    );
    assert_eq!(seen["ids"], serde_json::json!([0, 1, 2]));
    assert_eq!(
        seen["label"]["names"],
        serde_json::json!(["cat", "dog", "bird"])
    );
    assert_eq!(seen["image"]["_type"], "Image");
    assert_eq!(seen["png"], "89504e47", "the image's PNG bytes");
}
