//! Every input under `fuzz/regressions/` once crashed a fuzz target; each is
//! fed to the target's own entry point (fuzz/fuzz_targets/entry.rs) so that
//! `cargo test` keeps them fixed.

use std::path::{Path, PathBuf};

#[path = "../../fuzz/fuzz_targets/entry.rs"]
mod entry;

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

#[test]
fn arrow_cache_regressions_replay_without_a_crash() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    let files = inputs(&dir);
    assert!(files.len() >= 6, "{files:?}");
    for f in files {
        let data = std::fs::read(&f).unwrap();
        // Errors are fine; a panic fails this test naming nothing but the
        // input, so say which one first.
        eprintln!("replaying {}", f.display());
        assert!(entry::open_cache_input(&data).is_some(), "{}", f.display());
    }
}

#[cfg(feature = "video")]
#[test]
fn frames_cache_regressions_are_typed_errors() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions/frames");
    let golden = crate::common::golden().join("lance_video_frames");
    let files = inputs(&dir);
    assert_eq!(files.len(), 2, "{files:?}");
    for f in files {
        let data = std::fs::read(&f).unwrap();
        eprintln!("replaying {}", f.display());
        let opened = entry::open_frames_input(&data, &golden).expect("an input");
        match opened {
            Err(shardset::Error::Metadata { reason, .. }) => {
                assert!(
                    reason.contains("WebP frames are at most") || reason.contains("overflows"),
                    "{}: {reason}",
                    f.display()
                );
            }
            other => panic!("{}: {other:?}", f.display()),
        }
    }
    // The unchanged metadata still opens: the regressions fail for their edit.
    let meta = std::fs::read(golden.join("_metadata.json")).unwrap();
    let mut data = vec![0u8];
    data.extend_from_slice(&meta);
    assert!(matches!(
        entry::open_frames_input(&data, &golden),
        Some(Ok(()))
    ));
}

#[test]
fn document_seeds_read_and_mutations_of_them_never_panic() {
    // The seeds are valid documents: each reads without an error.
    for seed in entry::documents_seeds() {
        let r = entry::documents_input(&seed).unwrap();
        assert!(r.is_ok(), "mode {}: {r:?}", seed[0]);
    }
    // Mutations (a few thousand, seeded): errors are fine, panics are not.
    let mut rng = shardset::SplitMix64::new(7);
    for seed in entry::documents_seeds() {
        let alphabet = b"{}[]\",:0-e9n ";
        for _ in 0..300 {
            let mut d = seed.clone();
            if d.len() < 2 {
                d.push(b'{');
            }
            match rng.below(4) {
                0 => {
                    let k = 1 + rng.below(d.len() as u64 - 1) as usize;
                    d[k] = rng.below(256) as u8;
                }
                1 => d.truncate(1 + rng.below(d.len() as u64) as usize),
                2 => {
                    let k = 1 + rng.below(d.len() as u64 - 1) as usize;
                    d.insert(k, alphabet[rng.below(alphabet.len() as u64) as usize]);
                }
                _ => {
                    let k = 1 + rng.below(d.len() as u64 - 1) as usize;
                    d.remove(k);
                }
            }
            let _ = entry::documents_input(&d);
        }
    }
}

#[test]
fn image_ops_seeds_run_and_mutations_of_them_never_panic() {
    for seed in entry::image_ops_seeds() {
        let r = entry::image_ops_input(&seed).unwrap();
        assert!(r.is_ok(), "mode {}: {r:?}", seed[0]);
    }
    // Crashes a campaign found, kept fixed (none so far: the folder is
    // made by the first one).
    let found = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions/image_ops");
    if found.is_dir() {
        for path in inputs(&found) {
            eprintln!("replaying {}", path.display());
            let _ = entry::image_ops_input(&std::fs::read(path).unwrap());
        }
    }
    let mut rng = shardset::SplitMix64::new(11);
    for seed in entry::image_ops_seeds() {
        for _ in 0..100 {
            let mut d = seed.clone();
            for _ in 0..1 + rng.below(4) {
                let k = 1 + rng.below(d.len() as u64 - 1) as usize;
                match rng.below(3) {
                    0 => d[k] = rng.below(256) as u8,
                    1 => d.truncate(k.max(2)),
                    _ => d[k] ^= 1 << rng.below(8),
                }
            }
            let _ = entry::image_ops_input(&d);
        }
    }
}

