//! `shardset._shardset`: the library behind the Python package.
//!
//! A thin layer: every read and decode runs in the library with the GIL
//! released; values cross into Python once, as Python scalars, strings,
//! bytes, lists, and numpy arrays that own the library's buffers (no copy).
//! Record batches leave through the Arrow C Data interface (PyCapsules).
//! Library errors become the package's exceptions with the library's message.

use std::ffi::CString;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{Array, RecordBatch, StructArray};
use pyo3::exceptions::{PyException, PyIndexError, PyStopIteration, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PyDict, PyList, PySlice, PyString, PyTuple};

use shardset::features::describe::{features_from_json, features_to_json};
use shardset::{
    Dataset, Dtype, Error, Example, Feature, Features, ImageData, OpenOptions, Row, Tensor,
    TestSize, Value, VideoRef, WindowSpec,
};

// Named by their importable module, so an error raised in a DataLoader
// worker pickles back to the main process (a class of module `_shardset`
// does not, and the loader would wait for the batch until its timeout).
pyo3::create_exception!(
    shardset._shardset,
    ShardsetError,
    PyException,
    "Base of every error the library raises."
);
pyo3::create_exception!(
    shardset._shardset,
    CacheNotFoundError,
    ShardsetError,
    "A cache, shard or input file is missing."
);
pyo3::create_exception!(
    shardset._shardset,
    CorruptCacheError,
    ShardsetError,
    "A cache's files or metadata are damaged or unreadable."
);
pyo3::create_exception!(
    shardset._shardset,
    SchemaMismatchError,
    ShardsetError,
    "A cache was written with other features than the ones given."
);
pyo3::create_exception!(
    shardset._shardset,
    BadInputError,
    ShardsetError,
    "An argument, example or feature definition is not valid."
);

/// Batches of an epoch looked ahead for prefetching, on object storage.
const PREFETCH_BATCHES: u64 = 8;

/// The library's error as the package's exception, with the same message.
fn py_err(e: Error) -> PyErr {
    let msg = e.to_string();
    match &e {
        Error::IndexOutOfRange { .. } => PyIndexError::new_err(msg),
        Error::MissingShard { .. } => CacheNotFoundError::new_err(msg),
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            CacheNotFoundError::new_err(msg)
        }
        Error::SchemaMismatch { .. } => SchemaMismatchError::new_err(msg),
        Error::Metadata { path, .. } if !shardset::storage::storage_for(path).exists(path) => {
            CacheNotFoundError::new_err(msg)
        }
        Error::Metadata { .. }
        | Error::UnsupportedVersion { .. }
        | Error::UnsupportedLayout { .. }
        | Error::CorruptShard { .. }
        | Error::ChecksumMismatch { .. }
        | Error::Decode { .. }
        | Error::Arrow { .. } => CorruptCacheError::new_err(msg),
        Error::InvalidFeature(_)
        | Error::InvalidArgument(_)
        | Error::Encode { .. }
        | Error::Input { .. }
        | Error::Video { .. }
        | Error::Generator { .. } => BadInputError::new_err(msg),
        _ => ShardsetError::new_err(msg),
    }
}

type PyRes<T> = PyResult<T>;

trait OrPy<T> {
    fn py(self) -> PyRes<T>;
}

impl<T> OrPy<T> for shardset::Result<T> {
    fn py(self) -> PyRes<T> {
        self.map_err(py_err)
    }
}

// ------------------------------------------------------------ values out ---

/// Bytes handed to numpy without a copy: `numpy.asarray` of this object
/// reads its `__array_interface__` and keeps the object as the array's
/// base, so the buffer lives as long as the array (writable, as torch's
/// `from_numpy` wants).
#[pyclass(module = "shardset._shardset", frozen)]
struct HostBuffer {
    ptr: *mut u8,
    len: usize,
    shape: Vec<usize>,
    typestr: &'static str,
}

// SAFETY: the buffer is owned by the object alone (a leaked Box freed in
// Drop); Rust never reads it after handing it out, numpy reads and writes
// it under the GIL like any array memory.
unsafe impl Send for HostBuffer {}
unsafe impl Sync for HostBuffer {}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // SAFETY: ptr/len came from Box::into_raw of a boxed slice of len bytes.
        unsafe {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.ptr, self.len,
            )))
        }
    }
}

#[pymethods]
impl HostBuffer {
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("shape", PyTuple::new(py, &self.shape)?)?;
        d.set_item("typestr", self.typestr)?;
        d.set_item("data", (self.ptr as usize, false))?;
        Ok(d)
    }
}

/// An array of `shape` over little-endian bytes of numpy type `typestr`,
/// owning them (no copy).
fn ndarray<'py>(
    py: Python<'py>,
    data: Vec<u8>,
    typestr: &'static str,
    shape: Vec<usize>,
) -> PyRes<Bound<'py, PyAny>> {
    let len = data.len();
    let ptr = Box::into_raw(data.into_boxed_slice()) as *mut u8;
    let buf = Bound::new(
        py,
        HostBuffer {
            ptr,
            len,
            shape,
            typestr,
        },
    )?;
    PyModule::import(py, "numpy")?.call_method1("asarray", (buf,))
}

fn typestr(d: Dtype) -> PyRes<&'static str> {
    Ok(match d {
        Dtype::UInt8 => "|u1",
        Dtype::Int8 => "|i1",
        Dtype::Float16 => "<f2",
        Dtype::Float32 => "<f4",
        Dtype::Float64 => "<f8",
        Dtype::Int16 => "<i2",
        Dtype::Int32 => "<i4",
        Dtype::Int64 => "<i8",
        Dtype::UInt16 => "<u2",
        Dtype::UInt32 => "<u4",
        Dtype::UInt64 => "<u8",
        Dtype::Bool => "|b1",
        other => {
            return Err(PyTypeError::new_err(format!(
                "no numpy dtype for {}",
                other.name()
            )))
        }
    })
}

fn image_to_py(py: Python<'_>, img: ImageData) -> PyRes<Bound<'_, PyAny>> {
    let shape = img.shape();
    ndarray(py, img.data, "|u1", shape)
}

fn tensor_to_py(py: Python<'_>, t: Tensor) -> PyRes<Bound<'_, PyAny>> {
    ndarray(py, t.data, typestr(t.dtype)?, t.shape)
}

fn video_to_py<'py>(py: Python<'py>, v: &VideoRef) -> PyRes<Bound<'py, PyAny>> {
    let d = PyDict::new(py);
    d.set_item("mode", v.mode.map(|m| m.as_str()))?;
    d.set_item(
        "path",
        v.path.as_ref().map(|p| p.to_string_lossy().into_owned()),
    )?;
    d.set_item("stored_path", v.stored_path.as_deref())?;
    d.set_item("bytes", v.bytes.as_ref().map(|b| PyBytes::new(py, b)))?;
    d.set_item("extension", v.extension.as_deref())?;
    d.set_item("media_type", v.media_type.as_deref())?;
    d.set_item("size", v.size)?;
    d.set_item("checksum", v.checksum.as_deref())?;
    Ok(d.into_any())
}

