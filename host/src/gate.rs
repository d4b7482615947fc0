//! The regression gate: every (scenario, board) run is summarised as a
//! snapshot — the committed arena layout and the latencies — and compared
//! with the accepted one under `snapshots/gate/`. Layouts must match
//! exactly. Latencies fail the gate only when they get *slower* by more than
//! the board's [`Tolerance`]: its `latency_tolerance_percent` (real boards'
//! run-to-run spread) or the resolution of the board's clock, whichever is
//! larger. On QEMU the counts are deterministic but read through SysTick,
//! whose tick is several instructions (40 on MPS2 at 25 MHz with
//! `-icount shift=0`); every figure is the difference of two such reads, so
//! an edit that leaves the timed code alone can still move a figure by one
//! tick (where the timed region starts within a tick moves with the code
//! before it). One tick of slack makes the gate quiet on such edits while a
//! kernel that really got slower still fails it, naming the op. A figure
//! that got *faster* beyond the tolerance passes, and is listed with a
//! `.snap.new` so that the improvement can be accepted (ratcheted).
//!
//! Snapshots are insta YAML files (`SCENARIO@BOARD.snap`). A difference
//! leaves `SCENARIO@BOARD.snap.new` beside the old one, which `hilt gate
//! --accept` moves over it (see [`accept`]), or `cargo insta review` shows
//! and accepts like any insta snapshot (cargo-insta is not needed).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::outcome::{BoardRun, Outcome};

/// How far a latency may move: a fact of the board (its spread and its
/// clock's resolution), so it is defined with the board contract.
pub use hilt_contract::board::Tolerance;

/// One (scenario, board) verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Same layout; latencies within tolerance.
    Unchanged,
    /// Same layout; some latencies got faster beyond the tolerance (passes;
    /// a `.snap.new` holds the faster figures for acceptance).
    Faster(Vec<String>),
    /// No accepted snapshot yet (a `.snap.new` was written).
    New,
    /// Something moved; the readable differences (a `.snap.new` was written).
    Changed(Vec<String>),
    /// The run itself failed.
    RunFailed(String),
}

/// Names used to make a snapshot readable (read from the model by
/// [`crate::layout::model_names`]).
pub use crate::layout::ModelNames;

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
    let placement = run.pools.as_ref().map(|p| p.placement(&run.plan));
    if let (Some(pools), Some(placement)) = (&run.pools, &placement) {
        let _ = writeln!(s, "  pools:");
        for (p, head) in pools.pools.iter().zip(pools.heads(&run.plan, placement)) {
            let planned = if p.planned { "" } else { ", not planned" };
            let line = format!(
                "{}: start {}, size {}, {}{planned}, head {head}",
                p.name, p.start, p.size, p.reach
            );
            let _ = writeln!(s, "    - {}", quote(&line));
        }
    }
    let _ = writeln!(s, "  buffers:");
    // Offload runs only: where ops ran, from the first step's placement.
    let on_npu: Option<Vec<bool>> = run.offload.as_ref().map(|_| {
        run.steps
            .first()
            .and_then(|step| step.offload.as_ref())
            .map_or_else(Vec::new, |o| o.on_npu.clone())
    });
    for (i, b) in run.plan.iter().enumerate() {
        let name = if b.kind == "tensor" {
            names
                .tensors
                .get(usize::from(b.index))
                .cloned()
                .unwrap_or_default()
        } else {
            String::new()
        };
        let mut entry = format!(
            "{} {} {name}: steps {}..{}, size {}, align {}, offset {}",
            b.kind, b.index, b.first_step, b.last_step, b.size, b.align, b.offset
        );
        let pool = placement.as_ref().and_then(|at| at[i]);
        if let (Some(pools), Some(k)) = (&run.pools, pool) {
            let _ = write!(entry, ", in {}", pools.pools[k].name);
        }
        if let Some(on_npu) = &on_npu {
            let last = u32::from(b.last_step);
            let hold = if b.kind == "tensor" {
                names.liveness.tensor_hold(u32::from(b.index), last, on_npu)
            } else {
                crate::holds::scratch_hold(u32::from(b.index), last)
            };
            if let Some(hold) = hold {
                let _ = write!(entry, ", {hold}");
            }
        }
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
    if let (Some(setting), Some(on_npu)) = (&run.offload, &on_npu) {
        render_offload(&mut s, setting.mode, on_npu);
    }
    s
}

