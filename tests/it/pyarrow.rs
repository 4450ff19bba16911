//! pyarrow reads what we write, with identical values.

use shardset::{write_arrow_cache, ArrowWriteOptions, Compression, Value};

use crate::common::*;

const SCRIPT: &str = r#"
import hashlib, json, sys
import pyarrow as pa, pyarrow.ipc as ipc
meta = json.load(open(sys.argv[1] + "/_metadata.json"))
out = {"fields": {}, "rows": []}
for name in meta["shard_filenames"]:
    f = ipc.open_file(pa.memory_map(sys.argv[1] + "/" + name))
    for fld in f.schema:
        out["fields"][fld.name] = [str(fld.type), {k.decode(): v.decode() for k, v in (fld.metadata or {}).items()}]
    for r in f.read_all().to_pylist():
        for k, v in list(r.items()):
            if isinstance(v, bytes):
                r[k] = hashlib.sha256(v).hexdigest()
        out["rows"].append(r)
print(json.dumps(out))
"#;

#[test]
fn pyarrow_reads_our_shards_identically() {
    require_python_module("pyarrow");
    for comp in [Compression::None, Compression::Zstd, Compression::Lz4] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c");
        write_arrow_cache(
            (0..40).map(f_row),
            &features_f(),
            &dir,
            &ArrowWriteOptions::default()
                .try_with_batch_size(8)
                .unwrap()
                .try_with_shard_size_bytes(Some(2048))
                .unwrap()
                .with_compression(comp),
        )
        .unwrap();
        let j: serde_json::Value = crate::common::python_json(SCRIPT, &[&dir]);
        assert_eq!(j["fields"]["x"][0], "int32");
        assert_eq!(
            j["fields"]["label"][1]["stable_datasets.feature"],
            "ClassLabel"
        );
        assert_eq!(j["fields"]["arr"][1]["stable_datasets.feature"], "Array3D");
        assert_eq!(j["fields"]["seq"][0], "list<item: int64>");
        assert_eq!(j["fields"]["img"][0], "large_binary");
        let rows = j["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 40);
        let c = shardset::open_cache_with(
            &dir,
            &shardset::OpenOptions::default().with_decode_images(false),
        )
        .unwrap();
        for (i, pr) in rows.iter().enumerate() {
            let r = c.backend.get(i as i64).unwrap();
            assert_eq!(pr["x"], i as i64);
            assert_eq!(pr["f"].as_f64(), r.get("f").unwrap().as_f64());
            assert_eq!(pr["flag"], (i % 3 == 0));
            assert_eq!(pr["label"], (i % 3) as i64);
            match r.get("name").unwrap() {
                Value::Null => assert!(pr["name"].is_null()),
                Value::Str(s) => assert_eq!(pr["name"], s.as_str()),
                v => panic!("{v:?}"),
            }
            let Value::Bytes(img) = r.get("img").unwrap() else {
                panic!()
            };
            assert_eq!(pr["img"], sha256(img));
            let Value::Tensor(t) = r.get("arr").unwrap() else {
                panic!()
            };
            assert_eq!(pr["arr"], sha256(&t.data));
            let want: Vec<i64> = (0..(i % 5) as i64).collect();
            assert_eq!(pr["seq"], serde_json::json!(want));
        }
    }
}

#[test]
fn pyarrow_reads_our_video_cells() {
    require_python_module("pyarrow");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("v");
    let src = golden().join("sources/clip_c.avi");
    let features = video_features(shardset::VideoStorage::Path);
    write_arrow_cache(
        vec![shardset::Example::new()
            .with("video", src.clone())
            .with("label", 7)],
        &features,
        &dir,
        &ArrowWriteOptions::default(),
    )
    .unwrap();
    let j: serde_json::Value = crate::common::python_json(SCRIPT, &[&dir]);
    let v = &j["rows"][0]["video"];
    let digest = sha256(&std::fs::read(&src).unwrap());
    assert_eq!(v["mode"], "path");
    assert_eq!(v["path"], format!("{digest}.avi"));
    assert_eq!(v["media_type"], "video/x-msvideo");
    assert_eq!(v["checksum"], digest);
    assert_eq!(
        j["fields"]["video"][1]["stable_datasets.video.storage"],
        "path"
    );
    assert!(dir
        .join("_assets/video")
        .join(format!("{digest}.avi"))
        .exists());
}
