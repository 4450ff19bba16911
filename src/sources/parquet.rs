//! Parquet files as a build's input (`shardset build parquet`): the rows of
//! [`ParquetRows`] as stored cells (images as their encoded bytes, class
//! labels as ids), one `train` split, written into any of our layouts by
//! the usual build (locked, resumable, published atomically). Features are
//! the caller's, else those the files give (Hugging Face's metadata, or the
//! Arrow types).

use std::path::{Path, PathBuf};

use super::{builder_name, single_file_sources};
use crate::builder::{DatasetBuilder, DatasetInfo, ExampleStream, Sources};
use crate::error::{BoxError, Result};
use crate::features::decode::DecodeOptions;
use crate::features::Features;
use crate::layouts::backend::Backend;
use crate::layouts::parquet::ParquetRows;

/// Parquet files (a file or a directory of them) as a dataset builder.
#[derive(Debug, Clone)]
pub struct ParquetFiles {
    path: PathBuf,
    name: String,
    rows: ParquetRows,
}

impl ParquetFiles {
    /// The Parquet file or directory at `path`, read with `features` or
    /// those the files give.
    ///
    /// # Errors
    /// As [`ParquetRows::open`].
    pub fn open(path: &Path, features: Option<Features>) -> Result<ParquetFiles> {
        let rows = ParquetRows::open(path, features, DecodeOptions::default().with_raw(true))?;
        Ok(ParquetFiles {
            name: builder_name(path),
            path: path.to_path_buf(),
            rows,
        })
    }

    /// Sets the builder name (default: the file or directory stem).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The features.
    pub fn features(&self) -> &Features {
        self.rows.features()
    }

    /// Rows in all the files.
    pub fn len(&self) -> u64 {
        self.rows.len()
    }

    /// True when the files hold no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

impl DatasetBuilder for ParquetFiles {
    fn name(&self) -> &str {
        &self.name
    }
    fn version(&self) -> &str {
        "1.0.0"
    }
    /// One config named after the kind of input.
    fn configs(&self) -> Vec<crate::builder::BuilderConfig> {
        vec![crate::builder::BuilderConfig::new(
            "parquet",
            "Parquet files",
        )]
    }
    fn info(&self, _config: &str) -> std::result::Result<DatasetInfo, BoxError> {
        Ok(DatasetInfo::new(self.features().clone()))
    }
    fn splits(&self, _config: &str) -> std::result::Result<Vec<String>, BoxError> {
        Ok(vec!["train".into()])
    }
    /// The files themselves: a changed file is a rebuild.
    fn sources(&self, _c: &str, _s: &str) -> std::result::Result<Option<Sources>, BoxError> {
        if !self.path.is_dir() {
            return Ok(Some(single_file_sources(&self.path)));
        }
        let names: Vec<PathBuf> = self
            .rows
            .files()
            .iter()
            .filter_map(|f| f.file_name().map(PathBuf::from))
            .collect();
        Ok(Some(Sources::new(&self.path, names)))
    }
    fn generate<'a>(
        &'a self,
        _config: &'a str,
        _split: &'a str,
        _unit: &'a crate::builder::WorkUnit,
    ) -> std::result::Result<ExampleStream<'a>, BoxError> {
        let batches = self.rows.iter_batches(&Default::default())?;
        let decoder = self.rows.decoder().clone();
        let mut index = 0u64;
        Ok(Box::new(batches.flat_map(move |b| {
            let rows = b.and_then(|b| decoder.decode_batch(&b));
            let items: Vec<std::result::Result<(String, crate::value::Example), BoxError>> =
                match rows {
                    Ok(rows) => rows
                        .into_iter()
                        .map(|r| {
                            index += 1;
                            Ok(((index - 1).to_string(), r.into_example()))
                        })
                        .collect(),
                    Err(e) => vec![Err(e.into())],
                };
            items
        })))
    }
}
