//! Reading holds bounded memory: decompressed batches of compressed shards
//! live in a byte-bounded LRU, whatever the size of the cache.

use shardset::layouts::arrow_shards::read::DEFAULT_DECOMPRESSED_CACHE_BYTES;
use shardset::{
    open_cache, open_cache_with, write_arrow_cache, ArrowShards, ArrowWriteOptions, Backend,
    Compression, IterOptions, OpenOptions,
};

use crate::common::*;

#[test]
fn decompressed_batches_stay_within_the_budget() {
    let t = tempfile::tempdir().unwrap();
    let (plain, zstd) = (t.path().join("plain"), t.path().join("zstd"));
    let opts = ArrowWriteOptions::default()
        .try_with_batch_size(50)
        .unwrap()
        .try_with_shard_size_bytes(Some(64 << 10))
        .unwrap();
    write_arrow_cache(f2_rows(3000), &features_f2(), &plain, &opts).unwrap();
    write_arrow_cache(
        f2_rows(3000),
        &features_f2(),
        &zstd,
        &opts.clone().with_compression(Compression::Zstd),
    )
    .unwrap();
    let reference = open_cache(&plain).unwrap();
    // What the decompressed batches take (the plain cache's batches are
    // views into its map, so they cannot tell).
    let uncached = open_cache_with(&zstd, &OpenOptions::default().with_cache_bytes(0)).unwrap();
    let whole: usize = uncached
        .backend
        .iter_batches(&IterOptions::default())
        .unwrap()
        .map(|b| b.unwrap().get_array_memory_size())
        .sum();
    // A budget a quarter of the decompressed cache.
    let budget = whole / 4;
    let c = open_cache_with(&zstd, &OpenOptions::default().with_cache_bytes(budget)).unwrap();
    let be = c.backend.as_any().downcast_ref::<ArrowShards>().unwrap();
    assert_eq!(be.cache_bytes(), budget);
    let mut peak = 0;
    let mut rows = 0;
    for (got, want) in be.iter_batches(&IterOptions::default()).unwrap().zip(
        reference
            .backend
            .iter_batches(&IterOptions::default())
            .unwrap(),
    ) {
        let (got, want) = (got.unwrap(), want.unwrap());
        assert_eq!(got, want);
        rows += got.num_rows();
        peak = peak.max(be.cached_bytes());
        assert!(
            be.cached_bytes() <= budget,
            "{} > {budget}",
            be.cached_bytes()
        );
    }
    assert_eq!(rows, 3000);
    assert!(
        peak > budget / 2,
        "the cache is used: peak {peak} of {budget}"
    );
    // Random reads and takes too.
    for i in (0..3000i64).rev().step_by(37) {
        assert_eq!(be.get(i).unwrap(), reference.backend.get(i).unwrap());
        assert!(be.cached_bytes() <= budget);
    }
    let idx: Vec<i64> = (0..128).map(|k| (k * 977) % 3000).collect();
    assert_eq!(
        be.take(&idx).unwrap(),
        reference.backend.take(&idx).unwrap()
    );
    assert!(be.cached_bytes() <= budget);
    // No budget: nothing kept, the same rows.
    let none = open_cache_with(&zstd, &OpenOptions::default().with_cache_bytes(0)).unwrap();
    assert_eq!(
        none.backend.get(5).unwrap(),
        reference.backend.get(5).unwrap()
    );
    let nb = none.backend.as_any().downcast_ref::<ArrowShards>().unwrap();
    assert_eq!(nb.cached_bytes(), 0);
    // The default, and an uncompressed cache keeps nothing in the LRU (views).
    let d = reference
        .backend
        .as_any()
        .downcast_ref::<ArrowShards>()
        .unwrap();
    assert_eq!(d.cache_bytes(), DEFAULT_DECOMPRESSED_CACHE_BYTES);
    assert_eq!(d.cached_bytes(), 0);
}
