//! Fuzzes the `_metadata.json` of a frames cache beside the reference's
//! Lance dataset (modes in entry.rs, which `cargo test` replays). Needs the
//! `video` feature: `cargo fuzz run open_frames_cache --features video`.

#![no_main]

mod entry;

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/lance_video_frames");
    let _ = entry::open_frames_input(data, &golden);
});
