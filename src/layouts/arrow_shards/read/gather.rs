//! [`ArrowShards`]' fixed-width gather: each row's values copied from the
//! record batch the shard keeps (or the LRU's, once a call) straight into
//! the caller's buffers, with no Arrow array built
//! ([`crate::layouts::gather`] says why).
//!
//! Two passes: the first finds every row's record batch and its values
//! (the shard's metadata, in cache), the second only copies. Random rows
//! are cache misses; in a loop that does nothing else, the processor has
//! many of them in flight at once, where a loop that also searches for
//! the next row's batch has one or two.

use std::collections::HashMap;

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
        // Where each row is: (shard, record batch, row in it).
        let n = self.len();
        let mut at = Vec::with_capacity(indices.len());
        for &ix in indices {
            let (s, local) = self.locate(normalize_index(ix, n)?);
            let (j, r) = self.shard(s)?.locate(local);
            at.push((s, j, r));
        }
        // Batches of compressed or remote shards, each decoded (or taken
        // from the LRU) once a call.
        let mut owned: HashMap<(usize, usize), RecordBatch, rustc_hash::FxBuildHasher> =
            HashMap::default();
        for &(s, j, _) in &at {
            let shard = self.shard(s)?;
            if shard.kept(j)?.is_none() && !owned.contains_key(&(s, j)) {
                owned.insert((s, j), shard.batch(j, &self.inner.lru)?);
            }
        }
        let mut sources: Vec<Vec<&[u8]>> = vec![Vec::with_capacity(at.len()); outs.len()];
        for &(s, j, r) in &at {
            let shard = self.shard(s)?;
            let batch = match shard.kept(j)? {
                Some(b) => b,
                None => &owned[&(s, j)],
            };
            self.check(s, shard, j, batch, [r])?;
            for (out, src) in outs.iter().zip(sources.iter_mut()) {
                let w = out.width;
                let Some(values) = batch
                    .columns()
                    .get(out.column)
                    .and_then(|a| fixed_bytes(a.as_ref(), w))
                else {
                    return Ok(false);
                };
                src.push(&values[r * w..(r + 1) * w]);
            }
        }
        for (out, src) in outs.iter_mut().zip(&sources) {
            copy_values(out, src, slots)?;
        }
        Ok(true)
    }
}

/// Copies `src[i]` to slot `slots[i]` (or `i`) of `out`: a loop that only
/// copies, with the width known to the compiler for the usual widths.
fn copy_values(out: &mut FixedOut<'_>, src: &[&[u8]], slots: Option<&[usize]>) -> Result<()> {
    let w = out.width;
    let need = match slots {
        Some(s) => s.iter().max().map_or(0, |m| m + 1),
        None => src.len(),
    };
    if need * w > out.data.len() {
        return Err(Error::InvalidArgument(format!(
            "a gather into {} bytes needs {} ({need} slots of {w} bytes)",
            out.data.len(),
            need * w
        )));
    }
    fn run<const W: usize>(dst: &mut [u8], src: &[&[u8]], slots: Option<&[usize]>) {
        match slots {
            None => {
                for (d, s) in dst.chunks_exact_mut(W).zip(src) {
                    d.copy_from_slice(&s[..W]);
                }
            }
            Some(slots) => {
                for (&k, s) in slots.iter().zip(src) {
                    dst[k * W..(k + 1) * W].copy_from_slice(&s[..W]);
                }
            }
        }
    }
    match w {
        1 => run::<1>(out.data, src, slots),
        2 => run::<2>(out.data, src, slots),
        4 => run::<4>(out.data, src, slots),
        8 => run::<8>(out.data, src, slots),
        _ => {
            for (i, s) in src.iter().enumerate() {
                let k = slots.map_or(i, |sl| sl[i]);
                out.data[k * w..(k + 1) * w].copy_from_slice(s);
            }
        }
    }
    Ok(())
}
