//! Fixed-width values copied straight from a backend's record batches into
//! a caller's buffers ([`Backend::gather_fixed`](super::backend::Backend::gather_fixed)).
//!
//! Why not a take: a batch of shuffled rows touches a record batch each,
//! and a take builds Arrow arrays over all of them (`interleave`, with its
//! per-array checks and allocations) only for the pipeline to copy their
//! values out again. For numbers, the copy is the whole work: one slice
//! per cell, from the record batch the shard keeps to the batch's buffer.

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, RecordBatch};
use arrow_buffer::Buffer;
use arrow_schema::DataType;

use crate::error::{Error, Result};

/// One output column of a gather: the backend's column (its index in the
/// backend's schema), the bytes of one value, and where row `i` goes
/// (`data[slot * width..][..width]`).
pub struct FixedOut<'a> {
    /// The column's index in the backend's schema.
    pub column: usize,
    /// Bytes of one value (checked against the stored type).
    pub width: usize,
    /// The output buffer, `width` bytes a slot.
    pub data: &'a mut [u8],
}

/// The values of a primitive array as bytes (its offset applied), when it
/// has no null and its values are `width` bytes each; None otherwise (the
/// caller takes the rows instead, and the take's checks say what is wrong).
pub(crate) fn fixed_bytes(a: &dyn Array, width: usize) -> Option<&[u8]> {
    values_buffer(a, width).map(Buffer::as_slice)
}

/// The buffer of [`fixed_bytes`]' values (a reference-counted view), to
/// keep in a table.
pub(crate) fn fixed_buffer(a: &dyn Array, width: usize) -> Option<Buffer> {
    values_buffer(a, width).cloned()
}

/// The value buffer of a primitive array of `width`-byte values without
/// nulls (its offset applied).
fn values_buffer(a: &dyn Array, width: usize) -> Option<&Buffer> {
    macro_rules! prim {
        ($t:ty) => {
            a.as_primitive_opt::<$t>().map(|p| p.values().inner())
        };
    }
    if a.null_count() > 0 || a.data_type().primitive_width() != Some(width) {
        return None;
    }
    match a.data_type() {
        DataType::Int8 => prim!(Int8Type),
        DataType::Int16 => prim!(Int16Type),
        DataType::Int32 => prim!(Int32Type),
        DataType::Int64 => prim!(Int64Type),
        DataType::UInt8 => prim!(UInt8Type),
        DataType::UInt16 => prim!(UInt16Type),
        DataType::UInt32 => prim!(UInt32Type),
        DataType::UInt64 => prim!(UInt64Type),
        DataType::Float16 => prim!(Float16Type),
        DataType::Float32 => prim!(Float32Type),
        DataType::Float64 => prim!(Float64Type),
        _ => None,
    }
}

/// Checks that `slots`, when given, has a slot for each of `rows` rows.
///
/// # Errors
/// [`Error::InvalidArgument`] otherwise.
pub(crate) fn check_slots(rows: usize, slots: Option<&[usize]>) -> Result<()> {
    match slots {
        Some(s) if s.len() != rows => Err(Error::InvalidArgument(format!(
            "a gather of {rows} rows was given {} slots",
            s.len()
        ))),
        _ => Ok(()),
    }
}

/// Copies the values of rows `picks` ((chunk, row in it)) of `chunks`
/// into `outs`, row `i` to slot `slots[i]` (or `i`); false when a chunk's
/// column is not `width`-byte numbers without nulls.
///
/// # Errors
/// [`Error::InvalidArgument`] for a slot past an output buffer.
pub(crate) fn gather_from_chunks(
    chunks: &[RecordBatch],
    picks: &[(usize, usize)],
    slots: Option<&[usize]>,
    outs: &mut [FixedOut<'_>],
) -> Result<bool> {
    for out in outs.iter_mut() {
        let w = out.width;
        let values: Option<Vec<&[u8]>> = chunks
            .iter()
            .map(|c| {
                c.columns()
                    .get(out.column)
                    .and_then(|a| fixed_bytes(a.as_ref(), w))
            })
            .collect();
        let Some(values) = values else {
            return Ok(false);
        };
        let src: Vec<&[u8]> = picks
            .iter()
            .map(|&(k, r)| &values[k][r * w..(r + 1) * w])
            .collect();
        copy_values(out, &src, slots)?;
    }
    Ok(true)
}

/// Copies `src[i]` to slot `slots[i]` (or `i`) of `out`: a loop that only
/// copies, with the width known to the compiler for the usual widths.
///
/// # Errors
/// [`Error::InvalidArgument`] for a slot past the output buffer.
pub(crate) fn copy_values(
    out: &mut FixedOut<'_>,
    src: &[&[u8]],
    slots: Option<&[usize]>,
) -> Result<()> {
    let w = out.width;
    let need = match slots {
        Some(s) => s.iter().max().map_or(0, |m| m + 1),
        None => src.len(),
    };
    if need * w > out.data.len() {
        return Err(Error::InvalidArgument(format!(
            "a gather into {} bytes needs {} ({need} slots of {w} bytes)",
            out.data.len(),
            need * w
        )));
    }
    fn run<const W: usize>(dst: &mut [u8], src: &[&[u8]], slots: Option<&[usize]>) {
        // The buffer as values of W bytes: a slot is then one index
        // (checked once), not a range of bytes to check.
        let (values, _) = dst.as_chunks_mut::<W>();
        match slots {
            None => {
                for (d, s) in values.iter_mut().zip(src) {
                    d.copy_from_slice(&s[..W]);
                }
            }
            Some(slots) => {
                for (&k, s) in slots.iter().zip(src) {
                    values[k].copy_from_slice(&s[..W]);
                }
            }
        }
    }
    match w {
        1 => run::<1>(out.data, src, slots),
        2 => run::<2>(out.data, src, slots),
        4 => run::<4>(out.data, src, slots),
        8 => run::<8>(out.data, src, slots),
        _ => {
            for (i, s) in src.iter().enumerate() {
                let k = slots.map_or(i, |sl| sl[i]);
                out.data[k * w..(k + 1) * w].copy_from_slice(s);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{BooleanArray, Float32Array, Int64Array, StringArray};

    #[test]
    fn primitive_values_are_their_bytes_with_the_offset_applied() {
        let a = Int64Array::from(vec![1i64, 2, 3, 4]).slice(1, 2);
        let b = fixed_bytes(&a, 8).expect("an int64 array");
        assert_eq!(b, [2i64.to_ne_bytes(), 3i64.to_ne_bytes()].concat());
        let f = Float32Array::from(vec![0.5f32]);
        assert_eq!(fixed_bytes(&f, 4), Some(&0.5f32.to_ne_bytes()[..]));
        let kept = fixed_buffer(&a, 8).expect("an int64 array");
        assert_eq!(kept.as_slice(), b);
        assert!(fixed_buffer(&a, 4).is_none());
    }

    #[test]
    fn nulls_other_widths_and_other_types_are_refused() {
        let nulls = Int64Array::from(vec![Some(1i64), None]);
        assert_eq!(fixed_bytes(&nulls, 8), None);
        assert_eq!(fixed_bytes(&Int64Array::from(vec![1i64]), 4), None);
        assert_eq!(fixed_bytes(&BooleanArray::from(vec![true]), 1), None);
        assert_eq!(fixed_bytes(&StringArray::from(vec!["a"]), 1), None);
    }
}
