//! Mixtures of datasets: batches drawn from several sources by weight, with
//! exact resume also after the weights change.
//!
//! Sample `g` of the global sequence (step `g / batch_size`) comes from a
//! source drawn by the weights in force at its step ([`DrawUnit`]: per
//! sample, or per batch for homogeneous batches). Within a source, rows
//! follow that source's own epoch orders ([`Sampler`], its seed derived
//! from the mixture's), without replacement; a source that runs out starts
//! its next epoch or drops out ([`SourceEnd`]). [`Mixture::set_weights`]
//! changes the weights from a step on; the schedule of changes is part of
//! the [`MixtureState`], so a state saved at any step and loaded again
//! continues the very same sequence.
//!
//! Steps are split over ranks and workers as the one epoch model splits
//! batches ([`crate::sampler::EpochBatches`]): global step `base + j`
//! goes to rank `j % world_size` as its rank-local batch `j / world_size`,
//! and rank-local batch `i` to worker `i % num_workers`. Every consumer
//! replays the draws of all steps (a few random numbers a sample) and reads
//! only its own rows, so the state is one place in the sequence, restated
//! for another world size as a prefix of the steps, as the epoch model does.
//!
//! Columns: those every source has, by name and feature, or per-source
//! mappings (rename, select), checked when the mixture is made.

mod batches;
mod columns;
mod draw;
mod step;

use std::num::NonZeroU64;
use std::sync::Arc;

use arrow_array::RecordBatch;
use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::features::Features;
use crate::sampler::{Order, Partition, Sampler};
pub use columns::MixedParts;

pub(crate) use batches::DrawnStep;
pub use batches::{MixtureBatches, MixturePlan};
pub use draw::{Cursor, DrawUnit, Schedule, SourceEnd};
pub use step::StepRows;
pub(crate) use step::StepScratch;

/// One source of a mixture.
#[derive(Debug, Clone)]
pub struct MixtureSource {
    name: String,
    dataset: Dataset,
    weight: f64,
    end: SourceEnd,
    columns: Option<Vec<(String, String)>>,
}

impl MixtureSource {
    /// `dataset` (any view: columns, filter, split) drawn with `weight`,
    /// cycling through epochs, with its columns as they are.
    pub fn new(name: impl Into<String>, dataset: Dataset, weight: f64) -> Self {
        MixtureSource {
            name: name.into(),
            dataset,
            weight,
            end: SourceEnd::Cycle,
            columns: None,
        }
    }

    /// What the source does when its rows run out.
    pub fn with_end(mut self, end: SourceEnd) -> Self {
        self.end = end;
        self
    }

    /// The mixture's columns from this source: `(output name, the source's
    /// column)` pairs (a rename and a selection), checked when the mixture
    /// is made.
    pub fn with_columns(mut self, columns: Vec<(String, String)>) -> Self {
        self.columns = Some(columns);
        self
    }
}

/// A mixture's options: batch size, seed, draw unit and the sources' epoch
/// order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MixtureOptions {
    batch_size: NonZeroU64,
    seed: u64,
    draw: DrawUnit,
    order: Order,
}

impl Default for MixtureOptions {
    fn default() -> Self {
        MixtureOptions {
            batch_size: NonZeroU64::new(256).expect("non-zero"),
            seed: 0,
            draw: DrawUnit::Sample,
            order: Order::Random,
        }
    }
}

impl MixtureOptions {
    /// Samples per step (per batch).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0.
    pub fn try_with_batch_size(mut self, n: u64) -> Result<Self> {
        self.batch_size = NonZeroU64::new(n).ok_or_else(|| {
            Error::InvalidArgument("a mixture's batch_size must be at least 1".into())
        })?;
        Ok(self)
    }

    /// The seed of the draws and of the sources' epoch orders.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Draws per sample or per batch.
    pub fn with_draw(mut self, draw: DrawUnit) -> Self {
        self.draw = draw;
        self
    }

    /// The order of each source's epochs (default: random).
    pub fn with_order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }

    /// Samples per step.
    pub fn batch_size(&self) -> u64 {
        self.batch_size.get()
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }
}

/// A saved place in a mixture's sequence, with what it refers to (checked
/// when loaded). Serialisable (JSON in Python's `state_dict`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MixtureState {
    /// The first global step of this segment, and the rows each source gave
    /// before it.
    pub base: Cursor,
    /// Rank-local batches yielded since `base`.
    pub done: u64,
    /// The world size `done` counts in.
    pub world_size: u32,
    /// The weight schedule.
    pub schedule: Schedule,
    /// The options the sequence was drawn with.
    pub options: MixtureOptions,
    /// Each source's name, rows and end.
    pub sources: Vec<(String, u64, SourceEnd)>,
}

/// Where a source stands at a place in the sequence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceProgress {
    /// The source's name.
    pub name: String,
    /// Rows it has given (over all its epochs).
    pub rows_consumed: u64,
    /// Its epochs completed.
    pub epochs_completed: u64,
    /// True when it has run out and dropped out (`exhaust`).
    pub exhausted: bool,
}

