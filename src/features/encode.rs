//! Encoding examples into Arrow record batches.
//!
//! Unlike the reference, encoding is strict: a float is never truncated into
//! an int column, an int out of the dtype's range, an unknown class name or an
//! out-of-range class id, an array of the wrong shape or dtype, bytes that are
//! not an image, a missing or an unknown key are all errors naming the column
//! and the example.

use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::*;
use arrow_array::{ArrayRef, ListArray, RecordBatch, StructArray};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, SchemaRef};

use super::{
    image, video, ArrayFeature, ClassLabel, Dtype, Feature, Features, ImageFormat, VideoFeature,
};
use crate::error::{Error, Result};
use crate::value::{Example, Value};

type R<T = ()> = std::result::Result<T, String>;

fn int_of(v: &Value) -> R<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::UInt(u) => i64::try_from(*u).map_err(|_| format!("{u} is out of range")),
        Value::Label(l) => Ok(l.id),
        Value::Float(f) => Err(format!(
            "got float {f} for an integer column (floats are never truncated; convert explicitly)"
        )),
        other => Err(format!("expected an integer, got {}", other.kind())),
    }
}

fn uint_of(v: &Value) -> R<u64> {
    match v {
        Value::UInt(u) => Ok(*u),
        Value::Int(i) => u64::try_from(*i).map_err(|_| format!("{i} is negative")),
        Value::Float(f) => Err(format!(
            "got float {f} for an integer column (floats are never truncated; convert explicitly)"
        )),
        other => Err(format!("expected an integer, got {}", other.kind())),
    }
}

fn float_of(v: &Value) -> R<f64> {
    v.as_f64()
        .ok_or_else(|| format!("expected a number, got {}", v.kind()))
}

