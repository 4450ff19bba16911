//! Crash safety: kill -9 at random moments, resume, and compare with an
//! uninterrupted build; readers never see an incomplete cache.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shardset::SplitMix64;

const ROWS: &str = "1000";

fn demo(root: &Path) -> Command {
    let mut c = crate::common::shardset_cli();
    c.args([
        "demo",
        "--json",
        "--rows",
        ROWS,
        "--shard-size",
        "100KB",
        "--batch-size",
        "50",
        "--threads",
        "2",
        "--root",
    ])
    .arg(root)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    c
}

fn run_to_end(root: &Path) -> serde_json::Value {
    finish(demo(root))
}

/// Runs a demo command to its end and returns its JSON summary.
fn finish(mut cmd: Command) -> serde_json::Value {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn meta(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("_metadata.json")).unwrap()).unwrap()
}

/// Starts `cmd`, kills it (SIGKILL) at a random moment within 1.2 times a
/// whole build's duration `full`, and returns what it printed.
fn kill_at_random(mut cmd: Command, rng: &mut SplitMix64, full: Duration) -> std::process::Output {
    let mut child = cmd.spawn().unwrap();
    let wait = Duration::from_micros(rng.below(full.as_micros() as u64 * 12 / 10 + 1));
    std::thread::sleep(wait);
    let _ = child.kill();
    child.wait_with_output().unwrap()
}

/// Temp dirs under `root/processed` whose resume log `log` records at least
/// one commit after its header (work a killed build left to resume).
fn temp_dirs_with_commits(root: &Path, log: &str) -> usize {
    std::fs::read_dir(root.join("processed"))
        .into_iter()
        .flatten()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("_tmp_"))
        .filter(|p| {
            std::fs::read_to_string(p.join(log))
                .unwrap_or_default()
                .lines()
                .count()
                > 1
        })
        .count()
}

