//! Guides: one page a topic, each opening with what it covers and an example that runs.
//!
//! | Guide | For |
//! |---|---|
//! | [`patterns`] | queue, fan-out, request-reply; bound and dialing; what a handler reads |
//! | [`settlement`] | what `ack`, `drop` and retries do; where copies go; the ack warning |
//! | [`wire`] | the frames a Python or C++ peer sends and reads |
//! | [`backends`] | `zeromq`, libzmq or omq: which for which network, installing, each one's limits |
//! | [`security`] | CURVE, allow-lists and keys; bad input, wire limits, hostile peers |
//! | [`backpressure`] | a peer that is down or does not read; send deadlines; read-ahead |
//! | [`operations`] | keyed worker lanes, readiness for `/healthz`, what `shutdown` reports |
//! | [`metrics`] | the Prometheus series, beside the framework's |
//! | [`asyncapi`] | the AsyncAPI document and its `x-zeromq` bindings |
//! | [`testing`] | `TestApp` in process; the framework's conformance suites |
//! | [`across_hosts`] | a fleet over several hosts, and what each fault costs |
//! | [`from_ruststream_zeromq`] | moving a service from `ruststream-zeromq` |
//! | [`cli`] | `zmqs`: send, tail, ask, watch a service's figures and make CURVE keys from a shell |

#[doc = include_str!("../docs/patterns.md")]
pub mod patterns {}

#[doc = include_str!("../docs/settlement.md")]
pub mod settlement {}

#[doc = include_str!("../docs/wire.md")]
pub mod wire {}

#[doc = include_str!("../docs/backends.md")]
pub mod backends {}

#[doc = include_str!("../docs/security.md")]
pub mod security {}

#[doc = include_str!("../docs/backpressure.md")]
pub mod backpressure {}

#[doc = include_str!("../docs/operations.md")]
pub mod operations {}

#[doc = include_str!("../docs/metrics.md")]
pub mod metrics {}

#[doc = include_str!("../docs/asyncapi.md")]
pub mod asyncapi {}

#[doc = include_str!("../docs/testing.md")]
pub mod testing {}

#[doc = include_str!("../docs/across_hosts.md")]
pub mod across_hosts {}

#[doc = include_str!("../docs/from_ruststream_zeromq.md")]
pub mod from_ruststream_zeromq {}

#[doc = include_str!("../docs/cli.md")]
pub mod cli {}

#[cfg(test)]
mod tests {
    /// The settlement table is stated in its guide; the README shows the same table, and this
    /// keeps the two from drifting.
    #[test]
    fn the_readme_shows_the_settlement_guides_table() {
        let guide = include_str!("../docs/settlement.md");
        let table: String = guide
            .lines()
            .skip_while(|line| !line.starts_with("| Handler returns"))
            .take_while(|line| line.starts_with('|'))
            .map(|line| format!("{line}\n"))
            .collect();
        assert!(table.lines().count() > 2, "the guide's table is missing");
        assert!(
            include_str!("../README.md").contains(&table),
            "README.md's settlement table differs from docs/settlement.md's:\n{table}"
        );
    }

