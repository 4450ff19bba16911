//! Rows turned into columns, as a training loop's batch wants them: the
//! values of a column stacked into one contiguous array the way PyTorch's
//! `default_collate` stacks them (numbers in the column's own dtype,
//! same-shape images and tensors as `[B, ...]`), or left one by one where
//! they do not stack. Made here, without Python, so the bindings only wrap
//! the finished buffers (no copy) and the logic is tested with the library.

use crate::dtype::Dtype;
use crate::features::{Feature, Features};
use crate::value::{Row, Value};

/// One column of a batch: a contiguous array (numbers, class ids,
/// same-shape images and tensors, stacked) or, where the values do not
/// stack, the values one by one.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    /// The values stacked into one array.
    Array {
        /// The elements, little-endian, in C order.
        data: Vec<u8>,
        /// The element type (one of fixed width).
        dtype: Dtype,
        /// The array's shape; its first dimension is the batch's.
        shape: Vec<usize>,
    },
    /// The values as they are (strings, bytes, nulls, images of several
    /// sizes, lists of several lengths).
    Values(Vec<Value>),
}

/// The dtype a column of `feature`'s numbers is stacked in: its own, or
/// int64 for class ids; None for other features.
fn number_dtype(feature: &Feature) -> Option<Dtype> {
    match feature {
        Feature::Value(d) => Some(*d),
        Feature::ClassLabel(_) => Some(Dtype::Int64),
        _ => None,
    }
}

/// Appends `v` to `out` as a `dtype` element (a class label as its id);
/// false when it is not a number (or is a null, or does not fit the
/// dtype's kind).
fn push_scalar(out: &mut Vec<u8>, dtype: Dtype, v: &Value) -> bool {
    macro_rules! put {
        ($t:ty) => {{
            let x: $t = match *v {
                Value::Int(i) => i as $t,
                Value::Label(ref l) => l.id as $t,
                Value::UInt(u) => u as $t,
                Value::Float(f) => f as $t,
                Value::Bool(b) => b as u8 as $t,
                _ => return false,
            };
            out.extend_from_slice(&x.to_le_bytes());
        }};
    }
    match dtype {
        Dtype::Int8 => put!(i8),
        Dtype::Int16 => put!(i16),
        Dtype::Int32 => put!(i32),
        Dtype::Int64 => put!(i64),
        Dtype::UInt8 => put!(u8),
        Dtype::UInt16 => put!(u16),
        Dtype::UInt32 => put!(u32),
        Dtype::UInt64 => put!(u64),
        Dtype::Float32 => put!(f32),
        Dtype::Float64 => put!(f64),
        Dtype::Bool => match *v {
            Value::Bool(b) => out.push(b as u8),
            _ => return false,
        },
        _ => return false,
    }
    true
}

/// The values of one column stacked the way `default_collate` stacks the
/// rows' values, keeping the column's own dtype (a float32 column stays
/// float32); values that do not stack stay a list.
fn collate_column(values: Vec<Value>, feature: Option<&Feature>) -> Column {
    let n = values.len();
    if let Some(d) = feature.and_then(number_dtype) {
        if let Some(w) = d.byte_width() {
            let mut data = Vec::with_capacity(n * w);
            let ok = values.iter().all(|v| push_scalar(&mut data, d, v));
            if ok {
                return Column::Array {
                    data,
                    dtype: d,
                    shape: vec![n],
                };
            }
        }
        return Column::Values(values);
    }
    // Sequences of numbers, all of one length: one [B, L] array.
    if let Some(Feature::Sequence(inner)) = feature {
        let d = number_dtype(inner);
        let len = match values.first() {
            Some(Value::List(l)) => Some(l.len()),
            _ => None,
        };
        if let (Some(d), Some(len)) = (d, len) {
            if let Some(w) = d.byte_width() {
                let mut data = Vec::with_capacity(n * len * w);
                let ok = values.iter().all(|v| match v {
                    Value::List(items) if items.len() == len => {
                        items.iter().all(|x| push_scalar(&mut data, d, x))
                    }
                    _ => false,
                });
                if ok {
                    return Column::Array {
                        data,
                        dtype: d,
                        shape: vec![n, len],
                    };
                }
            }
        }
        return Column::Values(values);
    }
    // Images and tensors of one shape (and dtype): one [B, ...] array.
    let item = |v: &Value| -> Option<(Vec<usize>, Dtype, usize)> {
        match v {
            Value::Image(i) => Some((i.shape(), Dtype::UInt8, i.data.len())),
            Value::Tensor(t) => {
                t.dtype.byte_width()?;
                Some((t.shape.clone(), t.dtype, t.data.len()))
            }
            _ => None,
        }
    };
    let Some(first) = values.first().and_then(item) else {
        return Column::Values(values);
    };
    if !values.iter().all(|v| item(v).as_ref() == Some(&first)) {
        return Column::Values(values);
    }
    let (inner, dtype, bytes) = first;
    let mut data = Vec::with_capacity(n * bytes);
    for v in &values {
        match v {
            Value::Image(i) => data.extend_from_slice(&i.data),
            Value::Tensor(t) => data.extend_from_slice(&t.data),
            _ => unreachable!("checked above"),
        }
    }
    let mut shape = vec![n];
    shape.extend(inner);
    Column::Array { data, dtype, shape }
}

