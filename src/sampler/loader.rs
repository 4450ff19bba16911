//! A [`Loader`]: one consumer's (rank × worker) batches of each epoch, in the
//! epoch model of [`EpochBatches`], with a small serialisable
//! [`LoaderState`] that resumes exactly, also with another worker count or
//! world size ([`LoaderState::rank_position`] + [`Loader::resume_at`]).

use std::num::NonZeroUsize;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::epoch::{EpochBatches, EpochPosition, Remainder};
use super::order::{Order, Sampler, WithinShard};
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::value::Row;

/// Which share of every epoch a consumer reads: its rank among
/// `world_size`, its worker among the rank's `num_workers`, and what the
/// epoch does with its remainder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Partition {
    rank: u32,
    world_size: u32,
    worker: u32,
    num_workers: u32,
    remainder: Remainder,
}

impl Partition {
    /// One consumer that reads everything, every row exactly once.
    pub fn single() -> Self {
        Partition {
            rank: 0,
            world_size: 1,
            worker: 0,
            num_workers: 1,
            remainder: Remainder::Partial,
        }
    }

    /// A partition.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless `rank < world_size` and
    /// `worker < num_workers`.
    pub fn new(
        rank: u32,
        world_size: u32,
        worker: u32,
        num_workers: u32,
        remainder: Remainder,
    ) -> Result<Self> {
        if rank >= world_size || worker >= num_workers {
            return Err(Error::InvalidArgument(format!(
                "partition rank {rank}/{world_size}, worker {worker}/{num_workers} is not valid: \
                 a rank is below the world size and a worker below the worker count"
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

    /// This process's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Number of ranks.
    pub fn world_size(&self) -> u32 {
        self.world_size
    }

    /// This worker within the rank.
    pub fn worker(&self) -> u32 {
        self.worker
    }

    /// Workers per rank.
    pub fn num_workers(&self) -> u32 {
        self.num_workers
    }

    /// The remainder policy.
    pub fn remainder(&self) -> Remainder {
        self.remainder
    }
}

/// Where a [`Loader`] is: enough to resume exactly, and to refuse resuming
/// against another dataset, order or batch size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderState {
    /// Seed of the orders.
    pub seed: u64,
    /// The order.
    pub order: Order,
    /// Rows in the dataset view.
    pub num_rows: u64,
    /// Rows per batch.
    pub batch_size: u64,
    /// The consumer's partition.
    pub partition: Partition,
    /// The rank's place when this consumer's segment started.
    pub position: EpochPosition,
    /// This consumer's next rank-local batch.
    pub next: u64,
}

impl LoaderState {
    /// A rank's place from the states of all its workers (any order), as a
    /// reader taking their batches round-robin stands (as a PyTorch
    /// `DataLoader` does): load it with [`Loader::resume_at`] under any
    /// worker count or world size.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the states are not every worker of
    /// one rank in one segment.
    pub fn rank_position(states: &[LoaderState]) -> Result<EpochPosition> {
        let first = states
            .first()
            .ok_or_else(|| Error::InvalidArgument("no loader state to resume from".into()))?;
        let nw = first.partition.num_workers as usize;
        let mut nexts = vec![None; nw];
        for s in states {
            let p = s.partition;
            if p.rank != first.partition.rank
                || p.num_workers as usize != nw
                || s.position != first.position
            {
                return Err(Error::InvalidArgument(
                    "the loader states are not the workers of one rank at one place; \
                     pass every worker's state of one rank"
                        .into(),
                ));
            }
            nexts[p.worker as usize] = Some(s.next);
        }
        let nexts: Option<Vec<u64>> = nexts.into_iter().collect();
        let nexts = nexts.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "the rank has {nw} workers and a state is missing for some; pass all {nw}"
            ))
        })?;
        Ok(first
            .position
            .from_worker_nexts(&nexts)
            .expect("at least one worker"))
    }
}

/// Options of a [`Loader`]: private fields, validated when set.
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

/// Reads one consumer's batches of each epoch, resumably.
#[derive(Debug)]
pub struct Loader {
    ds: Dataset,
    opts: LoaderOptions,
    sampler: Sampler,
    plan: EpochBatches,
    state: LoaderState,
    cached: Option<(u64, Vec<u64>)>,
}

impl Loader {
    /// A loader at the start of epoch 0.
    pub fn new(ds: Dataset, opts: LoaderOptions) -> Self {
        let p = opts.partition;
        let plan = EpochBatches::try_new(
            ds.len(),
            opts.batch_size.get() as u64,
            p.remainder,
            p.world_size,
        )
        .expect("a partition's world size and a batch size are at least 1");
        let state = LoaderState {
            seed: opts.seed,
            order: opts.order,
            num_rows: ds.len(),
            batch_size: opts.batch_size.get() as u64,
            partition: p,
            position: EpochPosition::start(0, p.world_size),
            next: u64::from(p.worker),
        };
        Loader {
            sampler: Sampler::new(&ds, opts.order, opts.seed),
            ds,
            opts,
            plan,
            state,
            cached: None,
        }
    }

