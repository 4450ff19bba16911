//! The input pipeline over a [`Mixture`]: the same threads, ops and
//! buffers as a dataset's [`Pipeline`](super::Pipeline), claiming the
//! mixture's steps in order instead of an epoch's batches. Each sample's
//! random parameters come from `(seed, 0, g)`, `g` its place in the
//! mixture's global sequence, so the same seed gives the same pixels at any
//! thread count, rank split or resume point; the mixture's state (its
//! weight schedule included) is the pipeline's.

use std::sync::Arc;

use super::batch::{Batch, BatchState, Element};
use super::buffers::BufferPool;
use super::engine::{Claimer, Input, Next, Run, Shared};
use super::options::PipelineOptions;
use super::source::Columns;
use crate::error::{Error, Result};
use crate::mixture::{Mixture, MixtureState};

/// Batches of finished tensors from a mixture, made on a pool of threads.
pub struct MixturePipeline {
    shared: Arc<Shared>,
    opts: PipelineOptions,
    /// The mixture, standing after the last batch consumed.
    mixture: Mixture,
    run: Option<Run>,
}

impl std::fmt::Debug for MixturePipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MixturePipeline")
            .field("state", self.mixture.state())
            .finish_non_exhaustive()
    }
}

impl MixturePipeline {
    /// A pipeline over `mixture` from where it stands, for the partition,
    /// threads, columns and ops of `opts` (its order and seed are the
    /// mixture's; its batch size must be the mixture's).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the column, op or parameter that
    /// cannot be used, or two batch sizes that differ.
    pub fn new(mixture: Mixture, opts: PipelineOptions) -> Result<MixturePipeline> {
        let batch_size = mixture.options().batch_size();
        if opts.loader().batch_size() as u64 != batch_size {
            return Err(Error::InvalidArgument(format!(
                "the pipeline's batch size {} is not the mixture's {batch_size}: give the mixture's",
                opts.loader().batch_size()
            )));
        }
        let columns = Columns::plan_mixture(&mixture, &opts)?;
        let in_flight =
            columns.row_bytes() * batch_size as usize * (opts.threads() + opts.prefetch());
        let shared = Arc::new(Shared {
            buffers: Arc::new(BufferPool::new(in_flight)),
            limits: mixture.decoder().options().limits,
            seed: mixture.options().seed(),
            layout: opts.layout(),
            columns,
            input: Input::Mixture(Box::new(mixture.clone())),
        });
        Ok(MixturePipeline {
            shared,
            opts,
            mixture,
            run: None,
        })
    }

    /// The output columns with their element types.
    pub fn column_elements(&self) -> Vec<(&str, Element)> {
        self.shared.columns.elements()
    }

    /// The pool the batches' large buffers come from (see
    /// [`Pipeline::buffers`](super::Pipeline::buffers)).
    pub fn buffers(&self) -> Arc<BufferPool> {
        self.shared.buffers.clone()
    }

    /// The most memory the batches take at once (being made or waiting).
    pub fn max_bytes_in_flight(&self) -> usize {
        self.shared.columns.row_bytes()
            * self.mixture.options().batch_size() as usize
            * (self.opts.threads() + self.opts.prefetch())
    }

    /// The mixture, standing after the last batch consumed: its state,
    /// progress and schedule.
    pub fn mixture(&self) -> &Mixture {
        &self.mixture
    }

    /// The state after the last batch consumed (see [`Mixture::state`]).
    pub fn state(&self) -> &MixtureState {
        self.mixture.state()
    }

    /// Continues from `state` (any world size).
    ///
    /// # Errors
    /// As [`Mixture::load_state`].
    pub fn load_state(&mut self, state: MixtureState) -> Result<()> {
        let world = self.opts.loader().partition().world_size();
        self.mixture.load_state(state, world)?;
        self.run = None;
        Ok(())
    }

    /// Uses `weights` from global step `step` on; batches made ahead are
    /// made again with them.
    ///
    /// # Errors
    /// As [`Mixture::set_weights`].
    pub fn set_weights(&mut self, step: u64, weights: &[f64]) -> Result<()> {
        self.mixture.set_weights(step, weights)?;
        self.run = None;
        Ok(())
    }

    /// As [`super::Pipeline::ready`].
    pub fn ready(&mut self) -> bool {
        self.run.as_mut().is_some_and(Run::ready)
    }

    /// The next batch; None once every source has dropped out. After an
    /// error the state stays before the failed batch.
    pub fn next_batch(&mut self) -> Option<Result<Batch>> {
        let part = self.opts.loader().partition();
        if self.run.is_none() {
            let claimer = Claimer::Mixture(
                self.mixture.batches(&part),
                self.mixture.options().batch_size(),
            );
            match Run::start(
                self.shared.clone(),
                claimer,
                self.opts.threads(),
                self.opts.prefetch(),
            ) {
                Ok(r) => self.run = Some(r),
                Err(e) => return Some(Err(e)),
            }
        }
        match self.run.as_mut().expect("started above").next() {
            Next::Batch(Ok(b)) => {
                if let BatchState::Mixture { local, .. } = b.state {
                    // This worker's next batch is `local + num_workers`;
                    // the mixture counts from the rank's place.
                    let next = local + u64::from(part.num_workers());
                    self.mixture
                        .set_done(next - u64::from(part.worker()), part.world_size());
                }
                Some(Ok(b))
            }
            Next::Batch(Err(e)) => {
                self.run = None;
                Some(Err(e))
            }
            Next::End => {
                self.run = None;
                None
            }
        }
    }
}

impl Iterator for MixturePipeline {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_batch()
    }
}
