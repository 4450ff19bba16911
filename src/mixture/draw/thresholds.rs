//! The draws of a steady step as integer thresholds: the float choice of
//! [`super::choose`] turned into one comparison a source on the draw's 53
//! random bits, with the same source for every draw, so a mixture's
//! sequence (and every saved state) is unchanged by it.

use super::{choose, unit_of, DRAWS};

/// [`choose`] over every source, all live, as integer thresholds on the
/// draw's 53 bits: the same source for every draw, with a comparison a
/// source instead of a multiplication and a subtraction.
///
/// `choose(weights, total, x·2^-53)` never decreases as `x` grows (the
/// product and the subtractions are monotone, and the fallback is the last
/// source), so each source it can pick holds one run of draws. `starts[k]`
/// is the first draw of `picks[k + 1]`'s run; `picks[0]` starts at 0. Each
/// start is found from the weights' estimate and made exact against
/// `choose` itself.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Thresholds {
    pub(super) picks: Vec<usize>,
    pub(super) starts: Vec<u64>,
}

impl Thresholds {
    pub(super) fn new(weights: &[f64], total: f64) -> Option<Thresholds> {
        let pick = |x: u64| choose(weights, total, unit_of(x), |_| true);
        let first = pick(0)?;
        let mut picks = vec![first];
        let mut starts = Vec::new();
        let mut below = 0.0;
        for (s, &w) in weights.iter().enumerate() {
            if s > first && w > 0.0 {
                // The first draw whose pick is `s` or later: between a draw
                // that picks an earlier source and one that picks `s` or
                // later, searched from the estimate outwards, then halved.
                let guess = ((below / total) * DRAWS as f64).clamp(0.0, (DRAWS - 1) as f64) as u64;
                let (mut lo, mut hi) = (guess, guess);
                let mut reach = 1u64;
                while lo > 0 && pick(lo).is_some_and(|p| p >= s) {
                    lo = lo.saturating_sub(reach);
                    reach *= 2;
                }
                reach = 1;
                while hi < DRAWS && pick(hi).is_some_and(|p| p < s) {
                    hi = (hi + reach).min(DRAWS);
                    reach *= 2;
                }
                // pick(lo) < s (pick(0) is `first`), and pick(hi) >= s or
                // hi == 2^53 (no draw picks `s` or later).
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    if pick(mid).is_some_and(|p| p >= s) {
                        hi = mid;
                    } else {
                        lo = mid;
                    }
                }
                picks.push(s);
                starts.push(hi);
            }
            below += w;
        }
        Some(Thresholds { picks, starts })
    }

    /// The source of the draw with these 53 bits.
    pub(super) fn pick(&self, x: u64) -> usize {
        let run = self
            .starts
            .iter()
            .map(|&t| usize::from(x >= t))
            .sum::<usize>();
        self.picks[run]
    }
}
