//! A global allocator that counts the allocations each thread makes, for the tests that check a hot path (a
//! steady link's encode, decode or receive) allocates what it hands back and no more: a test binary installs it
//! (`#[global_allocator]`) and measures a call with [`counted`].

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting the allocations and reallocations made on each thread.
pub struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is passed on to the system allocator unchanged; the count is a const-initialized thread-local
// cell without a destructor, which itself never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        // SAFETY: the caller's contract is `GlobalAlloc::alloc`'s, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through `alloc` or `realloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        // SAFETY: as `dealloc`, and `new_size` is the caller's, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// The allocations `f` makes on this thread, and what it returns: zero unless [`CountingAllocator`] is the global
/// allocator.
pub fn counted<R>(f: impl FnOnce() -> R) -> (usize, R) {
    let before = ALLOCATIONS.with(Cell::get);
    let r = f();
    (ALLOCATIONS.with(Cell::get) - before, r)
}
