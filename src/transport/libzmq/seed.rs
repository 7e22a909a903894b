//! Where the routing ids a ROUTER gives anonymous peers start: a guess a blind peer must make.
//!
//! libzmq 4.3 gives each peer that names no routing id `0x00` followed by the next value of a
//! counter each ROUTER starts from C's `rand()`, and never checks that a peer claimed that id
//! first: the next anonymous peer's arrival then fails an assertion that aborts the process.
//! Nothing in libzmq calls `srand`, so unseeded every process's first ROUTER starts at the same
//! value. Seeded from the operating system's randomness, a blind claim is one guess in four
//! billion. It only hides the start: a peer that reads its own routing id (its `reply-to`) knows
//! the next one, and the security guide says what keeps such peers out.
//!
//! Kept for the blind case, with its side effects, which the guide states: every `rand()` user
//! of the process is restarted; a ROUTER made before the crate's first socket keeps the fixed
//! start; a later `srand` by any C library makes the start predictable again; and musl's `rand`
//! has no lock.

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
    // SAFETY: `srand` has no preconditions. glibc guards the generator's state with a lock, so
    // a call beside another thread's `rand` is sound there. musl's `rand` takes no lock: a
    // `rand` on another thread at this very instant would race with this write, a risk taken
    // once, at the crate's first libzmq socket, and stated in the security guide.
    unsafe {
        libc::srand(seed);
    }
}
