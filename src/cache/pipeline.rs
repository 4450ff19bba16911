//! The encode pipeline shared by every row writer.
//!
//! ```text
//! generator (caller's thread) --chunks--> rayon pool (encode) --batches--> writer thread (in order)
//! ```
//! The generator runs on the calling thread (it need not be `Send`), cuts
//! examples into chunks of `batch_size`, and hands each chunk to the rayon
//! pool. Encoded batches reach one writer thread that restores input order
//! and calls the sink. A bounded token channel caps the chunks in flight, so a
//! slow sink (disk) stalls the generator and peak memory is a few batches,
//! whatever the number of rows.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arrow_array::RecordBatch;
use crossbeam_channel::{bounded, unbounded};

use crate::error::{BoxError, Error, Result};
use crate::features::encode::BatchEncoder;
use crate::features::Features;
use crate::value::Example;

/// Examples per record batch unless set (the reference's default).
pub const DEFAULT_BATCH_SIZE: NonZeroUsize = NonZeroUsize::new(1000).unwrap();

/// A batch size of at least 1: the one place it is checked.
///
/// # Errors
/// [`Error::InvalidArgument`] for 0.
pub fn checked_batch_size(n: usize) -> Result<NonZeroUsize> {
    NonZeroUsize::new(n)
        .ok_or_else(|| Error::InvalidArgument("batch_size must be at least 1".into()))
}

/// Knobs of the encode pipeline (execution only: they never change the cache's content).
#[derive(Debug, Clone, Copy)]
pub struct PipelineOptions {
    /// Examples per record batch.
    pub batch_size: std::num::NonZeroUsize,
    /// Encode threads (0 = one per core).
    pub threads: usize,
    /// How PNG images encoded from pixels are deflated.
    pub png: crate::features::image::PngCompression,
    /// Position of the first example in the whole build (non-zero when a
    /// build resumes), used to number rows in errors.
    pub row_offset: u64,
}

/// Runs the pipeline; returns the number of rows handed to the sink.
///
/// # Errors
/// The first error of the generator ([`Error::Generator`]), of encoding
/// ([`Error::Encode`]), of the sink, or a panic of any stage ([`Error::Panic`]).
pub fn run<I, E, S>(
    examples: I,
    features: Arc<Features>,
    staging_dir: &Path,
    opts: PipelineOptions,
    mut sink: S,
) -> Result<u64>
where
    I: IntoIterator<Item = std::result::Result<Example, E>>,
    E: Into<BoxError>,
    S: FnMut(RecordBatch) -> Result<()> + Send,
{
    let (pool, threads) = thread_pool(opts.threads, "encode")?;
    let max_in_flight = threads * 2 + 2;
    let (slot_tx, slot_rx) = bounded::<()>(max_in_flight);
    let (res_tx, res_rx) = unbounded::<(u64, Result<RecordBatch>)>();
    let abort = Arc::new(AtomicBool::new(false));
    let staging = Arc::new(staging_dir.to_path_buf());

    std::thread::scope(|scope| {
        let abort_w = abort.clone();
        let writer = scope.spawn(move || -> Result<u64> {
            let mut next = 0u64;
            let mut rows = 0u64;
            let mut pending: BTreeMap<u64, RecordBatch> = BTreeMap::new();
            let result = (|| {
                for (seq, res) in res_rx.iter() {
                    pending.insert(seq, res?);
                    while let Some(batch) = pending.remove(&next) {
                        rows += batch.num_rows() as u64;
                        sink(batch)?;
                        next += 1;
                        // Free one in-flight slot for the generator.
                        let _ = slot_rx.try_recv();
                    }
                }
                Ok(rows)
            })();
            if result.is_err() {
                abort_w.store(true, Ordering::SeqCst);
            }
            // Dropping slot_rx here unblocks a generator waiting for a slot.
            result
        });

        // One catch_unwind around the whole loop: a panicking generator
        // becomes an error, and items move straight into the chunk.
        let gen_result = catch_unwind(AssertUnwindSafe(|| -> Result<()> {
            let mut chunk: Vec<Example> = Vec::with_capacity(opts.batch_size.get());
            let mut seq = 0u64;
            let mut rows = opts.row_offset;
            let mut chunk_start = opts.row_offset;
            let mut dispatch = |chunk: Vec<Example>, start: u64| -> bool {
                if slot_tx.send(()).is_err() || abort.load(Ordering::SeqCst) {
                    return false;
                }
                let features = features.clone();
                let tx = res_tx.clone();
                let staging = staging.clone();
                let my_seq = seq;
                seq += 1;
                pool.spawn(move || {
                    let res = catch_unwind(AssertUnwindSafe(|| {
                        let mut enc = BatchEncoder::new(features, Some(staging.as_path()))
                            .with_png_compression(opts.png);
                        for (k, ex) in chunk.into_iter().enumerate() {
                            enc.append(ex, start + k as u64)?;
                        }
                        enc.finish()
                    }))
                    .unwrap_or_else(|p| Err(Error::from_panic("encoder", p)));
                    let _ = tx.send((my_seq, res));
                });
                true
            };
            for item in examples {
                match item {
                    Ok(ex) => chunk.push(ex),
                    Err(e) => {
                        return Err(Error::Generator {
                            rows,
                            source: e.into(),
                        })
                    }
                }
                rows += 1;
                if chunk.len() == opts.batch_size.get() {
                    let full =
                        std::mem::replace(&mut chunk, Vec::with_capacity(opts.batch_size.get()));
                    if !dispatch(full, chunk_start) {
                        return Ok(());
                    }
                    chunk_start = rows;
                }
            }
            if !chunk.is_empty() {
                dispatch(chunk, chunk_start);
            }
            Ok(())
        }))
        .unwrap_or_else(|p| Err(Error::from_panic("generator", p)));
        if gen_result.is_err() {
            abort.store(true, Ordering::SeqCst);
        }
        drop(res_tx);
        drop(slot_tx);
        let written = writer
            .join()
            .unwrap_or_else(|p| Err(Error::from_panic("writer", p)));
        // A generator error is the root cause even if the writer then failed too.
        gen_result?;
        written
    })
}

