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
//! - Below them, a cycle axis with round ticks, and a legend of the four
//!   kinds of box; each box wide enough carries its op's label.
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
/// Where the axis line is drawn, px from the top.
const AXIS_Y: f64 = NPU_Y + LANE_H + 6.0;
/// Where the legend's row is, px from the top.
const LEGEND_Y: f64 = AXIS_Y + 30.0;
/// The kinds of box, as the legend names them: class, colour, meaning.
const KINDS: [(&str, &str, &str); 4] = [
    ("cpu-op", "#4a7fd0", "op on the CPU"),
    ("submit", "#f0a040", "CPU submits a job"),
    ("job", "#e07020", "job on the NPU"),
    ("wait", "#c03030", "CPU waits for a job"),
];
/// Roughly how many pixels one character of an 10 px label takes.
const CHAR_PX: f64 = 5.6;

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
        LEGEND_Y + 26.0,
        escape(&step.case),
        step.step
    );
    let _ = writeln!(
        s,
        r#"<text x="4" y="{}" font-size="11">CPU</text><text x="4" y="{}" font-size="11">NPU</text>"#,
        CPU_Y + 16.0,
        NPU_Y + 16.0
    );
    // Drawn last, over every box (a wait's hatch covers part of an op's).
    let mut labels = Vec::new();
    let mut at = 0u64;
    for (op, &cycles) in step.op_cycles.iter().enumerate() {
        let on_npu = offload.on_npu.get(op).copied().unwrap_or(false);
        let name = op_names.get(op).map_or("?", String::as_str);
        let (class, fill, what) = if on_npu {
            ("submit", KINDS[1].1, "submit")
        } else {
            ("cpu-op", KINDS[0].1, "cpu")
        };
        let width = x(at + u64::from(cycles)) - x(at);
        bar(
            &mut s,
            class,
            fill,
            (x(at), CPU_Y),
            width,
            &format!("op {op} {name} ({what}): {cycles} cycles"),
        );
        labels.push(((x(at), CPU_Y), width, format!("{op} {name}")));
        at += u64::from(cycles);
    }
    for job in &offload.job_times {
        let name = op_names
            .get(usize::from(job.op))
            .map_or("?", String::as_str);
        let width = x(job.completed.max(job.submitted)) - x(job.submitted);
        bar(
            &mut s,
            "job",
            KINDS[2].1,
            (x(job.submitted), NPU_Y),
            width,
            &format!(
                "job of op {} {name}: cycles {}..{}",
                job.op, job.submitted, job.completed
            ),
        );
        labels.push((
            (x(job.submitted), NPU_Y),
            width,
            format!("{} {name}", job.op),
        ));
        bar(
            &mut s,
            "wait",
            KINDS[3].1,
            (x(job.wait_started), CPU_Y),
            x(job.retired.max(job.wait_started)) - x(job.wait_started),
            &format!(
                "CPU waits for op {}: cycles {}..{}",
                job.op, job.wait_started, job.retired
            ),
        );
    }
    for (at, width, text) in &labels {
        label(&mut s, *at, *width, text);
    }
    axis(&mut s, end, scale);
    legend(&mut s);
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="{}" font-size="10">0 … {end} cycles · NPU busy {}, CPU waited {}, overlap {}, {} jobs · emulation removed {} (engine {}, shadow copies {}, oversleep {}) · modelled driver kept {}</text>"#,
        LEGEND_Y + 20.0,
        offload.busy,
        offload.waited,
        offload.overlap(),
        offload.jobs,
        offload.removed.total(),
        offload.removed.engine,
        offload.removed.shadow_copies,
        offload.removed.oversleep,
        offload.kept.total(),
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

/// An op's label (`INDEX NAME`) inside its box: whole when the box is
/// wide enough, else the index alone, else none (the tooltip names every
/// box anyway).
fn label(s: &mut String, (x, y): (f64, f64), width: f64, text: &str) {
    let fits = |t: &str| (t.len() as f64) * CHAR_PX + 4.0 <= width;
    let index = text.split(' ').next().unwrap_or(text);
    let text = if fits(text) {
        text
    } else if fits(index) {
        index
    } else {
        return;
    };
    let _ = writeln!(
        s,
        r#"<text class="op-label" x="{:.1}" y="{:.1}" font-size="10" fill="white">{}</text>"#,
        x + 2.0,
        y + LANE_H / 2.0 + 4.0,
        escape(text)
    );
}

/// The cycle axis: a line under the lanes and a tick at each multiple of
/// a round step (1, 2 or 5 times a power of ten) that gives 4 to 10 ticks.
fn axis(s: &mut String, end: u64, scale: f64) {
    let _ = writeln!(
        s,
        r##"<line class="axis" x1="{LEFT}" y1="{AXIS_Y}" x2="{}" y2="{AXIS_Y}" stroke="#555"/>"##,
        LEFT + end as f64 * scale
    );
    let step = tick_step(end);
    let mut tick = 0;
    while tick <= end {
        let x = LEFT + tick as f64 * scale;
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{AXIS_Y}" x2="{x:.1}" y2="{}" stroke="#555"/><text class="tick" x="{x:.1}" y="{}" font-size="9" text-anchor="middle">{}</text>"##,
            AXIS_Y + 4.0,
            AXIS_Y + 14.0,
            super::thousands(tick)
        );
        tick += step;
    }
}

/// The round tick spacing for an axis from 0 to `end` cycles.
pub(super) fn tick_step(end: u64) -> u64 {
    let mut power = 1u64;
    loop {
        for m in [1, 2, 5] {
            let step = power.saturating_mul(m);
            if end / step <= 10 {
                return step;
            }
        }
        power = power.saturating_mul(10);
    }
}

/// What each colour means.
fn legend(s: &mut String) {
    let mut x = LEFT;
    for (class, fill, meaning) in KINDS {
        let _ = writeln!(
            s,
            r#"<rect class="legend-{class}" x="{x:.1}" y="{}" width="10" height="10" fill="{fill}"/><text x="{:.1}" y="{}" font-size="10">{meaning}</text>"#,
            LEGEND_Y - 9.0,
            x + 14.0,
            LEGEND_Y
        );
        x += 14.0 + meaning.len() as f64 * CHAR_PX + 14.0;
    }
}
