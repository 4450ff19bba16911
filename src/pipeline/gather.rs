//! Batches of numbers gathered, not taken: when every output column is a
//! fixed-width number (no images, no arrays, no booleans), each column's
//! buffer comes from the pipeline's pool (a consumed batch's, or a new
//! one) and the backend copies every row's value into place
//! ([`crate::layouts::gather`]); no Arrow array is built. Any other case,
//! or a backend that cannot, takes the rows as before.
//!
//! Why the pool for buffers of a few kilobytes: a batch is allocated on a
//! pipeline thread and freed on the consumer's, and glibc's allocator then
//! serialises the two threads on the arena's lock (seen in a profile of
//! the consumer's thread: a fifth of its time waiting for, or waking, the
//! other thread in `free`).

use super::batch::{BatchColumn, Element};
use super::buffers::BufferPool;
use super::columns::{ColumnPlan, Kind};
use crate::error::Result;

/// The element of a column the gather fills, or None.
fn gathered(plan: &ColumnPlan) -> Option<Element> {
    match plan.kind {
        Kind::Scalar(e) if e != Element::Bool && e != Element::BFloat16 => Some(e),
        _ => None,
    }
}

/// Every column of a batch of `n` rows in buffers from `buffers`, filled
/// by `read` ((column name, bytes a value, buffer) for each); None when a
/// column is not a number or `read` cannot (it returns false).
///
/// # Errors
/// What `read` returns.
pub(crate) fn gather_columns(
    plans: &[ColumnPlan],
    n: usize,
    buffers: &BufferPool,
    read: impl FnOnce(&mut [(&str, usize, &mut [u8])]) -> Result<bool>,
) -> Result<Option<Vec<(String, BatchColumn)>>> {
    let Some(elements) = plans.iter().map(gathered).collect::<Option<Vec<_>>>() else {
        return Ok(None);
    };
    // Every value is written by `read`: a used buffer's old bytes do not stay.
    let mut data: Vec<Vec<u8>> = elements
        .iter()
        .map(|e| buffers.take(n * e.size()))
        .collect();
    let mut outs: Vec<(&str, usize, &mut [u8])> = plans
        .iter()
        .zip(&elements)
        .zip(data.iter_mut())
        .map(|((p, e), d)| (p.name.as_str(), e.size(), d.as_mut_slice()))
        .collect();
    let done = read(&mut outs);
    drop(outs);
    if !matches!(done, Ok(true)) {
        for d in data {
            buffers.give(d);
        }
        return done.map(|_| None);
    }
    Ok(Some(
        plans
            .iter()
            .zip(elements)
            .zip(data)
            .map(|((p, element), data)| {
                let column = BatchColumn {
                    data,
                    element,
                    shape: vec![n],
                };
                (p.name.clone(), column)
            })
            .collect(),
    ))
}
