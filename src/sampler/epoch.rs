//! How one epoch's rows split into batches over ranks and workers: the one
//! model that the Rust [`Loader`](super::Loader), `shardset.torch` and the
//! input pipeline share, so a checkpoint written by one resumes in another.
//!
//! The epoch order (a permutation of the rows, see [`Sampler`](super::Sampler))
//! is cut into *global batches* of `batch_size` consecutive positions. Global
//! batch `j` goes to rank `j % world_size`, as its *rank-local* batch
//! `j / world_size`; within a rank, rank-local batch `i` goes to worker
//! `i % num_workers`. A PyTorch `DataLoader` yields a rank's batches
//! round-robin over its workers, that is rank-local batches 0, 1, 2, … in
//! order whatever the number of workers, so a rank's place in the epoch is
//! one number, the rank-local batches it yielded ([`EpochPosition::done`]).
//! That is why a checkpoint resumes exactly after a change of the number of
//! workers and, with every rank at the same step (synchronous data-parallel
//! training), after a change of world size: the global batches consumed are
//! then a prefix of the epoch, which [`EpochPosition::for_world`] restates
//! for the new world size.

use std::num::{NonZeroU32, NonZeroU64};
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

crate::util::named_enum! {
    /// What an epoch does with the rows that do not fill whole batches for
    /// every rank.
    pub enum Remainder("remainder") {
        /// Every rank gets the same number of full batches; the rest of the
        /// epoch's order is left out (it differs per epoch under a shuffle).
        DropLast = "drop_last",
        /// The last batches wrap to the start of the epoch's order, so every row
        /// is read and every rank gets the same number of full batches.
        Pad = "pad",
        /// Every row exactly once: the epoch's last batch may be short and a rank
        /// may get one batch more than another (for one process or evaluation,
        /// not for lock-step data-parallel training).
        Partial = "partial",
    }
}

/// Where a rank stands in an epoch: the global batches consumed before the
/// current segment (`base`, moved forward when the world size changes) and
/// the rank-local batches yielded since (`done`). Small and serialisable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EpochPosition {
    /// The epoch.
    pub epoch: u64,
    /// Global batches consumed before this segment of the epoch.
    pub base: u64,
    /// Rank-local batches yielded in this segment.
    pub done: u64,
    /// The world size `done` counts in.
    pub world_size: u32,
}

impl EpochPosition {
    /// The start of `epoch` for a world of `world_size` ranks.
    pub fn start(epoch: u64, world_size: u32) -> Self {
        EpochPosition {
            epoch,
            base: 0,
            done: 0,
            world_size,
        }
    }

    /// The same place for a world of `world_size` ranks: with every rank at
    /// the same step, the global batches consumed are a prefix of the epoch
    /// (`base + done × old world size`), and each new rank goes on from there.
    pub fn for_world(self, world_size: u32) -> Self {
        if world_size == self.world_size {
            return self;
        }
        EpochPosition {
            epoch: self.epoch,
            base: self.base + self.done * u64::from(self.world_size),
            done: 0,
            world_size,
        }
    }

    /// A rank's position from the next rank-local batch of each of its
    /// workers (worker `k` of `nexts.len()`), as the round-robin reader that
    /// consumed them stands: every batch before the least next one was
    /// yielded, none after it. `None` for an empty list.
    pub fn from_worker_nexts(self, nexts: &[u64]) -> Option<Self> {
        let done = *nexts.iter().min()?;
        Some(EpochPosition { done, ..self })
    }
}

/// The batches of an epoch of `num_rows` rows for `world_size` ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EpochBatches {
    num_rows: u64,
    batch_size: NonZeroU64,
    remainder: Remainder,
    world_size: NonZeroU32,
}

impl EpochBatches {
    /// The plan of an epoch.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a batch size or world size of 0.
    pub fn try_new(
        num_rows: u64,
        batch_size: u64,
        remainder: Remainder,
        world_size: u32,
    ) -> Result<Self> {
        let batch_size = NonZeroU64::new(batch_size)
            .ok_or_else(|| Error::InvalidArgument("batch_size must be at least 1".into()))?;
        let world_size = NonZeroU32::new(world_size)
            .ok_or_else(|| Error::InvalidArgument("world_size must be at least 1".into()))?;
        Ok(EpochBatches {
            num_rows,
            batch_size,
            remainder,
            world_size,
        })
    }

    /// Rows in the epoch's order.
    pub fn num_rows(&self) -> u64 {
        self.num_rows
    }

