//! Samplers, partitioning and resumable loading, as properties.

use std::collections::HashSet;
use std::num::NonZeroU32;

use proptest::prelude::*;
use shardset::{
    open_cache, Dataset, Loader, LoaderOptions, LoaderState, Order, Partition, Remainder, Sampler,
    WithinShard,
};

use crate::common::*;

fn ds_with(n: usize, batch: usize, budget: u64) -> (tempfile::TempDir, Dataset) {
    let (tmp, dir) = f2_cache(n, batch, budget);
    (tmp, Dataset::new(open_cache(&dir).unwrap()))
}

fn shard_of(d: &Dataset) -> impl Fn(u64) -> usize + '_ {
    let counts = d.backend().shard_row_counts().to_vec();
    move |phys| {
        let mut acc = 0;
        for (s, c) in counts.iter().enumerate() {
            acc += c;
            if phys < acc {
                return s;
            }
        }
        unreachable!()
    }
}

const ORDERS: [Order; 5] = [
    Order::Sequential,
    Order::Random,
    Order::ShardShuffle(WithinShard::Random),
    Order::ShardShuffle(WithinShard::Sequential),
    Order::BlockShuffle(NonZeroU32::new(7).unwrap()),
];

#[test]
fn every_epoch_is_a_permutation_that_changes_between_epochs_and_seeds() {
    let (_t, d) = ds_with(400, 10, 100);
    assert!(d.backend().num_shards() >= 8);
    for order in ORDERS {
        let s = Sampler::new(&d, order, 5);
        let e0 = s.epoch_order(0);
        let mut sorted = e0.clone();
        sorted.sort();
        assert_eq!(sorted, (0..400).collect::<Vec<_>>(), "{order:?}");
        if order != Order::Sequential {
            assert_ne!(e0, s.epoch_order(1), "{order:?} differs between epochs");
            assert_ne!(
                e0,
                Sampler::new(&d, order, 6).epoch_order(0),
                "{order:?} differs between seeds"
            );
            assert_eq!(
                e0,
                s.epoch_order(0),
                "{order:?} is a function of (seed, epoch)"
            );
        }
    }
}

#[test]
fn shard_shuffle_keeps_each_shard_together() {
    let (_t, d) = ds_with(400, 10, 100);
    let shard = shard_of(&d);
    for within in [WithinShard::Random, WithinShard::Sequential] {
        let order = Sampler::new(&d, Order::ShardShuffle(within), 1).epoch_order(3);
        let shards: Vec<usize> = order.iter().map(|&p| shard(p)).collect();
        // A shard, once left, is never revisited.
        let mut seen = HashSet::new();
        let mut blocks = 0;
        for w in 0..shards.len() {
            if w == 0 || shards[w] != shards[w - 1] {
                assert!(seen.insert(shards[w]), "shard {} revisited", shards[w]);
                blocks += 1;
            }
        }
        assert_eq!(blocks, d.backend().num_shards());
        let mut unsorted_block = false;
        for blk in order.chunk_by(|a, b| shard(*a) == shard(*b)) {
            let asc = blk.windows(2).all(|w| w[0] < w[1]);
            if within == WithinShard::Sequential {
                assert!(asc);
            } else if !asc {
                unsorted_block = true;
            }
        }
        if within == WithinShard::Random {
            assert!(unsorted_block, "rows inside shards are shuffled");
        }
        assert_ne!(
            shards
                .windows(2)
                .filter(|w| w[0] != w[1])
                .map(|w| w[1])
                .collect::<Vec<_>>(),
            (1..d.backend().num_shards()).collect::<Vec<_>>(),
            "shard order is shuffled"
        );
    }
}

#[test]
fn block_shuffle_keeps_each_block_together_and_shuffles_blocks_across_shards() {
    let (_t, d) = ds_with(400, 10, 100);
    let shard = shard_of(&d);
    let counts = d.backend().shard_row_counts().to_vec();
    assert!(
        counts.iter().any(|&c| c % 7 != 0),
        "a shard ends in a short block"
    );
    let order = Sampler::new(&d, "block-shuffle:7".parse().unwrap(), 1).epoch_order(3);
    // The blocks: each shard's rows cut into runs of 7 from the shard's start.
    let start_of = |s: usize| counts[..s].iter().sum::<u64>();
    let block = |p: u64| (shard(p), (p - start_of(shard(p))) / 7);
    let blocks: Vec<(usize, u64)> = order.iter().map(|&p| block(p)).collect();
    let mut seen = HashSet::new();
    let mut runs = Vec::new();
    for (w, b) in blocks.iter().enumerate() {
        if w == 0 || *b != blocks[w - 1] {
            assert!(seen.insert(*b), "block {b:?} revisited");
            runs.push(*b);
        }
    }
    let want: u64 = counts.iter().map(|c| c.div_ceil(7)).sum();
    assert_eq!(runs.len() as u64, want, "every block read once, whole");
    assert!(
        order
            .chunk_by(|a, b| block(*a) == block(*b))
            .any(|r| r.windows(2).any(|w| w[0] > w[1])),
        "rows inside blocks are shuffled"
    );
    // Blocks of one shard are not read together: the blocks' order mixes shards.
    let shard_runs = runs.chunk_by(|a, b| a.0 == b.0).count();
    assert!(shard_runs > counts.len(), "{shard_runs} runs of shards");
    // A block larger than every shard is the shard itself.
    let whole = Sampler::new(&d, "block-shuffle:4294967295".parse().unwrap(), 1).epoch_order(0);
    let shard_runs = whole.chunk_by(|a, b| shard(*a) == shard(*b)).count();
    assert_eq!(shard_runs, counts.len());
}

