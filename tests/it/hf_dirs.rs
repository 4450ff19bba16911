//! Hugging Face `save_to_disk` directories, written by `datasets` itself:
//! read through [`HfArrow`] with `load_from_disk`'s values, converted by
//! `shardset build hf` into each layout with every split, and, damaged or
//! crafted, read without a panic (a typed error naming the file, or rows).

use std::path::Path;

use shardset::{open_hf_with, Dataset, Error, OpenOptions, Value};

use crate::common::{python_json, row_json, shardset_cli, succeeded};

/// Writes a DatasetDict (train: 90 rows in several files, test: 9) at
/// argv[1] and prints `load_from_disk`'s rows of each split as JSON
/// (images and arrays as null: the Python tests compare their pixels).
const WRITE: &str = r#"
import json, sys
import datasets, numpy as np
from PIL import Image

out = sys.argv[1]
f = datasets.Features({
    "id": datasets.Value("int64"), "score": datasets.Value("float32"),
    "name": datasets.Value("string"), "flag": datasets.Value("bool"),
    "tags": datasets.Sequence(datasets.Value("int64")),
    "blob": datasets.Value("binary"),
    "label": datasets.ClassLabel(names=["cat", "dog", "bird"]),
    "image": datasets.Image(),
    "grid": datasets.Array2D(shape=(2, 2), dtype="int32"),
})
def rows(lo, hi):
    ids = list(range(lo, hi))
    return {"id": ids, "score": [None if i % 9 == 4 else i * 0.5 for i in ids],
            "name": [None if i % 7 == 0 else f"n{i % 5}" for i in ids],
            "flag": [i % 3 == 0 for i in ids], "tags": [list(range(i % 4)) for i in ids],
            "blob": [bytes([i % 256, 7]) for i in ids], "label": [i % 3 for i in ids],
            "image": [Image.new("RGB", (3 + i % 4, 2), (i % 256, 0, 0)) for i in ids],
            "grid": [np.full((2, 2), i, dtype=np.int32) for i in ids]}
d = datasets.DatasetDict({"train": datasets.Dataset.from_dict(rows(0, 90), features=f),
                          "test": datasets.Dataset.from_dict(rows(90, 99), features=f)})
d.save_to_disk(out, max_shard_size="3KB")
back = datasets.load_from_disk(out)
res = {}
for split in ("train", "test"):
    res[split] = [dict(r, blob=list(r["blob"]), image=None, grid=None) for r in back[split]]
print(json.dumps(res))
"#;

fn written(dir: &Path) -> serde_json::Value {
    python_json(WRITE, &[dir])
}

fn opened(dir: &Path, split: Option<&str>) -> Dataset {
    Dataset::from_backend(std::sync::Arc::new(
        open_hf_with(dir, split, &OpenOptions::default()).unwrap(),
    ))
}

fn check_split(ds: &Dataset, want: &[serde_json::Value], what: &str) {
    assert_eq!(ds.len(), want.len() as u64, "{what}");
    for (i, w) in want.iter().enumerate() {
        assert_eq!(&row_json(ds, i as i64), w, "{what}: row {i}");
    }
    let id = want[5]["id"].as_i64().unwrap();
    let r = ds.get(5).unwrap();
    match (r.get("image"), r.get("grid")) {
        (Some(Value::Image(img)), Some(Value::Tensor(t))) => {
            assert_eq!((img.width, img.height), (3 + (id % 4) as u32, 2), "{what}");
            assert_eq!(t.shape, vec![2, 2]);
            assert_eq!(t.data[..4], (id as i32).to_le_bytes(), "{what}");
        }
        other => panic!("{what}: {other:?}"),
    }
}

#[test]
fn hf_directories_read_as_load_from_disk_reads_them() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("hf");
    let want = written(&dir);
    let train = opened(&dir, None);
    let rows = train.backend();
    assert_eq!(rows.layout(), "hf-datasets");
    assert!(
        rows.num_shards() > 2,
        "one shard per record batch, in several files"
    );
    let w = want["train"].as_array().unwrap();
    check_split(&train, w, "train");
    check_split(
        &opened(&dir, Some("test")),
        want["test"].as_array().unwrap(),
        "test",
    );
    // Random take across batches and files, in the order asked.
    let idx: Vec<i64> = vec![89, 0, 44, 45, 13, -1, 5, 5];
    let taken = train.select(&idx).unwrap();
    for (k, &i) in idx.iter().enumerate() {
        let i = if i < 0 { 90 + i } else { i };
        assert_eq!(row_json(&taken, k as i64), w[i as usize], "take {k}");
    }
    assert_eq!(rows.slice(10, 60).unwrap().num_rows(), 60);
    match opened(&dir, None).get(101) {
        Err(Error::IndexOutOfRange { .. }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_cli_converts_every_split_into_each_layout() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("hf");
    let want = written(&dir);
    for layout in ["arrow", "lance"] {
        let out = t.path().join(layout);
        succeeded(
            shardset_cli()
                .args(["build", "hf"])
                .arg(&dir)
                .args(["--format", layout, "--quiet", "--out"])
                .arg(&out),
        );
        for split in ["train", "test"] {
            let ds = Dataset::new(shardset::open_cache(out.join(split)).unwrap());
            let w = want[split].as_array().unwrap();
            check_split(&ds, w, &format!("{layout} {split}"));
            assert_eq!(
                ds.features().get("grid").unwrap().class_name(),
                "Array2D",
                "{layout}"
            );
        }
    }
}

/// Seeded single-bit changes and truncations of a data file: opening and
/// reading every row gives rows or a typed error, never a panic (not even
/// one the reader catches).
#[test]
fn damaged_data_files_never_panic() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("hf");
    python_json(
        r#"
import sys, datasets
datasets.Dataset.from_dict({"x": list(range(40)), "s": [f"s{i}" for i in range(40)],
                            "l": [[i] * (i % 3) for i in range(40)]}).save_to_disk(sys.argv[1])
print("{}")
"#,
        &[&dir],
    );
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "arrow"))
        .unwrap();
    let good = std::fs::read(&file).unwrap();
    let mut outcomes = [0usize; 2];
    crate::common::note_panics();
    let mut state = 7u64;
    let mut below = |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n
    };
    for k in 0..600 {
        let mut bad = good.clone();
        if k % 5 == 0 {
            bad.truncate(below(good.len() as u64) as usize);
        } else {
            let at = below(good.len() as u64) as usize;
            bad[at] ^= 1 << below(8);
        }
        std::fs::write(&file, &bad).unwrap();
        crate::common::PANICKED.with(|p| p.set(false));
        let res = std::panic::catch_unwind(|| {
            let rows = open_hf_with(&dir, None, &OpenOptions::default())?;
            let ds = Dataset::from_backend(std::sync::Arc::new(rows));
            for i in 0..ds.len() as i64 {
                ds.get(i)?;
            }
            Ok::<_, Error>(())
        });
        match res {
            Ok(Ok(())) => outcomes[0] += 1,
            Ok(Err(e)) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("data-") || msg.contains("hf"),
                    "an error that names no file: {msg}"
                );
                outcomes[1] += 1;
            }
            Err(_) => panic!("a panic on damage {k}"),
        }
        // Also one the reader caught: a fuzzer aborts on it.
        assert!(
            !crate::common::PANICKED.with(|p| p.get()),
            "a caught panic on damage {k}"
        );
    }
    assert!(outcomes[1] > 100, "{outcomes:?}");
}
