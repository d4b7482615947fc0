//! `hilt history --format html`: one self-contained page (no script, no
//! fetched asset) with, per (scenario, board), a plot of the run's figure
//! and of each op's over the runs, oldest to newest, and the table of runs
//! with the op that moved and the commit it moved at.

use std::fmt::Write as _;

use super::history::{HistoryEntry, Moved, PairHistory, thousands};
use crate::report::escape;

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 220.0;
const MARGIN: f64 = 48.0;
/// Ops drawn per plot: the ones with the largest figures in the last run
/// (the rest would be lines along the floor).
const PLOTTED_OPS: usize = 8;
const COLOURS: [&str; PLOTTED_OPS] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

/// The page.
pub fn page(pairs: &[PairHistory], title: &str) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}td.l{{text-align:left}}\
         .FLAKY{{background:#fff3cd}}.ERROR,.MISMATCH{{background:#f8d7da}}</style></head><body>\n\
         <h1>{}</h1>\n",
        escape(title),
        escape(title)
    );
    if pairs.is_empty() {
        s.push_str("<p>No runs recorded that match.</p>\n");
    }
    for pair in pairs {
        let _ = writeln!(
            s,
            "<h2 id=\"{}@{}\">{} @ {}</h2>\n<p>{} runs, {} flaky.</p>",
            escape(&pair.scenario),
            escape(&pair.board),
            escape(&pair.scenario),
            escape(&pair.board),
            pair.runs.len(),
            pair.flaky_runs
        );
        s.push_str(&plot(&pair.runs));
        s.push_str(&runs_table(&pair.runs));
    }
    s.push_str("</body></html>\n");
    s
}

/// The figure of every run, and of its largest ops, as lines over the runs.
fn plot(runs: &[HistoryEntry]) -> String {
    let mut series: Vec<(String, Vec<Option<u64>>)> = vec![(
        "whole invoke".to_string(),
        runs.iter().map(HistoryEntry::figure).collect(),
    )];
    if let Some(last) = runs.last() {
        let mut ops: Vec<_> = last.ops.iter().collect();
        ops.sort_by_key(|o| std::cmp::Reverse(o.figure().unwrap_or(0)));
        for op in ops.into_iter().take(PLOTTED_OPS - 1) {
            let values = runs
                .iter()
                .map(|r| {
                    r.ops
                        .iter()
                        .find(|o| o.op == op.op)
                        .and_then(|o| o.figure())
                })
                .collect();
            series.push((format!("op {} {}", op.op, op.name), values));
        }
    }
    let high = series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten())
        .copied()
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let step = if runs.len() > 1 {
        (WIDTH - 2.0 * MARGIN) / (runs.len() - 1) as f64
    } else {
        0.0
    };
    let x = |k: usize| MARGIN + step * k as f64;
    let y = |v: u64| HEIGHT - MARGIN + (v as f64 / high) * (2.0 * MARGIN - HEIGHT);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{}\" \
         role=\"img\"><line x1=\"{MARGIN}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\"/>\
         <text x=\"4\" y=\"{}\" font-size=\"10\">{}</text><text x=\"4\" y=\"{}\" font-size=\"10\">0</text>",
        HEIGHT + 16.0 * series.len() as f64,
        HEIGHT - MARGIN,
        WIDTH - MARGIN,
        HEIGHT - MARGIN,
        MARGIN,
        thousands(high as u64),
        HEIGHT - MARGIN
    );
    for (k, run) in runs.iter().enumerate() {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" font-size=\"9\" text-anchor=\"middle\">{}</text>",
            x(k),
            HEIGHT - MARGIN + 14.0,
            escape(run.commit.get(..8).unwrap_or(&run.commit))
        );
    }
    for (i, (label, values)) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let points: Vec<String> = values
            .iter()
            .enumerate()
            .filter_map(|(k, v)| v.map(|v| format!("{:.1},{:.1}", x(k), y(v))))
            .collect();
        let _ = write!(
            svg,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"{}\" points=\"{}\"><title>{}</title></polyline>",
            if i == 0 { 2.5 } else { 1.2 },
            points.join(" "),
            escape(label)
        );
        for (k, v) in values.iter().enumerate() {
            if let Some(v) = v {
                let _ = write!(
                    svg,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{colour}\"><title>{}: {} at {}</title></circle>",
                    x(k),
                    y(*v),
                    escape(label),
                    thousands(*v),
                    escape(&runs[k].commit)
                );
            }
        }
        let _ = write!(
            svg,
            "<rect x=\"{MARGIN}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{colour}\"/>\
             <text x=\"{}\" y=\"{:.1}\" font-size=\"11\">{}</text>",
            HEIGHT + 16.0 * i as f64 - 6.0,
            MARGIN + 14.0,
            HEIGHT + 16.0 * i as f64 + 3.0,
            escape(label)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn runs_table(runs: &[HistoryEntry]) -> String {
    let mut s = String::from(
        "<table><tr><th>started (UTC)</th><th>commit</th><th>command</th><th>host</th>\
         <th>outcome</th><th>instructions</th><th>cycles</th><th>arena used</th>\
         <th>moved since the run before</th></tr>\n",
    );
    let figure = |v: Option<u64>| v.map_or_else(|| "-".to_string(), thousands);
    for r in runs.iter().rev() {
        let mut outcome = r.verdict().to_string();
        if let Some(first) = &r.flaky {
            let _ = write!(outcome, " (after {} attempts; first: {first})", r.attempts);
        } else if !r.message.is_empty() {
            let _ = write!(outcome, ": {}", r.message);
        }
        let _ = writeln!(
            s,
            "<tr class=\"{}\"><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td>\
             <td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            r.verdict(),
            escape(&r.started_at),
            escape(&r.commit),
            escape(&r.command),
            escape(&r.host),
            escape(&outcome),
            figure(r.instructions),
            figure(r.cycles),
            figure(r.arena_used),
            escape(
                &r.moved
                    .as_ref()
                    .map_or_else(|| "-".to_string(), Moved::describe)
            )
        );
    }
    s.push_str("</table>\n");
    s
}
