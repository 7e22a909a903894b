//! The counting global allocator: every heap allocation of Rust code is counted, for the
//! allocations-per-message column, and passed on to glibc's `malloc` or to `mimalloc`
//! (`THROUGHPUT_ALLOCATOR`, read when the bench is built).

use std::{
    alloc::{GlobalAlloc, Layout, System},
    sync::atomic::{AtomicU64, Ordering},
};

use mimalloc::MiMalloc;

/// Counts the heap allocations of Rust code (the crate, the `zeromq` client, the framework,
/// serde, the bench itself); libzmq's own `malloc` calls, in C, are not seen.
struct Counting;

pub static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// Read when the bench is built (cargo rebuilds it when the variable changes), so that the
/// choice costs nothing per call.
const ON_MIMALLOC: bool = match option_env!("THROUGHPUT_ALLOCATOR") {
    Some(name) => matches!(name.as_bytes(), b"mimalloc"),
    None => false,
};

/// The allocator every call goes to: a constant, so the choice folds away when built.
fn inner() -> &'static dyn GlobalAlloc {
    if ON_MIMALLOC { &MiMalloc } else { &System }
}

pub fn allocator() -> &'static str {
    if ON_MIMALLOC {
        "allocator: mimalloc"
    } else {
        "allocator: the system's malloc"
    }
}

// SAFETY: every call is passed unchanged to one allocator, the same one for the whole run; only
// a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { inner().alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { inner().alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { inner().realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { inner().dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;
