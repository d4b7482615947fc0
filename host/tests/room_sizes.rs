//! Rooms a newcomer can read: no hand-written source file of any crate is
//! over 900 lines, and no function outside test code is over 100.
//!
//! How it counts:
//! - the files are every `src/**.rs` of every crate (a folder holding a
//!   `Cargo.toml` and a `src/`), skipping cargo's `build/` and dot
//!   folders; a generated file (its first lines say "automatically
//!   generated": the TFLite schema) is not hand-written. `tests/` and
//!   `benches/` folders are outside `src/`, so they are not counted;
//! - a file counts whole, its inline tests included (`wc -l`);
//! - a function runs from the line of its `fn` to the line of its closing
//!   brace, comments and blank lines included, found after comments,
//!   strings and character literals are blanked out (so a `{` in a string
//!   does not count). Test code is a file named `tests.rs` and everything
//!   from a file's first `#[cfg(test)]` on (where hilt keeps its inline
//!   tests).
//!
//! It reads files only, so it takes milliseconds.

mod common;

use std::path::{Path, PathBuf};

use common::rust_source::code_of;

/// The most lines a hand-written source file may have.
const MAX_FILE_LINES: usize = 900;

/// The most lines a function outside test code may have.
const MAX_FN_LINES: usize = 100;

/// Every hand-written `.rs` file under a crate's `src/` below `dir`, with
/// its text.
fn source_files(dir: &Path, in_src: bool, out: &mut Vec<(PathBuf, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            if name == "build" || name.starts_with('.') || name == "node_modules" {
                continue;
            }
            let src = name == "src" && dir.join("Cargo.toml").is_file();
            source_files(&path, in_src || src, out);
        } else if in_src && name.ends_with(".rs") {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let head: String = text.chars().take(400).collect();
            if !head.contains("automatically generated") {
                out.push((path, text));
            }
        }
    }
}

/// Every function of `text` outside its test code longer than `max`
/// lines: `(name, first line, lines)`.
fn long_functions(text: &str, max: usize) -> Vec<(String, usize, usize)> {
    let code = code_of(text);
    let code = match code.find("#[cfg(test)]") {
        Some(at) => &code[..at],
        None => &code[..],
    };
    let bytes = code.as_bytes();
    let line_at = |at: usize| code[..at].matches('\n').count() + 1;
    let mut out = Vec::new();
    let mut search = 0;
    while let Some(k) = code[search..].find("fn ") {
        let at = search + k;
        search = at + 3;
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        let name: String = code[at + 3..]
            .chars()
            .take_while(|ch| ch.is_alphanumeric() || *ch == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        // Its body: the first `{` before any `;` (a declaration has none),
        // to the brace that closes it.
        let Some(open) = code[at..].find(['{', ';']).map(|k| at + k) else {
            break;
        };
        if bytes[open] == b';' {
            continue;
        }
        let mut depth = 0usize;
        let mut close = None;
        for (j, &b) in bytes.iter().enumerate().skip(open) {
            match b {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(j);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(close) = close else { break };
        let lines = line_at(close) - line_at(at) + 1;
        if lines > max {
            out.push((name, line_at(at), lines));
        }
    }
    out
}

#[test]
fn no_file_is_over_900_lines_and_no_function_over_100() {
    let repo = common::repo();
    let mut files = Vec::new();
    source_files(&repo, false, &mut files);
    assert!(
        files.len() > 200,
        "found only {} source files under {}",
        files.len(),
        repo.display()
    );
    let mut faults = Vec::new();
    for (path, text) in &files {
        let shown = path.strip_prefix(&repo).unwrap().display();
        let lines = text.lines().count();
        if lines > MAX_FILE_LINES {
            faults.push(format!("{shown}: {lines} lines (at most {MAX_FILE_LINES})"));
        }
        if path.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        for (name, line, n) in long_functions(text, MAX_FN_LINES) {
            faults.push(format!(
                "{shown}:{line}: fn {name} is {n} lines (at most {MAX_FN_LINES})"
            ));
        }
    }
    assert!(faults.is_empty(), "rooms too big:\n{}", faults.join("\n"));
}

#[test]
fn the_counter_sees_bodies_not_strings_or_declarations() {
    let body = "    x += 1;\n".repeat(99);
    // 101 lines: `fn`, 99 statements, and the closing brace.
    let long = format!("fn long() {{\n{body}}}\n");
    assert_eq!(long_functions(&long, 100), [("long".to_string(), 1, 101)]);
    let short = format!("fn short() {{\n{}}}\n", "    x += 1;\n".repeat(98));
    assert!(long_functions(&short, 100).is_empty());
    // Braces in strings, raw strings, characters and comments are not the
    // body's; a declaration has none; a lifetime is not a character.
    let tricky = format!(
        "trait T {{ fn decl(&self); }}\nfn f<'a>(s: &'a str) {{\n    let _ = \"}}\";\n    let _ = r#\"}}\"#;\n    let _ = '}}';\n    // }}\n{body}}}\n"
    );
    assert_eq!(long_functions(&tricky, 100), [("f".to_string(), 2, 105)]);
    // Inline tests do not count.
    let tested = format!("fn a() {{}}\n#[cfg(test)]\nmod tests {{\n{long}}}\n");
    assert!(long_functions(&tested, 100).is_empty());
}
