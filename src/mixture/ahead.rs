//! A source's next epoch order, made on a thread of its own while the
//! source's current epoch is read.
//!
//! Why: a source that starts another epoch in the middle of a mixture's
//! epoch needs a new permutation of all its rows (2 to 9 ms for 400,000
//! rows here), and it needed it at once, in the claim of the step that
//! crossed, under the pipeline's claims lock: the batch waited for it, and
//! so did every other pipeline thread. Cut at a single cache's epoch, a
//! mixture of three such sources crosses about once an epoch, a few
//! percent of the epoch's time. Made ahead, from the middle of the current
//! epoch on, the permutation is ready when the step crosses. It is a pure
//! function of (order, seed, epoch), so the rows are the same whether it
//! was made ahead or in the claim.

use std::sync::mpsc::{sync_channel, Receiver};

use crate::sampler::Sampler;
use crate::util::fork_generation;

/// Sources with fewer rows make their next order in the claim: a thread
/// costs more than their shuffle.
const AHEAD_MIN_ROWS: u64 = 1 << 16;

/// One source's next epoch order, being made.
#[derive(Debug)]
pub(super) struct Ahead {
    epoch: u64,
    /// Taken by [`Ahead::take`], or left alone in a forked child.
    order: Option<Receiver<Vec<u64>>>,
    /// The fork generation that started the thread: a forked child's copy
    /// has no thread behind it.
    generation: u64,
}

impl Ahead {
    /// Starts making epoch `epoch`'s order of a source of `rows` rows, or
    /// None for a small source (or no thread to be had: the claim makes
    /// it then).
    pub(super) fn start(sampler: &Sampler, epoch: u64, rows: u64) -> Option<Ahead> {
        if rows < AHEAD_MIN_ROWS {
            return None;
        }
        let sampler = sampler.clone();
        let (tx, rx) = sync_channel(1);
        std::thread::Builder::new()
            .name("shardset-order".into())
            .spawn(move || {
                // A consumer gone before it is done drops the order.
                let _ = tx.send(sampler.epoch_order(epoch));
            })
            .ok()?;
        Some(Ahead {
            epoch,
            order: Some(rx),
            generation: fork_generation(),
        })
    }

    /// The epoch whose order this makes.
    pub(super) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The order, waited for; None in a forked child (its thread was the
    /// parent's: the channel is left alone, as a lock it holds could be
    /// held for ever) or when the thread failed.
    pub(super) fn take(mut self) -> Option<Vec<u64>> {
        if self.generation != fork_generation() {
            return None;
        }
        self.order.take()?.recv().ok()
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        if self.generation != fork_generation() {
            // Not dropped: its channel's state is the parent's.
            std::mem::forget(self.order.take());
        }
    }
}
