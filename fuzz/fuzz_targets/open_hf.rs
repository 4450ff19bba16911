//! Fuzzes what a reader of a Hugging Face `save_to_disk` directory trusts:
//! its `state.json`, its `dataset_info.json` and its Arrow IPC stream, each
//! replaced or edited, then every read operation (entry.rs).

#![no_main]

mod entry;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = entry::open_hf_input(data);
});
