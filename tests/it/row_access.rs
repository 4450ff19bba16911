//! Reading rows of Arrow shard caches: takes in order with duplicates,
//! slices across shard boundaries, negative indices and bounds, batch
//! iteration over all, some and shuffled shards, and threads reading a
//! reopened backend (the caches are written as in `roundtrip.rs`).

use std::sync::Arc;

use proptest::prelude::*;
use shardset::{open_cache, write_arrow_cache, ArrowWriteOptions, Backend, IterOptions};

use crate::common::*;

use crate::roundtrip::*;

#[test]
fn take_preserves_order_and_duplicates_across_shards() {
    let (_t, c) = multi_shard(40, 4, 40);
    let b = &c.backend;
    assert!(b.num_shards() >= 4, "{:?}", b.shard_row_counts());
    for idx in [
        vec![8i64, 1, 8, 5, 0, 11],
        vec![6, 2, 6, 1],
        vec![39, 0, -1, 20, 20, 20],
        vec![3],
    ] {
        let got = x_col(&b.take(&idx).unwrap());
        let want: Vec<i32> = idx
            .iter()
            .map(|&i| if i < 0 { 40 + i as i32 } else { i as i32 })
            .collect();
        assert_eq!(got, want);
    }
    assert_eq!(b.take(&[]).unwrap().num_rows(), 0);
    assert_eq!(
        x_col(&b.take(&[4, 5, 6]).unwrap()),
        x_col(&b.slice(4, 3).unwrap())
    );
    assert!(b.take(&[0, 40]).is_err());
}

#[test]
fn slice_crosses_shard_boundaries() {
    let (_t, c) = multi_shard(100, 7, 100);
    let b = &c.backend;
    assert!(b.num_shards() > 3);
    for (s, n) in [(0u64, 100u64), (5, 30), (13, 1), (99, 5), (100, 3), (50, 0)] {
        let got = x_col(&b.slice(s, n).unwrap());
        let end = (s + n).min(100) as i32;
        assert_eq!(got, (s as i32..end).collect::<Vec<_>>(), "slice({s},{n})");
    }
    assert!(b.slice(101, 1).is_err());
}

#[test]
fn get_with_negative_indices_and_bounds() {
    let (_t, c) = multi_shard(20, 3, 30);
    let b = &c.backend;
    assert_eq!(b.get(-1).unwrap().get("x").unwrap().as_i64(), Some(19));
    assert_eq!(b.get(-20).unwrap().get("x").unwrap().as_i64(), Some(0));
    assert!(matches!(
        b.get(20),
        Err(shardset::Error::IndexOutOfRange { index: 20, len: 20 })
    ));
    assert!(b.get(-21).is_err());
}

#[test]
fn iter_batches_all_some_and_shuffled_shards() {
    let (_t, c) = multi_shard(200, 10, 100);
    let b = &c.backend;
    let s = b.num_shards();
    assert!(s > 4);
    let all: Vec<i32> = b
        .iter_batches(&IterOptions::default())
        .unwrap()
        .flat_map(|r| x_col(&r.unwrap()))
        .collect();
    assert_eq!(all, (0..200).collect::<Vec<_>>());
    let some: Vec<i32> = b
        .iter_batches(&IterOptions::default().with_shards(vec![1, 0]))
        .unwrap()
        .flat_map(|r| x_col(&r.unwrap()))
        .collect();
    let counts = b.shard_row_counts();
    let (c0, c1) = (counts[0] as i32, counts[1] as i32);
    assert_eq!(some, (c0..c0 + c1).chain(0..c0).collect::<Vec<_>>());
    let shuffled = |seed| -> Vec<i32> {
        b.iter_batches(&IterOptions::default().with_shuffle_seed(seed))
            .unwrap()
            .flat_map(|r| x_col(&r.unwrap()))
            .collect()
    };
    let a = shuffled(1);
    assert_eq!(a, shuffled(1), "same seed, same order");
    assert_ne!(a, all);
    assert_ne!(a, shuffled(2));
    let mut sorted = a.clone();
    sorted.sort();
    assert_eq!(sorted, all);
}

#[test]
fn reopened_backend_reads_the_same_rows_from_threads() {
    let (_t, c) = multi_shard(500, 10, 400);
    let b: Arc<dyn Backend> = c.backend.clone();
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let b = b.reopened();
            std::thread::spawn(move || {
                (0..500)
                    .rev()
                    .step_by(t + 1)
                    .all(|i| b.get(i).unwrap().get("x").unwrap().as_i64() == Some(i))
            })
        })
        .collect();
    assert!(handles.into_iter().all(|h| h.join().unwrap()));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn any_layout_reads_back_in_order(n in 0usize..300, batch in 1usize..40, budget in 1u64..2000, threads in 1usize..4) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("p");
        let w = write_arrow_cache(
            f2_rows(n), &features_f2(), &dir,
            &ArrowWriteOptions::default().try_with_batch_size(batch).unwrap().try_with_shard_size_bytes(Some(budget)).unwrap().with_encode_threads(threads),
        ).unwrap();
        // No empty shard, no shard but the last one ends on a partial batch.
        let counts = &w.metadata.shard_row_counts;
        prop_assert!(counts.iter().all(|&c| c > 0));
        for c in &counts[..counts.len().saturating_sub(1)] {
            prop_assert_eq!(*c % batch as u64, 0);
        }
        let c = open_cache(&dir).unwrap();
        prop_assert_eq!(c.len(), n as u64);
        let all: Vec<i32> = c.backend.iter_batches(&IterOptions::default()).unwrap().flat_map(|r| x_col(&r.unwrap())).collect();
        prop_assert_eq!(all, (0..n as i32).collect::<Vec<_>>());
        if n > 0 {
            let idx: Vec<i64> = (0..n as i64).rev().step_by(3).collect();
            let got = x_col(&c.backend.take(&idx).unwrap());
            prop_assert_eq!(got, idx.iter().map(|&i| i as i32).collect::<Vec<_>>());
        }
    }
}
