//! Feature inference from JSON-like values, and conversion of those values
//! into [`Value`]s of a declared feature.
//!
//! Inference widens only where no information is lost: `null` takes any
//! type, an int column that meets a float becomes `float64`, and lists unify
//! element-wise. Anything else (a string in an int column, a list in a
//! string column) is a conflict, reported with the line and the column.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value as J;

use crate::error::{Error, Result};
use crate::features::{Dtype, Feature, Features};
use crate::value::{Tensor, TensorElement, Value};

/// What inference has seen of a column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Only nulls (or empty lists, as a list element kind).
    Null,
    /// `true` / `false`.
    Bool,
    /// Integers that fit int64.
    Int,
    /// Numbers with a fraction or exponent (and ints seen with them).
    Float,
    /// Strings.
    Str,
    /// Arrays of the inner kind.
    List(Box<Kind>),
}

impl Kind {
    /// The kind of one JSON value.
    ///
    /// # Errors
    /// A message for objects, integers beyond int64 and arrays mixing kinds.
    pub fn of(v: &J) -> std::result::Result<Kind, String> {
        Ok(match v {
            J::Null => Kind::Null,
            J::Bool(_) => Kind::Bool,
            J::Number(n) if n.is_i64() => Kind::Int,
            J::Number(n) if n.is_u64() => {
                return Err(format!(
                    "integer {n} does not fit int64 (declare the column with --features)"
                ))
            }
            J::Number(_) => Kind::Float,
            J::String(_) => Kind::Str,
            J::Array(items) => {
                let mut k = Kind::Null;
                for it in items {
                    let ik = Kind::of(it)?;
                    k = k.unify(&ik).ok_or_else(|| {
                        format!("a list mixes {} and {}", k.describe(), ik.describe())
                    })?;
                }
                Kind::List(Box::new(k))
            }
            J::Object(_) => {
                return Err("nested objects are not supported (flatten them into columns)".into())
            }
        })
    }

    /// The kind holding both, when there is one.
    pub fn unify(&self, other: &Kind) -> Option<Kind> {
        use Kind::*;
        Some(match (self, other) {
            (Null, k) | (k, Null) => k.clone(),
            (Int, Float) | (Float, Int) => Float,
            (List(a), List(b)) => List(Box::new(a.unify(b)?)),
            (a, b) if a == b => a.clone(),
            _ => return None,
        })
    }

    /// How the kind reads in messages (`int64`, `list of string`, ...).
    pub fn describe(&self) -> String {
        match self {
            Kind::Null => "null".into(),
            Kind::Bool => "bool".into(),
            Kind::Int => "int64".into(),
            Kind::Float => "float64".into(),
            Kind::Str => "string".into(),
            Kind::List(k) => format!("list of {}", k.describe()),
        }
    }

    /// The feature of a column of this kind.
    ///
    /// # Errors
    /// A message when nothing but nulls was seen.
    pub fn feature(&self) -> std::result::Result<Feature, String> {
        Ok(match self {
            Kind::Null => return Err("has no non-null value to infer a type from".into()),
            Kind::Bool => Feature::value(Dtype::Bool),
            Kind::Int => Feature::value(Dtype::Int64),
            Kind::Float => Feature::value(Dtype::Float64),
            Kind::Str => Feature::value(Dtype::String),
            Kind::List(k) => Feature::sequence(k.feature()?),
        })
    }
}

/// Column kinds accumulated over the lines of one file.
#[derive(Debug, Clone, Default)]
pub struct Inference {
    /// (name, kind, first line with a non-null value) in order of first appearance.
    columns: Vec<(String, Kind, u64)>,
    index: HashMap<String, usize>,
    rows: u64,
}

impl Inference {
    /// Nothing seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a column (keeps header order for CSV even if all its cells are empty).
    pub fn declare(&mut self, column: &str) {
        if !self.index.contains_key(column) {
            self.index.insert(column.to_string(), self.columns.len());
            self.columns.push((column.to_string(), Kind::Null, 0));
        }
    }

