//! Which source each sample of a mixture comes from: a pure function of the
//! seed, the sample's global index (or its step's, for homogeneous
//! batches), the weight schedule and how many rows each source gave
//! before. Every process replays the same draws, so nothing is exchanged
//! between ranks or workers, and a saved position (a step and the rows each
//! source gave up to it) continues the very same sequence.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::util::SplitMix64;

mod thresholds;
use thresholds::Thresholds;

crate::util::named_enum! {
    /// What a source does when its rows run out.
    #[derive(Default)]
    pub enum SourceEnd("source end") {
        /// It starts its next epoch (a new order of its rows).
        #[default]
        Cycle = "cycle",
        /// It drops out; the other sources' weights renormalise, and the
        /// mixture ends when every source has dropped out.
        Exhaust = "exhaust",
    }
}

crate::util::named_enum! {
    /// How often a source is drawn.
    #[derive(Default)]
    pub enum DrawUnit("draw") {
        /// For every sample: batches mix sources in proportion.
        #[default]
        Sample = "sample",
        /// For every batch: each batch comes from one source (homogeneous
        /// batches); a source that runs out mid-batch hands the rest of the
        /// batch to a source drawn anew.
        Batch = "batch",
    }
}

/// The weights of the sources, changed from given steps on: a list of
/// `(first step, weights)`, the first at step 0, in step order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    changes: Vec<(u64, Vec<f64>)>,
}

/// Checks one set of weights for `n` sources.
///
/// # Errors
/// [`Error::InvalidArgument`] for a wrong count, a negative or non-finite
/// weight, or no positive weight.
pub(crate) fn check_weights(weights: &[f64], n: usize) -> Result<()> {
    if weights.len() != n {
        return Err(Error::InvalidArgument(format!(
            "{} weights for {n} sources: give one weight per source",
            weights.len()
        )));
    }
    if let Some((i, w)) = weights
        .iter()
        .enumerate()
        .find(|(_, w)| !w.is_finite() || **w < 0.0)
    {
        return Err(Error::InvalidArgument(format!(
            "weight {w} of source {i} is not a finite number >= 0"
        )));
    }
    if !weights.iter().any(|w| *w > 0.0) {
        return Err(Error::InvalidArgument(
            "every weight is 0: give at least one source a positive weight".into(),
        ));
    }
    Ok(())
}

impl Schedule {
    /// Weights from step 0 on.
    pub(crate) fn new(weights: Vec<f64>) -> Schedule {
        Schedule {
            changes: vec![(0, weights)],
        }
    }

    /// The weights in force at `step`.
    pub(crate) fn at(&self, step: u64) -> &[f64] {
        let i = self.changes.partition_point(|(s, _)| *s <= step);
        &self.changes[i.saturating_sub(1)].1
    }

    /// `weights` from `step` on, replacing any change at or after it.
    pub(crate) fn set(&mut self, step: u64, weights: Vec<f64>) {
        self.changes.retain(|(s, _)| *s < step);
        self.changes.push((step, weights));
    }

    /// The changes, in step order.
    pub fn changes(&self) -> &[(u64, Vec<f64>)] {
        &self.changes
    }

    /// A schedule from its changes, checked (weights, a first change at
    /// step 0, steps increasing).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming what is wrong.
    pub(crate) fn from_changes(changes: Vec<(u64, Vec<f64>)>, n: usize) -> Result<Schedule> {
        if changes.first().map(|c| c.0) != Some(0) {
            return Err(Error::InvalidArgument(
                "a weight schedule starts at step 0".into(),
            ));
        }
        for w in changes.windows(2) {
            if w[1].0 <= w[0].0 {
                return Err(Error::InvalidArgument(format!(
                    "a weight schedule's steps increase: {} after {}",
                    w[1].0, w[0].0
                )));
            }
        }
        for (_, w) in &changes {
            check_weights(w, n)?;
        }
        Ok(Schedule { changes })
    }
}

