//! Criterion micro-benchmarks of the read path (get, take of 128, iteration)
//! and of encoding, on the scalar and image workloads.

#[path = "common/mod.rs"]
mod common;

use std::hint::black_box;

use common::*;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use shardset::{open_cache, write_arrow_cache, ArrowWriteOptions, IterOptions};

fn read_path(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let n = 200_000;
    let dir = tmp.path().join("scalar");
    write_arrow_cache(
        scalar_rows(n),
        &scalar_features(),
        &dir,
        &ArrowWriteOptions::default(),
    )
    .unwrap();
    let cache = open_cache(&dir).unwrap();
    let b = cache.backend.clone();
    let idx = random_indices(n, 4096, 7);
    let mut g = c.benchmark_group("scalar");
    g.throughput(Throughput::Elements(1));
    let mut k = 0;
    g.bench_function("get", |bench| {
        bench.iter(|| {
            k = (k + 1) % idx.len();
            black_box(b.get(idx[k]).unwrap())
        })
    });
    g.throughput(Throughput::Elements(128));
    let mut k = 0;
    g.bench_function("take128_decoded", |bench| {
        bench.iter(|| {
            k = (k + 128) % (idx.len() - 128);
            let batch = b.take(&idx[k..k + 128]).unwrap();
            black_box(b.decoder().decode_batch(&batch).unwrap())
        })
    });
    g.throughput(Throughput::Elements(n as u64));
    g.sample_size(20);
    g.bench_function("iterate_decoded", |bench| {
        bench.iter(|| {
            let mut rows = 0;
            for r in b.iter_batches(&IterOptions::default()).unwrap() {
                rows += b.decoder().decode_batch(&r.unwrap()).unwrap().len();
            }
            black_box(rows)
        })
    });
    g.throughput(Throughput::Elements(100_000));
    g.bench_function("write_100k", |bench| {
        bench.iter(|| {
            let d = tmp.path().join("w");
            write_arrow_cache(
                scalar_rows(100_000),
                &scalar_features(),
                &d,
                &ArrowWriteOptions::default(),
            )
            .unwrap()
        })
    });
    g.finish();

    let dir = tmp.path().join("image");
    write_arrow_cache(
        image_rows(5_000),
        &image_features(),
        &dir,
        &ArrowWriteOptions::default(),
    )
    .unwrap();
    let cache = open_cache(&dir).unwrap();
    let b = cache.backend.clone();
    let idx = random_indices(5_000, 4096, 9);
    let mut g = c.benchmark_group("image");
    g.throughput(Throughput::Elements(1));
    let mut k = 0;
    g.bench_function("get_decode_png", |bench| {
        bench.iter(|| {
            k = (k + 1) % idx.len();
            black_box(b.get(idx[k]).unwrap())
        })
    });
    g.finish();
}

criterion_group!(benches, read_path);
criterion_main!(benches);