/// The offload section of a snapshot: the memory view and which ops the
/// engine ran (a change of placement is a change of the run).
fn render_offload(s: &mut String, mode: &str, on_npu: &[bool]) {
    let ops: Vec<String> = on_npu
        .iter()
        .enumerate()
        .filter(|&(_, &npu)| npu)
        .map(|(op, _)| op.to_string())
        .collect();
    let _ = writeln!(s, "offload:");
    let _ = writeln!(s, "  mode: {mode}");
    let _ = writeln!(s, "  npu ops: [{}]", ops.join(", "));
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
            Some(old_value) => match (cycles_of(old_value), cycles_of(new_value)) {
                (Some(o), Some(n)) => {
                    let change = if o == 0.0 {
                        if n == 0.0 { 0.0 } else { 100.0 }
                    } else {
                        100.0 * (n - o) / o
                    };
                    let slack = tolerance.slack(o);
                    if n - o > slack {
                        diffs.push(format!("{name}: {o} → {n} cycles ({change:+.1}%, slower)"));
                    } else if o - n > slack {
                        improvements
                            .push(format!("{name}: {o} → {n} cycles ({change:+.1}%, faster)"));
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
    tolerance: Tolerance,
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
            let moved = compare(&old, &body, tolerance);
            if !moved.regressions.is_empty() {
                Verdict::Changed(moved.regressions)
            } else if !moved.improvements.is_empty() {
                Verdict::Faster(moved.improvements)
            } else {
                Verdict::Unchanged
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

impl Verdict {
    /// Whether the gate passes on this verdict.
    pub fn passes(&self) -> bool {
        matches!(self, Verdict::Unchanged | Verdict::Faster(_))
    }
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

/// `accept with: hilt gate --accept SCENARIO --board BOARD (or cargo insta
/// review)`: how to accept one run's pending snapshot, with `--snapshots`
/// when the gate ran against another folder than the repository's.
pub fn accept_hint(scenario: &str, board: &str, snapshots: Option<&Path>) -> String {
    let folder = snapshots.map_or(String::new(), |d| format!(" --snapshots {}", d.display()));
    format!(
        "accept with: hilt gate --accept {scenario} --board {board}{folder} (or cargo insta review)"
    )
}

/// How a gated run's report message starts when its snapshot changed,
/// and when it has none yet: the report calls such a run CHANGED or NEW,
/// not a MISMATCH of its outputs (its outputs matched).
pub const SNAPSHOT_CHANGED: &str = "snapshot changed: ";
/// See [`SNAPSHOT_CHANGED`].
pub const SNAPSHOT_NEW: &str = "no accepted snapshot";

/// What a changed run's report says: the headline first, every other
/// difference once below it, then how to accept (one line each).
pub fn changed_message(scenario: &str, board: &str, diffs: &[String]) -> String {
    let first = headline(diffs).unwrap_or("");
    let mut lines = vec![format!("{SNAPSHOT_CHANGED}{first}")];
    lines.extend(diffs.iter().filter(|d| d.as_str() != first).cloned());
    lines.push(accept_hint(scenario, board, None));
    lines.join("\n")
}

/// One verdict as `hilt gate` prints it: a line naming the run and, for a
/// change, its headline; with `full`, every other difference once below
/// it (the gate prints them as the run finishes, and only the headline in
/// its closing list); and, for anything pending, how to accept it.
/// `snapshots`: the `--snapshots` folder, when one was given.
pub fn verdict_text(
    scenario: &str,
    board: &str,
    verdict: &Verdict,
    snapshots: Option<&Path>,
    full: bool,
) -> String {
    let key = format!("{scenario} @ {board}");
    let accept = format!("           {}", accept_hint(scenario, board, snapshots));
    let mut lines = Vec::new();
    match verdict {
        Verdict::Unchanged => lines.push(format!("ok       {key}")),
        Verdict::Faster(diffs) => {
            lines.push(format!("ok       {key} (faster; accept to keep the gain):"));
            lines.extend(diffs.iter().map(|d| format!("           {d}")));
            lines.push(accept);
        }
        Verdict::New => {
            lines.push(format!("NEW      {key}: no accepted snapshot"));
            lines.push(accept);
        }
        Verdict::Changed(diffs) => {
            let first = headline(diffs).unwrap_or("");
            let more = diffs.len().saturating_sub(1);
            if full {
                lines.push(format!("CHANGED  {key}: {first}"));
                lines.extend(
                    diffs
                        .iter()
                        .filter(|d| d.as_str() != first)
                        .map(|d| format!("           {d}")),
                );
            } else if more > 0 {
                lines.push(format!("CHANGED  {key}: {first} (and {more} more, above)"));
            } else {
                lines.push(format!("CHANGED  {key}: {first}"));
            }
            lines.push(accept);
        }
        Verdict::RunFailed(m) => lines.push(format!("FAILED   {key}: {m}")),
    }
    lines.join("\n")
}

/// Why accepting pending snapshots failed, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// The snapshots folder could not be listed.
    #[error("cannot list the snapshots folder {path}: {source}")]
    List {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A pending snapshot could not replace the accepted one.
    #[error("cannot accept {path}: {source}")]
    Rename {
        /// The `.snap.new`.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// One pending snapshot accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    /// Scenario name.
    pub scenario: String,
    /// Board name.
    pub board: String,
    /// What changed, as the gate said it (`new snapshot` when there was
    /// none): its headline and how many differences in all.
    pub change: String,
}

/// `hilt gate --accept`: every pending snapshot of `dir`
/// (`SCENARIO@BOARD.snap.new`) of the scenarios named (by name or file:
/// the stem counts; all when none) on the boards `board` matches (a name
/// or glob; all when None) replaces its accepted snapshot, as `cargo insta
/// review` does on accept. Nothing is run: the gate wrote them.
pub fn accept(
    dir: &Path,
    scenarios: &[String],
    board: Option<&str>,
) -> Result<Vec<Accepted>, AcceptError> {
    let entries = std::fs::read_dir(dir).map_err(|source| AcceptError::List {
        path: dir.into(),
        source,
    })?;
    let mut pending: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".snap.new"))
        .collect();
    pending.sort();
    let mut accepted = Vec::new();
    for new in pending {
        let file = new.file_name().unwrap_or_default().to_string_lossy();
        let Some((scenario, board_name)) = file.trim_end_matches(".snap.new").split_once('@')
        else {
            continue;
        };
        let wanted = scenarios.is_empty() || scenarios.iter().any(|s| s == scenario);
        if !wanted || board.is_some_and(|b| !hilt_contract::board::glob_match(b, board_name)) {
            continue;
        }
        let old = new.with_extension("");
        let change = match (read_snapshot(&old), read_snapshot(&new)) {
            (Some(before), Some(after)) => {
                let moved = compare(&before, &after, Tolerance::EXACT);
                let all: Vec<String> = moved
                    .regressions
                    .into_iter()
                    .chain(moved.improvements)
                    .collect();
                match headline(&all) {
                    Some(h) if all.len() > 1 => format!("{h} (and {} more)", all.len() - 1),
                    Some(h) => h.to_string(),
                    None => "no difference".into(),
                }
            }
            _ => "new snapshot".into(),
        };
        std::fs::rename(&new, &old).map_err(|source| AcceptError::Rename {
            path: new.clone(),
            source,
        })?;
        accepted.push(Accepted {
            scenario: scenario.to_string(),
            board: board_name.to_string(),
            change,
        });
    }
    Ok(accepted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(head: u32, op_cycles: &[u64]) -> String {
        let mut s = format!(
            "scenario: s\nboard: b\nlayout:\n  head: {head}\n  buffers:\n    - 'tensor 0 x: steps 0..1, size 16, align 16, offset 0'\nlatency:\n  steps:\n    - 'case0 step 0: {} cycles'\n  ops:\n",
            op_cycles.iter().sum::<u64>()
        );
        for (i, c) in op_cycles.iter().enumerate() {
            s.push_str(&format!("    - 'op {i} CONV_2D: {c} cycles'\n"));
        }
        s
    }

    /// MPS2 under `-icount shift=0`: one SysTick tick is 40 instructions.
    const VIRTUAL: Tolerance = Tolerance {
        percent: 0.0,
        cycles: 40,
    };

    #[test]
    fn one_tick_of_clock_noise_passes_on_a_virtual_board() {
        let old = snapshot(64, &[1_980_000, 40_000]);
        let new = snapshot(64, &[1_980_040, 39_960]);
        assert_eq!(compare(&old, &new, VIRTUAL), Comparison::default());
        // Exact comparison would have flagged them.
        assert!(!compare(&old, &new, Tolerance::EXACT).regressions.is_empty());
    }

    #[test]
    fn an_op_one_percent_slower_fails_naming_the_op() {
        let old = snapshot(64, &[1_980_000, 40_000]);
        let new = snapshot(64, &[1_999_800, 40_000]);
        let moved = compare(&old, &new, VIRTUAL);
        assert!(
            moved
                .regressions
                .iter()
                .any(|d| d.starts_with("op 0 CONV_2D: 1980000 → 1999800 cycles (+1.0%, slower)")),
            "{moved:?}"
        );
        // The step total moved too, and is named as such.
        assert!(
            moved
                .regressions
                .iter()
                .any(|d| d.starts_with("case0 step 0:"))
        );
    }

    #[test]
    fn a_faster_op_passes_and_is_listed() {
        let old = snapshot(64, &[1_980_000, 40_000]);
        let new = snapshot(64, &[1_900_000, 40_000]);
        let moved = compare(&old, &new, VIRTUAL);
        assert!(moved.regressions.is_empty(), "{moved:?}");
        assert_eq!(moved.improvements.len(), 2, "{moved:?}");
    }

    #[test]
    fn percent_tolerance_scales_with_the_figure() {
        let real = Tolerance {
            percent: 2.0,
            cycles: 0,
        };
        let old = snapshot(64, &[100_000]);
        assert!(
            compare(&old, &snapshot(64, &[101_900]), real)
                .regressions
                .is_empty()
        );
        assert!(
            !compare(&old, &snapshot(64, &[102_100]), real)
                .regressions
                .is_empty()
        );
    }

    #[test]
    fn layouts_are_exact_whatever_the_latency_tolerance() {
        let old = snapshot(64, &[1_000]);
        let new = snapshot(128, &[1_000]);
        let loose = Tolerance {
            percent: 50.0,
            cycles: 1_000_000,
        };
        assert_eq!(
            compare(&old, &new, loose).regressions,
            vec!["layout head: 64 → 128".to_string()]
        );
    }

    /// A run and names rebuilt from an accepted snapshot's own lines.
    fn run_from_snapshot(body: &str) -> (BoardRun, ModelNames) {
        use crate::outcome::{PlannedBuffer, StepResult};
        let field = |key: &str| -> String {
            body.lines()
                .find_map(|l| l.trim().strip_prefix(key).map(str::to_string))
                .unwrap()
        };
        let mut run = BoardRun::new(&field("scenario: "), &field("board: "));
        let n = |k: &str| field(k).parse::<u32>().unwrap();
        run.arena = Some([n("capacity: "), n("head: "), n("tail: "), n("used: ")]);
        let mut names = ModelNames::default();
        let mut op_cycles = Vec::new();
        for line in body.lines().filter_map(|l| l.trim().strip_prefix("- ")) {
            let line = unquote(line);
            if let Some((name, figures)) = line.split_once(": start ") {
                // `fast: start 0, size 32768, cpu, head 4096` (no canaries
                // in these scenarios: the head starts at the arena's start).
                let parts: Vec<&str> = figures.split(", ").collect();
                let pools = run.pools.get_or_insert(crate::outcome::RunPools {
                    pools: Vec::new(),
                    guard: 0,
                });
                pools.pools.push(crate::outcome::PoolRange {
                    name: name.into(),
                    start: parts[0].parse().unwrap(),
                    size: parts[1].trim_start_matches("size ").parse().unwrap(),
                    reach: parts[2].into(),
                    planned: !figures.contains("not planned"),
                });
            } else if let Some((head, tail)) = line.rsplit_once(": steps ") {
                let mut parts = head.splitn(3, ' ');
                let kind = if parts.next() == Some("tensor") {
                    "tensor"
                } else {
                    "scratch"
                };
                let index: u16 = parts.next().unwrap().parse().unwrap();
                let name = parts.next().unwrap_or("").to_string();
                if kind == "tensor" && names.tensors.len() <= usize::from(index) {
                    names.tensors.resize(usize::from(index) + 1, String::new());
                }
                if kind == "tensor" {
                    names.tensors[usize::from(index)] = name;
                }
                let v: Vec<u32> = tail
                    .split(|c: char| !c.is_ascii_digit())
                    .filter(|p| !p.is_empty())
                    .map(|p| p.parse().unwrap())
                    .collect();
                run.plan.push(PlannedBuffer {
                    kind,
                    index,
                    first_step: v[0] as u16,
                    last_step: v[1] as u16,
                    size: v[2],
                    align: v[3],
                    offset: v[4],
                });
            } else if let Some(rest) = line.strip_prefix("op ") {
                let (head, cycles) = rest.rsplit_once(": ").unwrap();
                names.ops.push(head.split_once(' ').unwrap().1.to_string());
                op_cycles.push(cycles_of(cycles).unwrap() as u32);
            } else if let Some((head, cycles)) = line.rsplit_once(": ") {
                let (case, step) = head.split_once(" step ").unwrap();
                run.steps.push(StepResult {
                    case: case.into(),
                    step: step.parse().unwrap(),
                    total_cycles: cycles_of(cycles).unwrap() as u64,
                    op_cycles: Vec::new(),
                    mismatch: None,
                    offload: None,
                });
            }
        }
        run.steps[0].op_cycles = op_cycles;
        (run, names)
    }

    #[test]
    fn runs_without_offload_render_the_accepted_snapshots_byte_for_byte() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../snapshots/gate");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "snap") {
                continue;
            }
            let body = read_snapshot(&path).unwrap();
            // Offload runs carry placement and holds: the next test.
            if body.contains("\noffload:\n") {
                continue;
            }
            let (run, names) = run_from_snapshot(&body);
            assert_eq!(render(&run, &names), body, "{}", path.display());
            seen += 1;
        }
        assert!(seen >= 5, "the accepted snapshots were not found");
    }

    #[test]
    fn offload_runs_record_placement_and_name_each_hold() {
        use crate::holds::Liveness;
        use crate::outcome::{OffloadSetting, PlannedBuffer, StepOffload, StepResult};
        let mut run = BoardRun::new("s", "b");
        let buffer = |kind, index, last_step| PlannedBuffer {
            kind,
            index,
            first_step: 0,
            last_step,
            size: 16,
            align: 16,
            offset: 0,
        };
        // Tensor 1 is last read by op 1 but held to step 2; tensor 2 is not
        // held; op 1's scratch is held to step 2.
        run.plan = vec![
            buffer("tensor", 1, 2),
            buffer("tensor", 2, 2),
            buffer("scratch", 1, 2),
        ];
        run.steps.push(StepResult {
            case: "case0".into(),
            step: 0,
            total_cycles: 10,
            op_cycles: vec![4, 3, 3],
            mismatch: None,
            offload: Some(StepOffload {
                on_npu: vec![false, true, false],
                ..StepOffload::default()
            }),
        });
        let names = ModelNames {
            tensors: vec!["in".into(), "mid".into(), "out".into()],
            ops: vec!["ADD".into(), "CONV_2D".into(), "ADD".into()],
            liveness: Liveness {
                last_step: vec![Some(0), Some(1), Some(2)],
                users: vec![vec![0], vec![0, 1], vec![1, 2]],
            },
        };
        let plain = render(&run, &names);
        assert!(
            !plain.contains("held") && !plain.contains("offload:"),
            "{plain}"
        );
        run.offload = Some(OffloadSetting {
            mode: "coherent",
            ops: vec!["CONV_2D".into()],
            job_cycles: 2000,
            cycles_per_1000_macs: 4,
            fault: None,
        });
        let text = render(&run, &names);
        assert!(
            text.contains("'tensor 1 mid: steps 0..2, size 16, align 16, offset 0, held to step 2 (job of op 1)'"),
            "{text}"
        );
        assert!(
            text.contains("'tensor 2 out: steps 0..2, size 16, align 16, offset 0'\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "scratch 1 : steps 0..2, size 16, align 16, offset 0, held to step 2 (job of op 1)"
            ),
            "{text}"
        );
        assert!(
            text.ends_with("offload:\n  mode: coherent\n  npu ops: [1]\n"),
            "{text}"
        );
        // A hold that moves is a layout change the gate names.
        let moved = compare(&plain, &text, Tolerance::EXACT);
        assert!(
            moved
                .regressions
                .iter()
                .any(|d| d.starts_with("buffer tensor 1 mid: held")
                    && d.ends_with("to step 2 (job of op 1)")),
            "{moved:?}"
        );
    }

    #[test]
    fn the_headline_is_the_arena_figure_then_any_layout_change() {
        let diffs: Vec<String> = vec![
            "op 2 CONV_2D: 10 → 12 cycles (+20.0%, slower)".into(),
            "buffer tensor 3 x: offset 0 → 64".into(),
            "layout used: 7384 → 7448".into(),
            "layout head: 16000 → 72736".into(),
        ];
        assert_eq!(headline(&diffs), Some("layout head: 16000 → 72736"));
        assert_eq!(headline(&diffs[..3]), Some("layout used: 7384 → 7448"));
        assert_eq!(headline(&diffs[..1]), Some(diffs[0].as_str()));
        assert_eq!(headline(&[]), None);
    }

    #[test]
    fn a_change_prints_its_headline_first_its_diff_once_and_how_to_accept() {
        let diffs: Vec<String> = vec![
            "buffer tensor 3 x: offset 0 → 64".into(),
            "layout head: 16000 → 72736".into(),
        ];
        let verdict = Verdict::Changed(diffs);
        assert_eq!(
            verdict_text("tiny", "qemu-mps2-an386", &verdict, None, true),
            "CHANGED  tiny @ qemu-mps2-an386: layout head: 16000 → 72736\n\
             \x20          buffer tensor 3 x: offset 0 → 64\n\
             \x20          accept with: hilt gate --accept tiny --board qemu-mps2-an386 \
             (or cargo insta review)"
        );
        // The closing list: the headline alone, pointing at the diff above.
        let dir = Path::new("/tmp/snaps");
        assert_eq!(
            verdict_text("tiny", "b", &verdict, Some(dir), false),
            "CHANGED  tiny @ b: layout head: 16000 → 72736 (and 1 more, above)\n\
             \x20          accept with: hilt gate --accept tiny --board b --snapshots /tmp/snaps \
             (or cargo insta review)"
        );
        let new = verdict_text("tiny", "b", &Verdict::New, None, true);
        assert!(
            new.starts_with("NEW      tiny @ b: no accepted snapshot\n"),
            "{new}"
        );
        assert!(
            new.ends_with("accept with: hilt gate --accept tiny --board b (or cargo insta review)")
        );
        let faster = verdict_text(
            "t",
            "b",
            &Verdict::Faster(vec!["op 1: faster".into()]),
            None,
            true,
        );
        assert!(
            faster.contains("op 1: faster\n") && faster.contains("hilt gate --accept t --board b")
        );
        assert_eq!(
            verdict_text("t", "b", &Verdict::Unchanged, None, true),
            "ok       t @ b"
        );
    }

    #[test]
    fn accepting_moves_the_chosen_pending_snapshots_over_the_accepted_ones() {
        let dir = std::env::temp_dir().join(format!("hilt-gate-accept-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let old = snapshot(16000, &[100]);
        let new = snapshot(72736, &[120]);
        for board in ["qemu-a", "qemu-b"] {
            write_snapshot(&snapshot_path(&dir, "s", board), &old, "s").unwrap();
            write_snapshot(
                &snapshot_path(&dir, "s", board).with_extension("snap.new"),
                &new,
                "s",
            )
            .unwrap();
        }
        write_snapshot(&dir.join("fresh@qemu-a.snap.new"), &new, "fresh").unwrap();
        let accepted = accept(&dir, &["s".into()], Some("qemu-a")).unwrap();
        assert_eq!(
            accepted,
            vec![Accepted {
                scenario: "s".into(),
                board: "qemu-a".into(),
                change: "layout head: 16000 → 72736 (and 2 more)".into(),
            }]
        );
        assert_eq!(
            read_snapshot(&dir.join("s@qemu-a.snap")).as_deref(),
            Some(new.as_str())
        );
        assert!(!dir.join("s@qemu-a.snap.new").exists());
        // Other boards and scenarios keep theirs until asked.
        assert!(
            dir.join("s@qemu-b.snap.new").exists() && dir.join("fresh@qemu-a.snap.new").exists()
        );
        let rest = accept(&dir, &[], None).unwrap();
        let changes: Vec<&str> = rest.iter().map(|a| a.change.as_str()).collect();
        assert_eq!(
            changes,
            ["new snapshot", "layout head: 16000 → 72736 (and 2 more)"]
        );
        assert!(accept(&dir, &[], None).unwrap().is_empty());
        let missing = accept(&dir.join("nope"), &[], None)
            .unwrap_err()
            .to_string();
        assert!(
            missing.starts_with("cannot list the snapshots folder ") && missing.contains("nope")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_passing_verdicts_pass() {
        assert!(Verdict::Unchanged.passes());
        assert!(Verdict::Faster(vec![]).passes());
        assert!(!Verdict::New.passes());
        assert!(!Verdict::Changed(vec![]).passes());
        assert!(!Verdict::RunFailed(String::new()).passes());
    }
}
