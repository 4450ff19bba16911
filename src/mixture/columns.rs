//! A mixture's columns: what every source gives, by the same name and the
//! same feature, checked when the mixture is made; and one step's rows,
//! taken from each source in one read and put in draw order.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::Schema;
use smallvec::SmallVec;

use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::features::Features;

use super::step::StepRows;

/// How one source's columns become the mixture's: for each output column,
/// the source column it reads.
#[derive(Debug, Clone)]
pub(crate) struct SourceColumns {
    /// (output name, the source's column) for the output columns, in order.
    pub(crate) reads: Vec<(String, String)>,
    /// Each read column's index among the source's stored columns
    /// ([`Dataset::stored_column`]), found when the mixture is made: a
    /// step's located copy then looks up no column by name in a schema.
    stored: Vec<Option<usize>>,
}

impl SourceColumns {
    /// Where output column `output` is among `reads` (and `stored`).
    fn output(&self, output: &str) -> Option<usize> {
        self.reads.iter().position(|(o, _)| o == output)
    }

    /// The source's column read as output column `output`.
    fn read_of(&self, output: &str) -> Option<&str> {
        self.output(output).map(|k| self.reads[k].1.as_str())
    }

    /// The stored index of the source's column read as output `output`.
    fn stored_of(&self, output: &str) -> Option<usize> {
        self.stored[self.output(output)?]
    }
}

/// The mixture's features and each source's column plan.
///
/// `mappings[s]`: the source's own (output name, its column) pairs, or None
/// for its columns as they are. The output columns are the names every
/// source gives, in the first source's order; each must be the same
/// feature in every source.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the source and the column: a mapping
/// that reads a column the source does not have or names an output twice,
/// a column of different features in two sources, or no column in common.
pub(crate) fn plan(
    names: &[String],
    datasets: &[Dataset],
    mappings: &[Option<Vec<(String, String)>>],
) -> Result<(Arc<Features>, Vec<SourceColumns>)> {
    let mut views: Vec<Vec<(String, String)>> = Vec::new();
    for ((name, ds), map) in names.iter().zip(datasets).zip(mappings) {
        let own = ds.column_names();
        let view = match map {
            None => own.iter().map(|c| (c.clone(), c.clone())).collect(),
            Some(m) => {
                for (i, (out, col)) in m.iter().enumerate() {
                    if !own.contains(col) {
                        return Err(Error::InvalidArgument(format!(
                            "mixture source '{name}' has no column '{col}' (its columns: {own:?})"
                        )));
                    }
                    if m[..i].iter().any(|(o, _)| o == out) {
                        return Err(Error::InvalidArgument(format!(
                            "mixture source '{name}' names the output column '{out}' twice"
                        )));
                    }
                }
                m.clone()
            }
        };
        views.push(view);
    }
    let mut out = Features::new();
    let mut plans: Vec<SourceColumns> = vec![
        SourceColumns {
            reads: Vec::new(),
            stored: Vec::new(),
        };
        views.len()
    ];
    for (o, c0) in &views[0] {
        let mut reads = Vec::with_capacity(views.len());
        for v in &views {
            match v.iter().find(|(n, _)| n == o) {
                Some((_, c)) => reads.push(c.clone()),
                None => break,
            }
        }
        if reads.len() < views.len() {
            continue;
        }
        let f0 = datasets[0].features().get(c0).expect("a checked column");
        for (s, c) in reads.iter().enumerate().skip(1) {
            let f = datasets[s].features().get(c).expect("a checked column");
            if f != f0 {
                return Err(Error::InvalidArgument(format!(
                    "column '{o}' is {} in mixture source '{}' but {} in '{}': map one of them to another name, or leave it out with a column mapping",
                    f0.class_name(),
                    names[0],
                    f.class_name(),
                    names[s]
                )));
            }
        }
        out.insert(o.clone(), f0.clone());
        for ((p, c), ds) in plans.iter_mut().zip(reads).zip(datasets) {
            p.stored.push(ds.stored_column(&c));
            p.reads.push((o.clone(), c));
        }
    }
    if out.names().is_empty() {
        return Err(Error::InvalidArgument(format!(
            "the mixture's sources {names:?} have no column in common: give column mappings"
        )));
    }
    Ok((Arc::new(out), plans))
}

/// One step's rows read, before they are put in draw order: a batch of
/// the mixture's columns per source read, and each row's (part, row in it).
#[derive(Debug)]
pub struct MixedParts {
    /// One batch per source that gave rows, in the mixture's schema.
    pub parts: Vec<RecordBatch>,
    /// Row `i` of the step is row `index[i].1` of `parts[index[i].0]`.
    pub index: Vec<(usize, usize)>,
}

