//! The `shardset` command line, run as a user runs it: every command, and
//! bad input (each a clear message naming the path and reason, a non-zero
//! exit code, and nothing published).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine;
use serde_json::{json, Value as J};
use shardset::features::image;
use shardset::{
    open_cache, open_cache_with, write_arrow_cache, ArrowWriteOptions, Compression, Dtype, Example,
    Feature, Features, ImageData, ImageFormat, OpenOptions, Tensor, Value,
};

use crate::common::*;

/// A command line with its cache root in `root` (never the user's home).
fn cli(root: &Path) -> Command {
    let mut c = crate::common::shardset_cli();
    c.env("STABLE_DATASETS_CACHE_DIR", root);
    c
}

pub(crate) fn run(root: &Path, args: &[&str]) -> Output {
    cli(root).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs and expects success; returns stdout.
pub(crate) fn ok(root: &Path, args: &[&str]) -> String {
    let o = run(root, args);
    assert!(
        o.status.success(),
        "{args:?} failed ({:?}):\n{}{}",
        o.status.code(),
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// Runs and expects failure with `code`; returns stderr.
pub(crate) fn fails(root: &Path, args: &[&str], code: i32) -> String {
    let o = run(root, args);
    assert_eq!(
        o.status.code(),
        Some(code),
        "{args:?}:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
    stderr(&o)
}

fn json_out(root: &Path, args: &[&str]) -> J {
    let out = ok(root, args);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{args:?}: {e}\n{out}"))
}

fn png(w: u32, h: u32, seed: u8) -> Vec<u8> {
    let px = (0..w * h * 3)
        .map(|i| (i as u8).wrapping_mul(seed))
        .collect();
    image::encode(&ImageData::new(h, w, 3, px).unwrap(), ImageFormat::Png).unwrap()
}

fn jpeg(w: u32, h: u32) -> Vec<u8> {
    let px = (0..w * h * 3).map(|i| (i % 251) as u8).collect();
    image::encode(&ImageData::new(h, w, 3, px).unwrap(), ImageFormat::Jpeg).unwrap()
}

fn write(p: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

/// Every published cache (a dir holding `_metadata.json`) under `root`.
fn published(root: &Path) -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        let Ok(es) = std::fs::read_dir(d) else { return };
        for e in es.flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.join("_metadata.json").is_file() {
                    out.push(p);
                } else {
                    walk(&p, out);
                }
            }
        }
    }
    let mut v = Vec::new();
    walk(root, &mut v);
    v
}

/// `DIR/{train,test}/{dog,cat}/k.png` with 2 train and 1 test image per class.
fn split_folder(dir: &Path) {
    for (split, n) in [("train", 2u8), ("test", 1)] {
        for class in ["dog", "cat"] {
            for k in 0..n {
                write(
                    &dir.join(split).join(class).join(format!("{k}.png")),
                    &png(3 + k as u32, 4, k + 1),
                );
            }
        }
    }
}

fn cache_dir(summary: &J, split: &str) -> PathBuf {
    let c = summary["caches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["split"] == split)
        .unwrap_or_else(|| panic!("no split {split} in {summary}"));
    PathBuf::from(c["dir"].as_str().unwrap())
}

#[test]
fn build_imagefolder_with_splits_keeps_bytes_and_sorted_labels() {
    let t = tempfile::tempdir().unwrap();
    let (root, dir) = (t.path().join("root"), t.path().join("pets"));
    split_folder(&dir);
    // Files the source must skip: hidden ones and non-images.
    write(&dir.join("train/cat/.DS_Store"), b"junk");
    write(&dir.join("train/cat/notes.txt"), b"junk");
    let s = json_out(
        &root,
        &["build", "imagefolder", dir.to_str().unwrap(), "--json"],
    );
    assert_eq!(s["source"], "imagefolder");
    assert_eq!(s["name"], "pets");
    let train = cache_dir(&s, "train");
    assert!(train.starts_with(root.join("processed")));
    let name = train.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("pets_imagefolder_train_"), "{name}");
    assert_eq!(s["caches"][0]["rows"], 4);
    assert_eq!(s["caches"][1]["split"], "test");
    assert_eq!(s["caches"][1]["rows"], 2);

    let c = open_cache_with(&train, &OpenOptions::default().with_decode_images(false)).unwrap();
    assert_eq!(
        c.features().get("label"),
        Some(&Feature::class_label(["cat", "dog"]).unwrap())
    );
    assert_eq!(c.features().get("image"), Some(&Feature::image()));
    // Class order, then file order; images are the files' bytes.
    let want = [("cat", 0), ("cat", 1), ("dog", 0), ("dog", 1)];
    for (i, (class, k)) in want.iter().enumerate() {
        let row = c.backend.get(i as i64).unwrap();
        match row.get("label") {
            Some(Value::Label(l)) => assert_eq!(l.name.as_deref(), Some(*class)),
            other => panic!("{other:?}"),
        }
        let file = std::fs::read(dir.join("train").join(class).join(format!("{k}.png"))).unwrap();
        match row.get("image") {
            Some(Value::Bytes(b)) => assert_eq!(b.as_slice(), file.as_slice()),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn imagefolder_is_warm_then_rebuilt_when_a_file_or_a_class_appears() {
    let t = tempfile::tempdir().unwrap();
    let (root, dir) = (t.path().join("root"), t.path().join("flat"));
    for class in ["a", "b"] {
        write(&dir.join(class).join("0.png"), &png(2, 2, 3));
    }
    let d = dir.to_str().unwrap();
    let first = json_out(&root, &["build", "imagefolder", d, "--json"]);
    assert_eq!(first["caches"].as_array().unwrap().len(), 1);
    assert_eq!(first["caches"][0]["split"], "train");
    assert_eq!(first["caches"][0]["built"], true);
    let warm = json_out(&root, &["build", "imagefolder", d, "--json"]);
    assert_eq!(warm["caches"][0]["built"], false);

    write(&dir.join("a/1.png"), &png(2, 2, 5));
    let more = json_out(&root, &["build", "imagefolder", d, "--json"]);
    assert_eq!(more["caches"][0]["built"], true);
    assert_eq!(more["caches"][0]["rows"], 3);
    let reasons = more["caches"][0]["reasons"].to_string();
    assert!(reasons.contains("a/1.png"), "{reasons}");

    // A new class changes the features: a rebuild, not a schema error.
    write(&dir.join("c/0.png"), &png(2, 2, 7));
    let grown = json_out(&root, &["build", "imagefolder", d, "--json"]);
    assert_eq!(grown["caches"][0]["built"], true);
    let c = open_cache(cache_dir(&grown, "train")).unwrap();
    assert_eq!(
        c.features().get("label"),
        Some(&Feature::class_label(["a", "b", "c"]).unwrap())
    );
    assert_eq!(published(&root).len(), 1);
}

/// A Lance build records its sources and config like an Arrow one, so the
/// next build of unchanged inputs is warm, and a changed file rebuilds it.
#[test]
fn a_lance_imagefolder_build_is_warm_then_rebuilt_when_a_file_appears() {
    let t = tempfile::tempdir().unwrap();
    let (root, dir) = (t.path().join("root"), t.path().join("flat"));
    for class in ["a", "b"] {
        write(&dir.join(class).join("0.png"), &png(2, 2, 3));
    }
    let d = dir.to_str().unwrap();
    let args = ["build", "imagefolder", d, "--format", "lance", "--json"];
    let first = json_out(&root, &args);
    assert_eq!(first["caches"][0]["built"], true);
    let c = open_cache(cache_dir(&first, "train")).unwrap();
    assert_eq!(c.layout, "lance-rows");
    assert!(c.metadata.sources().is_some() && c.metadata.config().is_some());
    let warm = json_out(&root, &args);
    assert_eq!(warm["caches"][0]["built"], false, "{warm}");
    write(&dir.join("a/1.png"), &png(2, 2, 5));
    let more = json_out(&root, &args);
    assert_eq!(more["caches"][0]["built"], true);
    assert_eq!(more["caches"][0]["rows"], 3);
    let reasons = more["caches"][0]["reasons"].to_string();
    assert!(reasons.contains("a/1.png"), "{reasons}");
}

#[test]
fn build_jsonl_infers_features_null_tolerant() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let file = t.path().join("recs.jsonl");
    let lines = [
        json!({"i": 1, "m": 1, "f": 0.5, "b": true, "s": "x", "seq": [1, 2], "n": null}),
        json!({"i": 2, "m": 2.5, "f": 1.5, "b": false, "s": null, "seq": [], "n": 3.5}),
        json!({"i": 3, "m": 3, "f": 2.0, "b": null, "seq": [3]}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n\n")).collect();
    write(&file, text.as_bytes());
    let s = json_out(&root, &["build", "jsonl", file.to_str().unwrap(), "--json"]);
    assert_eq!(s["caches"][0]["rows"], 3);
    let c = open_cache(cache_dir(&s, "train")).unwrap();
    let f = c.features();
    assert_eq!(f.names(), ["i", "m", "f", "b", "s", "seq", "n"]);
    assert_eq!(f.get("i"), Some(&Feature::value(Dtype::Int64)));
    assert_eq!(f.get("m"), Some(&Feature::value(Dtype::Float64)));
    assert_eq!(f.get("f"), Some(&Feature::value(Dtype::Float64)));
    assert_eq!(f.get("b"), Some(&Feature::value(Dtype::Bool)));
    assert_eq!(f.get("s"), Some(&Feature::value(Dtype::String)));
    assert_eq!(
        f.get("seq"),
        Some(&Feature::sequence(Feature::value(Dtype::Int64)))
    );
    assert_eq!(f.get("n"), Some(&Feature::value(Dtype::Float64)));
    let last = c.backend.get(2).unwrap();
    assert_eq!(last.get("m"), Some(&Value::Float(3.0)));
    assert_eq!(last.get("s"), Some(&Value::Null));
    assert_eq!(last.get("n"), Some(&Value::Null));
    assert_eq!(last.get("seq"), Some(&Value::List(vec![Value::Int(3)])));

    // A warm build reuses the cache's features without re-reading the data.
    let warm = json_out(&root, &["build", "jsonl", file.to_str().unwrap(), "--json"]);
    assert_eq!(warm["caches"][0]["built"], false);
}

#[test]
fn build_jsonl_with_a_features_file_into_out_dir() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let file = t.path().join("d.jsonl");
    write(
        &file,
        b"{\"x\": 1, \"label\": \"b\", \"arr\": [[1, 2], [3, 4]]}\n{\"x\": 2, \"label\": 0, \"arr\": [[5, 6], [7, 8]]}\n",
    );
    let feats = t.path().join("features.json");
    write(
        &feats,
        json!({
            "x": "int32",
            "label": {"type": "ClassLabel", "names": ["a", "b"]},
            "arr": {"type": "Array2D", "shape": [2, 2], "dtype": "uint8"},
        })
        .to_string()
        .as_bytes(),
    );
    let out = t.path().join("out");
    let args = [
        "build",
        "jsonl",
        file.to_str().unwrap(),
        "--features",
        feats.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ];
    let s = json_out(&root, &args);
    assert_eq!(cache_dir(&s, "train"), out.join("train"));
    let c = open_cache(out.join("train")).unwrap();
    assert_eq!(c.features().get("x"), Some(&Feature::value(Dtype::Int32)));
    let r = c.backend.get(0).unwrap();
    match r.get("label") {
        Some(Value::Label(l)) => assert_eq!((l.id, l.name.as_deref()), (1, Some("b"))),
        other => panic!("{other:?}"),
    }
    match r.get("arr") {
        Some(Value::Tensor(t)) => assert_eq!(t.data, vec![1, 2, 3, 4]),
        other => panic!("{other:?}"),
    }
    assert!(published(&root).is_empty());

    // A key the features do not declare is an error naming the line.
    write(
        &file,
        b"{\"x\": 1, \"label\": \"a\", \"arr\": [[1, 2], [3, 4]], \"zz\": 1}\n",
    );
    let e = fails(&root, &args, 1);
    assert!(e.contains("d.jsonl:1") && e.contains("'zz'"), "{e}");
    // A features file that is not one names itself.
    write(&feats, b"{\"x\": \"int33\"}");
    let e = fails(&root, &args, 1);
    assert!(e.contains("features.json") && e.contains("int33"), "{e}");
}

#[cfg(feature = "lance")]
#[test]
fn build_jsonl_as_lance() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let file = t.path().join("d.jsonl");
    let text: String = (0..50)
        .map(|i| format!("{{\"x\": {i}, \"s\": \"r{i}\"}}\n"))
        .collect();
    write(&file, text.as_bytes());
    let s = json_out(
        &root,
        &[
            "build",
            "jsonl",
            file.to_str().unwrap(),
            "--format",
            "lance",
            "--json",
        ],
    );
    assert_eq!(s["caches"][0]["layout"], "lance-rows");
    let c = open_cache(cache_dir(&s, "train")).unwrap();
    assert_eq!(c.len(), 50);
    assert_eq!(
        c.backend.get(49).unwrap().get("s"),
        Some(&Value::Str("r49".into()))
    );
    let r = json_out(
        &root,
        &[
            "inspect",
            cache_dir(&s, "train").to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(r["layout"], "lance-rows");
    assert_eq!(r["columns"][1]["name"], "s");
    let dir = cache_dir(&s, "train");
    let v = ok(&root, &["verify", dir.to_str().unwrap()]);
    assert!(v.contains("ok:") && v.contains("lance-rows"), "{v}");
    let last = ok(&root, &["cat", dir.to_str().unwrap(), "--rows", "-1"]);
    assert_eq!(
        serde_json::from_str::<J>(last.trim()).unwrap(),
        json!({"x": 49, "s": "r49"})
    );
    // The arrow-only knobs are refused for Lance.
    let e = fails(
        &root,
        &[
            "build",
            "jsonl",
            file.to_str().unwrap(),
            "--format",
            "lance",
            "--dedup",
            "4KB",
        ],
        2,
    );
    assert!(e.contains("--dedup"), "{e}");
    // A zstd level arrow-rs does not write is refused for Arrow.
    let e = fails(
        &root,
        &[
            "build",
            "jsonl",
            file.to_str().unwrap(),
            "--compression",
            "zstd",
            "--compression-level",
            "9",
        ],
        2,
    );
    assert!(e.contains("level 3"), "{e}");
}

#[test]
fn jsonl_type_conflict_names_line_and_column_and_publishes_nothing() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let file = t.path().join("bad.jsonl");
    write(&file, b"{\"x\": 1}\n{\"x\": null}\n{\"x\": \"oops\"}\n");
    let e = fails(&root, &["build", "jsonl", file.to_str().unwrap()], 1);
    assert!(e.contains("bad.jsonl:3"), "{e}");
    assert!(
        e.contains("'x'") && e.contains("string") && e.contains("line 1"),
        "{e}"
    );
    write(&file, b"{\"x\": 1}\nnot json\n");
    let e = fails(&root, &["build", "jsonl", file.to_str().unwrap()], 1);
    assert!(
        e.contains("bad.jsonl:2") && e.contains("invalid JSON"),
        "{e}"
    );
    write(&file, b"{\"x\": null}\n");
    let e = fails(&root, &["build", "jsonl", file.to_str().unwrap()], 1);
    assert!(e.contains("'x'") && e.contains("--features"), "{e}");
    assert!(published(&root).is_empty());
}

#[test]
fn build_csv_infers_and_ragged_rows_name_the_line() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let file = t.path().join("table.csv");
    write(
        &file,
        b"id,score,name,ok\n1,2.5,\"a, b\",true\n2,,c,FALSE\n3,4,d,\n",
    );
    let s = json_out(&root, &["build", "csv", file.to_str().unwrap(), "--json"]);
    let c = open_cache(cache_dir(&s, "train")).unwrap();
    let f = c.features();
    assert_eq!(f.get("id"), Some(&Feature::value(Dtype::Int64)));
    assert_eq!(f.get("score"), Some(&Feature::value(Dtype::Float64)));
    assert_eq!(f.get("name"), Some(&Feature::value(Dtype::String)));
    assert_eq!(f.get("ok"), Some(&Feature::value(Dtype::Bool)));
    assert_eq!(
        c.backend.get(0).unwrap().get("name"),
        Some(&Value::Str("a, b".into()))
    );
    assert_eq!(c.backend.get(1).unwrap().get("score"), Some(&Value::Null));
    assert_eq!(
        c.backend.get(1).unwrap().get("ok"),
        Some(&Value::Bool(false))
    );
    // The same stem as a JSON lines file does not share its cache.
    let name = cache_dir(&s, "train")
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(name.starts_with("table_csv_train_"), "{name}");

    let ragged = t.path().join("ragged.csv");
    write(&ragged, b"a,b\n1,2\n3\n");
    let e = fails(&root, &["build", "csv", ragged.to_str().unwrap()], 1);
    assert!(e.contains("ragged.csv:3"), "{e}");
    assert!(
        e.contains("1 field(s)") && e.contains("header has 2"),
        "{e}"
    );
    let mixed = t.path().join("mixed.csv");
    write(&mixed, b"a\n1\nx\n");
    let e = fails(&root, &["build", "csv", mixed.to_str().unwrap()], 1);
    assert!(e.contains("mixed.csv:3") && e.contains("'a'"), "{e}");
    assert_eq!(published(&root).len(), 1);
}

#[test]
fn bad_folders_and_images_name_the_path_and_publish_nothing() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let missing = t.path().join("nope");
    let e = fails(
        &root,
        &["build", "imagefolder", missing.to_str().unwrap()],
        1,
    );
    assert!(
        e.contains(missing.to_str().unwrap()) && e.contains("No such file"),
        "{e}"
    );

    let empty = t.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let e = fails(&root, &["build", "imagefolder", empty.to_str().unwrap()], 1);
    assert!(e.contains("empty") && e.contains("no class folders"), "{e}");

    let no_images = t.path().join("noimg");
    write(&no_images.join("cat/readme.txt"), b"hi");
    let e = fails(
        &root,
        &["build", "imagefolder", no_images.to_str().unwrap()],
        1,
    );
    assert!(e.contains("'cat'") && e.contains("no image"), "{e}");

    let corrupt = t.path().join("corrupt");
    write(&corrupt.join("cat/0.png"), &png(2, 2, 1));
    let mut broken = png(2, 2, 1);
    broken.truncate(20);
    write(&corrupt.join("cat/1.png"), &broken);
    let e = fails(
        &root,
        &["build", "imagefolder", corrupt.to_str().unwrap()],
        1,
    );
    assert!(e.contains("cat/1.png") && e.contains("damaged PNG"), "{e}");

    // A GIF cut short passes the magic-byte check; --decode-check decodes it
    // and names it.
    let gif_dir = t.path().join("gifs");
    let mut gif = std::io::Cursor::new(Vec::new());
    ::image::DynamicImage::ImageRgb8(::image::RgbImage::from_pixel(
        16,
        16,
        ::image::Rgb([9, 99, 199]),
    ))
    .write_to(&mut gif, ::image::ImageFormat::Gif)
    .unwrap();
    let mut gif = gif.into_inner();
    gif.truncate(gif.len() / 2);
    write(&gif_dir.join("cat/0.gif"), &gif);
    let e = fails(
        &root,
        &[
            "build",
            "imagefolder",
            gif_dir.to_str().unwrap(),
            "--decode-check",
        ],
        1,
    );
    assert!(e.contains("cat/0.gif") && e.contains("damaged GIF"), "{e}");

    let fake = t.path().join("fake");
    write(&fake.join("dog/0.jpg"), b"this is text, not a JPEG");
    let e = fails(&root, &["build", "imagefolder", fake.to_str().unwrap()], 1);
    assert!(
        e.contains("dog/0.jpg") && e.contains("not a recognised image"),
        "{e}"
    );

    let missing_file = t.path().join("none.jsonl");
    let e = fails(
        &root,
        &["build", "jsonl", missing_file.to_str().unwrap()],
        1,
    );
    assert!(e.contains("none.jsonl"), "{e}");
    assert!(published(&root).is_empty());
}

#[test]
fn a_path_that_is_not_a_cache_is_a_clear_error() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let plain = t.path().join("plain");
    write(&plain.join("file.txt"), b"x");
    let p = plain.to_str().unwrap();
    // `verify` keeps exit 1 for damage found; a path with no cache to
    // verify is a usage error (2).
    for (args, code) in [
        (vec!["inspect", p], 1),
        (vec!["verify", p], 2),
        (vec!["cat", p], 1),
        (vec!["export", p, "--row", "0", "--out", p], 1),
    ] {
        let e = fails(&root, &args, code);
        assert!(e.contains(p) && e.contains("not a cache"), "{args:?}: {e}");
    }
    let gone = t.path().join("gone");
    let e = fails(&root, &["inspect", gone.to_str().unwrap()], 1);
    assert!(e.contains(gone.to_str().unwrap()), "{e}");
    let e = fails(&root, &["ls", gone.to_str().unwrap()], 1);
    assert!(e.contains(gone.to_str().unwrap()), "{e}");
}

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
