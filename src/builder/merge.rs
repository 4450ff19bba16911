//! Work units generated in parallel and merged back in unit order, with the
//! row count at which each unit ended (what a resumed build skips by).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crossbeam_channel::{bounded, Receiver, Sender};

use super::{DatasetBuilder, WorkUnit};
use crate::cache::build::{ResumePoint, UnitEnds};
use crate::error::{BoxError, Error, Result};
use crate::value::Example;

/// A generated example with its key.
type Item = std::result::Result<(String, Example), BoxError>;

/// The examples of the units in order, recording where each unit ends.
struct Merged<'r> {
    rxs: &'r [Receiver<Item>],
    cur: usize,
    pos: u64,
    sink: UnitEnds,
}

impl Iterator for Merged<'_> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        while self.cur < self.rxs.len() {
            match self.rxs[self.cur].recv() {
                Ok(item) => {
                    self.pos += 1;
                    return Some(item);
                }
                Err(_) => {
                    if let Ok(mut v) = self.sink.lock() {
                        v.push(self.pos);
                    }
                    self.cur += 1;
                }
            }
        }
        None
    }
}

/// Runs the units' generators on up to `unit_parallelism` threads (0: one
/// per core) and hands
/// `consume` one stream in unit order, then example order, starting at the
/// resume point's `skip` row of the whole build: units known to end at or
/// before it are not run at all; unit ends go to its sink.
pub(super) fn build_units<F, T>(
    builder: &dyn DatasetBuilder,
    config: &str,
    split: &str,
    all_units: &[WorkUnit],
    unit_parallelism: usize,
    resume: &ResumePoint,
    consume: F,
) -> Result<T>
where
    F: FnOnce(&mut dyn Iterator<Item = Item>) -> Result<T>,
{
    let (skip, known_ends, sink) = (resume.skip(), resume.unit_ends(), resume.unit_ends_sink());
    let k = known_ends
        .iter()
        .take_while(|&&e| e <= skip)
        .count()
        .min(all_units.len());
    let start_k = if k == 0 { 0 } else { known_ends[k - 1] };
    if let Ok(mut v) = sink.lock() {
        v.extend_from_slice(&known_ends[..k]);
    }
    let units = &all_units[k..];
    let workers = match unit_parallelism {
        0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
        n => n,
    }
    .min(units.len().max(1));
    // One bounded channel per unit: a unit ahead of the consumer stalls after
    // a few thousand examples, so memory stays bounded.
    let (senders, receivers): (Vec<Sender<Item>>, Vec<Receiver<Item>>) =
        units.iter().map(|_| bounded(2048)).unzip();
    let senders = Mutex::new(senders.into_iter().map(Some).collect::<Vec<_>>());
    let next = AtomicUsize::new(0);
    let senders = &senders;
    let next = &next;
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(move || loop {
                // Units start in order, so the lowest unfinished unit always
                // runs and the in-order consumer never waits on an unstarted one.
                let u = next.fetch_add(1, Ordering::SeqCst);
                if u >= units.len() {
                    return;
                }
                let Some(tx) = senders.lock().map(|mut v| v[u].take()).ok().flatten() else {
                    return;
                };
                let unit = &units[u];
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match builder
                    .generate(config, split, unit)
                {
                    Ok(stream) => {
                        for item in stream {
                            let item = item.map_err(|e| -> BoxError {
                                format!("work unit '{}': {e}", unit.id).into()
                            });
                            let stop = item.is_err();
                            if tx.send(item).is_err() || stop {
                                return;
                            }
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(format!("work unit '{}': {e}", unit.id).into()));
                    }
                }));
                if let Err(p) = run {
                    let msg = Error::from_panic("generator", p).to_string();
                    let _ = tx.send(Err(format!("work unit '{}': {msg}", unit.id).into()));
                }
            });
        }
        let merged = Merged {
            rxs: &receivers,
            cur: 0,
            pos: start_k,
            sink,
        };
        let mut stream = merged.skip((skip - start_k) as usize);
        let result = consume(&mut stream);
        // Unblock producers still running (their sends now fail) before the scope joins them.
        drop(stream);
        drop(receivers);
        result
    })
}