macro_rules! encoders {
    ($( $var:ident($builder:ty) signed $sig:tt as $native:ty ),* $(,)?) => {
        enum Enc {
            $( $var($builder), )*
            Float16(Float16Builder),
            Float32(Float32Builder),
            Float64(Float64Builder),
            Bool(BooleanBuilder),
            Str(StringBuilder),
            Bin(BinaryBuilder),
            Label(Int64Builder, ClassLabel),
            List {
                offsets: Vec<i32>,
                nulls: NullBufferBuilder,
                child: Box<Enc>,
                field: Arc<Field>,
            },
            Image(LargeBinaryBuilder, ImageFormat, image::PngCompression),
            Array(LargeBinaryBuilder, ArrayFeature),
            FixedArray(FixedSizeBinaryBuilder, ArrayFeature),
            Video(Box<VideoBuilders>, VideoFeature),
        }

        impl Enc {
            fn new(f: &Feature) -> Enc {
                match f {
                    $( Feature::Value(Dtype::$var) => Enc::$var(<$builder>::new()), )*
                    Feature::Value(Dtype::Float16) => Enc::Float16(Float16Builder::new()),
                    Feature::Value(Dtype::Float32) => Enc::Float32(Float32Builder::new()),
                    Feature::Value(Dtype::Float64) => Enc::Float64(Float64Builder::new()),
                    Feature::Value(Dtype::Bool) => Enc::Bool(BooleanBuilder::new()),
                    Feature::Value(Dtype::String) => Enc::Str(StringBuilder::new()),
                    Feature::Value(Dtype::Binary) => Enc::Bin(BinaryBuilder::new()),
                    Feature::ClassLabel(c) => Enc::Label(Int64Builder::new(), c.clone()),
                    Feature::Sequence(inner) => Enc::List {
                        offsets: vec![0],
                        nulls: NullBufferBuilder::new(0),
                        child: Box::new(Enc::new(inner)),
                        field: Arc::new(Field::new("item", inner.arrow_type(), true)),
                    },
                    Feature::Image(fmt) => Enc::Image(LargeBinaryBuilder::new(), *fmt, image::PngCompression::default()),
                    Feature::Array(a) => match a.arrow_type() {
                        DataType::FixedSizeBinary(n) => Enc::FixedArray(FixedSizeBinaryBuilder::new(n), a.clone()),
                        _ => Enc::Array(LargeBinaryBuilder::new(), a.clone()),
                    },
                    Feature::Video(v) => Enc::Video(Box::default(), v.clone()),
                }
            }

            /// Deflates PNG images of this column (nested ones too) as `png` says.
            fn set_png(&mut self, png: image::PngCompression) {
                match self {
                    Enc::Image(_, _, p) => *p = png,
                    Enc::List { child, .. } => child.set_png(png),
                    _ => {}
                }
            }

            fn append(&mut self, v: Value, cache_dir: Option<&Path>) -> R {
                if matches!(v, Value::Null) {
                    self.append_null();
                    return Ok(());
                }
                match self {
                    $( Enc::$var(b) => {
                        let x = encoders!(@get $sig v);
                        let x = <$native>::try_from(x).map_err(|_| {
                            format!("{x} is out of range for {}", Dtype::$var.name())
                        })?;
                        b.append_value(x);
                    } )*
                    Enc::Float16(b) => b.append_value(half::f16::from_f64(float_of(&v)?)),
                    Enc::Float32(b) => b.append_value(float_of(&v)? as f32),
                    Enc::Float64(b) => b.append_value(float_of(&v)?),
                    Enc::Bool(b) => match v {
                        Value::Bool(x) => b.append_value(x),
                        other => return Err(format!("expected a bool, got {}", other.kind())),
                    },
                    Enc::Str(b) => match v {
                        Value::Str(s) => b.append_value(s),
                        other => return Err(format!("expected a string, got {}", other.kind())),
                    },
                    Enc::Bin(b) => match v {
                        Value::Bytes(x) => b.append_value(x.as_slice()),
                        other => return Err(format!("expected bytes, got {}", other.kind())),
                    },
                    Enc::Label(b, c) => b.append_value(encode_label(c, &v)?),
                    Enc::List { offsets, nulls, child, .. } => {
                        let items = match v {
                            Value::List(items) => items,
                            Value::Tensor(t) if t.shape.len() == 1 => tensor_items(&t),
                            other => return Err(format!("expected a list, got {}", other.kind())),
                        };
                        let n = items.len();
                        for (j, item) in items.into_iter().enumerate() {
                            child.append(item, cache_dir).map_err(|e| format!("item {j}: {e}"))?;
                        }
                        let last = *offsets.last().expect("offsets start at 0");
                        let next = i32::try_from(n)
                            .ok()
                            .and_then(|n| last.checked_add(n))
                            .ok_or("list column exceeds 2^31 items in one batch; lower the batch size")?;
                        offsets.push(next);
                        nulls.append_non_null();
                    }
                    Enc::Image(b, fmt, png) => b.append_value(encode_image(v, *fmt, *png)?.as_slice()),
                    Enc::Array(b, a) => b.append_value(encode_array(v, a)?.as_slice()),
                    // encode_array checked the length: it is the column's width.
                    Enc::FixedArray(b, a) => b
                        .append_value(encode_array(v, a)?.as_slice())
                        .map_err(|e| e.to_string())?,
                    Enc::Video(b, feat) => match video::encode(v, feat, cache_dir)? {
                        Some(cell) => b.append(cell),
                        None => b.append_null(),
                    },
                }
                Ok(())
            }

            fn append_null(&mut self) {
                match self {
                    $( Enc::$var(b) => b.append_null(), )*
                    Enc::Float16(b) => b.append_null(),
                    Enc::Float32(b) => b.append_null(),
                    Enc::Float64(b) => b.append_null(),
                    Enc::Bool(b) => b.append_null(),
                    Enc::Str(b) => b.append_null(),
                    Enc::Bin(b) => b.append_null(),
                    Enc::Label(b, _) => b.append_null(),
                    Enc::List { offsets, nulls, .. } => {
                        let last = *offsets.last().expect("offsets start at 0");
                        offsets.push(last);
                        nulls.append_null();
                    }
                    Enc::Image(b, _, _) | Enc::Array(b, _) => b.append_null(),
                    Enc::FixedArray(b, _) => b.append_null(),
                    Enc::Video(b, _) => b.append_null(),
                }
            }

            fn finish(&mut self) -> ArrayRef {
                match self {
                    $( Enc::$var(b) => Arc::new(b.finish()), )*
                    Enc::Float16(b) => Arc::new(b.finish()),
                    Enc::Float32(b) => Arc::new(b.finish()),
                    Enc::Float64(b) => Arc::new(b.finish()),
                    Enc::Bool(b) => Arc::new(b.finish()),
                    Enc::Str(b) => Arc::new(b.finish()),
                    Enc::Bin(b) => Arc::new(b.finish()),
                    Enc::Label(b, _) => Arc::new(b.finish()),
                    Enc::List { offsets, nulls, child, field } => {
                        let values = child.finish();
                        let offs = std::mem::replace(offsets, vec![0]);
                        let offs = OffsetBuffer::new(ScalarBuffer::from(offs));
                        Arc::new(ListArray::new(field.clone(), offs, values, nulls.finish()))
                    }
                    Enc::Image(b, _, _) | Enc::Array(b, _) => Arc::new(b.finish()),
                    Enc::FixedArray(b, _) => Arc::new(b.finish()),
                    Enc::Video(b, _) => Arc::new(b.finish()),
                }
            }
        }
    };
    (@get signed $v:ident) => { int_of(&$v)? };
    (@get unsigned $v:ident) => { uint_of(&$v)? };
}

