//! One step of a mixture, drawn and placed: each row's source and view
//! position in draw order (what a batch reports), and the same rows grouped
//! by source with the step's slots they go to (what each source reads).
//!
//! Why grouped as a source's rows are drawn, not row by row: a source's
//! rows in a step are the next of its count, so their view positions are a
//! slice of its epoch order (copied, not looked up a row at a time), and
//! each row's slot and position are found in one pass over the step, with
//! no branch on the row's source (a random branch the processor cannot
//! predict). Row by row, the split and the lookups were most of what a
//! mixture's batch cost beyond a single cache's. (The pass eight rows at a
//! time with AVX-512 compress and expand was tried: no faster than this
//! loop on a 256-row step of three sources, 0.30 µs both, measured apart.)

use smallvec::SmallVec;

use crate::error::{Error, Result};

/// A step's working vectors (its rows grouped by source, where each
/// source's start, each grouped row's slot), kept by a thread that reads
/// one step after another and used again: a step then allocates only the
/// vectors its batch keeps (each row's source and position).
#[derive(Debug, Default)]
pub(crate) struct StepScratch {
    pub(crate) grouped: Vec<u64>,
    pub(crate) bounds: Vec<usize>,
    slots: Vec<usize>,
}

/// One step's rows: in draw order, and grouped by source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRows {
    /// Each row's source, in draw order.
    sources: Vec<u32>,
    /// Each row's view position in its source, in draw order.
    positions: Vec<u64>,
    /// Source `s`'s view positions in its draw order:
    /// `grouped[bounds[s]..bounds[s + 1]]`.
    grouped: Vec<u64>,
    /// The step's slot of each of `grouped`; empty when one source gave
    /// every row (they fill the step in order).
    slots: Vec<usize>,
    bounds: Vec<usize>,
}

impl StepRows {
    /// The rows of a step from each row's source in draw order and the
    /// view positions of each source's rows in the order drawn, concatenated
    /// in source order (`bounds`: where each source's start, and the end).
    pub(crate) fn new(sources: Vec<u32>, grouped: Vec<u64>, bounds: Vec<usize>) -> StepRows {
        let scratch = StepScratch {
            grouped,
            bounds,
            slots: Vec::new(),
        };
        StepRows::with_scratch(sources, scratch)
    }

    /// [`StepRows::new`] with the grouped rows and bounds in `scratch`,
    /// whose slots vector is used again.
    pub(crate) fn with_scratch(sources: Vec<u32>, scratch: StepScratch) -> StepRows {
        let StepScratch {
            grouped,
            bounds,
            mut slots,
        } = scratch;
        let n = sources.len();
        debug_assert_eq!(grouped.len(), n);
        debug_assert_eq!(bounds.last(), Some(&n));
        slots.clear();
        let positions = if n > 0 && bounds.windows(2).any(|b| b[1] - b[0] == n) {
            // One source gave the step (a batch draw): in order, with no
            // slots ([`StepRows::by_source`] gives that source none).
            grouped.clone()
        } else {
            // One pass: row `i` is its source's next row, at `next[source]`
            // of the grouped rows; its slot is `i`, its position is there.
            let mut next: SmallVec<[usize; 16]> = bounds[..bounds.len() - 1].into();
            slots.resize(n, 0);
            let mut positions = Vec::with_capacity(n);
            positions.extend(sources.iter().enumerate().map(|(i, &x)| {
                let w = &mut next[x as usize];
                slots[*w] = i;
                let p = grouped[*w];
                *w += 1;
                p
            }));
            positions
        };
        StepRows {
            sources,
            positions,
            grouped,
            slots,
            bounds,
        }
    }