/// A place in the global sequence: the next step, and the rows each source
/// has given before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// The next global step.
    pub step: u64,
    /// Rows each source gave before `step` (over all its epochs).
    pub counts: Vec<u64>,
}

/// What the draws need of a mixture: its sources' sizes and ends, the seed,
/// the batch size and the draw unit.
#[derive(Debug, Clone)]
pub(crate) struct Draws {
    pub(crate) rows: Vec<u64>,
    pub(crate) ends: Vec<SourceEnd>,
    pub(crate) seed: u64,
    pub(crate) batch_size: u64,
    pub(crate) unit: DrawUnit,
}

/// The thresholds of the last steady step's weights, kept for the next
/// (they are searched for, a few dozen choices; a weight schedule changes
/// them rarely).
#[derive(Debug, Clone, Default)]
pub(crate) struct DrawMemo(Option<(Vec<f64>, Option<Thresholds>)>);

/// A uniform number in [0, 1) for draw `index` of `stream` under `seed`.
fn unit_f64(seed: u64, stream: u64, index: u64) -> f64 {
    unit_at(stream_key(seed, stream), index)
}

/// The key of `stream` under `seed` (the part of [`unit_f64`] that does
/// not depend on the draw, made once a step).
fn stream_key(seed: u64, stream: u64) -> u64 {
    SplitMix64::new(seed ^ 0xA076_1D64_78BD_642F ^ stream.rotate_left(32)).next_u64()
}

/// [`unit_f64`] of draw `index` in the stream of `key`. Times 2^-53, which
/// is exact: the same number as dividing by 2^53, without a division's
/// latency.
fn unit_at(key: u64, index: u64) -> f64 {
    unit_of(bits_at(key, index))
}

/// The source that `u` picks among the weights of the live sources
/// (`total`: their sum, in source order), or None when they weigh nothing:
/// the first whose weight is above what is left of `u * total` after the
/// ones before it (or the last live one, should rounding leave none).
///
/// Without a branch on `u`: every comparison is made (the same
/// subtractions in the same order as a loop that stops at the first hit,
/// so the same numbers) and the first hit is kept. A random source is a
/// branch the processor cannot predict, and it was most of a draw's time;
/// the branches left (a weight of 0, a source that dropped out) are the
/// same for every draw of a step.
fn choose(weights: &[f64], total: f64, u: f64, live: impl Fn(usize) -> bool) -> Option<usize> {
    if total <= 0.0 {
        return None;
    }
    let mut at = u * total;
    let (mut first, mut last) = (usize::MAX, usize::MAX);
    for (s, &w) in weights.iter().enumerate() {
        if w <= 0.0 || !live(s) {
            continue;
        }
        last = s;
        first = first.min(if at < w { s } else { usize::MAX });
        at -= w;
    }
    match (first, last) {
        (usize::MAX, usize::MAX) => None,
        (usize::MAX, l) => Some(l),
        (f, _) => Some(f),
    }
}

/// 2^53: the number of distinct uniform draws ([`unit_at`] uses 53 bits).
const DRAWS: u64 = 1 << 53;

/// [`unit_at`]'s number in [0, 1) from its 53 random bits.
fn unit_of(x: u64) -> f64 {
    x as f64 * (1.0 / DRAWS as f64)
}

/// The 53 random bits of draw `index` in the stream of `key` ([`unit_at`]
/// is these times 2^-53).
fn bits_at(key: u64, index: u64) -> u64 {
    SplitMix64::new(key ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15)).next_u64() >> 11
}

/// Adds each source's rows in `sources` to its count: a pass a source
/// (compares the compiler makes vector instructions of) for a few sources,
/// one pass for many.
fn count_sources(sources: &[u32], counts: &mut [u64]) {
    if counts.len() <= 16 {
        for (s, c) in counts.iter_mut().enumerate() {
            *c += sources.iter().filter(|&&x| x == s as u32).count() as u64;
        }
    } else {
        for &s in sources {
            counts[s as usize] += 1;
        }
    }
}