encoders!(
    Int8(Int8Builder) signed signed as i8,
    Int16(Int16Builder) signed signed as i16,
    Int32(Int32Builder) signed signed as i32,
    Int64(Int64Builder) signed signed as i64,
    UInt8(UInt8Builder) signed unsigned as u8,
    UInt16(UInt16Builder) signed unsigned as u16,
    UInt32(UInt32Builder) signed unsigned as u32,
    UInt64(UInt64Builder) signed unsigned as u64,
);

fn tensor_items(t: &crate::value::Tensor) -> Vec<Value> {
    let w = t.dtype.byte_width().unwrap_or(1);
    t.data
        .chunks_exact(w)
        .map(|c| match t.dtype {
            Dtype::Int8 => Value::Int(c[0] as i8 as i64),
            Dtype::Int16 => Value::Int(i16::from_le_bytes([c[0], c[1]]) as i64),
            Dtype::Int32 => Value::Int(i32::from_le_bytes(c.try_into().unwrap()) as i64),
            Dtype::Int64 => Value::Int(i64::from_le_bytes(c.try_into().unwrap())),
            Dtype::UInt8 => Value::UInt(c[0] as u64),
            Dtype::UInt16 => Value::UInt(u16::from_le_bytes([c[0], c[1]]) as u64),
            Dtype::UInt32 => Value::UInt(u32::from_le_bytes(c.try_into().unwrap()) as u64),
            Dtype::UInt64 => Value::UInt(u64::from_le_bytes(c.try_into().unwrap())),
            Dtype::Float16 => Value::Float(half::f16::from_le_bytes([c[0], c[1]]).to_f64()),
            Dtype::Float32 => Value::Float(f32::from_le_bytes(c.try_into().unwrap()) as f64),
            Dtype::Float64 => Value::Float(f64::from_le_bytes(c.try_into().unwrap())),
            Dtype::Bool => Value::Bool(c[0] != 0),
            Dtype::String | Dtype::Binary => Value::Null,
        })
        .collect()
}

fn encode_label(c: &ClassLabel, v: &Value) -> R<i64> {
    let id = match v {
        Value::Str(name) => {
            if !c.is_known() {
                return Err(format!(
                    "class name '{name}' given, but this ClassLabel has no names"
                ));
            }
            return c.str2int(name).ok_or_else(|| {
                let shown: Vec<&str> = c.names().iter().take(20).map(|n| n.as_ref()).collect();
                format!(
                    "unknown class name '{name}' (classes: {shown:?}{})",
                    if c.num_classes() > 20 { ", ..." } else { "" }
                )
            });
        }
        other => int_of(other)?,
    };
    if id < 0 || (c.is_known() && id as usize >= c.num_classes()) {
        return Err(format!(
            "class id {id} is out of range for {} classes",
            c.num_classes()
        ));
    }
    Ok(id)
}

