//! Comparing an accepted snapshot with a new one: layouts exactly,
//! latencies the firmware counted within the board's [`Tolerance`], the
//! QEMU plugin's exact counts (and its estimates) to the instruction, and
//! which difference to read first.

use std::collections::BTreeMap;

use hilt_contract::board::Tolerance;

/// The text of a single-quoted YAML scalar.
pub(super) fn unquote(text: &str) -> String {
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

/// What a latency figure counts, which decides how far it may move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unit {
    /// Counted by the firmware (SysTick under QEMU, DWT on a part): within
    /// the board's tolerance.
    Cycles,
    /// Counted by the QEMU plugin, exactly: every change is reported.
    Instructions,
    /// The plugin's timing model over those instructions: as exact.
    EstimatedCycles,
}

impl Unit {
    /// How a snapshot spells it after the figure.
    pub(super) fn word(self) -> &'static str {
        match self {
            Unit::Cycles => "cycles",
            Unit::Instructions => "instructions",
            Unit::EstimatedCycles => "estimated cycles",
        }
    }
}

/// A latency figure and its unit ("3412 instructions", "4102 estimated
/// cycles", "3840 cycles").
pub(super) fn figure_of(value: &str) -> Option<(f64, Unit)> {
    [Unit::EstimatedCycles, Unit::Instructions, Unit::Cycles]
        .into_iter()
        .find_map(|unit| {
            let number = value.strip_suffix(unit.word())?.strip_suffix(' ')?;
            number.parse().ok().map(|n| (n, unit))
        })
}

/// What moved between an accepted snapshot and a new one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Comparison {
    /// What fails the gate, readable: a buffer that moved (old → new
    /// offset), a latency slower beyond the tolerance (old → new cycles, %),
    /// an entry that appeared or is gone.
    pub regressions: Vec<String>,
    /// Latencies faster beyond the tolerance (these pass).
    pub improvements: Vec<String>,
}

/// Compares an accepted snapshot with a new one under `tolerance`.
pub fn compare(old: &str, new: &str, tolerance: Tolerance) -> Comparison {
    let (a, b) = (entries(old), entries(new));
    let mut diffs = Vec::new();
    let mut improvements = Vec::new();
    for (key, new_value) in &b {
        let (section, name) = key.split_once('/').unwrap_or(("", key));
        match a.get(key) {
            None => diffs.push(format!("{section}: new {name}: {new_value}")),
            Some(old_value) if old_value == new_value => {}
            Some(old_value) => match (figure_of(old_value), figure_of(new_value)) {
                (Some((o, unit)), Some((n, new_unit))) if unit == new_unit => {
                    let change = if o == 0.0 {
                        if n == 0.0 { 0.0 } else { 100.0 }
                    } else {
                        100.0 * (n - o) / o
                    };
                    // The plugin's figures are exact: no slack.
                    let slack = match unit {
                        Unit::Cycles => tolerance.slack(o),
                        Unit::Instructions | Unit::EstimatedCycles => 0.0,
                    };
                    let word = unit.word();
                    if n - o > slack {
                        diffs.push(format!("{name}: {o} → {n} {word} ({change:+.1}%, slower)"));
                    } else if o - n > slack {
                        improvements
                            .push(format!("{name}: {o} → {n} {word} ({change:+.1}%, faster)"));
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
    Comparison {
        regressions: diffs,
        improvements,
    }
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

/// The difference to read first among a run's `diffs`: the arena's own
/// figures (`layout head: 16000 → 72736`; head, then tail, used and
/// capacity), which every buffer move follows from, else any layout
/// entry, else the first difference (a slower op).
pub fn headline(diffs: &[String]) -> Option<&str> {
    [
        "layout head:",
        "layout tail:",
        "layout used:",
        "layout capacity:",
        "layout",
    ]
    .iter()
    .find_map(|prefix| diffs.iter().find(|d| d.starts_with(prefix)))
    .or_else(|| diffs.first())
    .map(String::as_str)
}
