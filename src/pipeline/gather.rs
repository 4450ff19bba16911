//! Batches of numbers gathered, not taken: when every output column is a
//! fixed-width number (no images, no arrays, no booleans), each column's
//! buffer is allocated once and the backend copies every row's value
//! into place ([`crate::layouts::gather`]); no Arrow array is built. Any
//! other case, or a backend that cannot, takes the rows as before.

use super::batch::{BatchColumn, Element};
use super::columns::{ColumnPlan, Kind};
use crate::error::Result;

/// The element of a column the gather fills, or None.
fn gathered(plan: &ColumnPlan) -> Option<Element> {
    match plan.kind {
        Kind::Scalar(e) if e != Element::Bool && e != Element::BFloat16 => Some(e),
        _ => None,
    }
}

/// Every column of a batch of `n` rows, filled by `read` ((column name,
/// bytes a value, buffer) for each); None when a column is not a number
/// or `read` cannot (it returns false).
///
/// # Errors
/// What `read` returns.
pub(crate) fn gather_columns(
    plans: &[ColumnPlan],
    n: usize,
    read: impl FnOnce(&mut [(&str, usize, &mut [u8])]) -> Result<bool>,
) -> Result<Option<Vec<(String, BatchColumn)>>> {
    let Some(elements) = plans.iter().map(gathered).collect::<Option<Vec<_>>>() else {
        return Ok(None);
    };
    let mut data: Vec<Vec<u8>> = elements.iter().map(|e| vec![0u8; n * e.size()]).collect();
    let mut outs: Vec<(&str, usize, &mut [u8])> = plans
        .iter()
        .zip(&elements)
        .zip(data.iter_mut())
        .map(|((p, e), d)| (p.name.as_str(), e.size(), d.as_mut_slice()))
        .collect();
    if !read(&mut outs)? {
        return Ok(None);
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
