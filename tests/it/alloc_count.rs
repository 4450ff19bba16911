//! A global allocator that counts the bytes each thread allocates, so a
//! test can say "opening this cache allocated at most N bytes" whatever the
//! other tests running at the same time do.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
}

/// [`System`], counting.
pub struct Counting;

fn count(n: usize) {
    // `try_with`: nothing to count into while the thread's locals are torn down.
    let _ = ALLOCATED.try_with(|c| c.set(c.get() + n as u64));
}

// SAFETY: every call is forwarded to `System` unchanged; the counter is a
// thread-local `Cell` that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size.saturating_sub(layout.size()));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Bytes this thread has allocated so far (frees not subtracted).
pub fn thread_allocated() -> u64 {
    ALLOCATED.with(Cell::get)
}
