//! One log line for a burst of the same refusal, not one a refusal, so that what a peer can
//! cause stays readable under attack: the first refusal of a burst is told in full, the rest
//! are counted and told in a reminder at most once a [`REMIND_EVERY`], and a burst ends after a
//! [`QUIET_AFTER`] without one. Keys are bounded: past the most a throttle names, refusals share
//! one unnamed burst. Pure: plain values and a clock the caller passes.
//!
//! A peer that changes key at every attempt begins a new burst each time, so the lines of one
//! endpoint's refused CURVE keys ([`Refusals`]) also spend a [`Budget`]: [`LINES_AT_ONCE`] lines
//! at once, then one each [`LINE_EVERY`]; what it withholds is counted, and the next line it
//! writes says how many.

use std::{collections::HashMap, hash::Hash, time::Duration};

use tokio::time::Instant;

/// How often a burst under way is told again, with what it refused since.
pub(crate) const REMIND_EVERY: Duration = Duration::from_secs(60);
/// How long a burst lasts without a refusal: the next one after that begins a new burst.
pub(crate) const QUIET_AFTER: Duration = Duration::from_secs(10);

/// How many refusal lines an endpoint writes at once, its budget full.
#[cfg(curve)]
pub(crate) const LINES_AT_ONCE: u32 = 10;
/// How often an endpoint's budget earns one more line, up to [`LINES_AT_ONCE`]: over any span
/// of time T, an endpoint writes at most `LINES_AT_ONCE + ceil(T / LINE_EVERY)` lines.
#[cfg(curve)]
pub(crate) const LINE_EVERY: Duration = Duration::from_secs(6);

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

/// The lines one endpoint may write: [`LINES_AT_ONCE`] at once, then one each [`LINE_EVERY`],
/// whatever the keys; the lines it withholds are counted until the next it lets through.
#[cfg(curve)]
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    lines: u32,
    /// When the last line was earned (or the budget was last full).
    earned_at: Instant,
    withheld: u64,
}

#[cfg(curve)]
impl Budget {
    pub(crate) fn new(now: Instant) -> Self {
        Self {
            lines: LINES_AT_ONCE,
            earned_at: now,
            withheld: 0,
        }
    }

    /// One line to write at `now`: `Some(withheld)`, the lines withheld since the last one let
    /// through, or `None` when the budget is spent (the line is counted, not written).
    pub(crate) fn spend(&mut self, now: Instant) -> Option<u64> {
        let periods =
            now.saturating_duration_since(self.earned_at).as_nanos() / LINE_EVERY.as_nanos();
        let earned = u32::try_from(periods).unwrap_or(u32::MAX);
        if earned > 0 {
            self.lines = self.lines.saturating_add(earned).min(LINES_AT_ONCE);
            // Past the first period the budget is full, and a full budget earns nothing more.
            self.earned_at = if self.lines == LINES_AT_ONCE {
                now
            } else {
                self.earned_at + LINE_EVERY * earned
            };
        }
        if self.lines == 0 {
            self.withheld += 1;
            return None;
        }
        if self.lines == LINES_AT_ONCE {
            // The period starts with the first line spent from a full budget.
            self.earned_at = now;
        }
        self.lines -= 1;
        Some(std::mem::take(&mut self.withheld))
    }

    /// A line let through that could not be written after all: counted with the withheld ones.
    #[cfg_attr(
        not(any(feature = "libzmq", test)),
        expect(
            dead_code,
            reason = "only libzmq hands its lines to a queue that can be full"
        )
    )]
    pub(crate) fn unwritten(&mut self, lines: u64) {
        self.withheld += lines;
    }
}

/// A line to write for a refused peer: what it says, whether it stands for the keys past the
/// most named, and how many lines the endpoint's budget withheld before it.
#[cfg(curve)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Line {
    pub(crate) say: Say,
    pub(crate) crowded: bool,
    pub(crate) withheld: u64,
}

/// One endpoint's refusals: a burst a key ([`Throttle`]), and every line within the
/// endpoint's [`Budget`].
#[cfg(curve)]
#[derive(Debug)]
pub(crate) struct Refusals<K> {
    keys: Throttle<K>,
    budget: Budget,
}

#[cfg(curve)]
impl<K: Eq + Hash> Refusals<K> {
    /// An endpoint's refusals, naming at most `most` keys, its budget full at `now`.
    pub(crate) fn new(most: usize, now: Instant) -> Self {
        Self {
            keys: Throttle::new(most),
            budget: Budget::new(now),
        }
    }

