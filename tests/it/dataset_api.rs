//! The Dataset API: access, views that compose without copying, formats.

use shardset::{
    open_cache, write_arrow_cache, ArrowWriteOptions, Dataset, Dtype, Example, Feature, Features,
    Format, ImageData, TestSize, Value,
};

use crate::common::*;

/// `n` rows {x: int32, label: ClassLabel(a, b)} in several shards.
fn ds(n: usize) -> (tempfile::TempDir, Dataset) {
    let (tmp, dir) = f2_cache(n, 7, 150);
    (tmp, Dataset::new(open_cache(&dir).unwrap()))
}

fn xs(d: &Dataset) -> Vec<i64> {
    d.iter()
        .map(|r| r.unwrap().get("x").unwrap().as_i64().unwrap())
        .collect()
}

#[test]
fn access_basics() {
    let (_t, d) = ds(50);
    assert!(d.backend().num_shards() > 3);
    assert_eq!(d.len(), 50);
    assert_eq!(d.column_names(), vec!["x", "label"]);
    assert_eq!(d.get(0).unwrap().get("x").unwrap().as_i64(), Some(0));
    assert_eq!(d.get(-1).unwrap().get("x").unwrap().as_i64(), Some(49));
    assert!(d.get(50).is_err() && d.get(-51).is_err());
    let rows = d.take(&[7, 2, 7, 0, -1]).unwrap();
    let got: Vec<i64> = rows
        .iter()
        .map(|r| r.get("x").unwrap().as_i64().unwrap())
        .collect();
    assert_eq!(got, vec![7, 2, 7, 0, 49]);
    assert!(d.take(&[]).unwrap().is_empty());
    assert_eq!(xs(&d), (0..50).collect::<Vec<_>>());
    let arrow_rows: usize = d
        .iter_arrow(16)
        .unwrap()
        .map(|b| b.unwrap().num_rows())
        .sum();
    assert_eq!(arrow_rows, 50);
}