    /// Counts one row.
    pub fn row(&mut self) {
        self.rows += 1;
    }

    /// Rows counted.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Sees one cell.
    ///
    /// # Errors
    /// [`Error::Input`] naming `path`, the line and the column on a conflict.
    pub fn observe(&mut self, path: &Path, line: u64, column: &str, v: &J) -> Result<()> {
        let k = Kind::of(v)
            .map_err(|e| Error::input(path, Some(line), format!("column '{column}': {e}")))?;
        self.declare(column);
        let i = self.index[column];
        let (_, old, first) = &mut self.columns[i];
        match old.unify(&k) {
            Some(u) => {
                if *old == Kind::Null && k != Kind::Null {
                    *first = line;
                }
                *old = u;
                Ok(())
            }
            None => Err(Error::input(
                path,
                Some(line),
                format!(
                    "column '{column}' holds a {} here, but {} values on earlier lines (first at line {first}); \
                     fix the data or declare the column's type with --features",
                    k.describe(),
                    old.describe()
                ),
            )),
        }
    }

    /// The features inferred.
    ///
    /// # Errors
    /// [`Error::Input`] naming `path` when there is no column, or a column holds only nulls.
    pub fn features(&self, path: &Path) -> Result<Features> {
        if self.columns.is_empty() {
            return Err(Error::input(path, None, "no rows with data (empty file?)"));
        }
        let mut f = Features::new();
        for (name, kind, _) in &self.columns {
            let feat = kind.feature().map_err(|e| {
                Error::input(
                    path,
                    None,
                    format!("column '{name}' {e}; declare its type with --features"),
                )
            })?;
            f.insert(name.clone(), feat);
        }
        Ok(f)
    }
}

/// Converts a JSON value into a value of `feature`. Strings become file
/// paths (relative to `base`) for `Image` and `Video` columns; nested arrays
/// become tensors for `ArrayND` columns.
///
/// # Errors
/// A message saying what was found and what the feature takes.
pub fn json_to_value(v: &J, feature: &Feature, base: &Path) -> std::result::Result<Value, String> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    let found = || Kind::of(v).map(|k| k.describe()).unwrap_or_else(|e| e);
    let bad = |what: &str| format!("{} given, the column is {what}", found());
    Ok(match feature {
        Feature::Value(d) => match (d, v) {
            (Dtype::Bool, J::Bool(b)) => Value::Bool(*b),
            (Dtype::String, J::String(s)) => Value::Str(s.clone()),
            (Dtype::Binary, J::String(s)) => Value::Bytes(s.as_bytes().to_vec().into()),
            (d, J::Number(n)) if d.byte_width().is_some() && *d != Dtype::Bool => {
                if let Some(i) = n.as_i64() {
                    Value::Int(i)
                } else if let Some(u) = n.as_u64() {
                    Value::UInt(u)
                } else {
                    Value::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            _ => return Err(bad(d.name())),
        },
        Feature::ClassLabel(_) => match v {
            J::String(s) => Value::Str(s.clone()),
            J::Number(n) if n.is_i64() => Value::Int(n.as_i64().unwrap_or(-1)),
            _ => return Err(bad("a class label (name or id)")),
        },
        Feature::Sequence(inner) => match v {
            J::Array(items) => Value::List(
                items
                    .iter()
                    .map(|it| json_to_value(it, inner, base))
                    .collect::<std::result::Result<_, _>>()?,
            ),
            _ => return Err(bad("a list")),
        },
        Feature::Image(_) | Feature::Video(_) => match v {
            J::String(s) => Value::Path(base.join(s)),
            _ => return Err(bad("a file path")),
        },
        Feature::Array(a) => {
            let mut shape = Vec::new();
            let mut leaves = Vec::new();
            flatten(v, 0, &mut shape, &mut leaves)?;
            Value::Tensor(Box::new(tensor(a.dtype, shape, &leaves)?))
        }
    })
}

/// Collects the leaves of a rectangular nested array and its shape.
fn flatten<'a>(
    v: &'a J,
    depth: usize,
    shape: &mut Vec<usize>,
    out: &mut Vec<&'a J>,
) -> std::result::Result<(), String> {
    match v {
        J::Array(items) => {
            if shape.len() == depth {
                shape.push(items.len());
            } else if shape.get(depth) != Some(&items.len()) {
                return Err("the nested lists are not rectangular".into());
            }
            for it in items {
                flatten(it, depth + 1, shape, out)?;
            }
            Ok(())
        }
        J::Number(_) | J::Bool(_) if depth == shape.len() => {
            out.push(v);
            Ok(())
        }
        _ => Err("an array needs nested lists of numbers".into()),
    }
}

