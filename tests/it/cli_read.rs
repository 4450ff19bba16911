//! The `shardset` command line's reading and housekeeping commands, run as
//! a user runs them (`inspect`, `verify`, `cat`, `export`, `ls`, `gc`),
//! progress, usage errors and help; the builds are in `cli.rs`.

use std::path::PathBuf;

use base64::Engine;
use serde_json::{json, Value as J};
use shardset::features::image;
use shardset::{
    write_arrow_cache, ArrowWriteOptions, Compression, Dtype, Example, Feature, Features, Tensor,
};

use crate::cli::*;
use crate::common::*;

fn text_rows(n: usize) -> impl Iterator<Item = Example> {
    (0..n).map(|i| {
        Example::new().with("id", i as i64).with(
            "text",
            format!("the same words again and again, row {}", i % 7),
        )
    })
}

fn text_features() -> Features {
    Features::new()
        .with("id", Feature::value(Dtype::Int64))
        .with("text", Feature::value(Dtype::String))
}

#[test]
fn inspect_reports_exact_column_bytes_on_disk_and_in_memory() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let opts = ArrowWriteOptions::default()
        .try_with_batch_size(100)
        .unwrap()
        .try_with_shard_size_bytes(Some(8 << 10))
        .unwrap();
    let plain = t.path().join("plain");
    let zstd = t.path().join("zstd");
    write_arrow_cache(text_rows(1000), &text_features(), &plain, &opts).unwrap();
    write_arrow_cache(
        text_rows(1000),
        &text_features(),
        &zstd,
        &opts.clone().with_compression(Compression::Zstd),
    )
    .unwrap();
    let p = json_out(&root, &["inspect", plain.to_str().unwrap(), "--json"]);
    let z = json_out(&root, &["inspect", zstd.to_str().unwrap(), "--json"]);
    assert_eq!(p["num_rows"], 1000);
    assert_eq!(z["compression"], "zstd");
    assert!(p["num_shards"].as_u64().unwrap() > 1);
    for r in [&p, &z] {
        let dir = PathBuf::from(r["path"].as_str().unwrap());
        let mut shard_total = 0;
        for s in r["shards"].as_array().unwrap() {
            let len = std::fs::metadata(dir.join(s["name"].as_str().unwrap()))
                .unwrap()
                .len();
            assert_eq!(s["bytes"], len);
            shard_total += len;
        }
        let cols: u64 = r["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["bytes_on_disk"].as_u64().unwrap())
            .sum();
        assert!(cols > 0 && cols < shard_total, "{cols} vs {shard_total}");
        // Everything in the directory: shards, metadata, sidecars.
        let all_files: u64 = snapshot(&dir).iter().map(|(_, b)| b.len() as u64).sum();
        assert_eq!(r["bytes_on_disk"].as_u64().unwrap(), all_files);
        assert_eq!(r["column_bytes_in_memory"], "exact");
    }
    // The uncompressed buffers, computed from the rows of each record batch:
    // no validity bitmap (no nulls: arrow writes it empty), int64 values, or
    // i32 offsets and the UTF-8 bytes ("... row N" is 37 bytes).
    let dir = PathBuf::from(p["path"].as_str().unwrap());
    let (mut id_bytes, mut text_bytes) = (0u64, 0u64);
    for s in p["shards"].as_array().unwrap() {
        let f = std::fs::File::open(dir.join(s["name"].as_str().unwrap())).unwrap();
        for b in arrow_ipc::reader::FileReader::try_new(f, None).unwrap() {
            let rows = b.unwrap().num_rows() as u64;
            id_bytes += 8 * rows;
            text_bytes += 4 * (rows + 1) + 37 * rows;
        }
    }
    assert_eq!(p["columns"][0]["bytes_on_disk"], id_bytes);
    assert_eq!(p["columns"][1]["bytes_on_disk"], text_bytes);
    // In memory, the compressed cache holds exactly what the uncompressed one stores.
    for k in 0..2 {
        let (pc, zc) = (&p["columns"][k], &z["columns"][k]);
        assert_eq!(pc["bytes_on_disk"], pc["bytes_in_memory"]);
        assert_eq!(zc["bytes_in_memory"], pc["bytes_on_disk"], "{}", pc["name"]);
    }
    assert!(z["columns"][1]["bytes_on_disk"].as_u64() < p["columns"][1]["bytes_on_disk"].as_u64());
    assert_eq!(z["bytes_in_memory"], p["bytes_in_memory"]);
    assert_eq!(p["checksums"]["shard_xxh64"], true);
    assert_eq!(p["checksums"]["metadata_xxh64"], true);
    assert_eq!(p["checksums"]["verified"], J::Null);
    assert_eq!(
        p["features"]["text"],
        json!({"type": "Value", "dtype": "string"})
    );

    let v = json_out(
        &root,
        &["inspect", plain.to_str().unwrap(), "--json", "--verify"],
    );
    assert_eq!(v["checksums"]["verified"]["ok"], true);
    let human = ok(&root, &["inspect", plain.to_str().unwrap()]);
    for want in [
        "arrow-shards",
        "1,000",
        "present (not verified; use --verify)",
        "Value('string')",
        "in memory",
    ] {
        assert!(human.contains(want), "{want}:\n{human}");
    }
    // A root: every cache under it.
    let all = json_out(&root, &["inspect", t.path().to_str().unwrap(), "--json"]);
    assert_eq!(all["caches"].as_array().unwrap().len(), 2);
}