#[test]
fn views_compose_without_copying_data() {
    let (_t, d) = ds(30);
    let v = d.select(&[3, 1, 4, 1, 5]).unwrap().select(&[0, 2]).unwrap();
    assert_eq!(xs(&v), vec![3, 4]);
    let s = d.slice(10, 10).unwrap();
    assert_eq!(xs(&s), (10..20).collect::<Vec<_>>());
    assert_eq!(xs(&s.slice(2, 3).unwrap()), vec![12, 13, 14]);
    assert_eq!(xs(&s.select(&[-1, 0]).unwrap()), vec![19, 10]);
    let arrow: Vec<i64> = s
        .iter_arrow(4)
        .unwrap()
        .flat_map(|b| {
            let b = b.unwrap();
            use arrow_array::cast::AsArray;
            b.column(0)
                .as_primitive::<arrow_array::types::Int32Type>()
                .values()
                .iter()
                .map(|&v| v as i64)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(arrow, (10..20).collect::<Vec<_>>());
    assert!(d.select(&[30]).is_err());
    assert!(d.slice(31, 1).is_err());
    assert_eq!(d.slice(25, 100).unwrap().len(), 5);
    // Every view shares the same backend (no copy of the data).
    assert!(std::sync::Arc::ptr_eq(v.backend(), d.backend()));
}

#[test]
fn shuffle_is_a_seeded_permutation() {
    let (_t, d) = ds(200);
    let a = xs(&d.shuffle(1));
    assert_eq!(a, xs(&d.shuffle(1)));
    assert_ne!(a, xs(&d.shuffle(2)));
    let mut s = a.clone();
    s.sort();
    assert_eq!(s, (0..200).collect::<Vec<_>>());
    // Shuffle of a view shuffles the view.
    let v = d.slice(50, 10).unwrap().shuffle(3);
    let mut vs = xs(&v);
    vs.sort();
    assert_eq!(vs, (50..60).collect::<Vec<_>>());
}

#[test]
fn filter_keeps_matching_rows_in_order() {
    let (_t, d) = ds(3000);
    let evens = d
        .filter(|r| r.get("x").unwrap().as_i64().unwrap() % 2 == 0)
        .unwrap();
    assert_eq!(xs(&evens), (0..3000).step_by(2).collect::<Vec<_>>());
    let none = d.filter(|_| false).unwrap();
    assert!(none.is_empty());
    // A filter of a shuffled view keeps the shuffled order.
    let sh = d.shuffle(9);
    let f = sh
        .filter(|r| r.get("x").unwrap().as_i64().unwrap() < 10)
        .unwrap();
    let want: Vec<i64> = xs(&sh).into_iter().filter(|&x| x < 10).collect();
    assert_eq!(xs(&f), want);
}

#[test]
fn train_test_split_is_disjoint_complete_and_stratifiable() {
    let (_t, d) = ds(1000);
    let (tr, te) = d
        .train_test_split(TestSize::Fraction(0.3), 42, None)
        .unwrap();
    assert_eq!((tr.len(), te.len()), (700, 300));
    let mut all: Vec<i64> = xs(&tr).into_iter().chain(xs(&te)).collect();
    all.sort();
    assert_eq!(all, (0..1000).collect::<Vec<_>>());
    let (tr2, _) = d
        .train_test_split(TestSize::Fraction(0.3), 42, None)
        .unwrap();
    assert_eq!(xs(&tr), xs(&tr2), "deterministic per seed");
    // Stratified on an unbalanced label: label = 1 for x < 100, else 0.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    write_arrow_cache(
        (0..1000).map(|i| Example::new().with("x", i).with("label", (i < 100) as i64)),
        &features_f2(),
        &dir,
        &ArrowWriteOptions::default()
            .try_with_batch_size(50)
            .unwrap()
            .try_with_shard_size_bytes(Some(500))
            .unwrap(),
    )
    .unwrap();
    let s = Dataset::new(open_cache(&dir).unwrap());
    let (tr, te) = s
        .train_test_split(TestSize::Count(200), 7, Some("label"))
        .unwrap();
    let ones = |d: &Dataset| {
        d.iter()
            .filter(|r| r.as_ref().unwrap().get("label").unwrap().as_i64() == Some(1))
            .count()
    };
    assert_eq!(te.len(), 200);
    assert_eq!(ones(&te), 20, "10% of the test part is class 1");
    assert_eq!(ones(&tr), 80);
    // Errors.
    assert!(d
        .train_test_split(TestSize::Fraction(0.0), 0, None)
        .is_err());
    assert!(d
        .train_test_split(TestSize::Fraction(1.0), 0, None)
        .is_err());
    assert!(d.train_test_split(TestSize::Count(1000), 0, None).is_err());
    assert!(d
        .train_test_split(TestSize::Count(10), 0, Some("x"))
        .is_err());
    assert!(d
        .train_test_split(TestSize::Count(10), 0, Some("nope"))
        .is_err());
}

#[test]
fn column_selection_and_formats() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("img");
    let features = Features::new()
        .with("image", Feature::image())
        .with("label", Feature::class_label(["cat", "dog"]).unwrap())
        .with("arr", Feature::array(vec![2, 2], Dtype::UInt8).unwrap());
    let img = ImageData::new(4, 4, 3, (0..48).collect()).unwrap();
    write_arrow_cache(
        (0..10).map(|i| {
            Example::new()
                .with("image", img.clone())
                .with("label", i % 2)
                .with(
                    "arr",
                    shardset::Tensor::from_vec(vec![2, 2], vec![i as u8; 4]).unwrap(),
                )
        }),
        &features,
        &dir,
        &ArrowWriteOptions::default(),
    )
    .unwrap();
    let d = Dataset::new(open_cache(&dir).unwrap());
    let r = d.get(3).unwrap();
    assert_eq!(r.get("image"), Some(&Value::from(img.clone())));
    let Value::Label(l) = r.get("label").unwrap() else {
        panic!()
    };
    assert_eq!(l.name.as_deref(), Some("dog"));
    let raw = d.with_format(Format::Raw);
    let r = raw.get(3).unwrap();
    assert!(matches!(r.get("image"), Some(Value::Bytes(b)) if b.starts_with(b"\x89PNG")));
    assert_eq!(r.get("label"), Some(&Value::Int(1)));
    assert!(matches!(r.get("arr"), Some(Value::Bytes(b)) if b.as_slice() == [3, 3, 3, 3]));
    let rows = raw.take(&[1, 2]).unwrap();
    assert_eq!(rows[0].get("label"), Some(&Value::Int(1)));
    // Columns: only those asked, in that order, in get, take and iter.
    let sel = d.select_columns(&["label", "arr"]).unwrap();
    assert_eq!(sel.column_names(), vec!["label", "arr"]);
    assert_eq!(
        sel.get(0).unwrap().names(),
        &["label".to_string(), "arr".to_string()]
    );
    assert_eq!(sel.take(&[5]).unwrap()[0].values().len(), 2);
    assert!(sel.iter().all(|r| r.unwrap().get("image").is_none()));
    assert!(d.select_columns(&["nope"]).is_err());
    assert!(d.select_columns(&["label", "label"]).is_err());
    // Bytes instead of pixels without going raw.
    let nodec = d.with_image_decoding(false);
    assert!(matches!(
        nodec.get(0).unwrap().get("image"),
        Some(Value::Bytes(_))
    ));
}