/// A decoded value as Python: scalars and strings as themselves, binary as
/// bytes, images and arrays as numpy arrays, class labels as their ids
/// (what the reference returns), lists as lists, video cells as dicts.
fn value_to_py(py: Python<'_>, v: Value) -> PyRes<Bound<'_, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::UInt(u) => u.into_pyobject(py)?.into_any(),
        Value::Float(f) => f.into_pyobject(py)?.into_any(),
        Value::Str(s) => PyString::new(py, &s).into_any(),
        Value::Bytes(b) => PyBytes::new(py, b.as_slice()).into_any(),
        Value::Path(p) => PyString::new(py, &p.to_string_lossy()).into_any(),
        Value::List(items) => {
            let l = PyList::empty(py);
            for it in items {
                l.append(value_to_py(py, it)?)?;
            }
            l.into_any()
        }
        Value::Image(img) => image_to_py(py, *img)?,
        Value::Tensor(t) => tensor_to_py(py, *t)?,
        Value::Label(l) => l.id.into_pyobject(py)?.into_any(),
        Value::Video(v) => video_to_py(py, &v)?,
        other => {
            return Err(PyTypeError::new_err(format!(
                "no Python form for the value {other:?}"
            )))
        }
    })
}

fn row_to_py(py: Python<'_>, row: Row) -> PyRes<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    let names: Vec<String> = row.names().to_vec();
    let ex = row.into_example();
    for name in names {
        let v = ex.get(&name).cloned().unwrap_or(Value::Null);
        d.set_item(name, value_to_py(py, v)?)?;
    }
    Ok(d)
}

// ------------------------------------------------------------ collating ---

/// One column of a batch made in the library: a contiguous array (numbers,
/// class ids, same-shape images and tensors, stacked) or, where the values
/// do not stack, the values one by one.
enum Column {
    Array {
        data: Vec<u8>,
        typestr: &'static str,
        shape: Vec<usize>,
    },
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
        if let (Ok(ts), Some(w)) = (typestr(d), d.byte_width()) {
            let mut data = Vec::with_capacity(n * w);
            let ok = values.iter().all(|v| push_scalar(&mut data, d, v));
            if ok {
                return Column::Array {
                    data,
                    typestr: ts,
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
            if let (Ok(ts), Some(w)) = (typestr(d), d.byte_width()) {
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
                        typestr: ts,
                        shape: vec![n, len],
                    };
                }
            }
        }
        return Column::Values(values);
    }
    // Images and tensors of one shape (and dtype): one [B, ...] array.
    let item = |v: &Value| -> Option<(Vec<usize>, &'static str, usize)> {
        match v {
            Value::Image(i) => Some((i.shape(), "|u1", i.data.len())),
            Value::Tensor(t) => Some((t.shape.clone(), typestr(t.dtype).ok()?, t.data.len())),
            _ => None,
        }
    };
    let Some(first) = values.first().and_then(item) else {
        return Column::Values(values);
    };
    if !values.iter().all(|v| item(v).as_ref() == Some(&first)) {
        return Column::Values(values);
    }
    let (inner, ts, bytes) = first;
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
    Column::Array {
        data,
        typestr: ts,
        shape,
    }
}

/// Rows turned into columns (`collate_column` each), in feature order.
fn collate_rows(rows: Vec<Row>, features: &Features) -> Vec<(String, Column)> {
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

/// A frames cache's windows as columns: `video` `[B, T, H, W, 3]`, the
/// windows' places as int64 arrays (`frame_indices` `[B, T]`).
fn window_columns(b: shardset::WindowBatch) -> Vec<(String, Column)> {
    let ints = |v: Vec<i64>, shape: Vec<usize>| Column::Array {
        data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        typestr: "<i8",
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
                typestr: "|u1",
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

fn columns_to_py(py: Python<'_>, cols: Vec<(String, Column)>) -> PyRes<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    for (name, col) in cols {
        let obj = match col {
            Column::Array {
                data,
                typestr,
                shape,
            } => ndarray(py, data, typestr, shape)?,
            Column::Values(vals) => {
                let l = PyList::empty(py);
                for v in vals {
                    l.append(value_to_py(py, v)?)?;
                }
                l.into_any()
            }
        };
        d.set_item(name, obj)?;
    }
    Ok(d)
}

// ------------------------------------------------------------- values in ---

/// A Python value as the library's, for a column of `feature`.
fn value_from_py(obj: &Bound<'_, PyAny>, feature: &Feature) -> PyRes<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    // numpy scalars: their Python value (the reference's `.item()`).
    if obj.hasattr("item")?
        && obj.hasattr("dtype")?
        && obj.getattr("ndim")?.extract::<usize>()? == 0
    {
        return value_from_py(&obj.call_method0("item")?, feature);
    }
    match feature {
        Feature::Value(_) | Feature::ClassLabel(_) => scalar_from_py(obj),
        Feature::Sequence(inner) => {
            let seq = if obj.hasattr("tolist")? {
                obj.call_method0("tolist")?
            } else {
                obj.clone()
            };
            let mut out = Vec::new();
            for it in seq.try_iter()? {
                out.push(value_from_py(&it?, inner)?);
            }
            Ok(Value::List(out))
        }
        Feature::Image(_) => {
            if let Ok(b) = obj.cast::<PyBytes>() {
                return Ok(Value::Bytes(b.as_bytes().to_vec().into()));
            }
            if obj.is_instance_of::<PyString>() || obj.hasattr("__fspath__")? {
                return Ok(Value::Path(obj.extract::<PathBuf>()?));
            }
            let np = PyModule::import(obj.py(), "numpy")?;
            let arr = np.call_method1("ascontiguousarray", (obj, "uint8"))?;
            let shape: Vec<usize> = arr.getattr("shape")?.extract()?;
            let (h, w, c) = match shape.as_slice() {
                [h, w] => (*h, *w, 1),
                [h, w, c] => (*h, *w, *c),
                other => {
                    return Err(BadInputError::new_err(format!(
                        "an image array must be HxW or HxWxC, got shape {other:?}"
                    )))
                }
            };
            let data: Vec<u8> = arr
                .call_method0("tobytes")?
                .cast::<PyBytes>()?
                .as_bytes()
                .to_vec();
            let img = ImageData::new(h as u32, w as u32, c as u8, data).py()?;
            Ok(Value::Image(Box::new(img)))
        }
        Feature::Array(a) => {
            if let Ok(b) = obj.cast::<PyBytes>() {
                return Ok(Value::Bytes(b.as_bytes().to_vec().into()));
            }
            let np = PyModule::import(obj.py(), "numpy")?;
            // Little-endian C order in the feature's dtype, as the cache stores it.
            let arr = np.call_method1("ascontiguousarray", (obj, typestr(a.dtype)?))?;
            let shape: Vec<usize> = arr.getattr("shape")?.extract()?;
            let data: Vec<u8> = arr
                .call_method0("tobytes")?
                .cast::<PyBytes>()?
                .as_bytes()
                .to_vec();
            Ok(Value::Tensor(Box::new(Tensor {
                dtype: a.dtype,
                shape,
                data,
            })))
        }
        Feature::Video(_) => {
            if let Ok(b) = obj.cast::<PyBytes>() {
                return Ok(Value::Bytes(b.as_bytes().to_vec().into()));
            }
            if obj.is_instance_of::<PyString>() || obj.hasattr("__fspath__")? {
                return Ok(Value::Path(obj.extract::<PathBuf>()?));
            }
            let d = obj.cast::<PyDict>().map_err(|_| {
                BadInputError::new_err(
                    "a video value must be a path, bytes, or a dict with 'path' or 'bytes'",
                )
            })?;
            let get = |k: &str| -> PyRes<Option<Bound<'_, PyAny>>> {
                Ok(d.get_item(k)?.filter(|v| !v.is_none()))
            };
            let v = VideoRef {
                path: get("path")?.map(|p| p.extract::<PathBuf>()).transpose()?,
                bytes: get("bytes")?.map(|b| b.extract::<Vec<u8>>()).transpose()?,
                extension: get("extension")?.map(|s| s.extract()).transpose()?,
                checksum: get("checksum")?.map(|s| s.extract()).transpose()?,
                ..VideoRef::default()
            };
            Ok(Value::Video(Box::new(v)))
        }
        other => Err(BadInputError::new_err(format!(
            "values of the feature {} cannot be given from Python",
            other.class_name()
        ))),
    }
}

