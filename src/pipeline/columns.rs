//! The columns of a pipeline's batches: what each column of the cache
//! becomes (numbers and class ids a `[B]` tensor, fixed-shape arrays
//! `[B, ...]`, images through their ops `[B, C, H, W]`), decided and checked
//! once when the pipeline is made, so a bad request fails before the first
//! batch; then each batch's cells written straight into one buffer per
//! column.

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use std::borrow::Cow;

use arrow_array::{Array, ArrayRef, RecordBatch};

use super::batch::{BatchColumn, Element};
use super::ops::{ImagePlan, SampleRng};
use super::options::{Layout, PipelineOptions};
use crate::error::{Error, Result};
use crate::features::{Feature, Features};
use crate::util::limits::DecodeLimits;

/// What one column becomes.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    /// One number per row.
    Scalar(Element),
    /// A fixed-shape array per row, stored as its bytes.
    Array(Element, Vec<usize>),
    /// An image through its ops.
    Image(Box<ImagePlan>),
}

/// One output column.
#[derive(Debug, Clone)]
pub(crate) struct ColumnPlan {
    pub(crate) name: String,
    pub(crate) kind: Kind,
}

/// Why `feature` makes no tensor, or None when it does.
fn not_a_tensor(feature: &Feature) -> Option<&'static str> {
    match feature {
        Feature::Value(d) if Element::of_dtype(*d).is_none() => {
            Some("holds strings or bytes, which make no tensor")
        }
        Feature::Sequence(_) => Some("holds lists of any length, which make no tensor"),
        Feature::Video(_) => {
            Some("holds video references; read windows of a video cache instead of the column")
        }
        Feature::Array(a) if a.shape.is_empty() || Element::of_dtype(a.dtype).is_none() => {
            Some("holds arrays of unknown shape")
        }
        _ => None,
    }
}

/// The plan of every output column, checked against `features`.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the column: unknown, not a tensor,
/// ops on a column that is not an image, an image without ops, a bad op.
pub(crate) fn plan_columns(features: &Features, opts: &PipelineOptions) -> Result<Vec<ColumnPlan>> {
    let known = || features.names().join(", ");
    for (column, _) in opts.ops() {
        match features.get(column) {
            None => {
                return Err(Error::InvalidArgument(format!(
                    "ops are given for column '{column}', which the cache does not have; its columns: {}",
                    known()
                )))
            }
            Some(Feature::Image(_)) => {}
            Some(f) => {
                return Err(Error::InvalidArgument(format!(
                    "ops are given for column '{column}', a {}, not an image; \
                     ops apply to image columns",
                    crate::features::repr::feature_repr(f)
                )))
            }
        }
    }
    let explicit = opts.columns().is_some();
    let names: Vec<String> = match opts.columns() {
        Some(c) => c.to_vec(),
        None => features.names(),
    };
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let feature = features.get(&name).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "column '{name}' is not in the cache; its columns: {}",
                known()
            ))
        })?;
        if let Some(why) = not_a_tensor(feature) {
            if explicit {
                return Err(Error::InvalidArgument(format!(
                    "column '{name}' {why}; leave it out of the columns"
                )));
            }
            continue;
        }
        let kind = match feature {
            Feature::Value(d) => Kind::Scalar(Element::of_dtype(*d).expect("checked")),
            Feature::ClassLabel(_) => Kind::Scalar(Element::Int64),
            Feature::Array(a) => Kind::Array(
                Element::of_dtype(a.dtype).expect("checked"),
                a.shape.clone(),
            ),
            Feature::Image(_) => {
                let ops = opts
                    .ops()
                    .iter()
                    .find(|(c, _)| *c == name)
                    .map(|(_, o)| o.as_slice())
                    .ok_or_else(|| {
                        Error::InvalidArgument(format!(
                            "column '{name}' holds images of any size: give it ops that fix the \
                             size (e.g. a RandomResizedCrop or a CenterCrop), or leave it out of \
                             the columns"
                        ))
                    })?;
                let plan = ImagePlan::new(&name, ops)?;
                plan.placement(opts.layout())?;
                Kind::Image(Box::new(plan))
            }
            _ => unreachable!("not_a_tensor covers the other features"),
        };
        out.push(ColumnPlan { name, kind });
    }
    if out.is_empty() {
        return Err(Error::InvalidArgument(
            "no column of the cache makes a tensor; name the columns, and give image columns ops"
                .into(),
        ));
    }
    Ok(out)
}

