//! Compatibility with caches written by the Python reference.

use serde_json::Value as J;
use shardset::features::repr::features_repr;
use shardset::{
    cache_fingerprint, open_cache, open_cache_with, write_arrow_cache, ArrowWriteOptions, Dtype,
    Example, Feature, Features, FeaturesSource, OpenOptions, Row, Value, VideoStorage,
};

use crate::common::*;

fn expected_rows() -> Vec<J> {
    serde_json::from_slice(&std::fs::read(golden().join("expected_rows.json")).unwrap()).unwrap()
}

fn fingerprints() -> J {
    serde_json::from_slice(&std::fs::read(golden().join("fingerprints.json")).unwrap()).unwrap()
}

#[test]
fn every_fingerprint_vector_matches() {
    let fp = fingerprints();
    let sets: Vec<(&str, Features)> = vec![
        ("F", features_f()),
        ("E", Features::new().with("x", Feature::value(Dtype::Int32))),
        ("VP", video_features(VideoStorage::Path)),
        ("VB", video_features(VideoStorage::Bytes)),
        (
            "VF",
            video_features(VideoStorage::Frames).with("caption", Feature::value(Dtype::String)),
        ),
    ];
    for (key, f) in sets {
        assert_eq!(
            features_repr(&f),
            fp[key]["fingerprint_data"].as_str().unwrap(),
            "repr of {key}"
        );
        assert_eq!(
            f.fingerprint(),
            fp[key]["schema_fingerprint"].as_str().unwrap(),
            "{key}"
        );
    }
    // The spec's other vectors.
    let f = Features::new()
        .with("x", Feature::value(Dtype::Int32))
        .with("label", Feature::class_label(["a", "b"]).unwrap());
    assert_eq!(f.fingerprint(), "62ee82c9da28e1aa");
    let f = Features::new()
        .with("image", Feature::image())
        .with("label", Feature::class_label_n(10).unwrap());
    assert_eq!(f.fingerprint(), "23d655696e03cfe2");
    let f = Features::new()
        .with(
            "series",
            Feature::sequence(Feature::sequence(Feature::value(Dtype::Float32))),
        )
        .with("label", Feature::class_label_n(6).unwrap());
    assert_eq!(f.fingerprint(), "cf210ef6685c861c");
    let f = Features::new()
        .with("b", Feature::value(Dtype::Int32))
        .with("a", Feature::value(Dtype::Int32));
    assert_eq!(
        features_repr(&f),
        "{'b': Value('int32'), 'a': Value('int32')}"
    );
}

#[test]
fn cache_directory_names_match() {
    let fp = fingerprints();
    for (key, want) in fp["cache_fingerprint_examples"].as_object().unwrap() {
        let p: Vec<&str> = key.split(':').collect();
        assert_eq!(
            &cache_fingerprint(p[0], p[1], p[2], p[3], p[4]),
            want.as_str().unwrap()
        );
    }
}

#[test]
fn arrow_schema_matches_the_reference_shards() {
    let cache = open_cache_with(
        golden().join("arrow_multi_shard"),
        &OpenOptions::default().with_features(features_f()),
    )
    .unwrap();
    let shards = cache
        .backend
        .as_any()
        .downcast_ref::<shardset::ArrowShards>()
        .expect("arrow backend");
    let file_schema = shards.shard_file_schema(0).unwrap();
    let ours = features_f().arrow_schema();
    assert_eq!(file_schema.fields().len(), ours.fields().len());
    for (a, b) in file_schema.fields().iter().zip(ours.fields()) {
        assert_eq!(a.name(), b.name());
        assert_eq!(a.data_type(), b.data_type(), "{}", a.name());
        assert_eq!(a.metadata(), b.metadata(), "{}", a.name());
    }
}