fn scalar_from_py(obj: &Bound<'_, PyAny>) -> PyRes<Value> {
    if let Ok(b) = obj.extract::<bool>() {
        if obj.is_instance_of::<pyo3::types::PyBool>() {
            return Ok(Value::Bool(b));
        }
    }
    if obj.is_instance_of::<pyo3::types::PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::Int(i));
        }
        return Ok(Value::UInt(obj.extract::<u64>()?));
    }
    if obj.is_instance_of::<pyo3::types::PyFloat>() {
        return Ok(Value::Float(obj.extract::<f64>()?));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::Str(s.extract::<String>()?));
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Value::Bytes(b.as_bytes().to_vec().into()));
    }
    Err(BadInputError::new_err(format!(
        "cannot store a value of type {} in a scalar column",
        obj.get_type().name()?
    )))
}

// ---------------------------------------------------------------- arrow ---

/// A record batch offered to Arrow consumers through `__arrow_c_array__`
/// (pyarrow's `pa.record_batch(obj)` imports it without a copy).
#[pyclass(module = "shardset._shardset", frozen)]
struct ArrowBatch {
    batch: RecordBatch,
}

#[pymethods]
impl ArrowBatch {
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyRes<Bound<'py, PyTuple>> {
        let _ = requested_schema;
        let array: StructArray = self.batch.clone().into();
        let data = array.into_data();
        let schema = arrow_schema::ffi::FFI_ArrowSchema::try_from(data.data_type())
            .map_err(|e| ShardsetError::new_err(e.to_string()))?;
        let array = arrow_data::ffi::FFI_ArrowArray::new(&data);
        let schema = PyCapsule::new(py, schema, Some(CString::new("arrow_schema").unwrap()))?;
        let array = PyCapsule::new(py, array, Some(CString::new("arrow_array").unwrap()))?;
        PyTuple::new(py, [schema.into_any(), array.into_any()])
    }

    fn __len__(&self) -> usize {
        self.batch.num_rows()
    }
}

/// Batches of a dataset, `batch_size` rows each, read with the GIL released.
#[pyclass(module = "shardset._shardset")]
struct BatchIter {
    ds: Dataset,
    batch_size: usize,
    pos: u64,
    identity:
        Option<std::sync::Mutex<Box<dyn Iterator<Item = shardset::Result<RecordBatch>> + Send>>>,
}

#[pymethods]
impl BatchIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyRes<ArrowBatch> {
        if let Some(it) = &self.identity {
            let next = py.detach(|| it.lock().unwrap_or_else(|p| p.into_inner()).next());
            return match next {
                Some(b) => Ok(ArrowBatch { batch: b.py()? }),
                None => Err(PyStopIteration::new_err(())),
            };
        }
        let n = self.ds.len();
        if self.pos >= n {
            return Err(PyStopIteration::new_err(()));
        }
        let end = (self.pos + self.batch_size as u64).min(n);
        let idx: Vec<i64> = (self.pos as i64..end as i64).collect();
        self.pos = end;
        let ds = self.ds.clone();
        let batch = py.detach(move || ds.take_arrow(&idx)).py()?;
        Ok(ArrowBatch { batch })
    }
}

/// A window as the reference's sample: the frames under the video column's
/// name ("video"), the window's place, then the video's own metadata.
fn window_to_py(py: Python<'_>, w: shardset::Window) -> PyRes<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("video", tensor_to_py(py, w.frames)?)?;
    d.set_item("video_idx", w.video_idx)?;
    d.set_item("filename", w.filename)?;
    d.set_item("start_frame", w.start_frame)?;
    d.set_item("frame_indices", w.frame_indices)?;
    d.set_item("sample_idx", w.sample_idx)?;
    let json = PyModule::import(py, "json")?;
    for (k, v) in w.metadata {
        d.set_item(k, json.call_method1("loads", (v.to_string(),))?)?;
    }
    Ok(d)
}

// -------------------------------------------------------------- dataset ---

/// How a cache was opened: what a pickled dataset needs to open it again.
#[derive(Clone, Debug)]
struct OpenSpec {
    path: PathBuf,
    columns: Option<Vec<String>>,
    decode_images: bool,
    window: Option<(u32, u32, u32)>,
    lance_chunk_rows: Option<u64>,
    /// The features as JSON, for a cache that does not describe its own.
    features: Option<String>,
    /// How rows are read: verify_on_read, in_memory, memory_fraction,
    /// in_memory_fallback, version.
    modes: ReadModes,
}

/// `open_cache`'s read modes: (verify_on_read, in_memory, memory_fraction,
/// in_memory_fallback, version, trusted_roots).
type ReadModes = (bool, bool, Option<f64>, bool, Option<u64>, Vec<PathBuf>);

impl OpenSpec {
    fn open(&self) -> shardset::Result<Dataset> {
        let mut o = OpenOptions::default().with_decode_images(self.decode_images);
        if let Some((t, skip, hop)) = self.window {
            o = o.with_windows(WindowSpec::new(t, skip, hop));
        }
        if let Some(c) = self.lance_chunk_rows {
            o = o.try_with_lance_chunk_rows(c)?;
        }
        if let Some(f) = &self.features {
            let j: serde_json::Value = serde_json::from_str(f)
                .map_err(|e| Error::InvalidFeature(format!("features description: {e}")))?;
            o = o.with_features(features_from_json(&j)?);
        }
        let (verify, in_memory, fraction, fallback, version, ref trusted) = self.modes;
        if !trusted.is_empty() {
            o = o.with_trusted_roots(shardset::features::trust::TrustedRoots::try_new(trusted)?);
        }
        o = o
            .with_verify_on_read(verify)
            .with_in_memory(in_memory)
            .with_in_memory_fallback(fallback);
        if let Some(f) = fraction {
            o = o.try_with_memory_fraction(f)?;
        }
        if let Some(v) = version {
            o = o.with_version(v);
        }
        let cache = shardset::open_cache_with(&self.path, &o)?;
        let ds = Dataset::new(cache);
        match &self.columns {
            Some(cols) => {
                let cols: Vec<&str> = cols.iter().map(String::as_str).collect();
                ds.select_columns(&cols)
            }
            None => Ok(ds),
        }
    }
}