/// Where a batch's samples come from, for the per-sample randomness.
pub(crate) struct SampleKeys<'a> {
    pub(crate) seed: u64,
    pub(crate) epoch: u64,
    /// Each row's position in the epoch's order (unwrapped under padding).
    pub(crate) keys: &'a [u64],
    pub(crate) limits: &'a DecodeLimits,
    pub(crate) layout: Layout,
    /// Where large column buffers come from.
    pub(crate) buffers: &'a super::buffers::BufferPool,
}

impl ColumnPlan {
    /// The element type of the column.
    pub(crate) fn element(&self) -> Element {
        match &self.kind {
            Kind::Scalar(e) | Kind::Array(e, _) => *e,
            Kind::Image(p) => Element::from(p.out_dtype()),
        }
    }

    /// Bytes one row takes in a batch.
    pub(crate) fn row_bytes(&self) -> usize {
        match &self.kind {
            Kind::Scalar(e) => e.size(),
            Kind::Array(e, shape) => e.size() * shape.iter().product::<usize>(),
            Kind::Image(p) => p.out_bytes(),
        }
    }

    /// This column of a batch of `rows` (the cache's cells, in batch order).
    pub(crate) fn fill(&self, rows: &RecordBatch, keys: &SampleKeys<'_>) -> Result<BatchColumn> {
        let a = self.column_of(rows)?;
        self.fill_array(a, keys)
    }

