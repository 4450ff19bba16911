//! Dedup of large repeated cells: the bytes read are the bytes written, the
//! space is saved, a cache without repeats is the plain cache, and damage
//! to the refs is named, never read as empty cells.

use shardset::layouts::arrow_shards::dedup::refs_path;
use shardset::{
    open_cache, open_cache_with, verify_cache, write_arrow_cache, ArrowWriteOptions, Backend,
    Compression, Dtype, Error, Example, Feature, Features, IterOptions, OpenOptions, Tensor, Value,
};

use crate::common::*;

const SIDE: usize = 64; // 64 x 64 float32: 16 KiB a tensor

fn features() -> Features {
    Features::new()
        .with("i", Feature::value(Dtype::Int64))
        .with(
            "t",
            Feature::array(vec![SIDE, SIDE], Dtype::Float32).unwrap(),
        )
        .with("b", Feature::value(Dtype::Binary))
        .with("small", Feature::value(Dtype::Binary))
}

/// Row i: tensor i % distinct, bytes equal to the tensor's in another
/// column (the same bytes, a different column), a small cell that repeats
/// below the threshold, a null every 7th row.
fn row(i: usize, distinct: usize) -> Example {
    let k = i % distinct;
    let vals: Vec<f32> = (0..SIDE * SIDE).map(|j| (k * 100_000 + j) as f32).collect();
    let t = Tensor::from_vec(vec![SIDE, SIDE], vals).unwrap();
    let b: Value = if i % 7 == 3 {
        Value::Null
    } else {
        Value::from(t.data.to_vec())
    };
    Example::new()
        .with("i", i as i64)
        .with("t", t)
        .with("b", b)
        .with("small", vec![(i % 3) as u8; 100])
}

fn write(dir: &std::path::Path, n: usize, distinct: usize, dedup: bool, c: Compression) {
    let opts = ArrowWriteOptions::default()
        .try_with_batch_size(50)
        .unwrap()
        .try_with_shard_size_bytes(Some(2 << 20))
        .unwrap()
        .with_compression(c)
        .with_record_checksums(true)
        .with_build_id("same")
        .try_with_dedup(dedup.then_some(4096))
        .unwrap();
    write_arrow_cache((0..n).map(|i| row(i, distinct)), &features(), dir, &opts).unwrap();
}

fn shard_bytes(dir: &std::path::Path) -> u64 {
    let c = open_cache(dir).unwrap();
    c.metadata
        .as_arrow_shards()
        .unwrap()
        .shard_num_bytes
        .as_ref()
        .unwrap()
        .iter()
        .sum()
}

/// 10 distinct tensors over 1,000 rows: stored once each, every read path
/// returns the bytes of the plain cache, the metadata says so and marks the
/// cache as needing shardset, verify and verify-on-read pass.
#[test]
fn repeated_cells_are_stored_once_and_read_back_identically() {
    for c in [Compression::None, Compression::Zstd] {
        let tmp = tempfile::tempdir().unwrap();
        let (plain, dd) = (tmp.path().join("plain"), tmp.path().join("dedup"));
        write(&plain, 1000, 10, false, c);
        write(&dd, 1000, 10, true, c);
        let (p, d) = (open_cache(&plain).unwrap(), open_cache(&dd).unwrap());
        let m = d.metadata.as_arrow_shards().unwrap();
        let info = m.dedup.as_ref().expect("a dedup section");
        // t repeats 990 times; b (the same bytes, its own column) in every
        // non-null cell but the first of each of the 10 values.
        let b_cells = (0..1000).filter(|i| i % 7 != 3).count() as u64;
        assert_eq!(info.cells, 990 + b_cells - 10, "{c}");
        assert_eq!(info.bytes_saved, info.cells * (SIDE * SIDE * 4) as u64);
        assert_eq!(
            info.columns,
            vec!["t".to_string(), "b".into(), "small".into()]
        );
        assert_eq!(m.cache_format_version, 2);
        assert_eq!(m.requires.as_deref(), Some(&["dedup".to_string()][..]));
        let (pb, db) = (shard_bytes(&plain), shard_bytes(&dd));
        assert!(db * 10 < pb, "{c}: {db} bytes with dedup, {pb} without");
        // Every read path gives the plain cache's bytes.
        assert_eq!(d.len(), 1000);
        for i in [0i64, 9, 10, 11, 500, 999, -1] {
            assert_eq!(
                d.backend.get_raw(i).unwrap(),
                p.backend.get_raw(i).unwrap(),
                "{c} {i}"
            );
            assert_eq!(d.backend.get(i).unwrap(), p.backend.get(i).unwrap());
        }
        let idx = [999i64, 3, 3, 500, 10, 0, 777];
        assert_eq!(d.backend.take(&idx).unwrap(), p.backend.take(&idx).unwrap());
        assert_eq!(
            d.backend.slice(45, 130).unwrap(),
            p.backend.slice(45, 130).unwrap()
        );
        let all = |b: &dyn Backend| -> Vec<arrow_array::RecordBatch> {
            b.iter_batches(&IterOptions::default())
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        let (a, b) = (all(p.backend.as_ref()), all(d.backend.as_ref()));
        let cat = |v: &[arrow_array::RecordBatch]| {
            arrow_select::concat::concat_batches(&v[0].schema(), v).unwrap()
        };
        assert_eq!(cat(&a), cat(&b));
        let rep = verify_cache(&dd).unwrap();
        assert!(rep.damage.is_empty(), "{:?}", rep.damage);
        let v = open_cache_with(&dd, &OpenOptions::default().with_verify_on_read(true)).unwrap();
        for i in 0..1000 {
            v.backend.get_raw(i).unwrap();
        }
        let e = d.edit().unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("dedup")),
            "{e}"
        );
    }
}

