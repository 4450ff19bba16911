//! A forked child reopens a Lance cache and reads the same rows (the
//! child's scenario runs in a process of its own).

use std::path::PathBuf;
use std::process::Command;

use shardset::{open_cache, write_lance_cache, LanceWriteOptions};

use crate::common::*;

/// The forking half of `a_forked_child_reopens_lance_and_reads_the_same_rows`:
/// runs alone in its own test process (one test thread), reads in the
/// parent so the runtime and sessions exist, forks, and reads again in the
/// child, which must open its own runtime and dataset (nothing of the
/// parent's is usable there). The child's exit code says whether its rows
/// matched.
#[test]
fn fork_child_scenario() {
    let Some(dir) = std::env::var_os("SHARDSET_FORK_SCENARIO_DIR") else {
        return; // only meaningful when started by the test below
    };
    let c = open_cache(PathBuf::from(dir)).unwrap();
    let want: Vec<Option<i64>> = (0..40)
        .map(|i| c.backend.get(i).unwrap().get("x").and_then(|v| v.as_i64()))
        .collect();
    let n_iter: usize = c
        .backend
        .iter_batches(&Default::default())
        .unwrap()
        .map(|b| b.unwrap().num_rows())
        .sum();
    assert_eq!(n_iter, 40);
    // SAFETY: this process runs one test; the child only reads through our
    // API (which reopens per process id) and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let got: Vec<Option<i64>> = (0..40)
                .rev()
                .map(|i| c.backend.get(i).unwrap().get("x").and_then(|v| v.as_i64()))
                .rev()
                .collect();
            let n: usize = c
                .backend
                .iter_batches(&Default::default())
                .unwrap()
                .map(|b| b.unwrap().num_rows())
                .sum();
            got == want && n == 40
        }))
        .unwrap_or(false);
        unsafe { libc::_exit(if ok { 0 } else { 3 }) };
    }
    // A child stuck on the parent's (threadless) runtime would hang: give it
    // a minute, then kill it and fail.
    let mut status = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        // SAFETY: polling the child we just forked.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            break;
        }
        if std::time::Instant::now() > deadline {
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the forked child did not finish reading within a minute");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status}"
    );
    // The parent still reads with its own state.
    assert_eq!(
        c.backend.get(5).unwrap().get("x").and_then(|v| v.as_i64()),
        want[5]
    );
}

#[test]
fn a_forked_child_reopens_lance_and_reads_the_same_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("fork");
    write_lance_cache(
        f2_rows(40),
        &features_f2(),
        &dir,
        &LanceWriteOptions::default()
            .try_with_max_rows_per_file(16)
            .unwrap(),
    )
    .unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "lance_fork::fork_child_scenario",
            "--test-threads=1",
            "--nocapture",
        ])
        .env("SHARDSET_FORK_SCENARIO_DIR", &dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("1 passed"), "the scenario ran: {text}");
}