    fn column_of<'b>(&self, rows: &'b RecordBatch) -> Result<&'b ArrayRef> {
        let a = rows
            .column_by_name(&self.name)
            .ok_or_else(|| self.err("the column is missing"))?;
        if a.null_count() > 0 {
            let row = (0..a.len()).find(|&i| a.is_null(i)).unwrap_or(0);
            return Err(self.err(&format!(
                "row {row} of the batch is null, which a tensor cannot hold; filter the nulls out"
            )));
        }
        Ok(a)
    }

    /// This column of a mixture's step: row `i` is row `index[i].1` of
    /// `parts[index[i].0]`. Scalars are copied straight into place; other
    /// kinds are put in draw order first, their decoding being the cost.
    pub(crate) fn fill_mixed(
        &self,
        parts: &[RecordBatch],
        index: &[(usize, usize)],
        keys: &SampleKeys<'_>,
    ) -> Result<BatchColumn> {
        let arrays = parts
            .iter()
            .map(|p| self.column_of(p).map(|a| a.as_ref()))
            .collect::<Result<Vec<&dyn Array>>>()?;
        if let Kind::Scalar(e) = self.kind {
            let width = e.size();
            let values = arrays
                .iter()
                .map(|a| self.scalar_values(*a, e))
                .collect::<Result<Vec<_>>>()?;
            let mut data = Vec::with_capacity(index.len() * width);
            for &(p, r) in index {
                data.extend_from_slice(&values[p][r * width..(r + 1) * width]);
            }
            return Ok(BatchColumn {
                data,
                element: e,
                shape: vec![index.len()],
            });
        }
        let a = arrow_select::interleave::interleave(&arrays, index)
            .map_err(|e| self.err(&format!("mixing the sources' cells: {e}")))?;
        self.fill_array(&a, keys)
    }

    fn fill_array(&self, a: &ArrayRef, keys: &SampleKeys<'_>) -> Result<BatchColumn> {
        let n = a.len();
        match &self.kind {
            Kind::Scalar(e) => Ok(BatchColumn {
                data: self.scalar_bytes(a.as_ref(), *e)?,
                element: *e,
                shape: vec![n],
            }),
            Kind::Array(e, shape) => {
                let width = self.row_bytes();
                let mut data = Vec::with_capacity(n * width);
                for i in 0..n {
                    let cell =
                        binary(a.as_ref(), i).ok_or_else(|| self.err("cells are not binary"))?;
                    if cell.len() != width {
                        return Err(self.err(&format!(
                            "a stored array has {} bytes, its shape {shape:?} needs {width}",
                            cell.len()
                        )));
                    }
                    data.extend_from_slice(cell);
                }
                let mut full = vec![n];
                full.extend_from_slice(shape);
                Ok(BatchColumn {
                    data,
                    element: *e,
                    shape: full,
                })
            }
            Kind::Image(plan) => {
                let (place, one) = plan.placement(keys.layout)?;
                let each = plan.out_bytes();
                let mut data = keys.buffers.take(n * each);
                for (i, out) in data.chunks_exact_mut(each).enumerate() {
                    let cell =
                        binary(a.as_ref(), i).ok_or_else(|| self.err("cells are not binary"))?;
                    let mut rng = SampleRng::new(keys.seed, keys.epoch, keys.keys[i]);
                    plan.run_encoded(cell, keys.limits, &mut rng, place, out)?;
                }
                let element = Element::from(plan.out_dtype());
                Ok(BatchColumn {
                    data,
                    element,
                    shape: [&[n][..], &one[..]].concat(),
                })
            }
        }
    }

    fn err(&self, reason: &str) -> Error {
        Error::Decode {
            column: self.name.clone(),
            reason: reason.to_string(),
        }
    }

    /// The values of a primitive column as bytes (one copy).
    fn scalar_bytes(&self, a: &dyn Array, e: Element) -> Result<Vec<u8>> {
        self.scalar_values(a, e).map(|v| v.into_owned())
    }

    /// The values of a primitive column as bytes, borrowed where they are
    /// stored as they go out (all but booleans, which Arrow packs in bits).
    fn scalar_values<'a>(&self, a: &'a dyn Array, e: Element) -> Result<Cow<'a, [u8]>> {
        macro_rules! prim {
            ($t:ty) => {
                a.as_primitive_opt::<$t>()
                    .map(|p| Cow::Borrowed(p.values().inner().as_slice()))
            };
        }
        let bytes = match e {
            Element::Int8 => prim!(Int8Type),
            Element::Int16 => prim!(Int16Type),
            Element::Int32 => prim!(Int32Type),
            Element::Int64 => prim!(Int64Type),
            Element::UInt8 => prim!(UInt8Type),
            Element::UInt16 => prim!(UInt16Type),
            Element::UInt32 => prim!(UInt32Type),
            Element::UInt64 => prim!(UInt64Type),
            Element::Float16 => prim!(Float16Type),
            Element::Float32 => prim!(Float32Type),
            Element::Float64 => prim!(Float64Type),
            Element::Bool => a
                .as_boolean_opt()
                .map(|b| Cow::Owned(b.values().iter().map(u8::from).collect())),
            Element::BFloat16 => None,
        };
        bytes.ok_or_else(|| {
            self.err(&format!(
                "stored as {}, not the {} its feature says",
                a.data_type(),
                e
            ))
        })
    }
}

/// Cell `i` of a binary column (large, small or fixed-size).
fn binary(a: &dyn Array, i: usize) -> Option<&[u8]> {
    if let Some(b) = a.as_binary_opt::<i64>() {
        return Some(b.value(i));
    }
    if let Some(b) = a.as_binary_opt::<i32>() {
        return Some(b.value(i));
    }
    a.as_fixed_size_binary_opt().map(|b| b.value(i))
}
