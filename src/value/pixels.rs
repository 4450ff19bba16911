//! Decoded pixels and N-dimensional arrays: the buffers an image or an
//! `Array` cell decodes to, packed little-endian so they stack and hand over
//! to numpy without conversion.

use crate::dtype::Dtype;

/// Pixels of an image, row-major, interleaved channels, `u8`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageData {
    /// Height in pixels.
    pub height: u32,
    /// Width in pixels.
    pub width: u32,
    /// 1 (gray), 2 (gray + alpha), 3 (RGB) or 4 (RGBA).
    pub channels: u8,
    /// `height * width * channels` bytes.
    pub data: Vec<u8>,
}

impl ImageData {
    /// Builds an image, checking that the buffer matches the shape.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] when `data.len() != h*w*c` or `channels` is not 1..=4.
    pub fn new(height: u32, width: u32, channels: u8, data: Vec<u8>) -> crate::Result<Self> {
        if !(1..=4).contains(&channels) {
            return Err(crate::Error::InvalidArgument(format!(
                "image channels must be 1, 2, 3 or 4, got {channels}"
            )));
        }
        let want = height as usize * width as usize * channels as usize;
        if data.len() != want {
            return Err(crate::Error::InvalidArgument(format!(
                "image buffer has {} bytes, but {height}x{width}x{channels} needs {want}",
                data.len()
            )));
        }
        Ok(ImageData {
            height,
            width,
            channels,
            data,
        })
    }

    /// The shape as the reference's numpy format gives it: `[H, W]` for gray, else `[H, W, C]`.
    pub fn shape(&self) -> Vec<usize> {
        if self.channels == 1 {
            vec![self.height as usize, self.width as usize]
        } else {
            vec![
                self.height as usize,
                self.width as usize,
                self.channels as usize,
            ]
        }
    }
}

/// A dense N-dimensional array stored as little-endian bytes in C order.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// Element type.
    pub dtype: Dtype,
    /// Shape, outermost first.
    pub shape: Vec<usize>,
    /// `product(shape) * dtype.byte_width()` bytes, little-endian, C order.
    pub data: Vec<u8>,
}

/// Element types that can be packed into a [`Tensor`].
pub trait TensorElement: Copy {
    /// The matching dtype.
    const DTYPE: Dtype;
    /// Appends the little-endian bytes of `self`.
    fn put(self, out: &mut Vec<u8>);
    /// Reads one element from little-endian bytes.
    fn get(bytes: &[u8]) -> Self;
}

macro_rules! tensor_element {
    ($t:ty, $d:expr) => {
        impl TensorElement for $t {
            const DTYPE: Dtype = $d;
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("element width"))
            }
        }
    };
}
tensor_element!(i8, Dtype::Int8);
tensor_element!(i16, Dtype::Int16);
tensor_element!(i32, Dtype::Int32);
tensor_element!(i64, Dtype::Int64);
tensor_element!(u8, Dtype::UInt8);
tensor_element!(u16, Dtype::UInt16);
tensor_element!(u32, Dtype::UInt32);
tensor_element!(u64, Dtype::UInt64);
tensor_element!(f32, Dtype::Float32);
tensor_element!(f64, Dtype::Float64);
tensor_element!(half::f16, Dtype::Float16);

/// numpy's bool: one byte, 0 or 1.
impl TensorElement for bool {
    const DTYPE: Dtype = Dtype::Bool;
    fn put(self, out: &mut Vec<u8>) {
        out.push(self as u8);
    }
    fn get(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
}

impl Tensor {
    /// Packs typed values with a shape.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] when the shape's product differs from `values.len()`.
    pub fn from_vec<T: TensorElement>(shape: Vec<usize>, values: Vec<T>) -> crate::Result<Self> {
        let n: usize = shape.iter().product();
        if n != values.len() {
            return Err(crate::Error::InvalidArgument(format!(
                "tensor shape {shape:?} holds {n} elements, got {}",
                values.len()
            )));
        }
        let mut data = Vec::with_capacity(n * T::DTYPE.byte_width().unwrap_or(1));
        for v in values {
            v.put(&mut data);
        }
        Ok(Tensor {
            dtype: T::DTYPE,
            shape,
            data,
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// True when the tensor holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies the elements out as `T`.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] when `T` is not the tensor's dtype.
    pub fn to_vec<T: TensorElement>(&self) -> crate::Result<Vec<T>> {
        if T::DTYPE != self.dtype {
            return Err(crate::Error::InvalidArgument(format!(
                "tensor has dtype {}, asked for {}",
                self.dtype.name(),
                T::DTYPE.name()
            )));
        }
        let w = self.dtype.byte_width().unwrap_or(1);
        Ok(self.data.chunks_exact(w).map(T::get).collect())
    }
}
