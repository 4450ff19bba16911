//! Rows from a JSON lines file or a CSV file with a header, read against
//! given features (`shardset edit --append`, and any caller adding rows to a
//! cache): every error names the file, the line and the column.

use std::io::BufRead;
use std::path::Path;

use serde_json::Value as J;

use super::infer::{csv_to_value, json_to_value};
use crate::error::{Error, Result};
use crate::features::Features;
use crate::layouts::edit::Staging;
use crate::value::{Example, Value};

fn bad(path: &Path, line: u64, reason: impl std::fmt::Display) -> Error {
    Error::Input {
        path: path.to_path_buf(),
        location: if line > 0 {
            format!(":{line}")
        } else {
            String::new()
        },
        reason: reason.to_string(),
    }
}

/// The lines of a JSON lines file, each an object, with their line numbers.
fn json_lines(path: &Path) -> Result<Vec<(u64, serde_json::Map<String, J>)>> {
    let f = std::fs::File::open(path).map_err(|e| Error::Io {
        op: "open",
        path: path.to_path_buf(),
        source: e,
    })?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let n = i as u64 + 1;
        let line = line.map_err(|e| Error::Io {
            op: "read",
            path: path.to_path_buf(),
            source: e,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<J>(&line) {
            Ok(J::Object(o)) => out.push((n, o)),
            Ok(_) => return Err(bad(path, n, "not a JSON object")),
            Err(e) => return Err(bad(path, n, format!("not valid JSON ({e})"))),
        }
    }
    Ok(out)
}

/// One example of every feature from a JSON object.
fn example_from_json(
    obj: &serde_json::Map<String, J>,
    features: &Features,
    path: &Path,
    line: u64,
) -> Result<Example> {
    let base = path.parent().unwrap_or(Path::new("."));
    let mut ex = Example::new();
    for (name, f) in features.iter() {
        let v = obj.get(name).unwrap_or(&J::Null);
        let v = json_to_value(v, f, base).map_err(|r| bad(path, line, format!("{name}: {r}")))?;
        ex.set(name.to_string(), v);
    }
    if let Some(k) = obj.keys().find(|k| features.get(k).is_none()) {
        return Err(bad(
            path,
            line,
            format!("'{k}' is not a column (columns: {:?})", features.names()),
        ));
    }
    Ok(ex)
}

/// The rows of a JSON lines file (one object per line), or of a CSV file
/// with a header (by its `.csv` extension), as examples of `features`:
/// missing columns are null, an unknown column is an error.
///
/// # Errors
/// [`Error::Input`] naming the file, line and column; [`Error::Io`].
pub fn read_rows(path: &Path, features: &Features) -> Result<Vec<Example>> {
    let is_csv = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    if !is_csv {
        return json_lines(path)?
            .iter()
            .map(|(n, o)| example_from_json(o, features, path, *n))
            .collect();
    }
    let base = path.parent().unwrap_or(Path::new("."));
    let mut r = csv::Reader::from_path(path).map_err(|e| bad(path, 0, e))?;
    let header: Vec<String> = r
        .headers()
        .map_err(|e| bad(path, 1, e))?
        .iter()
        .map(str::to_string)
        .collect();
    if let Some(k) = header.iter().find(|k| features.get(k).is_none()) {
        return Err(bad(
            path,
            1,
            format!("'{k}' is not a column (columns: {:?})", features.names()),
        ));
    }
    let mut out = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let n = i as u64 + 2;
        let rec = rec.map_err(|e| bad(path, n, e))?;
        let mut ex = Example::new();
        for (name, f) in features.iter() {
            let v = match header.iter().position(|h| h == name) {
                Some(j) => csv_to_value(rec.get(j).unwrap_or(""), f, base)
                    .map_err(|r| bad(path, n, format!("{name}: {r}")))?,
                None => Value::Null,
            };
            ex.set(name.to_string(), v);
        }
        out.push(ex);
    }
    Ok(out)
}

/// Stages the cell edits of a JSON lines file: each line an object with an
/// integer `row` (numbered as in the staged version; negative counts from
/// the end) and the new value of each column it names. Returns the cells set.
///
/// # Errors
/// [`Error::Input`] naming the file, line and column, for a line that is
/// not such an object, a value that does not fit its column or a row out of
/// range; [`Error::Io`].
pub fn set_cells(staging: &mut Staging, path: &Path, features: &Features) -> Result<u64> {
    let base = path.parent().unwrap_or(Path::new("."));
    let mut cells = 0;
    for (n, obj) in json_lines(path)? {
        let row = obj
            .get("row")
            .and_then(J::as_i64)
            .ok_or_else(|| bad(path, n, "needs an integer 'row'"))?;
        for (k, v) in obj.iter().filter(|(k, _)| *k != "row") {
            let f = features.get(k).ok_or_else(|| {
                bad(
                    path,
                    n,
                    format!("'{k}' is not a column (columns: {:?})", features.names()),
                )
            })?;
            let v = json_to_value(v, f, base).map_err(|r| bad(path, n, format!("{k}: {r}")))?;
            staging.set_cell(row, k, v).map_err(|e| bad(path, n, e))?;
            cells += 1;
        }
    }
    Ok(cells)
}
