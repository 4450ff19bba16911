//! `seed-systems [--dir D] [--only NAME]`: the figures of staged edits,
//! in-memory reads, dedup, compression levels and verify-on-read, printed as
//! JSON lines. Every timed read opens a fresh backend; reads and writes run
//! on one thread (encode threads 1, reads on the calling thread). The
//! content of each workload is fixed here, before any run:
//!
//! - `edit`: 131,072 rows of {i: int64, payload: 16 KiB of seeded random
//!   bytes} (2 GiB; this machine has 9 GB of free disk, so not 10 GB) in
//!   64 shards of 32 MiB; one cell set and committed, against writing the
//!   same rows again.
//! - `memory`: 1,000,000 rows of {x: int32, label: ClassLabel(10), data:
//!   64 random bytes}, uncompressed and zstd; 200,000 random gets, mapped
//!   and in memory.
//! - `dedup`: 10 distinct 1 MiB float32 tensors (512 x 512) over 2,000 rows
//!   (2 GiB without dedup), with and without dedup; 500 random gets and
//!   raw gets each; and the dedup cache alone at 10,000 rows.
//! - `levels`: 1,000,000 scalar rows (the `scalar` workload) and 200,000
//!   rows of text-like strings (40 words of a 300-word vocabulary, and the
//!   same bytes reversed as binary): Arrow none/lz4/zstd(3), Lance
//!   none/lz4/zstd 1, 3, 9, 19; bytes on disk, write and full-scan seconds.
//! - `verify`: the `memory` rows with per-record checksums: gets, take-128
//!   and a full scan with and without verify-on-read.
//! - `lance-edit`: the `edit` rows as a Lance cache of 64 fragments (2,048
//!   rows each); one cell set and committed (a Lance version), against
//!   writing the same rows again.
//! - `fixed`: 200,000 rows of {i: int64, a: Array3D (8, 8, 4) float32 of
//!   seeded random values (1 KiB)}, stored `large_binary` and
//!   `fixed_size_binary`: bytes on disk, 200,000 random decoded gets, 1,000
//!   takes of 128 random rows (raw batches) and a full scan.

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use shardset::layouts::stats::dir_size;
use shardset::{
    open_cache, open_cache_with, write_arrow_cache, ArrowWriteOptions, Backend, Compression, Dtype,
    Example, Feature, Features, IterOptions, OpenOptions, SplitMix64, Tensor,
};

use super::{random_indices, scalar_features, scalar_rows};

fn line(workload: &str, fields: serde_json::Value) {
    let mut o = serde_json::json!({"side": "shardset", "workload": workload, "threads": 1});
    for (k, v) in fields.as_object().expect("object") {
        o[k] = v.clone();
    }
    println!("{o}");
}

fn secs<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t = Instant::now();
    let r = f();
    (r, t.elapsed().as_secs_f64())
}

