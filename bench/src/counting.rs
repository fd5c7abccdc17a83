//! The bench binary's global allocator: `System`, counting allocations only while
//! asked to (section 3).
//!
//! Everywhere else it must cost nothing over `System`. An allocator that counts all
//! the time adds its own work to every contender's loopback CPU time, which flatters
//! every ratio against raw reqwest; and when its counter is shared (as
//! `stats_alloc`'s is), it is a cache line that the engine section's two workers
//! write on every allocation and free: a point of contention of the bench's own,
//! under which two plain threads decoding JSON ran at 0.8 to 1.2 times one thread's
//! rate, against 1.9 to 2.0 under `System`. No well-kept crate offers a counting
//! allocator that can be switched off (`stats_alloc` and `alloc_tracker` always
//! count; `tracking-allocator` wraps every allocation in a larger one), so this is
//! the bench's one piece of `unsafe`: each method hands its arguments to `System`
//! unchanged.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// `System`, counting allocations and reallocations while [`COUNTING`] is on.
pub struct Counting;

/// Whether [`Counting`] counts. Written only around a count, so while the timed
/// sections run it is a cache line every core reads and none writes.
static COUNTING: AtomicBool = AtomicBool::new(false);

/// Allocations and reallocations counted so far.
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

fn count() {
    if COUNTING.load(Ordering::Relaxed) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every method passes its caller's arguments, under the same contract, to
// `System`; counting touches no memory of the allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Counting on until dropped, even on an early return or a panic.
struct On;

impl Drop for On {
    fn drop(&mut self) {
        COUNTING.store(false, Ordering::Relaxed);
    }
}

/// Runs `f`, and returns the allocations (reallocations included) the whole process
/// made meanwhile, with `f`'s result.
pub fn allocations_during<R>(f: impl FnOnce() -> R) -> (usize, R) {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    let on = On;
    let result = f();
    drop(on);
    (ALLOCATIONS.load(Ordering::Relaxed) - before, result)
}
