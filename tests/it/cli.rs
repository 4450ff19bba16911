//! The `shardset` command line, run as a user runs it: the builds, and
//! bad input (each a clear message naming the path and reason, a non-zero
//! exit code, and nothing published); the commands that read a cache are
//! in `cli_read.rs`, which shares these helpers.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value as J};
use shardset::features::image;
use shardset::{
    open_cache, open_cache_with, Dtype, Feature, ImageData, ImageFormat, OpenOptions, Value,
};

/// A command line with its cache root in `root` (never the user's home).
pub(crate) fn cli(root: &Path) -> Command {
    let mut c = crate::common::shardset_cli();
    c.env("STABLE_DATASETS_CACHE_DIR", root);
    c
}

pub(crate) fn run(root: &Path, args: &[&str]) -> Output {
    cli(root).args(args).output().unwrap()
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn stderr(o: &Output) -> String {
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

pub(crate) fn json_out(root: &Path, args: &[&str]) -> J {
    let out = ok(root, args);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{args:?}: {e}\n{out}"))
}

pub(crate) fn png(w: u32, h: u32, seed: u8) -> Vec<u8> {
    let px = (0..w * h * 3)
        .map(|i| (i as u8).wrapping_mul(seed))
        .collect();
    image::encode(&ImageData::new(h, w, 3, px).unwrap(), ImageFormat::Png).unwrap()
}

pub(crate) fn jpeg(w: u32, h: u32) -> Vec<u8> {
    let px = (0..w * h * 3).map(|i| (i % 251) as u8).collect();
    image::encode(&ImageData::new(h, w, 3, px).unwrap(), ImageFormat::Jpeg).unwrap()
}

pub(crate) fn write(p: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

/// Every published cache (a dir holding `_metadata.json`) under `root`.
pub(crate) fn published(root: &Path) -> Vec<PathBuf> {
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
pub(crate) fn split_folder(dir: &Path) {
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

pub(crate) fn cache_dir(summary: &J, split: &str) -> PathBuf {
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
