//! Sample orders and the epoch model for training: which rows an epoch
//! visits in which order ([`Sampler`], [`Order`]), how its batches split over
//! ranks and workers and how a place in it is saved and restated
//! ([`EpochBatches`], [`EpochPosition`]), and a [`Loader`] that reads one
//! consumer's share with a small serialisable [`LoaderState`].
//!
//! Iteration is a pure function of `(order, seed, epoch, position)`: nothing
//! is exchanged between processes, and resuming from a saved place yields
//! exactly the rest of the epoch: nothing twice, nothing lost.

mod epoch;
mod loader;
mod order;

pub use epoch::{EpochBatches, EpochPosition, Remainder};
pub use loader::{Loader, LoaderOptions, LoaderState, Partition};
pub use order::{Order, Sampler, WithinShard};
