//! The input pipeline: a training loop's batches as finished tensors, made
//! in Rust on a pool of threads, with no Python per sample.
//!
//! A [`Pipeline`] reads a [`Dataset`] in the one epoch model's order and
//! rank split (a [`Loader`]'s), runs each image column's [`ops`] (decode,
//! crops, flips, resize, normalisation, output type) and writes every
//! column of a batch straight into one buffer ([`Batch`]). Its threads each
//! make whole batches, claimed in order, and the consumer gets them back in
//! that order, at most `threads + prefetch` batches existing at once.
//!
//! Every sample's random parameters come from `(seed, epoch, k)`, `k` the
//! sample's place in the epoch's order ([`ops::SampleRng`]), so the same
//! seed gives the same pixels whatever the number of threads, the rank
//! split or the point a run resumed from; [`Pipeline::state`] is the
//! [`LoaderState`] of the last batch consumed, and resumes exactly (with
//! another world size or worker count through [`Pipeline::resume_at`]).

mod batch;
mod buffers;
mod columns;
mod engine;
mod gather;
mod mixed;
pub mod ops;
mod options;
mod source;
#[cfg(feature = "video")]
mod windows;

use std::sync::Arc;

pub use batch::{Batch, BatchColumn, BatchState, Element};
pub use buffers::BufferPool;
pub use mixed::MixturePipeline;
pub use options::{Layout, PipelineOptions, DEFAULT_PREFETCH};

use crate::dataset::Dataset;
use crate::error::Result;
use crate::sampler::{EpochPosition, Loader, LoaderState};
use engine::{Claimer, Input, Next, Run, Shared};

