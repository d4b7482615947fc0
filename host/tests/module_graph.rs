//! Every crate of the repository is a one-way stack of files: no import
//! cycle between the files of any crate. A cycle is how a "hub" creeps
//! back (a low module reaching up for a type that belongs lower down, a
//! portable kernel and its SIMD variant importing each other), so this test
//! reads every `src/**.rs` of every crate (each folder holding a
//! `Cargo.toml` and a `src/`: the host, the runtime, the agent, the
//! firmware, the examples, ...), builds the graph of imports at file
//! granularity and fails on any cycle, printing its files and the lines
//! that close it.
//!
//! The graph is the one the shared `modcycles.py` tool draws (on the tree
//! before the cycles were broken both found the same five):
//!
//! - a module is a file; `mod.rs`, `lib.rs` and `main.rs` are their
//!   folder's module;
//! - a path is `crate::a::b::C`, `super::…`, `self::…` (or `$crate::…`),
//!   with `use` groups (`crate::{a, b::{c, d}}`) unfolded; it names the
//!   deepest module file it reaches (`crate::kernels::conv::REGISTRATION` ->
//!   `kernels/conv.rs`);
//! - a file's imports of its own folder's modules or of the folder it is
//!   in (a `mod.rs` and its children, the crate root) are one room, not
//!   edges: a parent re-exporting its children is how a crate keeps public
//!   paths while its files stay a stack;
//! - comments, string literals and `#[cfg(test)]` items are not imports
//!   (a test may build its fixtures from higher modules), nor is generated
//!   code.
//!
//! It reads files only (no `cargo metadata`), so it takes milliseconds.

mod common;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use common::rust_source::{code_of, is_ident};
use std::path::{Path, PathBuf};

/// A module's names inside its crate: `[]` is the crate root,
/// `["kernels", "conv"]` is `src/kernels/conv.rs`.
type ModPath = Vec<String>;

/// Per module, the modules it imports, each with the first line doing so.
type Graph = BTreeMap<ModPath, BTreeMap<ModPath, usize>>;

/// One crate's modules and their imports.
struct CrateGraph {
    /// The crate's `src`, relative to the repository.
    src: PathBuf,
    /// Every module's file, relative to the repository.
    files: BTreeMap<ModPath, PathBuf>,
    graph: Graph,
}

/// Folders no crate lives in: cargo's output (`build/`), git's, tools'.
fn skipped_dir(name: &str) -> bool {
    name == "build" || name == "node_modules" || name.starts_with('.')
}

