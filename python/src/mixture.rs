//! Mixtures from Python: the library's `Mixture` over opened datasets, one
//! consumer's batches as columns (numpy arrays and lists, as `take_batch`
//! makes them), the state as the library's JSON. Draws, resume and column
//! checks are the library's; `shardset.mixture` keeps the Python glue.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use shardset::dataset::collate::collate_rows;
use shardset::features::decode::RowDecoder;
use shardset::{
    DrawUnit, Features, Mixture, MixtureBatches, MixtureOptions, MixtureSource, MixtureState,
    Order, Partition, Remainder, SourceEnd,
};

use crate::convert::columns_to_py;
use crate::dataset::PyDataset;
use crate::error::{BadInputError, OrPy, PyRes};

/// One source as Python hands it over: name, dataset, weight, end, and an
/// optional column mapping (output name, source column).
type SourceArgs<'py> = (
    String,
    PyRef<'py, PyDataset>,
    f64,
    String,
    Option<Vec<(String, String)>>,
);

/// Several datasets drawn by weight.
#[pyclass(module = "shardset._shardset", name = "Mixture", frozen)]
pub(crate) struct PyMixture(Mutex<Mixture>);

impl PyMixture {
    /// The library's mixture, as it stands.
    pub(crate) fn mixture(&self) -> Mixture {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Mixture> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl PyMixture {
    #[new]
    #[pyo3(signature = (sources, batch_size=256, seed=0, draw="sample", order="random"))]
    fn new(
        sources: Vec<SourceArgs<'_>>,
        batch_size: u64,
        seed: u64,
        draw: &str,
        order: &str,
    ) -> PyRes<Self> {
        let draw: DrawUnit = draw.parse().py()?;
        let order: Order = order.parse().py()?;
        let opts = MixtureOptions::default()
            .try_with_batch_size(batch_size)
            .py()?
            .with_seed(seed)
            .with_draw(draw)
            .with_order(order);
        let mut src = Vec::with_capacity(sources.len());
        for (name, ds, weight, end, columns) in sources {
            let end: SourceEnd = end.parse().py()?;
            let mut s = MixtureSource::new(name, ds.dataset().clone(), weight).with_end(end);
            if let Some(c) = columns {
                s = s.with_columns(c);
            }
            src.push(s);
        }
        Ok(PyMixture(Mutex::new(Mixture::new(src, opts).py()?)))
    }

    /// The mixture's column names.
    #[getter]
    fn column_names(&self) -> Vec<String> {
        self.lock().features().names()
    }

    /// The global step after the batches yielded.
    #[getter]
    fn step(&self) -> u64 {
        self.lock().step()
    }

    /// Uses `weights` from global step `step` on.
    fn set_weights(&self, step: u64, weights: Vec<f64>) -> PyRes<()> {
        self.lock().set_weights(step, &weights).py()
    }

    /// Records the rank-local batches yielded since the state's base.
    fn set_done(&self, done: u64, world_size: u32) {
        self.lock().set_done(done, world_size)
    }

    /// The state, as JSON.
    fn state_json(&self) -> PyRes<String> {
        serde_json::to_string(self.lock().state())
            .map_err(|e| BadInputError::new_err(format!("mixture state: {e}")))
    }

    /// Continues from a state (JSON) in a world of `world_size` ranks.
    fn load_state_json(&self, state: &str, world_size: u32) -> PyRes<()> {
        let s: MixtureState = serde_json::from_str(state)
            .map_err(|e| BadInputError::new_err(format!("not a mixture state: {e}")))?;
        self.lock().load_state(s, world_size).py()
    }

    /// Each source's rows consumed and epochs completed, as dicts.
    fn progress<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for p in self.lock().progress() {
            let d = PyDict::new(py);
            d.set_item("name", p.name)?;
            d.set_item("rows_consumed", p.rows_consumed)?;
            d.set_item("epochs_completed", p.epochs_completed)?;
            d.set_item("exhausted", p.exhausted)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// One consumer's batches from the mixture's place on.
    fn batches(
        &self,
        rank: u32,
        world_size: u32,
        worker: u32,
        num_workers: u32,
    ) -> PyRes<PyMixtureBatches> {
        let part =
            Partition::new(rank, world_size, worker, num_workers, Remainder::Partial).py()?;
        let m = self.lock();
        Ok(PyMixtureBatches {
            it: Mutex::new(m.batches(&part)),
            decoder: m.decoder(),
            features: m.features().as_ref().clone(),
        })
    }
}

/// A batch as Python gets it: (rank-local index, global step, columns, the
/// source of each row).
type NextBatch<'py> = (u64, u64, Bound<'py, PyDict>, Vec<u32>);

/// Batches of a mixture: `(rank-local index, global step, columns, sources)`.
#[pyclass(module = "shardset._shardset", name = "MixtureBatches", frozen)]
pub(crate) struct PyMixtureBatches {
    it: Mutex<MixtureBatches>,
    decoder: RowDecoder,
    features: Features,
}

#[pymethods]
impl PyMixtureBatches {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyRes<Option<NextBatch<'py>>> {
        let next = py.detach(|| -> shardset::Result<_> {
            let mut it = self.it.lock().unwrap_or_else(|e| e.into_inner());
            match it.next() {
                None => Ok(None),
                Some(b) => {
                    let b = b?;
                    let rows = self.decoder.decode_batch(&b.batch)?;
                    Ok(Some((
                        b.local,
                        b.step,
                        collate_rows(rows, &self.features),
                        b.sources,
                    )))
                }
            }
        });
        match next.py()? {
            None => Ok(None),
            Some((local, step, cols, sources)) => {
                Ok(Some((local, step, columns_to_py(py, cols)?, sources)))
            }
        }
    }
}