#[test]
fn verify_names_the_damaged_shard_and_exits_non_zero() {
    let (t, dir) = f2_cache(3000, 100, 4 << 10);
    let root = t.path().join("root");
    let good = t.path().join("good");
    write_arrow_cache(
        f2_rows(10),
        &features_f2(),
        &good,
        &ArrowWriteOptions::default(),
    )
    .unwrap();
    let out = ok(&root, &["verify", dir.to_str().unwrap()]);
    assert!(out.contains("ok:"), "{out}");

    let shard = dir.join("shard-00001.arrow");
    let mut bytes = std::fs::read(&shard).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&shard, &bytes).unwrap();
    let e = fails(&root, &["verify", dir.to_str().unwrap()], 1);
    assert!(
        e.contains("shard-00001.arrow") && e.contains("mismatch"),
        "{e}"
    );
    assert!(!e.contains("shard-00000.arrow"), "{e}");

    // A root of caches: the good one is ok, the damaged one fails the run.
    let o = run(&root, &["verify", t.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains(good.to_str().unwrap()),
        "{}",
        stdout(&o)
    );
    assert!(stderr(&o).contains("shard-00001.arrow"), "{}", stderr(&o));

    let o = run(
        &root,
        &["inspect", dir.to_str().unwrap(), "--verify", "--json"],
    );
    assert_eq!(o.status.code(), Some(1));
    let r: J = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(r["checksums"]["verified"]["ok"], false);
    assert!(r["checksums"]["verified"]["mismatches"][0]["shard"]
        .as_str()
        .unwrap()
        .ends_with("shard-00001.arrow"));
}