/// One step's rows, read with one `take` per source.
///
/// # Errors
/// Read errors, and Arrow errors (a cache whose cells do not match its
/// features).
pub(crate) fn take_parts(
    schema: &Arc<Schema>,
    datasets: &[Dataset],
    plans: &[SourceColumns],
    picks: &StepRows,
) -> Result<MixedParts> {
    let mut index = vec![(0, 0); picks.len()];
    let mut parts = Vec::new();
    for (s, pos, slots) in picks.by_source() {
        let rows: Vec<i64> = pos.iter().map(|&p| p as i64).collect();
        let b = datasets[s].take_arrow(&rows)?;
        let cols = plans[s]
            .reads
            .iter()
            .map(|(_, c)| {
                b.column_by_name(c).cloned().ok_or_else(|| {
                    Error::InvalidArgument(format!("the source's rows have no column '{c}'"))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let opts = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows.len()));
        match slots {
            Some(slots) => {
                for (r, &i) in slots.iter().enumerate() {
                    index[i] = (parts.len(), r);
                }
            }
            None => index
                .iter_mut()
                .enumerate()
                .for_each(|(r, x)| *x = (parts.len(), r)),
        }
        parts.push(
            RecordBatch::try_new_with_options(schema.clone(), cols, &opts)
                .map_err(|e| Error::InvalidArgument(format!("mixing the sources' columns: {e}")))?,
        );
    }
    Ok(MixedParts { parts, index })
}

/// One step's fixed-width output columns, gathered into `outs` ((output
/// name, bytes a value, buffer)) in draw order: one gather a source, each
/// row to its place in the step. False when a source cannot.
///
/// # Errors
/// Read errors.
pub(crate) fn gather_parts(
    datasets: &[Dataset],
    plans: &[SourceColumns],
    picks: &StepRows,
    outs: &mut [(&str, usize, &mut [u8])],
) -> Result<bool> {
    for (s, pos, placed) in picks.by_source() {
        let mut own = Vec::with_capacity(outs.len());
        for (name, width, data) in outs.iter_mut() {
            let Some(column) = plans[s].read_of(name) else {
                return Ok(false);
            };
            own.push((column, *width, &mut **data));
        }
        if !datasets[s].gather_fixed(pos, placed, &mut own)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// One step's fixed-width output columns copied into `outs` ((output
/// name, bytes a value, buffer)) in draw order, located first in every
/// source and then copied in one pass a column: the copy is the random
/// reads, and one loop over the step in order keeps as many of them in
/// flight as a single cache's gather does (with a copy a source, each row
/// to its slot, the copy took 46% more of a profile's samples than a
/// single cache's did for the same rows). False when a source keeps no
/// such memory ([`gather_parts`] then).
///
/// # Errors
/// Read errors.
pub(crate) fn locate_then_copy(
    datasets: &[Dataset],
    plans: &[SourceColumns],
    picks: &StepRows,
    outs: &mut [(&str, usize, &mut [u8])],
) -> Result<bool> {
    let mut dst: Vec<Vec<&[u8]>> = outs.iter().map(|_| vec![&[][..]; picks.len()]).collect();
    for (s, pos, placed) in picks.by_source() {
        let Some(columns) = outs
            .iter()
            .map(|(name, width, _)| plans[s].stored_of(name).map(|c| (c, *width)))
            .collect::<Option<SmallVec<[_; 8]>>>()
        else {
            return Ok(false);
        };
        if !datasets[s].locate_fixed_at(pos, &columns, placed, &mut dst)? {
            return Ok(false);
        }
    }
    for ((_, width, data), src) in outs.iter_mut().zip(&dst) {
        let mut out = crate::layouts::gather::FixedOut {
            column: 0,
            width: *width,
            data,
        };
        crate::layouts::gather::copy_values(&mut out, src, None)?;
    }
    Ok(true)
}

/// One step's rows in draw order, as one batch.
///
/// # Errors
/// As [`take_parts`].
pub(crate) fn assemble(
    schema: &Arc<Schema>,
    datasets: &[Dataset],
    plans: &[SourceColumns],
    picks: &StepRows,
) -> Result<RecordBatch> {
    let MixedParts { parts, index } = take_parts(schema, datasets, plans, picks)?;
    let columns = (0..schema.fields().len())
        .map(|k| {
            let arrays: Vec<&dyn arrow_array::Array> =
                parts.iter().map(|p| p.column(k).as_ref()).collect();
            arrow_select::interleave::interleave(&arrays, &index)
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::InvalidArgument(format!("mixing the sources' columns: {e}")))?;
    let opts = arrow_array::RecordBatchOptions::new().with_row_count(Some(picks.len()));
    RecordBatch::try_new_with_options(schema.clone(), columns, &opts)
        .map_err(|e| Error::InvalidArgument(format!("mixing the sources' columns: {e}")))
}