#[test]
fn kill_9_at_random_moments_then_resume_gives_the_uninterrupted_cache() {
    // The reference result and how long a whole build takes.
    let clean_root = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let clean = run_to_end(clean_root.path());
    let full = t.elapsed();
    let clean_dir = PathBuf::from(clean["dir"].as_str().unwrap());

    let root = tempfile::tempdir().unwrap();
    let target = root
        .path()
        .join("processed")
        .join(clean_dir.file_name().unwrap());
    // A reader polling all along: whenever the cache exists it is complete.
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(AtomicU64::new(0));
    // Held by the reader while it looks, and by the test while it deletes a
    // finished cache to start over (the deletion is the test's, not a build's).
    let gate = Arc::new(std::sync::Mutex::new(()));
    let reader = {
        let (stop, seen, target, gate) = (stop.clone(), seen.clone(), target.clone(), gate.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let _g = gate.lock().unwrap();
                if target.join("_metadata.json").exists() {
                    let c = shardset::open_cache(&target).expect("a visible cache opens");
                    assert_eq!(c.len(), 1000);
                    assert!(shardset::verify_checksums(&target).unwrap().is_empty());
                    seen.fetch_add(1, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(3));
            }
        })
    };
    let mut rng = SplitMix64::new(20261121);
    let mut resumed_runs = 0;
    for _ in 0..20 {
        let out = kill_at_random(demo(root.path()), &mut rng, full);
        // Committed shards a killed build left for the next one to resume.
        resumed_runs += temp_dirs_with_commits(root.path(), "_manifest.jsonl");
        if out.status.success() {
            let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            if j["resumed_rows"].as_u64().unwrap_or(0) > 0 {
                resumed_runs += 1;
            }
            // Finished before the kill: start over so later kills hit a build again.
            let _g = gate.lock().unwrap();
            std::fs::remove_dir_all(&target).unwrap();
        }
        // Between attempts nothing but the lock, a resumable temp dir, or a
        // complete cache exists.
        for e in std::fs::read_dir(root.path().join("processed"))
            .into_iter()
            .flatten()
        {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(
                n.ends_with(".lock")
                    || n.contains("_tmp_")
                    || n.contains("_old_")
                    || target.ends_with(&n),
                "{n}"
            );
        }
    }
    let last = run_to_end(root.path());
    stop.store(true, Ordering::SeqCst);
    reader.join().expect("reader never saw an incomplete cache");
    if last["resumed_rows"].as_u64().unwrap_or(0) > 0 {
        resumed_runs += 1;
    }
    assert!(
        resumed_runs > 0,
        "at least one kill left committed shards that the next run resumed"
    );
    let (a, b) = (meta(&target), meta(&clean_dir));
    for k in [
        "num_rows",
        "shard_row_counts",
        "shard_num_bytes",
        "shard_xxh64",
        "build_id",
        "schema_fingerprint",
    ] {
        assert_eq!(a[k], b[k], "{k}");
    }
    assert!(
        seen.load(Ordering::SeqCst) > 0,
        "the reader saw the published cache"
    );
    let leftovers: Vec<_> = std::fs::read_dir(root.path().join("processed"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_crash_at_each_step_of_publication_never_exposes_a_partial_cache() {
    let clean_root = tempfile::tempdir().unwrap();
    let clean = run_to_end(clean_root.path());
    let clean_dir = PathBuf::from(clean["dir"].as_str().unwrap());
    for point in [
        "publish:before-rename",
        "publish:after-move-aside",
        "publish:after-rename",
    ] {
        let root = tempfile::tempdir().unwrap();
        // A first generation is published; a rebuild crashes while publishing.
        let first = run_to_end(root.path());
        let target = PathBuf::from(first["dir"].as_str().unwrap());
        let out = demo(root.path())
            .arg("--rebuild")
            .env("SHARDSET_FAULT_POINT", point)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{point}: the process died");
        // Whatever is at the target is a complete cache (or nothing at all).
        if target.join("_metadata.json").exists() {
            let c = shardset::open_cache(&target).unwrap();
            assert_eq!(c.len(), 1000, "{point}");
            assert!(
                shardset::verify_checksums(&target).unwrap().is_empty(),
                "{point}"
            );
        } else {
            assert!(!target.exists(), "{point}: no half-published directory");
        }
        // The next load ends with the complete cache and no left-overs.
        let again = run_to_end(root.path());
        assert_eq!(again["rows"], 1000);
        let (a, b) = (meta(&target), meta(&clean_dir));
        for k in ["num_rows", "shard_row_counts", "schema_fingerprint"] {
            assert_eq!(a[k], b[k], "{point}: {k}");
        }
        assert!(shardset::verify_checksums(&target).unwrap().is_empty());
        let dots = || -> Vec<String> {
            std::fs::read_dir(root.path().join("processed"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with('.'))
                .collect()
        };
        if !dots().is_empty() {
            // A complete cache was in place, so that load was warm and touched
            // nothing; the dead build's temp dir or the replaced generation is
            // left for the next build (under the lock) to remove.
            assert!(
                again["built"] == false,
                "{point}: a build cleans up: {:?}",
                dots()
            );
            assert!(
                dots()
                    .iter()
                    .all(|n| n.contains("_tmp_") || n.contains("_old_")),
                "{point}: {:?}",
                dots()
            );
            let out = demo(root.path()).arg("--rebuild").output().unwrap();
            assert!(out.status.success());
        }
        assert!(dots().is_empty(), "{point}: {:?}", dots());
    }
}

/// Rebuilding a cache swaps the new generation in with the old in one step:
/// a reader opening the cache over and over during many rebuilds always
/// finds a complete cache, never a missing directory.
#[test]
fn a_reader_polling_during_rebuilds_never_sees_the_cache_missing() {
    use shardset::{write_arrow_cache, ArrowWriteOptions, Dtype, Example, Feature, Features};
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("c");
    let features = Features::new().with("x", Feature::value(Dtype::Int64));
    let write = |gen: i64| {
        let rows = (0..50).map(move |i| Example::new().with("x", gen * 1000 + i));
        write_arrow_cache(rows, &features, &dir, &ArrowWriteOptions::default()).unwrap();
    };
    write(0);
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicU64::new(0));
    let reader = {
        let (dir, stop, opened) = (dir.clone(), stop.clone(), opened.clone());
        std::thread::spawn(move || {
            let mut failures = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                match shardset::open_cache(&dir) {
                    Ok(c) => {
                        opened.fetch_add(1, Ordering::Relaxed);
                        // A generation replaced after the open gives an error
                        // naming it, or rows of one generation.
                        if let Ok(row) = c.backend.get(0) {
                            let x = row.get("x").and_then(|v| v.as_i64()).unwrap();
                            assert_eq!(x % 1000, 0, "row 0 of some generation");
                        }
                    }
                    Err(e) => failures.push(e.to_string()),
                }
            }
            failures
        })
    };
    let rebuilds = 150;
    for gen in 1..=rebuilds {
        write(gen);
    }
    stop.store(true, Ordering::Relaxed);
    let failures = reader.join().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} opens failed, e.g. {:?}",
        failures.len(),
        failures.len() as u64 + opened.load(Ordering::Relaxed),
        failures.first()
    );
    assert!(opened.load(Ordering::Relaxed) > rebuilds as u64);
    let c = shardset::open_cache(&dir).unwrap();
    assert_eq!(
        c.backend.get(0).unwrap().get("x").and_then(|v| v.as_i64()),
        Some(rebuilds * 1000)
    );
}