/// Bytes to append: shared with the input when possible.
enum Blob {
    Shared(crate::value::Bytes),
    Owned(Vec<u8>),
}

impl Blob {
    fn as_slice(&self) -> &[u8] {
        match self {
            Blob::Shared(b) => b.as_slice(),
            Blob::Owned(v) => v,
        }
    }
}

fn encode_image(v: Value, fmt: ImageFormat, png: image::PngCompression) -> R<Blob> {
    match v {
        Value::Bytes(b) => {
            if image::sniff(&b).is_none() {
                return Err(format!(
                    "{} bytes given for an Image are not a recognised image (PNG, JPEG, GIF, WebP, BMP, TIFF)",
                    b.len()
                ));
            }
            Ok(Blob::Shared(b))
        }
        Value::Path(p) => {
            let b =
                std::fs::read(&p).map_err(|e| format!("cannot read image {}: {e}", p.display()))?;
            if image::sniff(&b).is_none() {
                return Err(format!("{} is not a recognised image file", p.display()));
            }
            Ok(Blob::Owned(b))
        }
        Value::Image(img) => image::encode_with(&img, fmt, png).map(Blob::Owned),
        other => Err(format!(
            "an Image takes encoded bytes, a file path or pixels, got {}",
            other.kind()
        )),
    }
}

fn encode_array(v: Value, a: &ArrayFeature) -> R<Blob> {
    match v {
        Value::Tensor(t) => {
            if t.dtype != a.dtype {
                return Err(format!(
                    "array dtype {} given, feature wants {}",
                    t.dtype.name(),
                    a.dtype.name()
                ));
            }
            if t.shape != a.shape {
                return Err(format!(
                    "array shape {:?} given, feature wants {:?}",
                    t.shape, a.shape
                ));
            }
            let want = a.shape.iter().product::<usize>() * a.dtype.byte_width().unwrap_or(1);
            if t.data.len() != want {
                return Err(format!(
                    "array buffer has {} bytes, shape {:?} of {} needs {want}",
                    t.data.len(),
                    a.shape,
                    a.dtype.name()
                ));
            }
            Ok(Blob::Owned(t.data))
        }
        Value::Bytes(b) => {
            let want = a.shape.iter().product::<usize>() * a.dtype.byte_width().unwrap_or(1);
            if b.len() != want {
                return Err(format!(
                    "raw array bytes have length {}, shape {:?} of {} needs {want}",
                    b.len(),
                    a.shape,
                    a.dtype.name()
                ));
            }
            Ok(Blob::Shared(b))
        }
        other => Err(format!("an array takes a Tensor, got {}", other.kind())),
    }
}

struct VideoBuilders {
    mode: StringBuilder,
    path: StringBuilder,
    bytes: LargeBinaryBuilder,
    extension: StringBuilder,
    media_type: StringBuilder,
    size: Int64Builder,
    checksum: StringBuilder,
    nulls: NullBufferBuilder,
    len: usize,
}

impl Default for VideoBuilders {
    fn default() -> Self {
        VideoBuilders {
            mode: StringBuilder::new(),
            path: StringBuilder::new(),
            bytes: LargeBinaryBuilder::new(),
            extension: StringBuilder::new(),
            media_type: StringBuilder::new(),
            size: Int64Builder::new(),
            checksum: StringBuilder::new(),
            nulls: NullBufferBuilder::new(0),
            len: 0,
        }
    }
}

impl VideoBuilders {
    fn append(&mut self, c: video::VideoCell) {
        self.mode.append_value(c.mode.as_str());
        self.path.append_option(c.path);
        self.bytes.append_option(c.bytes);
        self.extension.append_value(c.extension);
        self.media_type.append_value(c.media_type);
        self.size.append_value(c.size);
        self.checksum.append_value(c.checksum);
        self.nulls.append_non_null();
        self.len += 1;
    }

