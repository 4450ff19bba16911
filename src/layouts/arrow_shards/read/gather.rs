//! [`ArrowShards`]' fixed-width gather: each row's values copied from the
//! record batch the shard keeps (or the LRU's, once a call) straight into
//! the caller's buffers, with no Arrow array built
//! ([`crate::layouts::gather`] says why).
//!
//! Two passes: the first finds every row's values, the second only
//! copies. Random rows are cache misses; in a loop that does nothing else,
//! the processor has many of them in flight at once, where a loop that
//! also searches for the next row's batch has one or two. A shard whose
//! batches it keeps has a table per number column of each batch's value
//! buffer (24 bytes a batch, read without a lock), so finding a row's
//! values reads that table, not the Arrow arrays of a thousand batches
//! scattered over the heap. Where every shard read keeps its batches, the
//! first pass is [`ArrowShards::locate_fixed_in`], which a mixture also
//! runs on each of its sources before one copy of the whole step;
//! otherwise rows of the LRU's batches are found beside them.

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use smallvec::SmallVec;
use std::collections::hash_map::{Entry, HashMap};

use crate::error::{Error, Result};
use crate::layouts::backend::{normalize_index, Backend};
use crate::layouts::gather::{check_slots, copy_values, fixed_buffer, fixed_bytes, FixedOut};

use super::shard::ShardData;
use super::ArrowShards;

type Fx = rustc_hash::FxBuildHasher;

