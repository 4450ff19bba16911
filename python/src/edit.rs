//! Edits from Python: rows and cells staged over a cache's version,
//! planned, then committed as a new version (see `shardset.edit`).

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use shardset::{Feature, Features};

use crate::convert::{example_from_py, row_to_py, value_from_py};
use crate::error::{BadInputError, OrPy, PyRes};

/// Edits staged over a cache's version (see `shardset.edit`).
#[pyclass(module = "shardset._shardset", name = "Staging")]
pub(crate) struct PyStaging {
    /// None once committed.
    st: Option<shardset::layouts::edit::Staging>,
    features: Arc<Features>,
}

impl PyStaging {
    fn staging(&mut self) -> PyRes<&mut shardset::layouts::edit::Staging> {
        self.st
            .as_mut()
            .ok_or_else(|| BadInputError::new_err("these edits were committed already"))
    }

    fn feature(&self, column: &str) -> PyRes<Feature> {
        self.features.get(column).cloned().ok_or_else(|| {
            BadInputError::new_err(format!(
                "no column '{column}' (columns: {:?})",
                self.features.names()
            ))
        })
    }
}

fn plan_to_py<'py>(
    py: Python<'py>,
    p: &shardset::layouts::edit::EditPlan,
) -> PyRes<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("base_version", p.base_version)?;
    d.set_item("version", p.version)?;
    d.set_item("rows_before", p.rows_before)?;
    d.set_item("rows_after", p.rows_after)?;
    d.set_item("rewritten", p.rewritten.clone())?;
    d.set_item("reused", p.reused.clone())?;
    d.set_item("removed", p.removed.clone())?;
    d.set_item("appended_rows", p.appended_rows)?;
    d.set_item("bytes_estimate", p.bytes_estimate)?;
    Ok(d)
}

#[pymethods]
impl PyStaging {
    /// Rows in the staged view.
    fn __len__(&mut self) -> PyRes<usize> {
        Ok(self.staging()?.len() as usize)
    }

    /// Row `index` of the staged view, as a dict.
    fn get<'py>(&mut self, py: Python<'py>, index: i64) -> PyRes<Bound<'py, PyDict>> {
        let row = self.staging()?.get(index).py()?;
        row_to_py(py, row)
    }

    /// Replaces row `index` (a dict of every column).
    fn set_row(&mut self, index: i64, row: &Bound<'_, PyAny>) -> PyRes<()> {
        let (_, ex) = example_from_py(row, &self.features, index.max(0) as u64)?;
        self.staging()?.set_row(index, ex).py()
    }

    /// Replaces one cell.
    fn set_cell(&mut self, index: i64, column: &str, value: &Bound<'_, PyAny>) -> PyRes<()> {
        let f = self.feature(column)?;
        let v = value_from_py(value, &f)
            .map_err(|e| BadInputError::new_err(format!("column '{column}': {e}")))?;
        self.staging()?.set_cell(index, column, v).py()
    }

    /// Deletes row `index` (later rows move up).
    fn delete(&mut self, index: i64) -> PyRes<()> {
        self.staging()?.delete(index).py()
    }

    /// Appends a row (a dict) at the end.
    fn append(&mut self, row: &Bound<'_, PyAny>) -> PyRes<()> {
        let n = self.staging()?.len();
        let (_, ex) = example_from_py(row, &self.features, n)?;
        self.staging()?.append(ex).py()
    }

    /// What a commit would write, as a dict.
    fn plan<'py>(&mut self, py: Python<'py>) -> PyRes<Bound<'py, PyDict>> {
        let p = self.staging()?.plan().py()?;
        plan_to_py(py, &p)
    }

    /// Publishes the edits as a new version; returns what was done.
    #[pyo3(signature = (message=None))]
    fn commit<'py>(
        &mut self,
        py: Python<'py>,
        message: Option<String>,
    ) -> PyRes<Bound<'py, PyDict>> {
        let mut st = self
            .st
            .take()
            .ok_or_else(|| BadInputError::new_err("these edits were committed already"))?;
        if let Some(m) = message {
            st = st.with_message(m);
        }
        let rep = py.detach(move || st.commit()).py()?;
        let d = PyDict::new(py);
        d.set_item("version", rep.version)?;
        d.set_item("plan", plan_to_py(py, &rep.plan)?)?;
        d.set_item("rows", rep.metadata.num_rows())?;
        d.set_item("bytes_written", rep.change.bytes_written)?;
        d.set_item("seconds", rep.seconds)?;
        Ok(d)
    }
}

/// Stages edits over the current version of the cache at `path`.
#[pyfunction]
pub(crate) fn edit(py: Python<'_>, path: PathBuf) -> PyRes<PyStaging> {
    let st = py
        .detach(move || shardset::open_cache(&path).and_then(|c| c.edit()))
        .py()?;
    Ok(PyStaging {
        features: st.features().clone(),
        st: Some(st),
    })
}