    fn append_null(&mut self) {
        self.mode.append_null();
        self.path.append_null();
        self.bytes.append_null();
        self.extension.append_null();
        self.media_type.append_null();
        self.size.append_null();
        self.checksum.append_null();
        self.nulls.append_null();
        self.len += 1;
    }

    fn finish(&mut self) -> StructArray {
        let children: Vec<ArrayRef> = vec![
            Arc::new(self.mode.finish()),
            Arc::new(self.path.finish()),
            Arc::new(self.bytes.finish()),
            Arc::new(self.extension.finish()),
            Arc::new(self.media_type.finish()),
            Arc::new(self.size.finish()),
            Arc::new(self.checksum.finish()),
        ];
        self.len = 0;
        StructArray::new(super::video_struct_fields(), children, self.nulls.finish())
    }
}

/// Encodes examples of one schema into record batches, column by column.
pub struct BatchEncoder {
    features: Arc<Features>,
    names: Vec<String>,
    schema: SchemaRef,
    encs: Vec<Enc>,
    rows: usize,
    cache_dir: Option<std::path::PathBuf>,
}

impl BatchEncoder {
    /// A new encoder. `cache_dir` is where `Video(storage='path')` files are staged.
    pub fn new(features: Arc<Features>, cache_dir: Option<&Path>) -> Self {
        let encs = features.iter().map(|(_, f)| Enc::new(f)).collect();
        BatchEncoder {
            names: features.names(),
            schema: features.arrow_schema(),
            features,
            encs,
            rows: 0,
            cache_dir: cache_dir.map(Path::to_path_buf),
        }
    }

    /// Deflates PNG images encoded from pixels as `png` says (default:
    /// [`image::PngCompression::Fast`]).
    pub fn with_png_compression(mut self, png: image::PngCompression) -> Self {
        for e in &mut self.encs {
            e.set_png(png);
        }
        self
    }

    /// Appends one example; `row` is its position in the generator's output (for errors).
    ///
    /// # Errors
    /// [`Error::Encode`] naming the column and the row. After an error the
    /// encoder's partial batch is unusable; the build is abandoned.
    pub fn append(&mut self, mut ex: Example, row: u64) -> Result<()> {
        let mut matched = 0usize;
        for (i, name) in self.names.iter().enumerate() {
            // Fast path: the author yields keys in feature order.
            let pos = if ex.fields().get(i).is_some_and(|(k, _)| k == name) {
                Some(i)
            } else {
                ex.fields().iter().position(|(k, _)| k == name)
            };
            let Some(pos) = pos else {
                return Err(Error::encode(
                    name,
                    row,
                    "missing from the example (yield Value::Null for a null cell)",
                ));
            };
            matched += 1;
            let v = ex.take_at(pos);
            self.encs[i]
                .append(v, self.cache_dir.as_deref())
                .map_err(|reason| Error::encode(name, row, reason))?;
        }
        if matched != ex.len() {
            let extra = ex
                .fields()
                .iter()
                .find(|(k, _)| !self.names.iter().any(|n| n == k))
                .map(|(k, _)| k.to_string())
                .unwrap_or_default();
            return Err(Error::encode(
                &extra,
                row,
                format!("not a feature of this dataset (features: {:?})", self.names),
            ));
        }
        self.rows += 1;
        Ok(())
    }

    /// Rows appended since the last [`Self::finish`].
    pub fn len(&self) -> usize {
        self.rows
    }

    /// True when no row is pending.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The features being encoded.
    pub fn features(&self) -> &Features {
        &self.features
    }

    /// Builds the record batch of the rows appended so far and resets.
    ///
    /// # Errors
    /// [`Error::Arrow`] if Arrow rejects the batch (an internal inconsistency).
    pub fn finish(&mut self) -> Result<RecordBatch> {
        let cols: Vec<ArrayRef> = self.encs.iter_mut().map(Enc::finish).collect();
        let n = self.rows;
        self.rows = 0;
        RecordBatch::try_new_with_options(
            self.schema.clone(),
            cols,
            &arrow_array::RecordBatchOptions::new().with_row_count(Some(n)),
        )
        .map_err(|e| Error::arrow(None, e))
    }
}
