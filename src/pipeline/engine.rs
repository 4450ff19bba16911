//! The pipeline's threads: each takes the next batch of the epoch (in the
//! one epoch model's order, under a lock held only to claim it), reads its
//! rows and assembles every column alone, so batches are independent and
//! any number of threads gives the same batches; the consumer puts them
//! back in order. A pool of tokens bounds the batches that exist at once
//! (being made or waiting), so memory stays bounded whatever the speed of
//! the consumer. Dropping the run (the pipeline, or an epoch left early)
//! stops the threads and joins them.
//!
//! The tokens are a counter, not a channel: the consumer gives one back
//! with an atomic add, and a thread that finds none spins and yields a few
//! times (another thread, the consumer, may take a batch meanwhile), then
//! parks with a timeout and looks again. The consumer's thread is the one
//! the training loop waits for, and waking a parked thread is a system call
//! on it; on a virtual machine, where an idle vCPU is halted, that wake
//! took ~10 µs (a tenth of the batches of the scalar loop of
//! `docs/benchmarks/pipeline.md` took 10-14 µs in `__next__` against a
//! median of 2-4: one wake every other batch). So the consumer wakes the
//! threads only when it runs short: when fewer than half of `prefetch` made
//! batches wait for it, or before it waits itself; in the batches after it
//! waited (the threads are the slower side), when fewer than `prefetch`
//! wait. A consumer slower than the threads (a training step) leaves the
//! made batches queued, and the threads wake on their own timers, on their
//! own cores; threads slower than the consumer are woken at once, as with a
//! channel. (Parking at once, with a timer alone, made runs where the
//! threads are the slower side a third slower: with more threads than
//! cores, a thread that yields lets the consumer take a batch.)

use std::collections::VecDeque;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{unbounded, Receiver, Sender};
use crossbeam_utils::Backoff;

use super::batch::{Batch, BatchState};
use super::buffers::BufferPool;
use super::columns::SampleKeys;
use super::options::Layout;
use super::source::Columns;
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::mixture::{DrawnStep, Mixture, MixtureBatches, StepScratch};
use crate::sampler::Loader;
use crate::util::fork_generation;
use crate::util::limits::DecodeLimits;

/// What the threads read rows from: a dataset in the epoch model's order,
/// or a mixture's steps.
pub(crate) enum Input {
    /// A dataset (any view).
    Rows(Dataset),
    /// A mixture of datasets.
    Mixture(Box<Mixture>),
}

/// What every thread reads batches with.
pub(crate) struct Shared {
    pub(crate) input: Input,
    pub(crate) columns: Columns,
    pub(crate) seed: u64,
    pub(crate) layout: Layout,
    pub(crate) limits: DecodeLimits,
    pub(crate) buffers: Arc<BufferPool>,
}

/// Where the threads claim batches: an epoch's batches (a [`Loader`]), or
/// a mixture's steps.
pub(crate) enum Claimer {
    /// The batches a loader has left in its epoch.
    Epoch(Loader),
    /// A consumer's steps of a mixture, and its batch size.
    Mixture(MixtureBatches, u64),
}

/// Which rows a claimed batch holds.
enum ClaimRows {
    /// View positions of the dataset.
    Positions(Vec<u64>),
    /// The mixture's step, drawn: each row's source and view position.
    Mixed(DrawnStep),
}

/// One batch claimed, not yet read: its epoch, each sample's key (its place
/// in the epoch's order, or in the mixture's sequence), its rows, and the
/// state after it.
struct Claim {
    epoch: u64,
    keys: Range<u64>,
    rows: ClaimRows,
    state: BatchState,
}

impl Claimer {
    /// The next batch to make; a mixture's step in the vectors of
    /// `scratch` (the claiming thread's, given back after the batch).
    fn claim(&mut self, scratch: &mut StepScratch) -> Option<Claim> {
        match self {
            Claimer::Epoch(l) => l.next_span().map(|(epoch, span, positions)| Claim {
                epoch,
                keys: span,
                rows: ClaimRows::Positions(positions),
                state: BatchState::Epoch(l.state()),
            }),
            Claimer::Mixture(m, batch_size) => m.next_drawn(std::mem::take(scratch)).map(|d| {
                // The keys and the rows' places are the reading thread's
                // work, out of the lock.
                let first = d.step() * *batch_size;
                Claim {
                    epoch: 0,
                    keys: first..first + d.len() as u64,
                    state: BatchState::Mixture {
                        step: d.step(),
                        local: d.local(),
                    },
                    rows: ClaimRows::Mixed(d),
                }
            }),
        }
    }
}

