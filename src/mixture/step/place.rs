//! Each row of a step placed: its slot among its source's grouped rows and
//! its view position in draw order, from each row's source.
//!
//! Why two ways: row by row, each row reads and bumps its source's next
//! place, so rows of the same source wait on each other's store (a chain
//! through memory, ~7 cycles a row, 0.6 µs of a 256-row step: the largest
//! cost a mixture adds to a single cache's batch in a profile of the
//! input pipeline). With AVX-512, eight rows at a time: for each source,
//! a compare gives the rows that are its, a compress writes their slots
//! and an expand fills in their positions, with no chain between rows.
//! Register forms, not the memory forms of compress and expand, which
//! are slow (microcoded) on some processors. The same slots and positions
//! either way.

use smallvec::SmallVec;

/// Sources the vector form handles (each costs a compare an 8-row block).
const VECTOR_SOURCES: usize = 16;

/// Fills `slots` (`slots[bounds[s] + k]` is the row index of source `s`'s
/// `k`-th row) and `positions` (row `i`'s view position, `grouped` at its
/// source's next place), for rows of `sources` (each below
/// `bounds.len() - 1`; `bounds`: where each source's grouped rows start,
/// and the end). `slots` and `positions` are as long as `sources`.
pub(super) fn place(
    sources: &[u32],
    grouped: &[u64],
    bounds: &[usize],
    slots: &mut [usize],
    positions: &mut [u64],
) {
    let n = sources.len();
    assert!(grouped.len() == n && slots.len() == n && positions.len() == n);
    assert_eq!(bounds.last(), Some(&n));
    #[cfg(target_arch = "x86_64")]
    if bounds.len() - 1 <= VECTOR_SOURCES
        && std::arch::is_x86_feature_detected!("avx512f")
        && sources.iter().all(|&s| (s as usize) < bounds.len() - 1)
    {
        // SAFETY: the CPU has AVX-512F (checked above); the lengths and
        // every source's range are checked above, which the vector form's
        // loads and stores stay within (see its comments).
        unsafe { place_avx512(sources, grouped, bounds, slots, positions) };
        return;
    }
    place_rows(sources, grouped, bounds, slots, positions);
}

/// [`place`] a row at a time.
fn place_rows(
    sources: &[u32],
    grouped: &[u64],
    bounds: &[usize],
    slots: &mut [usize],
    positions: &mut [u64],
) {
    let mut next: SmallVec<[usize; 16]> = bounds[..bounds.len() - 1].into();
    for (i, (&x, p)) in sources.iter().zip(positions.iter_mut()).enumerate() {
        let w = &mut next[x as usize];
        slots[*w] = i;
        *p = grouped[*w];
        *w += 1;
    }
}

/// [`place`] eight rows at a time.
///
/// # Safety
/// The CPU has AVX-512F; `grouped`, `slots` and `positions` are as long as
/// `sources`, every source is below `bounds.len() - 1`, and the rows of
/// source `s` number `bounds[s + 1] - bounds[s]`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn place_avx512(
    sources: &[u32],
    grouped: &[u64],
    bounds: &[usize],
    slots: &mut [usize],
    positions: &mut [u64],
) {
    use std::arch::x86_64::*;
    let count = bounds.len() - 1;
    let mut next: SmallVec<[usize; 16]> = bounds[..count].into();
    let n = sources.len();
    let lanes = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
    let mut i = 0;
    while i < n {
        let left = (n - i).min(8);
        let live: __mmask8 = (0xFFu16 >> (8 - left)) as u8;
        // SAFETY (all below): loads and stores are masked to `live` rows
        // of `sources` and `positions` (from `i`, at most `n - i`), and to
        // the first `k` places of source `s` from `next[s]`, which stay
        // within `bounds[s + 1] <= n` as the source has that many rows.
        let own = _mm512_maskz_loadu_epi32(live.into(), sources.as_ptr().add(i).cast());
        let own = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(own));
        let rows = _mm512_add_epi64(_mm512_set1_epi64(i as i64), lanes);
        let mut pos = _mm512_setzero_si512();
        for (s, w) in next.iter_mut().enumerate() {
            let mine = _mm512_mask_cmpeq_epi64_mask(live, own, _mm512_set1_epi64(s as i64));
            if mine == 0 {
                continue;
            }
            let k = mine.count_ones();
            let first: __mmask8 = (0xFFu16 >> (8 - k)) as u8;
            let from = _mm512_maskz_loadu_epi64(first, grouped.as_ptr().add(*w).cast());
            pos = _mm512_mask_expand_epi64(pos, mine, from);
            let packed = _mm512_maskz_compress_epi64(mine, rows);
            _mm512_mask_storeu_epi64(slots.as_mut_ptr().add(*w).cast(), first, packed);
            *w += k as usize;
        }
        _mm512_mask_storeu_epi64(positions.as_mut_ptr().add(i).cast(), live, pos);
        i += 8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::SplitMix64;

    #[test]
    fn both_ways_place_every_row_where_its_source_gives_it() {
        let mut r = SplitMix64::new(9);
        for count in [1usize, 2, 3, 5, 8, 16, 17] {
            for n in [0usize, 1, 7, 8, 9, 255, 256] {
                let sources: Vec<u32> = (0..n)
                    .map(|_| (r.next_u64() % count as u64) as u32)
                    .collect();
                let mut bounds = vec![0usize; count + 1];
                for &s in &sources {
                    bounds[s as usize + 1] += 1;
                }
                for s in 0..count {
                    bounds[s + 1] += bounds[s];
                }
                let grouped: Vec<u64> = (0..n).map(|_| r.next_u64()).collect();
                // Expected: row i is the k-th of its source, at bounds[s] + k.
                let mut seen = vec![0usize; count];
                let mut want_slots = vec![0usize; n];
                let mut want_pos = vec![0u64; n];
                for (i, &s) in sources.iter().enumerate() {
                    let at = bounds[s as usize] + seen[s as usize];
                    seen[s as usize] += 1;
                    want_slots[at] = i;
                    want_pos[i] = grouped[at];
                }
                let (mut slots, mut pos) = (vec![usize::MAX; n], vec![u64::MAX; n]);
                place(&sources, &grouped, &bounds, &mut slots, &mut pos);
                assert_eq!(
                    (&slots, &pos),
                    (&want_slots, &want_pos),
                    "{count} sources, {n} rows"
                );
                let (mut slots, mut pos) = (vec![usize::MAX; n], vec![u64::MAX; n]);
                place_rows(&sources, &grouped, &bounds, &mut slots, &mut pos);
                assert_eq!(
                    (&slots, &pos),
                    (&want_slots, &want_pos),
                    "{count} sources, {n} rows"
                );
            }
        }
    }
}
