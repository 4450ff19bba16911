//! Sample orders for training: sequential, full random, and shard-aware
//! shuffles; partitioning by rank and worker; and a [`Loader`] whose position
//! is a small serialisable [`LoaderState`].
//!
//! Iteration is a pure function of `(seed, epoch, position)`: the order of an
//! epoch is computed from the seed and the epoch alone, every consumer
//! (rank × worker) takes one contiguous block of it, and the state records how
//! far a consumer got. Resuming from a state yields exactly the rest of the
//! epoch: nothing twice, nothing lost.

use std::num::NonZeroUsize;

use serde::{Deserialize, Serialize};

use crate::dataset::{Dataset, View};
use crate::error::{Error, Result};
use crate::util::SplitMix64;
use crate::value::Row;

/// Order of rows within a shard for [`Order::ShardShuffle`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WithinShard {
    /// Rows of a shard in a random order.
    Random,
    /// Rows of a shard in storage order (best locality).
    Sequential,
}

/// How an epoch orders the dataset's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Order {
    /// View order, every epoch.
    Sequential,
    /// A uniform random permutation per epoch.
    Random,
    /// Shards in a random order per epoch, each shard's rows together
    /// (shuffled or not): random enough for SGD, and reads stay within one
    /// shard at a time.
    ShardShuffle(WithinShard),
}

/// What to do with the rows that do not divide evenly among consumers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Remainder {
    /// Drop the last `n % consumers` rows of each epoch's order.
    DropLast,
    /// Pad by wrapping to the start of the epoch's order, so every row is seen.
    Pad,
}

/// Which slice of every epoch this consumer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    /// This process's rank.
    pub rank: u32,
    /// Number of ranks.
    pub world_size: u32,
    /// This worker within the rank.
    pub worker: u32,
    /// Workers per rank.
    pub num_workers: u32,
    /// Uneven remainder policy (chosen explicitly).
    pub remainder: Remainder,
}

impl Partition {
    /// One consumer that reads everything.
    pub fn single() -> Self {
        Partition {
            rank: 0,
            world_size: 1,
            worker: 0,
            num_workers: 1,
            remainder: Remainder::DropLast,
        }
    }

    /// A partition; checks `rank < world_size` and `worker < num_workers`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`].
    pub fn new(
        rank: u32,
        world_size: u32,
        worker: u32,
        num_workers: u32,
        remainder: Remainder,
    ) -> Result<Self> {
        if world_size == 0 || num_workers == 0 || rank >= world_size || worker >= num_workers {
            return Err(Error::InvalidArgument(format!(
                "partition rank {rank}/{world_size}, worker {worker}/{num_workers} is not valid"
            )));
        }
        Ok(Partition {
            rank,
            world_size,
            worker,
            num_workers,
            remainder,
        })
    }

    /// Total consumers.
    pub fn consumers(&self) -> u64 {
        self.world_size as u64 * self.num_workers as u64
    }

    /// This consumer's index among all.
    pub fn consumer(&self) -> u64 {
        self.rank as u64 * self.num_workers as u64 + self.worker as u64
    }

    /// Samples each consumer reads per epoch of `n` rows (equal for all by construction).
    pub fn per_consumer(&self, n: u64) -> u64 {
        let c = self.consumers();
        match self.remainder {
            Remainder::DropLast => n / c,
            Remainder::Pad => n.div_ceil(c),
        }
    }

    /// Positions into the epoch order that this consumer reads, `[start, end)`
    /// of the (wrapped) order.
    pub fn block(&self, n: u64) -> (u64, u64) {
        let per = self.per_consumer(n);
        let start = self.consumer() * per;
        (start, start + per)
    }
}

