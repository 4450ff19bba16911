//! WebDataset tars, written by the `webdataset` package's own `TarWriter`,
//! converted by `shardset build webdataset` into each layout: every sample
//! `webdataset.WebDataset` yields, in its order, each member's bytes kept
//! (images as they were encoded) or typed by extension, a missing member
//! null; gzip-compressed tars and split folders; bad tars a typed error.

use std::path::Path;

use shardset::{Dataset, OpenOptions};

use crate::common::{python_json, row_json, shardset_cli, succeeded};

/// Writes three tars of 7 samples at argv[1] and prints what
/// `webdataset.WebDataset` yields from them, each member as its bytes.
const WRITE: &str = r#"
import io, json, sys, os
import numpy as np, webdataset as wds
from PIL import Image
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
def img(i, fmt):
    b = io.BytesIO()
    Image.new("RGB", (4 + i % 3, 3), (i * 9 % 256, 0, 0)).save(b, format=fmt)
    return b.getvalue()
k = 0
for shard in range(3):
    with wds.TarWriter(f"{out}/shard-{shard:03d}.tar") as w:
        for j in range(7):
            s = {"__key__": f"s{k:04d}", "jpg": img(k, "JPEG"), "cls": str(k % 4),
                 "json": json.dumps({"k": k})}
            if k % 3:
                s["txt"] = f"caption {k}"
            if k % 5 == 0:
                s["seg.png"] = img(k, "PNG")
            s["npy"] = np.arange(k % 4, dtype=np.int16).tobytes()
            w.write(s)
            k += 1
rows = []
for s in wds.WebDataset(sorted(f"{out}/{f}" for f in os.listdir(out)), shardshuffle=False):
    rows.append({"__key__": s["__key__"],
                 **{e: list(v) for e, v in s.items() if not e.startswith("__")}})
print(json.dumps(rows))
"#;

/// What a sample reads back as: `cls` parsed, text members as strings,
/// others as bytes, every extension present (null where missing).
fn expected(dir: &Path) -> Vec<serde_json::Value> {
    let text = |v: &serde_json::Value| -> String {
        let b: Vec<u8> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u8)
            .collect();
        String::from_utf8(b).unwrap()
    };
    python_json(WRITE, &[dir])
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let mut m = serde_json::Map::new();
            m.insert("__key__".into(), s["__key__"].clone());
            for ext in ["cls", "jpg", "json", "npy", "seg.png", "txt"] {
                let col = ext.replace('.', "_");
                let v = match (ext, s.get(ext)) {
                    (_, None) => serde_json::Value::Null,
                    ("cls", Some(v)) => text(v).parse::<i64>().unwrap().into(),
                    ("json" | "txt", Some(v)) => text(v).into(),
                    (_, Some(v)) => v.clone(),
                };
                m.insert(col, v);
            }
            serde_json::Value::Object(m)
        })
        .collect()
}

fn raw(dir: &Path) -> Dataset {
    Dataset::new(
        shardset::open_cache_with(dir, &OpenOptions::default().with_decode_images(false)).unwrap(),
    )
}

#[test]
fn the_cli_converts_webdataset_tars_into_each_layout() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("wds");
    let want = expected(&src);
    assert_eq!(want.len(), 21);
    for layout in ["arrow", "lance"] {
        let out = t.path().join(layout);
        succeeded(
            shardset_cli()
                .args(["build", "webdataset"])
                .arg(&src)
                .args(["--format", layout, "--quiet", "--out"])
                .arg(&out),
        );
        let ds = raw(&out.join("train"));
        let f = ds.features();
        assert_eq!(f.get("jpg").unwrap().class_name(), "Image", "{layout}");
        assert_eq!(f.get("seg_png").unwrap().class_name(), "Image", "{layout}");
        assert_eq!(ds.len(), 21, "{layout}");
        for (i, w) in want.iter().enumerate() {
            assert_eq!(&row_json(&ds, i as i64), w, "{layout} sample {i}");
        }
    }
}

#[test]
fn gzip_tars_split_folders_and_bad_tars() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("wds");
    let want = expected(&src);
    // A split folder per split; the test split's tar gzip-compressed.
    let root = t.path().join("splits");
    std::fs::create_dir_all(root.join("train")).unwrap();
    std::fs::create_dir_all(root.join("test")).unwrap();
    for s in 0..2 {
        let name = format!("shard-{s:03}.tar");
        std::fs::copy(src.join(&name), root.join("train").join(&name)).unwrap();
    }
    let tar = std::fs::read(src.join("shard-002.tar")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &tar).unwrap();
    std::fs::write(
        root.join("test").join("shard-002.tar.gz"),
        gz.finish().unwrap(),
    )
    .unwrap();
    let out = t.path().join("out");
    succeeded(
        shardset_cli()
            .args(["build", "webdataset"])
            .arg(&root)
            .args(["--quiet", "--out"])
            .arg(&out),
    );
    let train = raw(&out.join("train"));
    let test = raw(&out.join("test"));
    assert_eq!((train.len(), test.len()), (14, 7));
    for i in 0..7 {
        assert_eq!(row_json(&test, i), want[14 + i as usize], "test {i}");
        assert_eq!(
            row_json(&train, i + 7),
            want[7 + i as usize],
            "train {}",
            i + 7
        );
    }
    // Not a tar: a typed error naming the file, and nothing published.
    let bad = t.path().join("bad");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(bad.join("x.tar"), vec![7u8; 3000]).unwrap();
    let res = shardset_cli()
        .args(["build", "webdataset"])
        .arg(&bad)
        .args(["--quiet", "--out"])
        .arg(t.path().join("bad-out"))
        .output()
        .unwrap();
    assert!(!res.status.success());
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("x.tar"), "{err}");
    assert!(!t.path().join("bad-out").join("train").exists());
}

/// A dotted column name (which webdataset's extensions have, and Lance
/// reads as a struct path) is refused by the Lance writer before anything
/// is written, naming the column.
#[test]
fn lance_refuses_a_dotted_column_name_naming_it() {
    use shardset::{Dtype, Example, Feature, Features, LanceWriteOptions};
    let t = tempfile::tempdir().unwrap();
    let f = Features::new().with("seg.png", Feature::value(Dtype::Int64));
    let rows = (0..3).map(|i| Example::new().with("seg.png", i as i64));
    let dir = t.path().join("c");
    match shardset::write_lance_cache(rows, &f, &dir, &LanceWriteOptions::default()) {
        Err(shardset::Error::InvalidFeature(m)) => assert!(m.contains("'seg.png'"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(!dir.exists());
}