#[test]
fn cat_prints_rows_as_json_lines() {
    let t = tempfile::tempdir().unwrap();
    let (root, dir) = (t.path().join("root"), t.path().join("pets"));
    split_folder(&dir);
    let s = json_out(
        &root,
        &["build", "imagefolder", dir.to_str().unwrap(), "--json"],
    );
    let train = cache_dir(&s, "train");
    let out = ok(&root, &["cat", train.to_str().unwrap(), "--rows", "1..3"]);
    let rows: Vec<J> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    let file = std::fs::read(dir.join("train/cat/1.png")).unwrap();
    assert_eq!(rows[0]["label"], json!({"id": 0, "name": "cat"}));
    assert_eq!(rows[0]["image"]["format"], "PNG");
    assert_eq!(rows[0]["image"]["width"], 4);
    assert_eq!(rows[0]["image"]["height"], 4);
    assert_eq!(rows[0]["image"]["bytes"], file.len());
    assert_eq!(
        rows[0]["image"]["xxh64"],
        format!("{:016x}", xxhash_rust::xxh64::xxh64(&file, 0))
    );
    assert_eq!(rows[1]["label"]["name"], "dog");

    let full = ok(
        &root,
        &[
            "cat",
            train.to_str().unwrap(),
            "--rows",
            "1",
            "--full",
            "--columns",
            "image",
        ],
    );
    let r: J = serde_json::from_str(full.trim()).unwrap();
    assert!(r.get("label").is_none());
    let b = base64::engine::general_purpose::STANDARD
        .decode(r["image"]["base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(b, file);
    assert_eq!(
        ok(&root, &["cat", train.to_str().unwrap()]).lines().count(),
        4
    );
    let last = ok(&root, &["cat", train.to_str().unwrap(), "--rows", "-1"]);
    assert_eq!(
        serde_json::from_str::<J>(last.trim()).unwrap()["label"]["name"],
        "dog"
    );
    let e = fails(&root, &["cat", train.to_str().unwrap(), "--rows", "9"], 2);
    assert!(e.contains("row 9") && e.contains("4 rows"), "{e}");

    // Arrays: a summary, or nested lists with --full.
    let arr = t.path().join("arr");
    let f = Features::new()
        .with("a", Feature::array(vec![2, 3], Dtype::Int16).unwrap())
        .with("blob", Feature::value(Dtype::Binary));
    let ex = Example::new()
        .with(
            "a",
            Tensor::from_vec(vec![2, 3], vec![1i16, 2, 3, 4, 5, -6]).unwrap(),
        )
        .with("blob", vec![1u8, 2, 3]);
    write_arrow_cache([ex], &f, &arr, &ArrowWriteOptions::default()).unwrap();
    let r: J = serde_json::from_str(ok(&root, &["cat", arr.to_str().unwrap()]).trim()).unwrap();
    assert_eq!(r["a"]["shape"], json!([2, 3]));
    assert_eq!(r["a"]["dtype"], "int16");
    assert_eq!(r["blob"]["bytes"], 3);
    let r: J =
        serde_json::from_str(ok(&root, &["cat", arr.to_str().unwrap(), "--full"]).trim()).unwrap();
    assert_eq!(r["a"], json!([[1, 2, 3], [4, 5, -6]]));
    assert_eq!(r["blob"]["base64"], "AQID");
}

#[test]
fn export_writes_a_rows_images_as_png() {
    let t = tempfile::tempdir().unwrap();
    let (root, dir) = (t.path().join("root"), t.path().join("mixed"));
    let png_bytes = png(5, 3, 9);
    let jpg_bytes = jpeg(8, 6);
    write(&dir.join("a/0.png"), &png_bytes);
    write(&dir.join("b/0.jpg"), &jpg_bytes);
    let s = json_out(
        &root,
        &["build", "imagefolder", dir.to_str().unwrap(), "--json"],
    );
    let train = cache_dir(&s, "train");
    let out = t.path().join("export");
    let r = json_out(
        &root,
        &[
            "export",
            train.to_str().unwrap(),
            "--row",
            "0",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ],
    );
    let p0 = PathBuf::from(r["files"][0]["path"].as_str().unwrap());
    assert_eq!(p0, out.join("row0_image.png"));
    assert_eq!(std::fs::read(&p0).unwrap(), png_bytes);

    let r = json_out(
        &root,
        &[
            "export",
            train.to_str().unwrap(),
            "--row",
            "-1",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ],
    );
    let p1 = PathBuf::from(r["files"][0]["path"].as_str().unwrap());
    assert_eq!(p1, out.join("row1_image.png"));
    let written = std::fs::read(&p1).unwrap();
    assert_eq!(image::sniff(&written), Some(image::Container::Png));
    assert_eq!(
        image::decode(&written).unwrap(),
        image::decode(&jpg_bytes).unwrap()
    );

    let e = fails(
        &root,
        &[
            "export",
            train.to_str().unwrap(),
            "--row",
            "5",
            "--out",
            out.to_str().unwrap(),
        ],
        1,
    );
    assert!(e.contains("index 5 out of range"), "{e}");
    let (t2, f2) = f2_cache(10, 10, 1 << 20);
    let e = fails(
        &root,
        &[
            "export",
            f2.to_str().unwrap(),
            "--row",
            "0",
            "--out",
            t2.path().to_str().unwrap(),
        ],
        1,
    );
    assert!(e.contains("no image"), "{e}");
}

#[test]
fn ls_lists_caches_under_the_root() {
    let t = tempfile::tempdir().unwrap();
    let (root, dir) = (t.path().join("root"), t.path().join("pets"));
    split_folder(&dir);
    ok(
        &root,
        &["build", "imagefolder", dir.to_str().unwrap(), "-q"],
    );
    let l = json_out(&root, &["ls", "--json"]);
    assert_eq!(l["root"], root.to_str().unwrap());
    let caches = l["caches"].as_array().unwrap();
    assert_eq!(caches.len(), 2);
    let names: Vec<&str> = caches.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert!(
        names[0].starts_with("processed/pets_imagefolder_test_"),
        "{names:?}"
    );
    assert_eq!(caches[0]["rows"], 2);
    assert_eq!(caches[1]["rows"], 4);
    assert_eq!(caches[1]["layout"], "arrow-shards");
    assert!(caches[1]["bytes_on_disk"].as_u64().unwrap() > 0);
    let human = ok(&root, &["ls", root.to_str().unwrap()]);
    assert!(
        human.contains("2 cache(s)") && human.contains("pets_imagefolder_train_"),
        "{human}"
    );
    let empty = t.path().join("nothing");
    std::fs::create_dir(&empty).unwrap();
    assert!(ok(&root, &["ls", empty.to_str().unwrap()]).contains("no caches"));
}

#[test]
fn gc_removes_leftovers_but_never_a_live_builds_temp_dir() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let processed = root.join("processed");
    let cache = processed.join("ds_default_train_0123456789abcdef");
    write_arrow_cache(
        f2_rows(10),
        &features_f2(),
        &cache,
        &ArrowWriteOptions::default(),
    )
    .unwrap();
    let before = snapshot(&cache);
    let live = processed.join(".live_default_train_0000000000000000_tmp_abcd1234");
    let dead = processed.join(".ds_default_train_0123456789abcdef_tmp_zzzz9999");
    let old = processed.join(".ds_default_train_0123456789abcdef_old_aaaa1111");
    let unrelated = processed.join(".notes");
    for d in [&live, &dead, &old, &unrelated] {
        write(&d.join("f"), b"12345");
    }
    let lock = shardset::cache::lock::CacheLock::acquire(
        &processed.join("live_default_train_0000000000000000"),
    )
    .unwrap();

    let dry = json_out(&root, &["gc", "--dry-run", "--json"]);
    assert_eq!(dry["removed"].as_array().unwrap().len(), 2);
    assert!(dead.exists() && old.exists());
    let young = json_out(&root, &["gc", "--older-than", "1h", "--json"]);
    assert!(young["removed"].as_array().unwrap().is_empty());
    assert_eq!(young["kept"].as_array().unwrap().len(), 3);

    let out = ok(&root, &["gc"]);
    assert!(!dead.exists() && !old.exists(), "{out}");
    assert!(live.exists(), "a live build's temp dir was removed:\n{out}");
    assert!(out.contains("live build"), "{out}");
    assert!(unrelated.exists());
    assert_eq!(snapshot(&cache), before);

    drop(lock);
    let g = json_out(&root, &["gc", root.to_str().unwrap(), "--json"]);
    assert_eq!(g["removed"].as_array().unwrap().len(), 1);
    assert!(!live.exists());
    let e = fails(&root, &["gc", "--older-than", "soon"], 2);
    assert!(e.contains("soon"), "{e}");
}

#[test]
fn quiet_runs_and_non_terminals_get_no_progress() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let file = t.path().join("n.jsonl");
    let text: String = (0..3000).map(|i| format!("{{\"x\": {i}}}\n")).collect();
    write(&file, text.as_bytes());
    // stderr is a pipe here: no progress line, and nothing else either.
    let o = run(
        &root,
        &[
            "build",
            "jsonl",
            file.to_str().unwrap(),
            "--batch-size",
            "100",
        ],
    );
    assert!(o.status.success());
    assert_eq!(stderr(&o), "");
    assert!(stdout(&o).contains("built 3,000 rows"), "{}", stdout(&o));
    let o = run(
        &root,
        &[
            "build",
            "jsonl",
            file.to_str().unwrap(),
            "--rebuild",
            "--quiet",
        ],
    );
    assert!(o.status.success());
    assert_eq!((stdout(&o), stderr(&o)), (String::new(), String::new()));
}