fn tensor(dtype: Dtype, shape: Vec<usize>, leaves: &[&J]) -> std::result::Result<Tensor, String> {
    fn pack<T: TensorElement>(
        shape: Vec<usize>,
        leaves: &[&J],
        f: impl Fn(&J) -> Option<T>,
    ) -> std::result::Result<Tensor, String> {
        let vals = leaves
            .iter()
            .map(|v| f(v).ok_or_else(|| format!("{v} does not fit {}", T::DTYPE.name())))
            .collect::<std::result::Result<Vec<T>, _>>()?;
        Tensor::from_vec(shape, vals).map_err(|e| e.to_string())
    }
    let int = |v: &J| v.as_i64();
    match dtype {
        Dtype::Int8 => pack::<i8>(shape, leaves, |v| int(v)?.try_into().ok()),
        Dtype::Int16 => pack::<i16>(shape, leaves, |v| int(v)?.try_into().ok()),
        Dtype::Int32 => pack::<i32>(shape, leaves, |v| int(v)?.try_into().ok()),
        Dtype::Int64 => pack::<i64>(shape, leaves, int),
        Dtype::UInt8 => pack::<u8>(shape, leaves, |v| v.as_u64()?.try_into().ok()),
        Dtype::UInt16 => pack::<u16>(shape, leaves, |v| v.as_u64()?.try_into().ok()),
        Dtype::UInt32 => pack::<u32>(shape, leaves, |v| v.as_u64()?.try_into().ok()),
        Dtype::UInt64 => pack::<u64>(shape, leaves, J::as_u64),
        Dtype::Float16 => pack::<half::f16>(shape, leaves, |v| v.as_f64().map(half::f16::from_f64)),
        Dtype::Float32 => pack::<f32>(shape, leaves, |v| v.as_f64().map(|x| x as f32)),
        Dtype::Float64 => pack::<f64>(shape, leaves, J::as_f64),
        Dtype::Bool => {
            let vals = leaves
                .iter()
                .map(|v| {
                    v.as_bool()
                        .map(u8::from)
                        .ok_or("a bool array holds a non-bool")
                })
                .collect::<std::result::Result<Vec<u8>, _>>()?;
            let n: usize = shape.iter().product();
            if n != vals.len() {
                return Err("shape and values disagree".into());
            }
            Ok(Tensor {
                dtype: Dtype::Bool,
                shape,
                data: vals,
            })
        }
        Dtype::String | Dtype::Binary => Err("arrays hold numbers or bools".into()),
    }
}

/// Reads a CSV cell as JSON: empty is null; `true`/`false` (any case) are
/// bools; integers and decimal numbers are numbers; a cell starting with `[`
/// that parses as a JSON array is that array; anything else is a string.
pub fn csv_cell(s: &str) -> J {
    let t = s.trim();
    if t.is_empty() {
        return J::Null;
    }
    if t.eq_ignore_ascii_case("true") {
        return J::Bool(true);
    }
    if t.eq_ignore_ascii_case("false") {
        return J::Bool(false);
    }
    if let Ok(i) = t.parse::<i64>() {
        return J::from(i);
    }
    // Only plain decimal notation: "nan", "inf" or "1_000" stay strings.
    let numeric = t
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'))
        && t.bytes().any(|b| b.is_ascii_digit());
    if numeric {
        if let Some(n) = t.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
            return J::Number(n);
        }
    }
    if t.starts_with('[') {
        if let Ok(a @ J::Array(_)) = serde_json::from_str::<J>(t) {
            return a;
        }
    }
    J::String(s.to_string())
}