/// The `open_hf` target's seed reads whole, and every input under
/// `fuzz/regressions/hf/` (once a crash) replays as rows or a typed error
/// without a panic, caught or not.
#[test]
fn hf_directory_inputs_replay_without_a_crash() {
    crate::common::note_panics();
    for k in 0..3u8 {
        match entry::open_hf_input(&[4 + k]) {
            Some(Ok(())) => {}
            other => panic!("the seed, file {k}: {other:?}"),
        }
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions/hf");
    let files = inputs(&dir);
    assert!(!files.is_empty());
    {
        for f in files {
            eprintln!("replaying {}", f.display());
            let data = std::fs::read(&f).unwrap();
            crate::common::PANICKED.with(|p| p.set(false));
            assert!(entry::open_hf_input(&data).is_some(), "{}", f.display());
            assert!(
                !crate::common::PANICKED.with(|p| p.get()),
                "a panic on {}",
                f.display()
            );
        }
    }
}

/// The `open_segments_cache` target's seed inputs read whole (every mode,
/// both codecs: windows decode and verify finds nothing), mutations of its
/// decoder inputs never panic, and every input under
/// `fuzz/regressions/segments/` (once a crash) replays without a panic,
/// caught or not.
#[cfg(feature = "video")]
#[test]
fn segments_cache_inputs_replay_without_a_crash() {
    crate::common::note_panics();
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
    let replay = |what: &str, data: &[u8]| {
        crate::common::PANICKED.with(|p| p.set(false));
        let r = entry::open_segments_input(data, &seeds);
        assert!(
            !matches!(r, Some(Err(shardset::Error::Panic { .. })))
                && !crate::common::PANICKED.with(|p| p.get()),
            "a panic on {what}: {r:?}"
        );
        r
    };
    let inputs_of_seeds = entry::open_segments_seeds(&seeds);
    assert_eq!(inputs_of_seeds.len(), 2 * 4 + 3 * (3 + 2));
    for s in &inputs_of_seeds {
        match replay("a seed", s) {
            Some(Ok(())) => {}
            other => panic!("seed of mode {}: {other:?}", s[0]),
        }
    }
    // Packets with bytes flipped, cut or grown, straight to the decoder.
    let mut rng = shardset::SplitMix64::new(13);
    for s in inputs_of_seeds.iter().filter(|s| (s[0] >> 1) == 5) {
        for _ in 0..20 {
            let mut d = s.clone();
            for _ in 0..1 + rng.below(8) {
                let k = 4 + rng.below(d.len() as u64 - 4) as usize;
                match rng.below(4) {
                    0 => d[k] = rng.below(256) as u8,
                    1 => d.truncate(k.max(5)),
                    2 => d.insert(k, rng.below(256) as u8),
                    _ => d[k] ^= 1 << rng.below(8),
                }
            }
            let _ = replay("a mutated seed", &d);
        }
    }
    let found = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions/segments");
    let files = inputs(&found);
    assert!(!files.is_empty());
    for f in files {
        eprintln!("replaying {}", f.display());
        let r = replay(&f.display().to_string(), &std::fs::read(&f).unwrap());
        assert!(r.is_some(), "{}", f.display());
        // Metadata claiming segments longer than any build writes (1.5e9
        // frames in three rows): refused at open, before windows of every
        // frame are listed.
        if f.ends_with("huge-segment-length-alloc-abort") {
            assert!(
                matches!(&r, Some(Err(shardset::Error::Metadata { reason, .. })) if reason.contains("a segment holds at most 1024")),
                "{r:?}"
            );
        }
    }
}

/// With `SHARDSET_FUZZ_CORPUS` set, writes `seeds` into its folder
/// `target` (named by content): the seed corpus of a campaign.
fn write_corpus(target: &str, seeds: &[Vec<u8>]) {
    let Some(root) = std::env::var_os("SHARDSET_FUZZ_CORPUS") else {
        return;
    };
    let dir = Path::new(&root).join(target);
    std::fs::create_dir_all(&dir).unwrap();
    for s in seeds {
        let name = format!("seed-{}", &shardset::sha256_hex(s)[..16]);
        std::fs::write(dir.join(name), s).unwrap();
    }
}

/// `seed` with one to four byte edits (set, bit flip, cut, insert, remove)
/// after its first byte, which picks the mode.
fn mutated(rng: &mut shardset::SplitMix64, seed: &[u8]) -> Vec<u8> {
    let mut d = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        if d.len() < 2 {
            d.push(rng.below(256) as u8);
            continue;
        }
        let k = 1 + rng.below(d.len() as u64 - 1) as usize;
        match rng.below(5) {
            0 => d[k] = rng.below(256) as u8,
            1 => d[k] ^= 1 << rng.below(8),
            2 => d.truncate(k),
            3 => d.insert(k, rng.below(256) as u8),
            _ => {
                d.remove(k);
            }
        }
    }
    d
}

/// Replays `data` through `input`, failing on a panic (caught or not, on
/// this thread) whose source file `allowed` does not name, and on an error
/// that reports a panic other than Lance's, which shardset catches at its
/// boundary (on another thread: a reader's task).
fn replay_no_panic(
    what: &str,
    data: &[u8],
    input: fn(&[u8]) -> Option<shardset::Result<()>>,
    allowed: fn(&str) -> bool,
) -> Option<shardset::Result<()>> {
    crate::common::PANIC_FILES.with(|f| f.borrow_mut().clear());
    let r = input(data);
    let files = crate::common::PANIC_FILES.with(|f| f.take());
    let reported = |e: &shardset::Error| {
        let e = e.to_string();
        e.contains("panicked") && !e.contains("made Lance panic")
    };
    assert!(
        files.iter().all(|f| allowed(f)) && !matches!(&r, Some(Err(e)) if reported(e)),
        "a panic on {what} (at {files:?}): {r:?}"
    );
    r
}

