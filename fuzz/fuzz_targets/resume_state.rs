//! Fuzzes what a killed process leaves for the next one: an Arrow build's
//! resume manifest and files, and a download's partial `.tmp`, lock and
//! final file against a server answering as the input says (modes in
//! resume_entry.rs, which `cargo test` replays). A panic, a wrong cache
//! published or a wrong file under the final name is a finding.

#![no_main]

mod entry;

use libfuzzer_sys::fuzz_target;

/// Leak reports LeakSanitizer must not make: a download's worker threads
/// (and the HTTP client's) end after the call returns, and the
/// thread-locals they made are freed only as each thread exits, which may
/// be after the leak check that follows the input.
#[no_mangle]
pub extern "C" fn __lsan_default_suppressions() -> *const std::ffi::c_char {
    c"leak:__cxa_thread_atexit_impl\nleak:std::sys::thread_local\n".as_ptr()
}

fuzz_target!(|data: &[u8]| {
    let _ = entry::resume_state_input(data);
});
