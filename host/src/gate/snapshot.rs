//! A run's gate snapshot: its text (one YAML entry per line, so that
//! comparisons and diffs work line by line) and its insta snapshot file
//! (`SCENARIO@BOARD.snap`, beside a pending `.snap.new`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::layout::ModelNames;
use crate::outcome::{BoardRun, ObservedStep, StepOffload};

use super::compare::Unit;

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
    render_latency(&mut s, run, names);
    if let (Some(setting), Some(on_npu)) = (&run.offload, &on_npu) {
        let first = run.steps.first().and_then(|step| step.offload.as_ref());
        render_offload(&mut s, setting.mode, on_npu, first);
    }
    s
}

/// The latency section. A run the QEMU plugin observed shows its exact
/// instructions and estimated cycles per step and op (the gate holds them
/// to the instruction); any other run, the cycles the firmware counted.
fn render_latency(s: &mut String, run: &BoardRun, names: &ModelNames) {
    let op_name = |op: usize| names.ops.get(op).map_or("?", String::as_str);
    let _ = writeln!(s, "latency:");
    let observed: Option<Vec<&ObservedStep>> = run
        .steps
        .iter()
        .map(|step| step.observed.as_ref())
        .collect();
    match observed {
        Some(observed) if !observed.is_empty() => {
            type Figure = fn(u64, u64) -> u64;
            let figures: [(&str, Unit, Figure); 2] = [
                ("", Unit::Instructions, |i, _| i),
                ("estimated ", Unit::EstimatedCycles, |_, c| c),
            ];
            for (section, unit, pick) in figures {
                let _ = writeln!(s, "  {section}steps:");
                for (step, seen) in run.steps.iter().zip(&observed) {
                    let figure = pick(seen.instructions, seen.estimated_cycles);
                    let line =
                        format!("{} step {}: {figure} {}", step.case, step.step, unit.word());
                    let _ = writeln!(s, "    - {}", quote(&line));
                }
                let _ = writeln!(s, "  {section}ops:");
                for (op, count) in observed[0].ops.iter().enumerate() {
                    let figure = pick(count.instructions, count.estimated_cycles);
                    let line = format!("op {op} {}: {figure} {}", op_name(op), unit.word());
                    let _ = writeln!(s, "    - {}", quote(&line));
                }
            }
        }
        _ => {
            let _ = writeln!(s, "  steps:");
            for step in &run.steps {
                let line = format!(
                    "{} step {}: {} {}",
                    step.case,
                    step.step,
                    step.total_cycles,
                    Unit::Cycles.word()
                );
                let _ = writeln!(s, "    - {}", quote(&line));
            }
            let _ = writeln!(s, "  ops:");
            if let Some(first) = run.steps.first() {
                for (op, cycles) in first.op_cycles.iter().enumerate() {
                    let line = format!("op {op} {}: {cycles} {}", op_name(op), Unit::Cycles.word());
                    let _ = writeln!(s, "    - {}", quote(&line));
                }
            }
        }
    }
}

/// The offload section of a snapshot: the memory view and which ops the
/// engine ran (a change of placement is a change of the run), then, from
/// the first step, what its figures leave out and keep, by category (in
/// cycles, so held within the latency tolerance like every latency).
fn render_offload(s: &mut String, mode: &str, on_npu: &[bool], first: Option<&StepOffload>) {
    let ops: Vec<String> = on_npu
        .iter()
        .enumerate()
        .filter(|&(_, &npu)| npu)
        .map(|(op, _)| op.to_string())
        .collect();
    let _ = writeln!(s, "offload:");
    let _ = writeln!(s, "  mode: {mode}");
    let _ = writeln!(s, "  npu ops: [{}]", ops.join(", "));
    let Some(o) = first else {
        return;
    };
    let _ = writeln!(s, "  removed from the figures (emulation):");
    for (what, cycles) in [
        ("engine (kernels and checks)", o.removed.engine),
        ("shadow copies", o.removed.shadow_copies),
        ("oversleep", o.removed.oversleep),
    ] {
        let _ = writeln!(s, "    - {}", quote(&format!("{what}: {cycles} cycles")));
    }
    let _ = writeln!(s, "  kept in the figures (modelled driver):");
    for (what, cycles) in [
        ("submits", o.kept.driver_submit),
        ("cache lines", o.kept.driver_cache),
    ] {
        let _ = writeln!(s, "    - {}", quote(&format!("{what}: {cycles} cycles")));
    }
}

/// A single-quoted YAML scalar (tensor names hold `:`, `/` and `;`).
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Where the accepted snapshot of (scenario, board) lives.
pub fn snapshot_path(dir: &Path, scenario: &str, board: &str) -> PathBuf {
    dir.join(format!("{scenario}@{board}.snap"))
}

/// The `source:` of every snapshot header: the gate's file before it was
/// a folder, kept so that the accepted snapshots do not change.
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
