//! The Lance rows layout, and one backend suite run against both layouts.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::RecordBatch;
use serde_json::Value as J;
use shardset::{
    open_cache, open_cache_with, write_lance_cache, Backend, Error, IterOptions, LanceWriteOptions,
    OpenOptions, Value,
};

use crate::common::*;

pub(crate) fn x_col(b: &RecordBatch) -> Vec<i32> {
    b.column(0).as_primitive::<Int32Type>().values().to_vec()
}

type Make = fn(usize) -> (tempfile::TempDir, Arc<dyn Backend>);

pub(crate) fn arrow_backend(n: usize) -> (tempfile::TempDir, Arc<dyn Backend>) {
    let (tmp, dir) = f2_cache(n, 7, 150);
    let b = open_cache(&dir).unwrap().backend;
    (tmp, b)
}

/// A Lance cache of `n` rows of F2, in batches of 7 and files of 13 rows.
pub(crate) fn lance_f2_cache(n: usize) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    write_lance_cache(
        f2_rows(n),
        &features_f2(),
        &dir,
        &LanceWriteOptions::default()
            .try_with_batch_size(7)
            .unwrap()
            .try_with_max_rows_per_file(13)
            .unwrap(),
    )
    .unwrap();
    (tmp, dir)
}

pub(crate) fn lance_backend(n: usize) -> (tempfile::TempDir, Arc<dyn Backend>) {
    let (tmp, dir) = lance_f2_cache(n);
    let b = open_cache(&dir).unwrap().backend;
    (tmp, b)
}

/// The same cases, the same expectations, for every layout.
pub(crate) fn backend_suite(make: Make) {
    let (_t, b) = make(100);
    let layout = b.layout();
    assert_eq!(b.len(), 100, "{layout}");
    assert!(b.num_shards() >= 4, "{layout}: {:?}", b.shard_row_counts());
    assert_eq!(b.shard_row_counts().iter().sum::<u64>(), 100);
    assert_eq!(
        b.get(-1).unwrap().get("x").unwrap().as_i64(),
        Some(99),
        "{layout}"
    );
    assert_eq!(b.get(0).unwrap().get("x").unwrap().as_i64(), Some(0));
    let Value::Label(l) = b.get(3).unwrap().get("label").unwrap().clone() else {
        panic!()
    };
    assert_eq!((l.id, l.name.as_deref()), (1, Some("b")), "{layout}");
    assert!(
        matches!(b.get(100), Err(Error::IndexOutOfRange { .. })),
        "{layout}"
    );
    assert!(b.get(-101).is_err());
    for idx in [
        vec![8i64, 1, 8, 5, 0, 11],
        vec![99, 0, -1, 50, 50, 50],
        vec![3],
        vec![12, 13, 14, 26, 27],
    ] {
        let want: Vec<i32> = idx
            .iter()
            .map(|&i| if i < 0 { 100 + i as i32 } else { i as i32 })
            .collect();
        assert_eq!(x_col(&b.take(&idx).unwrap()), want, "{layout} take {idx:?}");
    }
    assert_eq!(b.take(&[]).unwrap().num_rows(), 0);
    assert!(b.take(&[0, 100]).is_err());
    for (s, n) in [(0u64, 100u64), (5, 30), (12, 2), (99, 5), (100, 3)] {
        let end = (s + n).min(100) as i32;
        assert_eq!(
            x_col(&b.slice(s, n).unwrap()),
            (s as i32..end).collect::<Vec<_>>(),
            "{layout} slice({s},{n})"
        );
    }
    assert!(b.slice(101, 1).is_err());
    let all: Vec<i32> = b
        .iter_batches(&IterOptions::default())
        .unwrap()
        .flat_map(|r| x_col(&r.unwrap()))
        .collect();
    assert_eq!(all, (0..100).collect::<Vec<_>>(), "{layout}");
    let counts = b.shard_row_counts().to_vec();
    let some: Vec<i32> = b
        .iter_batches(&IterOptions::default().with_shards(vec![1, 0]))
        .unwrap()
        .flat_map(|r| x_col(&r.unwrap()))
        .collect();
    let (c0, c1) = (counts[0] as i32, counts[1] as i32);
    assert_eq!(
        some,
        (c0..c0 + c1).chain(0..c0).collect::<Vec<_>>(),
        "{layout}"
    );
    let sh: Vec<i32> = b
        .iter_batches(&IterOptions::default().with_shuffle_seed(4))
        .unwrap()
        .flat_map(|r| x_col(&r.unwrap()))
        .collect();
    assert_ne!(sh, all);
    let mut sorted = sh.clone();
    sorted.sort();
    assert_eq!(sorted, all);
    assert!(b
        .iter_batches(&IterOptions::default().with_shards(vec![999]))
        .is_err());
    // Per-thread copies read the same rows.
    let hs: Vec<_> = (0..3)
        .map(|t| {
            let b = b.reopened();
            std::thread::spawn(move || {
                (0..100)
                    .rev()
                    .step_by(t + 1)
                    .all(|i| b.get(i).unwrap().get("x").unwrap().as_i64() == Some(i))
            })
        })
        .collect();
    assert!(hs.into_iter().all(|h| h.join().unwrap()), "{layout}");
    // Views, samplers and the loader work unchanged on top.
    let ds = shardset::Dataset::from_backend(b.clone());
    let loader = shardset::Loader::new(
        ds.shuffle(1).slice(0, 40).unwrap(),
        shardset::LoaderOptions::default(),
    );
    let n: usize = loader.map(|r| r.unwrap().len()).sum();
    assert_eq!(n, 40, "{layout}");
}

