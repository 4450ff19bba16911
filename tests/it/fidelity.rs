//! A cache holds exactly what the user gave it, and says exactly what it
//! checked: floats from text read back bit for bit, opening a reference
//! cache reads only a shard's footer, `verify` and `why` never claim a check
//! they did not make.

use std::path::Path;
use std::process::Output;

use serde_json::{json, Value as J};
use shardset::{open_cache, Value};

use crate::common::*;

fn cli(args: &[&str]) -> Output {
    crate::common::shardset_cli()
        .args(args)
        .env(
            "STABLE_DATASETS_CACHE_DIR",
            std::env::temp_dir().join("shardset-fidelity-unused"),
        )
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// SplitMix64: the bit patterns of the float tests.
struct Mix(u64);
impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Finite f64 values: random bit patterns (every exponent, subnormals
/// included), human-scale numbers with 16-17 significant digits, and the
/// edges.
fn f64_values(n: usize) -> Vec<f64> {
    let mut m = Mix(0x5eed_f10a7);
    let mut out = vec![
        0.0,
        -0.0,
        f64::MIN_POSITIVE,
        -f64::MIN_POSITIVE,
        f64::from_bits(1),
        -f64::from_bits(1),
        f64::from_bits(0x000f_ffff_ffff_ffff),
        f64::MAX,
        f64::MIN,
        f64::EPSILON,
        1.0,
        0.1,
        3950.0422604768373,
        f64::from(f32::MAX),
        f64::from(f32::MIN_POSITIVE),
        65504.0,
        65520.0,
    ];
    while out.len() < n {
        let bits = m.next();
        let x = match out.len() % 4 {
            // Any bit pattern.
            0 | 1 => f64::from_bits(bits),
            // Subnormal.
            2 => f64::from_bits(bits & 0x800f_ffff_ffff_ffff),
            // Human scale: [-1e4, 1e4) with all 53 bits of mantissa.
            _ => ((bits >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 2e4,
        };
        if x.is_finite() {
            out.push(x);
        }
    }
    out
}

/// 17 significant digits, e.g. `3.9500422604768373e3`.
fn digits17(x: f64) -> String {
    format!("{x:.16e}")
}

#[test]
fn floats_from_jsonl_and_csv_read_back_bit_exact() {
    let t = tempfile::tempdir().unwrap();
    let xs = f64_values(3000);
    let mut m = Mix(7);
    let f32s: Vec<f32> = (0..xs.len())
        .map(|_| loop {
            let v = f32::from_bits(m.next() as u32);
            if v.is_finite() {
                break v;
            }
        })
        .collect();
    let f16s: Vec<half::f16> = (0..xs.len())
        .map(|_| loop {
            let v = half::f16::from_bits(m.next() as u16);
            if v.is_finite() {
                break v;
            }
        })
        .collect();
    // Row i: d is xs[i] (shortest or 17 digits, alternating); f and h are an
    // f32 / f16 bit pattern in its shortest decimal on even rows, and xs[i]'s
    // text (rounded to the column's width on reading) on odd rows.
    let mut rows_text = Vec::new();
    let mut want: Vec<(u64, u32, u16)> = Vec::new();
    for (i, &x) in xs.iter().enumerate() {
        let dt = if i % 2 == 0 {
            format!("{x:?}")
        } else {
            digits17(x)
        };
        let (ft, fw) = if i % 2 == 0 {
            (format!("{:?}", f32s[i]), f32s[i].to_bits())
        } else {
            (dt.clone(), (x as f32).to_bits())
        };
        let (ht, hw) = if i % 2 == 0 {
            (format!("{:?}", f16s[i].to_f32()), f16s[i].to_bits())
        } else {
            (dt.clone(), half::f16::from_f64(x).to_bits())
        };
        assert_eq!(dt.parse::<f64>().unwrap().to_bits(), x.to_bits(), "{dt}");
        rows_text.push((dt, ft, ht));
        want.push((x.to_bits(), fw, hw));
    }
    let features = t.path().join("features.json");
    std::fs::write(
        &features,
        json!({"d": "float64", "f": "float32", "h": "float16"}).to_string(),
    )
    .unwrap();
    let jsonl = t.path().join("floats.jsonl");
    let csv = t.path().join("floats.csv");
    let mut jl = String::new();
    let mut cs = String::from("d,f,h\n");
    for (d, f, h) in &rows_text {
        // The numbers go in as JSON number tokens, exactly as written.
        jl.push_str(&format!("{{\"d\": {d}, \"f\": {f}, \"h\": {h}}}\n"));
        cs.push_str(&format!("{d},{f},{h}\n"));
    }
    std::fs::write(&jsonl, jl).unwrap();
    std::fs::write(&csv, cs).unwrap();

    for (kind, file) in [("jsonl", &jsonl), ("csv", &csv)] {
        let out = t.path().join(format!("out-{kind}"));
        let o = cli(&[
            "build",
            kind,
            file.to_str().unwrap(),
            "--features",
            features.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{kind}: {}", text(&o.stderr));
        let dir = out.join("train");
        let c = open_cache(&dir).unwrap();
        assert_eq!(c.len(), xs.len() as u64);
        let mut wrong = Vec::new();
        for (i, w) in want.iter().enumerate() {
            let r = c.backend.get(i as i64).unwrap();
            let got = |k: &str| match r.get(k) {
                Some(Value::Float(v)) => *v,
                other => panic!("{kind} row {i} {k}: {other:?}"),
            };
            let g = (
                got("d").to_bits(),
                (got("f") as f32).to_bits(),
                half::f16::from_f64(got("h")).to_bits(),
            );
            if g != *w {
                wrong.push((i, rows_text[i].clone(), g, *w));
            }
        }
        assert!(
            wrong.is_empty(),
            "{kind}: {} of {} rows differ, first: {:?}",
            wrong.len(),
            xs.len(),
            &wrong[..wrong.len().min(3)]
        );

        // `cat` prints each float in a decimal that reads back to the same bits.
        let o = cli(&["cat", dir.to_str().unwrap(), "--rows", "0.."]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let lines: Vec<J> = text(&o.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), xs.len());
        for (i, (l, w)) in lines.iter().zip(&want).enumerate() {
            // JSON has no infinity: a float32/float16 that overflowed prints null.
            let finite = |k: &str, bits: bool| {
                if !bits {
                    assert_eq!(l[k], J::Null, "cat row {i} {k}: {l}");
                }
                bits
            };
            if !finite("f", f32::from_bits(w.1).is_finite())
                | !finite("h", half::f16::from_bits(w.2).is_finite())
            {
                continue;
            }
            let num = |k: &str| l[k].to_string();
            let d: f64 = num("d").parse().unwrap();
            let f: f64 = num("f").parse().unwrap();
            let h: f64 = num("h").parse().unwrap();
            assert_eq!(
                (
                    d.to_bits(),
                    (f as f32).to_bits(),
                    half::f16::from_f64(h).to_bits()
                ),
                *w,
                "cat row {i}: {l}"
            );
            // Shortest out: a float32 prints as the value of its own shortest
            // decimal (`0.1`), not of its f64 expansion (`0.10000000149011612`).
            if i % 2 == 0 {
                let shortest: f64 = format!("{:?}", f32s[i]).parse().unwrap();
                assert_eq!(
                    f.to_bits(),
                    shortest.to_bits(),
                    "cat row {i} f: {}",
                    num("f")
                );
            }
        }
    }
}

/// Bytes allocated on this thread while `f` runs.
fn allocated_during<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = crate::alloc_count::thread_allocated();
    let out = f();
    (out, crate::alloc_count::thread_allocated() - before)
}

/// Keeps only the keys the reference writes (no features description, no
/// checksums), as a cache the reference wrote.
fn as_reference_cache(dir: &Path) {
    let path = dir.join("_metadata.json");
    let m: J = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut out = serde_json::Map::new();
    for k in REFERENCE_ARROW_KEYS {
        if let Some(v) = m.get(k) {
            out.insert(k.into(), v.clone());
        }
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&J::Object(out)).unwrap()).unwrap();
}

#[test]
fn opening_a_reference_cache_reads_only_the_footer() {
    use shardset::{write_arrow_cache, ArrowWriteOptions, Dtype, Example, Feature, Features};
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("big");
    let features = Features::new()
        .with("i", Feature::value(Dtype::Int64))
        .with("blob", Feature::value(Dtype::Binary));
    // One shard of ~48 MiB.
    let rows = (0..12_000i64).map(|i| {
        Example::new()
            .with("i", i)
            .with("blob", Value::Bytes(vec![(i % 251) as u8; 4096].into()))
    });
    write_arrow_cache(rows, &features, &dir, &ArrowWriteOptions::default()).unwrap();
    as_reference_cache(&dir);
    let shard_bytes = std::fs::metadata(dir.join("shard-00000.arrow"))
        .unwrap()
        .len();
    assert!(shard_bytes > 40 << 20, "{shard_bytes}");

    let (c, bytes) = allocated_during(|| open_cache(&dir).unwrap());
    eprintln!("opening a {shard_bytes}-byte reference shard allocated {bytes} bytes");
    assert_eq!(c.features_source, shardset::FeaturesSource::Inferred);
    assert_eq!(c.backend.get(0).unwrap().get("i"), Some(&Value::Int(0)));
    assert!(
        bytes < 4 << 20,
        "opening a {shard_bytes}-byte reference shard allocated {bytes} bytes"
    );
}

fn copy_to(t: &tempfile::TempDir, golden_name: &str) -> std::path::PathBuf {
    let dst = t.path().join(golden_name);
    copy_dir(&golden().join(golden_name), &dst);
    dst
}

/// Every file under `dir` with its bytes.
fn files(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    snapshot(dir)
}

fn flip_byte_in(path: &Path, at: usize) {
    let mut b = std::fs::read(path).unwrap();
    b[at] ^= 0x01;
    std::fs::write(path, b).unwrap();
}

/// The first `.lance` data file of a Lance cache.
fn lance_data_file(dir: &Path) -> std::path::PathBuf {
    std::fs::read_dir(dir.join("data"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "lance"))
        .unwrap()
}

#[test]
fn verify_says_what_it_checked_on_reference_caches_of_every_layout() {
    let t = tempfile::tempdir().unwrap();
    let mut layouts = vec![
        "arrow_multi_shard",
        "arrow_single_zstd",
        "arrow_empty",
        "arrow_video_path",
        "arrow_video_bytes",
    ];
    if cfg!(feature = "lance") {
        layouts.push("lance_rows");
    }
    if cfg!(feature = "video") {
        layouts.push("lance_video_frames");
    }
    for name in layouts {
        let dir = copy_to(&t, name);
        let before = files(&dir);
        // Healthy: exit 0, structure checked, data bytes said to be unverified.
        let o = cli(&["verify", dir.to_str().unwrap()]);
        let out = text(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{name}: {out}{}", text(&o.stderr));
        assert!(out.contains("checked: structure"), "{name}: {out}");
        assert!(
            out.contains("no checksums recorded: data bytes not verified"),
            "{name}: {out}"
        );
        assert!(!out.contains("matches its"), "{name}: {out}");
        // inspect --verify agrees, and claims no data check.
        let o = cli(&["inspect", dir.to_str().unwrap(), "--verify", "--json"]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o.stderr));
        let r: J = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["checksums"]["verified"]["ok"], true, "{name}");
        assert_eq!(
            r["checksums"]["verified"]["data_bytes_verified"], false,
            "{name}"
        );
        // why claims no checksum match.
        let o = cli(&["why", dir.to_str().unwrap()]);
        let out = text(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{name}: {out}{}", text(&o.stderr));
        assert!(out.contains("data bytes not verified"), "{name}: {out}");
        assert!(!out.contains("matches its checksum"), "{name}: {out}");
        assert_eq!(files(&dir), before, "{name}: verifying changed the cache");

        // Stamped: the reference's files are untouched, one file is added,
        // and a flipped data byte is now found and named.
        let o = cli(&["verify", "--stamp", dir.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o.stderr));
        let after: Vec<_> = files(&dir)
            .into_iter()
            .filter(|(p, _)| !p.ends_with("_checksums.json"))
            .collect();
        assert_eq!(after, before, "{name}: stamping changed a file");
        assert!(dir.join("_checksums.json").is_file());
        let o = cli(&["verify", dir.to_str().unwrap()]);
        let out = text(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{name}: {out}");
        assert!(out.contains("against the xxh64 stamped"), "{name}: {out}");
        assert!(!out.contains("not verified"), "{name}: {out}");
        // Stamping twice is refused.
        let o = cli(&["verify", "--stamp", dir.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{name}");
        assert!(text(&o.stderr).contains("already"), "{name}");

        let victim = match name {
            "arrow_empty" => continue,
            "lance_rows" | "lance_video_frames" => lance_data_file(&dir),
            _ => dir.join("shard-00000.arrow"),
        };
        let len = std::fs::metadata(&victim).unwrap().len() as usize;
        flip_byte_in(&victim, len / 2);
        let o = cli(&["verify", dir.to_str().unwrap()]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains(victim.to_str().unwrap()), "{name}: {err}");
        let o = cli(&["why", dir.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{name}");
        assert!(
            text(&o.stdout).contains(victim.file_name().unwrap().to_str().unwrap()),
            "{name}: {}",
            text(&o.stdout)
        );
    }
}

#[test]
fn verify_finds_structural_damage_without_checksums() {
    let t = tempfile::tempdir().unwrap();
    // A truncated reference shard: named, exit 1.
    let dir = copy_to(&t, "arrow_multi_shard");
    let shard = dir.join("shard-00001.arrow");
    let b = std::fs::read(&shard).unwrap();
    std::fs::write(&shard, &b[..b.len() - 100]).unwrap();
    let o = cli(&["verify", dir.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("shard-00001.arrow"), "{err}");

    // A reference frames cache whose metadata disagrees with its rows.
    if cfg!(feature = "video") {
        let dir = copy_to(&t, "lance_video_frames");
        let p = dir.join("_metadata.json");
        let mut m: J = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        let w = m["videos"][0]["W"].as_u64().unwrap();
        m["videos"][0]["W"] = json!(w + 2);
        std::fs::write(&p, serde_json::to_vec(&m).unwrap()).unwrap();
        let o = cli(&["verify", dir.to_str().unwrap()]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}{}", text(&o.stdout));
        assert!(err.contains("the metadata says"), "{err}");
    }

    // Bad usage: exit 2.
    let o = cli(&["verify", t.path().join("nowhere").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}

#[test]
fn shardset_caches_verify_their_data_bytes() {
    use shardset::{write_arrow_cache, ArrowWriteOptions};
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("c");
    write_arrow_cache(
        (0..40).map(f_row),
        &features_f(),
        &dir,
        &ArrowWriteOptions::default(),
    )
    .unwrap();
    let o = cli(&["verify", dir.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("data bytes: 1 shard(s) against the xxh64 recorded in _metadata.json"),
        "{out}"
    );
    assert!(!out.contains("not verified"), "{out}");
    let o = cli(&["why", dir.to_str().unwrap()]);
    assert!(text(&o.stdout).contains("against the xxh64 recorded"));
}

#[test]
fn cat_prints_a_video_path_cell_as_stored_and_resolved() {
    let t = tempfile::tempdir().unwrap();
    let dir = copy_to(&t, "arrow_video_path");
    let o = cli(&["cat", dir.to_str().unwrap(), "--rows", "0"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let row: J = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    let cell = row
        .as_object()
        .unwrap()
        .values()
        .find(|v| v.get("mode").is_some())
        .expect("a video cell")
        .clone();
    let stored = cell["path"].as_str().unwrap();
    // The stored cell, read straight from the shard with arrow.
    let c = shardset::open_cache_with(
        &dir,
        &shardset::OpenOptions::default().with_decode_images(false),
    )
    .unwrap();
    let raw = c.backend.get_raw(0).unwrap();
    let col = raw
        .columns()
        .iter()
        .find_map(|a| {
            use arrow_array::cast::AsArray;
            a.as_struct_opt()
                .and_then(|s| s.column_by_name("path"))
                .map(|p| p.as_string::<i32>().value(0).to_string())
        })
        .unwrap();
    assert_eq!(stored, col);
    assert!(!Path::new(stored).is_absolute(), "{stored}");
    let resolved = cell["resolved_path"].as_str().unwrap();
    assert_eq!(
        Path::new(resolved),
        dir.join("_assets/video").join(stored),
        "{cell}"
    );
}
