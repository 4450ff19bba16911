//! Data written by other tools as a build's input (`shardset build
//! parquet|hf`): the rows of a read-only foreign backend ([`ParquetRows`],
//! [`HfArrow`]) as stored cells (images as their encoded bytes, class labels
//! as ids), written into any of our layouts by the usual build (locked,
//! resumable, published atomically). Parquet gives one `train` split; a
//! Hugging Face `DatasetDict` directory gives each of its splits. Features
//! are the caller's, else those the data gives (Hugging Face's, or the
//! Arrow types'); every split must have the same.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{builder_name, single_file_sources};
use crate::builder::{DatasetBuilder, DatasetInfo, ExampleStream, Sources};
use crate::error::{BoxError, Error, Result};
use crate::features::decode::DecodeOptions;
use crate::features::Features;
use crate::layouts::backend::Backend;
use crate::layouts::hf_arrow::{hf_splits, HfArrow};
#[cfg(feature = "parquet")]
use crate::layouts::parquet::ParquetRows;

/// Which tool wrote the data: the builder's one config is named after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForeignKind {
    /// Parquet files.
    #[cfg(feature = "parquet")]
    Parquet,
    /// A Hugging Face `save_to_disk` directory.
    HuggingFace,
}

impl ForeignKind {
    /// The config name (`parquet`, `hf`).
    pub fn config(self) -> &'static str {
        match self {
            #[cfg(feature = "parquet")]
            ForeignKind::Parquet => "parquet",
            ForeignKind::HuggingFace => "hf",
        }
    }
}

#[derive(Debug, Clone)]
struct Split {
    name: String,
    rows: Arc<dyn Backend>,
    /// Its files, relative to the input path.
    files: Vec<PathBuf>,
}

/// Data in another tool's format as a dataset builder.
#[derive(Debug, Clone)]
pub struct ForeignFiles {
    path: PathBuf,
    name: String,
    kind: ForeignKind,
    splits: Vec<Split>,
}

fn relative(base: &Path, files: Vec<PathBuf>) -> Vec<PathBuf> {
    files
        .into_iter()
        .map(|f| f.strip_prefix(base).map(Path::to_path_buf).unwrap_or(f))
        .collect()
}

impl ForeignFiles {
    /// The Parquet file or directory at `path` (one `train` split), read
    /// with `features` or those the files give.
    ///
    /// # Errors
    /// As [`ParquetRows::open`].
    #[cfg(feature = "parquet")]
    pub fn parquet(path: &Path, features: Option<Features>) -> Result<ForeignFiles> {
        let rows = ParquetRows::open(path, features, raw())?;
        let files = if path.is_dir() {
            relative(path, rows.files())
        } else {
            Vec::new()
        };
        Ok(ForeignFiles::new(
            path,
            ForeignKind::Parquet,
            vec![Split {
                name: "train".into(),
                rows: Arc::new(rows),
                files,
            }],
        ))
    }

    /// The Hugging Face `save_to_disk` directory at `path`: every split of
    /// a `DatasetDict`, or a `Dataset` as its recorded split (`train` when
    /// none is), read with `features` or those the directory gives.
    ///
    /// # Errors
    /// As [`HfArrow::open`]; [`Error::InvalidFeature`] when two splits'
    /// features differ.
    pub fn hugging_face(path: &Path, features: Option<Features>) -> Result<ForeignFiles> {
        let names: Vec<Option<String>> = match hf_splits(path)? {
            Some(s) => s.into_iter().map(Some).collect(),
            None => vec![None],
        };
        let mut splits: Vec<Split> = Vec::new();
        for n in names {
            let rows = HfArrow::open(path, n.as_deref(), features.clone(), raw())?;
            let name = match n {
                Some(n) => n,
                None => recorded_split(path).unwrap_or_else(|| "train".into()),
            };
            if let Some(first) = splits.first() {
                if first.rows.features() != rows.features() {
                    return Err(Error::InvalidFeature(format!(
                        "{}: split '{name}' has other features than split '{}' (a cache has one set for every split; build the splits apart)",
                        path.display(),
                        first.name
                    )));
                }
            }
            let files = relative(path, rows.files());
            splits.push(Split {
                name,
                rows: Arc::new(rows),
                files,
            });
        }
        Ok(ForeignFiles::new(path, ForeignKind::HuggingFace, splits))
    }

    fn new(path: &Path, kind: ForeignKind, splits: Vec<Split>) -> ForeignFiles {
        ForeignFiles {
            name: builder_name(path),
            path: path.to_path_buf(),
            kind,
            splits,
        }
    }

    /// Sets the builder name (default: the file or directory stem).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The kind of input.
    pub fn kind(&self) -> ForeignKind {
        self.kind
    }

    /// The features.
    pub fn features(&self) -> &Features {
        self.splits[0].rows.features()
    }

    /// The splits and their row counts.
    pub fn split_rows(&self) -> Vec<(String, u64)> {
        self.splits
            .iter()
            .map(|s| (s.name.clone(), s.rows.len()))
            .collect()
    }

    fn split(&self, name: &str) -> std::result::Result<&Split, BoxError> {
        self.splits.iter().find(|s| s.name == name).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{} has no split '{name}' (its splits: {:?})",
                self.path.display(),
                self.splits.iter().map(|s| &s.name).collect::<Vec<_>>()
            ))
            .into()
        })
    }
}

/// Cells as stored, for writing them again.
fn raw() -> DecodeOptions {
    DecodeOptions::default().with_raw(true)
}

/// The split a `Dataset` directory's `state.json` records.
fn recorded_split(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path.join(crate::layouts::hf_arrow::STATE_FILE)).ok()?;
    let j: serde_json::Value = serde_json::from_str(&text).ok()?;
    j.get("_split")?.as_str().map(String::from)
}

impl DatasetBuilder for ForeignFiles {
    fn name(&self) -> &str {
        &self.name
    }
    fn version(&self) -> &str {
        "1.0.0"
    }
    /// One config named after the kind of input.
    fn configs(&self) -> Vec<crate::builder::BuilderConfig> {
        let about = match self.kind {
            #[cfg(feature = "parquet")]
            ForeignKind::Parquet => "Parquet files",
            ForeignKind::HuggingFace => "a Hugging Face save_to_disk directory",
        };
        vec![crate::builder::BuilderConfig::new(
            self.kind.config(),
            about,
        )]
    }
    fn info(&self, _config: &str) -> std::result::Result<DatasetInfo, BoxError> {
        Ok(DatasetInfo::new(self.features().clone()))
    }
    fn splits(&self, _config: &str) -> std::result::Result<Vec<String>, BoxError> {
        Ok(self.splits.iter().map(|s| s.name.clone()).collect())
    }
    /// The files themselves: a changed file is a rebuild.
    fn sources(&self, _c: &str, split: &str) -> std::result::Result<Option<Sources>, BoxError> {
        let s = self.split(split)?;
        if !self.path.is_dir() {
            return Ok(Some(single_file_sources(&self.path)));
        }
        Ok(Some(Sources::new(&self.path, s.files.clone())))
    }
    fn generate<'a>(
        &'a self,
        _config: &'a str,
        split: &'a str,
        _unit: &'a crate::builder::WorkUnit,
    ) -> std::result::Result<ExampleStream<'a>, BoxError> {
        let rows = &self.split(split)?.rows;
        let batches = rows.iter_batches(&Default::default())?;
        let decoder = rows.decoder().clone();
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
