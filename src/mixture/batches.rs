//! One consumer's steps of a mixture: each drawn (its rows' sources, then
//! their view positions as slices of each source's epoch order, grouped
//! and placed by [`StepRows`]), for the input pipeline to claim in order,
//! or read here as record batches.

use super::draw::{Cursor, DrawMemo, Schedule};
use super::step::StepScratch;
use super::{Mixture, MixtureBatch, StepRows};
use crate::error::Result;

/// One consumer's batches of a mixture (see [`Mixture::batches`]).
#[derive(Debug)]
pub struct MixtureBatches {
    pub(super) mix: Mixture,
    pub(super) cursor: Cursor,
    pub(super) base: u64,
    pub(super) next: u64,
    pub(super) rank: u64,
    pub(super) world: u64,
    pub(super) stride: u64,
    /// Each source's current epoch order and the draw count it starts at,
    /// by source: a step's rows of a source are slices of it.
    pub(super) orders: Vec<Option<(u64, Vec<u64>)>>,
    pub(super) memo: DrawMemo,
    /// Each source's count before the step being drawn (kept to be used
    /// again).
    pub(super) before: Vec<u64>,
    pub(super) schedule: Schedule,
    pub(super) ended: bool,
}

impl MixtureBatches {
    /// The rank-local index of the next batch this consumer makes.
    pub fn next_local(&self) -> u64 {
        self.next
    }

    /// Appends source `s`'s view positions for its rows `from..from + n`
    /// (over all its epochs): slices of its epoch orders.
    fn extend_positions(&mut self, s: usize, from: u64, n: u64, out: &mut Vec<u64>) {
        let rows = self.mix.draws.rows[s];
        let (mut k, end) = (from, from + n);
        while k < end {
            let epoch = k / rows;
            if self.orders[s]
                .as_ref()
                .is_none_or(|(start, _)| *start != epoch * rows)
            {
                let order = self.mix.samplers[s].epoch_order(epoch);
                self.orders[s] = Some((epoch * rows, order));
            }
            let (start, order) = self.orders[s].as_ref().expect("set above");
            let upto = end.min(start + rows);
            let (lo, hi) = ((k - start) as usize, (upto - start) as usize);
            out.extend_from_slice(&order[lo..hi]);
            prefetch(order.get(hi..hi + (hi - lo)).unwrap_or(&[]));
            k = upto;
        }
    }
}

/// Asks the CPU to bring `next` into its cache: a source's next step reads
/// the slice of its epoch order after this step's. A step reads a short
/// slice of each source's order between thousands of random reads, too
/// short a run for the hardware's own prefetch to follow: copying these
/// slices was 2% of a mixture's CPU in a profile, the single cache's one
/// long slice a step a sixth of that.
fn prefetch(next: &[u64]) {
    #[cfg(target_arch = "x86_64")]
    for line in next.chunks(8) {
        // SAFETY: every x86_64 CPU has SSE; a prefetch is a hint that
        // reads nothing and cannot fault.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = next;
}

/// One step's rows, drawn but not read: what a thread of the input
/// pipeline claims, in order, and reads on its own ([`Mixture::read`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MixturePlan {
    /// The global step.
    pub step: u64,
    /// Its rank-local index (since the state's base).
    pub local: u64,
    /// Its rows, in draw order and by source.
    pub rows: StepRows,
}

/// One step drawn, its rows not yet placed (see [`DrawnStep::place`]).
#[derive(Debug)]
pub(crate) struct DrawnStep {
    step: u64,
    local: u64,
    sources: Vec<u32>,
    /// The rows grouped by source, and where each source's start.
    scratch: StepScratch,
}

impl DrawnStep {
    /// The global step.
    pub(crate) fn step(&self) -> u64 {
        self.step
    }

    /// Its rank-local index.
    pub(crate) fn local(&self) -> u64 {
        self.local
    }

    /// Its rows in the step.
    pub(crate) fn len(&self) -> usize {
        self.sources.len()
    }

    /// Each row's slot and position found ([`StepRows`]). Apart from the
    /// draw: the input pipeline's threads draw their steps in turn, under
    /// a lock, and place each one's rows on their own.
    pub(crate) fn place(self) -> MixturePlan {
        MixturePlan {
            step: self.step,
            local: self.local,
            rows: StepRows::with_scratch(self.sources, self.scratch),
        }
    }
}

impl MixtureBatches {
    /// The next step's rows, drawn; None once every source has dropped out.
    pub fn next_plan(&mut self) -> Option<MixturePlan> {
        self.next_drawn(StepScratch::default())
            .map(DrawnStep::place)
    }

    /// The next step's sources and each source's view positions (in the
    /// vectors of `scratch`), drawn; None once every source has dropped
    /// out.
    pub(crate) fn next_drawn(&mut self, mut scratch: StepScratch) -> Option<DrawnStep> {
        if self.ended {
            return None;
        }
        let step = self.base + self.next * self.world + self.rank;
        let draws = &self.mix.draws;
        draws.advance_to(&self.schedule, &mut self.cursor, step);
        let mut before = std::mem::take(&mut self.before);
        before.clone_from(&self.cursor.counts);
        let mut sources = Vec::with_capacity(draws.batch_size as usize);
        draws.step(
            &self.schedule,
            &mut self.cursor,
            &mut self.memo,
            &mut sources,
        );
        if sources.is_empty() {
            self.ended = true;
            return None;
        }
        let local = self.next;
        self.next += self.stride;
        let StepScratch {
            grouped, bounds, ..
        } = &mut scratch;
        grouped.clear();
        bounds.clear();
        bounds.push(0);
        for (s, &from) in before.iter().enumerate() {
            let n = self.cursor.counts[s] - from;
            self.extend_positions(s, from, n, grouped);
            bounds.push(grouped.len());
        }
        self.before = before;
        Some(DrawnStep {
            step,
            local,
            sources,
            scratch,
        })
    }
}

impl Iterator for MixtureBatches {
    type Item = Result<MixtureBatch>;

    fn next(&mut self) -> Option<Result<MixtureBatch>> {
        let plan = self.next_plan()?;
        let sources = plan.rows.sources().to_vec();
        Some(self.mix.read(&plan.rows).map(|batch| MixtureBatch {
            step: plan.step,
            local: plan.local,
            batch,
            sources,
        }))
    }
}
