//! The README's demo (`examples/payments_demo.rs`), run as a process on this module's backend:
//! it ends by itself with status 0 and tells each payment's fate, and each fate is what the
//! demo's rules make of that payment.
//!
//! The expected fates are derived here from the payments the demo sends (their amounts, how
//! often the pretend gateway refuses each) and the rules the README states: nothing to charge is
//! dropped, a refusal sends a copy back in 200 ms, and the third refusal (the cap of three
//! attempts) parks the payment on the dead-letter queue.

use std::process::Command;

use super::BACKEND;
use crate::support::example_binary;

/// The payments the demo's peer sends: id, amount in cents, and how many times the gateway
/// refuses it before it goes through (9: always, within the cap).
const PAYMENTS: [(u64, u64, u32); 8] = [
    (1, 250, 0),
    (2, 0, 0),
    (3, 1200, 1),
    (4, 80, 9),
    (5, 40, 0),
    (6, 0, 0),
    (7, 999, 2),
    (8, 310, 9),
];
/// The attempts a payment gets before it is dead-lettered (`max_attempts(3)`).
const CAP: u32 = 3;

/// One thing that became of a payment, as the demo tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Charged {
        attempt: u32,
    },
    Dropped,
    /// Refused on `attempt`; below the cap a copy comes back.
    Failed {
        attempt: u32,
        copy_back: bool,
    },
    DeadLettered {
        attempts: u32,
    },
}

/// What the rules make of a payment of `amount` the gateway refuses `refusals` times.
fn fate(amount: u64, refusals: u32) -> Vec<Step> {
    if amount == 0 {
        return vec![Step::Dropped];
    }
    let mut steps = Vec::new();
    for attempt in 1..=CAP {
        if attempt > refusals {
            steps.push(Step::Charged { attempt });
            return steps;
        }
        steps.push(Step::Failed {
            attempt,
            copy_back: attempt < CAP,
        });
    }
    steps.push(Step::DeadLettered { attempts: CAP });
    steps
}

/// One step of the demo's output, read back; `None` for a sentence it has no step for.
fn step(text: &str) -> Option<Step> {
    let number = |rest: &str| rest.parse::<u32>().ok();
    if text == "dropped: nothing to charge" {
        return Some(Step::Dropped);
    }
    if let Some(rest) = text.strip_prefix("charged on attempt ") {
        return Some(Step::Charged {
            attempt: number(rest)?,
        });
    }
    if let Some(rest) = text.strip_prefix("dead-lettered after ") {
        return Some(Step::DeadLettered {
            attempts: number(rest.strip_suffix(" attempts")?)?,
        });
    }
    let (attempt, then) = text.strip_prefix("failed on attempt ")?.split_once(", ")?;
    let copy_back = match then {
        "a copy comes back in 200 ms" => true,
        "the cap" => false,
        _ => return None,
    };
    Some(Step::Failed {
        attempt: number(attempt)?,
        copy_back,
    })
}

#[test]
fn the_readmes_demo_settles_every_payment_as_its_rules_say() {
    // The rules themselves, on the cases the README names: charged at once, dropped, refused
    // once and charged on the copy, refused to the cap and parked.
    assert_eq!(fate(250, 0), [Step::Charged { attempt: 1 }]);
    assert_eq!(fate(0, 9), [Step::Dropped]);
    assert_eq!(
        fate(1200, 1),
        [
            Step::Failed {
                attempt: 1,
                copy_back: true
            },
            Step::Charged { attempt: 2 }
        ]
    );

    let out = Command::new(example_binary("payments_demo"))
        .args(["--backend", BACKEND.name()])
        .output()
        .expect("the demo starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the demo failed: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let told: Vec<&str> = stdout
        .lines()
        .filter_map(|line| line.trim().strip_prefix("payment "))
        .collect();
    assert_eq!(told.len(), PAYMENTS.len(), "one line a payment:\n{stdout}");
    for (line, (id, amount, refusals)) in told.iter().zip(PAYMENTS) {
        let (who, steps) = line
            .split_once(": ")
            .unwrap_or_else(|| panic!("no fate in `payment {line}`"));
        assert_eq!(who, format!("{id} ({amount} cents)"), "{stdout}");
        let steps: Vec<Step> = steps
            .split("; ")
            .map(|text| step(text).unwrap_or_else(|| panic!("payment {id}: no such step `{text}`")))
            .collect();
        assert_eq!(
            steps,
            fate(amount, refusals),
            "payment {id} of {amount} cents, refused {refusals} time(s) with a cap of {CAP} \
             attempts:\n{stdout}"
        );
    }

    // The lines the README shows are the demo's, `...` standing for steps it leaves out.
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("the README");
    let shown: Vec<&str> = readme
        .lines()
        .skip_while(|line| *line != "what happened to each payment:")
        .skip(1)
        .map_while(|line| line.trim().strip_prefix("payment "))
        .collect();
    assert!(!shown.is_empty(), "the README shows the demo's output");
    for line in shown {
        let id = line.split_once(' ').map_or(line, |(id, _)| id);
        let printed = told
            .iter()
            .find(|told| told.split_once(' ').is_some_and(|(n, _)| n == id))
            .unwrap_or_else(|| panic!("the README shows payment {id}, the demo does not"));
        assert!(
            shows(line, printed),
            "the README shows `payment {line}`, the demo printed `payment {printed}`"
        );
    }
}

/// Whether the README's `shown` line is the `printed` one, each `...` in it standing for any text.
fn shows(shown: &str, printed: &str) -> bool {
    let parts: Vec<&str> = shown.split("...").collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return shown == printed;
    };
    let Some(mut rest) = printed.strip_prefix(first) else {
        return false;
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}
