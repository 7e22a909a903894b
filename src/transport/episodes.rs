//! One log line when an episode of failures begins, one when it ends: a writer's destination
//! that stops taking messages, a ROUTER's requester that stops reading its answers. Pure: plain
//! values and a clock the caller passes.
//!
//! Imports: none.

use std::{collections::HashMap, hash::Hash, time::Duration};

use tokio::time::Instant;

/// An episode under way: since when, why, and how many sends failed in it after the one that
/// began it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failing<T> {
    pub(crate) since: Instant,
    pub(crate) reason: T,
    /// How many sends failed in it since the one that began it.
    pub(crate) refused: u64,
}

/// How an episode ended: after how many failed sends (past the one that began it), and how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ended {
    pub(crate) refused: u64,
    pub(crate) after: Duration,
}

/// The episodes under way, one a key, at most `most` at once: past that a new key's episode
/// goes unrecorded (its failures are still the caller's to count and return), so a peer that
/// makes up keys grows nothing.
#[derive(Debug, Clone)]
pub(crate) struct Episodes<K, T = ()> {
    open: HashMap<K, Failing<T>>,
    most: usize,
}

impl<K: Eq + Hash, T> Episodes<K, T> {
    pub(crate) fn new(most: usize) -> Self {
        Self {
            open: HashMap::new(),
            most,
        }
    }

    /// `key` failed at `now` for `reason`: answers whether that began an episode (the warning's
    /// turn). Within one it changes nothing: one send may be reported failed twice (by its
    /// caller's deadline and by the socket), so only [`refuse`](Self::refuse) counts.
    pub(crate) fn failed(&mut self, key: K, now: Instant, reason: T) -> bool {
        if self.open.contains_key(&key) {
            return false;
        }
        if self.open.len() < self.most {
            let failing = Failing {
                since: now,
                reason,
                refused: 0,
            };
            self.open.insert(key, failing);
        }
        true
    }

    /// The episode of `key`, if one is under way, with one more send refused by it.
    pub(crate) fn refuse(&mut self, key: &K) -> Option<&Failing<T>> {
        let failing = self.open.get_mut(key)?;
        failing.refused += 1;
        Some(failing)
    }

    /// `key` works again: answers how its episode ended, if one was under way. The clock is
    /// read only then; in the usual case, no episode at all, not even the key is hashed.
    pub(crate) fn reached(&mut self, key: &K, now: impl FnOnce() -> Instant) -> Option<Ended> {
        if self.open.is_empty() {
            return None;
        }
        let failing = self.open.remove(key)?;
        Some(Ended {
            refused: failing.refused,
            after: now().saturating_duration_since(failing.since),
        })
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_episode_begins_once_counts_its_failures_and_ends_once() {
        let start = Instant::now();
        let mut episodes = Episodes::new(8);
        assert!(
            episodes.failed("slow", start, "full"),
            "the first failure begins it"
        );
        assert!(
            !episodes.failed("slow", start, "again"),
            "a failure within it begins none"
        );
        assert_eq!(
            episodes.refuse(&"slow").map(|f| (f.reason, f.refused)),
            Some(("full", 1))
        );
        assert_eq!(episodes.refuse(&"slow").map(|f| f.refused), Some(2));
        assert!(episodes.failed("other", start, "full"), "one episode a key");
        assert_eq!(
            episodes.reached(&"slow", || start + Duration::from_secs(7)),
            Some(Ended {
                refused: 2,
                after: Duration::from_secs(7)
            })
        );
        assert_eq!(episodes.reached(&"slow", || start), None, "it ended");
        assert_eq!(episodes.refuse(&"slow"), None, "nothing refuses after it");
        assert!(episodes.failed("slow", start, "full"), "a new one begins");
    }

    #[test]
    fn episodes_are_bounded_and_a_key_past_the_bound_still_gets_its_warning() {
        let start = Instant::now();
        let mut episodes = Episodes::new(4);
        for key in 0..10 {
            assert!(episodes.failed(key, start, ()));
        }
        assert_eq!(episodes.len(), 4);
    }
}
