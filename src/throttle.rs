//! One log line for a burst of the same refusal, not one a refusal, so that what a peer can
//! cause stays readable under attack: the first refusal of a burst is told in full, the rest
//! are counted and told in a reminder at most once a [`REMIND_EVERY`], and a burst ends after a
//! [`QUIET_AFTER`] without one. Keys are bounded: past the most a throttle names, refusals share
//! one unnamed burst. Pure: plain values and a clock the caller passes.

use std::{collections::HashMap, hash::Hash, time::Duration};

use tokio::time::Instant;

/// How often a burst under way is told again, with what it refused since.
pub(crate) const REMIND_EVERY: Duration = Duration::from_secs(60);
/// How long a burst lasts without a refusal: the next one after that begins a new burst.
pub(crate) const QUIET_AFTER: Duration = Duration::from_secs(10);

/// What to log for one refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Say {
    /// The first of a burst: tell it in full. `untold` refusals of this key's burst before it
    /// were counted and never told (0 for a key seen for the first time).
    First { untold: u64 },
    /// Nothing: the refusal is counted, to be told in the next reminder.
    Nothing,
    /// A reminder: `untold` refusals (this one among them) since the last line, in a burst
    /// under way since `since`.
    Again { untold: u64, since: Instant },
}

/// A refusal's line, and whether it fell to the unnamed burst of keys past the most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Note {
    pub(crate) say: Say,
    pub(crate) crowded: bool,
}

#[derive(Debug, Clone)]
struct Burst {
    since: Instant,
    last: Instant,
    told_at: Instant,
    untold: u64,
}

impl Burst {
    fn new(now: Instant) -> Self {
        Self {
            since: now,
            last: now,
            told_at: now,
            untold: 0,
        }
    }

    /// One more refusal at `now`: what to say of it.
    fn note(&mut self, now: Instant) -> Say {
        if now.saturating_duration_since(self.last) >= QUIET_AFTER {
            let untold = std::mem::take(&mut self.untold);
            *self = Self::new(now);
            return Say::First { untold };
        }
        self.last = now;
        self.untold += 1;
        if now.saturating_duration_since(self.told_at) < REMIND_EVERY {
            return Say::Nothing;
        }
        self.told_at = now;
        Say::Again {
            untold: std::mem::take(&mut self.untold),
            since: self.since,
        }
    }

    fn quiet(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last) >= QUIET_AFTER
    }
}

/// The bursts under way, one a key, at most `most` named.
#[derive(Debug)]
pub(crate) struct Throttle<K> {
    bursts: HashMap<K, Burst>,
    most: usize,
    crowd: Option<Burst>,
}

impl<K: Eq + Hash> Throttle<K> {
    pub(crate) fn new(most: usize) -> Self {
        Self {
            bursts: HashMap::new(),
            most,
            crowd: None,
        }
    }

    /// `key` refused one message at `now`: what to log.
    pub(crate) fn note(&mut self, key: K, now: Instant) -> Note {
        if let Some(burst) = self.bursts.get_mut(&key) {
            return Note {
                say: burst.note(now),
                crowded: false,
            };
        }
        if self.bursts.len() >= self.most {
            // Bursts that ended make room; what they left untold is in the counters.
            self.bursts.retain(|_, burst| !burst.quiet(now));
        }
        if self.bursts.len() < self.most {
            self.bursts.insert(key, Burst::new(now));
            return Note {
                say: Say::First { untold: 0 },
                crowded: false,
            };
        }
        let say = match &mut self.crowd {
            Some(crowd) => crowd.note(now),
            None => {
                self.crowd = Some(Burst::new(now));
                Say::First { untold: 0 }
            }
        };
        Note { say, crowded: true }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.bursts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn says(throttle: &mut Throttle<&'static str>, key: &'static str, at: Instant) -> Say {
        throttle.note(key, at).say
    }

    #[test]
    fn a_burst_is_told_once_then_reminded_with_what_it_refused_since() {
        let start = Instant::now();
        let mut throttle = Throttle::new(4);
        assert_eq!(
            says(&mut throttle, "too-big", start),
            Say::First { untold: 0 }
        );
        for n in 1..=1_000u64 {
            let at = start + Duration::from_millis(n);
            assert_eq!(says(&mut throttle, "too-big", at), Say::Nothing);
        }
        // A refusal every 5 s keeps the burst going past the reminder's turn.
        let mut at = start + Duration::from_secs(1);
        while at < start + REMIND_EVERY - Duration::from_secs(5) {
            at += Duration::from_secs(5);
            assert_eq!(says(&mut throttle, "too-big", at), Say::Nothing);
        }
        let turn = start + REMIND_EVERY;
        let reminded = says(&mut throttle, "too-big", turn);
        assert_eq!(
            reminded,
            Say::Again {
                untold: 1_000 + 11 + 1,
                since: start
            }
        );
        assert_eq!(
            says(&mut throttle, "too-big", turn + Duration::from_secs(1)),
            Say::Nothing
        );
    }

    #[test]
    fn a_quiet_spell_ends_a_burst_and_the_next_says_what_went_untold() {
        let start = Instant::now();
        let mut throttle = Throttle::new(4);
        says(&mut throttle, "lines", start);
        says(&mut throttle, "lines", start + Duration::from_secs(1));
        says(&mut throttle, "lines", start + Duration::from_secs(2));
        let later = start + Duration::from_secs(2) + QUIET_AFTER;
        assert_eq!(
            says(&mut throttle, "lines", later),
            Say::First { untold: 2 }
        );
        assert_eq!(
            says(&mut throttle, "frames", later),
            Say::First { untold: 0 },
            "each key has its own burst"
        );
    }

    #[test]
    fn keys_past_the_most_share_one_burst_and_quiet_ones_make_room() {
        let start = Instant::now();
        let mut throttle = Throttle::new(2);
        assert!(!throttle.note("a", start).crowded);
        assert!(!throttle.note("b", start).crowded);
        let crowded = throttle.note("c", start);
        assert_eq!(
            crowded,
            Note {
                say: Say::First { untold: 0 },
                crowded: true
            }
        );
        for key in ["d", "e", "f"] {
            assert_eq!(
                throttle.note(key, start),
                Note {
                    say: Say::Nothing,
                    crowded: true
                }
            );
        }
        assert_eq!(throttle.len(), 2, "no key past the most is kept");
        let later = start + QUIET_AFTER;
        assert_eq!(
            throttle.note("g", later),
            Note {
                say: Say::First { untold: 0 },
                crowded: false
            },
            "the quiet bursts made room"
        );
        assert_eq!(throttle.len(), 1);
    }
}
