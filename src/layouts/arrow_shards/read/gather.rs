//! [`ArrowShards`]' fixed-width gather: each row's values copied from the
//! record batch the shard keeps (or the LRU's, once a call) straight into
//! the caller's buffers, with no Arrow array built
//! ([`crate::layouts::gather`] says why).

use std::collections::hash_map::{Entry, HashMap};

use arrow_array::RecordBatch;

use crate::error::{Error, Result};
use crate::layouts::backend::{normalize_index, Backend};
use crate::layouts::gather::{fixed_bytes, FixedOut};

use super::ArrowShards;

impl ArrowShards {
    /// [`Backend::gather_fixed`] for this layout.
    pub(super) fn gather_fixed_into(
        &self,
        indices: &[i64],
        slots: Option<&[usize]>,
        outs: &mut [FixedOut<'_>],
    ) -> Result<bool> {
        if self.has_dedup() {
            return Ok(false);
        }
        if let Some(s) = slots {
            if s.len() != indices.len() {
                return Err(Error::InvalidArgument(format!(
                    "a gather of {} rows was given {} slots",
                    indices.len(),
                    s.len()
                )));
            }
        }
        let n = self.len();
        // Batches of compressed or remote shards, each decoded (or taken
        // from the LRU) once a call.
        let mut owned: HashMap<(usize, usize), RecordBatch, rustc_hash::FxBuildHasher> =
            HashMap::default();
        for (i, &ix) in indices.iter().enumerate() {
            let row = normalize_index(ix, n)?;
            let (s, local) = self.locate(row);
            let shard = self.shard(s)?;
            let (j, r) = shard.locate(local);
            let batch: &RecordBatch = match shard.kept(j)? {
                Some(b) => b,
                None => match owned.entry((s, j)) {
                    Entry::Occupied(e) => e.into_mut(),
                    Entry::Vacant(e) => e.insert(shard.batch(j, &self.inner.lru)?),
                },
            };
            self.check(s, shard, j, batch, [r])?;
            let slot = slots.map_or(i, |s| s[i]);
            for out in outs.iter_mut() {
                let Some(values) = batch
                    .columns()
                    .get(out.column)
                    .and_then(|a| fixed_bytes(a.as_ref(), out.width))
                else {
                    return Ok(false);
                };
                let (w, len) = (out.width, out.data.len());
                let dst = out.data.get_mut(slot * w..(slot + 1) * w).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "gather slot {slot} is past an output buffer of {len} bytes"
                    ))
                })?;
                dst.copy_from_slice(&values[r * w..(r + 1) * w]);
            }
        }
        Ok(true)
    }
}
