//! The host library's modules form a one-way chain: no import cycle among
//! its top-level modules (`config`, `link`, `driver`, `report`, ...). A
//! cycle is how a "hub" module creeps back (lower modules reaching up for a
//! type that belongs lower down), so this test reads every `crate::` path in
//! `host/src/**.rs`, builds the graph at top-level-module granularity and
//! fails on any cycle, printing it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to: `src/link/rtt.rs` -> `link`,
/// `src/gate.rs` -> `gate`; `None` for the crate roots.
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next()?.as_os_str().to_string_lossy();
    let name = first.trim_end_matches(".rs").to_string();
    (name != "lib" && name != "main").then_some(name)
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The top-level modules `code` names through `crate::`: `crate::a::b`,
/// `crate::a`, and `crate::{a, b::c}`.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        // `hilt_crate::` or `foocrate::` are not paths of this crate.
        if code[..at].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    depth == 0
                })
                .map_or(group.len(), |(i, _)| i);
            let mut depth = 0;
            let mut item = String::new();
            for c in group[..end].chars().chain(std::iter::once(',')) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        let head: String =
                            item.trim().chars().take_while(|&c| is_ident(c)).collect();
                        if !head.is_empty() && head != "self" {
                            found.insert(head);
                        }
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
        } else {
            let head: String = rest.chars().take_while(|&c| is_ident(c)).collect();
            if !head.is_empty() {
                found.insert(head);
            }
        }
    }
    found
}

/// The file without its comments (`//` lines and doc comments), which may
/// name modules without importing them.
fn code_of(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn module_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph = Graph::new();
    for file in files {
        let Some(module) = top_module(src, &file) else {
            continue;
        };
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        let deps = graph.entry(module.clone()).or_default();
        for dep in crate_paths(&code) {
            if dep != module {
                deps.insert(dep);
            }
        }
    }
    graph
}

/// A cycle of `graph` as the modules along it (first = last), if any.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    fn visit(
        node: &str,
        graph: &Graph,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(node.to_string(), Mark::OnPath);
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match marks.get(next.as_str()).copied().unwrap_or(Mark::New) {
                Mark::OnPath => {
                    let start = path.iter().position(|n| n == next).unwrap();
                    let mut cycle = path[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Mark::New => {
                    if let Some(cycle) = visit(next, graph, marks, path) {
                        return Some(cycle);
                    }
                }
                Mark::Done => {}
            }
        }
        path.pop();
        marks.insert(node.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        let new = marks.get(node.as_str()).copied().unwrap_or(Mark::New) == Mark::New;
        if let Some(cycle) = new
            .then(|| visit(node, graph, &mut marks, &mut Vec::new()))
            .flatten()
        {
            return Some(cycle);
        }
    }
    None
}

/// The sources checked: `host/src`, or `HILT_MODULE_GRAPH_SRC` (to show
/// the checker failing on an older tree, e.g. one with `runner.rs`).
fn host_src() -> Option<PathBuf> {
    std::env::var_os("HILT_MODULE_GRAPH_SRC").map(PathBuf::from)
}

#[test]
fn host_modules_have_no_import_cycle() {
    let own = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&host_src().unwrap_or(own));
    // The graph must be the real one: these edges exist today.
    if host_src().is_none() {
        for (from, to) in [
            ("driver", "session"),
            ("session", "link"),
            ("link", "cancel"),
        ] {
            assert!(
                graph.get(from).is_some_and(|d| d.contains(to)),
                "the checker lost the edge {from} -> {to}: {graph:#?}"
            );
        }
    }
    if let Some(cycle) = find_cycle(&graph) {
        let edges: Vec<String> = graph
            .iter()
            .map(|(m, deps)| {
                format!(
                    "  {m} -> {}",
                    deps.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        panic!(
            "import cycle among host modules: {}\nthe graph:\n{}",
            cycle.join(" -> "),
            edges.join("\n")
        );
    }
}

#[test]
fn leaves_stay_leaves() {
    let graph = module_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    for leaf in ["cancel", "memory", "elf", "paths"] {
        let deps = graph.get(leaf).cloned().unwrap_or_default();
        assert!(
            deps.is_empty(),
            "{leaf} should import no host module, imports {deps:?}"
        );
    }
}

#[test]
fn the_checker_sees_every_path_form_and_finds_cycles() {
    let code = "use crate::link::{Link, Wire};\nuse crate::{config::board::Board, elf};\nlet x = crate::cancel::KillSwitch::default();\nuse hilt_crate::x;";
    let found: Vec<String> = crate_paths(code).into_iter().collect();
    assert_eq!(found, ["cancel", "config", "elf", "link"]);
    let mut graph = Graph::new();
    graph.entry("a".into()).or_default().insert("b".into());
    graph.entry("b".into()).or_default().insert("c".into());
    assert_eq!(find_cycle(&graph), None);
    graph.entry("c".into()).or_default().insert("a".into());
    assert_eq!(find_cycle(&graph).unwrap(), ["a", "b", "c", "a"]);
}
