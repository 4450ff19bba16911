//! Values crossing between Python and the library. Out: decoded values as
//! Python scalars, strings, bytes, lists and dicts, images, arrays and
//! batches of columns as numpy arrays that own the library's buffers (no
//! copy). In: values and examples converted by their column's feature.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use shardset::dataset::collate::Column;
use shardset::pipeline::BufferPool;
use shardset::{Dtype, Example, Feature, Features, ImageData, Row, Tensor, Value, VideoRef};

use crate::error::{BadInputError, OrPy, PyRes};

/// Bytes handed to numpy without a copy: `numpy.asarray` of this object
/// reads its `__array_interface__` and keeps the object as the array's
/// base, so the buffer lives as long as the array (writable, as torch's
/// `from_numpy` wants). A pipeline's buffer goes back to its pool when the
/// array (and the tensor over it) is freed.
#[pyclass(module = "shardset._shardset", frozen)]
pub(crate) struct HostBuffer {
    ptr: *mut u8,
    len: usize,
    cap: usize,
    shape: Vec<usize>,
    typestr: &'static str,
    pool: Option<Arc<BufferPool>>,
}

// SAFETY: the buffer is owned by the object alone (a Vec taken apart and
// put back together in Drop); Rust never reads it after handing it out,
// numpy reads and writes it under the GIL like any array memory.
unsafe impl Send for HostBuffer {}
unsafe impl Sync for HostBuffer {}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // SAFETY: ptr/len/cap came from a Vec<u8> taken apart in `ndarray_from`.
        let v = unsafe { Vec::from_raw_parts(self.ptr, self.len, self.cap) };
        if let Some(pool) = &self.pool {
            pool.give(v);
        }
    }
}

#[pymethods]
impl HostBuffer {
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item(intern!(py, "version"), 3)?;
        d.set_item(intern!(py, "shape"), PyTuple::new(py, &self.shape)?)?;
        d.set_item(intern!(py, "typestr"), self.typestr)?;
        d.set_item(intern!(py, "data"), (self.ptr as usize, false))?;
        Ok(d)
    }
}

/// An array of `shape` over little-endian bytes of numpy type `typestr`,
/// owning them (no copy).
pub(crate) fn ndarray<'py>(
    py: Python<'py>,
    data: Vec<u8>,
    typestr: &'static str,
    shape: Vec<usize>,
) -> PyRes<Bound<'py, PyAny>> {
    ndarray_from(py, data, typestr, shape, None)
}

/// As [`ndarray`], the buffer given back to `pool` once the array is freed.
pub(crate) fn ndarray_from<'py>(
    py: Python<'py>,
    data: Vec<u8>,
    typestr: &'static str,
    shape: Vec<usize>,
    pool: Option<Arc<BufferPool>>,
) -> PyRes<Bound<'py, PyAny>> {
    let mut data = std::mem::ManuallyDrop::new(data);
    let (ptr, len, cap) = (data.as_mut_ptr(), data.len(), data.capacity());
    let buf = Bound::new(
        py,
        HostBuffer {
            ptr,
            len,
            cap,
            shape,
            typestr,
            pool,
        },
    )?;
    // Looked up once: a batch makes an array per column.
    static ASARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    ASARRAY.import(py, "numpy", "asarray")?.call1((buf,))
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

pub(crate) fn tensor_to_py(py: Python<'_>, t: Tensor) -> PyRes<Bound<'_, PyAny>> {
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

pub(crate) fn row_to_py(py: Python<'_>, row: Row) -> PyRes<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    let names: Vec<String> = row.names().to_vec();
    let ex = row.into_example();
    for name in names {
        let v = ex.get(&name).cloned().unwrap_or(Value::Null);
        d.set_item(name, value_to_py(py, v)?)?;
    }
    Ok(d)
}

/// A batch of columns collated by the library as a dict: stacked columns
/// as numpy arrays (owning the buffers), the others as lists of values.
pub(crate) fn columns_to_py(
    py: Python<'_>,
    cols: Vec<(String, Column)>,
) -> PyRes<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    for (name, col) in cols {
        let obj = match col {
            Column::Array { data, dtype, shape } => ndarray(py, data, typestr(dtype)?, shape)?,
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

/// A window as the reference's sample: the frames under the video column's
/// name ("video"), the window's place, then the video's own metadata.
pub(crate) fn window_to_py(py: Python<'_>, w: shardset::Window) -> PyRes<Bound<'_, PyDict>> {
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

// ------------------------------------------------------------- values in ---

/// A Python value as the library's, for a column of `feature`.
pub(crate) fn value_from_py(obj: &Bound<'_, PyAny>, feature: &Feature) -> PyRes<Value> {
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

/// `dict` or `(key, dict)` as a keyed example (the key is the position when
/// not given), each column converted by its feature.
pub(crate) fn example_from_py(
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
