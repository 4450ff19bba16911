//! Decoding Arrow cells back into typed [`Value`]s: images to pixels, arrays
//! to tensors with their shape, class ids with their names, video cells to
//! [`VideoRef`]s resolved inside the cache.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, RecordBatch};

use super::{image, Dtype, Feature, Features, VideoStorage};
use crate::error::{Error, Result};
use crate::value::{Label, Row, Tensor, Value, VideoRef};

/// How cells are turned into values.
#[derive(Debug, Clone)]
pub struct DecodeOptions {
    /// Decode images to pixels (true) or return their encoded bytes (false).
    pub decode_images: bool,
    /// The cache directory, to resolve staged video files.
    pub cache_dir: Option<PathBuf>,
    /// Directories outside the cache whose files video path cells may name
    /// (see [`crate::features::trust`]).
    pub trusted_roots: crate::features::trust::TrustedRoots,
    /// Raw cells: images and arrays as their stored bytes, class labels as
    /// plain ids (no names), nothing decoded.
    pub raw: bool,
    /// How large an image (and, for video caches, a frame or window) a read
    /// may decode.
    pub limits: crate::features::limits::DecodeLimits,
    /// Decode `Video(path|bytes)` cells to clips with this policy (a tensor
    /// instead of a [`VideoRef`]).
    #[cfg(feature = "video")]
    pub video: Option<Arc<crate::video::VideoDecode>>,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            decode_images: true,
            cache_dir: None,
            trusted_roots: Default::default(),
            limits: Default::default(),
            raw: false,
            #[cfg(feature = "video")]
            video: None,
        }
    }
}

impl DecodeOptions {
    /// Sets whether images are decoded to pixels.
    pub fn with_decode_images(mut self, yes: bool) -> Self {
        self.decode_images = yes;
        self
    }

    /// Sets the read-time video decoding policy (None: cells stay [`VideoRef`]s).
    #[cfg(feature = "video")]
    pub fn with_video_decode(mut self, policy: Option<crate::video::VideoDecode>) -> Self {
        self.video = policy.map(Arc::new);
        self
    }

    /// Sets raw mode (see [`DecodeOptions::raw`]).
    pub fn with_raw(mut self, yes: bool) -> Self {
        self.raw = yes;
        self
    }

    /// Sets the directories outside the cache whose files video path
    /// cells may name.
    pub fn with_trusted_roots(mut self, roots: crate::features::trust::TrustedRoots) -> Self {
        self.trusted_roots = roots;
        self
    }

    /// The decode limits (default [`DecodeLimits::default`](crate::features::limits::DecodeLimits)).
    pub fn with_limits(mut self, limits: crate::features::limits::DecodeLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the cache directory used to resolve video paths.
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }
}

/// Decodes rows of record batches that follow a [`Features`] schema.
#[derive(Debug, Clone)]
pub struct RowDecoder {
    features: Arc<Features>,
    /// Batch column indices decoded, in output order.
    sel: Arc<[usize]>,
    /// The selected features (what rows hold).
    selected: Arc<Features>,
    names: Arc<[String]>,
    opts: DecodeOptions,
}

impl RowDecoder {
    /// A decoder for these features (every column).
    pub fn new(features: Arc<Features>, opts: DecodeOptions) -> Self {
        let sel: Arc<[usize]> = (0..features.len()).collect();
        let names: Arc<[String]> = features.names().into();
        RowDecoder {
            selected: features.clone(),
            features,
            sel,
            names,
            opts,
        }
    }

    /// A decoder of only the named columns, in that order.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an unknown or repeated column.
    pub fn with_columns(&self, columns: &[&str]) -> Result<Self> {
        let all = self.features.names();
        let mut sel = Vec::with_capacity(columns.len());
        let mut selected = Features::new();
        for c in columns {
            let i = all.iter().position(|n| n == c).ok_or_else(|| {
                Error::InvalidArgument(format!("no column '{c}' (columns: {all:?})"))
            })?;
            if sel.contains(&i) {
                return Err(Error::InvalidArgument(format!(
                    "column '{c}' selected twice"
                )));
            }
            sel.push(i);
            selected.insert(*c, self.features.get(c).expect("known column").clone());
        }
        Ok(RowDecoder {
            features: self.features.clone(),
            names: selected.names().into(),
            selected: Arc::new(selected),
            sel: sel.into(),
            opts: self.opts.clone(),
        })
    }