    /// A guide sentence that cites a test is a promise that the test exists and asserts it. Each
    /// citation names a test function, `` `tests/live/metrics.rs::name` ``, and this fails when
    /// the file has no such function, when a citation names only a file, or when a sentence says
    /// a test holds it without naming one.
    #[test]
    fn every_test_a_guide_cites_exists_by_name() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut problems = Vec::new();
        for (path, text) in documentation(root) {
            problems.extend(
                citation_problems(&text, |file| {
                    let path = root.join(file);
                    if path.is_dir() {
                        Some(String::new())
                    } else {
                        std::fs::read_to_string(path).ok()
                    }
                })
                .into_iter()
                .map(|problem| format!("{}: {problem}", path.display())),
            );
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    #[test]
    fn a_citation_of_a_missing_function_a_bare_file_or_an_unnamed_test_is_a_problem() {
        let source = |file: &str| (file == "tests/a.rs").then(|| "fn real() {}".to_owned());
        assert!(citation_problems("held by `tests/a.rs::real`.", source).is_empty());
        let problems = |text: &str| citation_problems(text, source);
        assert_eq!(problems("see `tests/a.rs::gone`").len(), 1);
        assert_eq!(problems("see `tests/b.rs::real`").len(), 1);
        assert_eq!(problems("see `tests/a.rs`").len(), 1);
        assert_eq!(problems("A test pins this abort.").len(), 1);
        assert_eq!(problems("A test pins it (`tests/a.rs::real`).").len(), 0);
        assert_eq!(problems("see `ui-tests/nowhere.rs`").len(), 1);
        assert_eq!(problems("stored in `tests/a.json`").len(), 1);
    }

    /// The guides, the README and every source file's doc comments, with their paths.
    fn documentation(root: &std::path::Path) -> Vec<(std::path::PathBuf, String)> {
        let mut files = vec![root.join("README.md")];
        let mut dirs = vec![root.join("docs"), root.join("src")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("the crate's own folders") {
                let path = entry.expect("a readable folder").path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path
                    .extension()
                    .is_some_and(|ext| ext == "md" || ext == "rs")
                {
                    files.push(path);
                }
            }
        }
        files
            .into_iter()
            .filter(|path| !path.ends_with("src/guide.rs"))
            .map(|path| {
                let text = std::fs::read_to_string(&path).expect("a readable file");
                let text = if path.extension().is_some_and(|ext| ext == "rs") {
                    // Only what rustdoc shows: `///` and `//!` lines.
                    text.lines()
                        .map(str::trim_start)
                        .filter_map(|l| l.strip_prefix("///").or_else(|| l.strip_prefix("//!")))
                        .map(|l| format!("{l}\n"))
                        .collect()
                } else {
                    text
                };
                (path, text)
            })
            .collect()
    }

    /// Phrases that say a test holds a sentence; its paragraph must then name the test.
    const CLAIMS: [&str; 9] = [
        "a test pins",
        "a test sends",
        "a test holds",
        "a test shows",
        "a test checks",
        "a test asserts",
        "held by a test",
        "pinned by a test",
        "the test sends",
    ];

    /// What is wrong with the test citations of one text. `source` reads a file of the crate.
    fn citation_problems(text: &str, source: impl Fn(&str) -> Option<String>) -> Vec<String> {
        let mut problems = Vec::new();
        for paragraph in text.split("\n\n") {
            let mut cited = false;
            for quoted in paragraph.split('`').skip(1).step_by(2) {
                if !(quoted.starts_with("tests/") || quoted.starts_with("ui-tests/")) {
                    continue;
                }
                let (file, function) = match quoted.split_once("::") {
                    Some((file, function)) => (file, Some(function)),
                    None => (quoted, None),
                };
                // A compile-fail case is its own file (or a folder of them): the path names it.
                let ui = file.starts_with("ui-tests/");
                match (source(file), function) {
                    (None, _) => problems.push(format!("`{quoted}`: no such file")),
                    (Some(_), None) if ui => cited = true,
                    // A folder or a data file is where something lives, not a test.
                    (Some(_), None) if !file.ends_with(".rs") => {}
                    (Some(_), None) => {
                        problems.push(format!(
                            "`{quoted}` names a file, not the test that holds it"
                        ));
                    }
                    (Some(code), Some(function)) if code.contains(&format!("fn {function}(")) => {
                        cited = true;
                    }
                    (Some(_), Some(function)) => {
                        problems.push(format!("`{quoted}`: {file} has no fn {function}"));
                    }
                }
            }
            let lower = paragraph.to_lowercase().replace('\n', " ");
            if !cited && let Some(claim) = CLAIMS.iter().find(|claim| lower.contains(**claim)) {
                let first = paragraph.lines().next().unwrap_or_default();
                problems.push(format!(
                    "\"{claim}\" names no test, in the paragraph \"{first}…\""
                ));
            }
        }
        problems
    }
}