/// Every crate's `src` under `repo` (a folder with a `Cargo.toml` and a
/// `src/`), relative to `repo`, sorted.
fn crate_sources(repo: &Path) -> Vec<PathBuf> {
    fn walk(repo: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        if dir.join("Cargo.toml").is_file() && dir.join("src").is_dir() {
            out.push(dir.join("src").strip_prefix(repo).unwrap().to_path_buf());
        }
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() && !skipped_dir(&name) {
                walk(repo, &path, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(repo, repo, &mut out);
    out.sort();
    out
}

/// Every `.rs` file under `src` by the module it is.
fn module_files(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    fn walk(src: &Path, dir: &Path, out: &mut BTreeMap<ModPath, PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(src, &path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).unwrap().with_extension("");
                let mut module: ModPath = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if matches!(
                    module.last().map(String::as_str),
                    Some("mod" | "lib" | "main")
                ) {
                    module.pop();
                }
                out.insert(module, path);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, src, &mut out);
    out
}

/// `code` with every `#[cfg(test)]` item blanked out: a test module, a
/// test-only `use` or function.
fn without_test_items(code: &str) -> String {
    const ATTR: &str = "#[cfg(test)]";
    let mut out: Vec<char> = code.chars().collect();
    let text: String = out.iter().collect();
    let mut from = 0;
    while let Some(at) = text[from..].find(ATTR).map(|p| p + from) {
        // `find` counts bytes; the item is blanked in chars.
        let start = text[..at].chars().count();
        let mut i = start + ATTR.chars().count();
        let mut depth = 0i32;
        let mut braces = 0i32;
        while i < out.len() {
            match out[i] {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                '{' if depth == 0 => braces += 1,
                // The end of the block the item sits in: it had no `;`.
                '}' if depth == 0 && braces == 0 => break,
                '}' if depth == 0 => {
                    braces -= 1;
                    if braces == 0 {
                        i += 1;
                        break;
                    }
                }
                ';' if depth == 0 && braces == 0 => {
                    i += 1;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        for c in &mut out[start..i] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        from = at + ATTR.len();
    }
    out.into_iter().collect()
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

/// The tokens of `code` (comments and literals already blanked), each with
/// its line and the inline modules (`mod name { … }`) it sits in.
fn tokens(code: &str) -> Vec<(Token, usize, Vec<String>)> {
    let chars: Vec<char> = code.chars().collect();
    let mut out: Vec<(Token, usize, Vec<String>)> = Vec::new();
    let (mut line, mut depth) = (1, 0usize);
    // Inline modules open here, with the brace depth outside each.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let here: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if is_ident(c) {
            let len = chars[i..].iter().take_while(|&&c| is_ident(c)).count();
            let word: String = chars[i..i + len].iter().collect();
            out.push((Token::Ident(word), line, here));
            i += len;
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push((Token::PathSep, line, here));
            i += 2;
        } else {
            if c == '{' {
                let n = out.len();
                if n >= 2
                    && out[n - 2].0 == Token::Ident("mod".into())
                    && let Token::Ident(name) = &out[n - 1].0
                {
                    inline.push((name.clone(), depth));
                }
                depth += 1;
            } else if c == '}' {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|&(_, d)| d == depth) {
                    inline.pop();
                }
            }
            out.push((Token::Punct(c), line, here));
            i += 1;
        }
    }
    out
}

/// The paths of the use tree at `toks[*i]`, appended to `prefix`: `a`,
/// `a::b`, `a::{b, c::{d, e}}`, `a::*`, `a as b`. Each leaf path is
/// pushed to `out` with `line`.
fn use_tree(
    toks: &[(Token, usize, Vec<String>)],
    i: &mut usize,
    prefix: &[String],
    out: &mut Vec<Vec<String>>,
) {
    let mut path = prefix.to_vec();
    while let Some((tok, _, _)) = toks.get(*i) {
        match tok {
            Token::Ident(name) => {
                path.push(name.clone());
                *i += 1;
                if toks.get(*i).map(|t| &t.0) == Some(&Token::PathSep) {
                    *i += 1;
                    continue;
                }
                if toks.get(*i).map(|t| &t.0) == Some(&Token::Ident("as".into())) {
                    *i += 2;
                }
                out.push(path);
                return;
            }
            Token::Punct('{') => {
                *i += 1;
                loop {
                    use_tree(toks, i, &path, out);
                    match toks.get(*i).map(|t| &t.0) {
                        Some(Token::Punct(',')) => *i += 1,
                        Some(Token::Punct('}')) => {
                            *i += 1;
                            return;
                        }
                        _ => return,
                    }
                    if toks.get(*i).map(|t| &t.0) == Some(&Token::Punct('}')) {
                        *i += 1;
                        return;
                    }
                }
            }
            _ => {
                // `*`, `<` of generic arguments, or the end of the path.
                if *tok == Token::Punct('*') {
                    *i += 1;
                }
                out.push(path);
                return;
            }
        }
    }
    out.push(path);
}

/// The paths `code` names through `crate::`, `super::` or `self::`, made
/// absolute for a file that is module `module`, each with its line.
fn crate_paths(code: &str, module: &[String]) -> Vec<(ModPath, usize)> {
    let toks = tokens(&without_test_items(code));
    let mut found = Vec::new();
    for start in 0..toks.len() {
        let (Token::Ident(first), line, inline) = &toks[start] else {
            continue;
        };
        if !matches!(first.as_str(), "crate" | "super" | "self")
            || toks.get(start + 1).map(|t| &t.0) != Some(&Token::PathSep)
            || (start > 0 && toks[start - 1].0 == Token::PathSep)
        {
            continue;
        }
        let mut leaves = Vec::new();
        use_tree(&toks, &mut start.clone(), &[], &mut leaves);
        let here: ModPath = module.iter().chain(inline).cloned().collect();
        for leaf in leaves {
            if let Some(path) = absolute(&leaf, &here) {
                found.push((path, *line));
            }
        }
    }
    found
}

/// `raw` (`crate::a::b`, `super::super::c`, `self::d`, with `self` inside
/// groups) as a path from the crate root, seen from module `here`.
fn absolute(raw: &[String], here: &[String]) -> Option<ModPath> {
    let mut segments = raw.iter().map(String::as_str).peekable();
    let mut base: ModPath = match segments.next()? {
        "crate" => Vec::new(),
        "self" => here.to_vec(),
        "super" => here.split_last()?.1.to_vec(),
        _ => return None,
    };
    while segments.peek() == Some(&"super") {
        segments.next();
        base.pop()?;
    }
    base.extend(segments.filter(|&s| s != "self").map(String::from));
    Some(base)
}

/// The deepest module file `path` reaches.
fn resolve<'a>(files: &'a BTreeMap<ModPath, PathBuf>, path: &[String]) -> Option<&'a ModPath> {
    (0..=path.len())
        .rev()
        .find_map(|n| files.get_key_value(&path[..n]).map(|(k, _)| k))
}

/// Whether `a` is `b`, or one contains the other (a folder's `mod.rs` and
/// its children, the crate root and everything).
fn same_room(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

fn crate_graph(repo: &Path, src: &Path) -> CrateGraph {
    let abs = repo.join(src);
    let files: BTreeMap<ModPath, PathBuf> = module_files(&abs)
        .into_iter()
        .map(|(m, p)| (m, p.strip_prefix(repo).unwrap().to_path_buf()))
        .collect();
    let mut graph = Graph::new();
    for (module, file) in &files {
        let deps = graph.entry(module.clone()).or_default();
        let text = std::fs::read_to_string(repo.join(file)).unwrap();
        if text
            .chars()
            .take(400)
            .collect::<String>()
            .contains("automatically generated")
        {
            continue;
        }
        for (path, line) in crate_paths(&code_of(&text), module) {
            if let Some(to) = resolve(&files, &path)
                && !same_room(module, to)
            {
                deps.entry(to.clone()).or_insert(line);
            }
        }
    }
    CrateGraph {
        src: src.to_path_buf(),
        files,
        graph,
    }
}

/// The strongly connected sets of two or more modules: each is a cycle
/// (or several sharing modules). Tarjan's algorithm.
fn cycles(graph: &Graph) -> Vec<Vec<ModPath>> {
    struct State<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g ModPath, usize>,
        low: BTreeMap<&'g ModPath, usize>,
        stack: Vec<&'g ModPath>,
        on_stack: BTreeSet<&'g ModPath>,
        found: Vec<Vec<ModPath>>,
    }
    fn visit<'g>(v: &'g ModPath, s: &mut State<'g>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flat_map(BTreeMap::keys) {
            if !s.index.contains_key(w) {
                visit(w, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut set = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack.remove(w);
                set.push(w.clone());
                if w == v {
                    break;
                }
            }
            if set.len() > 1 {
                set.sort();
                s.found.push(set);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v) {
            visit(v, &mut state);
        }
    }
    state.found.sort();
    state.found
}

/// A shortest way from `set[0]` back to itself inside `set`, first =
/// last: the cycle to read first.
fn loop_through_first(graph: &Graph, set: &[ModPath]) -> Vec<ModPath> {
    let inside: BTreeSet<&ModPath> = set.iter().collect();
    let start = &set[0];
    let mut came_from: BTreeMap<&ModPath, &ModPath> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for w in graph[v].keys().filter(|w| inside.contains(w)) {
            if w == start {
                let mut path = vec![v.clone()];
                let mut at = v;
                while at != start {
                    at = came_from[at];
                    path.push(at.clone());
                }
                path.reverse();
                path.push(start.clone());
                return path;
            }
            if !came_from.contains_key(w) {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    vec![start.clone()]
}

/// The report of one cycle: a loop through its first file, then every
/// import inside the set with the line doing it.
fn describe(krate: &CrateGraph, set: &[ModPath]) -> String {
    let file = |m: &ModPath| krate.files[m].display().to_string();
    let name = |m: &ModPath| {
        if m.is_empty() {
            "lib".to_string()
        } else {
            m.join("/")
        }
    };
    let mut text = format!(
        "{}: cycle of {}: {}\n  e.g. {}\n",
        krate.src.display(),
        set.len(),
        set.iter().map(name).collect::<Vec<_>>().join(", "),
        loop_through_first(&krate.graph, set)
            .iter()
            .map(file)
            .collect::<Vec<_>>()
            .join(" -> ")
    );
    for from in set {
        for (to, line) in &krate.graph[from] {
            if set.contains(to) {
                text += &format!("  {}:{line} imports {}\n", file(from), file(to));
            }
        }
    }
    text
}

/// The repository checked: this one, or `HILT_MODULE_GRAPH_REPO` (to show
/// the checker failing on an older checkout).
fn repo() -> PathBuf {
    std::env::var_os("HILT_MODULE_GRAPH_REPO")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .unwrap()
                .to_path_buf()
        })
}

fn all_crates(repo: &Path) -> Vec<CrateGraph> {
    crate_sources(repo)
        .iter()
        .map(|src| crate_graph(repo, src))
        .collect()
}

fn module(path: &str) -> ModPath {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

#[test]
fn no_crate_has_an_import_cycle() {
    let repo = repo();
    let crates = all_crates(&repo);
    let own = std::env::var_os("HILT_MODULE_GRAPH_REPO").is_none();
    if own {
        // The walk must find every crate, and the graphs must be the real
        // ones: these imports exist today.
        for src in [
            "host/src",
            "target/runtime/src",
            "target/proto/src",
            "target/agent/src",
            "target/contract/src",
            "target/firmware/src",
            "target/firmware-build/src",
            "target/examples/allocator-ports/src",
            "target/examples/custom-firmware/src",
            "target/examples/npu-driver/src",
        ] {
            assert!(
                crates.iter().any(|c| c.src == Path::new(src)),
                "the checker did not find the crate {src}"
            );
        }
        for (src, from, to) in [
            ("host/src", "driver", "session"),
            ("target/runtime/src", "pool", "planner"),
            (
                "target/runtime/src",
                "kernels/conv",
                "kernels/conv_geometry",
            ),
            (
                "target/runtime/src",
                "kernels/lstm/integer",
                "kernels/lstm/luts",
            ),
            ("target/contract/src", "board", "error"),
        ] {
            let krate = crates.iter().find(|c| c.src == Path::new(src)).unwrap();
            assert!(
                krate
                    .graph
                    .get(&module(from))
                    .is_some_and(|d| d.contains_key(&module(to))),
                "the checker lost the import {src}: {from} -> {to}"
            );
        }
    }
    let report: Vec<String> = crates
        .iter()
        .flat_map(|krate| {
            cycles(&krate.graph)
                .into_iter()
                .map(move |set| describe(krate, &set))
        })
        .collect();
    assert!(
        report.is_empty(),
        "{} import cycle(s) between the files of a crate:\n{}",
        report.len(),
        report.join("\n")
    );
}

#[test]
fn host_leaves_stay_leaves() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let host = crate_graph(repo, Path::new("host/src"));
    for leaf in ["cancel", "memory", "elf", "paths"] {
        let leaf = module(leaf);
        let imports: Vec<&ModPath> = host
            .graph
            .iter()
            .filter(|(m, _)| m.starts_with(&leaf))
            .flat_map(|(_, deps)| deps.keys())
            .filter(|to| !to.starts_with(&leaf))
            .collect();
        assert!(
            imports.is_empty(),
            "{leaf:?} should import no host module, imports {imports:?}"
        );
    }
}

#[test]
fn the_checker_sees_every_path_form() {
    let code = r##"
use crate::link::{Link, Wire};
use crate::{config::board::Board, elf, report::{self, svg::{Svg as S, Row}}};
use super::padding::Axis;
use super::super::fixed_point::*;
pub(super) fn f() { let x = crate::cancel::KillSwitch::default(); let _ = self::local::Y; }
use hilt_crate::x;
// use crate::commented::Out;
/* use crate::blocked::Out; */
const S: &str = "crate::quoted::Out";
const R: &str = r#"crate::raw::Out"#;
fn g<'a>(c: char) -> &'a str { if c == '"' || c == '\'' { "" } else { "" } }
macro_rules! m { () => { $crate::model::Model::new() } }
mod inner { use super::sibling_of_inner; }
#[cfg(test)]
mod tests { use crate::only::InTests; }
#[cfg(test)]
use crate::test_only::Helper;
use crate::after_tests::Kept;
fn h() { #[cfg(test)] check() }
use crate::after_block::Kept;
"##;
    let here = module("kernels/lstm/float");
    let mut found: Vec<String> = crate_paths(&code_of(code), &here)
        .into_iter()
        .map(|(p, _)| p.join("::"))
        .collect();
    found.sort();
    found.dedup();
    assert_eq!(
        found,
        [
            "after_block::Kept",
            "after_tests::Kept",
            "cancel::KillSwitch::default",
            "config::board::Board",
            "elf",
            "kernels::fixed_point",
            "kernels::lstm::float::local::Y",
            "kernels::lstm::float::sibling_of_inner",
            "kernels::lstm::padding::Axis",
            "link::Link",
            "link::Wire",
            "model::Model::new",
            "report",
            "report::svg::Row",
            "report::svg::Svg",
        ]
    );
    // `super::` in a folder's `mod.rs` is the folder's parent.
    let found = crate_paths(
        &code_of("use super::tensor::Dims;"),
        &module("kernels/lstm"),
    );
    assert_eq!(found, [(module("kernels/tensor/Dims"), 1)]);
}

#[test]
fn cycles_are_found_with_their_files_in_order() {
    let edge = |g: &mut Graph, a: &str, b: &str| {
        g.entry(module(a)).or_default().insert(module(b), 1);
        g.entry(module(b)).or_default();
    };
    let mut graph = Graph::new();
    edge(&mut graph, "a", "b");
    edge(&mut graph, "b", "c");
    edge(&mut graph, "d", "a");
    assert!(cycles(&graph).is_empty());
    edge(&mut graph, "c", "a");
    let found = cycles(&graph);
    assert_eq!(found, [vec![module("a"), module("b"), module("c")]]);
    assert_eq!(
        loop_through_first(&graph, &found[0]),
        [module("a"), module("b"), module("c"), module("a")]
    );
}