    /// Rows per batch.
    pub fn batch_size(&self) -> u64 {
        self.batch_size.get()
    }

    /// The remainder policy.
    pub fn remainder(&self) -> Remainder {
        self.remainder
    }

    /// Ranks.
    pub fn world_size(&self) -> u32 {
        self.world_size.get()
    }

    /// Global batches in the epoch (a multiple of the world size, except
    /// under [`Remainder::Partial`]).
    pub fn global_batches(&self) -> u64 {
        let (b, w) = (self.batch_size.get(), u64::from(self.world_size.get()));
        match self.remainder {
            Remainder::DropLast => self.num_rows / b / w * w,
            Remainder::Partial => self.num_rows.div_ceil(b),
            Remainder::Pad => self.num_rows.div_ceil(b).div_ceil(w) * w,
        }
    }

    /// Positions into the epoch's order that global batch `j` covers. Under
    /// [`Remainder::Pad`] the end may pass `num_rows`: positions wrap modulo
    /// `num_rows`.
    pub fn span(&self, j: u64) -> Range<u64> {
        let b = self.batch_size.get();
        let end = (j + 1) * b;
        match self.remainder {
            Remainder::Partial => j * b..end.min(self.num_rows),
            _ => j * b..end,
        }
    }

    /// The global batch that is rank-local batch `i` of `rank` after `pos`.
    pub fn global_index(&self, rank: u32, pos: &EpochPosition, i: u64) -> u64 {
        pos.base + i * u64::from(self.world_size.get()) + u64::from(rank)
    }

    /// Rank-local batches `rank` has in the segment that starts at
    /// `pos.base` (those yielded included).
    pub fn rank_total(&self, rank: u32, pos: &EpochPosition) -> u64 {
        let left = self.global_batches().saturating_sub(pos.base);
        let rank = u64::from(rank);
        if left <= rank {
            0
        } else {
            (left - rank).div_ceil(u64::from(self.world_size.get()))
        }
    }

    /// Rank-local batches `rank` has still to yield from `pos`.
    pub fn rank_remaining(&self, rank: u32, pos: &EpochPosition) -> u64 {
        self.rank_total(rank, pos).saturating_sub(pos.done)
    }

    /// The rank-local batches worker `worker` of `num_workers` reads from
    /// `next` (its next one, at least `pos.done + worker` at the start)
    /// to the end of the segment, in order.
    pub fn worker_batches(
        &self,
        rank: u32,
        num_workers: u32,
        pos: &EpochPosition,
        next: u64,
    ) -> impl Iterator<Item = u64> {
        let total = self.rank_total(rank, pos);
        (next..total).step_by(num_workers.max(1) as usize)
    }

