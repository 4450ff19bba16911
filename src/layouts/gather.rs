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
use arrow_array::Array;
use arrow_buffer::Buffer;
use arrow_schema::DataType;

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
    macro_rules! prim {
        ($t:ty) => {
            a.as_primitive_opt::<$t>()
                .map(|p| p.values().inner().as_slice())
        };
    }
    if a.null_count() > 0 {
        return None;
    }
    let bytes = match a.data_type() {
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
    }?;
    (a.data_type().primitive_width() == Some(width)).then_some(bytes)
}

/// The buffer of [`fixed_bytes`]' values (a reference-counted view), to
/// keep in a table.
pub(crate) fn fixed_buffer(a: &dyn Array, width: usize) -> Option<Buffer> {
    macro_rules! prim {
        ($t:ty) => {
            a.as_primitive_opt::<$t>()
                .map(|p| p.values().inner().clone())
        };
    }
    fixed_bytes(a, width)?;
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
