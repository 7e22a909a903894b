//! One log line when an episode of failures begins, one when it ends: a writer's destination
//! that stops taking messages, a ROUTER's requester that stops reading its answers. Bounded and
//! expiring, since a peer chooses the keys: an episode with no failure for a quiet spell is
//! forgotten once room is needed or a spell has passed, and past the most at once, new keys
//! share one unnamed episode. Pure: plain values and a clock the caller passes.

use std::{collections::HashMap, hash::Hash, time::Duration};

use tokio::time::Instant;

use crate::throttle::QUIET_AFTER;

/// An episode under way: since when, why, and how many sends failed in it after the one that
/// began it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failing<T> {
    pub(crate) since: Instant,
    pub(crate) reason: T,
    /// How many sends failed in it since the one that began it.
    pub(crate) refused: u64,
    /// When the last of them failed.
    last: Instant,
}

/// How an episode ended: after how many failed sends (past the one that began it), and how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ended {
    pub(crate) refused: u64,
    pub(crate) after: Duration,
}

/// The episodes under way, one a key, at most `most` at once: past that a new key's failure
/// goes to one unnamed episode (its failures are still the caller's to count and return), so a
/// peer that makes up keys grows nothing and is warned of once.
#[derive(Debug, Clone)]
pub(crate) struct Episodes<K, T = ()> {
    open: HashMap<K, Failing<T>>,
    most: usize,
    /// The last failure of a key past the most, while those go on.
    crowded: Option<Instant>,
    /// When quiet episodes were last forgotten.
    swept: Option<Instant>,
}

impl<K: Eq + Hash, T> Episodes<K, T> {
    pub(crate) fn new(most: usize) -> Self {
        Self {
            open: HashMap::new(),
            most,
            crowded: None,
            swept: None,
        }
    }

    /// `key` failed at `now` for `reason`: answers whether that began an episode (the warning's
    /// turn). Within one it changes nothing: one send may be reported failed twice (by its
    /// caller's deadline and by the socket), so only [`refuse`](Self::refuse) counts.
    pub(crate) fn failed(&mut self, key: K, now: Instant, reason: T) -> bool {
        if self.open.contains_key(&key) {
            return false;
        }
        self.sweep(now);
        if self.open.len() < self.most {
            let failing = Failing {
                since: now,
                reason,
                refused: 0,
                last: now,
            };
            self.open.insert(key, failing);
            return true;
        }
        let began = self
            .crowded
            .is_none_or(|last| now.saturating_duration_since(last) >= QUIET_AFTER);
        self.crowded = Some(now);
        began
    }

    /// Forgets the episodes quiet for a spell, when room is needed or a spell has passed since
    /// the last look: their keys (a requester that left, say) fail no more.
    fn sweep(&mut self, now: Instant) {
        let due = self
            .swept
            .is_none_or(|swept| now.saturating_duration_since(swept) >= QUIET_AFTER);
        if !due && self.open.len() < self.most {
            return;
        }
        self.swept = Some(now);
        self.open
            .retain(|_, failing| now.saturating_duration_since(failing.last) < QUIET_AFTER);
    }

    /// The episode of `key`, if one is under way, with one more send refused by it at `now`.
    pub(crate) fn refuse(&mut self, key: &K, now: Instant) -> Option<&Failing<T>> {
        let failing = self.open.get_mut(key)?;
        failing.refused += 1;
        failing.last = now;
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
            episodes
                .refuse(&"slow", start)
                .map(|f| (f.reason, f.refused)),
            Some(("full", 1))
        );
        assert_eq!(episodes.refuse(&"slow", start).map(|f| f.refused), Some(2));
        assert!(episodes.failed("other", start, "full"), "one episode a key");
        assert_eq!(
            episodes.reached(&"slow", || start + Duration::from_secs(7)),
            Some(Ended {
                refused: 2,
                after: Duration::from_secs(7)
            })
        );
        assert_eq!(episodes.reached(&"slow", || start), None, "it ended");
        assert_eq!(
            episodes.refuse(&"slow", start),
            None,
            "nothing refuses after it"
        );
        assert!(episodes.failed("slow", start, "full"), "a new one begins");
    }

    #[test]
    fn keys_past_the_bound_share_one_episode_warned_of_once() {
        let start = Instant::now();
        let mut episodes = Episodes::new(4);
        for key in 0..4 {
            assert!(episodes.failed(key, start, ()));
        }
        assert!(episodes.failed(4, start, ()), "the first past the bound");
        for key in 5..1_000 {
            assert!(!episodes.failed(key, start, ()), "counted, not warned of");
        }
        assert_eq!(episodes.len(), 4);
        assert!(
            episodes.failed(1_000, start + QUIET_AFTER * 2, ()),
            "the named ones went quiet and made room"
        );
        assert_eq!(episodes.len(), 1);
    }

    #[test]
    fn an_episode_quiet_for_a_spell_is_forgotten_though_room_is_left() {
        let start = Instant::now();
        let mut episodes = Episodes::new(1_024);
        assert!(episodes.failed("left", start, ()));
        assert!(episodes.failed("stays", start, ()));
        let later = start + QUIET_AFTER;
        assert!(episodes.refuse(&"stays", later).is_some());
        assert!(episodes.failed("new", later, ()));
        assert_eq!(
            episodes.reached(&"left", || later),
            None,
            "a requester that left is forgotten"
        );
        assert!(episodes.reached(&"stays", || later).is_some());
    }
}