fn epoch_rng(seed: u64, epoch: u64) -> SplitMix64 {
    // Two rounds of mixing so that nearby (seed, epoch) pairs give unrelated streams.
    let mut m = SplitMix64::new(seed ^ 0x5851_F42D_4C95_7F2D);
    let a = m.next_u64();
    let mut e = SplitMix64::new(a ^ epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    SplitMix64::new(e.next_u64())
}

/// The groups of view positions that share a physical shard, in shard order.
fn shard_groups(ds: &Dataset) -> Vec<Vec<u64>> {
    let counts = ds.backend().shard_row_counts();
    let mut starts = Vec::with_capacity(counts.len() + 1);
    let mut acc = 0u64;
    starts.push(0);
    for &c in counts {
        acc += c;
        starts.push(acc);
    }
    let n = ds.len();
    if counts.is_empty() {
        return vec![(0..n).collect()];
    }
    match ds.view() {
        View::All(_) | View::Range { .. } => {
            let (lo, hi) = match ds.view() {
                View::Range { start, len } => (*start, start + len),
                _ => (0, n),
            };
            (0..counts.len())
                .filter_map(|s| {
                    let (a, b) = (starts[s].max(lo), starts[s + 1].min(hi));
                    (a < b).then(|| (a - lo..b - lo).collect())
                })
                .collect()
        }
        View::Indices(_) => {
            let mut groups: Vec<Vec<u64>> = vec![Vec::new(); counts.len()];
            for p in 0..n {
                let phys = ds.view().physical(p);
                let s = starts.partition_point(|&x| x <= phys) - 1;
                groups[s].push(p);
            }
            groups.retain(|g| !g.is_empty());
            groups
        }
    }
}

/// Computes epoch orders of a dataset view.
#[derive(Debug, Clone)]
pub struct Sampler {
    order: Order,
    seed: u64,
    n: u64,
    groups: Vec<Vec<u64>>,
}

impl Sampler {
    /// A sampler over `ds` (its shard groups are computed once).
    pub fn new(ds: &Dataset, order: Order, seed: u64) -> Self {
        let groups = match order {
            Order::ShardShuffle(_) => shard_groups(ds),
            _ => Vec::new(),
        };
        Sampler {
            order,
            seed,
            n: ds.len(),
            groups,
        }
    }

    /// Rows per epoch.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// True for an empty dataset.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The view positions of one epoch, a permutation of `0..len`.
    pub fn epoch_order(&self, epoch: u64) -> Vec<u64> {
        let mut rng = epoch_rng(self.seed, epoch);
        match self.order {
            Order::Sequential => (0..self.n).collect(),
            Order::Random => {
                let mut p: Vec<u64> = (0..self.n).collect();
                rng.shuffle(&mut p);
                p
            }
            Order::ShardShuffle(within) => {
                let mut idx: Vec<usize> = (0..self.groups.len()).collect();
                rng.shuffle(&mut idx);
                let mut out = Vec::with_capacity(self.n as usize);
                for g in idx {
                    let start = out.len();
                    out.extend_from_slice(&self.groups[g]);
                    if within == WithinShard::Random {
                        rng.shuffle(&mut out[start..]);
                    }
                }
                out
            }
        }
    }
}

/// Where a [`Loader`] is: enough to resume exactly, and to refuse resuming
/// against a different dataset or partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderState {
    /// Seed of the orders.
    pub seed: u64,
    /// Current epoch.
    pub epoch: u64,
    /// Samples this consumer has already yielded in the epoch.
    pub position: u64,
    /// Rows in the dataset view (checked on resume).
    pub num_rows: u64,
    /// The order (checked on resume).
    pub order: Order,
    /// The partition (checked on resume).
    pub partition: Partition,
}

/// Options of a [`Loader`]: private fields, validated when set (the same
/// pattern as the write options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoaderOptions {
    order: Order,
    seed: u64,
    partition: Partition,
    batch_size: NonZeroUsize,
}

impl Default for LoaderOptions {
    fn default() -> Self {
        LoaderOptions {
            order: Order::ShardShuffle(WithinShard::Random),
            seed: 0,
            partition: Partition::single(),
            batch_size: NonZeroUsize::new(256).expect("positive"),
        }
    }
}

impl LoaderOptions {
    /// The epoch order (default shard-aware, rows shuffled within shards).
    pub fn with_order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }

    /// The seed of the epoch orders (default 0).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// This consumer's partition (default [`Partition::single`]).
    pub fn with_partition(mut self, partition: Partition) -> Self {
        self.partition = partition;
        self
    }

    /// Rows per batch (default 256).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0.
    pub fn try_with_batch_size(mut self, n: usize) -> Result<Self> {
        self.batch_size = NonZeroUsize::new(n)
            .ok_or_else(|| Error::InvalidArgument("batch_size must be at least 1".into()))?;
        Ok(self)
    }

    /// The epoch order.
    pub fn order(&self) -> Order {
        self.order
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// This consumer's partition.
    pub fn partition(&self) -> Partition {
        self.partition
    }

    /// Rows per batch.
    pub fn batch_size(&self) -> usize {
        self.batch_size.get()
    }
}

