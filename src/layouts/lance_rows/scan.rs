//! Filters on a whole `lance-rows` cache: Lance's scanner reads only the
//! filter's columns, with each row's address, and the caller's predicate
//! keeps rows; addresses are mapped to the cache's row positions. The
//! scanner is given only the filter's plain terms (a column against
//! literals, under the top-level `AND`): with a scalar index on their
//! column, Lance reads only the rows they select. The whole predicate is
//! evaluated by the caller rather than handed to `Scanner::filter`, whose
//! planner simplifies expressions in ways that break SQL's NULL logic
//! (`NOT (x IN (1)) OR NOT (x IN (0))` keeps a NULL x), so a filter keeps
//! the same rows on every layout. The scan runs on
//! the backend's own opened dataset, so it reads the very version the
//! backend serves.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::UInt64Type;
use arrow_array::{BooleanArray, RecordBatch};
use futures::StreamExt;
use lance_datafusion::exec::ExecutionSummaryCounts;
use lance_datafusion::utils::ROWS_SCANNED_METRIC;

use crate::error::{Error, Result};
use crate::lance::{block_on_read, lance_err};
use crate::layouts::backend::Backend;

use super::read::LanceRows;

/// What a filtered scan found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilteredRows {
    /// The row positions kept, ascending.
    pub rows: Vec<u64>,
    /// Rows Lance's scan read (fewer than the cache's when a scalar index
    /// answered the pushed-down terms).
    pub rows_scanned: u64,
}

impl LanceRows {
    /// The row positions (ascending) that `keep` keeps, given batches of
    /// `columns` read by Lance's scanner.
    ///
    /// # Errors
    /// A Lance error naming the dataset, or `keep`'s.
    pub fn filtered_rows(
        &self,
        columns: &[String],
        pushdown: Option<&datafusion_expr::Expr>,
        keep: &(dyn Fn(&RecordBatch) -> Result<BooleanArray> + Sync),
    ) -> Result<FilteredRows> {
        let dir = self.core().dir().to_path_buf();
        let state = self.state()?;
        // The scan opens every fragment's files: each checked first.
        let storage = crate::storage::storage_for(&dir);
        for f in &state.fragments {
            crate::lance::check_fragment_files(storage.as_ref(), &dir, f)?;
        }
        let mut starts = HashMap::new();
        let mut at = 0u64;
        for (f, n) in state.fragments.iter().zip(self.row_counts()) {
            starts.insert(f.id() as u64, at);
            at += n;
        }
        let ds = state.ds.clone();
        let columns = columns.to_vec();
        let pushdown = pushdown.cloned();
        let scanned = Arc::new(AtomicU64::new(0));
        let seen = scanned.clone();
        let batches = block_on_read(&dir, async move {
            let mut scan = ds.scan();
            scan.project(&columns)?;
            scan.with_row_address();
            if let Some(e) = pushdown {
                scan.filter_expr(e);
            }
            scan.scan_stats_callback(Arc::new(move |s: &ExecutionSummaryCounts| {
                let rows = s.all_counts.get(ROWS_SCANNED_METRIC).copied().unwrap_or(0);
                seen.store(rows as u64, Ordering::Relaxed);
            }));
            let mut stream = scan.try_into_stream().await?;
            let mut out = Vec::new();
            while let Some(batch) = stream.next().await {
                out.push(batch?);
            }
            Ok::<_, lance::Error>(out)
        })?
        .map_err(|e| lance_err(&dir, e))?;
        let mut addresses = Vec::new();
        for batch in &batches {
            let kept = keep(batch)?;
            if let Some(a) = batch.column_by_name("_rowaddr") {
                let a = a.as_primitive::<UInt64Type>();
                addresses.extend(kept.values().set_indices().map(|i| a.value(i)));
            }
        }
        let mut rows = addresses
            .into_iter()
            .map(|a| {
                starts
                    .get(&(a >> 32))
                    .map(|s| s + (a & 0xffff_ffff))
                    .ok_or_else(|| {
                        Error::corrupt(
                            &dir,
                            format!("Lance's scan gave row address {a:#x}, of no fragment the cache lists"),
                        )
                    })
            })
            .collect::<Result<Vec<u64>>>()?;
        rows.sort_unstable();
        Ok(FilteredRows {
            rows,
            rows_scanned: scanned.load(Ordering::Relaxed),
        })
    }
}