impl Shared {
    /// One batch: its rows read, every column assembled; a mixture's step
    /// vectors go back to `scratch`.
    fn make(&self, claim: Claim, scratch: &mut StepScratch) -> Result<Batch> {
        // Collected here, out of the claims' lock.
        let listed: Vec<u64> = claim.keys.collect();
        let keys = SampleKeys {
            seed: self.seed,
            epoch: claim.epoch,
            keys: &listed,
            limits: &self.limits,
            layout: self.layout,
            buffers: &self.buffers,
        };
        let (columns, positions, sources) = match (&self.input, claim.rows) {
            (Input::Rows(ds), ClaimRows::Positions(p)) => {
                (self.columns.fill(ds, &p, &keys)?, p, Vec::new())
            }
            (Input::Mixture(m), ClaimRows::Mixed(drawn)) => {
                let rows = drawn.place().rows;
                let columns = self.columns.fill_mixed(m, &rows, &keys)?;
                let (sources, positions, kept) = rows.into_parts_and_scratch();
                *scratch = kept;
                (columns, positions, sources)
            }
            _ => unreachable!("a dataset's claims are positions, a mixture's are mixed"),
        };
        Ok(Batch {
            columns,
            positions,
            sources,
            state: claim.state,
        })
    }
}

/// The batches still to claim, shared by the threads.
struct Claims {
    claimer: Claimer,
    seq: u64,
}

/// One epoch's (or the rest of one epoch's) threads and the batches they made.
pub(crate) struct Run {
    /// Tokens free: batches the threads may start.
    tokens: Arc<AtomicUsize>,
    /// The batches made ahead: with fewer than half of them waiting (fewer
    /// than all of them, just after the consumer waited), the consumer
    /// wakes the threads.
    prefetch: usize,
    /// Takes left before the consumer counts as the slower side again:
    /// set when it waits for a batch.
    starved: u32,
    results: Receiver<(u64, Result<Batch>)>,
    /// Batches made out of order: slot `i` is batch `next_seq + i` (at
    /// most the batches in flight, so the ring stops allocating once it
    /// has grown to that).
    pending: VecDeque<Option<Result<Batch>>>,
    next_seq: u64,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// The fork generation that started the threads: a forked child holds
    /// a copy of the run without its threads.
    generation: u64,
}

/// What [`Run::next`] found.
pub(crate) enum Next {
    /// The next batch in order (or the error that made it).
    Batch(Result<Batch>),
    /// The epoch's batches are all out.
    End,
}

impl Run {
    /// Starts `threads` threads on the batches `claimer` has left, with at
    /// most `threads + prefetch` batches existing at once.
    pub(crate) fn start(
        shared: Arc<Shared>,
        claimer: Claimer,
        threads: usize,
        prefetch: usize,
    ) -> Result<Run> {
        let tokens = Arc::new(AtomicUsize::new(threads + prefetch));
        let (results_tx, results) = unbounded();
        let claims = Arc::new(Mutex::new(Claims { claimer, seq: 0 }));
        let stop = Arc::new(AtomicBool::new(false));
        let mut run = Run {
            tokens: tokens.clone(),
            prefetch,
            starved: 0,
            results,
            pending: VecDeque::new(),
            next_seq: 0,
            stop: stop.clone(),
            threads: Vec::with_capacity(threads),
            generation: fork_generation(),
        };
        for i in 0..threads {
            let (shared, claims, flag) = (shared.clone(), claims.clone(), stop.clone());
            let (tokens, results_tx) = (tokens.clone(), results_tx.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("shardset-pipeline-{i}"))
                .spawn(move || work(&shared, &claims, &flag, &tokens, &results_tx));
            match spawned {
                Ok(h) => run.threads.push(h),
                Err(e) => {
                    // Dropping the run stops and joins the threads started.
                    drop(run);
                    return Err(Error::InvalidArgument(format!(
                        "cannot start pipeline thread {i}: {e}; ask for fewer threads"
                    )));
                }
            }
        }
        Ok(run)
    }

    /// Keeps batch `seq` until its turn.
    fn keep(&mut self, seq: u64, b: Result<Batch>) {
        let i = (seq - self.next_seq) as usize;
        if self.pending.len() <= i {
            self.pending.resize_with(i + 1, || None);
        }
        self.pending[i] = Some(b);
    }

    /// Whether the next batch in order is made (so [`Run::next`] will not
    /// wait for it).
    pub(crate) fn ready(&mut self) -> bool {
        loop {
            if matches!(self.pending.front(), Some(Some(_))) {
                return true;
            }
            match self.results.try_recv() {
                Ok((seq, b)) => self.keep(seq, b),
                // Empty, or the threads are gone: `next` tells which.
                Err(_) => return false,
            }
        }
    }