/// Batches of finished tensors from a dataset, made on a pool of threads.
pub struct Pipeline {
    shared: Arc<Shared>,
    opts: PipelineOptions,
    /// Where the consumer stands: the state after the last batch it got.
    state: LoaderState,
    run: Option<Run>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("columns", &self.column_names())
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl Pipeline {
    /// A pipeline at the start of epoch 0. Every column and op is checked
    /// here, before any batch is read.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming the
    /// column, op and parameter that cannot be used.
    pub fn new(ds: Dataset, opts: PipelineOptions) -> Result<Pipeline> {
        let columns = source::Columns::plan(&ds, &opts)?;
        let state = Loader::new(ds.clone(), *opts.loader()).state();
        let in_flight =
            columns.row_bytes() * opts.loader().batch_size() * (opts.threads() + opts.prefetch());
        let shared = Arc::new(Shared {
            buffers: Arc::new(BufferPool::new(in_flight)),
            limits: ds.decode_options().limits,
            seed: opts.loader().seed(),
            layout: opts.layout(),
            columns,
            input: Input::Rows(ds),
        });
        Ok(Pipeline {
            shared,
            opts,
            state,
            run: None,
        })
    }

    /// The output columns, in order.
    pub fn column_names(&self) -> Vec<&str> {
        self.column_elements().into_iter().map(|(n, _)| n).collect()
    }

    /// The output columns with their element types.
    pub fn column_elements(&self) -> Vec<(&str, Element)> {
        self.shared.columns.elements()
    }

    /// The pool the batches' large buffers come from: give a consumed
    /// batch's buffers back to it ([`BufferPool::give`]) and the next
    /// batches are written over them instead of fresh memory.
    pub fn buffers(&self) -> Arc<BufferPool> {
        self.shared.buffers.clone()
    }

    /// The options.
    pub fn options(&self) -> &PipelineOptions {
        &self.opts
    }

    /// The dataset read.
    pub fn dataset(&self) -> &Dataset {
        self.ds()
    }

    fn ds(&self) -> &Dataset {
        match &self.shared.input {
            Input::Rows(ds) => ds,
            Input::Mixture(_) => unreachable!("a Pipeline reads a dataset"),
        }
    }

    /// The state after the last batch consumed: save it (serde), and
    /// continue with [`Pipeline::resume`].
    pub fn state(&self) -> LoaderState {
        self.state
    }

    /// Bytes of one full batch.
    pub fn batch_bytes(&self) -> usize {
        self.shared.columns.row_bytes() * self.opts.loader().batch_size()
    }

    /// The most memory the pipeline's batches take at once (being made or
    /// waiting for the consumer), beside those the consumer holds.
    pub fn max_bytes_in_flight(&self) -> usize {
        self.batch_bytes() * (self.opts.threads() + self.opts.prefetch())
    }

    /// Batches this consumer reads in a whole epoch.
    pub fn epoch_batches(&self) -> u64 {
        self.loader_at(self.state)
            .map(|l| l.epoch_batches())
            .unwrap_or(0)
    }

    /// Batches left in the current epoch.
    pub fn remaining_batches(&self) -> u64 {
        let p = self.opts.loader().partition();
        let total = Loader::new(self.ds().clone(), *self.opts.loader())
            .plan()
            .rank_total(p.rank(), &self.state.position);
        let next = self.state.next;
        let w = u64::from(p.num_workers());
        if next >= total {
            0
        } else {
            (total - next).div_ceil(w)
        }
    }

    fn loader_at(&self, state: LoaderState) -> Result<Loader> {
        Loader::resume(self.ds().clone(), *self.opts.loader(), state)
    }

    /// Moves to the start of `epoch` (stopping the batches made ahead).
    pub fn set_epoch(&mut self, epoch: u64) {
        self.run = None;
        let mut l = Loader::new(self.ds().clone(), *self.opts.loader());
        l.set_epoch(epoch);
        self.state = l.state();
    }

    /// Continues from a state this pipeline's partition saved.
    ///
    /// # Errors
    /// As [`Loader::resume`].
    pub fn resume(&mut self, state: LoaderState) -> Result<()> {
        self.loader_at(state)?;
        self.run = None;
        self.state = state;
        Ok(())
    }

    /// Continues from a rank's place saved under any world size or worker
    /// count ([`LoaderState::rank_position`]).
    ///
    /// # Errors
    /// As [`Loader::resume_at`].
    pub fn resume_at(&mut self, position: EpochPosition) -> Result<()> {
        let l = Loader::resume_at(self.ds().clone(), *self.opts.loader(), position)?;
        self.run = None;
        self.state = l.state();
        Ok(())
    }

    /// Whether [`Pipeline::next_batch`] would return at once: the next
    /// batch is made (false at the start of an epoch's run). A binding can
    /// then skip giving up its interpreter lock for the call.
    pub fn ready(&mut self) -> bool {
        self.run.as_mut().is_some_and(Run::ready)
    }

    /// The next batch of the epoch; `None` at its end, after which the
    /// pipeline stands at the start of the next epoch. After an error the
    /// state stays before the failed batch, and the next call tries it
    /// again.
    pub fn next_batch(&mut self) -> Option<Result<Batch>> {
        if self.run.is_none() {
            let loader = match self.loader_at(self.state) {
                Ok(l) => l,
                Err(e) => return Some(Err(e)),
            };
            match Run::start(
                self.shared.clone(),
                Claimer::Epoch(loader),
                self.opts.threads(),
                self.opts.prefetch(),
            ) {
                Ok(r) => self.run = Some(r),
                Err(e) => return Some(Err(e)),
            }
        }
        let run = self.run.as_mut().expect("started above");
        match run.next() {
            Next::Batch(Ok(b)) => {
                if let BatchState::Epoch(s) = b.state {
                    self.state = s;
                }
                Some(Ok(b))
            }
            Next::Batch(Err(e)) => {
                self.run = None;
                Some(Err(e))
            }
            Next::End => {
                let epoch = self.state.position.epoch;
                self.set_epoch(epoch + 1);
                None
            }
        }
    }
}

impl Iterator for Pipeline {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_batch()
    }
}
