//! The dynamic values an author yields ([`Example`]) and a reader gets back ([`Row`]).
//!
//! One [`Value`] enum serves both directions so that a decoded row can be fed
//! straight back into a writer (re-sharding, format conversion) without a
//! translation layer.

use std::path::PathBuf;
use std::sync::Arc;

mod convert;
mod pixels;
mod row;
mod video_ref;

pub use convert::NotU8;
pub use pixels::{ImageData, Tensor, TensorElement};
pub use row::{Example, Key, Row, RowValues};
pub use video_ref::{VideoRef, VideoStorage};

/// One cell of an example or of a decoded row.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// A null cell (every feature is nullable, as in the reference).
    Null,
    /// A boolean.
    Bool(bool),
    /// A signed integer (any width; range-checked against the column's dtype).
    Int(i64),
    /// An unsigned integer (range-checked against the column's dtype).
    UInt(u64),
    /// A float (f16/f32/f64 columns; integers are accepted into float columns).
    Float(f64),
    /// A UTF-8 string.
    Str(String),
    /// Raw bytes (binary values, encoded images, inline videos). An Arrow
    /// buffer: decoded cells are zero-copy slices of the mapped shard, and a
    /// `Vec<u8>` converts into one without copying.
    Bytes(Bytes),
    /// A file path (images read raw, videos staged or inlined).
    Path(PathBuf),
    /// A list (for `Sequence`).
    List(Vec<Value>),
    /// Decoded or raw image pixels.
    Image(Box<ImageData>),
    /// An N-dimensional array.
    Tensor(Box<Tensor>),
    /// A decoded class label: its id and, when the cache knows them, its name.
    Label(Label),
    /// A video reference (input with options, or decoded cell).
    Video(Box<VideoRef>),
}

/// Shared, immutable bytes (an Arrow buffer; derefs to `[u8]`).
pub type Bytes = arrow_buffer::Buffer;

/// A decoded class label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// The class id stored in the cache.
    pub id: i64,
    /// The class name, when the features know the names.
    pub name: Option<Arc<str>>,
}

impl Value {
    /// A short name of the variant, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::UInt(_) => "uint",
            Value::Float(_) => "float",
            Value::Str(_) => "string",
            Value::Bytes(_) => "bytes",
            Value::Path(_) => "path",
            Value::List(_) => "list",
            Value::Image(_) => "image pixels",
            Value::Tensor(_) => "tensor",
            Value::Label(_) => "label",
            Value::Video(_) => "video",
        }
    }

    /// The value as i64 when it is an integer (or a label id) that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            Value::UInt(v) => i64::try_from(*v).ok(),
            Value::Label(l) => Some(l.id),
            _ => None,
        }
    }

    /// The value as f64 when it is numeric.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(v) => Some(*v),
            Value::Int(v) => Some(*v as f64),
            Value::UInt(v) => Some(*v as f64),
            _ => None,
        }
    }

    /// The string, when it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}
