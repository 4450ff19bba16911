//! Filters pushed down to Lance's scanner: on a whole `lance-rows` cache a
//! filter is handed to `Scanner::filter`, which reads only the filter's
//! columns (pages it can rule out by their statistics not at all) and
//! gives back row addresses, mapped here to the cache's row positions. The
//! scan runs on the backend's own opened dataset, so it reads the very
//! version the backend serves.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::UInt64Type;
use futures::StreamExt;

use crate::error::{Error, Result};
use crate::lance::{block_on, lance_err};
use crate::layouts::backend::Backend;

use super::read::LanceRows;

impl LanceRows {
    /// The row positions (ascending) for which the SQL predicate `filter`,
    /// reading `columns`, is true, by Lance's scanner.
    ///
    /// # Errors
    /// A Lance error naming the dataset (the filter was checked before, by
    /// the same planner).
    pub fn filtered_rows(&self, filter: &str, columns: &[String]) -> Result<Vec<u64>> {
        let dir = self.core().dir().to_path_buf();
        let state = self.state()?;
        let mut starts = HashMap::new();
        let mut at = 0u64;
        for (f, n) in state.fragments.iter().zip(self.row_counts()) {
            starts.insert(f.id() as u64, at);
            at += n;
        }
        let ds = state.ds.clone();
        let filter = filter.to_string();
        let columns = columns.to_vec();
        let addresses = block_on(async move {
            let mut scan = ds.scan();
            scan.project(&columns)?;
            scan.filter(&filter)?;
            scan.with_row_address();
            let mut stream = scan.try_into_stream().await?;
            let mut out = Vec::new();
            while let Some(batch) = stream.next().await {
                let batch = batch?;
                if let Some(a) = batch.column_by_name("_rowaddr") {
                    out.extend_from_slice(a.as_primitive::<UInt64Type>().values());
                }
            }
            Ok::<_, lance::Error>(out)
        })?
        .map_err(|e| lance_err(&dir, e))?;
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
