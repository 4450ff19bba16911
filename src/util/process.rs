//! Process-wide resources that survive `fork`.
//!
//! A child made by `fork` (a PyTorch DataLoader worker, a
//! `multiprocessing.Pool`, a Python `os.fork()`) inherits a copy of the
//! parent's memory but only the thread that called `fork`. A thread pool or
//! an async runtime the parent started is there in the child without its
//! threads, and a lock another parent thread held is held forever: the first
//! parallel call, request or lock in the child waits for ever.
//!
//! So everything the library starts lazily and keeps per process lives in a
//! [`ForkLocal`]: a slot keyed by the process's *fork generation*, a counter
//! that a `pthread_atfork` child handler bumps in every child. A child sees
//! the parent's generation in the slot, forgets the parent's value (leaked,
//! never dropped: dropping a pool whose threads do not exist could hang) and
//! makes its own on first use, behind a fresh lock, so a lock the parent
//! held at the fork is never touched. The parent's calls in progress at a
//! fork are unaffected: its threads and values are its own.
//!
//! The generation, unlike the process id, cannot repeat: a grandchild whose
//! pid is a dead ancestor's still has a generation of its own.
//!
//! Parallel work never runs on rayon's global pool, which cannot be rebuilt
//! in a child: it runs on [`in_pool`]'s pool, a [`ForkLocal`] (or on a pool
//! a build owns). A dependency that splits its work over the calling
//! thread's pool (`jpeg-decoder`) is called inside [`in_pool`] too;
//! `tests/it/architecture.rs` checks that every file using rayon's parallel
//! calls names a pool.

use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};

static GENERATION: AtomicU64 = AtomicU64::new(0);

extern "C" fn after_fork_in_child() {
    // Async-signal-safe: one atomic add.
    GENERATION.fetch_add(1, Ordering::SeqCst);
}

/// This process's fork generation: 0 in a process that never forked since
/// the library's first use, one more in each child of a `fork` after it.
/// Values made in another generation belong to an ancestor process.
pub fn fork_generation() -> u64 {
    static WATCH: Once = Once::new();
    WATCH.call_once(|| {
        // SAFETY: registers a handler that only bumps an atomic counter.
        // The return value is 0 or ENOMEM; without the handler every
        // process reads generation 0, as before this module existed.
        unsafe {
            libc::pthread_atfork(None, None, Some(after_fork_in_child));
        }
    });
    GENERATION.load(Ordering::SeqCst)
}

/// One generation's value and its lock.
struct Cell<T> {
    generation: u64,
    value: Mutex<Option<T>>,
}

/// A value made on first use in each process: a child of `fork` makes its
/// own and never touches its parent's (nor the lock that guarded it).
/// `make` must not use the same slot again (it runs under the slot's lock).
pub struct ForkLocal<T> {
    cell: AtomicPtr<Cell<T>>,
}

// SAFETY: the cell is reached only through `&Cell<T>`, whose `Mutex`
// serialises access to the `T`; `T: Send` lets values move between threads.
unsafe impl<T: Send> Sync for ForkLocal<T> {}
unsafe impl<T: Send> Send for ForkLocal<T> {}

impl<T> Default for ForkLocal<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> std::fmt::Debug for ForkLocal<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ForkLocal")
    }
}

