//! [`ArrowShards`] as a [`Backend`]: rows by index, takes, slices and
//! batch iteration, with remote shards fetched ahead.

use std::borrow::Cow;
use std::collections::hash_map::{Entry, HashMap};

use arrow_array::RecordBatch;

use crate::error::{Error, Result};
use crate::features::decode::RowDecoder;
use crate::layouts::backend::{
    normalize_index, shard_order, Backend, BatchIter, IterOptions, RowsCore,
};
use crate::value::Row;

use super::{ArrowShards, PREFETCH_SHARDS};

impl Backend for ArrowShards {
    fn layout(&self) -> &'static str {
        crate::cache::metadata::LAYOUT_ARROW_SHARDS
    }

    fn core(&self) -> &RowsCore {
        &self.inner.core
    }

    fn get_raw(&self, index: i64) -> Result<RecordBatch> {
        let row = normalize_index(index, self.len())?;
        let (batch, r) = self.row_batch(row)?;
        self.restore(batch.slice(r, 1), &[self.locate(row)])
    }

    fn get(&self, index: i64) -> Result<Row> {
        self.get_with(index, &self.inner.core.decoder)
    }

    fn get_with(&self, index: i64, decoder: &RowDecoder) -> Result<Row> {
        if self.has_dedup() {
            return decoder.decode_row(&self.get_raw(index)?, 0);
        }
        let row = normalize_index(index, self.len())?;
        let (batch, r) = self.row_batch(row)?;
        decoder.decode_row(&batch, r)
    }

    fn take(&self, indices: &[i64]) -> Result<RecordBatch> {
        let n = self.len();
        if indices.is_empty() {
            return Ok(RecordBatch::new_empty(self.schema()));
        }
        // Each batch once, found by a map: random rows of a shuffled epoch
        // touch a batch each.
        let mut batches: Vec<Cow<'_, RecordBatch>> = Vec::new();
        let mut slots: HashMap<(usize, usize), usize, rustc_hash::FxBuildHasher> =
            HashMap::with_capacity_and_hasher(indices.len().min(1024), Default::default());
        let mut picks: Vec<(usize, usize)> = Vec::with_capacity(indices.len());
        let mut locs: Vec<(usize, u64)> = Vec::new();
        for &ix in indices {
            let row = normalize_index(ix, n)?;
            let (s, local) = self.locate(row);
            if self.has_dedup() {
                locs.push((s, local));
            }
            let shard = self.shard(s)?;
            let (j, r) = shard.locate(local);
            let slot = match slots.entry((s, j)) {
                Entry::Occupied(e) => *e.get(),
                Entry::Vacant(e) => {
                    batches.push(shard.batch_cow(j, &self.inner.lru)?);
                    *e.insert(batches.len() - 1)
                }
            };
            self.check(s, shard, j, &batches[slot], [r])?;
            picks.push((slot, r));
        }
        if batches.len() == 1 {
            let (first, last) = (picks[0].1, picks[picks.len() - 1].1);
            let contiguous = last >= first
                && last - first + 1 == picks.len()
                && picks.windows(2).all(|w| w[1].1 == w[0].1 + 1);
            if contiguous {
                return self.restore(batches[0].slice(first, picks.len()), &locs);
            }
        }
        let refs: Vec<&RecordBatch> = batches.iter().map(|b| b.as_ref()).collect();
        let out = arrow_select::interleave::interleave_record_batch(&refs, &picks)
            .map_err(|e| Error::arrow(Some(&self.inner.core.dir), e))?;
        self.restore(out, &locs)
    }

    fn gather_fixed(
        &self,
        indices: &[i64],
        slots: Option<&[usize]>,
        outs: &mut [crate::layouts::gather::FixedOut<'_>],
    ) -> Result<bool> {
        self.gather_fixed_into(indices, slots, outs)
    }

    fn locate_fixed<'a>(
        &'a self,
        indices: &[i64],
        columns: &[(usize, usize)],
        slots: Option<&[usize]>,
        dst: &mut [Vec<&'a [u8]>],
    ) -> Result<bool> {
        self.locate_fixed_in(indices, columns, slots, dst)
    }

    fn slice(&self, start: u64, len: u64) -> Result<RecordBatch> {
        if self.has_dedup() && start < self.len() {
            // Rows by index, so each deduped cell is put back.
            let end = start.saturating_add(len).min(self.len());
            let idx: Vec<i64> = (start..end).map(|i| i as i64).collect();
            return self.take(&idx);
        }
        let end = start.saturating_add(len);
        crate::layouts::backend::slice_from_pieces(
            self.len(),
            start,
            len,
            &self.schema(),
            &self.inner.core.dir,
            // Each piece runs from `row` to its batch's end or the slice's.
            |row| self.row_batch_checking(row, end - row),
        )
    }

    fn iter_batches(&self, opts: &IterOptions) -> Result<BatchIter<'_>> {
        let order = shard_order(opts, self.num_shards())?;
        let this = self.clone();
        let ahead = order.clone();
        let iter = order.into_iter().enumerate().flat_map(move |(k, s)| {
            let this = this.clone();
            // Remote shards: the next ones in this order are fetched into
            // the disk cache while this one is read.
            for &next in ahead.iter().skip(k + 1).take(PREFETCH_SHARDS) {
                this.prefetch(next);
            }
            let nb = match this.shard(s) {
                Ok(d) => d.blocks.len(),
                Err(e) => return Box::new(std::iter::once(Err(e))) as BatchIter<'static>,
            };
            Box::new((0..nb).map(move |j| {
                let d = this.shard(s)?;
                let batch = d.batch(j, &this.inner.lru)?;
                this.check(s, d, j, &batch, 0..batch.num_rows())?;
                if !this.has_dedup() || this.refs(s, d)?.is_empty() {
                    return Ok(batch);
                }
                let (a, b) = (d.batch_starts[j], d.batch_starts[j + 1]);
                let locs: Vec<(usize, u64)> = (a..b).map(|l| (s, l)).collect();
                this.restore(batch, &locs)
            }))
        });
        Ok(Box::new(iter))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn reads_remotely(&self) -> bool {
        self.inner.storage_is_remote
    }

    fn prefetch_rows(&self, rows: &[u64]) {
        if !self.inner.storage_is_remote {
            return;
        }
        let n = self.len();
        let mut seen = std::collections::BTreeSet::new();
        for &r in rows.iter().filter(|&&r| r < n) {
            seen.insert(self.locate(r).0);
        }
        for s in seen {
            self.prefetch(s);
        }
    }

    fn reopened(&self) -> Box<dyn Backend> {
        let i = &self.inner;
        let names: Vec<String> = i.shards.iter().map(|s| s.name.clone()).collect();
        let fresh = ArrowShards::new(
            &i.core.dir,
            &names,
            &i.core.row_counts,
            i.core.features.clone(),
            i.core.decoder.clone(),
            i.build_id.clone(),
        )
        .with_cache_bytes(self.cache_bytes())
        .with_verify_on_read(self.verify_on_read());
        let fresh = match i.dedup.get() {
            Some(d) => fresh.with_dedup(d.columns.clone(), d.shard_refs.clone()),
            None => fresh,
        };
        // A copy of a cache held in memory is mapped: loading it again in
        // every worker would multiply the memory the guard allowed once.
        Box::new(fresh)
    }
}
