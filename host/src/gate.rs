//! The regression gate: every (scenario, board) run is summarised as a
//! snapshot — the committed arena layout and the latencies — and compared
//! with the accepted one under `snapshots/gate/`. Layouts must match
//! exactly; latencies exactly on QEMU (`-icount` is deterministic) and within
//! the board's `latency_tolerance_percent` on real boards.
//!
//! Snapshots are insta YAML files (`SCENARIO@BOARD.snap`). A difference
//! leaves `SCENARIO@BOARD.snap.new` beside the old one, which
//! `cargo insta review` shows and accepts like any insta snapshot.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::runner::{BoardRun, Outcome};

/// One (scenario, board) verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Same layout; latencies within tolerance.
    Unchanged,
    /// No accepted snapshot yet (a `.snap.new` was written).
    New,
    /// Something moved; the readable differences (a `.snap.new` was written).
    Changed(Vec<String>),
    /// The run itself failed.
    RunFailed(String),
}

/// Names used to make a snapshot readable.
#[derive(Debug, Clone, Default)]
pub struct ModelNames {
    /// Tensor names by index.
    pub tensors: Vec<String>,
    /// Operator names by index.
    pub ops: Vec<String>,
}

/// The snapshot text of a run: a YAML document of one entry per line, so
/// that comparisons and diffs work line by line.
pub fn render(run: &BoardRun, names: &ModelNames) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "scenario: {}", run.scenario);
    let _ = writeln!(s, "board: {}", run.board);
    let _ = writeln!(s, "layout:");
    if let Some([capacity, head, tail, used]) = run.arena {
        let _ = writeln!(s, "  capacity: {capacity}");
        let _ = writeln!(s, "  head: {head}");
        let _ = writeln!(s, "  tail: {tail}");
        let _ = writeln!(s, "  used: {used}");
    }
    let _ = writeln!(s, "  buffers:");
    for b in &run.plan {
        let name = if b.kind == "tensor" {
            names
                .tensors
                .get(usize::from(b.index))
                .cloned()
                .unwrap_or_default()
        } else {
            String::new()
        };
        let entry = format!(
            "{} {} {name}: steps {}..{}, size {}, align {}, offset {}",
            b.kind, b.index, b.first_step, b.last_step, b.size, b.align, b.offset
        );
        let _ = writeln!(s, "    - {}", quote(&entry));
    }
    let _ = writeln!(s, "latency:");
    let _ = writeln!(s, "  steps:");
    for step in &run.steps {
        let _ = writeln!(
            s,
            "    - {}",
            quote(&format!(
                "{} step {}: {} cycles",
                step.case, step.step, step.total_cycles
            ))
        );
    }
    let _ = writeln!(s, "  ops:");
    if let Some(first) = run.steps.first() {
        for (op, cycles) in first.op_cycles.iter().enumerate() {
            let name = names.ops.get(op).map_or("?", String::as_str);
            let _ = writeln!(
                s,
                "    - {}",
                quote(&format!("op {op} {name}: {cycles} cycles"))
            );
        }
    }
    s
}

/// A single-quoted YAML scalar (tensor names hold `:`, `/` and `;`).
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The text of a single-quoted YAML scalar.
fn unquote(text: &str) -> String {
    text.strip_prefix('\'')
        .and_then(|t| t.strip_suffix('\''))
        .map_or_else(|| text.to_string(), |t| t.replace("''", "'"))
}

/// `key: value` pairs of a snapshot's list entries: the part before the
/// last colon names the entry, the rest is its value.
fn entries(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut section = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(item) = trimmed.strip_prefix("- ") {
            let item = unquote(item);
            if let Some((key, value)) = item.rsplit_once(": ") {
                out.insert(format!("{section}/{key}"), value.to_string());
            }
        } else if let Some((key, value)) = trimmed.split_once(':') {
            if value.trim().is_empty() {
                section = key.to_string();
            } else {
                out.insert(format!("{section}/{key}"), value.trim().to_string());
            }
        }
    }
    out
}

fn cycles_of(value: &str) -> Option<f64> {
    value
        .strip_suffix(" cycles")
        .and_then(|v| v.trim().parse().ok())
}

