//! Record batches out to Arrow consumers: one batch through the Arrow C
//! Data interface (PyCapsules, no copy), and a dataset's batches one after
//! another, read with the GIL released.

use std::ffi::CString;
use std::sync::Arc;

use arrow_array::{Array, RecordBatch, StructArray};
use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};

use shardset::{Dataset, Error};

use crate::error::{OrPy, PyRes, ShardsetError};

/// A record batch offered to Arrow consumers through `__arrow_c_array__`
/// (pyarrow's `pa.record_batch(obj)` imports it without a copy).
#[pyclass(module = "shardset._shardset", frozen)]
pub(crate) struct ArrowBatch {
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
pub(crate) struct BatchIter {
    pub(crate) ds: Dataset,
    pub(crate) batch_size: usize,
    pub(crate) pos: u64,
    pub(crate) identity:
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

/// The whole cache's stored batches, owning their backend.
pub(crate) struct OwnedBatches {
    backend: Arc<dyn shardset::Backend>,
    shard: usize,
    current: std::vec::IntoIter<RecordBatch>,
    columns: Option<Vec<String>>,
}

impl OwnedBatches {
    pub(crate) fn boxed(
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