/// One step's batch.
#[derive(Debug, Clone)]
pub struct MixtureBatch {
    /// Its global step.
    pub step: u64,
    /// Its rank-local index (since the state's base).
    pub local: u64,
    /// The rows, in the mixture's columns (stored cells; see
    /// [`Mixture::decoder`]).
    pub batch: RecordBatch,
    /// The source of each row.
    pub sources: Vec<u32>,
}

/// Several datasets drawn by weight (see the module docs).
#[derive(Debug, Clone)]
pub struct Mixture {
    names: Vec<String>,
    datasets: Vec<Dataset>,
    samplers: Vec<Sampler>,
    plans: Vec<columns::SourceColumns>,
    features: Arc<Features>,
    /// The features' Arrow schema, made once (every batch is built on it).
    schema: arrow_schema::SchemaRef,
    draws: draw::Draws,
    opts: MixtureOptions,
    state: MixtureState,
}

impl Mixture {
    /// A mixture of `sources` at step 0.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming what cannot be used: no source, a
    /// repeated name, an empty source, a bad weight, a frames cache (read
    /// its windows by themselves), or columns that do not match.
    pub fn new(sources: Vec<MixtureSource>, opts: MixtureOptions) -> Result<Mixture> {
        if sources.is_empty() {
            return Err(Error::InvalidArgument(
                "a mixture needs at least one source".into(),
            ));
        }
        let names: Vec<String> = sources.iter().map(|s| s.name.clone()).collect();
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return Err(Error::InvalidArgument(format!(
                    "two mixture sources are named '{n}': give each its own name"
                )));
            }
        }
        for s in &sources {
            if s.dataset.is_empty() {
                return Err(Error::InvalidArgument(format!(
                    "mixture source '{}' has no rows",
                    s.name
                )));
            }
            if s.dataset.backend().layout() == "lance-video-frames" {
                return Err(Error::InvalidArgument(format!(
                    "mixture source '{}' is a video frames cache: mixtures read rows of arrow-shards and lance-rows caches",
                    s.name
                )));
            }
        }
        let weights: Vec<f64> = sources.iter().map(|s| s.weight).collect();
        draw::check_weights(&weights, sources.len())?;
        let datasets: Vec<Dataset> = sources.iter().map(|s| s.dataset.clone()).collect();
        let mappings: Vec<_> = sources.iter().map(|s| s.columns.clone()).collect();
        let (features, plans) = columns::plan(&names, &datasets, &mappings)?;
        let samplers = datasets
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let seed = opts.seed ^ (i as u64 + 1).wrapping_mul(0xD6E8_FEB8_6659_FD93);
                Sampler::new(d, opts.order, seed)
            })
            .collect();
        let rows: Vec<u64> = datasets.iter().map(Dataset::len).collect();
        let ends: Vec<SourceEnd> = sources.iter().map(|s| s.end).collect();
        let draws = draw::Draws {
            rows: rows.clone(),
            ends: ends.clone(),
            seed: opts.seed,
            batch_size: opts.batch_size(),
            unit: opts.draw,
        };
        let state = MixtureState {
            base: Cursor {
                step: 0,
                counts: vec![0; sources.len()],
            },
            done: 0,
            world_size: 1,
            schedule: Schedule::new(weights),
            options: opts,
            sources: names
                .iter()
                .zip(rows)
                .zip(ends)
                .map(|((n, r), e)| (n.clone(), r, e))
                .collect(),
        };
        Ok(Mixture {
            names,
            datasets,
            samplers,
            plans,
            schema: features.arrow_schema(),
            features,
            draws,
            opts,
            state,
        })
    }

    /// The mixture's columns.
    pub fn features(&self) -> &Arc<Features> {
        &self.features
    }

    /// The sources' names, in order.
    pub fn source_names(&self) -> &[String] {
        &self.names
    }

    /// A decoder of the mixture's batches into typed rows, with the first
    /// source's decode options.
    pub fn decoder(&self) -> crate::features::decode::RowDecoder {
        crate::features::decode::RowDecoder::new(
            self.features.clone(),
            self.datasets[0].decode_options().clone(),
        )
    }

    /// The options.
    pub fn options(&self) -> &MixtureOptions {
        &self.opts
    }

    /// Where the mixture stands.
    pub fn state(&self) -> &MixtureState {
        &self.state
    }

    /// The global step after the batches yielded (every rank at the same
    /// step).
    pub fn step(&self) -> u64 {
        self.state.base.step + self.state.done * u64::from(self.state.world_size)
    }

    /// Records that this rank yielded `done` rank-local batches since the
    /// state's base, in a world of `world_size` ranks.
    pub fn set_done(&mut self, done: u64, world_size: u32) {
        // Called for every batch a pipeline hands over: the state is
        // cloned only when the world size changes it.
        let world = world_size.max(1);
        if world != self.state.world_size {
            self.state = self.restated(world);
        }
        self.state.done = done;
    }

    /// Uses `weights` from global step `step` on (replacing later changes).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for bad weights, or a step already
    /// consumed.
    pub fn set_weights(&mut self, step: u64, weights: &[f64]) -> Result<()> {
        draw::check_weights(weights, self.names.len())?;
        let now = self.step();
        if step < now {
            return Err(Error::InvalidArgument(format!(
                "step {step} is already consumed (the mixture is at step {now}): weights change from step {now} on or later"
            )));
        }
        self.state.schedule.set(step, weights.to_vec());
        Ok(())
    }

    /// The state restated for a world of `world_size` ranks: the steps
    /// consumed become the base (draws replayed up to it).
    fn restated(&self, world_size: u32) -> MixtureState {
        let mut s = self.state.clone();
        if world_size != s.world_size {
            let mut base = s.base.clone();
            self.draws.advance_to(&s.schedule, &mut base, self.step());
            s.base = base;
            s.done = 0;
            s.world_size = world_size;
        }
        s
    }

    /// Continues from `state`, in a world of `world_size` ranks.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the state is for other options or
    /// sources (names, rows, ends), or its schedule is not valid.
    pub fn load_state(&mut self, state: MixtureState, world_size: u32) -> Result<()> {
        if state.options != self.opts {
            return Err(Error::InvalidArgument(format!(
                "the state is for mixture options {:?}, this mixture has {:?}",
                state.options, self.opts
            )));
        }
        if state.sources != self.state.sources {
            return Err(Error::InvalidArgument(format!(
                "the state is for sources {:?}, this mixture has {:?} (names, rows, ends)",
                state.sources, self.state.sources
            )));
        }
        if state.base.counts.len() != self.names.len() || state.world_size == 0 {
            return Err(Error::InvalidArgument(
                "the state's position does not fit this mixture".into(),
            ));
        }
        Schedule::from_changes(state.schedule.changes().to_vec(), self.names.len())?;
        self.state = state;
        self.state = self.restated(world_size.max(1));
        Ok(())
    }

    /// Each source's rows consumed and epochs completed at the mixture's
    /// step.
    pub fn progress(&self) -> Vec<SourceProgress> {
        let mut c = self.state.base.clone();
        self.draws
            .advance_to(&self.state.schedule, &mut c, self.step());
        self.names
            .iter()
            .enumerate()
            .map(|(s, n)| SourceProgress {
                name: n.clone(),
                rows_consumed: c.counts[s],
                epochs_completed: c.counts[s] / self.draws.rows[s],
                exhausted: self.draws.ends[s] == SourceEnd::Exhaust
                    && c.counts[s] >= self.draws.rows[s],
            })
            .collect()
    }

    /// This consumer's batches from the mixture's place on: rank-local
    /// batches `done + worker`, `done + worker + num_workers`, … of
    /// `part`'s rank, until every source has dropped out (never, when one
    /// cycles). The world size is `part`'s (the state is restated for it).
    pub fn batches(&self, part: &Partition) -> MixtureBatches {
        let state = self.restated(part.world_size());
        MixtureBatches {
            mix: self.clone(),
            cursor: state.base.clone(),
            base: state.base.step,
            next: state.done + u64::from(part.worker()),
            rank: u64::from(part.rank()),
            world: u64::from(part.world_size()),
            stride: u64::from(part.num_workers()),
            orders: vec![None; self.datasets.len()],
            memo: draw::DrawMemo::default(),
            before: Vec::new(),
            schedule: state.schedule,
            ended: false,
        }
    }
}