/// The differences between an accepted snapshot and a new one, readable:
/// which buffer moved (old → new offset), which op got slower (old → new
/// cycles, %). Latencies differing by at most `tolerance_percent` count as
/// equal.
pub fn compare(old: &str, new: &str, tolerance_percent: f64) -> Vec<String> {
    let (a, b) = (entries(old), entries(new));
    let mut diffs = Vec::new();
    for (key, new_value) in &b {
        let (section, name) = key.split_once('/').unwrap_or(("", key));
        match a.get(key) {
            None => diffs.push(format!("{section}: new {name}: {new_value}")),
            Some(old_value) if old_value == new_value => {}
            Some(old_value) => match (cycles_of(old_value), cycles_of(new_value)) {
                (Some(o), Some(n)) => {
                    let change = if o == 0.0 {
                        if n == 0.0 { 0.0 } else { 100.0 }
                    } else {
                        100.0 * (n - o) / o
                    };
                    if change.abs() > tolerance_percent {
                        diffs.push(format!("{name}: {o} → {n} cycles ({change:+.1}%)"));
                    }
                }
                _ if section == "buffers" => {
                    diffs.push(format!(
                        "buffer {name}: {}",
                        describe_buffer_move(old_value, new_value)
                    ));
                }
                _ => diffs.push(format!("{section} {name}: {old_value} → {new_value}")),
            },
        }
    }
    for key in a.keys().filter(|k| !b.contains_key(*k)) {
        let (section, name) = key.split_once('/').unwrap_or(("", key));
        diffs.push(format!("{section}: {name} is gone"));
    }
    diffs
}

/// "offset 64 → 0" (and any other field that changed).
fn describe_buffer_move(old: &str, new: &str) -> String {
    let fields = |v: &str| -> Vec<(String, String)> {
        v.split(", ")
            .filter_map(|f| {
                f.split_once(' ')
                    .map(|(k, v)| (k.to_string(), v.to_string()))
            })
            .collect()
    };
    let (o, n) = (fields(old), fields(new));
    let changes: Vec<String> = n
        .iter()
        .filter_map(|(k, v)| {
            let before = o.iter().find(|(ok, _)| ok == k).map(|(_, ov)| ov.as_str());
            (before != Some(v.as_str())).then(|| format!("{k} {} → {v}", before.unwrap_or("?")))
        })
        .collect();
    changes.join(", ")
}

/// Where the accepted snapshot of (scenario, board) lives.
pub fn snapshot_path(dir: &Path, scenario: &str, board: &str) -> PathBuf {
    dir.join(format!("{scenario}@{board}.snap"))
}

const HEADER_SOURCE: &str = "host/src/gate.rs";

/// The body of an insta snapshot file (after its metadata header).
pub fn read_snapshot(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let rest = text.strip_prefix("---\n")?;
    let (_, body) = rest.split_once("\n---\n")?;
    Some(body.to_string())
}

/// Writes `body` as an insta snapshot file at `path`.
pub fn write_snapshot(path: &Path, body: &str, expression: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(
        path,
        format!("---\nsource: {HEADER_SOURCE}\nexpression: {expression}\n---\n{body}"),
    )
}

/// Gates one run against `dir`: compares, and on any difference (or no
/// accepted snapshot) writes the `.snap.new` for review.
pub fn gate_run(
    dir: &Path,
    run: &BoardRun,
    names: &ModelNames,
    tolerance_percent: f64,
) -> std::io::Result<Verdict> {
    if let Outcome::Error(m) | Outcome::Mismatch(m) = &run.outcome {
        return Ok(Verdict::RunFailed(m.clone()));
    }
    let body = render(run, names);
    let path = snapshot_path(dir, &run.scenario, &run.board);
    let pending = path.with_extension("snap.new");
    let verdict = match read_snapshot(&path) {
        None => Verdict::New,
        Some(old) => {
            let diffs = compare(&old, &body, tolerance_percent);
            if diffs.is_empty() {
                Verdict::Unchanged
            } else {
                Verdict::Changed(diffs)
            }
        }
    };
    if verdict == Verdict::Unchanged {
        let _ = std::fs::remove_file(&pending);
    } else {
        write_snapshot(&pending, &body, &format!("{}@{}", run.scenario, run.board))?;
    }
    Ok(verdict)
}