fn random_bytes(rng: &mut SplitMix64, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    for c in b.chunks_exact_mut(8) {
        c.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
    b
}

fn one_thread() -> ArrowWriteOptions {
    ArrowWriteOptions::default().with_encode_threads(1)
}

/// The disk bytes of a cache's shards (or whole directory for Lance).
fn bytes_of(dir: &Path) -> u64 {
    dir_size(dir).unwrap_or(0)
}

/// Rows of the `edit` and `lance-edit` workloads.
const EDIT_ROWS: usize = 131_072;

fn edit_features() -> Features {
    Features::new()
        .with("i", Feature::value(Dtype::Int64))
        .with("payload", Feature::value(Dtype::Binary))
}

/// The edit workloads' rows: an index and 16 KiB of seeded random bytes.
fn edit_rows() -> impl Iterator<Item = Example> {
    let mut rng = SplitMix64::new(11);
    (0..EDIT_ROWS).map(move |i| {
        Example::new()
            .with("i", i as i64)
            .with("payload", random_bytes(&mut rng, 16 << 10))
    })
}

fn edit(root: &Path) {
    let (f, n) = (edit_features(), EDIT_ROWS);
    let rows = edit_rows;
    let dir = root.join("edit");
    let opts = one_thread()
        .try_with_batch_size(256)
        .unwrap()
        .try_with_shard_size_bytes(Some(32 << 20))
        .unwrap();
    let (_, build) = secs(|| write_arrow_cache(rows(), &f, &dir, &opts).unwrap());
    let cache_bytes = bytes_of(&dir);
    let cache = open_cache(&dir).unwrap();
    let shards = cache.backend.num_shards();
    let (report, commit) = secs(|| {
        let mut st = cache.edit().unwrap();
        st.set_cell(70_000, "i", -1i64).unwrap();
        st.commit().unwrap()
    });
    // The rebuild writes the same rows again (the cache is replaced).
    let (_, rebuild) = secs(|| write_arrow_cache(rows(), &f, &dir, &opts).unwrap());
    line(
        "seed-edit",
        serde_json::json!({
            "rows": n, "cache_bytes": cache_bytes, "shards": shards,
            "build_seconds": build,
            "commit_seconds": commit, "commit_bytes_written": report.change.bytes_written,
            "shards_rewritten": report.change.shards_rewritten,
            "rebuild_seconds": rebuild, "rebuild_bytes_written": cache_bytes,
            "rebuild_over_commit_seconds": rebuild / commit,
            "rebuild_over_commit_bytes": cache_bytes as f64 / report.change.bytes_written as f64,
        }),
    );
}

#[cfg(feature = "lance")]
fn lance_edit(root: &Path) {
    let (f, n) = (edit_features(), EDIT_ROWS);
    let rows = edit_rows;
    let dir = root.join("lance-edit");
    let opts = shardset::LanceWriteOptions::default()
        .with_encode_threads(1)
        .try_with_max_rows_per_file(2048)
        .unwrap();
    let (_, build) = secs(|| shardset::write_lance_cache(rows(), &f, &dir, &opts).unwrap());
    let cache_bytes = bytes_of(&dir);
    let cache = open_cache(&dir).unwrap();
    let fragments = cache.backend.num_shards();
    let (report, commit) = secs(|| {
        let mut st = cache.edit().unwrap();
        st.set_cell(70_000, "i", -1i64).unwrap();
        st.commit().unwrap()
    });
    drop(cache);
    let (_, rebuild) = secs(|| shardset::write_lance_cache(rows(), &f, &dir, &opts).unwrap());
    line(
        "seed-lance-edit",
        serde_json::json!({
            "rows": n, "cache_bytes": cache_bytes, "fragments": fragments,
            "build_seconds": build,
            "commit_seconds": commit, "commit_bytes_written": report.change.bytes_written,
            "fragments_rewritten": report.change.shards_rewritten,
            "rebuild_seconds": rebuild, "rebuild_bytes_written": cache_bytes,
            "rebuild_over_commit_seconds": rebuild / commit,
            "rebuild_over_commit_bytes": cache_bytes as f64 / report.change.bytes_written as f64,
        }),
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn fixed(root: &Path) {
    let n = 200_000usize;
    let rows = || {
        let mut rng = SplitMix64::new(17);
        (0..n).map(move |i| {
            let v: Vec<f32> = (0..256)
                .map(|_| (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32)
                .collect();
            Example::new()
                .with("i", i as i64)
                .with("a", Tensor::from_vec(vec![8, 8, 4], v).unwrap())
        })
    };
    let idx = random_indices(n, 200_000, 7);
    let takes: Vec<Vec<i64>> = (0..1000u64)
        .map(|k| random_indices(n, 128, 100 + k))
        .collect();
    let mut out = serde_json::Map::new();
    for fixed in [false, true] {
        let name = if fixed { "fixed" } else { "binary" };
        let feature = if fixed {
            Feature::fixed_array(vec![8, 8, 4], Dtype::Float32)
        } else {
            Feature::array(vec![8, 8, 4], Dtype::Float32)
        };
        let f = Features::new()
            .with("i", Feature::value(Dtype::Int64))
            .with("a", feature.unwrap());
        let dir = root.join(format!("fixed-{name}"));
        write_arrow_cache(rows(), &f, &dir, &one_thread()).unwrap();
        out.insert(format!("{name}_bytes"), bytes_of(&dir).into());
        let c = open_cache(&dir).unwrap();
        out.insert(
            format!("{name}_get_seconds"),
            gets(c.backend.as_ref(), &idx).into(),
        );
        let c = open_cache(&dir).unwrap();
        let t = secs(|| {
            for t in &takes {
                black_box(c.backend.take(t).unwrap());
            }
        })
        .1;
        out.insert(format!("{name}_take128_seconds"), t.into());
        out.insert(
            format!("{name}_scan_seconds"),
            scan_with(&dir, &OpenOptions::default()).into(),
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
    out.insert("rows".into(), n.into());
    out.insert("gets".into(), idx.len().into());
    line("seed-fixed", serde_json::Value::Object(out));
}

fn memory_features() -> Features {
    scalar_features().with("data", Feature::value(Dtype::Binary))
}

fn memory_rows(n: usize) -> impl Iterator<Item = Example> {
    let mut rng = SplitMix64::new(5);
    scalar_rows(n).map(move |e| e.with("data", random_bytes(&mut rng, 64)))
}

fn gets(b: &dyn Backend, idx: &[i64]) -> f64 {
    secs(|| {
        for &i in idx {
            black_box(b.get(i).unwrap());
        }
    })
    .1
}

fn memory(root: &Path) {
    let n = 1_000_000;
    let idx = random_indices(n, 200_000, 3);
    for c in [Compression::None, Compression::Zstd] {
        let dir = root.join(format!("memory-{c}"));
        write_arrow_cache(
            memory_rows(n),
            &memory_features(),
            &dir,
            &one_thread().with_compression(c),
        )
        .unwrap();
        // Mapped: a fresh backend (files in the page cache, just written).
        let mapped = open_cache(&dir).unwrap();
        let t_map = gets(mapped.backend.as_ref(), &idx);
        let (mem, load) =
            secs(|| open_cache_with(&dir, &OpenOptions::default().with_in_memory(true)).unwrap());
        assert!(mem.in_memory);
        let t_mem = gets(mem.backend.as_ref(), &idx);
        line(
            "seed-memory",
            serde_json::json!({
                "compression": c.name(), "rows": n, "gets": idx.len(),
                "cache_bytes": bytes_of(&dir),
                "mapped_gets_per_s": idx.len() as f64 / t_map,
                "in_memory_gets_per_s": idx.len() as f64 / t_mem,
                "in_memory_load_seconds": load,
                "in_memory_over_mapped": t_map / t_mem,
            }),
        );
    }
}

fn dedup(root: &Path) {
    let side = 512usize;
    let f = Features::new()
        .with("i", Feature::value(Dtype::Int64))
        .with(
            "t",
            Feature::array(vec![side, side], Dtype::Float32).unwrap(),
        );
    let tensors: Vec<Tensor> = (0..10)
        .map(|k| {
            let v: Vec<f32> = (0..side * side)
                .map(|j| (k * 1_000_003 + j) as f32)
                .collect();
            Tensor::from_vec(vec![side, side], v).unwrap()
        })
        .collect();
    let rows = |n: usize| {
        let t = tensors.clone();
        (0..n).map(move |i| {
            Example::new()
                .with("i", i as i64)
                .with("t", t[i % 10].clone())
        })
    };
    let opts = |d: bool| {
        one_thread()
            .try_with_batch_size(64)
            .unwrap()
            .try_with_dedup(d.then_some(4096))
            .unwrap()
    };
    let n = 2000;
    let idx = random_indices(n, 500, 9);
    let mut res = Vec::new();
    for d in [false, true] {
        let dir = root.join(format!("dedup-{d}"));
        let (_, w) = secs(|| write_arrow_cache(rows(n), &f, &dir, &opts(d)).unwrap());
        let c = open_cache(&dir).unwrap();
        let t_get = gets(c.backend.as_ref(), &idx);
        let c = open_cache(&dir).unwrap();
        let (_, t_raw) = secs(|| {
            for &i in &idx {
                black_box(c.backend.get_raw(i).unwrap());
            }
        });
        res.push((bytes_of(&dir), w, t_get, t_raw));
        std::fs::remove_dir_all(&dir).unwrap();
    }
    let (plain, dd) = (res[0], res[1]);
    line(
        "seed-dedup",
        serde_json::json!({
            "rows": n, "distinct": 10, "value_bytes": side * side * 4, "gets": idx.len(),
            "plain_bytes": plain.0, "dedup_bytes": dd.0,
            "space_saved_ratio": plain.0 as f64 / dd.0 as f64,
            "plain_write_seconds": plain.1, "dedup_write_seconds": dd.1,
            "plain_gets_per_s": idx.len() as f64 / plain.2,
            "dedup_gets_per_s": idx.len() as f64 / dd.2,
            "plain_raw_gets_per_s": idx.len() as f64 / plain.3,
            "dedup_raw_gets_per_s": idx.len() as f64 / dd.3,
        }),
    );
    let dir = root.join("dedup-10k");
    let (_, w) = secs(|| write_arrow_cache(rows(10_000), &f, &dir, &opts(true)).unwrap());
    line(
        "seed-dedup",
        serde_json::json!({"rows": 10_000, "distinct": 10, "value_bytes": side * side * 4,
            "dedup_bytes": bytes_of(&dir), "dedup_write_seconds": w,
            "plain_bytes_if_written": 10_000u64 * (side * side * 4) as u64}),
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn text_features() -> Features {
    Features::new()
        .with("text", Feature::value(Dtype::String))
        .with("blob", Feature::value(Dtype::Binary))
}

fn text_rows(n: usize) -> impl Iterator<Item = Example> {
    let words: Vec<String> = (0..300u64)
        .map(|w| format!("w{}x{}", w * 7919 % 1000, w % 13))
        .collect();
    let mut rng = SplitMix64::new(7);
    (0..n).map(move |_| {
        let mut text = String::new();
        for _ in 0..40 {
            text.push_str(&words[rng.below(300) as usize]);
            text.push(' ');
        }
        let blob: Vec<u8> = text.as_bytes().iter().rev().copied().collect();
        Example::new().with("text", text).with("blob", blob)
    })
}

fn scan(dir: &Path) -> f64 {
    scan_with(dir, &OpenOptions::default())
}

fn scan_with(dir: &Path, opts: &OpenOptions) -> f64 {
    let c = open_cache_with(dir, opts).unwrap();
    secs(|| {
        for b in c.backend.iter_batches(&IterOptions::default()).unwrap() {
            black_box(b.unwrap());
        }
    })
    .1
}

fn levels(root: &Path) {
    type Rows = Box<dyn Fn() -> Box<dyn Iterator<Item = Example>>>;
    let data: Vec<(&str, Features, usize, Rows)> = vec![
        (
            "scalar",
            scalar_features(),
            1_000_000,
            Box::new(|| Box::new(scalar_rows(1_000_000))),
        ),
        (
            "text",
            text_features(),
            200_000,
            Box::new(|| Box::new(text_rows(200_000))),
        ),
    ];
    for (name, f, n, rows) in &data {
        for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let dir = root.join(format!("lv-{name}-arrow-{c}"));
            let (_, w) = secs(|| {
                write_arrow_cache(rows(), f, &dir, &one_thread().with_compression(c)).unwrap()
            });
            line(
                "seed-levels",
                serde_json::json!({"data": name, "rows": n, "format": "arrow", "codec": c.name(),
                    "level": (c == Compression::Zstd).then_some(3),
                    "bytes": bytes_of(&dir), "write_seconds": w, "scan_seconds": scan(&dir)}),
            );
            std::fs::remove_dir_all(&dir).unwrap();
        }
        #[cfg(feature = "lance")]
        for (c, l) in [
            (Compression::None, None),
            (Compression::Lz4, None),
            (Compression::Zstd, Some(1)),
            (Compression::Zstd, Some(3)),
            (Compression::Zstd, Some(9)),
            (Compression::Zstd, Some(19)),
        ] {
            let dir = root.join(format!("lv-{name}-lance-{c}-{l:?}"));
            let opts = shardset::LanceWriteOptions::default()
                .with_encode_threads(1)
                .with_data_storage_version(shardset::LanceStorageVersion::V2_1)
                .try_with_codec(shardset::Codec::try_new(c, l).unwrap())
                .unwrap();
            let (_, w) = secs(|| shardset::write_lance_cache(rows(), f, &dir, &opts).unwrap());
            line(
                "seed-levels",
                serde_json::json!({"data": name, "rows": n, "format": "lance 2.1", "codec": c.name(),
                    "level": l, "bytes": bytes_of(&dir), "write_seconds": w,
                    "scan_seconds": scan(&dir)}),
            );
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}

fn verify(root: &Path) {
    let n = 1_000_000;
    let dir = root.join("verify");
    write_arrow_cache(
        memory_rows(n),
        &memory_features(),
        &dir,
        &one_thread().with_record_checksums(true),
    )
    .unwrap();
    let idx = random_indices(n, 200_000, 4);
    let takes: Vec<Vec<i64>> = (0..500).map(|s| random_indices(n, 128, 100 + s)).collect();
    let mut out = serde_json::Map::new();
    for v in [false, true] {
        let open =
            || open_cache_with(&dir, &OpenOptions::default().with_verify_on_read(v)).unwrap();
        let c = open();
        let g = gets(c.backend.as_ref(), &idx);
        let c = open();
        let (_, t) = secs(|| {
            for k in &takes {
                black_box(c.backend.take(k).unwrap());
            }
        });
        let s = scan_with(&dir, &OpenOptions::default().with_verify_on_read(v));
        let tag = if v { "verified" } else { "plain" };
        out.insert(format!("{tag}_gets_per_s"), (idx.len() as f64 / g).into());
        out.insert(
            format!("{tag}_take128_per_s"),
            (takes.len() as f64 / t).into(),
        );
        out.insert(format!("{tag}_scan_rows_per_s"), (n as f64 / s).into());
    }
    out.insert("rows".into(), n.into());
    line("seed-verify", serde_json::Value::Object(out));
}

/// Runs the seed-system workloads (`--only
/// edit|lance-edit|memory|dedup|levels|verify|fixed`).
pub fn seed_systems(args: &[String]) {
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let base = args
        .iter()
        .position(|a| a == "--dir")
        .and_then(|i| args.get(i + 1))
        .map(std::path::PathBuf::from);
    let tmp = match &base {
        Some(b) => tempfile::tempdir_in(b).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let run = |w: &str| only.as_deref().is_none_or(|o| o == w);
    if run("memory") {
        memory(tmp.path());
    }
    if run("verify") {
        verify(tmp.path());
    }
    if run("levels") {
        levels(tmp.path());
    }
    if run("dedup") {
        dedup(tmp.path());
    }
    if run("fixed") {
        fixed(tmp.path());
    }
    if run("edit") {
        edit(tmp.path());
        std::fs::remove_dir_all(tmp.path().join("edit")).unwrap();
    }
    #[cfg(feature = "lance")]
    if run("lance-edit") {
        lance_edit(tmp.path());
    }
}
