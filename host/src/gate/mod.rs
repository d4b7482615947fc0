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
//! A virtual board run that the QEMU plugin observed (every gate run, with
//! access checks on) carries no SysTick figures in its snapshot: it
//! carries the plugin's exact instructions per step and op, and its
//! estimated cycles on the board's core. Those have no quantum, so they
//! get no slack: one instruction more is reported, slower (fails) or
//! faster (passes, listed). The tolerance above stays for real boards and
//! for runs the plugin did not observe.
//!
//! Snapshots are insta YAML files (`SCENARIO@BOARD.snap`). A difference
//! leaves `SCENARIO@BOARD.snap.new` beside the old one, which `hilt gate
//! --accept` moves over it (see [`accept`]), or `cargo insta review` shows
//! and accepts like any insta snapshot (cargo-insta is not needed).
//!
//! One idea per file: [`snapshot`] renders a run and reads and writes its
//! file, [`compare`](mod@compare) tells what moved, [`accept`](mod@accept)
//! moves pending snapshots over the accepted ones; this file gates a run
//! and words the verdict.

use std::path::Path;

use crate::outcome::{BoardRun, Outcome};

pub mod accept;
pub mod compare;
pub mod snapshot;

pub use accept::{AcceptError, Accepted, accept};
pub use compare::{Comparison, compare, headline};
pub use snapshot::{read_snapshot, render, snapshot_path, write_snapshot};

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
    /// On a noisy board judged by the results store: its cycles are
    /// outside the last nights' band (why, and since when). Nothing to
    /// accept: the baseline follows the nights as they are recorded.
    Drifted(String),
}

/// Names used to make a snapshot readable (read from the model by
/// [`crate::layout::model_names`]).
pub use crate::layout::ModelNames;

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
/// How a run on a noisy board whose cycles left the store's band starts.
pub const DRIFTED: &str = "drift against the results store: ";

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
        Verdict::Drifted(why) => lines.push(format!("DRIFT    {key}: {why}")),
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests;
