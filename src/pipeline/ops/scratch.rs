//! Per-thread pixel buffers reused from one image to the next.
//!
//! A decoded 256x256 photograph and its resized crop are 150-200 KB each:
//! allocated fresh per image, the allocator hands such blocks back to the
//! kernel and takes them again, and a train loop's profile showed 4% of its
//! time in the kernel zeroing those pages and in `memset`. Each pipeline
//! thread keeps a few of them instead; a buffer above [`KEEP_BYTES`] (a
//! huge image) is freed as usual, so what a thread holds stays small.

use std::cell::RefCell;

/// The largest buffer a thread keeps (a 1920x1080 RGB frame is 6 MB).
pub(super) const KEEP_BYTES: usize = 8 << 20;

/// How many buffers a thread keeps.
const KEEP: usize = 4;

thread_local! {
    static FREE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of `len` bytes, reused when the thread has one: its bytes are
/// whatever was there (zeros when it is new), so the caller writes all of
/// them.
pub(super) fn take(len: usize) -> Vec<u8> {
    let reused = FREE.with(|f| {
        let mut f = f.borrow_mut();
        // The smallest buffer that holds `len` bytes, else the largest.
        let pick = f
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i)
            .or_else(|| (0..f.len()).max_by_key(|&i| f[i].capacity()));
        pick.map(|i| f.swap_remove(i))
    });
    let mut buf = reused.unwrap_or_default();
    buf.resize(len, 0);
    buf
}

/// Gives a buffer back to this thread's free list (dropped when the list is
/// full or the buffer is too big to keep).
pub(super) fn give(buf: Vec<u8>) {
    if buf.capacity() == 0 || buf.capacity() > KEEP_BYTES {
        return;
    }
    FREE.with(|f| {
        let mut f = f.borrow_mut();
        if f.len() < KEEP {
            f.push(buf);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_with_the_length_asked_and_big_ones_are_not_kept() {
        let a = take(1000);
        assert_eq!(a.len(), 1000);
        let at = a.as_ptr();
        give(a);
        let b = take(500);
        assert_eq!(
            (b.len(), b.as_ptr()),
            (500, at),
            "the kept buffer is reused"
        );
        give(b);
        let c = take(4000);
        assert_eq!(c.len(), 4000);
        give(c);
        give(take(KEEP_BYTES + 1));
        FREE.with(|f| {
            let f = f.borrow();
            assert!(f.len() <= KEEP);
            assert!(
                f.iter().all(|b| b.capacity() <= KEEP_BYTES),
                "a big buffer was kept"
            );
        });
    }
}