#[test]
fn suite_arrow_shards() {
    backend_suite(arrow_backend);
}

#[test]
fn suite_lance_rows() {
    backend_suite(lance_backend);
}

/// Random takes over several fragments, with repeats, mixing rows of chunks
/// a `get` cached before with rows read directly, return exactly the rows
/// asked for, in order, at every chunk size.
#[test]
fn lance_takes_mixing_cached_and_read_rows_are_exact() {
    let (tmp, _) = lance_backend(100);
    for chunk in [1u64, 4, 64] {
        let b = open_cache_with(
            tmp.path().join("l"),
            &OpenOptions::default()
                .try_with_lance_chunk_rows(chunk)
                .unwrap(),
        )
        .unwrap()
        .backend;
        let mut rng = shardset::SplitMix64::new(chunk);
        for round in 0..60 {
            let k = 1 + rng.below(40);
            let idx: Vec<i64> = (0..k).map(|_| rng.below(100) as i64).collect();
            let want: Vec<i32> = idx.iter().map(|&i| i as i32).collect();
            assert_eq!(
                x_col(&b.take(&idx).unwrap()),
                want,
                "chunk {chunk} take {idx:?}"
            );
            if round % 3 == 0 {
                let r = idx[0];
                assert_eq!(b.get(r).unwrap().get("x").unwrap().as_i64(), Some(r));
            }
        }
    }
}

/// Reading one row at a time (no neighbours) passes the same suite, and a
/// chunk size of 0 is refused.
#[test]
fn suite_lance_rows_with_one_row_chunks() {
    fn one_row(n: usize) -> (tempfile::TempDir, Arc<dyn Backend>) {
        let (tmp, _) = lance_backend(n);
        let opts = shardset::OpenOptions::default()
            .try_with_lance_chunk_rows(1)
            .unwrap();
        let b = open_cache_with(tmp.path().join("l"), &opts)
            .unwrap()
            .backend;
        (tmp, b)
    }
    backend_suite(one_row);
    let e = shardset::OpenOptions::default()
        .try_with_lance_chunk_rows(0)
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
}