/// The same kill -9 test for a `lance-rows` build through `load`: rows go
/// to Lance one data file (100 rows) per commit, each commit recorded in the
/// build's resume log; a killed build is taken over from its last commit.
#[test]
fn kill_9_during_a_lance_build_then_resume_gives_the_uninterrupted_rows() {
    let lance = |root: &Path| {
        let mut c = demo(root);
        c.args(["--format", "lance", "--max-rows-per-file", "100"]);
        c
    };
    let clean_root = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let clean = finish(lance(clean_root.path()));
    let full = t.elapsed();
    let clean_dir = PathBuf::from(clean["dir"].as_str().unwrap());
    assert_eq!(meta(&clean_dir)["layout"], "lance-rows");
    assert_eq!(
        meta(&clean_dir)["fragment_row_counts"],
        serde_json::json!([100, 100, 100, 100, 100, 100, 100, 100, 100, 100]),
        "one fragment per commit, as one write with 100 rows per file makes"
    );

    let root = tempfile::tempdir().unwrap();
    let target = root
        .path()
        .join("processed")
        .join(clean_dir.file_name().unwrap());
    let mut rng = SplitMix64::new(20261123);
    let (mut resumed_runs, mut logged_commits) = (0, 0);
    for _ in 0..20 {
        let out = kill_at_random(lance(root.path()), &mut rng, full);
        logged_commits += temp_dirs_with_commits(root.path(), "_lance_progress.jsonl");
        if out.status.success() {
            let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            if j["resumed_rows"].as_u64().unwrap_or(0) > 0 {
                resumed_runs += 1;
            }
            std::fs::remove_dir_all(&target).unwrap();
        }
    }
    let last = finish(lance(root.path()));
    if last["resumed_rows"].as_u64().unwrap_or(0) > 0 {
        resumed_runs += 1;
    }
    assert!(
        logged_commits > 0,
        "at least one kill left committed data files in the resume log"
    );
    assert!(
        resumed_runs > 0,
        "at least one run took over a killed build's commits"
    );
    let (a, b) = (meta(&target), meta(&clean_dir));
    for k in ["num_rows", "fragment_row_counts", "schema_fingerprint"] {
        assert_eq!(a[k], b[k], "{k}");
    }
    // Row for row the same examples, in the same order.
    let (got, want) = (
        shardset::open_cache(&target).unwrap(),
        shardset::open_cache(&clean_dir).unwrap(),
    );
    assert_eq!(got.len(), 1000);
    for i in 0..1000i64 {
        assert_eq!(
            got.backend.get(i).unwrap(),
            want.backend.get(i).unwrap(),
            "row {i}"
        );
    }
    let report = shardset::verify_cache(&target).unwrap();
    assert!(report.damage.is_empty(), "{:?}", report.damage);
    let leftovers: Vec<_> = std::fs::read_dir(root.path().join("processed"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
