//! The bounded cache of decompressed record batches that every clone of
//! an [`ArrowShards`](super::ArrowShards) shares.

use std::collections::HashMap;

use arrow_array::RecordBatch;

/// Decompressed record batches by (shard, batch), least recently used
/// evicted first, their Arrow memory sizes summing to at most `budget`.
#[derive(Debug)]
pub(crate) struct BatchLru {
    pub(crate) budget: usize,
    pub(crate) used: usize,
    tick: u64,
    map: HashMap<(usize, usize), (RecordBatch, usize, u64)>,
}

impl BatchLru {
    pub(crate) fn new(budget: usize) -> Self {
        BatchLru {
            budget,
            used: 0,
            tick: 0,
            map: HashMap::new(),
        }
    }

    pub(crate) fn get(&mut self, key: (usize, usize)) -> Option<RecordBatch> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(&key).map(|(b, _, t)| {
            *t = tick;
            b.clone()
        })
    }

    /// A new budget; batches are evicted until what is kept fits it.
    pub(crate) fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
        self.evict_to(budget);
    }

    /// Evicts the least recently used batches until at most `limit` bytes remain.
    fn evict_to(&mut self, limit: usize) {
        while self.used > limit {
            let oldest = self
                .map
                .iter()
                .min_by_key(|(_, (_, _, t))| *t)
                .map(|(k, _)| *k)
                .expect("used > 0 means an entry");
            let (_, freed, _) = self.map.remove(&oldest).expect("present");
            self.used -= freed;
        }
    }

    /// Keeps `batch` unless it alone exceeds the budget, evicting the least
    /// recently used batches to make room.
    pub(crate) fn insert(&mut self, key: (usize, usize), batch: &RecordBatch) {
        let size = batch_bytes(batch);
        if size > self.budget || self.map.contains_key(&key) {
            return;
        }
        self.evict_to(self.budget - size);
        self.tick += 1;
        self.used += size;
        self.map.insert(key, (batch.clone(), size, self.tick));
    }
}

/// The bytes a decoded batch's buffers span. Not `get_array_memory_size`:
/// a buffer the IPC file stored uncompressed (arrow-rs does so when
/// compressing would not shrink it) is a slice of the whole mapped file,
/// whose capacity that would count for every batch, so a cache of a few
/// batches' worth would fill the budget.
fn batch_bytes(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0))
        .sum()
}
