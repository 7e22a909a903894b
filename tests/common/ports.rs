//! Loopback ports for endpoints a test must name before anything binds them.

use std::{
    collections::VecDeque,
    net::TcpListener,
    ops::Range,
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicU32, Ordering},
    },
    time::{SystemTime, UNIX_EPOCH},
};

/// Linux hands ports from 32768 up (`net.ipv4.ip_local_port_range`) to sockets that bind port 0
/// or dial out. A port picked below that range cannot be taken by them, from the tests running
/// meanwhile, between the pick and the bind.
const BELOW_EPHEMERAL: Range<u32> = 20_000..32_000;

/// How many of the latest picks a pick never repeats: two picks for one test (a retry queue and
/// a dead-letter queue, say) are both free until either binds, and could otherwise meet.
const REMEMBERED: usize = 4_096;

/// A loopback port nobody listens on right now, outside the range the kernel picks from, and
/// none of the latest picks of this process.
pub fn free_port() -> u16 {
    static PICKED: AtomicU32 = AtomicU32::new(0);
    static LATEST: Mutex<VecDeque<u16>> = Mutex::new(VecDeque::new());
    let span = BELOW_EPHEMERAL.end - BELOW_EPHEMERAL.start;
    for _ in 0..1_000 {
        // Processes and calls start from different places, so parallel picks rarely meet.
        let seed = std::process::id()
            ^ SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
        let step = PICKED.fetch_add(1, Ordering::Relaxed).wrapping_mul(7_919);
        let port = BELOW_EPHEMERAL.start + seed.wrapping_add(step) % span;
        let port = u16::try_from(port).expect("the range is below 32000");
        let mut latest = LATEST.lock().unwrap_or_else(PoisonError::into_inner);
        if !latest.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            if latest.len() == REMEMBERED {
                latest.pop_front();
            }
            latest.push_back(port);
            return port;
        }
    }
    panic!("no free loopback port in {BELOW_EPHEMERAL:?} after 1000 tries")
}
