//! The input pipeline (`shardset::pipeline::Pipeline`) for
//! `shardset.torch.Loader`: batches are made by the library's threads with
//! the GIL released, and each column leaves as a torch tensor over the
//! library's buffer (no copy; `tensors`).

use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use shardset::pipeline::{
    Batch, BufferPool, Element, Layout, MixturePipeline, Pipeline, PipelineOptions,
};
use shardset::{EpochPosition, LoaderOptions, LoaderState, MixtureState, Partition, Remainder};

use crate::dataset::PyDataset;
use crate::error::{BadInputError, OrPy, PyRes};
use crate::mixture::PyMixture;
use crate::tensors::batch_to_torch;

/// The library's pipeline options from the bindings' arguments (each
/// checked by its setter).
#[allow(clippy::too_many_arguments)]
fn pipeline_options(
    batch_size: usize,
    ops: &[(String, String)],
    columns: Option<Vec<String>>,
    order: &str,
    seed: u64,
    partition: Partition,
    threads: usize,
    prefetch: usize,
    layout: &str,
) -> PyRes<PipelineOptions> {
    let loader = LoaderOptions::default()
        .with_order(order.parse().py()?)
        .with_seed(seed)
        .with_partition(partition)
        .try_with_batch_size(batch_size)
        .py()?;
    let mut opts = PipelineOptions::default()
        .with_loader(loader)
        .try_with_threads(threads)
        .py()?
        .try_with_prefetch(prefetch)
        .py()?
        .with_layout(layout.parse::<Layout>().py()?);
    for (column, json) in ops {
        opts = opts.try_with_ops_json(column, json).py()?;
    }
    if let Some(c) = columns {
        opts = opts.with_columns(c);
    }
    Ok(opts)
}

/// Batches of finished tensors from a dataset.
#[pyclass(module = "shardset._shardset", name = "Pipeline", frozen)]
pub(crate) struct PyPipeline(Mutex<Pipeline>);

impl PyPipeline {
    fn with<T>(&self, f: impl FnOnce(&mut Pipeline) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// What `__next__` needs of the two pipelines.
trait NextBatch: Send {
    fn ready(&mut self) -> bool;
    fn next_batch(&mut self) -> Option<shardset::Result<Batch>>;
    fn buffers(&self) -> Arc<BufferPool>;
}

impl NextBatch for Pipeline {
    fn ready(&mut self) -> bool {
        Pipeline::ready(self)
    }
    fn next_batch(&mut self) -> Option<shardset::Result<Batch>> {
        Pipeline::next_batch(self)
    }
    fn buffers(&self) -> Arc<BufferPool> {
        Pipeline::buffers(self)
    }
}

impl NextBatch for MixturePipeline {
    fn ready(&mut self) -> bool {
        MixturePipeline::ready(self)
    }
    fn next_batch(&mut self) -> Option<shardset::Result<Batch>> {
        MixturePipeline::next_batch(self)
    }
    fn buffers(&self) -> Arc<BufferPool> {
        MixturePipeline::buffers(self)
    }
}

/// A pipeline's next batch for Python: StopIteration at the end. A batch
/// already made is taken with the GIL held, if no other thread holds the
/// pipeline (giving up the GIL costs a switch, and lets any other Python
/// thread in first); otherwise the call waits with the GIL released. It
/// never blocks on the pipeline's lock with the GIL: the lock's holder may
/// be waiting for a batch with the GIL released, and needs it back.
fn next_py<'py, P: NextBatch>(py: Python<'py>, pipeline: &Mutex<P>) -> PyRes<Bound<'py, PyDict>> {
    let take = |p: &mut P| (p.next_batch(), p.buffers());
    let held = match pipeline.try_lock() {
        Ok(p) => Some(p),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    };
    let ready = held.and_then(|mut p| p.ready().then(|| take(&mut p)));
    let (next, pool) = match ready {
        Some(got) => got,
        None => py.detach(|| take(&mut pipeline.lock().unwrap_or_else(|p| p.into_inner()))),
    };
    match next {
        None => Err(PyStopIteration::new_err(())),
        Some(b) => batch_to_torch(py, b.py()?, &pool),
    }
}

/// Columns with their element types' names.
fn element_names(columns: Vec<(&str, Element)>) -> Vec<(String, String)> {
    columns
        .into_iter()
        .map(|(n, e)| (n.to_string(), e.name().to_string()))
        .collect()
}