impl ShardData {
    /// The value buffers of column `column` (`width` bytes a value) of
    /// every record batch, made once; None when the shard does not keep its
    /// batches (compressed or remote, and not loaded into memory) or a batch
    /// has nulls or other values there.
    fn fixed_table(&self, column: usize, width: usize) -> Result<Option<&[Buffer]>> {
        let (Some(slot), Some(field)) = (self.fixed.get(column), self.schema.fields().get(column))
        else {
            return Ok(None);
        };
        // A table is of the column's own width; other widths are no table.
        if field.data_type().primitive_width() != Some(width) {
            return Ok(None);
        }
        if let Some(t) = slot.get() {
            return Ok(t.as_deref());
        }
        let mut values = Vec::with_capacity(self.blocks.len());
        for j in 0..self.blocks.len() {
            // Not kept: not cached either, a load into memory may keep them.
            let Some(batch) = self.kept(j)? else {
                return Ok(None);
            };
            match batch
                .columns()
                .get(column)
                .and_then(|a| fixed_buffer(a.as_ref(), width))
            {
                Some(b) => values.push(b),
                None => {
                    let _ = slot.set(None);
                    return Ok(None);
                }
            }
        }
        let _ = slot.set(Some(values));
        Ok(slot.get().and_then(Option::as_deref))
    }
}

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
        check_slots(indices.len(), slots)?;
        // Rows in order from shards that keep their batches: located in
        // one pass, then copied.
        if slots.is_none() && !self.verify_on_read() {
            let columns: Vec<(usize, usize)> = outs.iter().map(|o| (o.column, o.width)).collect();
            let mut dst: Vec<Vec<&[u8]>> =
                outs.iter().map(|_| vec![&[][..]; indices.len()]).collect();
            if self.locate_fixed_in(indices, &columns, None, &mut dst)? {
                for (out, src) in outs.iter_mut().zip(&dst) {
                    copy_values(out, src, None)?;
                }
                return Ok(true);
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
        // Each shard's tables of the columns, where it keeps its batches
        // (and rows need no check against their checksums).
        let mut tables: HashMap<usize, Option<Vec<&[Buffer]>>, Fx> = HashMap::default();
        if !self.verify_on_read() {
            for &(s, _, _) in &at {
                if let Entry::Vacant(e) = tables.entry(s) {
                    let shard = self.shard(s)?;
                    let mut all = Vec::with_capacity(outs.len());
                    for o in outs.iter() {
                        match shard.fixed_table(o.column, o.width)? {
                            Some(t) => all.push(t),
                            None => break,
                        }
                    }
                    e.insert((all.len() == outs.len()).then_some(all));
                }
            }
        }
        let tabled = |s: usize| tables.get(&s).and_then(Option::as_ref);
        // Batches of compressed or remote shards, each decoded (or taken
        // from the LRU) once a call.
        let mut owned: HashMap<(usize, usize), RecordBatch, Fx> = HashMap::default();
        for &(s, j, _) in &at {
            if tabled(s).is_some() {
                continue;
            }
            let shard = self.shard(s)?;
            if shard.kept(j)?.is_none() && !owned.contains_key(&(s, j)) {
                owned.insert((s, j), shard.batch(j, &self.inner.lru)?);
            }
        }
        // Each with room for every row (`vec![v; n]` clones `v`, and a
        // clone has no spare capacity).
        let mut sources: Vec<Vec<&[u8]>> = (0..outs.len())
            .map(|_| Vec::with_capacity(at.len()))
            .collect();
        for &(s, j, r) in &at {
            if let Some(t) = tabled(s) {
                for ((out, src), values) in outs.iter().zip(sources.iter_mut()).zip(t) {
                    let w = out.width;
                    src.push(&values[j].as_slice()[r * w..(r + 1) * w]);
                }
                continue;
            }
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

    /// [`Backend::locate_fixed`] for this layout: only where every shard
    /// read keeps its batches and needs no check against its checksums.
    pub(super) fn locate_fixed_in<'a>(
        &'a self,
        indices: &[i64],
        columns: &[(usize, usize)],
        slots: Option<&[usize]>,
        dst: &mut [Vec<&'a [u8]>],
    ) -> Result<bool> {
        if self.has_dedup() || self.verify_on_read() {
            return Ok(false);
        }
        check_slots(indices.len(), slots)?;
        if dst.len() != columns.len() {
            return Err(Error::InvalidArgument(format!(
                "{} columns to locate were given {} outputs",
                columns.len(),
                dst.len()
            )));
        }
        let n = self.len();
        // Each shard's tables of the columns, found at its first row; the
        // last row's shard is tried first (a step's rows of a one-shard
        // cache, or a run of rows in one shard, then skip the lookups).
        // Which of `tables` is a shard's: searched along a short list, by a
        // hash past it (no allocation for a step's few shards).
        type Tables<'t> = SmallVec<[&'t [Buffer]; 4]>;
        let mut tables: SmallVec<[(&'a ShardData, Tables<'a>); 4]> = SmallVec::new();
        let mut few: SmallVec<[usize; 8]> = SmallVec::new();
        let mut many: HashMap<usize, usize, Fx> = HashMap::default();
        let mut last: Option<(usize, usize)> = None;
        for (i, &ix) in indices.iter().enumerate() {
            let (s, local) = self.locate(normalize_index(ix, n)?);
            let here = match last {
                Some((ls, here)) if ls == s => here,
                _ => {
                    let known = match few.iter().position(|&f| f == s) {
                        Some(k) => Some(k),
                        None => many.get(&s).copied(),
                    };
                    let here = match known {
                        Some(k) => k,
                        None => {
                            let shard = self.shard(s)?;
                            let mut all = Tables::new();
                            for &(column, width) in columns {
                                match shard.fixed_table(column, width)? {
                                    Some(t) => all.push(t),
                                    None => return Ok(false),
                                }
                            }
                            tables.push((shard.as_ref(), all));
                            let k = tables.len() - 1;
                            if few.len() < few.inline_size() {
                                few.push(s);
                            } else {
                                many.insert(s, k);
                            }
                            k
                        }
                    };
                    last = Some((s, here));
                    here
                }
            };
            let (shard, t) = &tables[here];
            let (j, r) = shard.locate(local);
            let k = slots.map_or(i, |sl| sl[i]);
            for ((out, &(_, w)), values) in dst.iter_mut().zip(columns).zip(t.iter()) {
                let Some(d) = out.get_mut(k) else {
                    return Err(Error::InvalidArgument(format!(
                        "slot {k} of a gather past its {} outputs",
                        out.len()
                    )));
                };
                *d = &values[j].as_slice()[r * w..(r + 1) * w];
            }
        }
        Ok(true)
    }
}