/// Reads one consumer's share of each epoch in batches, resumably.
#[derive(Debug)]
pub struct Loader {
    ds: Dataset,
    opts: LoaderOptions,
    sampler: Sampler,
    state: LoaderState,
    cached: Option<(u64, Vec<u64>)>,
}

impl Loader {
    /// A loader at the start of epoch 0.
    pub fn new(ds: Dataset, opts: LoaderOptions) -> Self {
        let sampler = Sampler::new(&ds, opts.order, opts.seed);
        let state = LoaderState {
            seed: opts.seed,
            epoch: 0,
            position: 0,
            num_rows: ds.len(),
            order: opts.order,
            partition: opts.partition,
        };
        Loader {
            ds,
            opts,
            sampler,
            state,
            cached: None,
        }
    }

    /// A loader continuing from a saved state.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the state belongs to another dataset
    /// size, order, seed or partition, or points past the epoch's end.
    pub fn resume(ds: Dataset, opts: LoaderOptions, state: LoaderState) -> Result<Self> {
        let mut l = Loader::new(ds, opts);
        let mismatch = |what: &str| {
            Error::InvalidArgument(format!(
                "loader state is for a different {what}; start a fresh loader"
            ))
        };
        if state.num_rows != l.state.num_rows {
            return Err(mismatch("dataset (row count)"));
        }
        if state.order != opts.order || state.seed != opts.seed {
            return Err(mismatch("order or seed"));
        }
        if state.partition != opts.partition {
            return Err(mismatch("partition"));
        }
        if state.position > l.epoch_len() {
            return Err(Error::InvalidArgument(format!(
                "loader state position {} is past the epoch's {} samples",
                state.position,
                l.epoch_len()
            )));
        }
        l.state = state;
        Ok(l)
    }

    /// The state to save (serialise it with serde).
    pub fn state(&self) -> LoaderState {
        self.state
    }

    /// Samples this consumer reads per epoch.
    pub fn epoch_len(&self) -> u64 {
        self.opts.partition.per_consumer(self.ds.len())
    }

    /// Moves to the start of `epoch`.
    pub fn set_epoch(&mut self, epoch: u64) {
        self.state.epoch = epoch;
        self.state.position = 0;
    }

    /// The dataset read.
    pub fn dataset(&self) -> &Dataset {
        &self.ds
    }

    /// View positions of samples `[from, to)` of this consumer's block in `epoch`.
    pub fn positions(&mut self, epoch: u64, from: u64, to: u64) -> Vec<u64> {
        let n = self.ds.len();
        if n == 0 || from >= to {
            return Vec::new();
        }
        if self.cached.as_ref().map(|c| c.0) != Some(epoch) {
            self.cached = Some((epoch, self.sampler.epoch_order(epoch)));
        }
        let order = &self.cached.as_ref().expect("cached").1;
        let (start, _) = self.opts.partition.block(n);
        (from..to)
            .map(|k| order[((start + k) % n) as usize])
            .collect()
    }

    /// The next batch's view positions, advancing the state; `None` at the end of the epoch.
    pub fn next_positions(&mut self) -> Option<Vec<u64>> {
        let len = self.epoch_len();
        let from = self.state.position;
        if from >= len {
            return None;
        }
        let to = (from + self.opts.batch_size.get() as u64).min(len);
        let pos = self.positions(self.state.epoch, from, to);
        self.state.position = to;
        Some(pos)
    }

    /// The next batch of decoded rows; `None` at the end of the epoch.
    /// The state advances only when the batch was read.
    pub fn next_batch(&mut self) -> Option<Result<Vec<Row>>> {
        let before = self.state;
        let pos = self.next_positions()?;
        match self.ds.take_positions(&pos) {
            Ok(rows) => Some(Ok(rows)),
            Err(e) => {
                self.state = before;
                Some(Err(e))
            }
        }
    }
}

impl Iterator for Loader {
    type Item = Result<Vec<Row>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_batch()
    }
}