#[pymethods]
impl PyPipeline {
    /// `ops`: `{column: json list of ops}`; `columns`: the output columns
    /// (None: every column that makes a tensor).
    #[new]
    #[pyo3(signature = (dataset, batch_size, ops, columns, order, seed, remainder, rank, world_size, worker, num_workers, threads, prefetch, layout))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        dataset: &PyDataset,
        batch_size: usize,
        ops: Vec<(String, String)>,
        columns: Option<Vec<String>>,
        order: &str,
        seed: u64,
        remainder: &str,
        rank: u32,
        world_size: u32,
        worker: u32,
        num_workers: u32,
        threads: usize,
        prefetch: usize,
        layout: &str,
    ) -> PyRes<Self> {
        let opts = pipeline_options(
            batch_size,
            &ops,
            columns,
            order,
            seed,
            Partition::new(
                rank,
                world_size,
                worker,
                num_workers,
                remainder.parse().py()?,
            )
            .py()?,
            threads,
            prefetch,
            layout,
        )?;
        let ds = dataset.dataset().clone();
        let p = py.detach(move || Pipeline::new(ds, opts)).py()?;
        Ok(PyPipeline(Mutex::new(p)))
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next batch (a dict of torch tensors); StopIteration at the end of
    /// the epoch, after which the pipeline stands at the next epoch.
    fn __next__<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyDict>> {
        next_py(py, &self.0)
    }

    /// The output columns.
    #[getter]
    fn columns(&self) -> Vec<String> {
        self.with(|p| p.column_names().iter().map(|s| s.to_string()).collect())
    }

    /// The state after the last batch consumed, as JSON.
    fn state(&self) -> String {
        self.with(|p| serde_json::to_string(&p.state()).expect("a state serialises"))
    }

    /// Continues from a state this pipeline's partition saved (JSON).
    fn resume(&self, state: &str) -> PyRes<()> {
        let s: LoaderState = serde_json::from_str(state)
            .map_err(|e| BadInputError::new_err(format!("not a pipeline state: {e}")))?;
        self.with(|p| p.resume(s)).py()
    }

    /// Continues from a rank's place saved under any world size.
    fn resume_at(&self, epoch: u64, base: u64, done: u64, world_size: u32) -> PyRes<()> {
        let pos = EpochPosition {
            epoch,
            base,
            done,
            world_size,
        };
        self.with(|p| p.resume_at(pos)).py()
    }

    /// Moves to the start of `epoch`.
    fn set_epoch(&self, epoch: u64) {
        self.with(|p| p.set_epoch(epoch))
    }

    /// Batches this consumer reads in a whole epoch.
    fn epoch_batches(&self) -> u64 {
        self.with(|p| p.epoch_batches())
    }

    /// Batches left in the current epoch.
    fn remaining_batches(&self) -> u64 {
        self.with(|p| p.remaining_batches())
    }

    /// The most bytes of batches being made or waiting at once.
    fn max_bytes_in_flight(&self) -> usize {
        self.with(|p| p.max_bytes_in_flight())
    }

    /// Which element types columns leave as (bfloat16 columns arrive as
    /// uint16 arrays).
    fn elements(&self) -> Vec<(String, String)> {
        self.with(|p| element_names(p.column_elements()))
    }
}

/// Batches of finished tensors from a mixture.
#[pyclass(module = "shardset._shardset", name = "MixturePipeline", frozen)]
pub(crate) struct PyMixturePipeline(Mutex<MixturePipeline>);

impl PyMixturePipeline {
    fn with<T>(&self, f: impl FnOnce(&mut MixturePipeline) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[pymethods]
impl PyMixturePipeline {
    /// As `Pipeline`, over a mixture from where it stands (its seed and
    /// batch size are the mixture's).
    #[new]
    #[pyo3(signature = (mixture, batch_size, ops, columns, rank, world_size, worker, num_workers, threads, prefetch, layout))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        mixture: &PyMixture,
        batch_size: usize,
        ops: Vec<(String, String)>,
        columns: Option<Vec<String>>,
        rank: u32,
        world_size: u32,
        worker: u32,
        num_workers: u32,
        threads: usize,
        prefetch: usize,
        layout: &str,
    ) -> PyRes<Self> {
        let part =
            Partition::new(rank, world_size, worker, num_workers, Remainder::Partial).py()?;
        let opts = pipeline_options(
            batch_size,
            &ops,
            columns,
            "sequential",
            0,
            part,
            threads,
            prefetch,
            layout,
        )?;
        let m = mixture.mixture();
        let p = py.detach(move || MixturePipeline::new(m, opts)).py()?;
        Ok(PyMixturePipeline(Mutex::new(p)))
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next batch (a dict of torch tensors); StopIteration once every
    /// source has dropped out.
    fn __next__<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyDict>> {
        next_py(py, &self.0)
    }

    /// The output columns.
    #[getter]
    fn columns(&self) -> Vec<String> {
        self.with(|p| {
            element_names(p.column_elements())
                .into_iter()
                .map(|(n, _)| n)
                .collect()
        })
    }

    /// The mixture's state after the last batch consumed, as JSON.
    fn state(&self) -> String {
        self.with(|p| serde_json::to_string(p.state()).expect("a state serialises"))
    }

    /// Continues from a mixture state (JSON), any world size.
    fn load_state(&self, state: &str) -> PyRes<()> {
        let s: MixtureState = serde_json::from_str(state)
            .map_err(|e| BadInputError::new_err(format!("not a mixture state: {e}")))?;
        self.with(|p| p.load_state(s)).py()
    }

    /// Uses `weights` from global step `step` on.
    fn set_weights(&self, step: u64, weights: Vec<f64>) -> PyRes<()> {
        self.with(|p| p.set_weights(step, &weights)).py()
    }

    /// The global step after the batches consumed.
    fn step(&self) -> u64 {
        self.with(|p| p.mixture().step())
    }

    /// The most bytes of batches being made or waiting at once.
    fn max_bytes_in_flight(&self) -> usize {
        self.with(|p| p.max_bytes_in_flight())
    }

    /// Which element types columns leave as.
    fn elements(&self) -> Vec<(String, String)> {
        self.with(|p| element_names(p.column_elements()))
    }
}