/// Replays a target: its seeds must read whole (`Some(Ok(()))`), then 300
/// seeded mutations of them and every input under
/// `fuzz/regressions/<name>/` must end without a panic other than those
/// `allowed` (`check` is given each regression's outcome).
fn replay_target(
    name: &str,
    seeds: &[Vec<u8>],
    rng_seed: u64,
    input: fn(&[u8]) -> Option<shardset::Result<()>>,
    allowed: fn(&str) -> bool,
    check: impl Fn(&Path, &[u8], &Option<shardset::Result<()>>),
) {
    crate::common::note_panics();
    write_corpus(name, seeds);
    for s in seeds {
        match replay_no_panic("a seed", s, input, |_| false) {
            Some(Ok(())) => {}
            other => panic!("seed of mode {}: {other:?}", s[0]),
        }
    }
    let mut rng = shardset::SplitMix64::new(rng_seed);
    for k in 0..300 {
        let s = &seeds[k % seeds.len()];
        let d = mutated(&mut rng, s);
        let _ = replay_no_panic("a mutated seed", &d, input, allowed);
    }
    let found = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(name);
    let files = inputs(&found);
    assert!(!files.is_empty());
    for f in files {
        eprintln!("replaying {}", f.display());
        let data = std::fs::read(&f).unwrap();
        let r = replay_no_panic(&f.display().to_string(), &data, input, allowed);
        assert!(r.is_some(), "{}", f.display());
        check(&f, &data, &r);
    }
}

/// Lance's panics are told apart by the crate their file is in: a registry
/// crate's versioned directory, or the patched copy under `third_party/`.
#[cfg(feature = "lance")]
#[test]
fn lance_panics_are_told_by_the_crate_they_are_in() {
    for lance in [
        "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lance-file-14.0.2/src/reader.rs",
        "/work/main/third_party/lance-encoding/src/encodings/logical/primitive/chunk_index.rs",
        "third_party/lance-encoding/src/buffer.rs",
    ] {
        assert!(entry::panic_in_lance(lance), "{lance}");
    }
    for ours in [
        "src/layouts/lance_rows/read.rs",
        "/work/main/src/lance/mod.rs",
        "/work/main/third_party/README.md",
        "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/arrow-ipc-58.4.1/src/reader.rs",
    ] {
        assert!(!entry::panic_in_lance(ours), "{ours}");
    }
}

/// The `open_lance_rows` target's seeds (every mode, changing nothing)
/// read whole and verify clean; 300 seeded mutations of them and every
/// input under `fuzz/regressions/open_lance_rows/` (once a crash) read or
/// fail with a typed error, never a panic.
#[cfg(feature = "lance")]
#[test]
fn lance_rows_inputs_replay_without_a_crash() {
    let seeds = entry::open_lance_rows_seeds();
    assert!(seeds.len() >= 3 + 2 * 4, "{}", seeds.len());
    replay_target(
        "open_lance_rows",
        &seeds,
        17,
        entry::open_lance_rows_input,
        entry::panic_in_lance,
        |f, _, r| {
            // A data file's footer claiming 1.3e9 global buffers made Lance
            // reserve 20 GB: the footer is checked against the file first.
            if f.ends_with("data-file-footer-buffer-count-20gb-alloc") {
                assert!(
                    matches!(r, Some(Err(shardset::Error::CorruptShard { reason, .. })) if reason.contains("does not describe a file")),
                    "{r:?}"
                );
            }
        },
    );
}

/// The `resume_state` target's seeds resume into the clean build's cache or
/// download the exact file; 300 seeded mutations of them and every input
/// under `fuzz/regressions/resume_state/` (once a crash) end the same way
/// or in a typed error, never a panic, a wrong cache or a wrong file (the
/// entry asserts both).
#[test]
fn resume_state_inputs_replay_without_a_crash() {
    replay_target(
        "resume_state",
        &entry::resume_state_seeds(),
        19,
        entry::resume_state_input,
        |_| false,
        |f, data, r| {
            if data[0] & 1 == 0 {
                // Damaged build state (a manifest line changed, a committed
                // shard's refs file garbled) is refused: the build resumes
                // from before it and publishes the clean build's rows.
                assert!(matches!(r, Some(Ok(()))), "{}: {r:?}", f.display());
            } else if f.ends_with("huge-content-length-add-overflow") {
                // A 206 whose Content-Length runs past 2^64 bytes: a failed attempt.
                assert!(
                    matches!(r, Some(Err(e)) if e.to_string().contains("past any file's end")),
                    "{r:?}"
                );
            }
        },
    );
}