impl<T> ForkLocal<T> {
    /// An empty slot (usable in a `static`).
    pub const fn new() -> Self {
        ForkLocal {
            cell: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// This generation's cell, made (and swapped in) when the slot holds
    /// none or an ancestor's. An ancestor's cell is leaked.
    fn cell(&self) -> &Cell<T> {
        let generation = fork_generation();
        loop {
            let p = self.cell.load(Ordering::Acquire);
            // SAFETY: a non-null pointer here came from `Box::into_raw` below
            // and is freed only by `drop` (which has `&mut self`).
            if let Some(c) = unsafe { p.as_ref() } {
                if c.generation == generation {
                    return c;
                }
            }
            let fresh = Box::into_raw(Box::new(Cell {
                generation,
                value: Mutex::new(None),
            }));
            match self
                .cell
                .compare_exchange(p, fresh, Ordering::AcqRel, Ordering::Acquire)
            {
                // SAFETY: just swapped in; lives until `drop`.
                Ok(_) => return unsafe { &*fresh },
                // Another thread of this process swapped first: use its.
                // SAFETY: `fresh` was never shared.
                Err(_) => drop(unsafe { Box::from_raw(fresh) }),
            }
        }
    }

    /// The value for this process, made by `make` if it has none yet.
    ///
    /// # Errors
    /// `make`'s error; the next call tries again.
    pub fn get_or_try_init<E>(
        &self,
        make: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E>
    where
        T: Clone,
    {
        let mut g = self.cell().value.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = &*g {
            return Ok(v.clone());
        }
        let v = make()?;
        *g = Some(v.clone());
        Ok(v)
    }
}

impl<T> Drop for ForkLocal<T> {
    fn drop(&mut self) {
        let p = *self.cell.get_mut();
        // SAFETY: as in `cell`; `&mut self` means no one else holds it.
        if let Some(c) = unsafe { p.as_ref() } {
            if c.generation == fork_generation() {
                // SAFETY: this process's own cell, unshared.
                drop(unsafe { Box::from_raw(p) });
            }
            // An ancestor's value stays leaked (see the module doc).
        }
    }
}

/// Runs `f` (which may use rayon's parallel iterators) on this process's
/// pool, or in place when the caller is already on a rayon pool (its pool
/// then decides the threads). Never rayon's global pool: see the module doc.
///
/// # Errors
/// [`crate::Error::InvalidArgument`] when the pool cannot start (out of
/// threads).
pub(crate) fn in_pool<R: Send>(f: impl FnOnce() -> R + Send) -> crate::error::Result<R> {
    if rayon::current_thread_index().is_some() {
        return Ok(f());
    }
    static POOL: ForkLocal<Arc<rayon::ThreadPool>> = ForkLocal::new();
    let pool = POOL.get_or_try_init(|| {
        rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("shardset-pool-{i}"))
            .build()
            .map(Arc::new)
            .map_err(|e| {
                crate::error::Error::InvalidArgument(format!(
                    "cannot start the library's thread pool: {e}; raise the process's thread limit (ulimit -u)"
                ))
            })
    })?;
    Ok(pool.install(f))
}

/// The process's tokio runtime, shared by the libraries whose API is async
/// (Lance, the S3 client): two worker threads, made again in a child of
/// `fork`.
///
/// # Errors
/// [`crate::Error::InvalidArgument`] when it cannot start (out of threads).
#[cfg(any(feature = "lance", feature = "s3"))]
pub(crate) fn io_runtime() -> crate::error::Result<Arc<tokio::runtime::Runtime>> {
    static RT: ForkLocal<Arc<tokio::runtime::Runtime>> = ForkLocal::new();
    RT.get_or_try_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("shardset-io")
            .enable_all()
            .build()
            .map(Arc::new)
            .map_err(|e| {
                crate::error::Error::InvalidArgument(format!(
                    "cannot start the I/O runtime: {e}; raise the process's thread limit (ulimit -u)"
                ))
            })
    })
}

/// Runs a future to completion on [`io_runtime`] from synchronous code, also
/// when the caller is itself inside a tokio runtime (then on a helper thread).
///
/// # Errors
/// As [`io_runtime`]; a panic of the future as [`crate::Error`].
#[cfg(any(feature = "lance", feature = "s3"))]
pub(crate) fn block_on<F>(fut: F) -> crate::error::Result<F::Output>
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    let rt = io_runtime()?;
    if tokio::runtime::Handle::try_current().is_ok() {
        return std::thread::scope(|s| {
            s.spawn(|| rt.block_on(fut))
                .join()
                .map_err(|p| crate::error::Error::from_panic("io runtime", p))
        });
    }
    Ok(rt.block_on(fut))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_keeps_its_value_within_a_generation() {
        let slot: ForkLocal<Arc<u32>> = ForkLocal::new();
        let a = slot.get_or_try_init(|| Ok::<_, ()>(Arc::new(1))).unwrap();
        let b = slot.get_or_try_init(|| Ok::<_, ()>(Arc::new(2))).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let failed = ForkLocal::<u32>::new();
        assert_eq!(failed.get_or_try_init(|| Err::<u32, _>("no")), Err("no"));
        assert_eq!(failed.get_or_try_init(|| Ok::<_, ()>(3)), Ok(3));
    }

    #[test]
    fn the_pool_is_not_the_global_one() {
        let name = in_pool(|| std::thread::current().name().map(str::to_string)).unwrap();
        assert!(name.is_some_and(|n| n.starts_with("shardset-pool-")));
    }
}
