//! Fuzzes what a reader of a `lance-rows` cache trusts: its metadata and
//! feature description, its Lance data files and manifests, each replaced,
//! written over or cut, then every read and `verify` (modes in
//! lance_rows_entry.rs, which `cargo test` replays). Needs the `lance`
//! feature: `cargo fuzz run open_lance_rows --features lance`.
//!
//! Lance panics on some damaged data files (its own asserts and slices);
//! shardset catches those at its Lance boundary as `Error::CorruptShard`.
//! So a panic inside Lance's crates does not abort here (its place is
//! printed once); any other panic does, and so does one that escapes.

#![no_main]

mod entry;

use std::collections::HashSet;
use std::sync::{Mutex, Once};

use libfuzzer_sys::fuzz_target;

fn let_lance_panics_be_caught() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let abort = std::panic::take_hook();
        let seen = Mutex::new(HashSet::new());
        std::panic::set_hook(Box::new(move |info| {
            let at = info.location().map(|l| (l.file().to_string(), l.line()));
            match at {
                Some((file, line)) if entry::panic_in_lance(&file) => {
                    if seen.lock().unwrap().insert((file.clone(), line)) {
                        eprintln!("Lance panicked at {file}:{line} (caught by shardset)");
                    }
                }
                _ => abort(info),
            }
        }));
    });
}

fuzz_target!(|data: &[u8]| {
    let_lance_panics_be_caught();
    let _ = entry::open_lance_rows_input(data);
});
