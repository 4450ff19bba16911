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

    /// The samples of step `cursor.step`, as (source, the source's row
    /// count before it), and the cursor moved past it. Short when the
    /// sources run out during the step; empty when they had already.
    pub(crate) fn step(&self, schedule: &Schedule, cursor: &mut Cursor) -> Vec<(usize, u64)> {
        let weights = schedule.at(cursor.step);
        let mut out = Vec::with_capacity(self.batch_size as usize);
        let mut batch_source = None;
        // No source can run out during this step: the live sources and
        // their total weight are the step's, not each draw's.
        let steady = (0..weights.len()).all(|s| {
            self.ends[s] == SourceEnd::Cycle
                || cursor.counts[s].saturating_add(self.batch_size) <= self.rows[s]
        });
        let key = stream_key(self.seed, 0);
        if steady && self.unit == DrawUnit::Sample {
            let total = self.live_total(weights, &cursor.counts);
            let Some(t) = Thresholds::new(weights, total) else {
                cursor.step += 1;
                return out;
            };
            let first = cursor.step * self.batch_size;
            for g in first..first + self.batch_size {
                let s = t.pick(bits_at(key, g));
                out.push((s, cursor.counts[s]));
                cursor.counts[s] += 1;
            }
            cursor.step += 1;
            return out;
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
            out.push((s, cursor.counts[s]));
            cursor.counts[s] += 1;
        }
        cursor.step += 1;
        out
    }

    /// Moves `cursor` to `step` (not before it), drawing the steps between.
    pub(crate) fn advance_to(&self, schedule: &Schedule, cursor: &mut Cursor, step: u64) {
        while cursor.step < step {
            self.step(schedule, cursor);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(unit: DrawUnit, ends: Vec<SourceEnd>, rows: Vec<u64>) -> Draws {
        Draws {
            rows,
            ends,
            seed: 7,
            batch_size: 64,
            unit,
        }
    }

    /// `choose` as it was written first: a loop that stops at the first
    /// hit (the reference the branchless one is held to).
    fn choose_first_hit(
        weights: &[f64],
        total: f64,
        u: f64,
        live: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        if total <= 0.0 {
            return None;
        }
        let mut at = u * total;
        let mut last = None;
        for (s, &w) in weights.iter().enumerate() {
            if w <= 0.0 || !live(s) {
                continue;
            }
            last = Some(s);
            if at < w {
                return Some(s);
            }
            at -= w;
        }
        last
    }

    /// What a step drew before the steady case and the branchless choice:
    /// every draw through the first-hit loop over the live sources, its
    /// stream key made anew.
    fn step_draw_by_draw(d: &Draws, schedule: &Schedule, c: &mut Cursor) -> Vec<(usize, u64)> {
        let weights = schedule.at(c.step);
        let mut out = Vec::new();
        for i in 0..d.batch_size {
            let g = c.step * d.batch_size + i;
            let (u, counts) = (unit_f64(d.seed, 0, g), &c.counts);
            let total = d.live_total(weights, counts);
            let Some(s) = choose_first_hit(weights, total, u, |s| d.live(s, counts)) else {
                break;
            };
            out.push((s, c.counts[s]));
            c.counts[s] += 1;
        }
        c.step += 1;
        out
    }

    #[test]
    fn steady_steps_draw_what_draw_by_draw_picks_gave() {
        // Cycling sources (steady throughout) and exhausting ones (steady
        // until a step could run one out, then draw by draw).
        for ends in [
            vec![SourceEnd::Cycle; 3],
            vec![SourceEnd::Exhaust, SourceEnd::Cycle, SourceEnd::Exhaust],
        ] {
            for weights in [
                vec![0.2, 0.5, 0.3],
                vec![1e-300, 1.0, 1e300],
                vec![0.0, 3.0, 1e-17],
            ] {
                let d = draws(DrawUnit::Sample, ends.clone(), vec![100, 700, 300]);
                let sched = Schedule::new(weights);
                let mut a = Cursor {
                    step: 0,
                    counts: vec![0; 3],
                };
                let mut b = a.clone();
                for _ in 0..40 {
                    assert_eq!(
                        d.step(&sched, &mut a),
                        step_draw_by_draw(&d, &sched, &mut b)
                    );
                    assert_eq!(a, b);
                }
            }
        }
    }

    /// Weights at the edges of the choice: zeros among them, 1e-300 beside
    /// 1e300, ten equal ones, one source.
    const WEIGHT_SETS: [&[f64]; 8] = [
        &[0.4, 0.3, 0.3],
        &[0.1, 0.0, 0.2, 0.7],
        &[0.0, 1.0],
        &[1e-300, 1.0, 1e300],
        &[0.1; 10],
        &[1.0],
        &[3.0, 1e-17, 1.0],
        &[1.0, 1.0, 0.0],
    ];

    #[test]
    fn the_branchless_choice_and_the_multiplication_change_no_draw() {
        let mut r = SplitMix64::new(3);
        let sets = &WEIGHT_SETS[..5];
        for _ in 0..200_000 {
            let x = r.next_u64() >> 11;
            assert_eq!(
                (x as f64 * (1.0 / (1u64 << 53) as f64)).to_bits(),
                (x as f64 / (1u64 << 53) as f64).to_bits()
            );
        }
        for w in sets {
            let total: f64 = w.iter().sum();
            let edges = [0.0, 1.0 - f64::EPSILON / 2.0, 0.4, 0.7, 0.3];
            for i in 0..100_000 {
                let u = match edges.get(i) {
                    Some(&e) => e,
                    None => unit_at(11, i as u64),
                };
                assert_eq!(
                    choose(w, total, u, |_| true),
                    choose_first_hit(w, total, u, |_| true),
                    "{w:?} {u}"
                );
                // The first source dropped out: the others' total.
                let rest: f64 = w[1..].iter().sum();
                assert_eq!(
                    choose(w, rest, u, |s| s > 0),
                    choose_first_hit(w, rest, u, |s| s > 0),
                    "{w:?} {u} without source 0"
                );
            }
        }
        assert_eq!(choose(&[0.0, 0.0], 0.0, 0.5, |_| true), None);
    }

    #[test]
    fn thresholds_pick_what_choose_picks_at_every_edge() {
        let mut r = SplitMix64::new(9);
        for w in WEIGHT_SETS {
            let total: f64 = w.iter().sum();
            let t = Thresholds::new(w, total).unwrap();
            let by_choose = |x: u64| choose(w, total, unit_of(x), |_| true).unwrap();
            // Both sides of every run's first draw, and the ends.
            let mut xs = vec![0, 1, DRAWS - 2, DRAWS - 1];
            for &b in &t.starts {
                xs.extend((b.saturating_sub(3)..b.saturating_add(3)).filter(|&x| x < DRAWS));
            }
            for _ in 0..100_000 {
                xs.push(r.next_u64() >> 11);
            }
            for x in xs {
                assert_eq!(t.pick(x), by_choose(x), "{w:?} at {x}");
            }
        }
        assert_eq!(Thresholds::new(&[0.0, 0.0], 0.0), None);
    }

    #[test]
    fn shares_follow_the_weights_and_the_schedule() {
        let d = draws(
            DrawUnit::Sample,
            vec![SourceEnd::Cycle; 3],
            vec![10, 20, 30],
        );
        let mut sched = Schedule::new(vec![1.0, 2.0, 1.0]);
        sched.set(500, vec![0.0, 0.0, 1.0]);
        let mut c = Cursor {
            step: 0,
            counts: vec![0; 3],
        };
        let mut n = [0u64; 3];
        for _ in 0..500 {
            for (s, _) in d.step(&sched, &mut c) {
                n[s] += 1;
            }
        }
        let total = 500.0 * 64.0;
        for (s, want) in [(0, 0.25), (1, 0.5), (2, 0.25)] {
            let got = n[s] as f64 / total;
            assert!((got - want).abs() < 0.01, "source {s}: {got}");
        }
        let before = c.counts.clone();
        d.step(&sched, &mut c);
        assert_eq!(
            c.counts[2],
            before[2] + 64,
            "from step 500 on, source 2 alone"
        );
    }

    #[test]
    fn exhausted_sources_drop_out_and_the_mixture_ends() {
        for unit in [DrawUnit::Sample, DrawUnit::Batch] {
            let d = draws(unit, vec![SourceEnd::Exhaust; 2], vec![100, 250]);
            let sched = Schedule::new(vec![3.0, 1.0]);
            let mut c = Cursor {
                step: 0,
                counts: vec![0; 2],
            };
            let mut seen = vec![Vec::new(); 2];
            loop {
                let s = d.step(&sched, &mut c);
                if s.is_empty() {
                    break;
                }
                for (src, k) in s {
                    seen[src].push(k);
                }
            }
            assert_eq!(seen[0], (0..100).collect::<Vec<_>>(), "{unit}");
            assert_eq!(seen[1], (0..250).collect::<Vec<_>>(), "{unit}");
        }
    }

    #[test]
    fn batch_draws_give_homogeneous_batches() {
        let d = draws(DrawUnit::Batch, vec![SourceEnd::Cycle; 2], vec![5, 5]);
        let sched = Schedule::new(vec![1.0, 1.0]);
        let mut c = Cursor {
            step: 0,
            counts: vec![0; 2],
        };
        let mut firsts = [0; 2];
        for _ in 0..200 {
            let s = d.step(&sched, &mut c);
            assert!(s.iter().all(|(x, _)| *x == s[0].0));
            firsts[s[0].0] += 1;
        }
        assert!(firsts[0] > 70 && firsts[1] > 70, "{firsts:?}");
    }

    #[test]
    fn bad_weights_are_refused_by_name() {
        assert!(check_weights(&[1.0], 2).is_err());
        assert!(check_weights(&[1.0, f64::NAN], 2).is_err());
        assert!(check_weights(&[1.0, -1.0], 2).is_err());
        assert!(check_weights(&[0.0, 0.0], 2).is_err());
        assert!(check_weights(&[0.0, 2.0], 2).is_ok());
        assert!(Schedule::from_changes(vec![(1, vec![1.0])], 1).is_err());
        assert!(Schedule::from_changes(vec![(0, vec![1.0]), (0, vec![1.0])], 1).is_err());
    }
}
