//! A dataset's fixed-width numbers copied or located by view position,
//! straight from the memory its backend keeps: what the input pipeline
//! and a mixture read batches of numbers with, instead of a take.

use super::Dataset;
use crate::error::Result;

impl Dataset {
    /// Copies the values of fixed-width columns `outs` ((column name, bytes
    /// a value, buffer)) of the rows at view positions (already
    /// normalised, `< len`) into the buffers, row `i` at slot `slots[i]`
    /// ([`Backend::gather_fixed`](crate::layouts::backend::Backend::gather_fixed)). False when the backend cannot, or a
    /// column is not the backend's; the caller then takes the rows.
    ///
    /// # Errors
    /// As [`Backend::take`](crate::layouts::backend::Backend::take).
    pub(crate) fn gather_fixed(
        &self,
        positions: &[u64],
        slots: Option<&[usize]>,
        outs: &mut [(&str, usize, &mut [u8])],
    ) -> Result<bool> {
        // Borrowed, not `schema()`'s clone: the pipeline's threads call this
        // for every batch, and a shared reference count makes the cores
        // trade its cache line.
        let schema = &self.backend.core().schema;
        let mut fixed = Vec::with_capacity(outs.len());
        for (name, width, data) in outs.iter_mut() {
            let Ok(column) = schema.index_of(name) else {
                return Ok(false);
            };
            fixed.push(crate::layouts::gather::FixedOut {
                column,
                width: *width,
                data,
            });
        }
        self.backend
            .gather_fixed(&self.physical_slice(positions), slots, &mut fixed)
    }

    /// The index of stored column `name` among the backend's, what
    /// [`Dataset::locate_fixed_at`] takes (found once by a caller that
    /// locates many batches, such as a mixture for each source).
    pub(crate) fn stored_column(&self, name: &str) -> Option<usize> {
        self.backend.core().schema.index_of(name).ok()
    }

    /// Where the values of fixed-width columns `columns` ((the column's
    /// [`Dataset::stored_column`] index, bytes a value)) of the rows at view
    /// positions (already normalised, `< len`) are: row `i`'s at
    /// `dst[c][slots[i]]`
    /// ([`Backend::locate_fixed`](crate::layouts::backend::Backend::locate_fixed)).
    /// False when the backend cannot, or a column is not the backend's.
    ///
    /// # Errors
    /// As [`Backend::take`](crate::layouts::backend::Backend::take).
    pub(crate) fn locate_fixed_at<'a>(
        &'a self,
        positions: &[u64],
        columns: &[(usize, usize)],
        slots: Option<&[usize]>,
        dst: &mut [Vec<&'a [u8]>],
    ) -> Result<bool> {
        self.backend
            .locate_fixed(&self.physical_slice(positions), columns, slots, dst)
    }
}