#[test]
fn bad_options_are_usage_errors() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let file = t.path().join("n.jsonl");
    write(&file, b"{\"x\": 1}\n");
    let f = file.to_str().unwrap();
    let e = fails(&root, &["build", "jsonl", f, "--format", "parquet"], 2);
    assert!(e.contains("parquet"), "{e}");
    let e = fails(&root, &["build", "jsonl", f, "--shard-size", "big"], 2);
    assert!(e.contains("big"), "{e}");
    let e = fails(&root, &["build", "jsonl", f, "--compression", "gzip"], 2);
    assert!(e.contains("gzip"), "{e}");
    let e = fails(
        &root,
        &["build", "videofolder", t.path().to_str().unwrap()],
        1,
    );
    assert!(e.contains("no class folders"), "{e}");
    let e = fails(
        &root,
        &[
            "build",
            "videofolder",
            t.path().to_str().unwrap(),
            "--storage",
            "reel",
        ],
        2,
    );
    assert!(e.contains("reel"), "{e}");
    assert!(published(&root).is_empty());
}

#[test]
fn help_describes_each_command_under_its_own_name() {
    let out = crate::common::succeeded(crate::common::shardset_cli().arg("--help"));
    let help = String::from_utf8_lossy(&out.stdout);
    let line = |cmd: &str| {
        help.lines()
            .find(|l| l.trim_start().starts_with(&format!("{cmd} ")))
            .unwrap_or_else(|| panic!("no `{cmd}` in\n{help}"))
            .to_string()
    };
    assert!(line("gc").contains("Remove temp dirs"), "{help}");
    assert!(line("download").contains("Download a file"), "{help}");
}
