//! Rust values into [`Value`]: numbers, strings, bytes, paths, images,
//! tensors, videos, options (None is a null) and lists, so an author writes
//! `example.with("x", 3)` without naming the variant.

use std::path::PathBuf;

use super::{Bytes, ImageData, Tensor, Value, VideoRef};

macro_rules! value_from {
    ($($t:ty => $v:ident as $c:ty),* $(,)?) => {
        $(impl From<$t> for Value {
            #[inline]
            fn from(x: $t) -> Self { Value::$v(x as $c) }
        })*
    };
}
value_from!(i8 => Int as i64, i16 => Int as i64, i32 => Int as i64, i64 => Int as i64, isize => Int as i64,
            u8 => UInt as u64, u16 => UInt as u64, u32 => UInt as u64, u64 => UInt as u64, usize => UInt as u64,
            f32 => Float as f64, f64 => Float as f64);

impl From<bool> for Value {
    fn from(x: bool) -> Self {
        Value::Bool(x)
    }
}
impl From<&str> for Value {
    fn from(x: &str) -> Self {
        Value::Str(x.to_string())
    }
}
impl From<String> for Value {
    fn from(x: String) -> Self {
        Value::Str(x)
    }
}
impl From<Vec<u8>> for Value {
    fn from(x: Vec<u8>) -> Self {
        Value::Bytes(Bytes::from_vec(x))
    }
}
impl From<&[u8]> for Value {
    fn from(x: &[u8]) -> Self {
        Value::Bytes(Bytes::from_slice_ref(x))
    }
}
impl From<Bytes> for Value {
    fn from(x: Bytes) -> Self {
        Value::Bytes(x)
    }
}
impl From<PathBuf> for Value {
    fn from(x: PathBuf) -> Self {
        Value::Path(x)
    }
}
impl From<&std::path::Path> for Value {
    fn from(x: &std::path::Path) -> Self {
        Value::Path(x.to_path_buf())
    }
}
impl From<ImageData> for Value {
    fn from(x: ImageData) -> Self {
        Value::Image(Box::new(x))
    }
}
impl From<Tensor> for Value {
    fn from(x: Tensor) -> Self {
        Value::Tensor(Box::new(x))
    }
}
impl From<VideoRef> for Value {
    fn from(x: VideoRef) -> Self {
        Value::Video(Box::new(x))
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(x: Option<T>) -> Self {
        x.map(Into::into).unwrap_or(Value::Null)
    }
}
impl<T: Into<Value>> From<Vec<T>> for Value
where
    T: NotU8,
{
    fn from(x: Vec<T>) -> Self {
        Value::List(x.into_iter().map(Into::into).collect())
    }
}

/// Marker that keeps `Vec<u8>` meaning bytes rather than a list of integers.
pub trait NotU8 {}
macro_rules! not_u8 { ($($t:ty),*) => { $(impl NotU8 for $t {})* } }
not_u8!(
    i8,
    i16,
    i32,
    i64,
    u16,
    u32,
    u64,
    f32,
    f64,
    bool,
    String,
    &str,
    Value,
    Vec<f32>,
    Vec<f64>,
    Vec<i64>,
    Vec<i32>
);