#[test]
fn an_order_has_one_spelling_and_a_bad_one_is_a_typed_error() {
    for (name, order) in Order::NAMES {
        assert_eq!(order.to_string(), name);
        assert_eq!(name.parse::<Order>().unwrap(), order);
    }
    let b: Order = "block-shuffle:65536".parse().unwrap();
    assert_eq!(b, Order::BlockShuffle(NonZeroU32::new(65536).unwrap()));
    assert_eq!(b.to_string(), "block-shuffle:65536");
    for bad in [
        "block-shuffle",
        "block-shuffle:",
        "block-shuffle:0",
        "block-shuffle:065536",
        "block-shuffle:+5",
        "block-shuffle:-5",
        "block-shuffle:4294967296",
        "block-shuffle:1k",
        "shuffle",
    ] {
        match bad.parse::<Order>() {
            Err(shardset::Error::InvalidArgument(m)) => {
                assert!(m.contains(bad) && m.contains("block-shuffle:"), "{m}")
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
}

#[test]
fn shard_shuffle_groups_index_views_by_physical_shard() {
    let (_t, d) = ds_with(400, 10, 100);
    let v = d.shuffle(11).slice(0, 150).unwrap();
    let shard = shard_of(&d);
    let order = Sampler::new(&v, Order::ShardShuffle(WithinShard::Random), 2).epoch_order(0);
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(sorted, (0..150).collect::<Vec<_>>());
    let phys_shards: Vec<usize> = order
        .iter()
        .map(|&p| shard(v.physical_index(p as i64).unwrap()))
        .collect();
    let mut seen = HashSet::new();
    for w in 0..phys_shards.len() {
        if w == 0 || phys_shards[w] != phys_shards[w - 1] {
            assert!(seen.insert(phys_shards[w]));
        }
    }
}

fn drain(l: &mut Loader) -> Vec<u64> {
    let mut out = Vec::new();
    while let Some(p) = l.next_positions() {
        out.extend(p);
    }
    out
}

fn opts(order: Order, seed: u64, p: Partition, batch: usize) -> LoaderOptions {
    LoaderOptions::default()
        .with_order(order)
        .with_seed(seed)
        .with_partition(p)
        .try_with_batch_size(batch)
        .unwrap()
}

#[test]
fn fewer_shards_than_workers_loses_and_duplicates_nothing() {
    // Two shards, eight workers: the reference duplicates and loses rows here.
    let (_t, d) = ds_with(32, 16, 100);
    assert_eq!(d.backend().num_shards(), 2);
    let mut all = Vec::new();
    for w in 0..8 {
        let p = Partition::new(0, 1, w, 8, Remainder::Partial).unwrap();
        let mut l = Loader::new(
            d.clone(),
            opts(Order::ShardShuffle(WithinShard::Random), 3, p, 3),
        );
        let got = drain(&mut l);
        // Eleven batches of three (the last of two) round-robin over eight workers.
        let want = match w {
            0 | 1 => 6,
            2 => 5,
            _ => 3,
        };
        assert_eq!(got.len(), want);
        all.extend(got);
    }
    all.sort();
    assert_eq!(all, (0..32).collect::<Vec<_>>());
}

#[test]
fn loader_reads_views_and_decodes_rows() {
    let (_t, d) = ds_with(100, 10, 100);
    let v = d.select(&[5, 50, 95, 7]).unwrap();
    let l = Loader::new(v, opts(Order::Sequential, 0, Partition::single(), 3));
    let xs: Vec<i64> = l
        .flat_map(|b| b.unwrap())
        .map(|r| r.get("x").unwrap().as_i64().unwrap())
        .collect();
    assert_eq!(xs, vec![5, 50, 95, 7]);
}

#[test]
fn resume_refuses_a_foreign_state() {
    let (_t, d) = ds_with(100, 10, 100);
    let o = opts(Order::Random, 1, Partition::single(), 8);
    let mut l = Loader::new(d.clone(), o);
    l.next_batch().unwrap().unwrap();
    let st = l.state();
    let other = Partition::new(0, 2, 0, 1, Remainder::DropLast).unwrap();
    assert!(Loader::resume(d.clone(), opts(Order::Random, 1, other, 8), st).is_err());
    assert!(Loader::resume(
        d.clone(),
        opts(Order::Random, 2, Partition::single(), 8),
        st
    )
    .is_err());
    assert!(Loader::resume(d.slice(0, 50).unwrap(), o, st).is_err());
    let mut bad = st;
    bad.next = 1000;
    assert!(Loader::resume(d.clone(), o, bad).is_err());
    // The state serialises to a few bytes of JSON.
    let j = serde_json::to_string(&st).unwrap();
    assert!(j.len() < 300, "{j}");
    let back: LoaderState = serde_json::from_str(&j).unwrap();
    assert_eq!(back, st);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    /// Across ranks × workers an epoch reads every row exactly once
    /// (partial), at most once with equal shares per rank (drop_last), or
    /// every row with equal shares (pad); resuming any consumer from its own
    /// state saved at any batch yields exactly the rest of its epoch.
    #[test]
    fn partitions_and_resume_are_exact(
        n in 1usize..300,
        world in 1u32..4,
        workers in 1u32..4,
        seed in any::<u64>(),
        epoch in 0u64..3,
        batch in 1usize..20,
        stop_frac in 0.0f64..1.0,
        rem_ix in 0usize..3,
        order_ix in 0usize..ORDERS.len(),
    ) {
        let (_t, d) = ds_with(n, 8, 60);
        let order = ORDERS[order_ix];
        let rem = Remainder::NAMES[rem_ix].1;
        let mut all = Vec::new();
        let mut per_rank = Vec::new();
        for rank in 0..world {
            let mut rank_rows = 0;
            for w in 0..workers {
                let p = Partition::new(rank, world, w, workers, rem).unwrap();
                let o = opts(order, seed, p, batch);
                let mut full = Loader::new(d.clone(), o);
                full.set_epoch(epoch);
                let want = drain(&mut full);
                // Stop after some batches, save the state as JSON, resume in a fresh loader.
                let mut l = Loader::new(d.clone(), o);
                l.set_epoch(epoch);
                let stop = ((want.len() as f64 * stop_frac) as usize).div_ceil(batch);
                let mut got = Vec::new();
                for _ in 0..stop {
                    match l.next_positions() { Some(p) => got.extend(p), None => break }
                }
                let saved = serde_json::to_string(&l.state()).unwrap();
                let mut r = Loader::resume(d.clone(), o, serde_json::from_str(&saved).unwrap()).unwrap();
                got.extend(drain(&mut r));
                prop_assert_eq!(&got, &want);
                rank_rows += want.len();
                all.extend(want);
            }
            per_rank.push(rank_rows);
        }
        let distinct: HashSet<u64> = all.iter().copied().collect();
        match rem {
            Remainder::Partial => {
                prop_assert_eq!(all.len(), n);
                prop_assert_eq!(distinct.len(), n);
            }
            Remainder::DropLast => {
                prop_assert_eq!(distinct.len(), all.len(), "no duplicates");
                prop_assert!(n - all.len() < batch * world as usize);
                prop_assert!(per_rank.iter().all(|&r| r == per_rank[0]), "equal shares per rank");
            }
            Remainder::Pad => {
                prop_assert_eq!(distinct.len(), n, "padding covers every row");
                prop_assert!(per_rank.iter().all(|&r| r == per_rank[0]), "equal shares per rank");
            }
        }
    }

    /// Every rank stops after the same number of batches read round-robin
    /// from its workers; the saved worker states, restated as a rank's
    /// place, continue under another world size and worker count: the
    /// epoch's rows are then read exactly once in all.
    #[test]
    fn a_resume_with_another_world_size_and_worker_count_is_exact(
        n in 1usize..200,
        world in 1u32..4,
        workers in 1u32..4,
        world2 in 1u32..4,
        workers2 in 1u32..4,
        batch in 1usize..12,
        stop_frac in 0.0f64..1.0,
        order_ix in 0usize..ORDERS.len(),
    ) {
        let (_t, d) = ds_with(n, 8, 60);
        let order = ORDERS[order_ix];
        let plan = shardset::EpochBatches::try_new(n as u64, batch as u64, Remainder::Partial, world).unwrap();
        let start = shardset::EpochPosition::start(1, world);
        let least = (0..world).map(|r| plan.rank_total(r, &start)).min().unwrap();
        let stop = (least as f64 * stop_frac) as u64;
        let mut seen = Vec::new();
        let mut rank0_states = Vec::new();
        for rank in 0..world {
            let mut loaders: Vec<Loader> = (0..workers)
                .map(|w| {
                    let p = Partition::new(rank, world, w, workers, Remainder::Partial).unwrap();
                    let mut l = Loader::new(d.clone(), opts(order, 5, p, batch));
                    l.set_epoch(1);
                    l
                })
                .collect();
            for i in 0..stop {
                seen.extend(loaders[(i % u64::from(workers)) as usize].next_positions().unwrap());
            }
            if rank == 0 {
                rank0_states = loaders.iter().rev().map(|l| l.state()).collect();
            }
        }
        let place = LoaderState::rank_position(&rank0_states).unwrap();
        for rank in 0..world2 {
            for w in 0..workers2 {
                let p = Partition::new(rank, world2, w, workers2, Remainder::Partial).unwrap();
                let mut l = Loader::resume_at(d.clone(), opts(order, 5, p, batch), place).unwrap();
                seen.extend(drain(&mut l));
            }
        }
        seen.sort();
        prop_assert_eq!(seen, (0..n as u64).collect::<Vec<_>>());
    }
}
