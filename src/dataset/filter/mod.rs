//! Filters as views: `Dataset::filter_expr("label = 3 AND score > 0.5")`
//! keeps the rows whose predicate is true, evaluated once into a row
//! selection that samplers, loaders and the input pipeline then see as any
//! other view (an index list).
//!
//! How the rows are found, cheapest first:
//! 1. a selection kept beside the cache by an earlier open with the same
//!    filter, for the same version of the same rows (`store`);
//! 2. on a whole `lance-rows` cache, Lance's scanner, which reads only the
//!    filter's columns with their row addresses, given the filter's plain
//!    terms (so a scalar index answers them and fewer rows are read), the
//!    whole predicate evaluated here (`layouts::lance_rows::scan`);
//! 3. otherwise here, on the view's Arrow batches (`expr`).
//!
//! A whole local cache keeps what 2 and 3 found; a sub-view, a cache on
//! object storage or a read-only one evaluates on every call, and the
//! report says why nothing was kept.

mod expr;
mod store;

use std::path::PathBuf;

use crate::error::Result;
use crate::layouts::open::Cache;

use super::Dataset;
use expr::Predicate;

/// Where a filter's rows came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterSource {
    /// A selection kept beside the cache by an earlier call.
    Kept,
    /// Lance's scanner, reading only the filter's columns.
    LanceScan,
    /// Evaluated on the view's Arrow batches.
    Evaluated,
}

/// What [`Dataset::filter_expr_report`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterReport {
    /// The filter, trimmed.
    pub filter: String,
    /// The columns it reads.
    pub columns: Vec<String>,
    /// Rows of the view it was applied to.
    pub rows_in: u64,
    /// Rows it kept.
    pub rows_kept: u64,
    /// Where the rows came from.
    pub source: FilterSource,
    /// The file holding the selection, when one is kept.
    pub kept_at: Option<PathBuf>,
    /// Why no selection is kept, when none is.
    pub not_kept: Option<String>,
    /// Rows Lance's scan read, when the rows came from one: fewer than
    /// `rows_in` when a scalar index answered the filter's plain terms.
    pub rows_scanned: Option<u64>,
}

/// What names the rows of an opened cache: its metadata (with its edit
/// version), its Lance version, its layout and its row count.
fn version_key(cache: &Cache) -> Result<String> {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(cache.layout.as_bytes());
    h.update(cache.metadata.to_json().to_string().as_bytes());
    h.update(&cache.len().to_le_bytes());
    if let Some(rows) = lance_rows(cache) {
        h.update(&rows.lance_version()?.to_le_bytes());
    }
    Ok(format!("{:032x}", h.digest128()))
}

fn lance_rows(cache: &Cache) -> Option<&crate::layouts::lance_rows::read::LanceRows> {
    cache
        .backend
        .as_any()
        .downcast_ref::<crate::layouts::lance_rows::read::LanceRows>()
}

impl Dataset {
    /// The rows of this view for which the SQL predicate `filter` is true,
    /// in view order (see [`Dataset::filter_expr_report`]).
    ///
    /// # Errors
    /// As [`Dataset::filter_expr_report`].
    pub fn filter_expr(&self, filter: &str) -> Result<Dataset> {
        Ok(self.filter_expr_report(filter)?.0)
    }

    /// The rows of this view for which `filter` is true, and how they were
    /// found. `filter` is SQL over the cache's scalar columns (`Value`s and
    /// `ClassLabel` ids): comparisons, `IN`, `BETWEEN`, `LIKE`, `AND`/`OR`/
    /// `NOT`, `IS [NOT] NULL`. A row whose predicate is NULL is not kept
    /// (three-valued logic, as a `WHERE` clause).
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] naming the filter and the reason (empty,
    /// not SQL, an unknown or non-scalar column, not a predicate) before
    /// any row is read; read errors as any read.
    pub fn filter_expr_report(&self, filter: &str) -> Result<(Dataset, FilterReport)> {
        let pred = Predicate::compile(filter, self.backend.features(), &self.backend.schema())?;
        let whole = self.cache.as_deref().filter(|_| self.is_identity());
        let mut report = FilterReport {
            filter: pred.sql().to_string(),
            columns: pred.columns().to_vec(),
            rows_in: self.len(),
            rows_kept: 0,
            source: FilterSource::Evaluated,
            kept_at: None,
            not_kept: None,
            rows_scanned: None,
        };
        let keep_at = match whole {
            None => {
                report.not_kept = Some("a view of part of a cache: evaluated on each call".into());
                None
            }
            Some(c) if c.storage.name() != "local" => {
                report.not_kept = Some(format!(
                    "a cache on {} storage: evaluated on each open",
                    c.storage.name()
                ));
                None
            }
            Some(c) => {
                let filter_key = format!(
                    "{:032x}",
                    xxhash_rust::xxh3::xxh3_128(pred.sql().as_bytes())
                );
                Some((
                    c,
                    store::selection_path(&c.dir, &version_key(c)?, &filter_key),
                ))
            }
        };
        let rows = match &keep_at {
            Some((c, path)) => store::load(c.storage.as_ref(), path, self.len()),
            None => None,
        };
        let rows = match rows {
            Some(rows) => {
                report.source = FilterSource::Kept;
                report.kept_at = keep_at.as_ref().map(|(_, p)| p.clone());
                rows
            }
            None => {
                let rows = match whole.and_then(lance_rows) {
                    Some(lance) => {
                        report.source = FilterSource::LanceScan;
                        let found = lance
                            .filtered_rows(pred.columns(), pred.pushdown(), &|b| pred.keep(b))?;
                        report.rows_scanned = Some(found.rows_scanned);
                        found.rows
                    }
                    None => self.evaluate(&pred)?,
                };
                if let Some((c, path)) = &keep_at {
                    match store::save(c.storage.as_ref(), path, self.len(), &rows) {
                        Ok(()) => report.kept_at = Some(path.clone()),
                        Err(e) => {
                            report.not_kept = Some(format!("the selection could not be kept: {e}"))
                        }
                    }
                }
                rows
            }
        };
        report.rows_kept = rows.len() as u64;
        Ok((self.select_positions(&rows), report))
    }

    /// View positions whose predicate is true, read batch by batch.
    fn evaluate(&self, pred: &Predicate) -> Result<Vec<u64>> {
        let mut out = Vec::new();
        let mut pos = 0u64;
        for batch in self.iter_arrow(8192)? {
            let batch = batch?;
            let keep = pred.keep(&batch)?;
            out.extend(keep.values().set_indices().map(|i| pos + i as u64));
            pos += batch.num_rows() as u64;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::store::{decode, encode};

    #[test]
    fn a_selection_round_trips_and_damage_is_ignored() {
        for rows in [vec![], vec![0, 5, 99], (0..100).collect::<Vec<u64>>()] {
            let bytes = encode(100, &rows);
            assert_eq!(decode(100, &bytes).as_deref(), Some(&rows[..]));
            assert_eq!(decode(101, &bytes), None, "another row count");
            for cut in [0, 8, bytes.len() - 1] {
                assert_eq!(decode(100, &bytes[..cut]), None, "cut at {cut}");
            }
            let mut flipped = bytes.clone();
            flipped[17] ^= 1;
            assert_eq!(decode(100, &flipped), None, "a flipped bit");
        }
    }
}
