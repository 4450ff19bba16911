//! A one-line progress display on stderr, drawn by indicatif: rows (or
//! frames) done, rate and, when the total is known, a bar and the ETA; a
//! spinner and the count when it is not. It reads the writer's counter
//! (`ArrowWriteOptions::with_progress`, `VideoFramesOptions::with_progress`)
//! from its own thread, so the writer pays one atomic add per batch and
//! nothing else.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use crate::fmt::{age, count};

/// How often the counter is read and the line redrawn.
const POLL: Duration = Duration::from_millis(200);

/// Whether to show progress: stderr is a terminal and `--quiet` was not given.
pub fn wanted(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal()
}

/// Items per second since the display started; items taken over from a
/// killed build (`base`) are done, but not part of the rate.
fn rate(done: u64, base: u64, elapsed: Duration) -> f64 {
    done.saturating_sub(base) as f64 / elapsed.as_secs_f64().max(1e-3)
}

/// The time left for `total` at `rate`, unless done or not moving.
fn eta(done: u64, total: u64, rate: f64) -> Option<Duration> {
    (rate > 0.0 && done < total).then(|| Duration::from_secs_f64((total - done) as f64 / rate))
}

/// The style of a display of `unit` (rows, frames): with a known total, the
/// count out of the total, percent, bar, rate and ETA; without, a spinner,
/// the count and the rate. `base` is what the counter held at the start.
fn style(unit: &str, total_known: bool, base: u64) -> ProgressStyle {
    let template = if total_known {
        format!(
            "{{prefix}}: {{human_pos}}/{{human_len}} {unit} ({{percent}}%) [{{bar:24}}]  {{rate}} {unit}/s{{eta}}{{msg}}"
        )
    } else {
        format!("{{spinner}} {{prefix}}: {{human_pos}} {unit}  {{rate}} {unit}/s{{msg}}")
    };
    ProgressStyle::with_template(&template)
        .expect("a valid template")
        .progress_chars("=> ")
        .with_key(
            "rate",
            move |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let r = rate(s.pos(), base, s.elapsed());
                let _ = w.write_str(&count(r.round() as u64));
            },
        )
        .with_key(
            "eta",
            move |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let r = rate(s.pos(), base, s.elapsed());
                if let Some(left) = s.len().and_then(|t| eta(s.pos(), t, r)) {
                    let _ = write!(w, "  ETA {}", age(left));
                }
            },
        )
}

/// A progress bar at the counter's current value, drawn to `target`.
fn bar(
    target: ProgressDrawTarget,
    label: String,
    unit: &str,
    total: Option<u64>,
    base: u64,
) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(total, target)
        .with_style(style(unit, total.is_some(), base))
        .with_prefix(label)
        .with_position(base);
    if base > 0 {
        bar.set_message(format!("  ({} resumed)", count(base)));
    }
    bar
}

/// A running display; [`Progress::finish`] stops and clears it.
pub struct Progress {
    bar: ProgressBar,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts showing `counter` (in `unit`s, out of `total` when known) on
    /// stderr, redrawn every 200 ms.
    pub fn start(label: String, unit: &str, total: Option<u64>, counter: Arc<AtomicU64>) -> Self {
        Progress::start_on(ProgressDrawTarget::stderr(), label, unit, total, counter)
    }

    fn start_on(
        target: ProgressDrawTarget,
        label: String,
        unit: &str,
        total: Option<u64>,
        counter: Arc<AtomicU64>,
    ) -> Self {
        let base = counter.load(Ordering::Relaxed);
        let bar = bar(target, label, unit, total, base);
        let stop = Arc::new(AtomicBool::new(false));
        let (stop_t, bar_t) = (stop.clone(), bar.clone());
        let handle = std::thread::Builder::new()
            .name("shardset-progress".into())
            .spawn(move || {
                while !stop_t.load(Ordering::Relaxed) {
                    std::thread::sleep(POLL);
                    bar_t.set_position(counter.load(Ordering::Relaxed));
                    bar_t.tick();
                }
            })
            .ok();
        Progress { bar, stop, handle }
    }

