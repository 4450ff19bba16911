//! `shardset._shardset`: the library behind the Python package.
//!
//! A thin layer: every read and decode runs in the library with the GIL
//! released; values cross into Python once, as Python scalars, strings,
//! bytes, lists, and numpy arrays that own the library's buffers (no copy).
//! Record batches leave through the Arrow C Data interface (PyCapsules).
//! Library errors become the package's exceptions with the library's message.
//!
//! One module per concern: `error` (the exceptions), `convert` (values
//! both ways), `arrow` (record batches), `open` and `dataset` (reading),
//! `write`, `edit`, `epoch` (the epoch model for `shardset.torch`), `mixture` (mixtures of datasets), `pipeline` (the input pipeline), `ops` (its image ops on one image), `tensors` (its batches as torch tensors) and `remote` (distributed builds on object storage);
//! this file registers them as the module `shardset._shardset`, and sets
//! the extension's allocator (mimalloc; Cargo.toml says why).

use pyo3::prelude::*;

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod arrow;
mod convert;
mod dataset;
mod edit;
mod epoch;
mod error;
mod mixture;
mod open;
mod ops;
mod pipeline;
mod remote;
mod report;
mod tensors;
mod write;

use error::{
    BadInputError, CacheNotFoundError, CorruptCacheError, SchemaMismatchError, ShardsetError,
};

#[pymodule]
fn _shardset(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("ShardsetError", py.get_type::<ShardsetError>())?;
    m.add("CacheNotFoundError", py.get_type::<CacheNotFoundError>())?;
    m.add("CorruptCacheError", py.get_type::<CorruptCacheError>())?;
    m.add("SchemaMismatchError", py.get_type::<SchemaMismatchError>())?;
    m.add("BadInputError", py.get_type::<BadInputError>())?;
    m.add_class::<dataset::PyDataset>()?;
    m.add_class::<arrow::ArrowBatch>()?;
    m.add_class::<arrow::BatchIter>()?;
    m.add_class::<convert::HostBuffer>()?;
    m.add_class::<edit::PyStaging>()?;
    m.add_class::<epoch::PyEpochBatches>()?;
    m.add_class::<ops::PyImageOps>()?;
    m.add_class::<pipeline::PyPipeline>()?;
    m.add_class::<pipeline::PyMixturePipeline>()?;
    m.add_class::<mixture::PyMixture>()?;
    m.add_class::<mixture::PyMixtureBatches>()?;
    m.add_function(wrap_pyfunction!(epoch::_check_order, m)?)?;
    m.add_function(wrap_pyfunction!(write::write_options, m)?)?;
    m.add_function(wrap_pyfunction!(write::_check_write_options, m)?)?;
    m.add_function(wrap_pyfunction!(edit::edit, m)?)?;
    m.add_function(wrap_pyfunction!(open::open_cache, m)?)?;
    m.add_function(wrap_pyfunction!(open::open_parquet, m)?)?;
    m.add_function(wrap_pyfunction!(open::open_hf, m)?)?;
    m.add_function(wrap_pyfunction!(open::_reopen, m)?)?;
    m.add_function(wrap_pyfunction!(write::write_cache, m)?)?;
    m.add_function(wrap_pyfunction!(write::convert, m)?)?;
    m.add_function(wrap_pyfunction!(report::report, m)?)?;
    m.add_function(wrap_pyfunction!(write::features_fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(remote::_publish_part, m)?)?;
    m.add_function(wrap_pyfunction!(remote::_commit_parts, m)?)?;
    m.add_function(wrap_pyfunction!(remote::_gc_object_store, m)?)?;
    m.add_function(wrap_pyfunction!(remote::_install_storage_options, m)?)?;
    m.add_function(wrap_pyfunction!(remote::_storage_options, m)?)?;
    Ok(())
}
