//! The epoch model of the library (`shardset::EpochBatches`) for
//! `shardset.torch`: how an epoch's batches split over ranks and workers and
//! how a saved place is restated is decided in Rust, once; Python keeps the
//! glue (worker info, torch.distributed, the shared epoch value).

use pyo3::prelude::*;
use shardset::{EpochBatches, EpochPosition, Order, Remainder};

use crate::error::{OrPy, PyRes};

/// A rank's place, for the arithmetic that does not depend on the epoch.
fn place(base: u64, done: u64, world_size: u32) -> EpochPosition {
    EpochPosition {
        epoch: 0,
        base,
        done,
        world_size,
    }
}

/// The batches of an epoch of `num_rows` rows for `world_size` ranks.
#[pyclass(module = "shardset._shardset", name = "EpochBatches", frozen)]
pub struct PyEpochBatches(EpochBatches);

#[pymethods]
impl PyEpochBatches {
    #[new]
    fn new(num_rows: u64, batch_size: u64, remainder: &str, world_size: u32) -> PyRes<Self> {
        let r: Remainder = remainder.parse().py()?;
        Ok(PyEpochBatches(
            EpochBatches::try_new(num_rows, batch_size, r, world_size).py()?,
        ))
    }

    /// Global batches in the epoch.
    fn global_batches(&self) -> u64 {
        self.0.global_batches()
    }

    /// Rank-local batches `rank` has in the segment starting at global batch `base`.
    fn rank_total(&self, rank: u32, base: u64) -> u64 {
        self.0
            .rank_total(rank, &place(base, 0, self.0.world_size()))
    }

    /// `(lo, hi)`: the positions of the epoch's order that rank-local batch
    /// `i` of `rank` covers in the segment starting at `base` (`hi` may pass
    /// the row count under "pad": positions wrap).
    fn span(&self, rank: u32, base: u64, i: u64) -> (u64, u64) {
        let j = self
            .0
            .global_index(rank, &place(base, 0, self.0.world_size()), i);
        let s = self.0.span(j);
        (s.start, s.end)
    }

    /// Checks a place (`base`, `done`) of `rank` against the plan.
    fn check(&self, rank: u32, base: u64, done: u64) -> PyRes<()> {
        self.0
            .check(rank, &place(base, done, self.0.world_size()))
            .py()
    }

    /// `(base, done)` of a place saved with `from_world` ranks, restated for
    /// `to_world` (every rank at the same step).
    #[staticmethod]
    fn restate(base: u64, done: u64, from_world: u32, to_world: u32) -> (u64, u64) {
        let p = place(base, done, from_world).for_world(to_world);
        (p.base, p.done)
    }

    /// A rank's batches done from its workers' next batches (round-robin).
    #[staticmethod]
    fn rank_done(nexts: Vec<u64>) -> PyRes<u64> {
        place(0, 0, 1)
            .from_worker_nexts(&nexts)
            .map(|p| p.done)
            .ok_or_else(|| crate::error::BadInputError::new_err("no worker state"))
    }
}

/// Checks an order's name (`sequential`, `random`, `shard-shuffle`,
/// `shard-sequential`).
#[pyfunction]
pub fn _check_order(order: &str) -> PyRes<()> {
    order.parse::<Order>().map(drop).py()
}
