//! The summary printed at the end: the medians of each side's runs, a table for each backend
//! (its crate against its baseline) and, with more than one backend, the cross table.

use std::time::Duration;

use crate::{alloc::allocator, backend::Which, meter::Run, scenarios::Scenario};

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => f64::midpoint(values[n / 2 - 1], values[n / 2]),
    }
}

fn median_duration(values: impl Iterator<Item = Duration>) -> Duration {
    Duration::from_secs_f64(median(values.map(|d| d.as_secs_f64()).collect()))
}

pub fn rate(value: f64) -> String {
    if value >= 10_000.0 {
        format!("{:.0}k", value / 1e3)
    } else {
        format!("{value:.0}")
    }
}

pub fn micros(value: Duration) -> String {
    let us = value.as_secs_f64() * 1e6;
    if us >= 10_000.0 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{us:.0} µs")
    }
}

/// The medians of one side's runs: rate, CPU, p50, p99, peak growth, fields.
struct Summary {
    rate: f64,
    cpu_us: f64,
    allocs: f64,
    switches: f64,
    latencies: Option<(Duration, Duration)>,
    peak_mb: f64,
    fields: Vec<(&'static str, f64)>,
}

fn summarize(runs: &[Run]) -> Summary {
    // A side left out with `--only` has no runs, and so no latencies.
    let latencies =
        (!runs.is_empty() && runs.iter().all(|run| run.latencies.is_some())).then(|| {
            (
                median_duration(runs.iter().filter_map(|run| run.latencies.map(|l| l.0))),
                median_duration(runs.iter().filter_map(|run| run.latencies.map(|l| l.1))),
            )
        });
    let fields = runs.first().map_or_else(Vec::new, |first| {
        first
            .fields
            .iter()
            .enumerate()
            .map(|(at, (name, _))| {
                (
                    *name,
                    median(runs.iter().map(|run| run.fields[at].1).collect()),
                )
            })
            .collect()
    });
    Summary {
        rate: median(runs.iter().map(|run| run.rate).collect()),
        cpu_us: median(runs.iter().map(|run| run.cpu_us).collect()),
        allocs: median(runs.iter().map(|run| run.allocs).collect()),
        switches: median(runs.iter().map(|run| run.switches).collect()),
        latencies,
        peak_mb: median(runs.iter().map(|run| run.peak_growth_kib).collect()) / 1024.0,
        fields,
    }
}

/// A scenario's runs: for each backend run (in the order of `--backend`), its measured side and
/// its baseline. A shared baseline's runs stand in every backend's.
pub struct Row<'a> {
    pub scenario: &'a Scenario,
    pub n: u64,
    pub runs: Vec<(Vec<Run>, Vec<Run>)>,
}

impl Row<'_> {
    pub fn what(&self) -> String {
        self.scenario.what.replace("{n}", &thousands(self.n))
    }
}