fn check_f_row(row: &Row, e: &J) {
    let i = e["x"].as_i64().unwrap();
    assert_eq!(row.get("x").unwrap().as_i64(), Some(i));
    assert_eq!(row.get("f").unwrap().as_f64(), e["f"].as_f64());
    match (&e["name"], row.get("name").unwrap()) {
        (J::Null, Value::Null) => {}
        (J::String(s), Value::Str(t)) => assert_eq!(s, t),
        other => panic!("row {i} name: {other:?}"),
    }
    assert_eq!(
        row.get("flag"),
        Some(&Value::Bool(e["flag"].as_bool().unwrap()))
    );
    let Value::Label(l) = row.get("label").unwrap() else {
        panic!("label")
    };
    assert_eq!(l.id, e["label"].as_i64().unwrap());
    let Value::Image(img) = row.get("img").unwrap() else {
        panic!("img")
    };
    let shape: Vec<usize> = e["img_shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(img.shape(), shape);
    assert_eq!(
        sha256(&img.data),
        e["img_rgb_pixels_sha256"].as_str().unwrap(),
        "row {i} pixels"
    );
    let Value::Tensor(t) = row.get("arr").unwrap() else {
        panic!("arr")
    };
    let shape: Vec<usize> = e["arr_shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(t.shape, shape);
    let vals: Vec<f64> = t
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
    assert_eq!(vals, want);
    let Value::List(seq) = row.get("seq").unwrap() else {
        panic!("seq")
    };
    let seq: Vec<i64> = seq.iter().map(|v| v.as_i64().unwrap()).collect();
    let want: Vec<i64> = e["seq"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(seq, want);
}

#[test]
fn reference_arrow_caches_read_back_exactly() {
    let expected = expected_rows();
    for name in ["arrow_multi_shard", "arrow_single_zstd"] {
        let cache = open_cache_with(
            golden().join(name),
            &OpenOptions::default().with_features(features_f()),
        )
        .unwrap();
        assert_eq!(cache.features_source, FeaturesSource::Caller);
        let b = &cache.backend;
        assert_eq!(b.len(), 40, "{name}");
        for (i, e) in expected.iter().enumerate() {
            check_f_row(&b.get(i as i64).unwrap(), e);
        }
        // Class names come from the features the caller gave.
        let Value::Label(l) = b.get(1).unwrap().get("label").unwrap().clone() else {
            panic!()
        };
        assert_eq!(l.name.as_deref(), Some("dog"));
        // Same rows through iteration and take.
        let mut n = 0;
        for batch in b.iter_batches(&Default::default()).unwrap() {
            let batch = batch.unwrap();
            for r in b.decoder().decode_batch(&batch).unwrap() {
                check_f_row(&r, &expected[n]);
                n += 1;
            }
        }
        assert_eq!(n, 40);
        let t = b.take(&[39, 0, 17, 17, -1]).unwrap();
        let rows = b.decoder().decode_batch(&t).unwrap();
        for (r, i) in rows.iter().zip([39usize, 0, 17, 17, 39]) {
            check_f_row(r, &expected[i]);
        }
    }
    let meta = open_cache(golden().join("arrow_multi_shard")).unwrap();
    assert_eq!(meta.backend.shard_row_counts(), &[16, 16, 8]);
}

#[test]
fn reference_cache_opens_without_features_by_inference() {
    let cache = open_cache(golden().join("arrow_multi_shard")).unwrap();
    assert_eq!(cache.features_source, FeaturesSource::Inferred);
    let row = cache.backend.get(4).unwrap();
    assert_eq!(row.get("x").unwrap().as_i64(), Some(4));
    let Value::Label(l) = row.get("label").unwrap() else {
        panic!()
    };
    assert_eq!((l.id, l.name.clone()), (1, None));
    // Array shape was never stored by the reference: raw bytes come back.
    let Value::Bytes(b) = row.get("arr").unwrap() else {
        panic!()
    };
    assert_eq!(b.len(), 24 * 4);
}

#[test]
fn reference_empty_cache() {
    let e = Features::new().with("x", Feature::value(Dtype::Int32));
    let cache = open_cache_with(
        golden().join("arrow_empty"),
        &OpenOptions::default().with_features(e),
    )
    .unwrap();
    assert_eq!(cache.len(), 0);
    assert!(cache.backend.get(0).is_err());
    assert_eq!(
        cache
            .backend
            .iter_batches(&Default::default())
            .unwrap()
            .count(),
        0
    );
    assert_eq!(cache.backend.take(&[]).unwrap().num_rows(), 0);
    assert_eq!(cache.backend.slice(0, 10).unwrap().num_rows(), 0);
}

#[test]
fn reference_video_caches_read_back() {
    let sources = ["clip_a.mp4", "clip_b.mp4", "clip_c.avi"];
    for storage in [VideoStorage::Path, VideoStorage::Bytes] {
        let name = if storage == VideoStorage::Path {
            "arrow_video_path"
        } else {
            "arrow_video_bytes"
        };
        let cache = open_cache_with(
            golden().join(name),
            &OpenOptions::default().with_features(video_features(storage)),
        )
        .unwrap();
        assert_eq!(cache.len(), 3);
        for (i, src) in sources.iter().enumerate() {
            let want = std::fs::read(golden().join("sources").join(src)).unwrap();
            let row = cache.backend.get(i as i64).unwrap();
            assert_eq!(row.get("label").unwrap().as_i64(), Some(i as i64));
            let Value::Video(v) = row.get("video").unwrap() else {
                panic!()
            };
            assert_eq!(v.mode, Some(storage));
            assert_eq!(v.size, Some(want.len() as i64));
            assert_eq!(v.checksum.as_deref(), Some(sha256(&want).as_str()));
            let ext = if src.ends_with(".avi") {
                ".avi"
            } else {
                ".mp4"
            };
            assert_eq!(v.extension.as_deref(), Some(ext));
            let mt = if ext == ".avi" {
                "video/x-msvideo"
            } else {
                "video/mp4"
            };
            assert_eq!(v.media_type.as_deref(), Some(mt));
            if storage == VideoStorage::Path {
                let p = v.path.clone().unwrap();
                assert!(
                    p.starts_with(golden().join(name).join("_assets/video")),
                    "{p:?}"
                );
                assert!(v.bytes.is_none());
            } else {
                assert!(v.path.is_none());
            }
            assert_eq!(v.read_bytes().unwrap().as_ref(), want.as_slice());
        }
    }
}

#[test]
fn writing_the_golden_rows_gives_the_same_shards() {
    // The same 40 rows, with the reference's own PNG bytes for the image
    // column, under the same budget and batch size.
    let src = open_cache_with(
        golden().join("arrow_multi_shard"),
        &OpenOptions::default()
            .with_features(features_f())
            .with_decode_images(false),
    )
    .unwrap();
    let rows: Vec<Example> = (0..40)
        .map(|i| {
            let mut ex = f_row(i);
            let Value::Bytes(png) = src
                .backend
                .get(i as i64)
                .unwrap()
                .get("img")
                .unwrap()
                .clone()
            else {
                panic!()
            };
            ex.set("img", png);
            ex
        })
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("multi");
    let w = write_arrow_cache(
        rows,
        &features_f(),
        &out,
        &ArrowWriteOptions::default()
            .try_with_batch_size(8)
            .unwrap()
            .try_with_shard_size_bytes(Some(2048))
            .unwrap()
            .with_encode_threads(2),
    )
    .unwrap();
    let golden_meta: J = serde_json::from_slice(
        &std::fs::read(golden().join("arrow_multi_shard/_metadata.json")).unwrap(),
    )
    .unwrap();
    let ours: J =
        serde_json::from_slice(&std::fs::read(out.join("_metadata.json")).unwrap()).unwrap();
    for key in REFERENCE_ARROW_KEYS {
        assert_eq!(ours[key], golden_meta[key], "{key}");
    }
    assert_eq!(w.metadata.shard_row_counts, vec![16, 16, 8]);
    // Reference keys come first, in the reference's order.
    let keys: Vec<&String> = ours.as_object().unwrap().keys().collect();
    let gkeys: Vec<&String> = golden_meta.as_object().unwrap().keys().collect();
    assert_eq!(&keys[..gkeys.len()], &gkeys[..]);
    // And the pixels we wrote from scratch decode to the reference's.
    let tmp2 = tempfile::tempdir().unwrap();
    let fresh = tmp2.path().join("fresh");
    write_arrow_cache(
        (0..40).map(f_row),
        &features_f(),
        &fresh,
        &ArrowWriteOptions::default(),
    )
    .unwrap();
    let c = open_cache(&fresh).unwrap();
    assert_eq!(c.features_source, FeaturesSource::Metadata);
    for (i, e) in expected_rows().iter().enumerate() {
        check_f_row(&c.backend.get(i as i64).unwrap(), e);
    }
}

#[test]
fn reference_rotation_vectors() {
    // {x: int32, label: ClassLabel} is 12 B/row in memory.
    for (n, batch, budget, want) in [
        (100usize, 10usize, 1024u64, vec![90u64, 10]),
        (50, 10, 512, vec![50]),
        (200, 5, 128, {
            let mut v = vec![15u64; 13];
            v.push(5);
            v
        }),
        (5, 10, 10 << 20, vec![5]),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let w = write_arrow_cache(
            f2_rows(n),
            &features_f2(),
            &tmp.path().join("c"),
            &ArrowWriteOptions::default()
                .try_with_batch_size(batch)
                .unwrap()
                .try_with_shard_size_bytes(Some(budget))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            w.metadata.shard_row_counts, want,
            "n={n} batch={batch} budget={budget}"
        );
    }
}
