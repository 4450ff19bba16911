//! The dataset a Python program reads: rows as dicts (as the reference
//! returns them), views, epoch orders drawn by the library's sampler,
//! batches of columns, windows of a frames cache, and pickling (the open
//! options and the view's rows, never the open maps).

use std::sync::Arc;

use pyo3::exceptions::{PyIndexError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PySlice, PyString, PyTuple};

use shardset::dataset::collate::{collate_rows, window_columns};
use shardset::features::describe::features_to_json;
use shardset::{Dataset, FilterSource, TestSize};

use crate::arrow::{BatchIter, OwnedBatches};
use crate::convert::{columns_to_py, row_to_py, tensor_to_py, window_to_py};
use crate::error::{BadInputError, OrPy, PyRes};
use crate::open::OpenSpec;

/// Batches of an epoch looked ahead for prefetching, on object storage.
const PREFETCH_BATCHES: u64 = 8;

/// A cache opened for reading: rows as dicts, as the reference returns them.
#[pyclass(module = "shardset._shardset", name = "Dataset", frozen)]
pub(crate) struct PyDataset {
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
    order.parse().py()
}

impl PyDataset {
    /// The library's dataset (this view of the cache).
    pub(crate) fn dataset(&self) -> &Dataset {
        &self.ds
    }

    /// A dataset opened by `spec`.
    pub(crate) fn opened(ds: Dataset, spec: OpenSpec) -> PyDataset {
        PyDataset {
            ds,
            spec,
            orders: Default::default(),
        }
    }

    /// Another view of the same opened cache.
    pub(crate) fn view(&self, ds: Dataset) -> PyDataset {
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

    /// The rows for which the SQL predicate `expr` over scalar columns is
    /// true (the library's `Dataset::filter_expr_report`), and how they
    /// were found, as a dict.
    fn filter<'py>(&self, py: Python<'py>, expr: String) -> PyRes<(PyDataset, Bound<'py, PyDict>)> {
        let ds = self.ds.clone();
        let (view, rep) = py.detach(move || ds.filter_expr_report(&expr)).py()?;
        let d = PyDict::new(py);
        d.set_item("filter", rep.filter)?;
        d.set_item("columns", rep.columns)?;
        d.set_item("rows_in", rep.rows_in)?;
        d.set_item("rows_kept", rep.rows_kept)?;
        d.set_item("rows_scanned", rep.rows_scanned)?;
        d.set_item(
            "source",
            match rep.source {
                FilterSource::Kept => "kept",
                FilterSource::LanceScan => "lance-scan",
                FilterSource::Evaluated => "evaluated",
            },
        )?;
        d.set_item(
            "kept_at",
            rep.kept_at.map(|p| p.to_string_lossy().into_owned()),
        )?;
        d.set_item("not_kept", rep.not_kept)?;
        Ok((self.view(view), d))
    }

    /// Writes the view's rows (its columns as stored) as one Parquet file;
    /// returns the rows written.
    fn to_parquet(&self, py: Python<'_>, path: std::path::PathBuf) -> PyRes<u64> {
        let ds = self.ds.clone();
        py.detach(move || ds.write_parquet(&path)).py()
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
        let options = serde_json::to_string(&self.spec.options)
            .map_err(|e| BadInputError::new_err(format!("open options: {e}")))?;
        let open = (
            self.spec.path.clone(),
            self.spec.columns.clone(),
            options,
            self.spec.source.key(),
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