#[test]
fn reference_lance_cache_reads_back_exactly() {
    let expected: Vec<J> =
        serde_json::from_slice(&std::fs::read(golden().join("expected_rows.json")).unwrap())
            .unwrap();
    let (_t, dir) = golden_copy("lance_rows");
    let c = open_cache_with(&dir, &OpenOptions::default().with_features(features_f())).unwrap();
    assert_eq!(c.layout, "lance-rows");
    assert_eq!(c.len(), 40);
    for (i, e) in expected.iter().enumerate() {
        let r = c.backend.get(i as i64).unwrap();
        assert_eq!(r.get("x").unwrap().as_i64(), e["x"].as_i64());
        assert_eq!(r.get("f").unwrap().as_f64(), e["f"].as_f64());
        let Value::Image(img) = r.get("img").unwrap() else {
            panic!()
        };
        assert_eq!(
            sha256(&img.data),
            e["img_rgb_pixels_sha256"].as_str().unwrap()
        );
        let Value::Tensor(t) = r.get("arr").unwrap() else {
            panic!()
        };
        let got: Vec<f64> = t
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect();
        let want: Vec<f64> = e["arr"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(got, want);
        let Value::List(seq) = r.get("seq").unwrap() else {
            panic!()
        };
        assert_eq!(seq.len(), e["seq"].as_array().unwrap().len());
        match (&e["name"], r.get("name").unwrap()) {
            (J::Null, Value::Null) => {}
            (J::String(s), Value::Str(t)) => assert_eq!(s, t),
            o => panic!("{o:?}"),
        }
    }
    // The reference never checks the fingerprint for Lance; we do.
    let e =
        open_cache_with(&dir, &OpenOptions::default().with_features(features_f2())).unwrap_err();
    assert!(matches!(e, Error::SchemaMismatch { .. }), "{e:?}");
    // Without features: inferred from the Lance schema.
    let c = open_cache(&dir).unwrap();
    assert_eq!(
        c.backend.get(5).unwrap().get("x").unwrap().as_i64(),
        Some(5)
    );
}

#[test]
fn lance_caches_roundtrip_every_feature_kind_and_describe_themselves() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("f");
    write_lance_cache(
        (0..40).map(f_row),
        &features_f(),
        &dir,
        &LanceWriteOptions::default()
            .try_with_max_rows_per_file(16)
            .unwrap(),
    )
    .unwrap();
    let c = open_cache(&dir).unwrap();
    assert_eq!(
        c.metadata.to_json()["fragment_row_counts"],
        serde_json::json!([16, 16, 8])
    );
    assert_eq!(c.metadata.to_json()["format"], "lance");
    assert_eq!(c.features().as_ref(), &features_f());
    let expected: Vec<J> =
        serde_json::from_slice(&std::fs::read(golden().join("expected_rows.json")).unwrap())
            .unwrap();
    for (i, e) in expected.iter().enumerate() {
        let r = c.backend.get(i as i64).unwrap();
        let Value::Image(img) = r.get("img").unwrap() else {
            panic!()
        };
        assert_eq!(
            sha256(&img.data),
            e["img_rgb_pixels_sha256"].as_str().unwrap()
        );
        let Value::Label(l) = r.get("label").unwrap() else {
            panic!()
        };
        assert_eq!(l.id, e["label"].as_i64().unwrap());
    }
    // Empty dataset.
    let e = tmp.path().join("e");
    write_lance_cache(
        std::iter::empty(),
        &features_f2(),
        &e,
        &LanceWriteOptions::default(),
    )
    .unwrap();
    let c = open_cache(&e).unwrap();
    assert_eq!(c.len(), 0);
    assert!(c.backend.get(0).is_err());
}

#[test]
fn pylance_reads_our_lance_cache_identically() {
    crate::common::require_python_module("lance");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    write_lance_cache(
        (0..40).map(f_row),
        &features_f(),
        &dir,
        &LanceWriteOptions::default()
            .try_with_max_rows_per_file(16)
            .unwrap(),
    )
    .unwrap();
    let script = r#"
import hashlib, json, sys, lance
ds = lance.dataset(sys.argv[1])
t = ds.to_table()
meta = {f.name: {k.decode(): v.decode() for k, v in (f.metadata or {}).items()} for f in t.schema}
rows = t.to_pylist()
for r in rows:
    for k, v in list(r.items()):
        if isinstance(v, bytes):
            r[k] = hashlib.sha256(v).hexdigest()
print(json.dumps({"n": ds.count_rows(), "frags": len(ds.get_fragments()), "meta": meta, "types": {f.name: str(f.type) for f in t.schema}, "rows": rows}))
"#;
    let j: J = crate::common::python_json(script, &[&dir]);
    assert_eq!(j["n"], 40);
    assert_eq!(j["frags"], 3);
    assert_eq!(j["types"]["img"], "large_binary");
    assert_eq!(j["types"]["seq"], "list<item: int64>");
    assert_eq!(j["meta"]["label"]["stable_datasets.feature"], "ClassLabel");
    let c = open_cache_with(&dir, &OpenOptions::default().with_decode_images(false)).unwrap();
    for (i, pr) in j["rows"].as_array().unwrap().iter().enumerate() {
        let r = c.backend.get(i as i64).unwrap();
        assert_eq!(pr["x"], i as i64);
        assert_eq!(pr["label"], (i % 3) as i64);
        assert_eq!(pr["f"].as_f64(), r.get("f").unwrap().as_f64());
        let Value::Bytes(img) = r.get("img").unwrap() else {
            panic!()
        };
        assert_eq!(pr["img"], sha256(img));
        let want: Vec<i64> = (0..(i % 5) as i64).collect();
        assert_eq!(pr["seq"], serde_json::json!(want));
    }
}
