//! What a pipeline hands over: each column of a batch as one contiguous
//! buffer with its element type and shape, made once by the thread that
//! assembled the batch and then owned by the consumer (the Python bindings
//! give the buffer to torch without a copy).

use crate::dtype::Dtype;
use crate::sampler::LoaderState;

crate::util::named_enum! {
    /// The element type of a batch column: the scalar dtypes a tensor can
    /// hold, and bfloat16 for augmented images.
    pub enum Element("element type") {
        /// bool, one byte.
        Bool = "bool",
        /// int8.
        Int8 = "int8",
        /// int16.
        Int16 = "int16",
        /// int32.
        Int32 = "int32",
        /// int64.
        Int64 = "int64",
        /// uint8.
        UInt8 = "uint8",
        /// uint16.
        UInt16 = "uint16",
        /// uint32.
        UInt32 = "uint32",
        /// uint64.
        UInt64 = "uint64",
        /// IEEE half.
        Float16 = "float16",
        /// bfloat16 (torch's `bfloat16`).
        BFloat16 = "bfloat16",
        /// float32.
        Float32 = "float32",
        /// float64.
        Float64 = "float64",
    }
}

impl Element {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Element::Bool | Element::Int8 | Element::UInt8 => 1,
            Element::Int16 | Element::UInt16 | Element::Float16 | Element::BFloat16 => 2,
            Element::Int32 | Element::UInt32 | Element::Float32 => 4,
            Element::Int64 | Element::UInt64 | Element::Float64 => 8,
        }
    }

    /// The element type of a column of `dtype` numbers; None for strings
    /// and bytes.
    pub fn of_dtype(dtype: Dtype) -> Option<Element> {
        Some(match dtype {
            Dtype::Bool => Element::Bool,
            Dtype::Int8 => Element::Int8,
            Dtype::Int16 => Element::Int16,
            Dtype::Int32 => Element::Int32,
            Dtype::Int64 => Element::Int64,
            Dtype::UInt8 => Element::UInt8,
            Dtype::UInt16 => Element::UInt16,
            Dtype::UInt32 => Element::UInt32,
            Dtype::UInt64 => Element::UInt64,
            Dtype::Float16 => Element::Float16,
            Dtype::Float32 => Element::Float32,
            Dtype::Float64 => Element::Float64,
            Dtype::String | Dtype::Binary => return None,
        })
    }
}

/// One column of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchColumn {
    /// The elements in C order, native byte order.
    pub data: Vec<u8>,
    /// Their type.
    pub element: Element,
    /// The shape; the first dimension is the batch's.
    pub shape: Vec<usize>,
}

impl From<super::ops::OutDtype> for Element {
    /// The batch element of an image column's output dtype.
    fn from(d: super::ops::OutDtype) -> Element {
        use super::ops::OutDtype;
        match d {
            OutDtype::Uint8 => Element::UInt8,
            OutDtype::Float32 => Element::Float32,
            OutDtype::Float16 => Element::Float16,
            OutDtype::Bfloat16 => Element::BFloat16,
        }
    }
}

/// Where a pipeline stands once a batch is consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchState {
    /// A dataset's pipeline: the state to save after consuming the batch
    /// (resuming from it yields the batches after this one).
    Epoch(LoaderState),
    /// A mixture's pipeline: the batch's global step and rank-local index.
    Mixture {
        /// The global step.
        step: u64,
        /// The rank-local index (since the mixture state's base).
        local: u64,
    },
}

/// One batch: its columns in the pipeline's column order, and where the
/// pipeline stands once the batch is consumed.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// `(name, column)` in the order the pipeline was given.
    pub columns: Vec<(String, BatchColumn)>,
    /// The rows the batch holds: view positions (for a mixture, in the
    /// source each row came from).
    pub positions: Vec<u64>,
    /// For a mixture, the source of each row; empty otherwise.
    pub sources: Vec<u32>,
    /// Where the pipeline stands after this batch.
    pub state: BatchState,
}

impl Batch {
    /// The column named `name`.
    pub fn column(&self, name: &str) -> Option<&BatchColumn> {
        self.columns.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }

    /// Rows in the batch.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether the batch holds no row.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// Bytes of all its columns.
    pub fn nbytes(&self) -> usize {
        self.columns.iter().map(|(_, c)| c.data.len()).sum()
    }
}
