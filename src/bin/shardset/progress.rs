//! A one-line progress display on stderr: rows done, rate, ETA. It reads the
//! writer's rows counter (`ArrowWriteOptions::progress`) from its own thread,
//! so the writer pays one atomic add per batch and nothing else.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::fmt::{age, count};

/// Whether to show progress: stderr is a terminal and `--quiet` was not given.
pub fn wanted(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal()
}

/// The line shown for `done` of `total` rows at `rate` rows/s.
pub fn render(label: &str, done: u64, total: Option<u64>, rate: f64) -> String {
    let mut s = match total {
        Some(t) if t > 0 => format!(
            "{label}: {}/{} rows ({:.0}%)",
            count(done),
            count(t),
            100.0 * done.min(t) as f64 / t as f64
        ),
        _ => format!("{label}: {} rows", count(done)),
    };
    s.push_str(&format!("  {} rows/s", count(rate as u64)));
    if let Some(t) = total {
        if rate > 0.0 && done < t {
            s.push_str(&format!(
                "  ETA {}",
                age(Duration::from_secs_f64((t - done) as f64 / rate))
            ));
        }
    }
    s
}

/// A running display; [`Progress::finish`] stops and clears it.
pub struct Progress {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts redrawing every 200 ms.
    pub fn start(label: String, total: Option<u64>, counter: Arc<AtomicU64>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stop_t = stop.clone();
        let handle = std::thread::Builder::new()
            .name("shardset-progress".into())
            .spawn(move || {
                let t0 = Instant::now();
                let base = counter.load(Ordering::Relaxed);
                while !stop_t.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(200));
                    let done = counter.load(Ordering::Relaxed);
                    // Rows taken over from a killed build are done, but not part of the rate.
                    let secs = t0.elapsed().as_secs_f64();
                    let rate = (done - base) as f64 / secs.max(1e-3);
                    let mut line = render(&label, done, total, rate);
                    if base > 0 {
                        line.push_str(&format!("  ({} resumed)", count(base)));
                    }
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "\r\x1b[2K{line}");
                    let _ = err.flush();
                }
            })
            .ok();
        Progress { stop, handle }
    }

    /// Stops the display and clears its line.
    pub fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_say_rows_rate_and_eta() {
        let l = render("train", 500, Some(1000), 50.0);
        assert_eq!(l, "train: 500/1,000 rows (50%)  50 rows/s  ETA 10s");
        let l = render("train", 500, None, 50.0);
        assert_eq!(l, "train: 500 rows  50 rows/s");
        let l = render("train", 1000, Some(1000), 50.0);
        assert!(!l.contains("ETA"), "{l}");
    }
}
