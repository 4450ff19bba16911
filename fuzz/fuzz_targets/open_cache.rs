//! Fuzzes what a cache reader trusts: `_metadata.json` parsing and
//! validation in `open_cache`, and reading a mutated shard through every
//! read operation (modes in entry.rs, which `cargo test` replays).

#![no_main]

mod entry;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = entry::open_cache_input(data);
});