    /// `key` refused at `now`: the line to write, if any.
    pub(crate) fn note(&mut self, key: K, now: Instant) -> Option<Line> {
        let Note { say, crowded } = self.keys.note(key, now);
        if say == Say::Nothing {
            return None;
        }
        let withheld = self.budget.spend(now)?;
        Some(Line {
            say,
            crowded,
            withheld,
        })
    }

    /// A line [`note`](Self::note) let through that could not be written: told in the next.
    #[cfg(feature = "libzmq")]
    pub(crate) fn unwritten(&mut self) {
        self.budget.unwritten(1);
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

    /// A peer of a new key every millisecond for `span`: the lines written, with when.
    #[cfg(curve)]
    fn rotating_keys(span: Duration) -> (Vec<(Duration, Line)>, u64) {
        let start = Instant::now();
        // Every key named, so that each refusal would be a line of its own but for the budget.
        let mut refusals = Refusals::new(usize::MAX, start);
        let mut written = Vec::new();
        let mut refused = 0;
        let mut at = Duration::ZERO;
        while at < span {
            refused += 1;
            if let Some(line) = refusals.note(refused, start + at) {
                written.push((at, line));
            }
            at += Duration::from_millis(1);
        }
        (written, refused)
    }

    #[cfg(curve)]
    #[test]
    fn an_endpoint_writes_its_budget_of_lines_whatever_the_keys_and_each_says_what_it_withheld() {
        let (written, refused) = rotating_keys(Duration::from_secs(20));
        // Ten at once, then one at 6 s, 12 s and 18 s.
        assert_eq!(written.len(), 13, "{written:?}");
        assert!(
            written[..10]
                .iter()
                .all(|(at, _)| *at < Duration::from_millis(10))
        );
        let later: Vec<Duration> = written[10..].iter().map(|(at, _)| *at).collect();
        assert_eq!(
            later,
            [6, 12, 18].map(Duration::from_secs),
            "one line a {LINE_EVERY:?} once the budget is spent"
        );
        assert!(written[..10].iter().all(|(_, line)| line.withheld == 0));
        // Each later line says how many were withheld since the one before: the refusals between.
        let mut told = 0;
        for pair in written.windows(2) {
            let ((before, _), (at, line)) = (pair[0], pair[1]);
            let between = (at - before).as_millis() as u64 - 1;
            assert_eq!(line.withheld, between, "the line at {at:?}");
            told += 1 + line.withheld;
        }
        told += 1;
        let pending = refused - told;
        assert_eq!(
            pending,
            u64::try_from((Duration::from_secs(20) - Duration::from_secs(18)).as_millis()).unwrap()
                - 1,
            "what came after the last line is still counted, for the next"
        );
    }

    #[cfg(curve)]
    #[test]
    fn no_span_of_a_flood_writes_more_than_the_budget_says() {
        let (written, _) = rotating_keys(Duration::from_secs(90));
        let span = Duration::from_secs(20);
        let most = LINES_AT_ONCE as usize + span.as_secs().div_ceil(LINE_EVERY.as_secs()) as usize;
        for (from, _) in &written {
            let within = written
                .iter()
                .filter(|(at, _)| *at >= *from && *at < *from + span)
                .count();
            assert!(
                within <= most,
                "{within} lines in the {span:?} from {from:?}"
            );
        }
    }

    #[cfg(curve)]
    #[test]
    fn a_quiet_endpoint_earns_its_budget_back_and_its_next_line_tells_what_was_withheld() {
        let start = Instant::now();
        let mut budget = Budget::new(start);
        for _ in 0..LINES_AT_ONCE {
            assert_eq!(budget.spend(start), Some(0));
        }
        assert_eq!(budget.spend(start), None);
        assert_eq!(budget.spend(start + Duration::from_secs(1)), None);
        // A line let through that the writer could not take counts with the withheld.
        budget.unwritten(1);
        let later = start + LINE_EVERY * LINES_AT_ONCE;
        assert_eq!(budget.spend(later), Some(3));
        for _ in 1..LINES_AT_ONCE {
            assert_eq!(
                budget.spend(later),
                Some(0),
                "full again after a quiet spell"
            );
        }
        assert_eq!(budget.spend(later), None);
    }

    #[cfg(curve)]
    #[test]
    fn a_key_told_within_its_burst_spends_no_line_of_the_budget() {
        let start = Instant::now();
        let mut refusals = Refusals::new(4, start);
        assert!(refusals.note("same", start).is_some());
        for n in 1..1_000 {
            let at = start + Duration::from_millis(n);
            assert_eq!(refusals.note("same", at), None);
        }
        for key in ["a", "b", "c"] {
            assert_eq!(
                refusals
                    .note(key, start + Duration::from_secs(1))
                    .map(|line| line.withheld),
                Some(0),
                "the budget holds nine more lines"
            );
        }
    }
}
