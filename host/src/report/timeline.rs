//! The two-lane timeline of an offload step, as inline SVG for
//! `report.html`: what the CPU and the NPU did in one invocation, so a
//! reader sees at once whether the engine's work overlapped the CPU's or
//! the CPU sat waiting for it.
//!
//! - CPU lane: the ops back to back, each as wide as its cycles (an
//!   offloaded op's CPU share is its submit cost), and over them each wait
//!   for a job, from `wait_started` to `retired`, hatched.
//! - NPU lane: each job from `submitted` to `completed`.
//!
//! Every position is `LEFT + cycles × scale`, one scale for both lanes.

use std::fmt::Write as _;

use super::escape;
use crate::outcome::{StepOffload, StepResult};

/// Left margin (lane labels), px.
pub(super) const LEFT: f64 = 48.0;
/// Width of the drawn span, px.
pub(super) const PLOT: f64 = 600.0;
const CPU_Y: f64 = 8.0;
const NPU_Y: f64 = 40.0;
const LANE_H: f64 = 24.0;

/// The timeline of `step`, when it offloaded (None otherwise).
pub(super) fn timeline_svg(step: &StepResult, op_names: &[String]) -> Option<String> {
    let offload = step.offload.as_ref()?;
    let end = span(step, offload).max(1);
    let scale = PLOT / end as f64;
    let x = |cycles: u64| LEFT + cycles as f64 * scale;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {0} {1}" role="img" aria-label="CPU and NPU timeline of {} step {}">"#,
        LEFT + PLOT + 8.0,
        NPU_Y + LANE_H + 22.0,
        escape(&step.case),
        step.step
    );
    let _ = writeln!(
        s,
        r#"<text x="4" y="{}" font-size="11">CPU</text><text x="4" y="{}" font-size="11">NPU</text>"#,
        CPU_Y + 16.0,
        NPU_Y + 16.0
    );
    let mut at = 0u64;
    for (op, &cycles) in step.op_cycles.iter().enumerate() {
        let on_npu = offload.on_npu.get(op).copied().unwrap_or(false);
        let name = op_names.get(op).map_or("?", String::as_str);
        let (class, fill, what) = if on_npu {
            ("submit", "#f0a040", "submit")
        } else {
            ("cpu-op", "#4a7fd0", "cpu")
        };
        bar(
            &mut s,
            class,
            fill,
            (x(at), CPU_Y),
            x(at + u64::from(cycles)) - x(at),
            &format!("op {op} {name} ({what}): {cycles} cycles"),
        );
        at += u64::from(cycles);
    }
    for job in &offload.job_times {
        let name = op_names
            .get(usize::from(job.op))
            .map_or("?", String::as_str);
        bar(
            &mut s,
            "job",
            "#e07020",
            (x(job.submitted), NPU_Y),
            x(job.completed.max(job.submitted)) - x(job.submitted),
            &format!(
                "job of op {} {name}: cycles {}..{}",
                job.op, job.submitted, job.completed
            ),
        );
        bar(
            &mut s,
            "wait",
            "#c03030",
            (x(job.wait_started), CPU_Y),
            x(job.retired.max(job.wait_started)) - x(job.wait_started),
            &format!(
                "CPU waits for op {}: cycles {}..{}",
                job.op, job.wait_started, job.retired
            ),
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="{}" font-size="10">0 … {end} cycles · NPU busy {}, CPU waited {}, overlap {}, {} jobs, {} emulation cycles removed</text>"#,
        NPU_Y + LANE_H + 16.0,
        offload.busy,
        offload.waited,
        offload.overlap(),
        offload.jobs,
        offload.emulation
    );
    s.push_str("</svg>\n");
    Some(s)
}

/// The cycles the picture spans: the step, the ops laid end to end, and
/// every job's end, whichever is latest.
fn span(step: &StepResult, offload: &StepOffload) -> u64 {
    let ops: u64 = step.op_cycles.iter().map(|&c| u64::from(c)).sum();
    let jobs = offload
        .job_times
        .iter()
        .map(|j| j.completed.max(j.retired))
        .max()
        .unwrap_or(0);
    step.total_cycles.max(ops).max(jobs)
}

/// One bar with its tooltip.
fn bar(s: &mut String, class: &str, fill: &str, (x, y): (f64, f64), width: f64, title: &str) {
    let height = if class == "wait" {
        LANE_H / 2.0
    } else {
        LANE_H
    };
    let y = if class == "wait" { y + LANE_H / 2.0 } else { y };
    let _ = writeln!(
        s,
        r#"<rect class="{class}" x="{x:.1}" y="{y:.1}" width="{:.1}" height="{height:.1}" fill="{fill}" fill-opacity="0.85"><title>{}</title></rect>"#,
        width.max(0.5),
        escape(title)
    );
}
