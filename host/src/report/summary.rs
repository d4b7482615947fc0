//! `summary.json`: the whole report as data, for scripts and dashboards.

use serde::Serialize;

use super::{PendingPair, RunReport, TimedRun, Totals, utc_timestamp};

#[derive(Serialize)]
struct Summary<'a> {
    title: &'a str,
    started_at: String,
    elapsed_seconds: f64,
    hostname: Option<&'a str>,
    totals: Totals,
    runs: Vec<&'a TimedRun>,
    pending: &'a [PendingPair],
}

/// The JSON summary of `report`.
pub fn summary_json(report: &RunReport) -> Result<String, serde_json::Error> {
    let summary = Summary {
        title: &report.title,
        started_at: format!("{}Z", utc_timestamp(report.started)),
        elapsed_seconds: report.elapsed.as_secs_f64(),
        hostname: report.hostname.as_deref(),
        totals: report.totals(),
        runs: report.sorted_runs(),
        pending: &report.pending,
    };
    Ok(serde_json::to_string_pretty(&summary)? + "\n")
}