/// A cache opened for reading: rows as dicts, as the reference returns them.
#[pyclass(module = "shardset._shardset", name = "Dataset", frozen)]
struct PyDataset {
    ds: Dataset,
    spec: OpenSpec,
    /// The last epoch order drawn by `epoch_rows`: (order, seed, epoch) and
    /// the view positions, kept here so Python holds no index list.
    orders: std::sync::Mutex<Option<(OrderKey, Arc<Vec<u64>>)>>,
}

/// An epoch order's name, seed and epoch.
type OrderKey = (String, u64, u64);

/// An epoch order by name, as the torch datasets take it.
fn parse_order(order: &str) -> PyRes<shardset::Order> {
    use shardset::{Order, WithinShard};
    Ok(match order {
        "sequential" => Order::Sequential,
        "random" => Order::Random,
        "shard-shuffle" => Order::ShardShuffle(WithinShard::Random),
        "shard-sequential" => Order::ShardShuffle(WithinShard::Sequential),
        other => {
            return Err(BadInputError::new_err(format!(
                "order must be 'sequential', 'random', 'shard-shuffle' or 'shard-sequential', got '{other}'"
            )))
        }
    })
}

impl PyDataset {
    fn view(&self, ds: Dataset) -> PyDataset {
        PyDataset {
            ds,
            spec: self.spec.clone(),
            orders: Default::default(),
        }
    }

    fn frames(&self) -> Option<&shardset::LanceVideoFrames> {
        self.ds
            .backend()
            .as_any()
            .downcast_ref::<shardset::LanceVideoFrames>()
    }

    /// The backend rows (windows, for a frames cache) of view positions.
    fn physical(&self, idx: &[i64]) -> PyRes<Vec<i64>> {
        idx.iter()
            .map(|&i| self.ds.physical_index(i).map(|p| p as i64))
            .collect::<shardset::Result<_>>()
            .py()
    }

    fn rows_at<'py>(&self, py: Python<'py>, idx: Vec<i64>) -> PyRes<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        if let Some(fr) = self.frames() {
            // One batched read of every window's frames, decoded in parallel.
            let phys = self.physical(&idx)?;
            let fr = fr.clone();
            for w in py.detach(move || fr.windows(&phys)).py()? {
                out.append(window_to_py(py, w)?)?;
            }
            return Ok(out);
        }
        let ds = self.ds.clone();
        for r in py.detach(move || ds.take(&idx)).py()? {
            out.append(row_to_py(py, r)?)?;
        }
        Ok(out)
    }

    fn columns_at<'py>(&self, py: Python<'py>, idx: Vec<i64>) -> PyRes<Bound<'py, PyDict>> {
        let cols = if let Some(fr) = self.frames() {
            if idx.is_empty() {
                Vec::new()
            } else {
                let phys = self.physical(&idx)?;
                let fr = fr.clone();
                window_columns(py.detach(move || fr.windows_batch(&phys)).py()?)
            }
        } else {
            let ds = self.ds.clone();
            py.detach(move || -> shardset::Result<_> {
                let rows = ds.take(&idx)?;
                Ok(collate_rows(rows, ds.features()))
            })
            .py()?
        };
        columns_to_py(py, cols)
    }

    /// View positions `[start, end)` of the epoch order `(order, seed,
    /// epoch)`, wrapping past the end; the order is kept for the next call.
    fn epoch_positions(
        &self,
        py: Python<'_>,
        order: &str,
        seed: u64,
        epoch: u64,
        start: u64,
        end: u64,
    ) -> PyRes<Vec<i64>> {
        let n = self.ds.len();
        if n == 0 || start >= end {
            return Ok(Vec::new());
        }
        let key = (order.to_string(), seed, epoch);
        let cached = {
            let g = self.orders.lock().unwrap_or_else(|p| p.into_inner());
            g.as_ref()
                .filter(|(k, _)| *k == key)
                .map(|(_, o)| o.clone())
        };
        let positions = match cached {
            Some(o) => o,
            None => {
                let ord = parse_order(order)?;
                let ds = self.ds.clone();
                let o = Arc::new(
                    py.detach(move || shardset::Sampler::new(&ds, ord, seed).epoch_order(epoch)),
                );
                *self.orders.lock().unwrap_or_else(|p| p.into_inner()) = Some((key, o.clone()));
                o
            }
        };
        Ok((start..end)
            .map(|k| positions[(k % n) as usize] as i64)
            .collect())
    }

    /// On a cache on object storage: starts fetching the shards of the
    /// epoch's next rows (eight batches of `end - start` ahead) into the
    /// disk cache while this batch is read.
    fn prefetch_ahead(
        &self,
        py: Python<'_>,
        order: &str,
        seed: u64,
        epoch: u64,
        start: u64,
        end: u64,
    ) -> PyRes<()> {
        let be = self.ds.backend();
        if !be.reads_remotely() {
            return Ok(());
        }
        let ahead = (end - start).saturating_mul(PREFETCH_BATCHES);
        let n = self.ds.len();
        let upto = end.saturating_add(ahead).min(n.max(end));
        let next = self.epoch_positions(py, order, seed, epoch, end, upto)?;
        let rows: Vec<u64> = self
            .physical(&next)?
            .into_iter()
            .map(|r| r as u64)
            .collect();
        be.prefetch_rows(&rows);
        Ok(())
    }

    fn normalize(&self, index: i64) -> PyRes<i64> {
        let n = self.ds.len() as i64;
        let i = if index < 0 { index + n } else { index };
        if i < 0 || i >= n {
            return Err(PyIndexError::new_err(format!(
                "Index {index} out of range for dataset of length {n}"
            )));
        }
        Ok(i)
    }

    fn indices_from(&self, obj: &Bound<'_, PyAny>) -> PyRes<Vec<i64>> {
        let idx: Vec<i64> = if obj.hasattr("tolist")? {
            obj.call_method0("tolist")?.extract()?
        } else {
            obj.extract()?
        };
        idx.into_iter().map(|i| self.normalize(i)).collect()
    }
}

#[pymethods]
impl PyDataset {
    fn __len__(&self) -> usize {
        self.ds.len() as usize
    }