/// Rows turned into columns, in the rows' column order: each column's
/// values stacked by its feature in `features` (see [`Column`]); a column
/// `features` does not describe keeps its values one by one unless they
/// are images or tensors of one shape. No rows give no columns.
pub fn collate_rows(rows: Vec<Row>, features: &Features) -> Vec<(String, Column)> {
    let Some(names) = rows.first().map(|r| r.names().to_vec()) else {
        return Vec::new();
    };
    let mut cols: Vec<Vec<Value>> = names
        .iter()
        .map(|_| Vec::with_capacity(rows.len()))
        .collect();
    for r in rows {
        for (c, v) in cols.iter_mut().zip(r.into_values()) {
            c.push(v);
        }
    }
    names
        .into_iter()
        .zip(cols)
        .map(|(name, vals)| {
            let col = collate_column(vals, features.get(&name));
            (name, col)
        })
        .collect()
}

/// A frames cache's windows as columns: `video` `[B, T, H, W, 3]` uint8,
/// the windows' places as int64 arrays (`video_idx`, `start_frame` and
/// `sample_idx` `[B]`, `frame_indices` `[B, T]`).
#[cfg(feature = "video")]
pub fn window_columns(b: crate::layouts::WindowBatch) -> Vec<(String, Column)> {
    let ints = |v: Vec<i64>, shape: Vec<usize>| Column::Array {
        data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        dtype: Dtype::Int64,
        shape,
    };
    let n = b.sample_idx.len();
    let t = b.frame_indices.first().map_or(0, Vec::len);
    let frame_indices: Vec<i64> = b
        .frame_indices
        .iter()
        .flatten()
        .map(|&x| x as i64)
        .collect();
    vec![
        (
            "video".to_string(),
            Column::Array {
                data: b.frames.data,
                dtype: Dtype::UInt8,
                shape: b.frames.shape,
            },
        ),
        (
            "video_idx".to_string(),
            ints(b.video_idx.iter().map(|&x| x as i64).collect(), vec![n]),
        ),
        (
            "start_frame".to_string(),
            ints(b.start_frame.iter().map(|&x| x as i64).collect(), vec![n]),
        ),
        ("frame_indices".to_string(), ints(frame_indices, vec![n, t])),
        (
            "sample_idx".to_string(),
            ints(b.sample_idx.iter().map(|&x| x as i64).collect(), vec![n]),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::value::{ImageData, Label, Tensor};

    fn rows(names: &[&str], values: Vec<Vec<Value>>) -> Vec<Row> {
        let names: Arc<[String]> = names.iter().map(|s| s.to_string()).collect();
        values
            .into_iter()
            .map(|v| Row::new(names.clone(), v.into_iter().collect()))
            .collect()
    }

    fn one(features: &Features, name: &str, values: Vec<Value>) -> Column {
        let rows = rows(&[name], values.into_iter().map(|v| vec![v]).collect());
        let mut cols = collate_rows(rows, features);
        assert_eq!(cols.len(), 1);
        assert_eq!(cols[0].0, name);
        cols.remove(0).1
    }

    fn image(h: u32, w: u32, fill: u8) -> Value {
        let data = vec![fill; (h * w * 3) as usize];
        Value::Image(Box::new(ImageData::new(h, w, 3, data).unwrap()))
    }

    #[test]
    fn numbers_stack_in_their_columns_dtype() {
        let f = Features::new()
            .with("i", Feature::value(Dtype::Int32))
            .with("u", Feature::value(Dtype::UInt16))
            .with("x", Feature::value(Dtype::Float32))
            .with("b", Feature::value(Dtype::Bool));
        let rows = rows(
            &["i", "u", "x", "b"],
            vec![
                vec![
                    Value::Int(-1),
                    Value::UInt(7),
                    Value::Float(0.5),
                    Value::Bool(true),
                ],
                vec![
                    Value::Int(2),
                    Value::UInt(65535),
                    Value::Int(3),
                    Value::Bool(false),
                ],
            ],
        );
        let cols = collate_rows(rows, &f);
        let names: Vec<&str> = cols.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["i", "u", "x", "b"]);
        let arr = |i: usize| match &cols[i].1 {
            Column::Array { data, dtype, shape } => (data.clone(), *dtype, shape.clone()),
            other => panic!("column {i} did not stack: {other:?}"),
        };
        let want_i: Vec<u8> = [-1i32, 2].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(arr(0), (want_i, Dtype::Int32, vec![2]));
        let want_u: Vec<u8> = [7u16, 65535].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(arr(1), (want_u, Dtype::UInt16, vec![2]));
        // An integer in a float column becomes a float of the column's width.
        let want_x: Vec<u8> = [0.5f32, 3.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(arr(2), (want_x, Dtype::Float32, vec![2]));
        assert_eq!(arr(3), (vec![1, 0], Dtype::Bool, vec![2]));
    }

    #[test]
    fn class_labels_stack_as_int64_ids() {
        let f = Features::new().with("label", Feature::class_label(["cat", "dog"]).unwrap());
        let label = |id| Value::Label(Label { id, name: None });
        let col = one(&f, "label", vec![label(1), label(0), Value::Int(1)]);
        let want: Vec<u8> = [1i64, 0, 1].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(
            col,
            Column::Array {
                data: want,
                dtype: Dtype::Int64,
                shape: vec![3],
            }
        );
    }

    #[test]
    fn a_null_or_a_non_number_keeps_a_number_column_as_values() {
        let f = Features::new().with("x", Feature::value(Dtype::Int64));
        let vals = vec![Value::Int(1), Value::Null, Value::Int(3)];
        assert_eq!(one(&f, "x", vals.clone()), Column::Values(vals));
        let vals = vec![Value::Int(1), Value::Str("2".into())];
        assert_eq!(one(&f, "x", vals.clone()), Column::Values(vals));
        // A bool column takes only bools.
        let f = Features::new().with("b", Feature::value(Dtype::Bool));
        let vals = vec![Value::Bool(true), Value::Int(0)];
        assert_eq!(one(&f, "b", vals.clone()), Column::Values(vals));
    }

    #[test]
    fn float16_strings_and_bytes_stay_values() {
        let f = Features::new()
            .with("h", Feature::value(Dtype::Float16))
            .with("s", Feature::value(Dtype::String))
            .with("y", Feature::value(Dtype::Binary));
        let h = vec![Value::Float(1.0), Value::Float(2.0)];
        assert_eq!(one(&f, "h", h.clone()), Column::Values(h));
        let s = vec![Value::Str("a".into()), Value::Str("bc".into())];
        assert_eq!(one(&f, "s", s.clone()), Column::Values(s));
        let y = vec![Value::Bytes(vec![1u8, 2].into()), Value::Null];
        assert_eq!(one(&f, "y", y.clone()), Column::Values(y));
    }

    #[test]
    fn sequences_of_one_length_stack_others_stay_lists() {
        let f = Features::new().with("s", Feature::sequence(Feature::value(Dtype::Int16)));
        let list = |xs: &[i64]| Value::List(xs.iter().map(|&x| Value::Int(x)).collect());
        let col = one(&f, "s", vec![list(&[1, 2, 3]), list(&[4, 5, 6])]);
        let want: Vec<u8> = [1i16, 2, 3, 4, 5, 6]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(
            col,
            Column::Array {
                data: want,
                dtype: Dtype::Int16,
                shape: vec![2, 3],
            }
        );
        let ragged = vec![list(&[1, 2]), list(&[3])];
        assert_eq!(one(&f, "s", ragged.clone()), Column::Values(ragged));
        let with_null = vec![list(&[1]), Value::Null];
        assert_eq!(one(&f, "s", with_null.clone()), Column::Values(with_null));
        // Sequences of strings never stack.
        let f = Features::new().with("t", Feature::sequence(Feature::value(Dtype::String)));
        let t = vec![Value::List(vec![Value::Str("a".into())])];
        assert_eq!(one(&f, "t", t.clone()), Column::Values(t));
    }

    #[test]
    fn same_shape_images_stack_into_one_array() {
        let f = Features::new().with("img", Feature::image());
        let col = one(&f, "img", vec![image(2, 3, 1), image(2, 3, 9)]);
        let mut want = vec![1u8; 18];
        want.extend(vec![9u8; 18]);
        assert_eq!(
            col,
            Column::Array {
                data: want,
                dtype: Dtype::UInt8,
                shape: vec![2, 2, 3, 3],
            }
        );
    }

    #[test]
    fn images_of_several_sizes_or_with_nulls_stay_values() {
        let f = Features::new().with("img", Feature::image());
        let sizes = vec![image(2, 3, 1), image(3, 2, 1)];
        assert_eq!(one(&f, "img", sizes.clone()), Column::Values(sizes));
        let nulls = vec![image(2, 2, 0), Value::Null];
        assert_eq!(one(&f, "img", nulls.clone()), Column::Values(nulls));
        // Undecoded images (their stored bytes) do not stack.
        let raw = vec![Value::Bytes(vec![137u8, 80].into())];
        assert_eq!(one(&f, "img", raw.clone()), Column::Values(raw));
    }

    #[test]
    fn same_shape_tensors_stack_in_their_dtype() {
        let f = Features::new().with("a", Feature::array([2, 2], Dtype::Float64).unwrap());
        let t = |xs: [f64; 4]| {
            Value::Tensor(Box::new(Tensor::from_vec(vec![2, 2], xs.to_vec()).unwrap()))
        };
        let col = one(
            &f,
            "a",
            vec![t([1.0, 2.0, 3.0, 4.0]), t([5.0, 6.0, 7.0, 8.0])],
        );
        let want: Vec<u8> = (1..=8).flat_map(|x| (x as f64).to_le_bytes()).collect();
        assert_eq!(
            col,
            Column::Array {
                data: want,
                dtype: Dtype::Float64,
                shape: vec![2, 2, 2],
            }
        );
        // Another shape, or another dtype of the same shape, does not stack.
        let other = Value::Tensor(Box::new(Tensor::from_vec(vec![4], vec![0f64; 4]).unwrap()));
        let mixed = vec![t([0.0; 4]), other];
        assert_eq!(one(&f, "a", mixed.clone()), Column::Values(mixed));
        let ints = Value::Tensor(Box::new(
            Tensor::from_vec(vec![2, 4], vec![0i32; 8]).unwrap(),
        ));
        let mixed = vec![t([0.0; 4]), ints];
        assert_eq!(one(&f, "a", mixed.clone()), Column::Values(mixed));
    }

    #[test]
    fn a_column_without_a_feature_stacks_only_images_and_tensors() {
        let f = Features::new();
        let nums = vec![Value::Int(1), Value::Int(2)];
        assert_eq!(one(&f, "n", nums.clone()), Column::Values(nums));
        let col = one(&f, "img", vec![image(1, 1, 5)]);
        assert_eq!(
            col,
            Column::Array {
                data: vec![5, 5, 5],
                dtype: Dtype::UInt8,
                shape: vec![1, 1, 1, 3],
            }
        );
    }

    #[test]
    fn no_rows_make_no_columns() {
        let f = Features::new().with("x", Feature::value(Dtype::Int64));
        assert!(collate_rows(Vec::new(), &f).is_empty());
    }

    #[cfg(feature = "video")]
    #[test]
    fn windows_become_frames_and_int64_places() {
        let b = crate::layouts::WindowBatch {
            frames: Tensor {
                dtype: Dtype::UInt8,
                shape: vec![2, 2, 1, 1, 3],
                data: (0..12).collect(),
            },
            video_idx: vec![0, 1],
            start_frame: vec![3, 0],
            frame_indices: vec![vec![3, 4], vec![0, 1]],
            sample_idx: vec![5, 6],
        };
        let cols = window_columns(b);
        let ints = |xs: &[i64], shape: Vec<usize>| Column::Array {
            data: xs.iter().flat_map(|x| x.to_le_bytes()).collect(),
            dtype: Dtype::Int64,
            shape,
        };
        let want = vec![
            (
                "video".to_string(),
                Column::Array {
                    data: (0..12).collect(),
                    dtype: Dtype::UInt8,
                    shape: vec![2, 2, 1, 1, 3],
                },
            ),
            ("video_idx".to_string(), ints(&[0, 1], vec![2])),
            ("start_frame".to_string(), ints(&[3, 0], vec![2])),
            ("frame_indices".to_string(), ints(&[3, 4, 0, 1], vec![2, 2])),
            ("sample_idx".to_string(), ints(&[5, 6], vec![2])),
        ];
        assert_eq!(cols, want);
    }
}