    /// Starts showing a download's bytes (done out of known) on stderr,
    /// redrawn every 200 ms; nothing is drawn until a size is known.
    pub fn start_download(progress: Arc<shardset::download::DownloadProgress>) -> Self {
        let style = ProgressStyle::with_template(
            "downloading {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
        )
        .expect("a valid template");
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr_with_hz(4))
            .with_style(style);
        let stop = Arc::new(AtomicBool::new(false));
        let (stop_t, bar_t) = (stop.clone(), bar.clone());
        let handle = std::thread::Builder::new()
            .name("shardset-download-progress".into())
            .spawn(move || {
                while !stop_t.load(Ordering::Relaxed) {
                    std::thread::sleep(POLL);
                    let (done, total) = progress.bytes();
                    if total > 0 {
                        bar_t.set_length(total);
                        bar_t.set_position(done);
                    }
                }
            })
            .ok();
        Progress { bar, stop, handle }
    }

    /// Stops the display and clears its line.
    pub fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A terminal that keeps what is written to it.
    #[derive(Debug, Clone, Default)]
    struct Screen(Arc<Mutex<String>>);

    impl Screen {
        fn text(&self) -> String {
            self.0.lock().unwrap().clone()
        }
    }

    impl indicatif::TermLike for Screen {
        fn width(&self) -> u16 {
            200
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.write_str(s)?;
            self.write_str("\n")
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push_str(s);
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            self.write_str("<clear>")
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The line drawn for `done` of `total` after ten seconds, the counter
    /// having started at `base`.
    fn line(unit: &str, done: u64, total: Option<u64>, base: u64) -> String {
        let screen = Screen::default();
        let target = ProgressDrawTarget::term_like(Box::new(screen.clone()));
        let b = bar(target, "train".into(), unit, total, base)
            .with_position(done)
            .with_elapsed(Duration::from_secs(10));
        b.tick();
        screen.text()
    }

    #[test]
    fn lines_say_rows_rate_and_eta() {
        let l = line("rows", 500, Some(1000), 0);
        assert!(l.contains("train: 500/1,000 rows (50%)"), "{l}");
        assert!(l.contains("50 rows/s  ETA 10s"), "{l}");
        let l = line("rows", 500, None, 0);
        assert!(l.contains("train: 500 rows  50 rows/s"), "{l}");
        assert!(!l.contains("ETA"), "{l}");
        let l = line("rows", 1000, Some(1000), 0);
        assert!(l.contains("train: 1,000/1,000 rows (100%)"), "{l}");
        assert!(!l.contains("ETA"), "{l}");
    }

    #[test]
    fn frames_and_resumed_rows_are_counted_but_not_in_the_rate() {
        let l = line("frames", 1500, None, 1000);
        assert!(l.contains("train: 1,500 frames  50 frames/s"), "{l}");
        assert!(l.contains("(1,000 resumed)"), "{l}");
        assert_eq!(rate(1500, 1000, Duration::from_secs(10)), 50.0);
        assert_eq!(
            eta(500, 1000, 50.0),
            Some(Duration::from_secs(10)),
            "half done at 50/s"
        );
        assert_eq!(eta(500, 1000, 0.0), None, "not moving");
    }

    #[test]
    fn the_display_follows_the_counter_and_clears_its_line() {
        let screen = Screen::default();
        let counter = Arc::new(AtomicU64::new(0));
        let p = Progress::start_on(
            ProgressDrawTarget::term_like(Box::new(screen.clone())),
            "train".into(),
            "rows",
            Some(100),
            counter.clone(),
        );
        counter.store(40, Ordering::Relaxed);
        std::thread::sleep(POLL * 3);
        p.finish();
        let text = screen.text();
        assert!(text.contains("train: 40/100 rows (40%)"), "{text}");
        assert!(text.ends_with("<clear>"), "{text}");
    }
}