    /// The same columns with other options.
    pub fn with_options(&self, opts: DecodeOptions) -> Self {
        RowDecoder {
            opts,
            ..self.clone()
        }
    }

    /// The features of the whole batch this decoder reads.
    pub fn features(&self) -> &Arc<Features> {
        &self.features
    }

    /// The features of the rows it produces (the selected columns).
    pub fn selected_features(&self) -> &Arc<Features> {
        &self.selected
    }

    /// Indices of the batch columns decoded.
    pub fn selection(&self) -> &[usize] {
        &self.sel
    }

    /// The options in use.
    pub fn options(&self) -> &DecodeOptions {
        &self.opts
    }

    /// Decodes row `row` of `batch`.
    ///
    /// # Errors
    /// [`Error::Decode`] naming the column (corrupt image, wrong array size, schema drift).
    pub fn decode_row(&self, batch: &RecordBatch, row: usize) -> Result<Row> {
        self.check(batch)?;
        let mut values = crate::value::RowValues::with_capacity(self.sel.len());
        for ((name, f), &i) in self.selected.iter().zip(self.sel.iter()) {
            let v = decode_cell(f, batch.column(i).as_ref(), row, &self.opts)
                .map_err(|e| Error::decode(name, e))?;
            values.push(v);
        }
        Ok(Row::new(self.names.clone(), values))
    }

    fn check(&self, batch: &RecordBatch) -> Result<()> {
        if batch.num_columns() != self.features.len() {
            return Err(Error::decode(
                "*",
                format!(
                    "batch has {} columns, features have {}",
                    batch.num_columns(),
                    self.features.len()
                ),
            ));
        }
        Ok(())
    }

    /// Decodes every row of `batch`, column by column (one downcast per
    /// column, not per cell).
    ///
    /// # Errors
    /// See [`Self::decode_row`].
    pub fn decode_batch(&self, batch: &RecordBatch) -> Result<Vec<Row>> {
        self.check(batch)?;
        let n = batch.num_rows();
        let raw = self.opts.raw;
        let decs: Vec<ColDecoder> = self
            .selected
            .iter()
            .zip(self.sel.iter())
            .map(|((name, f), &i)| {
                ColDecoder::new(f, batch.column(i).as_ref(), n, raw)
                    .map_err(|e| Error::decode(name, e))
            })
            .collect::<Result<_>>()?;
        let mut rows: Vec<Row> = Vec::with_capacity(n);
        for r in 0..n {
            let mut values = crate::value::RowValues::new();
            for (c, d) in decs.iter().enumerate() {
                match d.get(r, &self.opts) {
                    Ok(v) => values.push(v),
                    Err(e) => return Err(Error::decode(&self.names[c], e)),
                }
            }
            rows.push(Row::new(self.names.clone(), values));
        }
        Ok(rows)
    }
}

