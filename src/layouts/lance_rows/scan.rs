//! Filters on a whole `lance-rows` cache: Lance's scanner reads only the
//! filter's columns, with each row's address, and the caller's predicate
//! keeps rows; addresses are mapped to the cache's row positions. The
//! predicate is evaluated by the caller rather than handed to
//! `Scanner::filter`, whose planner simplifies expressions in ways that
//! break SQL's NULL logic (`NOT (x IN (1)) OR NOT (x IN (0))` keeps a NULL
//! x), so a filter keeps the same rows on every layout. The scan runs on
//! the backend's own opened dataset, so it reads the very version the
//! backend serves.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::UInt64Type;
use arrow_array::{BooleanArray, RecordBatch};
use futures::StreamExt;

use crate::error::{Error, Result};
use crate::lance::{block_on, lance_err};
use crate::layouts::backend::Backend;

use super::read::LanceRows;

impl LanceRows {
    /// The row positions (ascending) that `keep` keeps, given batches of
    /// `columns` read by Lance's scanner.
    ///
    /// # Errors
    /// A Lance error naming the dataset, or `keep`'s.
    pub fn filtered_rows(
        &self,
        columns: &[String],
        keep: &(dyn Fn(&RecordBatch) -> Result<BooleanArray> + Sync),
    ) -> Result<Vec<u64>> {
        let dir = self.core().dir().to_path_buf();
        let state = self.state()?;
        let mut starts = HashMap::new();
        let mut at = 0u64;
        for (f, n) in state.fragments.iter().zip(self.row_counts()) {
            starts.insert(f.id() as u64, at);
            at += n;
        }
        let ds = state.ds.clone();
        let columns = columns.to_vec();
        let batches = block_on(async move {
            let mut scan = ds.scan();
            scan.project(&columns)?;
            scan.with_row_address();
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
        Ok(rows)
    }
}