    /// `pos` checked against this plan: its world size is this plan's and it
    /// is within the epoch.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming what does not fit.
    pub fn check(&self, rank: u32, pos: &EpochPosition) -> Result<()> {
        if pos.world_size != self.world_size.get() {
            return Err(Error::InvalidArgument(format!(
                "the position counts batches of a world of {} ranks, the plan has {}; \
                 restate it with EpochPosition::for_world",
                pos.world_size,
                self.world_size.get()
            )));
        }
        if rank >= self.world_size.get() {
            return Err(Error::InvalidArgument(format!(
                "rank {rank} is not below the world size {}",
                self.world_size.get()
            )));
        }
        let total = self.rank_total(rank, pos);
        if pos.done > total {
            return Err(Error::InvalidArgument(format!(
                "the position has {} batches done, past the {total} of rank {rank} in this epoch",
                pos.done
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows_of(plan: &EpochBatches, spans: impl Iterator<Item = u64>) -> Vec<u64> {
        spans
            .flat_map(|j| plan.span(j))
            .map(|p| p % plan.num_rows())
            .collect()
    }

    /// Every rank's batches, read by `workers` workers round-robin.
    fn epoch_rows(plan: &EpochBatches, workers: u32, pos: &EpochPosition) -> Vec<Vec<u64>> {
        (0..plan.world_size())
            .map(|rank| {
                let mut per_worker: Vec<Vec<u64>> = (0..workers)
                    .map(|w| {
                        plan.worker_batches(rank, workers, pos, pos.done + u64::from(w))
                            .collect()
                    })
                    .collect();
                let mut out = Vec::new();
                let mut k = 0;
                while per_worker.iter().any(|b| !b.is_empty()) {
                    let w = k % workers as usize;
                    if !per_worker[w].is_empty() {
                        let i = per_worker[w].remove(0);
                        out.push(plan.global_index(rank, pos, i));
                    }
                    k += 1;
                }
                rows_of(plan, out.into_iter())
            })
            .collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// Every row exactly once (partial), at most once and the same count
        /// per rank (drop_last), at least once and the same count (pad),
        /// across ranks × workers.
        #[test]
        fn an_epoch_splits_over_ranks_and_workers(
            n in 0u64..400, b in 1u64..20, world in 1u32..5, workers in 1u32..5, rem in 0usize..3,
        ) {
            let remainder = Remainder::NAMES[rem].1;
            let plan = EpochBatches::try_new(n, b, remainder, world).unwrap();
            let per_rank = epoch_rows(&plan, workers, &EpochPosition::start(0, world));
            let mut all: Vec<u64> = per_rank.iter().flatten().copied().collect();
            all.sort();
            let distinct = { let mut d = all.clone(); d.dedup(); d };
            match remainder {
                Remainder::Partial => proptest::prop_assert_eq!(&all, &(0..n).collect::<Vec<_>>()),
                Remainder::DropLast => {
                    proptest::prop_assert_eq!(distinct.len(), all.len());
                    proptest::prop_assert!((n - all.len() as u64) < b * u64::from(world));
                    for r in &per_rank { proptest::prop_assert_eq!(r.len(), per_rank[0].len()); }
                }
                Remainder::Pad => {
                    proptest::prop_assert_eq!(distinct, (0..n).collect::<Vec<_>>());
                    for r in &per_rank { proptest::prop_assert_eq!(r.len(), per_rank[0].len()); }
                }
            }
        }

        /// Stopping every rank after the same number of batches and going on
        /// with another world size and worker count reads the rest of the
        /// epoch: nothing twice, nothing lost (partial).
        #[test]
        fn a_resume_with_other_counts_reads_the_rest(
            n in 0u64..400, b in 1u64..10, world in 1u32..5, workers in 1u32..4,
            world2 in 1u32..5, workers2 in 1u32..4, stop_frac in 0.0f64..1.0,
        ) {
            let plan = EpochBatches::try_new(n, b, Remainder::Partial, world).unwrap();
            let start = EpochPosition::start(3, world);
            let least = (0..world).map(|r| plan.rank_total(r, &start)).min().unwrap();
            let stop = (least as f64 * stop_frac) as u64;
            let mut seen: Vec<u64> = Vec::new();
            for rank in 0..world {
                let done: Vec<u64> = (0..stop).map(|i| plan.global_index(rank, &start, i)).collect();
                seen.extend(rows_of(&plan, done.into_iter()));
            }
            // The workers' next batches, as a round-robin reader leaves them.
            let nexts: Vec<u64> = (0..u64::from(workers)).map(|k| stop + k).collect();
            let at = start.from_worker_nexts(&nexts).unwrap();
            proptest::prop_assert_eq!(at.done, stop);
            let moved = at.for_world(world2);
            let plan2 = EpochBatches::try_new(n, b, Remainder::Partial, world2).unwrap();
            for rank in 0..world2 {
                plan2.check(rank, &moved).unwrap();
            }
            seen.extend(epoch_rows(&plan2, workers2, &moved).into_iter().flatten());
            seen.sort();
            proptest::prop_assert_eq!(seen, (0..n).collect::<Vec<_>>());
        }
    }

    #[test]
    fn names_parse_back_and_bad_ones_say_what_is_allowed() {
        for &(name, r) in Remainder::NAMES {
            assert_eq!(name.parse::<Remainder>().unwrap(), r);
            assert_eq!(r.to_string(), name);
        }
        let e = "last".parse::<Remainder>().unwrap_err().to_string();
        assert!(e.contains("one of drop_last, pad, partial"), "{e}");
        assert!(EpochBatches::try_new(5, 0, Remainder::Pad, 1).is_err());
        assert!(EpochBatches::try_new(5, 1, Remainder::Pad, 0).is_err());
    }

    #[test]
    fn a_position_past_the_epoch_or_for_another_world_is_refused() {
        let plan = EpochBatches::try_new(100, 10, Remainder::DropLast, 2).unwrap();
        let mut pos = EpochPosition::start(0, 2);
        pos.done = 6;
        assert!(plan
            .check(0, &pos)
            .unwrap_err()
            .to_string()
            .contains("past the 5"));
        assert!(plan.check(0, &EpochPosition::start(0, 3)).is_err());
        assert!(plan.check(2, &EpochPosition::start(0, 2)).is_err());
    }
}
