//! A pipeline's batch handed to torch: each column becomes a tensor over the
//! library's buffer through a DLPack capsule (built by `dlpark`, taken by
//! torch's `_from_dlpack`), and the buffer goes back to the
//! pipeline's pool when torch frees the tensor.
//!
//! Why DLPack and not numpy's array interface (how batches left before): a
//! column then cost a Python object, the dict its `__array_interface__`
//! built, a numpy array and `torch.from_numpy`, about 1.4 µs, plus a Python
//! loop over the batch. A capsule and `from_dlpack` are about 0.6 µs, and
//! bfloat16 arrives as torch's bfloat16 (numpy has none). At millions of
//! scalar rows a second the hand-over runs on the consumer's thread, the one
//! the training loop also needs.

use std::ffi::{c_void, CStr};
use std::sync::Arc;

use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDevice, DLManagedTensor};
use dlpark::legacy;
use dlpark::metadata::Dynamic;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString};

use shardset::pipeline::{Batch, BufferPool, Element};

use crate::error::{BadInputError, PyRes};

/// The capsule name DLPack consumers look for; torch renames a capsule it
/// took to `used_dltensor`.
const DLTENSOR: &CStr = c"dltensor";

/// What a tensor keeps alive: its bytes, given back to the pool at the end.
struct Owner {
    data: Vec<u8>,
    pool: Arc<BufferPool>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.data));
    }
}

/// DLPack's type of an element.
fn dl_type(e: Element) -> DLDataType {
    let bits = (e.size() * 8) as u8;
    let code = match e {
        Element::Bool => DLDataTypeCode::BOOL,
        Element::Int8 | Element::Int16 | Element::Int32 | Element::Int64 => DLDataTypeCode::INT,
        Element::UInt8 | Element::UInt16 | Element::UInt32 | Element::UInt64 => {
            DLDataTypeCode::UINT
        }
        Element::Float16 | Element::Float32 | Element::Float64 => DLDataTypeCode::FLOAT,
        Element::BFloat16 => DLDataTypeCode::BFLOAT,
    };
    DLDataType::scalar(code, bits)
}

/// Frees a capsule torch never took (an error between its making and
/// `from_dlpack`); a taken one is renamed and owns nothing.
unsafe extern "C" fn drop_capsule(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the capsule being freed; the pointer of a
    // capsule still named "dltensor" is the managed tensor `capsule` made.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, DLTENSOR.as_ptr()) == 1 {
            let p = ffi::PyCapsule_GetPointer(capsule, DLTENSOR.as_ptr()).cast::<DLManagedTensor>();
            drop(legacy::Dlpack::from_raw(p));
        }
    }
}

/// A "dltensor" capsule owning `data` (C order, `shape`).
fn capsule<'py>(
    py: Python<'py>,
    data: Vec<u8>,
    element: Element,
    shape: &[usize],
    pool: Arc<BufferPool>,
) -> PyRes<Bound<'py, PyAny>> {
    let mut owner = Box::new(Owner { data, pool });
    let ptr = owner.data.as_mut_ptr().cast::<c_void>();
    let mut init = Dynamic::compact(shape)
        .initialize_as::<DLManagedTensor>(owner)
        .map_err(|e| BadInputError::new_err(format!("a batch column's shape {shape:?}: {e}")))?;
    init.set_data(ptr)
        .set_dtype(dl_type(element))
        .set_device(DLDevice::CPU);
    // SAFETY: data points into the owner's Vec, which the managed tensor
    // owns and keeps until its deleter runs; shape and strides were copied
    // into its allocation; the element type is the column's.
    let managed: legacy::Dlpack = unsafe { init.finish() };
    let raw = managed.into_raw();
    // SAFETY: `raw` is a live managed tensor; the capsule owns it until a
    // consumer renames the capsule, and `drop_capsule` frees it otherwise.
    let obj = unsafe { ffi::PyCapsule_New(raw.cast(), DLTENSOR.as_ptr(), Some(drop_capsule)) };
    if obj.is_null() {
        // SAFETY: the capsule was not made, so `raw` is still ours.
        drop(unsafe { legacy::Dlpack::from_raw(raw) });
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference PyCapsule_New returned.
    Ok(unsafe { Bound::from_owned_ptr(py, obj) })
}

/// A batch as a dict of torch tensors over its buffers (no copy), in the
/// pipeline's column order.
pub(crate) fn batch_to_torch<'py>(
    py: Python<'py>,
    b: Batch,
    pool: &Arc<BufferPool>,
) -> PyRes<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, c) in b.columns {
        let t = tensor(py, c.data, c.element, &c.shape, pool)?;
        d.set_item(PyString::intern(py, &name), t)?;
    }
    Ok(d)
}

/// A torch tensor over `data` (C order, `shape`; no copy), which goes back
/// to `pool` when torch frees the tensor.
pub(crate) fn tensor<'py>(
    py: Python<'py>,
    data: Vec<u8>,
    element: Element,
    shape: &[usize],
    pool: &Arc<BufferPool>,
) -> PyRes<Bound<'py, PyAny>> {
    // Looked up once: a batch makes a tensor per column.
    static FROM_DLPACK: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let from_dlpack = FROM_DLPACK.get_or_try_init(py, || from_dlpack(py))?;
    let t = from_dlpack.call1(py, (capsule(py, data, element, shape, pool.clone())?,))?;
    Ok(t.into_bound(py))
}

/// torch's converter of a capsule. `torch.utils.dlpack.from_dlpack` is a
/// Python function that, given a capsule, asks it for `__dlpack__` (an
/// AttributeError raised and caught) before calling `torch._C._from_dlpack`;
/// calling the latter straight is 0.33 against 0.48 µs a column. The public
/// function is the fallback for a torch without it.
fn from_dlpack(py: Python<'_>) -> PyResult<Py<PyAny>> {
    let c = py.import("torch")?.getattr("_C")?;
    match c.getattr("_from_dlpack") {
        Ok(f) => Ok(f.unbind()),
        Err(_) => Ok(py
            .import("torch.utils.dlpack")?
            .getattr("from_dlpack")?
            .unbind()),
    }
}
