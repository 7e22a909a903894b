//! The layering CONTRIBUTING.md draws, held against the `use` lines of `src/`: every import
//! points down its table, and no files import each other in a circle. A test, so that an upward
//! import fails `cargo test` where it is written, not in a review.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

/// A module's path in the crate, `["transport", "backend"]` for `crate::transport::backend`.
type Module = Vec<String>;

/// Where each module of the table sits: its layer, then its place in the layer.
type Ranks = BTreeMap<Module, (usize, usize)>;

#[test]
fn every_import_points_down_the_layers_contributing_draws() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ranks = layers(&std::fs::read_to_string(root.join("CONTRIBUTING.md")).unwrap());
    assert!(
        ranks.len() > 20,
        "CONTRIBUTING.md's layer table is missing: {ranks:?}"
    );
    let upward = upward_imports(&sources(&root.join("src")), &ranks);
    assert!(
        upward.is_empty(),
        "imports that run up the layers CONTRIBUTING.md draws (move the item down, or the \
         module up the table):\n{upward:#?}"
    );
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    let files = sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let cycle: Vec<String> = file_cycle(&files)
        .unwrap_or_default()
        .iter()
        .map(|module| module.join("::"))
        .collect();
    assert!(
        cycle.is_empty(),
        "files that import each other in a circle: {cycle:?}"
    );
}

#[test]
fn an_upward_import_a_cycle_and_a_grouped_use_are_seen() {
    let table = "| 1 | `error` `wire` |\n| 2 | `routing` |\n";
    let ranks = layers(table);
    let files: BTreeMap<Module, String> = [
        (path("error"), String::new()),
        (
            path("wire"),
            "use crate::{error::ZmqError, routing::{self, Rule}};".to_owned(),
        ),
        (path("routing"), "use crate::wire::Frames;".to_owned()),
    ]
    .into_iter()
    .collect();
    assert_eq!(upward_imports(&files, &ranks), ["wire -> routing"]);
    assert!(file_cycle(&files).is_some());
    let files: BTreeMap<Module, String> = [
        (path("error"), String::new()),
        (path("wire"), "fn f() -> crate::error::E {}".into()),
    ]
    .into_iter()
    .collect();
    assert!(upward_imports(&files, &ranks).is_empty());
    assert!(file_cycle(&files).is_none());
}

fn path(text: &str) -> Module {
    text.split("::").map(str::to_owned).collect()
}

/// The table's rows: `| layer | `module` `module` ... |`, modules in the order they may
/// import each other.
fn layers(contributing: &str) -> Ranks {
    let mut ranks = Ranks::new();
    for line in contributing.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(layer) = cells.get(1).and_then(|cell| cell.parse::<usize>().ok()) else {
            continue;
        };
        let modules = cells.get(2).copied().unwrap_or_default();
        for (place, module) in modules.split('`').skip(1).step_by(2).enumerate() {
            ranks.insert(path(module), (layer, place));
        }
    }
    ranks
}

/// Every module file under `src` but the binaries', by module path, its unit tests left out.
fn sources(src: &Path) -> BTreeMap<Module, String> {
    let mut files = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let file = entry.unwrap().path();
            let relative = file.strip_prefix(src).unwrap();
            if relative.starts_with("bin") {
                continue;
            }
            if file.is_dir() {
                dirs.push(file);
                continue;
            }
            if file.extension().is_none_or(|ext| ext != "rs") {
                continue;
            }
            let mut module: Module = relative
                .with_extension("")
                .iter()
                .map(|part| part.to_string_lossy().into_owned())
                .collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                module.pop();
            }
            let text = std::fs::read_to_string(&file).unwrap();
            files.insert(module, without_tests_and_comments(&text));
        }
    }
    files
}

fn without_tests_and_comments(text: &str) -> String {
    let code = text
        .find("#[cfg(test)]\nmod tests")
        .map_or(text, |at| &text[..at]);
    code.lines()
        .map(|line| line.split_once("//").map_or(line, |(code, _)| code))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path a file names from `crate`, `super` or `self`: its `use` trees expanded, and the
/// paths written inline.
fn named_paths(code: &str) -> Vec<Module> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let boundary = at == 0 || !rest.as_bytes()[at - 1].is_ascii_alphanumeric();
        let after = &rest[at + 4..];
        let Some(end) = after.find(';') else { break };
        if boundary {
            let tree: String = after[..end]
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let tree = tree.replace(" as ", "@").replace(' ', "");
            expand(&[], &tree, &mut paths);
        }
        rest = &after[end..];
    }
    for head in ["crate::", "super::", "self::"] {
        let mut rest = code;
        while let Some(at) = rest.find(head) {
            let boundary = at == 0 || {
                let before = rest.as_bytes()[at - 1];
                !(before.is_ascii_alphanumeric() || before == b'_' || before == b':')
            };
            let tail = &rest[at..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(tail.len());
            // `a::{..}` is a grouped use, expanded above.
            if boundary && !tail[end..].starts_with('{') {
                paths.push(
                    tail[..end]
                        .trim_end_matches(':')
                        .split("::")
                        .map(str::to_owned)
                        .collect(),
                );
            }
            rest = &tail[end.max(1)..];
        }
    }
    paths.retain(|p| {
        matches!(
            p.first().map(String::as_str),
            Some("crate" | "super" | "self")
        )
    });
    paths
}

