//! The plain-text table `hilt layout` prints: the arena's figures, its
//! buffers and what the totals count.

use std::fmt::Write as _;

use super::{Coverage, LayoutReport};

fn kib(bytes: u32) -> String {
    format!("{:.2} KiB", f64::from(bytes) / 1024.0)
}

/// What `total` counts, under the figures: the arena's peak is its tail
/// plus the higher of the head and the set-up memory planning used in the
/// head's place (requests and planner workspace; with kernels, their
/// prepare's temp memory too), so it can exceed `head + tail`. And, when
/// set-up kept another planner's plan for a smaller total, which and why.
fn render_total_note(out: &mut String, report: &LayoutReport) {
    let _ = writeln!(
        out,
        "  (total: the arena's peak, the tail plus the higher of the head and the set-up \
         memory planning used below it: {} B of requests and planner workspace{}; \
         guards and alignment included)",
        report.setup,
        if report.covers == Coverage::Interpreter {
            ", and kernels' prepare"
        } else {
            ""
        }
    );
    if let Some(kept) = report.kept {
        let _ = writeln!(
            out,
            "  ({} plan kept: {}'s search needs more set-up memory than {kept}'s whole plan \
             commits, so its total would be larger)",
            kept, report.planner
        );
    }
}

/// The lean schedule's lines (TFLM's bound, the ops in place, those left
/// as TFLM's) and the constant image's, when the plan has them.
fn render_below_bound(out: &mut String, report: &LayoutReport) {
    if let Some(lean) = &report.lean {
        let _ = writeln!(
            out,
            "  {:<12}{:>10} B  {:>12}  (TFLM's schedule; the lower bound above is the lean one's)",
            "classic",
            lean.classic_bound,
            kib(lean.classic_bound)
        );
        let ops: Vec<String> = lean.in_place.iter().map(u32::to_string).collect();
        let _ = writeln!(
            out,
            "  {} schedule: {} ops in place ({})",
            lean.runs,
            lean.in_place.len(),
            if ops.is_empty() {
                "none".into()
            } else {
                format!("ops {}", ops.join(", "))
            }
        );
        for line in &lean.fused {
            let _ = writeln!(out, "    fused: {line}");
        }
        for line in &lean.as_tflm {
            let _ = writeln!(out, "    as TFLM's: {line}");
        }
        for line in &lean.not_fused {
            let _ = writeln!(out, "    not fused: {line}");
        }
    }
    if report.constants > 0 {
        let _ = writeln!(
            out,
            "  {:<12}{:>10} B  {:>12}  (kernel constants in flash, beside the model: not in the arena)",
            "constants",
            report.constants,
            kib(report.constants)
        );
    }
}

/// The plain-text table a person reads first.
pub fn render_table(report: &LayoutReport, model_name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{model_name}: {} planner, {} buffers",
        report.planner,
        report.buffers.len()
    );
    match (&report.board, report.covers) {
        (Some(board), _) => {
            let _ = writeln!(
                out,
                "  as board {board} commits it: kernel op data and scratch included"
            );
        }
        (None, Coverage::Interpreter) => {
            let _ = writeln!(
                out,
                "  through the interpreter: kernel op data and scratch included"
            );
        }
        (None, Coverage::Activations) => {}
    }
    if let Some(capacity) = report.capacity {
        let _ = writeln!(
            out,
            "  {:<12}{capacity:>10} B  {:>12}",
            "arena",
            kib(capacity)
        );
    }
    for (label, value) in [
        ("head", report.head),
        ("tail", report.tail),
        ("total", report.total),
        ("lower bound", report.lower_bound),
    ] {
        let _ = writeln!(out, "  {label:<12}{value:>10} B  {:>12}", kib(value));
    }
    render_below_bound(&mut out, report);
    render_total_note(&mut out, report);
    for p in &report.pools {
        let _ = writeln!(
            out,
            "  pool {:<7}{:>10} B  at {:>8}, {}{}: head {} B, tail {} B, {} buffers",
            p.name,
            p.size,
            p.start,
            p.reach,
            if p.planned { "" } else { ", not planned" },
            p.head,
            p.tail,
            p.buffers
        );
    }
    let _ = writeln!(out);
    let name_width = report
        .buffers
        .iter()
        .map(|b| b.name.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 48);
    let _ = writeln!(
        out,
        "{:>4}  {:<7} {:>6}  {:<name_width$}  {:>11}  {:>9}  {:>10}  {:>5}  {:>9}  {:>9}",
        "#", "kind", "tensor", "name", "steps", "size B", "size", "align", "offset", "end"
    );
    for (i, b) in report.buffers.iter().enumerate() {
        let mut name: String = b.name.chars().take(name_width).collect();
        if b.name.chars().count() > name_width {
            name.pop();
            name.push('…');
        }
        let tensor = b.tensor.map_or_else(|| "-".to_string(), |t| t.to_string());
        let steps = format!("{}..{}", b.first_step, b.last_step);
        let padded = b.size.div_ceil(b.align) * b.align;
        let _ = write!(
            out,
            "{i:>4}  {:<7} {tensor:>6}  {name:<name_width$}  {steps:>11}  {:>9}  {:>10}  {:>5}  {:>9}  {:>9}",
            b.kind,
            b.size,
            kib(b.size),
            b.align,
            b.offset,
            b.offset + padded
        );
        // Only offload plans have holds: other tables are unchanged.
        if let Some(pool) = &b.pool {
            let _ = write!(out, "  in {pool}");
        }
        if let Some(hold) = b.held {
            let _ = write!(out, "  {hold}");
        }
        out.push('\n');
    }
    out
}