impl Draws {
    fn live(&self, s: usize, counts: &[u64]) -> bool {
        self.ends[s] == SourceEnd::Cycle || counts[s] < self.rows[s]
    }

    /// A source by weight among the live ones, for the uniform `u`; None
    /// when no live source has weight.
    fn pick(&self, weights: &[f64], counts: &[u64], u: f64) -> Option<usize> {
        choose(weights, self.live_total(weights, counts), u, |s| {
            self.live(s, counts)
        })
    }

    /// The weights of the live sources, summed in source order.
    fn live_total(&self, weights: &[f64], counts: &[u64]) -> f64 {
        (0..weights.len())
            .filter(|&s| self.live(s, counts))
            .map(|s| weights[s])
            .sum()
    }

    /// The source of each sample of step `cursor.step`, into `sources`
    /// (cleared first), and the cursor moved past it. A source's rows in
    /// the step are the next of its count, in draw order: the `k`-th row
    /// of source `s` is its row `counts[s] + k` (the count before the
    /// step). Short when the sources run out during the step; empty when
    /// they had already.
    pub(crate) fn step(
        &self,
        schedule: &Schedule,
        cursor: &mut Cursor,
        memo: &mut DrawMemo,
        sources: &mut Vec<u32>,
    ) {
        let weights = schedule.at(cursor.step);
        sources.clear();
        let mut batch_source = None;
        // No source can run out during this step: the live sources and
        // their total weight are the step's, not each draw's.
        let steady = (0..weights.len()).all(|s| {
            self.ends[s] == SourceEnd::Cycle
                || cursor.counts[s].saturating_add(self.batch_size) <= self.rows[s]
        });
        let key = stream_key(self.seed, 0);
        if steady && self.unit == DrawUnit::Sample {
            // Every source is live: the thresholds are the weights'.
            if memo.0.as_ref().is_none_or(|(w, _)| w[..] != weights[..]) {
                let total = self.live_total(weights, &cursor.counts);
                memo.0 = Some((weights.to_vec(), Thresholds::new(weights, total)));
            }
            let Some((_, Some(t))) = &memo.0 else {
                cursor.step += 1;
                return;
            };
            // The draws first, each on its own (no count read between
            // them), then each source's count in one pass.
            let first = cursor.step * self.batch_size;
            t.pick_run(key, first, self.batch_size, sources);
            count_sources(sources, &mut cursor.counts);
            cursor.step += 1;
            return;
        }
        if steady && self.unit == DrawUnit::Batch {
            // One source, live for the whole step: what the loop below
            // draws, without a check a row.
            let u = unit_f64(self.seed, 1, cursor.step);
            if let Some(s) = self.pick(weights, &cursor.counts, u) {
                sources.resize(self.batch_size as usize, s as u32);
                cursor.counts[s] += self.batch_size;
            }
            cursor.step += 1;
            return;
        }
        for i in 0..self.batch_size {
            let g = cursor.step * self.batch_size + i;
            let s = match self.unit {
                DrawUnit::Sample => self.pick(weights, &cursor.counts, unit_at(key, g)),
                DrawUnit::Batch => match batch_source {
                    Some(s) if self.live(s, &cursor.counts) => Some(s),
                    _ => {
                        let u = if i == 0 {
                            unit_f64(self.seed, 1, cursor.step)
                        } else {
                            unit_f64(self.seed, 2, g)
                        };
                        batch_source = self.pick(weights, &cursor.counts, u);
                        batch_source
                    }
                },
            };
            let Some(s) = s else { break };
            sources.push(s as u32);
            cursor.counts[s] += 1;
        }
        cursor.step += 1;
    }

    /// Moves `cursor` to `step` (not before it), drawing the steps between.
    pub(crate) fn advance_to(&self, schedule: &Schedule, cursor: &mut Cursor, step: u64) {
        let (mut memo, mut sources) = (DrawMemo::default(), Vec::new());
        while cursor.step < step {
            self.step(schedule, cursor, &mut memo, &mut sources);
        }
    }
}

#[cfg(test)]
mod tests;