/// `a::{b, c::{d, e}}` as `a::b`, `a::c::d`, `a::c::e`, each after `prefix`.
fn expand(prefix: &[String], tree: &str, out: &mut Vec<Module>) {
    let mut depth = 0;
    let mut start = 0;
    let mut parts = Vec::new();
    for (i, c) in tree.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&tree[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tree[start..]);
    for part in parts.into_iter().filter(|part| !part.is_empty()) {
        // `path as name`: the path is what is imported.
        let part = part.split('@').next().unwrap_or(part);
        if let Some(open) = part.find("::{") {
            let mut inner = prefix.to_vec();
            inner.extend(part[..open].split("::").map(str::to_owned));
            expand(&inner, &part[open + 3..part.len() - 1], out);
        } else if let Some(group) = part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
            expand(prefix, group, out);
        } else {
            let mut path = prefix.to_vec();
            path.extend(part.split("::").map(str::to_owned));
            out.push(path);
        }
    }
}

/// The module file a path written in `here` reaches: the longest module path it starts with.
fn resolve(here: &Module, written: &Module, files: &BTreeMap<Module, String>) -> Option<Module> {
    let (head, mut rest) = written.split_first()?;
    let mut base = match head.as_str() {
        "crate" => Vec::new(),
        "self" => here.clone(),
        "super" => here[..here.len().checked_sub(1)?].to_vec(),
        _ => return None,
    };
    while rest.first().is_some_and(|part| part == "super") {
        base.pop();
        rest = &rest[1..];
    }
    base.extend(rest.iter().filter(|part| *part != "self").cloned());
    (0..=base.len())
        .rev()
        .map(|n| base[..n].to_vec())
        .find(|m| files.contains_key(m))
}

/// The table's entry a module belongs to: itself, or its nearest listed ancestor.
fn unit<'a>(module: &Module, ranks: &'a Ranks) -> Option<(&'a Module, (usize, usize))> {
    (1..=module.len()).rev().find_map(|n| {
        ranks
            .get_key_value(&module[..n])
            .map(|(m, rank)| (m, *rank))
    })
}

/// Each file's imports, `from -> to` between modules of the table, that reach a module of a
/// higher layer, or of its own layer listed after it.
fn upward_imports(files: &BTreeMap<Module, String>, ranks: &Ranks) -> Vec<String> {
    let mut upward = BTreeSet::new();
    for (module, code) in files {
        let Some((from, from_rank)) = unit(module, ranks) else {
            continue;
        };
        for written in named_paths(code) {
            let Some(target) = resolve(module, &written, files) else {
                continue;
            };
            let Some((to, to_rank)) = unit(&target, ranks) else {
                continue;
            };
            if from != to && to_rank > from_rank {
                upward.insert(format!("{} -> {}", from.join("::"), to.join("::")));
            }
        }
    }
    upward.into_iter().collect()
}

/// A circle of files importing each other, if there is one; a parent reaching into its own
/// child is the module tree, not an import.
fn file_cycle(files: &BTreeMap<Module, String>) -> Option<Vec<Module>> {
    let mut edges: BTreeMap<&Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, code) in files {
        for written in named_paths(code) {
            if let Some(target) = resolve(module, &written, files)
                && &target != module
                && !target.starts_with(module)
            {
                edges.entry(module).or_default().insert(target);
            }
        }
    }
    // Depth-first, with the path walked so far: a node met again on it closes a circle.
    fn walk<'a>(
        node: &'a Module,
        edges: &'a BTreeMap<&Module, BTreeSet<Module>>,
        on_path: &mut Vec<&'a Module>,
        done: &mut BTreeSet<&'a Module>,
    ) -> Option<Vec<Module>> {
        if let Some(at) = on_path.iter().position(|m| *m == node) {
            return Some(on_path[at..].iter().map(|m| (*m).clone()).collect());
        }
        if !done.insert(node) {
            return None;
        }
        on_path.push(node);
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = walk(next, edges, on_path, done) {
                return Some(cycle);
            }
        }
        on_path.pop();
        None
    }
    let mut done = BTreeSet::new();
    files
        .keys()
        .find_map(|module| walk(module, &edges, &mut Vec::new(), &mut done))
}