    /// `ds[i]` (negative too) a row dict; `ds[a:b:s]` a view; `ds[[i, j]]`
    /// a list of row dicts.
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyRes<Bound<'py, PyAny>> {
        if let Ok(s) = key.cast::<PySlice>() {
            let ind = s.indices(self.ds.len() as isize)?;
            let ds = if ind.step == 1 {
                let len = (ind.stop - ind.start).max(0) as u64;
                self.ds.slice(ind.start as u64, len).py()?
            } else {
                let idx: Vec<i64> = (0..ind.slicelength)
                    .map(|k| (ind.start + k as isize * ind.step) as i64)
                    .collect();
                self.ds.select(&idx).py()?
            };
            return Ok(Bound::new(py, self.view(ds))?.into_any());
        }
        if key.is_instance_of::<pyo3::types::PyInt>() {
            let i = self.normalize(key.extract::<i64>()?)?;
            if self.frames().is_some() {
                return self.rows_at(py, vec![i])?.get_item(0);
            }
            let ds = self.ds.clone();
            let row = py.detach(move || ds.get(i)).py()?;
            return Ok(row_to_py(py, row)?.into_any());
        }
        if key.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(
                "select a column with select_columns([...]), not ds['name']",
            ));
        }
        let idx = self.indices_from(key)?;
        Ok(self.rows_at(py, idx)?.into_any())
    }

    /// PyTorch's batched fetch: the rows at `indices`, in order.
    fn __getitems__<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> PyRes<Bound<'py, PyList>> {
        let idx = self.indices_from(indices)?;
        self.rows_at(py, idx)
    }

    /// Rows `[start, end)` of the epoch order `(order, seed, epoch)` (the
    /// library's sampler: the same order in every process), wrapping past
    /// the end to the start of the order (the padding of the last batches).
    fn epoch_rows<'py>(
        &self,
        py: Python<'py>,
        order: &str,
        seed: u64,
        epoch: u64,
        start: u64,
        end: u64,
    ) -> PyRes<Bound<'py, PyList>> {
        let idx = self.epoch_positions(py, order, seed, epoch, start, end)?;
        if idx.is_empty() {
            return Ok(PyList::empty(py));
        }
        self.prefetch_ahead(py, order, seed, epoch, start, end)?;
        self.rows_at(py, idx)
    }

    /// The rows at `indices` as one batch of columns, made in the library:
    /// a dict of column name to a numpy array (numbers and class ids in the
    /// column's dtype; images and arrays of one shape stacked `[B, ...]`)
    /// or, for values that do not stack (strings, bytes, images of
    /// several sizes), a list. A frames cache's windows give `video`
    /// `[B, T, H, W, 3]` with `video_idx`, `start_frame`, `frame_indices`
    /// and `sample_idx`.
    fn take_columns<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> PyRes<Bound<'py, PyDict>> {
        let idx = self.indices_from(indices)?;
        self.columns_at(py, idx)
    }

    /// `epoch_rows` as one batch of columns (see `take_columns`).
    fn epoch_columns<'py>(
        &self,
        py: Python<'py>,
        order: &str,
        seed: u64,
        epoch: u64,
        start: u64,
        end: u64,
    ) -> PyRes<Bound<'py, PyDict>> {
        let idx = self.epoch_positions(py, order, seed, epoch, start, end)?;
        self.prefetch_ahead(py, order, seed, epoch, start, end)?;
        self.columns_at(py, idx)
    }

    /// Windows of a frames cache stacked into one `[B, T, H, W, 3]` uint8
    /// array (all windows of one size), decoded in parallel.
    fn windows<'py>(
        &self,
        py: Python<'py>,
        indices: &Bound<'py, PyAny>,
    ) -> PyRes<Bound<'py, PyAny>> {
        let Some(fr) = self.frames() else {
            return Err(BadInputError::new_err(
                "windows() needs a lance-video-frames or lance-video-segments cache",
            ));
        };
        let phys = self.physical(&self.indices_from(indices)?)?;
        let fr = fr.clone();
        let b = py.detach(move || fr.windows_batch(&phys)).py()?;
        tensor_to_py(py, b.frames)
    }

    /// Record batches of the view in order, `batch_size` rows each (the
    /// stored batches, zero-copy, for a whole cache), as `ArrowBatch`es.
    #[pyo3(signature = (batch_size=1024))]
    fn iter_batches(&self, batch_size: usize) -> PyRes<BatchIter> {
        if batch_size == 0 {
            return Err(BadInputError::new_err("batch_size must be at least 1"));
        }
        let identity = if self.ds.is_identity() && self.frames().is_none() {
            let be = self.ds.backend().clone();
            Some(std::sync::Mutex::new(OwnedBatches::boxed(
                be,
                self.spec.columns.clone(),
            )?))
        } else {
            None
        };
        Ok(BatchIter {
            ds: self.ds.clone(),
            batch_size,
            pos: 0,
            identity,
        })
    }

    /// A view with only these columns.
    fn select_columns(&self, columns: Vec<String>) -> PyRes<PyDataset> {
        let cols: Vec<&str> = columns.iter().map(String::as_str).collect();
        let ds = self.ds.select_columns(&cols).py()?;
        let mut v = self.view(ds);
        v.spec.columns = Some(columns);
        Ok(v)
    }

    /// A view of the rows at `indices`, in that order.
    fn select(&self, indices: &Bound<'_, PyAny>) -> PyRes<PyDataset> {
        let idx = self.indices_from(indices)?;
        Ok(self.view(self.ds.select(&idx).py()?))
    }

    /// The rows in an order drawn from `seed`.
    fn shuffle(&self, seed: u64) -> PyRes<PyDataset> {
        Ok(self.view(self.ds.shuffle(seed)))
    }

    /// `(train, test)` views: `test_size` a fraction in (0, 1) or a count,
    /// optionally stratified by a ClassLabel column.
    #[pyo3(signature = (test_size, seed=0, stratify_by_column=None))]
    fn train_test_split(
        &self,
        test_size: &Bound<'_, PyAny>,
        seed: u64,
        stratify_by_column: Option<String>,
    ) -> PyRes<(PyDataset, PyDataset)> {
        let size = if test_size.is_instance_of::<pyo3::types::PyInt>() {
            TestSize::Count(test_size.extract()?)
        } else {
            TestSize::Fraction(test_size.extract()?)
        };
        let (a, b) = self
            .ds
            .train_test_split(size, seed, stratify_by_column.as_deref())
            .py()?;
        Ok((self.view(a), self.view(b)))
    }

    /// Column names, in feature order.
    #[getter]
    fn column_names(&self) -> Vec<String> {
        self.ds.column_names()
    }

    /// The features as their JSON description (a JSON string).
    #[getter]
    fn features_json(&self) -> String {
        features_to_json(self.ds.features()).to_string()
    }

    /// The cache directory.
    #[getter]
    fn path(&self) -> String {
        self.spec.path.to_string_lossy().into_owned()
    }

    /// The layout named in the cache's metadata.
    #[getter]
    fn layout(&self) -> &'static str {
        self.ds.backend().layout()
    }

    /// Rows of each shard (fragment), in order.
    #[getter]
    fn shard_row_counts(&self) -> Vec<u64> {
        self.ds.backend().shard_row_counts().to_vec()
    }

    /// Pickle: the path and open options (and the view's rows), never the
    /// open maps; the unpickled dataset opens its own, in its own process.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyTuple>> {
        let module = PyModule::import(py, "shardset._shardset")?;
        let f = module.getattr("_reopen")?;
        // A view carries its physical rows (computed here, when pickled).
        let positions: Option<Vec<u8>> = if self.ds.is_identity() {
            None
        } else {
            let mut p = Vec::with_capacity(self.ds.len() as usize * 8);
            for i in 0..self.ds.len() {
                p.extend_from_slice(&self.ds.physical_index(i as i64).py()?.to_le_bytes());
            }
            Some(p)
        };
        let open: OpenArgs = (
            self.spec.path.clone(),
            self.spec.columns.clone(),
            self.spec.decode_images,
            self.spec.window,
            self.spec.lance_chunk_rows,
            self.spec.features.clone(),
            self.spec.modes.clone(),
        );
        let args = (open, positions.map(|p| PyBytes::new(py, &p)));
        PyTuple::new(py, [f.into_any(), args.into_pyobject(py)?.into_any()])
    }

    fn __repr__(&self) -> String {
        format!(
            "Dataset(path={:?}, layout={:?}, num_rows={}, columns={:?})",
            self.path(),
            self.layout(),
            self.ds.len(),
            self.ds.column_names()
        )
    }
}