    /// The next batch in the epoch's order, waiting for it.
    pub(crate) fn next(&mut self) -> Next {
        loop {
            if let Some(Some(b)) = self.pending.front_mut().map(Option::take) {
                self.pending.pop_front();
                self.next_seq += 1;
                // The batch taken lets a thread start another.
                self.tokens.fetch_add(1, Ordering::Release);
                self.starved = self.starved.saturating_sub(1);
                let low = if self.starved > 0 {
                    self.prefetch
                } else {
                    self.prefetch.div_ceil(2)
                };
                if self.waiting() < low {
                    self.wake();
                }
                return Next::Batch(b);
            }
            // About to wait: a parked thread may have a token, and the
            // threads are the slower side for the next batches.
            self.starved = STARVED_TAKES;
            self.wake();
            match self.results.recv() {
                Ok((seq, b)) => self.keep(seq, b),
                Err(_) if self.pending.iter().all(Option::is_none) => return Next::End,
                Err(_) => {
                    return Next::Batch(Err(Error::Panic {
                        what: "pipeline",
                        message: format!(
                            "batch {} of the run was never made (a thread ended early)",
                            self.next_seq
                        ),
                    }))
                }
            }
        }
    }

    /// Made batches waiting to be taken.
    fn waiting(&self) -> usize {
        self.results.len() + self.pending.iter().filter(|b| b.is_some()).count()
    }

    /// Wakes every parked thread (no system call for one that is not).
    fn wake(&self) {
        for h in &self.threads {
            h.thread().unpark();
        }
    }

    /// Stops the threads and waits for them (each finishes the batch it is on).
    fn shut(&mut self) {
        if self.generation != fork_generation() {
            // A forked child's copy: the threads are the parent's, and
            // joining them (or taking a lock one held) could wait for ever.
            for h in self.threads.drain(..) {
                std::mem::forget(h);
            }
            std::mem::forget(std::mem::take(&mut self.pending));
            return;
        }
        self.stop.store(true, Ordering::SeqCst);
        self.wake();
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
        self.pending.clear();
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.shut();
    }
}

/// One thread: a token, a claim, a batch, until the epoch's batches are
/// all claimed or the run stops.
fn work(
    shared: &Shared,
    claims: &Mutex<Claims>,
    stop: &AtomicBool,
    tokens: &AtomicUsize,
    results: &Sender<(u64, Result<Batch>)>,
) {
    fine_timer();
    let mut scratch = StepScratch::default();
    loop {
        if !take_token(tokens, stop) {
            return;
        }
        let claim = {
            let mut c = claims.lock().unwrap_or_else(|p| p.into_inner());
            match c.claimer.claim(&mut scratch) {
                None => return,
                Some(claim) => {
                    let seq = c.seq;
                    c.seq += 1;
                    (seq, claim)
                }
            }
        };
        let (seq, claim) = claim;
        let batch = catch_unwind(AssertUnwindSafe(|| shared.make(claim, &mut scratch)))
            .unwrap_or_else(|p| Err(Error::from_panic("pipeline batch", p)));
        if results.send((seq, batch)).is_err() {
            return;
        }
    }
}

/// Takes after a wait during which the threads count as the slower side.
const STARVED_TAKES: u32 = 16;

/// A thread's first nap when it finds no token, and its longest: a nap
/// grows by half while no token comes. The first is short against a batch
/// of scalar rows taken every ~20 µs, and growing slowly it stays below a
/// fast consumer's pace; the longest bounds how late a thread starts after
/// a slow consumer (a training step) gives a token back while it has half
/// of `prefetch` made batches or more still to take.
const NAP_FIRST: Duration = Duration::from_micros(20);
const NAP_LONGEST: Duration = Duration::from_micros(500);

/// Takes a token, parked while there is none (until the consumer wakes
/// the thread, or its nap ends) after a few spins and yields; false once
/// the run stops.
fn take_token(tokens: &AtomicUsize, stop: &AtomicBool) -> bool {
    let backoff = Backoff::new();
    let mut nap = NAP_FIRST;
    loop {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        if tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |free| {
                free.checked_sub(1)
            })
            .is_ok()
        {
            return true;
        }
        if backoff.is_completed() {
            std::thread::park_timeout(nap);
            nap = (nap * 3 / 2).min(NAP_LONGEST);
        } else {
            backoff.snooze();
        }
    }
}

/// Lets this thread's naps end on time: Linux lets a normal thread's timer
/// fire up to 50 µs late (its timer slack), longer than the first nap.
fn fine_timer() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes an integer and changes only this
    // thread's timer slack; a refusal leaves the default, which is safe.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong, 0, 0, 0);
    }
}
