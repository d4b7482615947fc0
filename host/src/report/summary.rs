//! `summary.json`: the whole report as data, for scripts and dashboards.
//!
//! Every figure is named where it stands, so a reader needs no key: the
//! arena is `{capacity, head, tail, used}` (not the firmware's four-number
//! message), and each step's `op_cycles` is a list of `{index, name,
//! cycles}` with the operator's builtin name (`CONV_2D`) from the model.

use serde::Serialize;

use super::{PendingPair, RunReport, TimedRun, Totals, utc_timestamp};

#[derive(Serialize)]
struct Summary<'a> {
    title: &'a str,
    started_at: String,
    elapsed_seconds: f64,
    hostname: Option<&'a str>,
    totals: Totals,
    runs: Vec<serde_json::Value>,
    pending: &'a [PendingPair],
}

/// The arena figures a board reports, by name.
#[derive(Serialize)]
struct NamedArena {
    capacity: u32,
    head: u32,
    tail: u32,
    used: u32,
}

/// One operator's cycles in a step, with its index and name (`null` when
/// the model could not be read or has no such operator).
#[derive(Serialize)]
struct OpCycles<'a> {
    index: usize,
    name: Option<&'a str>,
    cycles: u32,
}

/// The JSON summary of `report`.
pub fn summary_json(report: &RunReport) -> Result<String, serde_json::Error> {
    let runs = report
        .sorted_runs()
        .into_iter()
        .map(|run| named_run(report, run))
        .collect::<Result<_, _>>()?;
    let summary = Summary {
        title: &report.title,
        started_at: format!("{}Z", utc_timestamp(report.started)),
        elapsed_seconds: report.elapsed.as_secs_f64(),
        hostname: report.hostname.as_deref(),
        totals: report.totals(),
        runs,
        pending: &report.pending,
    };
    Ok(serde_json::to_string_pretty(&summary)? + "\n")
}

/// `run` as the summary shows it: the run's own fields, with the arena
/// and every step's per-op cycles named (the op names from its scenario's
/// model, as the other reports label them).
fn named_run(report: &RunReport, timed: &TimedRun) -> Result<serde_json::Value, serde_json::Error> {
    let run = &timed.run;
    let mut value = serde_json::to_value(timed)?;
    if let Some([capacity, head, tail, used]) = run.arena {
        value["arena"] = serde_json::to_value(NamedArena {
            capacity,
            head,
            tail,
            used,
        })?;
    }
    let names = report
        .scenarios
        .get(&run.scenario)
        .map_or(&[][..], |c| c.op_names.as_slice());
    for (i, step) in run.steps.iter().enumerate() {
        let ops: Vec<OpCycles<'_>> = step
            .op_cycles
            .iter()
            .enumerate()
            .map(|(index, &cycles)| OpCycles {
                index,
                name: names.get(index).map(String::as_str),
                cycles,
            })
            .collect();
        value["steps"][i]["op_cycles"] = serde_json::to_value(ops)?;
    }
    Ok(value)
}
