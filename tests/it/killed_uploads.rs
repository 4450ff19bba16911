//! A build to `s3://` killed in the middle of a multipart upload (the
//! process aborts after a part is stored, as if killed: no destructor, no
//! abort request): no reader sees a cache, the unfinished upload's parts
//! stay on the server (S3 lists no object for them), and `shardset gc`
//! aborts the upload its marker names and removes the build, after which
//! the server holds neither (checked through the server's own file API).

use std::path::PathBuf;

use shardset::storage::object::{object_storage, UPLOADS_DIR};
use shardset::storage::Storage;

use crate::common::shardset_cli;
use crate::object_storage::{server, BUCKET};

/// Unfinished multipart uploads the server holds (their ids).
fn uploads_on_server(filer: &str) -> Vec<String> {
    let url = format!("{filer}/buckets/{BUCKET}/.uploads/?limit=10000");
    let r = reqwest::blocking::Client::new()
        .get(&url)
        .header("Accept", "application/json")
        .send()
        .unwrap();
    if r.status() == 404 {
        return Vec::new();
    }
    let j: serde_json::Value = r.json().unwrap();
    j["Entries"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e["FullPath"].as_str())
                .map(|p| p.rsplit('/').next().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_build_killed_mid_upload_publishes_nothing_and_gc_aborts_its_upload() {
    killed_mid_upload(&["--shard-size", "16MB"], "arrow");
}

/// The same for a Lance-layout build, whose data file (one fragment of
/// about 24 MB) goes up in parts beside the dataset, under `data/`.
#[test]
fn a_lance_build_killed_mid_upload_publishes_nothing_and_gc_aborts_its_upload() {
    killed_mid_upload(&["--format", "lance"], "lance");
}

fn killed_mid_upload(layout_args: &[&str], name: &str) {
    let s = server();
    let t = tempfile::tempdir().unwrap();
    // 24 MB of rows: a 16 MB shard is uploaded in 5 MiB parts.
    let file = t.path().join("big.jsonl");
    // Hex of a xorshift stream: text no layout's compression shrinks much.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let text: String = (0..3000)
        .map(|i| {
            let pad: String = (0..500)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    format!("{state:016x}")
                })
                .collect();
            format!("{{\"x\": {i}, \"s\": \"{pad}\"}}\n")
        })
        .collect();
    std::fs::write(&file, text).unwrap();
    let out = PathBuf::from(format!(
        "s3://{BUCKET}/killed-upload-{name}/{}",
        std::process::id()
    ));
    let built = shardset_cli()
        .env("SHARDSET_FAULT_POINT", "upload:after-part")
        .env("SHARDSET_OBJECT_PART_BYTES", (5u64 << 20).to_string())
        .env("SHARDSET_OBJECT_CACHE", t.path().join("dc"))
        .args(["build", "jsonl", file.to_str().unwrap()])
        .args(layout_args)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        built.status.code().is_none(),
        "the build was not killed: {:?}\n{}",
        built.status,
        String::from_utf8_lossy(&built.stderr)
    );
    // No reader sees a cache.
    let cache = out.join("train");
    let cat = shardset_cli()
        .env("SHARDSET_OBJECT_CACHE", t.path().join("dc2"))
        .arg("cat")
        .arg(&cache)
        .output()
        .unwrap();
    assert!(!cat.status.success() && cat.stdout.is_empty());
    assert!(shardset::open_cache(&cache).is_err());
    // The marker names the unfinished upload, which the server still holds.
    let store = object_storage(&out);
    let objects = store.list_recursive(&out).unwrap();
    let markers: Vec<_> = objects
        .iter()
        .filter(|e| {
            e.path
                .to_string_lossy()
                .contains(&format!("/{UPLOADS_DIR}/"))
        })
        .collect();
    assert_eq!(markers.len(), 1, "{objects:?}");
    let id = String::from_utf8(store.read(&markers[0].path).unwrap()).unwrap();
    let before = uploads_on_server(&s.filer);
    assert!(
        before
            .iter()
            .any(|u| id.contains(u.as_str()) || u.contains(id.as_str())),
        "upload {id} not among {before:?}"
    );
    // gc aborts it and removes the build's objects.
    let gc = shardset_cli()
        .args(["gc", "--older-than", "0s", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        gc.status.success(),
        "{}",
        String::from_utf8_lossy(&gc.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&gc.stdout).unwrap();
    assert_eq!(report["uploads_aborted"], 1, "{report}");
    let after = uploads_on_server(&s.filer);
    assert!(
        !after
            .iter()
            .any(|u| id.contains(u.as_str()) || u.contains(id.as_str())),
        "upload {id} still among {after:?}"
    );
    assert!(store.list_recursive(&out).unwrap().is_empty());
}
