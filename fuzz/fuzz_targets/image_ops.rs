//! Fuzzes the input pipeline's image decoders and ops over any bytes a
//! cache's image cell may hold (modes in entry.rs, which `cargo test`
//! replays).

#![no_main]

mod entry;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = entry::image_ops_input(data);
});
