//! Fuzzes the small documents a cache carries beside its data: feature
//! descriptions, `_checksums.json`, the version files of an edited cache
//! and features files (modes in entry.rs, which `cargo test` replays).

#![no_main]

mod entry;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = entry::documents_input(data);
});
