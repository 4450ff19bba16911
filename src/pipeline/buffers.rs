//! Batch buffers used again. A batch of 256 ImageNet crops in float32 is
//! 154 MB: allocated fresh, every one of its 37,000 pages is faulted in and
//! zeroed by the kernel before a pixel is written, about a fifth of the
//! time the batch takes to make (measured: 1,306 images/s on one thread
//! with fresh buffers). A consumer that is done with a batch gives its
//! buffers back ([`BufferPool::give`]; the Python bindings do it when torch
//! frees the tensor), and the next batch is written over them.
//!
//! The pool keeps at most the bytes the pipeline may have in flight, and
//! is left alone in a forked child (a lock a parent thread held at the
//! fork would be held there for ever): buffers given back there are freed.
//!
//! A new big buffer is asked of the kernel in small pages
//! (`MADV_NOHUGEPAGE`). The allocator (mimalloc in the Python package)
//! marks its memory for transparent huge pages, and a huge page must be a
//! free, zeroed 2 MiB block: on a virtual machine that hands free memory
//! back to its host, such blocks are the ones the host took back, and each
//! first touch waits for the host. Measured on the 2-core machine of
//! `docs/benchmarks/pipeline.md`, one epoch of the train workload spent
//! 14% of its CPU zeroing the first 700 MB of batch buffers that way
//! (0.47 GB/s), against about 3 GB/s in small pages. A buffer is written
//! once per batch front to back, where huge pages save little; on a
//! machine where they fault in fast, small pages cost a few tenths of a
//! second once per pool.

use std::sync::Mutex;

use crate::util::fork_generation;

/// The free buffers and their bytes (capacity), kept as a sum so a
/// give does not walk them.
#[derive(Debug, Default)]
struct Free {
    buffers: Vec<Vec<u8>>,
    bytes: usize,
}

/// Buffers from this size on are asked for in small pages.
const SMALL_PAGES_FROM: usize = 4 << 20;

/// A new zeroed buffer of `len` bytes; a big one in small pages.
fn fresh(len: usize) -> Vec<u8> {
    let buf = vec![0u8; len];
    #[cfg(target_os = "linux")]
    if len >= SMALL_PAGES_FROM {
        // The pages wholly inside the buffer: madvise takes whole pages.
        const PAGE: usize = 4096;
        let start = buf.as_ptr() as usize;
        let first = start.next_multiple_of(PAGE);
        let end = (start + len) & !(PAGE - 1);
        if end > first {
            // SAFETY: [first, end) lies inside `buf`'s allocation, which
            // lives on; the advice changes how its pages are backed, never
            // their contents. A refusal (an old kernel) changes nothing.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    end - first,
                    libc::MADV_NOHUGEPAGE,
                );
            }
        }
    }
    buf
}

/// Buffers for the next batches.
#[derive(Debug)]
pub struct BufferPool {
    free: Mutex<Free>,
    max_bytes: usize,
    generation: u64,
}

impl BufferPool {
    /// A pool keeping at most `max_bytes` of free buffers.
    pub fn new(max_bytes: usize) -> BufferPool {
        BufferPool {
            free: Mutex::new(Free::default()),
            max_bytes,
            generation: fork_generation(),
        }
    }

    fn ours(&self) -> bool {
        self.generation == fork_generation()
    }

    /// A buffer of `len` bytes: a given-back one (its old bytes, which the
    /// caller overwrites) or a new zeroed one.
    pub fn take(&self, len: usize) -> Vec<u8> {
        if self.ours() {
            let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
            // The latest given first: the likeliest still in the cache.
            let fit = free
                .buffers
                .iter()
                .rposition(|b| b.len() == len)
                .or_else(|| free.buffers.iter().rposition(|b| b.capacity() >= len));
            if let Some(i) = fit {
                let mut b = free.buffers.swap_remove(i);
                free.bytes -= b.capacity();
                b.resize(len, 0);
                return b;
            }
        }
        fresh(len)
    }

    /// Gives a consumed batch's buffer back for the next batches (dropped
    /// when the pool is full, or in a forked child).
    pub fn give(&self, buf: Vec<u8>) {
        if !self.ours() || buf.capacity() == 0 {
            return;
        }
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if free.bytes + buf.capacity() <= self.max_bytes {
            free.bytes += buf.capacity();
            free.buffers.push(buf);
        }
    }

    /// Bytes of free buffers held.
    pub fn held_bytes(&self) -> usize {
        if !self.ours() {
            return 0;
        }
        self.free.lock().unwrap_or_else(|p| p.into_inner()).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The VmFlags of the mapping holding `addr`, from /proc/self/smaps.
    #[cfg(target_os = "linux")]
    fn vm_flags(addr: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                if inside {
                    return flags.trim().to_string();
                }
                continue;
            }
            // A mapping's first line: "start-end perms ...".
            let range = line.split(' ').next().unwrap_or("");
            if let Some((a, b)) = range.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    inside = (a..b).contains(&addr);
                }
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    #[test]
    fn a_big_new_buffer_is_zeroed_in_small_pages_and_comes_back_written() {
        let pool = BufferPool::new(64 << 20);
        let len = 24 << 20;
        let mut b = pool.take(len);
        assert_eq!(b.len(), len);
        assert!(b.iter().all(|&x| x == 0));
        #[cfg(target_os = "linux")]
        {
            let mid = b.as_ptr() as usize + len / 2;
            let flags = vm_flags(mid);
            assert!(flags.split(' ').any(|f| f == "nh"), "VmFlags {flags}");
        }
        b[len - 1] = 7;
        let at = b.as_ptr();
        pool.give(b);
        assert_eq!(pool.held_bytes(), len);
        let again = pool.take(len);
        assert_eq!((again.as_ptr(), again[len - 1]), (at, 7));
        assert_eq!(pool.held_bytes(), 0);
        // A small one is left as the allocator gives it.
        let small = pool.take(SMALL_PAGES_FROM - 1);
        assert!(small.iter().all(|&x| x == 0));
        #[cfg(target_os = "linux")]
        {
            let flags = vm_flags(small.as_ptr() as usize + small.len() / 2);
            assert!(!flags.split(' ').any(|f| f == "nh"), "VmFlags {flags}");
        }
    }
}