/// The whole cache's stored batches, owning their backend.
struct OwnedBatches {
    backend: Arc<dyn shardset::Backend>,
    shard: usize,
    current: std::vec::IntoIter<RecordBatch>,
    columns: Option<Vec<String>>,
}

impl OwnedBatches {
    fn boxed(
        backend: Arc<dyn shardset::Backend>,
        columns: Option<Vec<String>>,
    ) -> PyRes<Box<dyn Iterator<Item = shardset::Result<RecordBatch>> + Send>> {
        Ok(Box::new(OwnedBatches {
            backend,
            shard: 0,
            current: Vec::new().into_iter(),
            columns,
        }))
    }

    fn project(&self, b: RecordBatch) -> shardset::Result<RecordBatch> {
        match &self.columns {
            None => Ok(b),
            Some(cols) => {
                let idx: Vec<usize> = cols
                    .iter()
                    .filter_map(|c| b.schema().index_of(c).ok())
                    .collect();
                b.project(&idx)
                    .map_err(|e| Error::InvalidArgument(e.to_string()))
            }
        }
    }
}

impl Iterator for OwnedBatches {
    type Item = shardset::Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(b) = self.current.next() {
                return Some(self.project(b));
            }
            if self.shard >= self.backend.num_shards() {
                return None;
            }
            // One shard at a time: its batches (zero-copy slices of the map).
            let opts = shardset::IterOptions::default().with_shards(vec![self.shard]);
            self.shard += 1;
            let batches: shardset::Result<Vec<RecordBatch>> = match self.backend.iter_batches(&opts)
            {
                Ok(it) => it.collect(),
                Err(e) => return Some(Err(e)),
            };
            match batches {
                Ok(v) => self.current = v.into_iter(),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// Opens a cache (any layout); see `shardset.open_cache`.
#[pyfunction]
#[pyo3(signature = (path, columns=None, decode_images=true, window=None, lance_chunk_rows=None, features=None, modes=(false, false, None, false, None, Vec::new())))]
#[allow(clippy::too_many_arguments)]
fn open_cache(
    py: Python<'_>,
    path: PathBuf,
    columns: Option<Vec<String>>,
    decode_images: bool,
    window: Option<(u32, u32, u32)>,
    lance_chunk_rows: Option<u64>,
    features: Option<String>,
    modes: ReadModes,
) -> PyRes<PyDataset> {
    let spec = OpenSpec {
        path,
        columns,
        decode_images,
        window,
        lance_chunk_rows,
        features,
        modes,
    };
    let s = spec.clone();
    let ds = py.detach(move || s.open()).py()?;
    Ok(PyDataset {
        ds,
        spec,
        orders: Default::default(),
    })
}

/// `open_cache`'s arguments, as a pickled dataset carries them.
type OpenArgs = (
    PathBuf,
    Option<Vec<String>>,
    bool,
    Option<(u32, u32, u32)>,
    Option<u64>,
    Option<String>,
    ReadModes,
);

/// Unpickles a dataset: opens the cache again, then the view's rows.
#[pyfunction]
fn _reopen(py: Python<'_>, args: OpenArgs, positions: Option<Vec<u8>>) -> PyRes<PyDataset> {
    let (path, columns, decode_images, window, lance_chunk_rows, features, modes) = args;
    let d = open_cache(
        py,
        path,
        columns,
        decode_images,
        window,
        lance_chunk_rows,
        features,
        modes,
    )?;
    match positions {
        None => Ok(d),
        Some(p) => {
            let idx: Vec<i64> = p
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")) as i64)
                .collect();
            Ok(d.view(d.ds.select(&idx).py()?))
        }
    }
}

// -------------------------------------------------------------- writing ---

/// Examples pulled from a Python iterable, each converted under the GIL.
struct PyExamples {
    iter: Py<PyAny>,
    features: Arc<Features>,
    count: u64,
}

impl Iterator for PyExamples {
    type Item = Result<(serde_json::Value, Example), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        Python::attach(|py| {
            let it = self.iter.bind(py);
            let item = match it.call_method0("__next__") {
                Ok(v) => v,
                Err(e) if e.is_instance_of::<PyStopIteration>(py) => return None,
                Err(e) => {
                    return Some(Err(Error::InvalidArgument(format!(
                        "the examples iterable failed after {} examples: {e}",
                        self.count
                    ))))
                }
            };
            self.count += 1;
            Some(
                example_from_py(&item, &self.features, self.count - 1).map_err(|e| {
                    Error::InvalidArgument(format!("example {}: {e}", self.count - 1))
                }),
            )
        })
    }
}

/// `dict` or `(key, dict)` as a keyed example (the key is the position when
/// not given), each column converted by its feature.
fn example_from_py(
    item: &Bound<'_, PyAny>,
    features: &Features,
    position: u64,
) -> PyRes<(serde_json::Value, Example)> {
    let (key, dict) = if let Ok(t) = item.cast::<PyTuple>() {
        if t.len() != 2 {
            return Err(BadInputError::new_err(
                "an example is a dict or a (key, dict) pair",
            ));
        }
        let k = t.get_item(0)?;
        let key = if let Ok(i) = k.extract::<i64>() {
            serde_json::Value::from(i)
        } else {
            serde_json::Value::from(k.str()?.extract::<String>()?)
        };
        (key, t.get_item(1)?)
    } else {
        (serde_json::Value::from(position), item.clone())
    };
    let d = dict
        .cast::<PyDict>()
        .map_err(|_| BadInputError::new_err("an example is a dict or a (key, dict) pair"))?;
    let mut ex = Example::with_capacity(features.len());
    for (name, feature) in features.iter() {
        let v = match d.get_item(name)? {
            Some(v) => value_from_py(&v, feature)
                .map_err(|e| BadInputError::new_err(format!("column '{name}': {e}")))?,
            None => Value::Null,
        };
        ex.set(name.to_string(), v);
    }
    Ok((key, ex))
}

// ------------------------------------------------------------- editing ---

/// Edits staged over a cache's version (see `shardset.edit`).
#[pyclass(module = "shardset._shardset", name = "Staging")]
struct PyStaging {
    /// None once committed.
    st: Option<shardset::layouts::edit::Staging>,
    features: Arc<Features>,
}

impl PyStaging {
    fn staging(&mut self) -> PyRes<&mut shardset::layouts::edit::Staging> {
        self.st
            .as_mut()
            .ok_or_else(|| BadInputError::new_err("these edits were committed already"))
    }

