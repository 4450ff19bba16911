//! The draws of a steady step as integer thresholds: the float choice of
//! [`super::choose`] turned into one comparison a source on the draw's 53
//! random bits, with the same source for every draw, so a mixture's
//! sequence (and every saved state) is unchanged by it.
//!
//! A step's draws are made a block at a time, each stage over the whole
//! block (the hashes, then one comparison a source, then the sources), so
//! the compiler makes vector instructions of each; with AVX-512 where the
//! CPU has it (its 64-bit multiplication makes eight hashes at once; AVX2
//! has none). The same numbers either way.

use super::{bits_at, choose, unit_of, DRAWS};

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
    #[cfg(test)]
    pub(super) fn pick(&self, x: u64) -> usize {
        let run = self
            .starts
            .iter()
            .map(|&t| usize::from(x >= t))
            .sum::<usize>();
        self.picks[run]
    }

    /// The sources of draws `first..first + n` in the stream of `key`,
    /// appended to `out`.
    pub(super) fn pick_run(&self, key: u64, first: u64, n: u64, out: &mut Vec<u32>) {
        let start = out.len();
        out.resize(start + n as usize, 0);
        let identity = self.picks.iter().enumerate().all(|(i, &p)| i == p);
        #[cfg(target_arch = "x86_64")]
        let avx512 = std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512vl");
        for (b, block) in out[start..].chunks_mut(BLOCK).enumerate() {
            let first = first + (b * BLOCK) as u64;
            #[cfg(target_arch = "x86_64")]
            if avx512 {
                // SAFETY: the CPU has these features, checked above.
                unsafe { runs_avx512(&self.starts, key, first, block) };
                self.name_runs(identity, block);
                continue;
            }
            runs(&self.starts, key, first, block);
            self.name_runs(identity, block);
        }
    }

    /// Each run index in `block` replaced by the source it picks.
    fn name_runs(&self, identity: bool, block: &mut [u32]) {
        if !identity {
            for r in block {
                *r = self.picks[*r as usize] as u32;
            }
        }
    }
}

/// Draws a block holds: their bits fit on the stack.
const BLOCK: usize = 64;

/// Each draw's run (how many `starts` its bits reach) for draws
/// `first..first + block.len()` of the stream of `key`.
#[inline(always)]
fn runs(starts: &[u64], key: u64, first: u64, block: &mut [u32]) {
    let mut bits = [0u64; BLOCK];
    let bits = &mut bits[..block.len()];
    for (i, b) in bits.iter_mut().enumerate() {
        *b = bits_at(key, first + i as u64);
    }
    block.fill(0);
    for &t in starts {
        for (r, &x) in block.iter_mut().zip(bits.iter()) {
            *r += u32::from(x >= t);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl")]
unsafe fn runs_avx512(starts: &[u64], key: u64, first: u64, block: &mut [u32]) {
    runs(starts, key, first, block);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_of_draws_picks_what_each_draw_picks() {
        for w in [
            &[0.4, 0.3, 0.3][..],
            &[0.0, 1.0, 2.0, 0.0, 1.0],
            &[1.0],
            &[0.1; 20],
        ] {
            let total: f64 = w.iter().sum();
            let t = Thresholds::new(w, total).unwrap();
            for (first, n) in [(0, 256), (1 << 40, 3), (77, 64), (5, 0), (DRAWS, 129)] {
                let want: Vec<u32> = (first..first + n)
                    .map(|g| t.pick(bits_at(99, g)) as u32)
                    .collect();
                let mut got = vec![7];
                t.pick_run(99, first, n, &mut got);
                assert_eq!(got[0], 7, "appended, not overwritten");
                assert_eq!(&got[1..], &want[..], "{w:?} {first} {n}");
                // The portable stage by itself (the CPU may take the other).
                let mut runs_only = vec![0u32; n.min(BLOCK as u64) as usize];
                runs(&t.starts, 99, first, &mut runs_only);
                t.name_runs(
                    t.picks.iter().enumerate().all(|(i, &p)| i == p),
                    &mut runs_only,
                );
                assert_eq!(&runs_only[..], &want[..runs_only.len()]);
            }
        }
    }
}
