//! A CSV (or TSV) file with a header row as a dataset, one split (`train`).
//! Every row must have as many fields as the header; an empty cell is null.

use std::path::{Path, PathBuf};

use super::infer::{csv_cell, csv_to_value, Inference};
use super::{builder_name, open_file, single_file_sources};
use crate::builder::{DatasetBuilder, DatasetInfo, ExampleStream, Sources};
use crate::error::{BoxError, Error, Result};
use crate::features::Features;
use crate::value::Example;

/// A CSV file with its features.
#[derive(Debug, Clone)]
pub struct CsvFile {
    path: PathBuf,
    name: String,
    features: Features,
    delimiter: u8,
}

/// The delimiter a file's extension suggests: tab for `.tsv`, else comma.
pub fn default_delimiter(path: &Path) -> u8 {
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("tsv") => b'\t',
        _ => b',',
    }
}

fn csv_err(path: &Path, e: csv::Error) -> Error {
    let line = e.position().map(|p| p.line());
    match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => Error::input(
            path,
            line,
            format!("the row has {len} field(s), the header has {expected_len}"),
        ),
        csv::ErrorKind::Utf8 { err, .. } => {
            Error::input(path, line, format!("not valid UTF-8 ({err})"))
        }
        csv::ErrorKind::Io(io) => Error::input(path, line, format!("cannot read: {io}")),
        _ => Error::input(path, line, e.to_string()),
    }
}

type Reader = csv::Reader<std::io::BufReader<std::fs::File>>;

/// Opens the file and reads and checks its header.
fn open_reader(path: &Path, delimiter: u8) -> Result<(Reader, csv::StringRecord)> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .delimiter(delimiter)
        .from_reader(std::io::BufReader::with_capacity(1 << 20, open_file(path)?));
    let header = rdr.headers().map_err(|e| csv_err(path, e))?.clone();
    if header.is_empty() {
        return Err(Error::input(path, Some(1), "no header row (empty file?)"));
    }
    for (i, name) in header.iter().enumerate() {
        if name.trim().is_empty() {
            return Err(Error::input(
                path,
                Some(1),
                format!("header field {} is empty", i + 1),
            ));
        }
        if header.iter().take(i).any(|n| n == name) {
            return Err(Error::input(
                path,
                Some(1),
                format!("column '{name}' appears twice in the header"),
            ));
        }
    }
    Ok((rdr, header))
}

/// Calls `f(line_number, header, record)` for every row.
fn for_each_row(
    path: &Path,
    delimiter: u8,
    mut f: impl FnMut(u64, &csv::StringRecord, &csv::StringRecord) -> Result<()>,
) -> Result<()> {
    let (mut rdr, header) = open_reader(path, delimiter)?;
    let mut rec = csv::StringRecord::new();
    loop {
        match rdr.read_record(&mut rec) {
            Ok(true) => {
                let line = rec.position().map_or(0, |p| p.line());
                f(line, &header, &rec)?;
            }
            Ok(false) => return Ok(()),
            Err(e) => return Err(csv_err(path, e)),
        }
    }
}

impl CsvFile {
    /// A file read with the given features (matched to header names; a
    /// header column that is not a feature is an error).
    pub fn new(path: impl Into<PathBuf>, features: Features) -> Self {
        let path = path.into();
        CsvFile {
            name: builder_name(&path),
            delimiter: default_delimiter(&path),
            path,
            features,
        }
    }

    /// Sets the field delimiter (default: tab for `.tsv`, else comma).
    pub fn with_delimiter(mut self, d: u8) -> Self {
        self.delimiter = d;
        self
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

    /// Reads the whole file once and infers its features (header order);
    /// also returns the number of rows.
    ///
    /// # Errors
    /// [`Error::Io`] for a missing file; [`Error::Input`] naming the line of
    /// a ragged row, or the line and column of conflicting types.
    pub fn infer(path: &Path, delimiter: u8) -> Result<(Features, u64)> {
        let mut inf = Inference::new();
        let mut declared = false;
        for_each_row(path, delimiter, |line, header, rec| {
            if !declared {
                header.iter().for_each(|h| inf.declare(h));
                declared = true;
            }
            inf.row();
            for (name, cell) in header.iter().zip(rec.iter()) {
                inf.observe(path, line, name, &csv_cell(cell))?;
            }
            Ok(())
        })?;
        if inf.rows() == 0 {
            return Err(Error::input(
                path,
                None,
                "the file has a header but no rows",
            ));
        }
        Ok((inf.features(path)?, inf.rows()))
    }

    /// Counts the rows.
    ///
    /// # Errors
    /// As [`CsvFile::infer`] for unreadable or ragged rows.
    pub fn count_rows(path: &Path, delimiter: u8) -> Result<u64> {
        let mut n = 0;
        for_each_row(path, delimiter, |_, _, _| {
            n += 1;
            Ok(())
        })?;
        Ok(n)
    }

    fn check_header(&self, header: &csv::StringRecord) -> Result<Vec<Option<usize>>> {
        if let Some(extra) = header.iter().find(|h| self.features.get(h).is_none()) {
            return Err(Error::input(
                &self.path,
                Some(1),
                format!(
                    "column '{extra}' is not among the features ({})",
                    self.features.names().join(", ")
                ),
            ));
        }
        Ok(self
            .features
            .iter()
            .map(|(name, _)| header.iter().position(|h| h == name))
            .collect())
    }
}

impl DatasetBuilder for CsvFile {
    fn name(&self) -> &str {
        &self.name
    }
    fn version(&self) -> &str {
        "1.0.0"
    }
    /// One config named after the kind of input, so that `data.jsonl` and
    /// `data.csv` do not share a cache.
    fn configs(&self) -> Vec<crate::builder::BuilderConfig> {
        vec![crate::builder::BuilderConfig::new("csv", "a CSV file")]
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
        let (rdr, header) = open_reader(&self.path, self.delimiter)?;
        let columns = self.check_header(&header)?;
        let base = self.path.parent().unwrap_or(Path::new(".")).to_path_buf();
        Ok(Box::new(rdr.into_records().map(
            move |rec| -> std::result::Result<(String, Example), BoxError> {
                let rec = rec.map_err(|e| csv_err(&self.path, e))?;
                let line = rec.position().map_or(0, |p| p.line());
                let mut ex = Example::with_capacity(self.features.len());
                for ((name, f), col) in self.features.iter().zip(&columns) {
                    let cell = col.and_then(|c| rec.get(c)).unwrap_or("");
                    let v = csv_to_value(cell, f, &base).map_err(|e| {
                        Error::input(&self.path, Some(line), format!("column '{name}': {e}"))
                    })?;
                    ex.set(name.to_string(), v);
                }
                Ok((line.to_string(), ex))
            },
        )))
    }
}