    fn feature(&self, column: &str) -> PyRes<Feature> {
        self.features.get(column).cloned().ok_or_else(|| {
            BadInputError::new_err(format!(
                "no column '{column}' (columns: {:?})",
                self.features.names()
            ))
        })
    }
}

fn plan_to_py<'py>(
    py: Python<'py>,
    p: &shardset::layouts::edit::EditPlan,
) -> PyRes<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("base_version", p.base_version)?;
    d.set_item("version", p.version)?;
    d.set_item("rows_before", p.rows_before)?;
    d.set_item("rows_after", p.rows_after)?;
    d.set_item("rewritten", p.rewritten.clone())?;
    d.set_item("reused", p.reused.clone())?;
    d.set_item("removed", p.removed.clone())?;
    d.set_item("appended_rows", p.appended_rows)?;
    d.set_item("bytes_estimate", p.bytes_estimate)?;
    Ok(d)
}

#[pymethods]
impl PyStaging {
    /// Rows in the staged view.
    fn __len__(&mut self) -> PyRes<usize> {
        Ok(self.staging()?.len() as usize)
    }

    /// Row `index` of the staged view, as a dict.
    fn get<'py>(&mut self, py: Python<'py>, index: i64) -> PyRes<Bound<'py, PyDict>> {
        let row = self.staging()?.get(index).py()?;
        row_to_py(py, row)
    }

    /// Replaces row `index` (a dict of every column).
    fn set_row(&mut self, index: i64, row: &Bound<'_, PyAny>) -> PyRes<()> {
        let (_, ex) = example_from_py(row, &self.features, index.max(0) as u64)?;
        self.staging()?.set_row(index, ex).py()
    }

    /// Replaces one cell.
    fn set_cell(&mut self, index: i64, column: &str, value: &Bound<'_, PyAny>) -> PyRes<()> {
        let f = self.feature(column)?;
        let v = value_from_py(value, &f)
            .map_err(|e| BadInputError::new_err(format!("column '{column}': {e}")))?;
        self.staging()?.set_cell(index, column, v).py()
    }

    /// Deletes row `index` (later rows move up).
    fn delete(&mut self, index: i64) -> PyRes<()> {
        self.staging()?.delete(index).py()
    }

    /// Appends a row (a dict) at the end.
    fn append(&mut self, row: &Bound<'_, PyAny>) -> PyRes<()> {
        let n = self.staging()?.len();
        let (_, ex) = example_from_py(row, &self.features, n)?;
        self.staging()?.append(ex).py()
    }

    /// What a commit would write, as a dict.
    fn plan<'py>(&mut self, py: Python<'py>) -> PyRes<Bound<'py, PyDict>> {
        let p = self.staging()?.plan().py()?;
        plan_to_py(py, &p)
    }

    /// Publishes the edits as a new version; returns what was done.
    #[pyo3(signature = (message=None))]
    fn commit<'py>(
        &mut self,
        py: Python<'py>,
        message: Option<String>,
    ) -> PyRes<Bound<'py, PyDict>> {
        let mut st = self
            .st
            .take()
            .ok_or_else(|| BadInputError::new_err("these edits were committed already"))?;
        if let Some(m) = message {
            st = st.with_message(m);
        }
        let rep = py.detach(move || st.commit()).py()?;
        let d = PyDict::new(py);
        d.set_item("version", rep.version)?;
        d.set_item("plan", plan_to_py(py, &rep.plan)?)?;
        d.set_item("rows", rep.metadata.num_rows())?;
        d.set_item("bytes_written", rep.change.bytes_written)?;
        d.set_item("seconds", rep.seconds)?;
        Ok(d)
    }
}

/// Stages edits over the current version of the cache at `path`.
#[pyfunction]
fn edit(py: Python<'_>, path: PathBuf) -> PyRes<PyStaging> {
    let st = py
        .detach(move || shardset::open_cache(&path).and_then(|c| c.edit()))
        .py()?;
    Ok(PyStaging {
        features: st.features().clone(),
        st: Some(st),
    })
}

/// Writes a cache from an iterable of examples; see `shardset.write_cache`.
#[pyfunction]
#[pyo3(signature = (examples, features_json, path, format="arrow", shard_size=None, compression=None, threads=None, png_level=None, max_rows_per_file=None, window_quality=None, batch_size=None, build_id=None, compression_level=None, record_checksums=false, dedup=None, segments=None))]
#[allow(clippy::too_many_arguments)]
fn write_cache(
    py: Python<'_>,
    examples: &Bound<'_, PyAny>,
    features_json: &str,
    path: PathBuf,
    format: &str,
    shard_size: Option<u64>,
    compression: Option<String>,
    threads: Option<usize>,
    png_level: Option<u8>,
    max_rows_per_file: Option<usize>,
    window_quality: Option<f32>,
    batch_size: Option<usize>,
    build_id: Option<String>,
    compression_level: Option<i32>,
    record_checksums: bool,
    dedup: Option<u64>,
    segments: Option<String>,
) -> PyRes<u64> {
    let j: serde_json::Value = serde_json::from_str(features_json)
        .map_err(|e| BadInputError::new_err(format!("features description: {e}")))?;
    let features = Arc::new(features_from_json(&j).py()?);
    let iter = examples.try_iter()?.into_any().unbind();
    let examples = PyExamples {
        iter,
        features: features.clone(),
        count: 0,
    };
    let png = match png_level {
        Some(l) => shardset::PngCompression::level(l).py()?,
        None => shardset::PngCompression::Fast,
    };
    let codec = compression
        .as_deref()
        .map(|c| match c {
            "zstd" => Ok(shardset::Compression::Zstd),
            "lz4" => Ok(shardset::Compression::Lz4),
            "none" => Ok(shardset::Compression::None),
            other => Err(BadInputError::new_err(format!(
                "compression must be 'zstd', 'lz4' or 'none', got '{other}'"
            ))),
        })
        .transpose()?;
    if compression_level.is_some() && codec.is_none() {
        return Err(BadInputError::new_err(
            "compression_level needs compression='zstd'",
        ));
    }
    // What both row writers take: encode threads and rows per record batch.
    macro_rules! row_options {
        ($o:expr) => {{
            let mut o = $o.with_png_compression(png);
            if let Some(t) = threads {
                o = o.with_encode_threads(t);
            }
            if let Some(b) = batch_size {
                o = o.try_with_batch_size(b).py()?;
            }
            o
        }};
    }
    let rows = match format {
        "arrow" => {
            let mut o = row_options!(shardset::ArrowWriteOptions::default()
                .try_with_shard_size_bytes(shard_size)
                .py()?);
            if let Some(c) = codec {
                o = o.try_with_compression_level(c, compression_level).py()?;
            }
            o = o
                .with_record_checksums(record_checksums)
                .try_with_dedup(dedup)
                .py()?;
            if let Some(id) = build_id {
                o = o.with_build_id(id);
            }
            let rows = examples.map(|r| r.map(|(_, e)| e));
            py.detach(move || shardset::try_write_arrow_cache(rows, &features, &path, &o))
                .py()?
                .metadata
                .num_rows
        }
        "lance" => {
            let mut o = row_options!(shardset::LanceWriteOptions::default());
            if let Some(c) = codec {
                o = o.try_with_compression(c, compression_level).py()?;
            }
            if record_checksums || dedup.is_some() {
                return Err(BadInputError::new_err(
                    "record_checksums and dedup apply to format 'arrow' (Lance caches record a checksum per data file)",
                ));
            }
            if let Some(n) = max_rows_per_file {
                o = o.try_with_max_rows_per_file(n).py()?;
            }
            let rows = examples.map(|r| r.map(|(_, e)| e));
            py.detach(move || shardset::try_write_lance_cache(rows, &features, &path, &o))
                .py()?
                .metadata
                .num_rows
        }
        "video-frames" => {
            let mut o = shardset::VideoFramesOptions::default();
            if let Some(j) = segments {
                o = o.with_segments(segment_settings(&j)?);
            }
            if let Some(q) = window_quality {
                o = o.with_webp(shardset::WebpSettings::default().try_with_quality(q).py()?);
            }
            if let Some(t) = threads {
                o = o.with_threads(t);
            }
            if let Some(n) = max_rows_per_file {
                o = o.try_with_max_rows_per_file(n).py()?;
            }
            py.detach(move || {
                shardset::try_write_video_frames_cache(examples, &features, &path, &o)
            })
            .py()?
            .metadata
            .num_rows
        }
        other => {
            return Err(BadInputError::new_err(format!(
                "format must be 'arrow', 'lance' or 'video-frames', got '{other}'"
            )))
        }
    };
    Ok(rows)
}

