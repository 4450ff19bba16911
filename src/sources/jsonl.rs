//! A JSON lines file as a dataset: one JSON object per line, one split
//! (`train`). Blank lines are skipped; a key missing from a line is null.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde_json::Value as J;

use super::infer::{json_to_value, Inference};
use super::{builder_name, open_file, single_file_sources};
use crate::builder::{DatasetBuilder, DatasetInfo, ExampleStream, Sources};
use crate::error::{BoxError, Error, Result};
use crate::features::Features;
use crate::value::Example;

/// A JSON lines file with its features.
#[derive(Debug, Clone)]
pub struct JsonLines {
    path: PathBuf,
    name: String,
    features: Features,
}

/// Calls `f(line_number, object)` for every non-blank line.
fn for_each_object(
    path: &Path,
    mut f: impl FnMut(u64, serde_json::Map<String, J>) -> Result<()>,
) -> Result<()> {
    let reader = BufReader::with_capacity(1 << 20, open_file(path)?);
    for (i, line) in reader.lines().enumerate() {
        let n = i as u64 + 1;
        let line = line.map_err(|e| Error::input(path, Some(n), format!("cannot read: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<J>(&line) {
            Ok(J::Object(o)) => f(n, o)?,
            Ok(_) => return Err(Error::input(path, Some(n), "not a JSON object")),
            Err(e) => return Err(Error::input(path, Some(n), format!("invalid JSON: {e}"))),
        }
    }
    Ok(())
}

impl JsonLines {
    /// A file read with the given features (the columns are the features'
    /// names; a key not among them is an error naming the line).
    pub fn new(path: impl Into<PathBuf>, features: Features) -> Self {
        let path = path.into();
        JsonLines {
            name: builder_name(&path),
            path,
            features,
        }
    }

    /// Reads the whole file once and infers its features (see
    /// [`super::infer`]); also returns the number of rows.
    ///
    /// # Errors
    /// [`Error::Io`] for a missing file; [`Error::Input`] naming the line and
    /// column of bad JSON or conflicting types, or an empty file.
    pub fn infer(path: &Path) -> Result<(Features, u64)> {
        let mut inf = Inference::new();
        for_each_object(path, |n, o| {
            inf.row();
            for (k, v) in &o {
                inf.observe(path, n, k, v)?;
            }
            Ok(())
        })?;
        Ok((inf.features(path)?, inf.rows()))
    }

    /// Counts the rows (non-blank lines) without parsing them.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file.
    pub fn count_rows(path: &Path) -> Result<u64> {
        let reader = BufReader::with_capacity(1 << 20, open_file(path)?);
        let mut n = 0;
        for line in reader.lines() {
            let line = line.map_err(|e| Error::io("read", path, e))?;
            if !line.trim().is_empty() {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Sets the builder name (default: the file stem).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The features.
    pub fn features(&self) -> &Features {
        &self.features
    }

    fn example(&self, n: u64, mut o: serde_json::Map<String, J>) -> Result<Example> {
        let base = self.path.parent().unwrap_or(Path::new("."));
        let mut ex = Example::with_capacity(self.features.len());
        for (name, f) in self.features.iter() {
            let v = o.remove(name).unwrap_or(J::Null);
            let v = json_to_value(&v, f, base)
                .map_err(|e| Error::input(&self.path, Some(n), format!("column '{name}': {e}")))?;
            ex.set(name.to_string(), v);
        }
        if let Some(k) = o.keys().next() {
            return Err(Error::input(
                &self.path,
                Some(n),
                format!(
                    "key '{k}' is not among the features ({})",
                    self.features.names().join(", ")
                ),
            ));
        }
        Ok(ex)
    }
}

impl DatasetBuilder for JsonLines {
    fn name(&self) -> &str {
        &self.name
    }
    fn version(&self) -> &str {
        "1.0.0"
    }
    /// One config named after the kind of input, so that `data.jsonl` and
    /// `data.csv` do not share a cache.
    fn configs(&self) -> Vec<crate::builder::BuilderConfig> {
        vec![crate::builder::BuilderConfig::new(
            "jsonl",
            "a JSON lines file",
        )]
    }
    fn info(&self, _config: &str) -> std::result::Result<DatasetInfo, BoxError> {
        Ok(DatasetInfo::new(self.features.clone()))
    }
    fn splits(&self, _config: &str) -> std::result::Result<Vec<String>, BoxError> {
        Ok(vec!["train".into()])
    }
    fn sources(&self, _c: &str, _s: &str) -> std::result::Result<Option<Sources>, BoxError> {
        Ok(Some(single_file_sources(&self.path)))
    }
    fn generate<'a>(
        &'a self,
        _config: &'a str,
        _split: &'a str,
        _unit: &'a crate::builder::WorkUnit,
    ) -> std::result::Result<ExampleStream<'a>, BoxError> {
        let reader = BufReader::with_capacity(1 << 20, open_file(&self.path)?);
        let mut lines = reader.lines().enumerate();
        Ok(Box::new(std::iter::from_fn(move || loop {
            let (i, line) = lines.next()?;
            let n = i as u64 + 1;
            let line = match line {
                Ok(l) => l,
                Err(e) => {
                    return Some(Err(Error::input(
                        &self.path,
                        Some(n),
                        format!("cannot read: {e}"),
                    )
                    .into()))
                }
            };
            if line.trim().is_empty() {
                continue;
            }
            let item = match serde_json::from_str::<J>(&line) {
                Ok(J::Object(o)) => self.example(n, o).map(|ex| (n.to_string(), ex)),
                Ok(_) => Err(Error::input(&self.path, Some(n), "not a JSON object")),
                Err(e) => Err(Error::input(
                    &self.path,
                    Some(n),
                    format!("invalid JSON: {e}"),
                )),
            };
            return Some(item.map_err(BoxError::from));
        })))
    }
}
