//! `report.html`: one self-contained page for people — failures first, a
//! card per scenario × board with its arena figures, the arena plan drawn
//! over time and per-op cycle bars. No external assets.

use std::fmt::Write as _;

use super::{
    RunReport, ScenarioContext, TimedRun, escape, escape_text, op_name, run_status_word, seconds,
    thousands, utc_timestamp,
};
use crate::layout::{BufferRow, Coverage, LayoutReport};
use crate::outcome::{BoardRun, Outcome};
use crate::svg::render_svg;

const STYLE: &str = r#"
:root { --pass: #1a7f37; --fail: #cf222e; --error: #bc4c00; --pending: #6e7781; }
* { box-sizing: border-box; }
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1f2328; background: #f6f8fa; }
header { background: #fff; border-bottom: 1px solid #d0d7de; padding: 16px 24px; }
h1 { font-size: 22px; margin: 0 0 4px; }
.meta { color: #57606a; margin: 2px 0; }
.chips { margin: 10px 0 6px; }
.chip { display: inline-block; padding: 3px 12px; border-radius: 12px; margin-right: 6px; color: #fff; font-weight: 600; }
.chip.zero { opacity: 0.35; }
.pass { --c: var(--pass); } .mismatch { --c: var(--fail); } .error { --c: var(--error); } .pending { --c: var(--pending); }
.chip, .badge { background: var(--c); }
table.index { border-collapse: collapse; margin-top: 8px; }
table.index td, table.index th { padding: 2px 12px 2px 0; text-align: left; }
table.index td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.index a { color: inherit; }
main { padding: 16px 24px; }
.card { background: #fff; border: 1px solid #d0d7de; border-left: 6px solid var(--c); border-radius: 6px; margin-bottom: 16px; padding: 12px 16px; }
.card h2 { font-size: 17px; margin: 0 0 6px; }
.badge { color: #fff; border-radius: 4px; padding: 1px 8px; font-size: 13px; margin-right: 8px; vertical-align: 2px; }
.on { color: #57606a; font-weight: normal; }
.message { background: #fff8f8; border: 1px solid #ffcecb; border-radius: 4px; padding: 6px 10px; white-space: pre-wrap; overflow-wrap: anywhere; max-height: 24em; overflow: auto; font-family: ui-monospace, monospace; font-size: 12.5px; }
.error .message { background: #fff8f0; border-color: #ffd8b5; }
.panels { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 16px; margin-top: 8px; }
.panel h3 { font-size: 14px; margin: 4px 0 6px; }
.picture { max-width: 760px; }
.picture svg { width: 100%; height: auto; border: 1px solid #d0d7de; }
.picture h3 { font-size: 14px; margin: 12px 0 6px; }
.arena { position: relative; height: 18px; background: #eaeef2; border-radius: 3px; overflow: hidden; margin: 4px 0 2px; }
.arena .head { position: absolute; left: 0; top: 0; bottom: 0; background: #4c78a8; min-width: 2px; }
.arena .tail { position: absolute; right: 0; top: 0; bottom: 0; background: #8e6bbf; min-width: 2px; }
.legend span { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 10px; vertical-align: -1px; }
.ops { display: grid; grid-template-columns: 2.6em minmax(6em, 13em) 1fr 6.5em 3.6em; gap: 2px 8px; align-items: center; font-size: 12.5px; }
.ops .idx, .ops .cyc, .ops .pct { text-align: right; font-variant-numeric: tabular-nums; }
.ops .name { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; font-family: ui-monospace, monospace; }
.ops .track { background: #eaeef2; height: 12px; border-radius: 2px; }
.ops .bar { background: #4c78a8; height: 12px; border-radius: 2px; min-width: 1px; }
.ops .bar.top { background: #1d3f66; }
.ops .head-row { color: #57606a; font-weight: 600; }
table.steps { border-collapse: collapse; font-size: 12.5px; }
table.steps td, table.steps th { border-bottom: 1px solid #eaeef2; padding: 2px 10px 2px 0; text-align: left; }
pre.log { background: #f6f8fa; padding: 8px; overflow-x: auto; font-size: 12px; margin: 4px 0; }
details summary { cursor: pointer; color: #0969da; margin-top: 6px; }
.none { color: #57606a; font-style: italic; }
table.defmt { border-collapse: collapse; font: 12px ui-monospace, monospace; margin: 4px 0; }
table.defmt td, table.defmt th { padding: 1px 10px 1px 0; text-align: left; vertical-align: top; }
table.defmt .ts { text-align: right; font-variant-numeric: tabular-nums; color: #57606a; }
table.defmt .lvl-warn .lvl { color: var(--error); } table.defmt .lvl-error .lvl { color: var(--fail); font-weight: 600; }
.defmt-problem { color: var(--error); font-family: ui-monospace, monospace; font-size: 12px; margin: 2px 0; }
"#;

fn outcome_class(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Passed => "pass",
        Outcome::Mismatch(_) => "mismatch",
        Outcome::Error(_) => "error",
    }
}

/// Errors, then mismatches, then passes: what needs a look comes first.
fn severity(outcome: &Outcome) -> u8 {
    match outcome {
        Outcome::Error(_) => 0,
        Outcome::Mismatch(_) => 1,
        Outcome::Passed => 2,
    }
}

fn anchor(scenario: &str, board: &str) -> String {
    format!("{scenario}--{board}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn arena_bar(run: &BoardRun) -> String {
    let Some([capacity, head, tail, used]) = run.arena else {
        return r#"<p class="none">No arena figures: the firmware did not report them.</p>"#.into();
    };
    let pct = |part: u32| {
        if capacity == 0 {
            0.0
        } else {
            100.0 * f64::from(part) / f64::from(capacity)
        }
    };
    format!(
        r##"<div class="arena" title="head {head} B, tail {tail} B of {capacity} B"><div class="head" style="width:{:.2}%"></div><div class="tail" style="width:{:.2}%"></div></div>
<div class="meta legend">{} of {} B used ({:.1} %)<span style="background:#4c78a8"></span>head {} B<span style="background:#8e6bbf"></span>tail {} B</div>"##,
        pct(head),
        pct(tail),
        thousands(u64::from(used)),
        thousands(u64::from(capacity)),
        pct(used),
        thousands(u64::from(head)),
        thousands(u64::from(tail)),
    )
}

/// The first step's ops as bars: the QEMU plugin's exact instructions
/// when it observed the run (with its estimated cycles), else the
/// firmware's per-op cycles.
fn op_bars(run: &BoardRun, context: Option<&ScenarioContext>) -> String {
    let Some(step) = run.steps.first() else {
        return r#"<p class="none">No cycle figures: the board stopped before the first step finished.</p>"#.into();
    };
    let (figures, unit, total): (Vec<u64>, &str, u64) = match &step.observed {
        Some(seen) => (
            seen.ops.iter().map(|o| o.instructions).collect(),
            "instructions",
            seen.instructions,
        ),
        None => (
            step.op_cycles.iter().map(|&c| u64::from(c)).collect(),
            "cycles",
            step.total_cycles,
        ),
    };
    let largest = figures.iter().copied().max().unwrap_or(0).max(1);
    let sum: u64 = figures.iter().sum();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<h3>Per-op {unit} ({} step {}{}, {} {unit} in all)</h3>",
        escape(&step.case),
        step.step,
        if run.steps.len() > 1 {
            format!(", first of {} steps", run.steps.len())
        } else {
            String::new()
        },
        thousands(total)
    );
    if let Some(seen) = &step.observed {
        let _ = writeln!(
            s,
            "<p>Counted by hilt's QEMU plugin, exactly: {} estimated cycles on {}, stack high-water {} B, {} access violations.</p>",
            thousands(seen.estimated_cycles),
            escape(run.timing.as_deref().unwrap_or("the board's core")),
            thousands(seen.stack_high_water),
            run.access_violations.unwrap_or(0)
        );
    }
    if figures.is_empty() {
        s.push_str(r#"<p class="none">The firmware reported no per-op figures.</p>"#);
        return s;
    }
    let _ = write!(
        s,
        r#"<div class="ops"><span class="idx head-row">op</span><span class="head-row">name</span><span class="head-row">relative to the largest</span><span class="cyc head-row">{unit}</span><span class="pct head-row">share</span>"#
    );
    s.push('\n');
    for (op, &figure) in figures.iter().enumerate() {
        let name = op_name(context, op);
        let share = if sum == 0 {
            0.0
        } else {
            100.0 * figure as f64 / sum as f64
        };
        let _ = writeln!(
            s,
            r#"<span class="idx">{op}</span><span class="name" title="{name}">{name}</span><div class="track"><div class="bar{}" style="width:{:.2}%"></div></div><span class="cyc">{}</span><span class="pct">{share:.1}%</span>"#,
            if figure == largest { " top" } else { "" },
            100.0 * figure as f64 / largest as f64,
            thousands(figure),
            name = escape(name),
        );
    }
    s.push_str("</div>\n");
    s
}

/// Bytes a buffer takes in the arena: its size rounded up to its alignment,
/// `None` when a (garbled) figure overflows.
fn padded_end(b: &BufferRow) -> Option<u32> {
    let align = b.align.max(1);
    b.size
        .checked_next_multiple_of(align)
        .and_then(|padded| b.offset.checked_add(padded))
}

/// The plan the board committed, as a layout the arena picture draws; `None`
/// when the firmware sent none. Rows whose figures cannot be drawn (zero
/// alignment, offsets past 4 GiB: a garbled report) are left out rather
/// than trusted.
pub(super) fn board_layout(
    run: &BoardRun,
    context: Option<&ScenarioContext>,
) -> Option<LayoutReport> {
    let placement = run.pools.as_ref().map(|p| p.placement(&run.plan));
    let buffers: Vec<BufferRow> = run
        .plan
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let tensor = (b.kind == "tensor").then_some(u32::from(b.index));
            let name = match tensor {
                Some(t) => context
                    .and_then(|c| c.tensor_names.get(t as usize))
                    .filter(|n| !n.is_empty())
                    .cloned()
                    .unwrap_or_else(|| format!("tensor {t}")),
                None => format!("scratch(op {})", b.index),
            };
            BufferRow {
                kind: b.kind,
                tensor,
                op: tensor.is_none().then_some(u32::from(b.index)),
                name,
                first_step: u32::from(b.first_step),
                last_step: u32::from(b.last_step.max(b.first_step)),
                natural_last_step: u32::from(b.last_step.max(b.first_step)),
                size: b.size,
                align: b.align.max(1),
                offset: b.offset,
                held: None,
                pool: run
                    .pools
                    .as_ref()
                    .zip(placement.as_ref().and_then(|at| at[i]))
                    .map(|(p, k)| p.pools[k].name.clone()),
            }
        })
        .filter(|b| padded_end(b).is_some())
        .collect();
    if buffers.is_empty() {
        return None;
    }
    let end = buffers.iter().filter_map(padded_end).max().unwrap_or(0);
    let steps = buffers.iter().map(|b| b.last_step + 1).max().unwrap_or(0);
    let lower_bound = (0..steps)
        .map(|step| {
            buffers
                .iter()
                .filter(|b| b.first_step <= step && step <= b.last_step)
                .map(|b| u64::from(b.size.next_multiple_of(b.align)))
                .sum::<u64>()
        })
        .max()
        .unwrap_or(0)
        .min(u64::from(u32::MAX)) as u32;
    let (head, tail) = run.arena.map_or((end, 0), |a| (a[1].max(end), a[2]));
    Some(LayoutReport {
        planner: context
            .and_then(|c| c.layout.as_ref().ok())
            .map_or("board's", |l| l.planner),
        covers: Coverage::Interpreter,
        board: Some(run.board.clone()),
        capacity: run.arena.map(|a| a[0]),
        head,
        tail,
        total: head.saturating_add(tail),
        setup: 0,
        kept: None,
        lower_bound,
        constants: 0,
        constant_image: Vec::new(),
        lean: None,
        pools: run
            .pools
            .as_ref()
            .zip(placement.as_ref())
            .map_or_else(Vec::new, |(p, at)| pool_rows(run, p, at)),
        buffers,
    })
}

/// A split arena's pools as the picture draws them, from the board's plan
/// and the pool each of its buffers is in.
fn pool_rows(
    run: &BoardRun,
    pools: &crate::outcome::RunPools,
    placement: &[Option<usize>],
) -> Vec<crate::layout::PoolRow> {
    let head_start = pools.head_start(&run.plan);
    let (capacity, tail) = run.arena.map_or((0, 0), |a| (a[0], a[2]));
    let heads = pools.heads(&run.plan, placement);
    pools
        .pools
        .iter()
        .zip(heads)
        .enumerate()
        .map(|(k, (p, head))| crate::layout::PoolRow {
            name: p.name.clone(),
            start: p.start,
            head_offset: p.start.saturating_sub(head_start),
            size: p.size,
            reach: p.reach.clone(),
            planned: p.planned,
            head,
            tail: crate::layout::tail_in(p.start, p.size, capacity, tail),
            buffers: placement.iter().filter(|at| **at == Some(k)).count() as u32,
        })
        .collect()
}

/// The arena over time: the plan the board committed when it reported one,
/// else the host's plan of the same model with the same planner.
pub(super) fn arena_picture(run: &BoardRun, context: Option<&ScenarioContext>) -> String {
    let model = context.map_or_else(
        || run.scenario.clone(),
        |c| {
            c.model.file_name().map_or_else(
                || c.model.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        },
    );
    let host = context.map(|c| &c.layout);
    if let Some(board) = board_layout(run, context) {
        let agreement = match host {
            Some(Ok(h)) if h.head == board.head => "; host plan: the same".to_string(),
            Some(Ok(h)) => format!("; host plan: {} B", thousands(u64::from(h.head))),
            _ => String::new(),
        };
        return format!(
            "<h3>Arena plan as the board committed it (head {} B{agreement})</h3>\n{}",
            thousands(u64::from(board.head)),
            render_svg(&board, &format!("{model} on {}", run.board))
        );
    }
    match host {
        Some(Ok(layout)) => format!(
            "<h3>Arena plan over time (host plan: head {} B, tail {} B; the board sent none)</h3>\n{}",
            thousands(u64::from(layout.head)),
            thousands(u64::from(layout.tail)),
            render_svg(layout, &model)
        ),
        Some(Err(why)) => format!(
            r#"<h3>Arena plan</h3><p class="none">No plan: {}</p>"#,
            escape(why)
        ),
        None => r#"<p class="none">No arena plan: the scenario is unknown.</p>"#.into(),
    }
}

fn run_card(run: &TimedRun, context: Option<&ScenarioContext>) -> String {
    let r = &run.run;
    let class = outcome_class(&r.outcome);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<section class="card {class}" id="{}"><h2><span class="badge">{}</span>{} <span class="on">on</span> {}</h2>"#,
        anchor(&r.scenario, &r.board),
        run_status_word(r),
        escape(&r.scenario),
        escape(&r.board)
    );
    if let Outcome::Mismatch(m) | Outcome::Error(m) = &r.outcome {
        let _ = writeln!(s, r#"<div class="message">{}</div>"#, escape_text(m));
    }
    if let Some(first) = &r.flaky {
        let _ = writeln!(
            s,
            r#"<div class="message">FLAKY: passed on attempt {} of {}; the first failed: {}</div>"#,
            r.attempts,
            r.attempts,
            escape_text(first)
        );
    }
    let _ = writeln!(
        s,
        r#"<p class="meta">{}{} · {} step{} · {} s wall</p>"#,
        context.map_or(String::new(), |c| format!(
            "{} · {} · ",
            escape(&c.description),
            escape(&c.model.display().to_string())
        )),
        escape(&r.board),
        r.steps.len(),
        if r.steps.len() == 1 { "" } else { "s" },
        seconds(run.wall_seconds)
    );
    s.push_str("<div class=\"panels\">\n<div class=\"panel\">\n<h3>Arena (reported by the firmware)</h3>\n");
    s.push_str(&arena_bar(r));
    s.push('\n');
    if r.steps.len() > 1 || r.steps.iter().any(|st| st.mismatch.is_some()) {
        s.push_str("<h3>Steps</h3><table class=\"steps\"><tr><th>case</th><th>step</th><th>cycles</th><th>outputs</th></tr>\n");
        for step in &r.steps {
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&step.case),
                step.step,
                thousands(step.total_cycles),
                step.mismatch
                    .as_deref()
                    .map_or("match".into(), |m| format!("MISMATCH: {}", escape(m)))
            );
        }
        s.push_str("</table>\n");
    }
    s.push_str("</div>\n<div class=\"panel\">\n");
    s.push_str(&op_bars(r, context));
    s.push_str("</div>\n</div>\n<div class=\"picture\">\n");
    let op_names = context.map_or(&[][..], |c| c.op_names.as_slice());
    if let Some(svg) = r
        .steps
        .first()
        .and_then(|step| super::timeline::timeline_svg(step, op_names))
    {
        s.push_str("<h3>CPU and NPU over the first step</h3>\n");
        s.push_str(&svg);
        if let (Some(alone), Some(first)) = (r.cpu_alone, r.steps.first()) {
            let _ = writeln!(
                s,
                "<p>The CPU alone (the same firmware with offload off): {} cycles; with the engine {} cycles ({:.2}×).</p>",
                thousands(alone),
                thousands(first.total_cycles),
                first.total_cycles as f64 / alone.max(1) as f64
            );
        }
    }
    s.push_str(&arena_picture(r, context));
    s.push_str("</div>\n");
    if r.logs.is_empty() {
        s.push_str("<p class=\"none\">No firmware log lines.</p>\n");
    } else {
        let _ = writeln!(
            s,
            "<details{}><summary>Firmware log ({} line{})</summary><pre class=\"log\">{}</pre></details>",
            if r.outcome == Outcome::Passed {
                ""
            } else {
                " open"
            },
            r.logs.len(),
            if r.logs.len() == 1 { "" } else { "s" },
            escape_text(&r.logs.join("\n"))
        );
    }
    s.push_str(&super::defmt::defmt_section(r));
    s.push_str("</section>\n");
    s
}

/// The self-contained HTML page of `report`.
pub fn html(report: &RunReport) -> String {
    let totals = report.totals();
    let mut runs = report.sorted_runs();
    runs.sort_by_key(|r| severity(&r.run.outcome));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<header>\n<h1>{}</h1>",
        escape(&report.title),
        escape(&report.title)
    );
    let _ = writeln!(
        s,
        r#"<p class="meta">Started {} UTC{} · {} s {} · {} of {} board runs finished</p>"#,
        utc_timestamp(report.started).replace('T', " "),
        report
            .hostname
            .as_deref()
            .map_or(String::new(), |h| format!(" on {}", escape(h))),
        seconds(report.elapsed.as_secs_f64()),
        if report.pending.is_empty() {
            "in all"
        } else {
            "so far"
        },
        report.runs.len(),
        totals.pairs
    );
    s.push_str("<div class=\"chips\">");
    let errors = if totals.errors == 1 {
        "error"
    } else {
        "errors"
    };
    for (count, class, word) in [
        (totals.errors, "error", errors),
        (totals.mismatched, "mismatch", "mismatched"),
        (totals.passed, "pass", "passed"),
        (totals.pending, "pending", "not finished"),
    ] {
        let _ = write!(
            s,
            r#"<span class="chip {class}{}">{count} {word}</span>"#,
            if count == 0 { " zero" } else { "" }
        );
    }
    s.push_str("</div>\n");
    if totals.pairs == 0 {
        s.push_str("<p class=\"none\">Nothing to run here (an empty shard?).</p>\n");
    } else {
        s.push_str("<table class=\"index\"><tr><th>status</th><th>scenario</th><th>board</th><th>cycles (first step)</th><th>arena used</th><th>wall</th></tr>\n");
        for run in &runs {
            let r = &run.run;
            let _ = writeln!(
                s,
                r##"<tr class="{}"><td><span class="badge">{}</span></td><td><a href="#{}">{}</a></td><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{} s</td></tr>"##,
                outcome_class(&r.outcome),
                run_status_word(r),
                anchor(&r.scenario, &r.board),
                escape(&r.scenario),
                escape(&r.board),
                r.steps
                    .first()
                    .map_or("–".into(), |st| thousands(st.total_cycles)),
                r.arena.map_or("–".into(), |a| format!(
                    "{} B",
                    thousands(u64::from(a[3]))
                )),
                seconds(run.wall_seconds)
            );
        }
        for pair in &report.pending {
            let _ = writeln!(
                s,
                r#"<tr class="pending"><td><span class="badge">NOT FINISHED</span></td><td>{}</td><td>{}</td><td class="num">–</td><td class="num">–</td><td class="num">–</td></tr>"#,
                escape(&pair.scenario),
                escape(&pair.board)
            );
        }
        s.push_str("</table>\n");
    }
    s.push_str("</header>\n<main>\n");
    for run in &runs {
        s.push_str(&run_card(run, report.scenarios.get(&run.run.scenario)));
    }
    s.push_str("</main>\n</body>\n</html>\n");
    s
}