    /// The rows `(source, view position)` in draw order, of a mixture of
    /// `sources` sources.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a source that is not one of them.
    pub fn from_pairs(sources: usize, rows: &[(usize, u64)]) -> Result<StepRows> {
        if let Some((s, _)) = rows.iter().find(|(s, _)| *s >= sources) {
            return Err(Error::InvalidArgument(format!(
                "source {s} of a mixture of {sources}: give sources 0 to {}",
                sources.saturating_sub(1)
            )));
        }
        let mut bounds = vec![0usize; sources + 1];
        for &(s, _) in rows {
            bounds[s + 1] += 1;
        }
        for s in 0..sources {
            bounds[s + 1] += bounds[s];
        }
        let mut next = bounds[..sources].to_vec();
        let mut grouped = vec![0u64; rows.len()];
        for &(s, p) in rows {
            grouped[next[s]] = p;
            next[s] += 1;
        }
        let order = rows.iter().map(|&(s, _)| s as u32).collect();
        Ok(StepRows::new(order, grouped, bounds))
    }

    /// Rows in the step.
    pub fn len(&self) -> usize {
        self.sources.len()
    }

    /// True for a step with no rows.
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// Each row's source, in draw order.
    pub fn sources(&self) -> &[u32] {
        &self.sources
    }

    /// Each row's view position in its source, in draw order.
    pub fn positions(&self) -> &[u64] {
        &self.positions
    }

    /// Each row's source and view position, in draw order.
    pub fn into_parts(self) -> (Vec<u32>, Vec<u64>) {
        (self.sources, self.positions)
    }

    /// [`StepRows::into_parts`], and the working vectors to use again.
    pub(crate) fn into_parts_and_scratch(self) -> (Vec<u32>, Vec<u64>, StepScratch) {
        let scratch = StepScratch {
            grouped: self.grouped,
            bounds: self.bounds,
            slots: self.slots,
        };
        (self.sources, self.positions, scratch)
    }

    /// Each source that gave rows: (source, its view positions in the
    /// order drawn, the step's slots they go to). A source that gave every
    /// row has no slots: its rows fill the step in order.
    pub(crate) fn by_source(&self) -> impl Iterator<Item = (usize, &[u64], Option<&[usize]>)> {
        let n = self.len();
        self.bounds
            .windows(2)
            .enumerate()
            .filter_map(move |(s, b)| {
                let (lo, hi) = (b[0], b[1]);
                (hi > lo).then(|| {
                    let slots = (hi - lo < n).then(|| &self.slots[lo..hi]);
                    (s, &self.grouped[lo..hi], slots)
                })
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::SplitMix64;

    #[test]
    fn grouped_rows_are_the_draw_order_rows_split_by_source() {
        let mut r = SplitMix64::new(5);
        for sources in [1usize, 2, 3, 17, 40] {
            for n in [0usize, 1, 7, 256] {
                let rows: Vec<(usize, u64)> = (0..n)
                    .map(|_| {
                        let s = (r.next_u64() % sources as u64) as usize;
                        (s, r.next_u64() % 1000)
                    })
                    .collect();
                let step = StepRows::from_pairs(sources, &rows).unwrap();
                assert_eq!(step.len(), n);
                let got: Vec<(usize, u64)> = step
                    .sources()
                    .iter()
                    .zip(step.positions())
                    .map(|(&s, &p)| (s as usize, p))
                    .collect();
                assert_eq!(got, rows, "{sources} sources, {n} rows");
                let mut seen = vec![None; n];
                for (s, pos, slots) in step.by_source() {
                    let want: Vec<usize> = (0..n).filter(|&i| rows[i].0 == s).collect();
                    match slots {
                        Some(slots) => assert_eq!(slots, &want[..]),
                        None => assert_eq!(want, (0..n).collect::<Vec<_>>()),
                    }
                    for (k, &i) in want.iter().enumerate() {
                        assert_eq!(pos[k], rows[i].1);
                        assert!(seen[i].replace(s).is_none());
                    }
                }
                assert!(seen.iter().all(Option::is_some));
            }
        }
        assert!(StepRows::from_pairs(2, &[(0, 1), (2, 0)]).is_err());
    }
}