/// Converts a CSV cell into a value of `feature`: string columns take the
/// cell as written (an empty cell is null), other columns read it as
/// [`csv_cell`] does.
///
/// # Errors
/// As [`json_to_value`].
pub fn csv_to_value(
    cell: &str,
    feature: &Feature,
    base: &Path,
) -> std::result::Result<Value, String> {
    match feature {
        Feature::Value(Dtype::String) if !cell.is_empty() => Ok(Value::Str(cell.to_string())),
        Feature::Value(Dtype::Binary) if !cell.is_empty() => {
            Ok(Value::Bytes(cell.as_bytes().to_vec().into()))
        }
        Feature::Image(_) | Feature::Video(_) | Feature::ClassLabel(_) if !cell.is_empty() => {
            match feature {
                Feature::ClassLabel(_) => match cell.trim().parse::<i64>() {
                    Ok(i) => Ok(Value::Int(i)),
                    Err(_) => Ok(Value::Str(cell.to_string())),
                },
                _ => Ok(Value::Path(base.join(cell))),
            }
        }
        _ => json_to_value(&csv_cell(cell), feature, base),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_widen_only_without_loss() {
        let p = Path::new("f.jsonl");
        let mut inf = Inference::new();
        for (line, v) in [json!(1), json!(null), json!(2.5)].iter().enumerate() {
            inf.observe(p, line as u64 + 1, "x", v).unwrap();
        }
        inf.observe(p, 1, "s", &json!([1, 2])).unwrap();
        inf.observe(p, 2, "s", &json!([])).unwrap();
        inf.observe(p, 3, "s", &json!([0.5])).unwrap();
        let f = inf.features(p).unwrap();
        assert_eq!(f.get("x"), Some(&Feature::value(Dtype::Float64)));
        assert_eq!(
            f.get("s"),
            Some(&Feature::sequence(Feature::value(Dtype::Float64)))
        );
        let e = inf.observe(p, 9, "x", &json!("a")).unwrap_err().to_string();
        assert!(
            e.contains("f.jsonl:9") && e.contains("'x'") && e.contains("line 1"),
            "{e}"
        );
    }

    #[test]
    fn all_null_columns_and_objects_are_errors() {
        let p = Path::new("f.jsonl");
        let mut inf = Inference::new();
        inf.observe(p, 1, "n", &J::Null).unwrap();
        assert!(inf.features(p).unwrap_err().to_string().contains("'n'"));
        assert!(inf.observe(p, 2, "o", &json!({"a": 1})).is_err());
    }

    #[test]
    fn csv_cells() {
        assert_eq!(csv_cell(""), J::Null);
        assert_eq!(csv_cell("12"), json!(12));
        assert_eq!(csv_cell("-1.5e3"), json!(-1500.0));
        assert_eq!(csv_cell("TRUE"), json!(true));
        assert_eq!(csv_cell("nan"), json!("nan"));
        assert_eq!(csv_cell("[1, 2]"), json!([1, 2]));
        assert_eq!(csv_cell("[oops"), json!("[oops"));
    }

    #[test]
    fn arrays_become_tensors() {
        let f = Feature::array(vec![2, 2], Dtype::UInt8).unwrap();
        let v = json_to_value(&json!([[1, 2], [3, 4]]), &f, Path::new(".")).unwrap();
        match v {
            Value::Tensor(t) => assert_eq!(t.data, vec![1, 2, 3, 4]),
            other => panic!("{other:?}"),
        }
        assert!(json_to_value(&json!([[1, 2], [3]]), &f, Path::new(".")).is_err());
        assert!(json_to_value(&json!([[1, 2], [3, 300]]), &f, Path::new(".")).is_err());
    }
}
