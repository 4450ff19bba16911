//! The package's exceptions, and the library's errors as them: the same
//! message, the class by what went wrong.

use pyo3::exceptions::{PyException, PyIndexError};
use pyo3::prelude::*;

use shardset::Error;

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
        | Error::LimitExceeded { .. }
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

pub(crate) type PyRes<T> = PyResult<T>;

pub(crate) trait OrPy<T> {
    fn py(self) -> PyRes<T>;
}

impl<T> OrPy<T> for shardset::Result<T> {
    fn py(self) -> PyRes<T> {
        self.map_err(py_err)
    }
}
