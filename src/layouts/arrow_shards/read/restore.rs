//! Deduped cells put back on read: a shard's refs, read and checked on
//! first use, and the cells they name copied into the rows that hold refs.

use arrow_array::RecordBatch;

use crate::error::{Error, Result};
use crate::layouts::arrow_shards::dedup::{cell_bytes, read_refs, refs_path, restored, CellRef};

use super::shard::ShardData;
use super::ArrowShards;

/// What a reader of a cache with deduped cells needs: the columns that may
/// hold refs and how many refs each shard has.
#[derive(Debug, Clone)]
pub(super) struct DedupRead {
    pub(super) columns: Vec<usize>,
    pub(super) shard_refs: Vec<u64>,
}

impl ArrowShards {
    /// The refs of shard `s` (empty without dedup), read and checked on first use.
    pub(super) fn refs<'a>(&self, s: usize, shard: &'a ShardData) -> Result<&'a [CellRef]> {
        let Some(d) = self.inner.dedup.get() else {
            return Ok(&[]);
        };
        let expected = d.shard_refs.get(s).copied().unwrap_or(0);
        if expected == 0 {
            return Ok(&[]);
        }
        if let Some(r) = shard.refs.get() {
            return Ok(r);
        }
        let (dir, name) = shard.dir_and_name();
        let rows = *shard.batch_starts.last().expect("one entry");
        let r = read_refs(
            self.inner.storage.as_ref(),
            &refs_path(dir, &name),
            expected,
            self.inner.core.starts[s],
            rows,
            &d.columns,
        )?;
        let _ = shard.refs.set(r);
        Ok(shard.refs.get().expect("just set"))
    }

    /// Puts deduped cells back into `batch`, whose row k is shard-local row
    /// `rows[k].1` of shard `rows[k].0`: each gets the bytes of the cell it
    /// refers to (read, and checked when verify-on-read is on, as any row).
    pub(super) fn restore(&self, batch: RecordBatch, rows: &[(usize, u64)]) -> Result<RecordBatch> {
        if self.inner.dedup.get().is_none() {
            return Ok(batch);
        }
        let mut per_col: std::collections::BTreeMap<usize, Vec<(usize, u64)>> =
            std::collections::BTreeMap::new();
        for (k, &(s, local)) in rows.iter().enumerate() {
            let shard = self.shard(s)?;
            let refs = self.refs(s, shard)?;
            if refs.is_empty() {
                continue;
            }
            let lo = refs.partition_point(|r| r.local < local);
            for r in refs[lo..].iter().take_while(|r| r.local == local) {
                per_col
                    .entry(r.column as usize)
                    .or_default()
                    .push((k, r.target));
            }
        }
        if per_col.is_empty() {
            return Ok(batch);
        }
        let mut cols = batch.columns().to_vec();
        for (c, list) in per_col {
            let held: Vec<(RecordBatch, usize)> = list
                .iter()
                .map(|&(_, t)| self.row_batch(t))
                .collect::<Result<_>>()?;
            let values: Vec<&[u8]> = held
                .iter()
                .map(|(b, r)| cell_bytes(b.column(c), *r))
                .collect();
            let at: Vec<usize> = list.iter().map(|&(k, _)| k).collect();
            cols[c] = restored(&cols[c], &at, &values);
        }
        RecordBatch::try_new(batch.schema(), cols)
            .map_err(|e| Error::arrow(Some(&self.inner.core.dir), e))
    }

    /// The deduped cells of shard `i` (0 without dedup), its refs file read
    /// and checked (magic, count, checksum, every ref pointing at an earlier
    /// row of a deduped column).
    ///
    /// # Errors
    /// [`Error::CorruptShard`] naming the refs file; a read error.
    pub fn dedup_refs(&self, i: usize) -> Result<usize> {
        let shard = self.shard(i)?;
        Ok(self.refs(i, shard)?.len())
    }

    /// True when deduped cells may need putting back.
    pub(super) fn has_dedup(&self) -> bool {
        self.inner.dedup.get().is_some()
    }
}