/// A side's own figures, `name value; name value`.
fn figures(fields: &[(&'static str, f64)]) -> String {
    fields
        .iter()
        .map(|(name, value)| format!("{name} {value:.1}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// p50 / p99, or `-` without round trips.
fn round_trips(summary: &Summary) -> String {
    summary.latencies.map_or("-".to_owned(), |(p50, p99)| {
        format!("{} / {}", micros(p50), micros(p99))
    })
}

/// The table of one backend (`at` in each row's runs): its measured side against its baseline.
pub fn print_table(which: Which, at: usize, rows: &[Row], reps: usize, workers: usize) {
    println!();
    println!(
        "backend `{}`, baseline: {}; {}; {workers} runtime workers; medians of {reps} runs",
        which.name(),
        which.baseline(),
        allocator()
    );
    println!();
    println!(
        "| scenario | measured | baseline | ratio | CPU µs/msg, measured / baseline (x) | allocations/msg | context switches/msg | p50 / p99, measured | p50 / p99, baseline | peak RSS growth, MB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        let what = row.what();
        let (measured, baseline) = &row.runs[at];
        let m = summarize(measured);
        let (label, base) = row.scenario.sides;
        let fields = figures(&m.fields);
        if let Some(base_label) = base.label() {
            let b = summarize(baseline);
            let what = if fields.is_empty() {
                what
            } else {
                format!(
                    "{what} ({label}: {fields}; {base_label}: {})",
                    figures(&b.fields)
                )
            };
            println!(
                "| {what} | {label}: {}/s | {base_label}: {}/s | {:.2} | {:.2} / {:.2} ({:.2} x) | {:.1} / {:.1} | {:.2} / {:.2} | {} | {} | {:.1} / {:.1} |",
                rate(m.rate),
                rate(b.rate),
                m.rate / b.rate,
                m.cpu_us,
                b.cpu_us,
                m.cpu_us / b.cpu_us,
                m.allocs,
                b.allocs,
                m.switches,
                b.switches,
                round_trips(&m),
                round_trips(&b),
                m.peak_mb,
                b.peak_mb,
            );
        } else {
            let what = if fields.is_empty() {
                what
            } else {
                format!("{what}: {fields}")
            };
            println!(
                "| {what} | {label}: {}/s | - | - | {:.2} | {:.1} | {:.2} | {} | - | {:.1} |",
                rate(m.rate),
                m.cpu_us,
                m.allocs,
                m.switches,
                round_trips(&m),
                m.peak_mb,
            );
        }
    }
}

/// The cross-backend table: each scenario's measured side on every backend side by side (the
/// first, `zeromq` where the build has it, is the one the others are set against), each
/// later one over the first, and each against its own baseline.
pub fn print_cross_table(backends: &[Which], rows: &[Row], reps: usize, workers: usize) {
    let [first, others @ ..] = backends else {
        return;
    };
    if others.is_empty() {
        return;
    }
    let names: Vec<&str> = backends.iter().map(|which| which.name()).collect();
    let one = first.name();
    let all = names.join(" / ");
    println!();
    println!(
        "crate on each backend: {}; {}; {workers} runtime workers; medians of {reps} runs",
        names.join(", "),
        allocator()
    );
    println!();
    let mut head: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
    head.extend(
        others
            .iter()
            .map(|other| format!("{} / {one}", other.name())),
    );
    head.push(format!("CPU µs/msg, {all}"));
    head.extend(names.iter().map(|name| format!("{name} / its baseline")));
    head.push(format!("figures, {all}"));
    println!("| scenario | {} |", head.join(" | "));
    println!("|---{}|", "|---".repeat(head.len()));
    for row in rows {
        let (label, base) = row.scenario.sides;
        let sides: Vec<(Summary, Option<Summary>)> = row
            .runs
            .iter()
            .map(|(measured, baseline)| {
                (
                    summarize(measured),
                    base.label().map(|_| summarize(baseline)),
                )
            })
            .collect();
        let (a, _) = &sides[0];
        // The rate, and the p50 where there are round trips.
        let cell = |m: &Summary| match m.latencies {
            Some((p50, _)) => format!("{label}: {}/s, p50 {}", rate(m.rate), micros(p50)),
            None => format!("{label}: {}/s", rate(m.rate)),
        };
        let p50_ratio = |over: &Summary, under: &Summary| match (over.latencies, under.latencies) {
            (Some((over, _)), Some((under, _))) => {
                format!(", p50 {:.2}", over.as_secs_f64() / under.as_secs_f64())
            }
            _ => String::new(),
        };
        let against = |m: &Summary, own: &Option<Summary>| match (own, base.label()) {
            (Some(b), Some(base_label)) => {
                format!("{:.2} of {base_label}{}", m.rate / b.rate, p50_ratio(m, b))
            }
            _ => "-".to_owned(),
        };
        let mut cells: Vec<String> = sides.iter().map(|(m, _)| cell(m)).collect();
        cells.extend(
            sides[1..]
                .iter()
                .map(|(m, _)| format!("{:.2}{}", m.rate / a.rate, p50_ratio(m, a))),
        );
        let cpu: Vec<String> = sides
            .iter()
            .map(|(m, _)| format!("{:.2}", m.cpu_us))
            .collect();
        let cpu_over: Vec<String> = sides[1..]
            .iter()
            .map(|(m, _)| format!("{:.2} x", m.cpu_us / a.cpu_us))
            .collect();
        cells.push(format!("{} ({})", cpu.join(" / "), cpu_over.join(", ")));
        cells.extend(sides.iter().map(|(m, own)| against(m, own)));
        // Each figure of its own (the burst's lateness, what was lost, the resident set) on
        // every backend, and the p99 where there are round trips.
        let mut figures: Vec<String> = a
            .fields
            .iter()
            .enumerate()
            .map(|(at, (name, _))| {
                let values: Vec<String> = sides
                    .iter()
                    .map(|(m, _)| {
                        m.fields
                            .get(at)
                            .map_or("-".to_owned(), |f| format!("{:.1}", f.1))
                    })
                    .collect();
                format!("{name} {}", values.join(" / "))
            })
            .collect();
        let p99s: Option<Vec<String>> = sides
            .iter()
            .map(|(m, _)| m.latencies.map(|(_, p99)| micros(p99)))
            .collect();
        if let Some(p99s) = p99s {
            figures.push(format!("p99 {}", p99s.join(" / ")));
        }
        cells.push(if figures.is_empty() {
            "-".to_owned()
        } else {
            figures.join("; ")
        });
        println!("| {} | {} |", row.what(), cells.join(" | "));
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (at, digit) in digits.chars().enumerate() {
        if at > 0 && (digits.len() - at).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}
