//! Waiting for a condition with a deadline: a test polls what it cannot await, and fails naming
//! what it waited for once the deadline passes, never sleeping for a fixed time and hoping.

#![allow(dead_code, reason = "each test binary waits on some of these, not all")]

use std::{fmt::Display, time::Duration};

use tokio::time::Instant;

/// How often a condition is looked at again.
const EVERY: Duration = Duration::from_millis(10);

/// A point in time a wait must not pass: [`Deadline::check`] fails the test naming what it
/// waited for. For a loop that does more between its looks than [`until`] would.
pub struct Deadline {
    at: Instant,
    what: String,
}

impl Deadline {
    pub fn after(within: Duration, what: impl Into<String>) -> Self {
        Self {
            at: Instant::now() + within,
            what: what.into(),
        }
    }

    /// Whether the deadline has passed.
    pub fn passed(&self) -> bool {
        Instant::now() >= self.at
    }

    /// Fails the test once the deadline has passed.
    pub fn check(&self) {
        assert!(!self.passed(), "timed out waiting for {}", self.what);
    }
}

/// What a look at a condition found: done (with what it found), or not yet (with what to say
/// should the deadline pass).
pub trait Look {
    type Found;
    fn look(self) -> Result<Self::Found, Option<String>>;
}

/// Done when true.
impl Look for bool {
    type Found = ();
    fn look(self) -> Result<(), Option<String>> {
        if self { Ok(()) } else { Err(None) }
    }
}

/// Done with the value, once there is one.
impl<T> Look for Option<T> {
    type Found = T;
    fn look(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

/// Done with the value; not yet, saying how things stand.
impl<T> Look for Result<T, String> {
    type Found = T;
    fn look(self) -> Result<T, Option<String>> {
        self.map_err(Some)
    }
}

fn timed_out(within: Duration, what: &dyn Display, last: Option<String>) -> ! {
    match last {
        Some(last) => panic!("timed out after {within:?} waiting for {what}: {last}"),
        None => panic!("timed out after {within:?} waiting for {what}"),
    }
}

/// Looks at `condition` every few milliseconds until it is done, and answers what it found;
/// fails naming `what` (and how things stood at the last look) once `within` has passed.
pub async fn until<L: Look>(
    within: Duration,
    what: impl Display,
    mut condition: impl FnMut() -> L,
) -> L::Found {
    let deadline = Instant::now() + within;
    loop {
        let last = match condition().look() {
            Ok(found) => return found,
            Err(last) => last,
        };
        if Instant::now() >= deadline {
            timed_out(within, &what, last);
        }
        tokio::time::sleep(EVERY).await;
    }
}

/// [`until`] for a condition that must await to look (ask a peer, send and read back): `step`
/// runs again, a few milliseconds apart, until it is done.
pub async fn until_async<L: Look>(
    within: Duration,
    what: impl Display,
    mut step: impl AsyncFnMut() -> L,
) -> L::Found {
    let deadline = Instant::now() + within;
    loop {
        let last = match step().await.look() {
            Ok(found) => return found,
            Err(last) => last,
        };
        if Instant::now() >= deadline {
            timed_out(within, &what, last);
        }
        tokio::time::sleep(EVERY).await;
    }
}

/// Looks at `condition` every few milliseconds for all of `during`, and fails naming `what` (and
/// how things stood) at the first look where it does not hold: a promise that something does
/// not happen, for as long as a test can wait.
pub async fn holds(
    during: Duration,
    what: impl Display,
    mut condition: impl FnMut() -> Result<(), String>,
) {
    let deadline = Instant::now() + during;
    loop {
        if let Err(now) = condition() {
            panic!("{what} did not hold: {now}");
        }
        if Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(EVERY).await;
    }
}
