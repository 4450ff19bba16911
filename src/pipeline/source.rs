//! What a pipeline reads: a cache's rows (their columns planned in
//! `columns`) or a video cache's windows (`windows`), chosen once from the
//! dataset's backend, or a mixture's rows; and each batch's columns filled
//! from it.

use super::batch::{BatchColumn, Element};
use super::columns::{plan_columns, ColumnPlan, SampleKeys};
use super::gather::gather_columns;
use super::options::PipelineOptions;
#[cfg(feature = "video")]
use super::windows;
use crate::error::Result;

/// Every output column of a pipeline: a cache's rows, or a video cache's
/// windows.
#[derive(Debug, Clone)]
pub(crate) enum Columns {
    /// Columns of rows.
    Rows(Vec<ColumnPlan>),
    /// Windows of a frames or segments cache.
    #[cfg(feature = "video")]
    Windows(
        Box<crate::layouts::LanceVideoFrames>,
        windows::WindowColumns,
    ),
}

impl Columns {
    /// The columns of `ds` that `opts` asks for, checked.
    pub(crate) fn plan(ds: &crate::dataset::Dataset, opts: &PipelineOptions) -> Result<Columns> {
        #[cfg(feature = "video")]
        if let Some(fr) = ds
            .backend()
            .as_any()
            .downcast_ref::<crate::layouts::LanceVideoFrames>()
        {
            let cols = windows::plan_windows(fr, opts)?;
            return Ok(Columns::Windows(Box::new(fr.clone()), cols));
        }
        Ok(Columns::Rows(plan_columns(ds.features(), opts)?))
    }

    /// The columns of a mixture's rows that `opts` asks for, checked.
    pub(crate) fn plan_mixture(
        mix: &crate::mixture::Mixture,
        opts: &PipelineOptions,
    ) -> Result<Columns> {
        Ok(Columns::Rows(plan_columns(mix.features(), opts)?))
    }

    /// Output columns with their element types, in order.
    pub(crate) fn elements(&self) -> Vec<(&str, Element)> {
        match self {
            Columns::Rows(c) => c.iter().map(|c| (c.name.as_str(), c.element())).collect(),
            #[cfg(feature = "video")]
            Columns::Windows(_, w) => w.elements(),
        }
    }

    /// Bytes of one row (window) in a batch.
    pub(crate) fn row_bytes(&self) -> usize {
        match self {
            Columns::Rows(c) => c.iter().map(ColumnPlan::row_bytes).sum(),
            #[cfg(feature = "video")]
            Columns::Windows(_, w) => w.row_bytes(),
        }
    }

    /// The columns of a mixture's step: gathered, or read one batch per
    /// source.
    pub(crate) fn fill_mixed(
        &self,
        mix: &crate::mixture::Mixture,
        rows: &crate::mixture::StepRows,
        keys: &SampleKeys<'_>,
    ) -> Result<Vec<(String, BatchColumn)>> {
        match self {
            Columns::Rows(c) => {
                if let Some(columns) = gather_columns(c, rows.len(), keys.buffers, |outs| {
                    mix.gather_fixed(rows, outs)
                })? {
                    return Ok(columns);
                }
                let parts = mix.read_parts(rows)?;
                c.iter()
                    .map(|c| {
                        Ok((
                            c.name.clone(),
                            c.fill_mixed(&parts.parts, &parts.index, keys)?,
                        ))
                    })
                    .collect()
            }
            #[cfg(feature = "video")]
            Columns::Windows(..) => Err(crate::Error::InvalidArgument(
                "a mixture reads rows, not video windows".into(),
            )),
        }
    }

    /// The columns of the rows at view positions `positions` of `ds`.
    pub(crate) fn fill(
        &self,
        ds: &crate::dataset::Dataset,
        positions: &[u64],
        keys: &SampleKeys<'_>,
    ) -> Result<Vec<(String, BatchColumn)>> {
        match self {
            Columns::Rows(c) => {
                let gathered = gather_columns(c, positions.len(), keys.buffers, |outs| {
                    ds.gather_fixed(positions, None, outs)
                })?;
                if let Some(columns) = gathered {
                    return Ok(columns);
                }
                let rows = ds.take_positions_arrow(positions)?;
                c.iter()
                    .map(|c| Ok((c.name.clone(), c.fill(&rows, keys)?)))
                    .collect()
            }
            #[cfg(feature = "video")]
            Columns::Windows(fr, w) => {
                let phys = ds.physical_slice(positions);
                windows::fill_windows(fr, w, &phys, keys)
            }
        }
    }
}