impl Mixture {
    /// The rows of a plan, in the mixture's columns (stored cells).
    ///
    /// # Errors
    /// Read errors of the sources.
    pub fn read(&self, rows: &StepRows) -> Result<RecordBatch> {
        columns::assemble(&self.schema, &self.datasets, &self.plans, rows)
    }

    /// The rows of a plan read, one batch per source, not yet in draw
    /// order (for a reader that puts them in place itself, as the input
    /// pipeline does).
    ///
    /// # Errors
    /// Read errors of the sources.
    pub fn read_parts(&self, rows: &StepRows) -> Result<columns::MixedParts> {
        columns::take_parts(&self.schema, &self.datasets, &self.plans, rows)
    }

    /// Copies the values of fixed-width output columns `outs` ((name,
    /// bytes a value, buffer)) of one step's rows into the buffers, in
    /// draw order: located in every source and copied once where the
    /// sources keep their values in memory, else one gather a source;
    /// false when a source cannot (then [`Mixture::read_parts`]).
    ///
    /// # Errors
    /// Read errors.
    pub(crate) fn gather_fixed(
        &self,
        rows: &StepRows,
        outs: &mut [(&str, usize, &mut [u8])],
    ) -> Result<bool> {
        if columns::locate_then_copy(&self.datasets, &self.plans, rows, outs)? {
            return Ok(true);
        }
        columns::gather_parts(&self.datasets, &self.plans, rows, outs)
    }
}
