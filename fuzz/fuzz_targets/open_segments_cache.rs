//! Fuzzes what a reader of a segments cache trusts: its `_metadata.json`,
//! the rows' packet offsets and frame lists, and the packets themselves,
//! which our H.264 and AV1 parsing and FFmpeg's decoders read (modes in
//! entry.rs, which `cargo test` replays; seed caches in fuzz/seeds/).
//! Needs the `video` feature:
//! `cargo fuzz run open_segments_cache --features video`.

#![no_main]

mod entry;

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    let _ = entry::open_segments_input(data, &seeds);
});