/// With dedup on and nothing repeating, the cache is byte for byte the one
/// a write without dedup makes: no refs, no dedup key, version 1.
#[test]
fn without_repeats_the_cache_is_the_plain_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let (plain, dd) = (tmp.path().join("a"), tmp.path().join("b"));
    write(&plain, 60, 1000, false, Compression::None);
    write(&dd, 60, 1000, true, Compression::None);
    let strip = |d: &std::path::Path| -> Vec<(std::path::PathBuf, Vec<u8>)> {
        snapshot(d)
            .into_iter()
            .map(|(p, b)| (p.strip_prefix(d).unwrap().to_path_buf(), b))
            .collect()
    };
    assert_eq!(strip(&plain), strip(&dd));
    let m = open_cache(&dd).unwrap().metadata;
    assert_eq!(m.to_json()["cache_format_version"], 1);
    assert!(m.to_json().get("dedup").is_none());
}

/// A changed, missing or truncated refs file is an error naming it (read,
/// verify), never empty cells; a version-2 cache needing an extension this
/// build does not know is refused.
#[test]
fn damaged_refs_are_named_never_read_as_empty_cells() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    write(&dir, 200, 4, true, Compression::None);
    let c = open_cache(&dir).unwrap();
    let name = c.metadata.as_arrow_shards().unwrap().shard_filenames[0].clone();
    let refs = refs_path(&dir, &name);
    let good = std::fs::read(&refs).unwrap();
    let mut bad = good.clone();
    let at = bad.len() - 20;
    bad[at] ^= 1;
    for (what, bytes) in [
        ("changed", Some(bad)),
        ("truncated", Some(good[..good.len() - 3].to_vec())),
        ("missing", None),
    ] {
        match &bytes {
            Some(b) => std::fs::write(&refs, b).unwrap(),
            None => std::fs::remove_file(&refs).unwrap(),
        }
        let c = open_cache(&dir).unwrap();
        let e = c.backend.get(5).unwrap_err();
        assert!(
            e.to_string().contains(&format!("{name}.refs")),
            "{what}: {e}"
        );
        let rep = verify_cache(&dir).unwrap();
        assert!(
            rep.damage.iter().any(|d| d.path == refs),
            "{what}: {:?}",
            rep.damage
        );
        std::fs::write(&refs, &good).unwrap();
    }
    assert_eq!(
        open_cache(&dir).unwrap().backend.get(5).unwrap().get("i"),
        Some(&Value::Int(5))
    );
    // An extension this build does not know.
    let meta = dir.join("_metadata.json");
    let text = std::fs::read_to_string(&meta).unwrap();
    let mut j: serde_json::Value = serde_json::from_str(&text).unwrap();
    j["requires"] = serde_json::json!(["dedup", "something-newer"]);
    j.as_object_mut().unwrap().remove("metadata_xxh64");
    std::fs::write(&meta, serde_json::to_vec_pretty(&j).unwrap()).unwrap();
    let e = open_cache(&dir).unwrap_err();
    assert!(
        matches!(e, Error::UnsupportedVersion { found: 2, .. }),
        "{e}"
    );
}

/// An image folder holding the same picture many times, built with
/// `--dedup`: each copy after the first is stored as a ref, `inspect` says
/// so, and every row reads the picture's bytes.
#[test]
fn the_cli_builds_an_image_folder_with_dedup() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("pics");
    let mut rng = shardset::SplitMix64::new(3);
    let noise: Vec<u8> = (0..32 * 32 * 3).map(|_| rng.below(256) as u8).collect();
    let img = shardset::ImageData::new(32, 32, 3, noise).unwrap();
    let png = shardset::features::image::encode(&img, shardset::ImageFormat::Png).unwrap();
    assert!(png.len() > 1024);
    for class in ["a", "b"] {
        std::fs::create_dir_all(src.join(class)).unwrap();
        for k in 0..5 {
            std::fs::write(src.join(class).join(format!("{k}.png")), &png).unwrap();
        }
    }
    let out = tmp.path().join("out");
    succeeded(
        shardset_cli()
            .args(["build", "imagefolder"])
            .arg(&src)
            .arg("--out")
            .arg(&out)
            .args(["--dedup", "1KB", "-q"]),
    );
    let dir = out.join("train");
    let j: serde_json::Value = serde_json::from_slice(
        &shardset_cli()
            .arg("inspect")
            .arg(&dir)
            .arg("--json")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(j["dedup"]["cells"], 9, "{j}");
    let c = open_cache_with(&dir, &OpenOptions::default().with_decode_images(false)).unwrap();
    for i in 0..10 {
        let r = c.backend.get(i).unwrap();
        let Some(Value::Bytes(b)) = r.get("image") else {
            panic!("{r:?}")
        };
        assert_eq!(b.as_ref(), png.as_slice(), "row {i}");
    }
}