/// A rayon pool of `threads` threads (0: one per core) named
/// `shardset-<what>-<i>`, and its size.
///
/// # Errors
/// [`Error::InvalidArgument`] when the threads cannot start.
pub(crate) fn thread_pool(
    threads: usize,
    what: &'static str,
) -> Result<(rayon::ThreadPool, usize)> {
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(2, |n| n.get())
    } else {
        threads
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("shardset-{what}-{i}"))
        .build()
        .map_err(|e| {
            Error::InvalidArgument(format!(
                "cannot start the {what} pool of {threads} threads: {e}"
            ))
        })?;
    Ok((pool, threads))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn slow_sink_back_pressures_the_generator() {
        // The generator may run ahead of the sink by a bounded number of batches,
        // whatever the number of rows: memory stays a few batches.
        let produced = Arc::new(AtomicU64::new(0));
        let consumed = Arc::new(AtomicU64::new(0));
        let max_ahead = Arc::new(AtomicU64::new(0));
        let batch = 10u64;
        let threads = 2usize;
        let p2 = produced.clone();
        let gen = (0..2000u64).map(move |i| {
            p2.fetch_add(1, Ordering::SeqCst);
            Ok::<_, std::convert::Infallible>(
                Example::new().with("x", i as i32).with("label", 0i64),
            )
        });
        let tmp = tempfile::tempdir().unwrap();
        let (c2, m2, p3) = (consumed.clone(), max_ahead.clone(), produced.clone());
        let rows = run(
            gen,
            Arc::new(
                Features::new()
                    .with(
                        "x",
                        crate::features::Feature::value(crate::dtype::Dtype::Int32),
                    )
                    .with(
                        "label",
                        crate::features::Feature::value(crate::dtype::Dtype::Int64),
                    ),
            ),
            tmp.path(),
            PipelineOptions {
                batch_size: std::num::NonZeroUsize::new(batch as usize).unwrap(),
                threads,
                png: Default::default(),
                row_offset: 0,
            },
            move |b| {
                std::thread::sleep(std::time::Duration::from_micros(300));
                let c = c2.fetch_add(b.num_rows() as u64, Ordering::SeqCst) + b.num_rows() as u64;
                let ahead = p3.load(Ordering::SeqCst).saturating_sub(c);
                m2.fetch_max(ahead, Ordering::SeqCst);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(rows, 2000);
        let bound = (threads as u64 * 2 + 2 + 2) * batch;
        let ahead = max_ahead.load(Ordering::SeqCst);
        assert!(
            ahead <= bound,
            "generator ran {ahead} rows ahead of the sink (bound {bound})"
        );
    }
}