/// Segment settings from `{"codec", "crf", "preset", "tune",
/// "encoder_params", "frames_per_segment"}`.
fn segment_settings(j: &str) -> PyRes<shardset::SegmentSettings> {
    let bad = |m: String| BadInputError::new_err(format!("segments: {m}"));
    let j: serde_json::Value = serde_json::from_str(j).map_err(|e| bad(e.to_string()))?;
    let obj = j.as_object().ok_or_else(|| {
        bad("a dict of codec, crf, preset, tune, encoder_params, frames_per_segment".into())
    })?;
    for k in obj.keys() {
        if ![
            "codec",
            "crf",
            "preset",
            "tune",
            "encoder_params",
            "frames_per_segment",
        ]
        .contains(&k.as_str())
        {
            return Err(bad(format!("unknown key '{k}'")));
        }
    }
    let codec: shardset::SegmentCodec = match obj.get("codec").and_then(|c| c.as_str()) {
        Some(c) => c.parse().py()?,
        None => shardset::SegmentCodec::H264,
    };
    let mut s = shardset::SegmentSettings::new(codec);
    if let Some(c) = obj.get("crf") {
        let c = c
            .as_u64()
            .ok_or_else(|| bad("crf is a non-negative integer".into()))?;
        s = s.try_with_crf(u32::try_from(c).unwrap_or(u32::MAX)).py()?;
    }
    if let Some(p) = obj.get("preset") {
        s = s.with_preset(p.as_str().map_or_else(|| p.to_string(), str::to_string));
    }
    if let Some(t) = obj.get("tune") {
        s = s
            .try_with_tune(t.as_str().map_or_else(|| t.to_string(), str::to_string))
            .py()?;
    }
    if let Some(p) = obj.get("encoder_params") {
        let p = p.as_str().ok_or_else(|| {
            bad("encoder_params is a string of key=value pairs joined by ':'".into())
        })?;
        s = s.try_with_encoder_params(p).py()?;
    }
    if let Some(n) = obj.get("frames_per_segment") {
        let n = n
            .as_u64()
            .ok_or_else(|| bad("frames_per_segment is a positive integer".into()))?;
        s = s
            .try_with_frames_per_segment(u32::try_from(n).unwrap_or(u32::MAX))
            .py()?;
    }
    Ok(s)
}

/// The fingerprint of a features description (the reference's schema fingerprint).
#[pyfunction]
fn features_fingerprint(features_json: &str) -> PyRes<String> {
    let j: serde_json::Value = serde_json::from_str(features_json)
        .map_err(|e| PyValueError::new_err(format!("features description: {e}")))?;
    Ok(features_from_json(&j).py()?.fingerprint())
}

/// Uploads a part of a distributed build (a local arrow-shards cache written
/// with the build's id) under the build prefix of `uri`; returns its record
/// (JSON) for `_commit_parts`.
#[pyfunction]
fn _publish_part(
    py: Python<'_>,
    local_dir: PathBuf,
    uri: PathBuf,
    build: String,
    unit: usize,
) -> PyRes<String> {
    let rec = py
        .detach(move || shardset::cache::remote::publish_part(&local_dir, &uri, &build, unit))
        .py()?;
    Ok(rec.to_string())
}

/// Commits a distributed build from its parts' records in work-unit order;
/// returns (build, shards, replaced).
#[pyfunction]
fn _commit_parts(
    py: Python<'_>,
    uri: PathBuf,
    build: String,
    parts: Vec<String>,
) -> PyRes<(String, usize, bool)> {
    let parts: Vec<serde_json::Value> = parts
        .iter()
        .map(|p| serde_json::from_str(p))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| PyValueError::new_err(format!("a part record: {e}")))?;
    let r = py
        .detach(move || shardset::cache::remote::commit_parts(&uri, &build, &parts))
        .py()?;
    Ok((r.build, r.files, r.replaced))
}

/// Removes the uncommitted build prefixes of the cache at `uri` older than
/// `min_age_s`; returns the prefixes removed.
#[pyfunction]
#[pyo3(signature = (uri, min_age_s=3600.0, dry_run=false))]
fn _gc_object_store(
    py: Python<'_>,
    uri: PathBuf,
    min_age_s: f64,
    dry_run: bool,
) -> PyRes<Vec<String>> {
    let r = py
        .detach(move || {
            shardset::cache::remote::collect_object_garbage(
                &uri,
                std::time::Duration::from_secs_f64(min_age_s.max(0.0)),
                dry_run,
            )
        })
        .py()?;
    Ok(r.removed
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect())
}

#[pymodule]
fn _shardset(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("ShardsetError", py.get_type::<ShardsetError>())?;
    m.add("CacheNotFoundError", py.get_type::<CacheNotFoundError>())?;
    m.add("CorruptCacheError", py.get_type::<CorruptCacheError>())?;
    m.add("SchemaMismatchError", py.get_type::<SchemaMismatchError>())?;
    m.add("BadInputError", py.get_type::<BadInputError>())?;
    m.add_class::<PyDataset>()?;
    m.add_class::<ArrowBatch>()?;
    m.add_class::<BatchIter>()?;
    m.add_class::<HostBuffer>()?;
    m.add_class::<PyStaging>()?;
    m.add_function(wrap_pyfunction!(edit, m)?)?;
    m.add_function(wrap_pyfunction!(open_cache, m)?)?;
    m.add_function(wrap_pyfunction!(_reopen, m)?)?;
    m.add_function(wrap_pyfunction!(write_cache, m)?)?;
    m.add_function(wrap_pyfunction!(features_fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(_publish_part, m)?)?;
    m.add_function(wrap_pyfunction!(_commit_parts, m)?)?;
    m.add_function(wrap_pyfunction!(_gc_object_store, m)?)?;
    Ok(())
}
