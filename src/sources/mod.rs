//! Ready-made dataset builders for common inputs, used by the command line
//! (`shardset build imagefolder|jsonl|csv|parquet|hf|webdataset`) and usable from Rust: an image
//! folder ([`ImageFolder`]), a video folder ([`VideoFolder`]), a JSON lines file ([`JsonLines`]) and a CSV file
//! ([`CsvFile`]), with feature inference for the last two ([`infer`]).
//!
//! Each is a [`DatasetBuilder`](crate::DatasetBuilder) named after its input
//! (see [`builder_name`]), version `1.0.0`, with one config named after the
//! kind of input (`imagefolder`, `jsonl`, `csv`), declaring its input files as
//! sources, so `load` caches it under the reference's naming and rebuilds it
//! when a file changes.

pub mod csv;
pub mod foreign;
pub mod imagefolder;
pub mod infer;
pub mod jsonl;
mod rows;
pub mod videofolder;
pub mod webdataset;

use std::path::Path;

pub use self::csv::CsvFile;
pub use foreign::{ForeignFiles, ForeignKind};
pub use imagefolder::{ImageCheck, ImageFolder};
pub use jsonl::JsonLines;
pub use rows::{read_rows, set_cells};
pub use videofolder::VideoFolder;
pub use webdataset::WebDataset;

use crate::builder::Sources;
use crate::error::{Error, Result};

/// Data other tools write, which `shardset build <kind>` and Python's
/// `shardset.convert` turn into a cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// Parquet files ([`ForeignFiles::parquet`]).
    #[cfg(feature = "parquet")]
    Parquet,
    /// A Hugging Face `save_to_disk` directory ([`ForeignFiles::hugging_face`]).
    HuggingFace,
    /// WebDataset tars ([`WebDataset`]).
    WebDataset,
}

impl std::str::FromStr for InputKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<InputKind> {
        Ok(match s {
            #[cfg(feature = "parquet")]
            "parquet" => InputKind::Parquet,
            "hf" => InputKind::HuggingFace,
            "webdataset" => InputKind::WebDataset,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "'{s}' is not an input kind: parquet, hf or webdataset"
                )))
            }
        })
    }
}

/// An input opened for conversion: its builder and each split's rows.
pub struct Input {
    /// The builder (config named after the kind).
    pub builder: Box<dyn crate::builder::DatasetBuilder>,
    /// The splits, in order, and their row counts.
    pub splits: Vec<(String, u64)>,
}

/// Opens the `kind` data at `path` for conversion, read with `features`
/// or those the data gives, the builder named `name` (default: the file or
/// directory's).
///
/// # Errors
/// As [`ForeignFiles::parquet`], [`ForeignFiles::hugging_face`] and
/// [`WebDataset::open`].
pub fn open_input(
    kind: InputKind,
    path: &Path,
    features: Option<crate::features::Features>,
    name: Option<&str>,
) -> Result<Input> {
    type OpenForeign = fn(&Path, Option<crate::features::Features>) -> Result<ForeignFiles>;
    let foreign: Option<OpenForeign> = match kind {
        #[cfg(feature = "parquet")]
        InputKind::Parquet => Some(ForeignFiles::parquet),
        InputKind::HuggingFace => Some(ForeignFiles::hugging_face),
        InputKind::WebDataset => None,
    };
    if let Some(open) = foreign {
        let mut b = open(path, features)?;
        if let Some(n) = name {
            b = b.with_name(n);
        }
        let splits = b.split_rows();
        return Ok(Input {
            builder: Box::new(b),
            splits,
        });
    }
    let mut b = WebDataset::open(path, features)?;
    if let Some(n) = name {
        b = b.with_name(n);
    }
    let splits = b.split_rows();
    Ok(Input {
        builder: Box::new(b),
        splits,
    })
}

/// A builder name from a path's file stem (the folder name for a folder):
/// ASCII letters, digits, `_` and `-` are kept, anything else becomes `_`.
pub fn builder_name(path: &Path) -> String {
    let stem = if path.is_dir() {
        path.file_name()
    } else {
        path.file_stem()
    };
    let stem = stem
        .map(|s| s.to_string_lossy().into_owned())
        .or_else(|| {
            // `.` or `..`: the name of the folder they stand for.
            std::fs::canonicalize(path)
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        })
        .unwrap_or_default();
    let name: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() {
        "dataset".into()
    } else {
        name
    }
}

/// Opens an input file, naming it in the error.
pub(crate) fn open_file(path: &Path) -> Result<std::fs::File> {
    let f = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
    if f.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(Error::input(path, None, "is a directory, not a file"));
    }
    Ok(f)
}

/// One file as declared sources (stamped relative to its folder).
pub(crate) fn single_file_sources(path: &Path) -> Sources {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    Sources::new(parent, [name])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_safe() {
        assert_eq!(builder_name(Path::new("/x/my data.v2.jsonl")), "my_data_v2");
        assert_eq!(builder_name(Path::new("/x/cifar-10")), "cifar-10");
    }
}
