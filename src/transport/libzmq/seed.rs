//! An unpredictable start for the routing ids a ROUTER gives anonymous peers.
//!
//! libzmq gives each peer that names no routing id `0x00` followed by a counter, started from
//! C's `rand()`. Nothing in libzmq calls `srand`, so every process starts from the same value, and a
//! peer that claims the next id in advance makes the next anonymous peer's arrival fail an
//! assertion that aborts the process (`router.cpp`, libzmq 4.3). Seeded from the operating
//! system's randomness, the counter's start is one guess in four billion.

use std::hash::{BuildHasher, RandomState};

/// Calls C's `srand` once, before the first libzmq socket of the process.
pub(super) fn seed_routing_ids() {
    // The standard library keys its hashers from the operating system's randomness.
    let seed = RandomState::new().hash_one(std::process::id());
    let seed = (seed ^ (seed >> 32)) as libc::c_uint;
    #[expect(
        unsafe_code,
        reason = "libzmq takes its routing ids from C's rand(): only srand sets its start"
    )]
    // SAFETY: `srand` has no preconditions; glibc guards the generator's state with a lock, so
    // a call beside another thread's `rand` is sound.
    unsafe {
        libc::srand(seed);
    }
}
