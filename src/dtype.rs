//! [`Dtype`]: the reference's 14 scalar types, their numpy names and Arrow
//! types. A leaf module: features, values and video frames all name dtypes.

use arrow_schema::DataType;

use crate::error::{Error, Result};

/// The reference's 14 scalar dtypes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// int8
    Int8,
    /// int16
    Int16,
    /// int32
    Int32,
    /// int64
    Int64,
    /// uint8
    UInt8,
    /// uint16
    UInt16,
    /// uint32
    UInt32,
    /// uint64
    UInt64,
    /// float16
    Float16,
    /// float32
    Float32,
    /// float64
    Float64,
    /// bool
    Bool,
    /// string (Arrow utf8, 32-bit offsets)
    String,
    /// binary (Arrow binary, 32-bit offsets)
    Binary,
}

impl Dtype {
    /// All dtypes, in the reference's order.
    pub const ALL: [Dtype; 14] = [
        Dtype::Int8,
        Dtype::Int16,
        Dtype::Int32,
        Dtype::Int64,
        Dtype::UInt8,
        Dtype::UInt16,
        Dtype::UInt32,
        Dtype::UInt64,
        Dtype::Float16,
        Dtype::Float32,
        Dtype::Float64,
        Dtype::Bool,
        Dtype::String,
        Dtype::Binary,
    ];

    /// The reference's (numpy) name.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Int8 => "int8",
            Dtype::Int16 => "int16",
            Dtype::Int32 => "int32",
            Dtype::Int64 => "int64",
            Dtype::UInt8 => "uint8",
            Dtype::UInt16 => "uint16",
            Dtype::UInt32 => "uint32",
            Dtype::UInt64 => "uint64",
            Dtype::Float16 => "float16",
            Dtype::Float32 => "float32",
            Dtype::Float64 => "float64",
            Dtype::Bool => "bool",
            Dtype::String => "string",
            Dtype::Binary => "binary",
        }
    }

    /// Parses a dtype name.
    ///
    /// # Errors
    /// [`Error::InvalidFeature`] for an unknown name.
    pub fn parse(s: &str) -> Result<Self> {
        Dtype::ALL
            .iter()
            .copied()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                Error::InvalidFeature(format!(
                    "unknown dtype '{s}' (known: {})",
                    Dtype::ALL.map(|d| d.name()).join(", ")
                ))
            })
    }

    /// The Arrow type of a `Value(dtype)` column.
    pub fn arrow_type(self) -> DataType {
        match self {
            Dtype::Int8 => DataType::Int8,
            Dtype::Int16 => DataType::Int16,
            Dtype::Int32 => DataType::Int32,
            Dtype::Int64 => DataType::Int64,
            Dtype::UInt8 => DataType::UInt8,
            Dtype::UInt16 => DataType::UInt16,
            Dtype::UInt32 => DataType::UInt32,
            Dtype::UInt64 => DataType::UInt64,
            Dtype::Float16 => DataType::Float16,
            Dtype::Float32 => DataType::Float32,
            Dtype::Float64 => DataType::Float64,
            Dtype::Bool => DataType::Boolean,
            Dtype::String => DataType::Utf8,
            Dtype::Binary => DataType::Binary,
        }
    }

    /// The dtype whose `Value` column has this Arrow type.
    pub fn from_arrow(t: &DataType) -> Option<Self> {
        Dtype::ALL.iter().copied().find(|d| &d.arrow_type() == t)
    }

    /// Bytes per element for fixed-width dtypes (None for string/binary).
    pub fn byte_width(self) -> Option<usize> {
        Some(match self {
            Dtype::Int8 | Dtype::UInt8 | Dtype::Bool => 1,
            Dtype::Int16 | Dtype::UInt16 | Dtype::Float16 => 2,
            Dtype::Int32 | Dtype::UInt32 | Dtype::Float32 => 4,
            Dtype::Int64 | Dtype::UInt64 | Dtype::Float64 => 8,
            Dtype::String | Dtype::Binary => return None,
        })
    }
}