    fn check_same_data(&self, state: &LoaderState) -> Result<()> {
        let mismatch = |what: &str| {
            Error::InvalidArgument(format!(
                "loader state is for a different {what}; start a fresh loader"
            ))
        };
        if state.num_rows != self.state.num_rows {
            return Err(mismatch("dataset (row count)"));
        }
        if state.order != self.opts.order || state.seed != self.opts.seed {
            return Err(mismatch("order or seed"));
        }
        if state.batch_size != self.state.batch_size {
            return Err(mismatch("batch size"));
        }
        if state.partition.remainder != self.opts.partition.remainder {
            return Err(mismatch("remainder policy"));
        }
        Ok(())
    }

    /// A loader continuing from this consumer's own saved state (same
    /// partition).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the state belongs to another dataset
    /// size, order, seed, batch size or partition (for another partition,
    /// use [`LoaderState::rank_position`] and [`Loader::resume_at`]), or
    /// points past the epoch's end.
    pub fn resume(ds: Dataset, opts: LoaderOptions, state: LoaderState) -> Result<Self> {
        let mut l = Loader::new(ds, opts);
        l.check_same_data(&state)?;
        if state.partition != opts.partition {
            return Err(Error::InvalidArgument(
                "loader state is for a different partition; restate the rank's place with \
                 LoaderState::rank_position and continue with Loader::resume_at"
                    .into(),
            ));
        }
        let p = opts.partition;
        l.plan.check(p.rank, &state.position)?;
        let total = l.plan.rank_total(p.rank, &state.position);
        if state.next > total + u64::from(p.num_workers) {
            return Err(Error::InvalidArgument(format!(
                "loader state's next batch {} is past the epoch's {total}",
                state.next
            )));
        }
        l.state = state;
        Ok(l)
    }

    /// A loader continuing from a rank's place (from
    /// [`LoaderState::rank_position`], or saved by any other reader of the
    /// epoch model), under this loader's partition, whatever the worker
    /// count or world size the place was saved with. The order, seed and
    /// batch size must be the ones the place was reached with.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a place past the epoch's end.
    pub fn resume_at(ds: Dataset, opts: LoaderOptions, position: EpochPosition) -> Result<Self> {
        let mut l = Loader::new(ds, opts);
        let p = opts.partition;
        let position = position.for_world(p.world_size);
        l.plan.check(p.rank, &position)?;
        l.state.position = position;
        l.state.next = position.done + u64::from(p.worker);
        Ok(l)
    }

    /// The state to save (serialise it with serde).
    pub fn state(&self) -> LoaderState {
        self.state
    }

    /// The epoch plan this loader reads.
    pub fn plan(&self) -> &EpochBatches {
        &self.plan
    }

    /// Batches this consumer reads in a whole epoch.
    pub fn epoch_batches(&self) -> u64 {
        let p = self.opts.partition;
        let start = EpochPosition::start(0, p.world_size);
        self.plan
            .worker_batches(p.rank, p.num_workers, &start, u64::from(p.worker))
            .count() as u64
    }

    /// Moves to the start of `epoch`.
    pub fn set_epoch(&mut self, epoch: u64) {
        let p = self.opts.partition;
        self.state.position = EpochPosition::start(epoch, p.world_size);
        self.state.next = u64::from(p.worker);
    }

    /// The dataset read.
    pub fn dataset(&self) -> &Dataset {
        &self.ds
    }

    /// View positions of the epoch order's places `span` in `epoch`.
    fn batch_positions(&mut self, epoch: u64, span: Range<u64>) -> Vec<u64> {
        let n = self.ds.len();
        if n == 0 {
            return Vec::new();
        }
        if self.cached.as_ref().map(|c| c.0) != Some(epoch) {
            self.cached = Some((epoch, self.sampler.epoch_order(epoch)));
        }
        let order = &self.cached.as_ref().expect("cached").1;
        span.map(|k| order[(k % n) as usize]).collect()
    }

    /// The next batch, advancing the state: its epoch, the places of the
    /// epoch's order it covers (past the row count under
    /// [`Remainder::Pad`], where they wrap: a key per sample that no rank
    /// split or resume changes) and the view positions of its rows; `None`
    /// at the end of the epoch.
    pub fn next_span(&mut self) -> Option<(u64, Range<u64>, Vec<u64>)> {
        let p = self.opts.partition;
        let pos = self.state.position;
        if self.state.next >= self.plan.rank_total(p.rank, &pos) {
            return None;
        }
        let j = self.plan.global_index(p.rank, &pos, self.state.next);
        let span = self.plan.span(j);
        let out = self.batch_positions(pos.epoch, span.clone());
        self.state.next += u64::from(p.num_workers);
        Some((pos.epoch, span, out))
    }

    /// The next batch's view positions, advancing the state; `None` at the
    /// end of the epoch.
    pub fn next_positions(&mut self) -> Option<Vec<u64>> {
        self.next_span().map(|(_, _, positions)| positions)
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
