//! The dynamic values an author yields ([`Example`]) and a reader gets back ([`Row`]).
//!
//! One [`Value`] enum serves both directions so that a decoded row can be fed
//! straight back into a writer (re-sharding, format conversion) without a
//! translation layer.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

use crate::dtype::Dtype;

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

/// A decoded class label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// The class id stored in the cache.
    pub id: i64,
    /// The class name, when the features know the names.
    pub name: Option<Arc<str>>,
}

/// How a video is kept in an Arrow cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VideoStorage {
    /// File staged into `_assets/video/` inside the cache; the cell holds its name.
    Path,
    /// The file's bytes inline in the cell.
    Bytes,
    /// One WebP frame per Lance row (the `lance-video-frames` layout).
    Frames,
    /// Closed segments of frames encoded with a video codec, one per Lance
    /// row (the `lance-video-segments` layout, ours: the reference does not
    /// read it).
    Segments,
}

impl VideoStorage {
    /// Whether the storage is a layout of its own (frames or segments)
    /// rather than a cell of a row.
    pub fn is_layout(self) -> bool {
        matches!(self, VideoStorage::Frames | VideoStorage::Segments)
    }

    /// The reference's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            VideoStorage::Path => "path",
            VideoStorage::Bytes => "bytes",
            VideoStorage::Frames => "frames",
            VideoStorage::Segments => "segments",
        }
    }

    /// Parses the reference's spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "path" => Some(VideoStorage::Path),
            "bytes" => Some(VideoStorage::Bytes),
            "frames" => Some(VideoStorage::Frames),
            "segments" => Some(VideoStorage::Segments),
            _ => None,
        }
    }
}

/// A reference to a video: what a `Video` cell holds, and what an author may
/// yield to give a checksum or an extension along with the file or bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VideoRef {
    /// `path` or `bytes` (None on input: the feature decides).
    pub mode: Option<VideoStorage>,
    /// On input: the source file. On output: the staged file, resolved inside the cache.
    pub path: Option<PathBuf>,
    /// On output: the `path` cell exactly as the cache stores it (relative to
    /// `_assets/video/` or absolute, as the reference writes it); `None` on input.
    pub stored_path: Option<String>,
    /// Inline bytes.
    pub bytes: Option<Vec<u8>>,
    /// Lowercase extension with its dot, e.g. `.mp4`.
    pub extension: Option<String>,
    /// Media type, e.g. `video/mp4`.
    pub media_type: Option<String>,
    /// Size in bytes.
    pub size: Option<i64>,
    /// Checksum (the given one, else the sha256 hex of the content).
    pub checksum: Option<String>,
}

impl VideoRef {
    /// Input from a file.
    pub fn from_path(path: impl Into<PathBuf>) -> Self {
        VideoRef {
            path: Some(path.into()),
            ..Default::default()
        }
    }

    /// Input from bytes with their extension (e.g. `.mp4`).
    pub fn from_bytes(bytes: Vec<u8>, extension: Option<&str>) -> Self {
        VideoRef {
            bytes: Some(bytes),
            extension: extension.map(str::to_string),
            ..Default::default()
        }
    }

    /// Sets a known checksum (kept instead of computing one).
    pub fn with_checksum(mut self, checksum: impl Into<String>) -> Self {
        self.checksum = Some(checksum.into());
        self
    }

    /// The video's bytes: inline ones, else the file's content.
    ///
    /// # Errors
    /// [`crate::Error::Io`] when the file cannot be read; [`crate::Error::InvalidArgument`]
    /// when the reference has neither bytes nor a path.
    pub fn read_bytes(&self) -> crate::Result<Cow<'_, [u8]>> {
        if let Some(b) = &self.bytes {
            return Ok(Cow::Borrowed(b));
        }
        if let Some(p) = &self.path {
            return std::fs::read(p)
                .map(Cow::Owned)
                .map_err(|e| crate::Error::io("read", p, e));
        }
        Err(crate::Error::InvalidArgument(
            "video reference has neither bytes nor a path".into(),
        ))
    }
}

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

/// Field name of an example: free for literals, owned for computed names.
pub type Key = Cow<'static, str>;

/// Fields kept inline (no heap allocation) in an [`Example`] and a [`Row`].
/// Two covers the most common shapes (image + label, text + label, video +
/// label); wider rows cost one allocation, as a `Vec` would. Measured: going
/// from 4 to 2 made decoded iteration 38% faster (smaller rows to move).
const INLINE_FIELDS: usize = 2;

/// One example as a dataset author yields it: named values, in any order.
///
/// Up to two fields live inline, so yielding small examples allocates
/// nothing per example (allocation and cross-thread frees dominated the
/// write path before).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Example {
    fields: smallvec::SmallVec<[(Key, Value); INLINE_FIELDS]>,
}

impl Example {
    /// An empty example.
    #[inline]
    pub fn new() -> Self {
        Example {
            fields: smallvec::SmallVec::new(),
        }
    }

    /// An empty example with room for `n` fields.
    #[inline]
    pub fn with_capacity(n: usize) -> Self {
        Example {
            fields: smallvec::SmallVec::with_capacity(n),
        }
    }

    /// Adds (or replaces) a field, builder style.
    #[inline]
    pub fn with(mut self, key: impl Into<Key>, value: impl Into<Value>) -> Self {
        self.set(key, value);
        self
    }

    /// Adds or replaces a field.
    #[inline]
    pub fn set(&mut self, key: impl Into<Key>, value: impl Into<Value>) {
        let key = key.into();
        let value = value.into();
        if let Some(slot) = self.fields.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = value;
        } else {
            self.fields.push((key, value));
        }
    }

    /// The value of a field.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Field names and values in insertion order.
    #[inline]
    pub fn fields(&self) -> &[(Key, Value)] {
        &self.fields
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// True when there is no field.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Takes the value at position `i` (used by the encoder, which owns the example).
    #[inline]
    pub(crate) fn take_at(&mut self, i: usize) -> Value {
        std::mem::replace(&mut self.fields[i].1, Value::Null)
    }
}

/// Values of a [`Row`]: up to two live inline, so decoding a small row allocates nothing.
pub type RowValues = smallvec::SmallVec<[Value; INLINE_FIELDS]>;

/// One decoded row: values in feature order, with the column names shared.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    names: Arc<[String]>,
    values: RowValues,
}

impl Row {
    pub(crate) fn new(names: Arc<[String]>, values: RowValues) -> Self {
        Row { names, values }
    }

    /// The value of a column.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.names
            .iter()
            .position(|n| n == name)
            .map(|i| &self.values[i])
    }

    /// Column names, in feature order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Values, in feature order.
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// The values, in feature order, without the names (what a column-wise
    /// consumer takes apart).
    pub fn into_values(self) -> RowValues {
        self.values
    }

    /// Turns the row back into an example (e.g. to re-write it elsewhere).
    pub fn into_example(self) -> Example {
        let fields = self
            .names
            .iter()
            .cloned()
            .map(Cow::Owned)
            .zip(self.values)
            .collect();
        Example { fields }
    }
}