/// One column of a batch, downcast once, decoding cell by cell.
enum ColDecoder<'a> {
    I32(&'a arrow_array::Int32Array),
    I64(&'a arrow_array::Int64Array),
    F32(&'a arrow_array::Float32Array),
    F64(&'a arrow_array::Float64Array),
    Label(&'a arrow_array::Int64Array, &'a super::ClassLabel),
    Bin(&'a arrow_array::BinaryArray),
    Other(&'a Feature, &'a dyn Array),
}

impl<'a> ColDecoder<'a> {
    fn new(
        f: &'a Feature,
        a: &'a dyn Array,
        rows: usize,
        raw: bool,
    ) -> std::result::Result<Self, String> {
        if a.len() != rows {
            return Err(format!("column has {} cells for {rows} rows", a.len()));
        }
        let t = || type_err(f, a);
        if raw {
            return Ok(ColDecoder::Other(f, a));
        }
        Ok(match f {
            Feature::Value(Dtype::Int32) => ColDecoder::I32(a.as_primitive_opt().ok_or_else(t)?),
            Feature::Value(Dtype::Int64) => ColDecoder::I64(a.as_primitive_opt().ok_or_else(t)?),
            Feature::Value(Dtype::Float32) => ColDecoder::F32(a.as_primitive_opt().ok_or_else(t)?),
            Feature::Value(Dtype::Float64) => ColDecoder::F64(a.as_primitive_opt().ok_or_else(t)?),
            Feature::ClassLabel(c) => ColDecoder::Label(a.as_primitive_opt().ok_or_else(t)?, c),
            Feature::Value(Dtype::Binary) => ColDecoder::Bin(a.as_binary_opt().ok_or_else(t)?),
            _ => ColDecoder::Other(f, a),
        })
    }

    #[inline]
    fn get(&self, r: usize, opts: &DecodeOptions) -> std::result::Result<Value, String> {
        Ok(match self {
            ColDecoder::I32(a) if !a.is_null(r) => Value::Int(a.values()[r] as i64),
            ColDecoder::I64(a) if !a.is_null(r) => Value::Int(a.values()[r]),
            ColDecoder::F32(a) if !a.is_null(r) => Value::Float(a.values()[r] as f64),
            ColDecoder::F64(a) if !a.is_null(r) => Value::Float(a.values()[r]),
            ColDecoder::Label(a, c) if !a.is_null(r) => {
                let id = a.values()[r];
                Value::Label(Label {
                    id,
                    name: c.int2str(id).cloned(),
                })
            }
            ColDecoder::Bin(b) if !b.is_null(r) => Value::Bytes(shared_slice(*b, r)),
            ColDecoder::Other(f, a) => return decode_cell(f, *a, r, opts),
            _ => Value::Null,
        })
    }
}

fn type_err(f: &Feature, a: &dyn Array) -> String {
    format!(
        "column has Arrow type {}, feature {} needs {}",
        a.data_type(),
        f.class_name(),
        f.arrow_type()
    )
}

macro_rules! prim {
    ($a:expr, $t:ty, $row:expr, $f:expr, $wrap:expr) => {
        match $a.as_primitive_opt::<$t>() {
            Some(arr) => $wrap(arr.value($row)),
            None => return Err(type_err($f, $a)),
        }
    };
}

/// Decodes one cell.
///
/// # Errors
/// A message saying why the cell does not decode.
pub fn decode_cell(
    f: &Feature,
    a: &dyn Array,
    row: usize,
    opts: &DecodeOptions,
) -> std::result::Result<Value, String> {
    if row >= a.len() {
        return Err(format!("row {row} beyond column length {}", a.len()));
    }
    if a.is_null(row) {
        return Ok(Value::Null);
    }
    #[cfg(feature = "video")]
    if let Feature::Video(v) = f {
        if v.storage == VideoStorage::Frames {
            return decode_frames_cell(a, row, opts.raw);
        }
        if v.storage == VideoStorage::Segments {
            return decode_window_cell(a, row);
        }
    }
    if opts.raw {
        match f {
            Feature::ClassLabel(_) => {
                return Ok(prim!(a, Int64Type, row, f, Value::Int));
            }
            Feature::Image(_) | Feature::Array(_) => {
                return Ok(Value::Bytes(binary_cell(f, a, row)?));
            }
            _ => {}
        }
    }
    Ok(match f {
        Feature::Value(d) => match d {
            Dtype::Int8 => prim!(a, Int8Type, row, f, |x| Value::Int(x as i64)),
            Dtype::Int16 => prim!(a, Int16Type, row, f, |x| Value::Int(x as i64)),
            Dtype::Int32 => prim!(a, Int32Type, row, f, |x| Value::Int(x as i64)),
            Dtype::Int64 => prim!(a, Int64Type, row, f, Value::Int),
            Dtype::UInt8 => prim!(a, UInt8Type, row, f, |x| Value::UInt(x as u64)),
            Dtype::UInt16 => prim!(a, UInt16Type, row, f, |x| Value::UInt(x as u64)),
            Dtype::UInt32 => prim!(a, UInt32Type, row, f, |x| Value::UInt(x as u64)),
            Dtype::UInt64 => prim!(a, UInt64Type, row, f, Value::UInt),
            Dtype::Float16 => prim!(a, Float16Type, row, f, |x: half::f16| Value::Float(
                x.to_f64()
            )),
            Dtype::Float32 => prim!(a, Float32Type, row, f, |x| Value::Float(x as f64)),
            Dtype::Float64 => prim!(a, Float64Type, row, f, Value::Float),
            Dtype::Bool => match a.as_boolean_opt() {
                Some(b) => Value::Bool(b.value(row)),
                None => return Err(type_err(f, a)),
            },
            Dtype::String => match a.as_string_opt::<i32>() {
                Some(s) => Value::Str(s.value(row).to_string()),
                None => return Err(type_err(f, a)),
            },
            Dtype::Binary => match a.as_binary_opt::<i32>() {
                Some(b) => Value::Bytes(shared_slice(b, row)),
                None => return Err(type_err(f, a)),
            },
        },
        Feature::ClassLabel(c) => {
            let id = prim!(a, Int64Type, row, f, |x| x);
            Value::Label(Label {
                id,
                name: c.int2str(id).cloned(),
            })
        }
        Feature::Sequence(inner) => {
            let list = a.as_list_opt::<i32>().ok_or_else(|| type_err(f, a))?;
            let child = list.value(row);
            let mut items = Vec::with_capacity(child.len());
            for j in 0..child.len() {
                items.push(decode_cell(inner, child.as_ref(), j, opts)?);
            }
            Value::List(items)
        }
        Feature::Image(_) => {
            let b = a.as_binary_opt::<i64>().ok_or_else(|| type_err(f, a))?;
            if opts.decode_images {
                let bytes = b.value(row);
                // The header's size, checked before any pixel buffer exists.
                if let Ok(info) = image::probe(bytes) {
                    if let (Some(w), Some(h)) = (info.width, info.height) {
                        opts.limits.check_image(u64::from(w), u64::from(h))?;
                    }
                }
                Value::Image(Box::new(image::decode(bytes)?))
            } else {
                Value::Bytes(shared_slice(b, row))
            }
        }
        Feature::Array(arr) => {
            let bytes = binary_cell(f, a, row)?;
            if arr.shape.is_empty() {
                // Shape never stored (reference cache opened without its features).
                Value::Bytes(bytes)
            } else {
                let want =
                    arr.shape.iter().product::<usize>() * arr.dtype.byte_width().unwrap_or(1);
                if bytes.len() != want {
                    return Err(format!(
                        "stored array has {} bytes, shape {:?} of {} needs {want}",
                        bytes.len(),
                        arr.shape,
                        arr.dtype.name()
                    ));
                }
                Value::Tensor(Box::new(Tensor {
                    dtype: arr.dtype,
                    shape: arr.shape.clone(),
                    data: bytes.as_slice().to_vec(),
                }))
            }
        }
        Feature::Video(_) => {
            let r = decode_video(a, row, opts.cache_dir.as_deref(), &opts.trusted_roots)?;
            #[cfg(feature = "video")]
            if let Some(policy) = &opts.video {
                // Random sampling is seeded per sample: by the video's checksum.
                let key = r
                    .checksum
                    .as_deref()
                    .map_or(0, |c| xxhash_rust::xxh64::xxh64(c.as_bytes(), 0));
                let clip = policy
                    .decode_within(&r, key, &opts.limits)
                    .map_err(|e| e.to_string())?;
                return Ok(Value::Tensor(Box::new(clip.frames)));
            }
            Value::Video(Box::new(r))
        }
    })
}

/// A zero-copy view of one cell of an image or array column: a
/// `large_binary` value, or (arrays stored fixed-size) the `i * width`
/// slice of a `fixed_size_binary` column, found without offsets.
fn binary_cell(
    f: &Feature,
    a: &dyn Array,
    row: usize,
) -> std::result::Result<crate::value::Bytes, String> {
    if let Some(b) = a.as_binary_opt::<i64>() {
        return Ok(shared_slice(b, row));
    }
    match (f, a.as_fixed_size_binary_opt()) {
        (Feature::Array(_), Some(b)) => {
            let w = b.value_length() as usize;
            Ok(b.values()
                .slice_with_length(b.value_offset(row) as usize, w))
        }
        _ => Err(type_err(f, a)),
    }
}

/// A zero-copy view of one binary cell.
fn shared_slice<O: arrow_array::OffsetSizeTrait>(
    b: &arrow_array::GenericBinaryArray<O>,
    row: usize,
) -> crate::value::Bytes {
    let o = b.value_offsets();
    let (start, end) = (o[row].as_usize(), o[row + 1].as_usize());
    b.values().slice_with_length(start, end - start)
}

fn decode_video(
    a: &dyn Array,
    row: usize,
    cache_dir: Option<&Path>,
    trusted: &crate::features::trust::TrustedRoots,
) -> std::result::Result<VideoRef, String> {
    let s = a
        .as_struct_opt()
        .ok_or_else(|| format!("video column has Arrow type {}", a.data_type()))?;
    let str_col = |name: &str| -> std::result::Result<Option<String>, String> {
        let c = s
            .column_by_name(name)
            .ok_or_else(|| format!("video struct has no '{name}' field"))?;
        let c = c
            .as_string_opt::<i32>()
            .ok_or_else(|| format!("video field '{name}' is not a string"))?;
        Ok((!c.is_null(row)).then(|| c.value(row).to_string()))
    };
    let mode = str_col("mode")?.and_then(|m| VideoStorage::parse(&m));
    let stored_path = str_col("path")?;
    let path = stored_path
        .as_deref()
        .map(|p| crate::features::trust::resolve_stored_path(p, cache_dir, trusted))
        .transpose()?;
    let bytes = s
        .column_by_name("bytes")
        .and_then(|c| c.as_binary_opt::<i64>())
        .and_then(|c| (!c.is_null(row)).then(|| c.value(row).to_vec()));
    let size = s
        .column_by_name("size")
        .and_then(|c| c.as_primitive_opt::<Int64Type>())
        .and_then(|c| (!c.is_null(row)).then(|| c.value(row)));
    Ok(VideoRef {
        mode,
        path,
        stored_path,
        bytes,
        extension: str_col("extension")?,
        media_type: str_col("media_type")?,
        size,
        checksum: str_col("checksum")?,
    })
}

/// A decoded window cell of a segments cache (`struct<shape, data>`, see
/// `decoded_window_type`): the frames tensor, raw or not (a segments cache
/// has no per-window encoded form).
#[cfg(feature = "video")]
fn decode_window_cell(a: &dyn Array, row: usize) -> std::result::Result<Value, String> {
    let s = a
        .as_struct_opt()
        .ok_or_else(|| format!("video window column has Arrow type {}", a.data_type()))?;
    let (Some(shape), Some(data)) = (
        s.column_by_name("shape")
            .and_then(|c| c.as_list_opt::<i32>()),
        s.column_by_name("data")
            .and_then(|c| c.as_binary_opt::<i64>()),
    ) else {
        return Err("video window cells are not struct<shape: list, data: large_binary>".into());
    };
    let dims = shape.value(row);
    let dims = dims
        .as_primitive_opt::<arrow_array::types::Int64Type>()
        .ok_or("video window shape is not int64")?;
    let shape: Vec<usize> = dims.values().iter().map(|&d| d.max(0) as usize).collect();
    let bytes = data.value(row);
    if shape.iter().product::<usize>() != bytes.len() {
        return Err(format!(
            "a video window of shape {shape:?} with {} bytes",
            bytes.len()
        ));
    }
    Ok(Value::Tensor(Box::new(Tensor {
        dtype: Dtype::UInt8,
        shape,
        data: bytes.to_vec(),
    })))
}

/// A window of WebP frames (`list<large_binary>`): raw, the frames' bytes;
/// decoded, one RGB u8 tensor `[T, H, W, 3]` (frames decoded in parallel).
#[cfg(feature = "video")]
fn decode_frames_cell(a: &dyn Array, row: usize, raw: bool) -> std::result::Result<Value, String> {
    let list = a
        .as_list_opt::<i32>()
        .ok_or_else(|| format!("video frames column has Arrow type {}", a.data_type()))?;
    let cell = list.value(row);
    let bin = cell
        .as_binary_opt::<i64>()
        .ok_or_else(|| format!("video frames are {}, not large_binary", cell.data_type()))?;
    if raw {
        return Ok(Value::List(
            (0..bin.len())
                .map(|i| Value::Bytes(shared_slice(bin, i)))
                .collect(),
        ));
    }
    let frames: Vec<&[u8]> = (0..bin.len()).map(|i| bin.value(i)).collect();
    crate::video::webp::decode_window(&frames).map(|t| Value::Tensor(Box::new(t)))
}
