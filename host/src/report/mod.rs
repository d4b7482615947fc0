//! Reports of a run, for CI and for people: `junit.xml`, `summary.json` and
//! a self-contained `report.html`, rewritten in a report folder as each
//! board finishes.
//!
//! ```no_run
//! # use std::time::Duration;
//! # fn demo(contexts: Vec<hilt::report::ScenarioContext>, pending: Vec<hilt::report::PendingPair>,
//! #         run: &hilt::outcome::BoardRun) -> Result<(), hilt::report::ReportError> {
//! let mut reports = hilt::report::ReportWriter::new("build/reports".as_ref(), "hilt run", contexts, pending)?;
//! reports.record(run, Duration::from_secs(3))?; // after every board
//! let page = reports.finish()?; // once more at the end, with the final elapsed time
//! # Ok(()) }
//! ```
//!
//! One file per format ([`junit`], [`summary`], [`html`]), each a pure
//! function of a [`RunReport`]; the model facts and the host's arena plan a
//! report shows come in through [`ScenarioContext`], built by the caller.
//! Every file is written by the one [`write_atomic`]: whole to a temporary
//! name and renamed over the old one, so a reader (or a CI step after a crash) sees the previous complete
//! report or the new one, never half of one; and since the files are
//! rewritten after every board, a crash loses only the boards still
//! running, which the reports list as not finished.
//!
//! - `junit.xml` follows the JUnit schema CI systems read (Jenkins' and
//!   Ant's `junit-10.xsd` shape, which GitHub and GitLab reporters accept):
//!   one `<testsuite>` per scenario, one `<testcase>` per board (classname =
//!   scenario, name = board), `<failure type="mismatch">` for wrong outputs,
//!   `<error>` for runs that could not finish, `<skipped>` for boards that
//!   had not reported yet, and the cycle figures and firmware log in
//!   `<system-out>`. `host/tests/data/junit-10-strict.xsd` pins the shape.
//! - `summary.json`: `{title, started_at, elapsed_seconds, hostname, totals,
//!   runs: [BoardRun + wall_seconds], pending: [{scenario, board}]}`, each
//!   run's `arena` as `{capacity, head, tail, used}` and each step's
//!   `op_cycles` as `[{index, name, cycles}]` (see [`summary`]).
//! - `report.html`: failures first, one card per scenario × board with its
//!   status, arena figures, the host's arena plan drawn over time
//!   ([`crate::svg::render_svg`]) and per-op cycle bars; no external assets.

mod atomic;
mod defmt;
pub mod html;
pub mod junit;
pub mod summary;
#[cfg(test)]
mod tests;
mod timeline;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

pub use self::atomic::write_atomic;
pub use self::html::html;
pub use self::junit::junit_xml;
pub use self::summary::summary_json;
use crate::config::scenario::Scenario;
use crate::gate::Verdict;
use crate::layout::LayoutReport;
use crate::outcome::{BoardRun, Outcome};

/// The JUnit file's name in the report folder.
pub const JUNIT_FILE: &str = "junit.xml";
/// The JSON summary's name in the report folder.
pub const SUMMARY_FILE: &str = "summary.json";
/// The HTML page's name in the report folder.
pub const HTML_FILE: &str = "report.html";

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The report folder could not be made.
    #[error("cannot create the report folder {path}: {source}")]
    CreateDir {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A report file could not be written or renamed into place.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The summary could not be encoded.
    #[error("cannot encode {SUMMARY_FILE}: {0}")]
    Json(#[from] serde_json::Error),
}

/// What the reports show of a scenario beside its runs.
#[derive(Debug, Clone)]
pub struct ScenarioContext {
    /// Scenario name.
    pub name: String,
    /// Its one line for people.
    pub description: String,
    /// The model file.
    pub model: PathBuf,
    /// Operator names in execution order (empty when the model is unreadable).
    pub op_names: Vec<String>,
    /// Tensor names by index (empty when the model is unreadable): they
    /// label the buffers of the plan a board reports.
    pub tensor_names: Vec<String>,
    /// The host's plan of the model's arena with the scenario's planner
    /// (the same planner code the firmware runs), or why there is none.
    pub layout: Result<LayoutReport, String>,
}

impl ScenarioContext {
    /// The context of `scenario`, from facts its caller read and planned:
    /// the model's operator and tensor names (empty when unreadable: names
    /// only label figures) and the host's plan of its arena (or why there is
    /// none). The reports read no model and plan nothing themselves.
    pub fn new(
        scenario: &Scenario,
        op_names: Vec<String>,
        tensor_names: Vec<String>,
        layout: Result<LayoutReport, String>,
    ) -> Self {
        ScenarioContext {
            name: scenario.name.clone(),
            description: scenario.description.clone(),
            model: readable_path(&scenario.model),
            op_names,
            tensor_names,
            layout,
        }
    }
}

/// `path` without `..` detours, relative to the current folder when inside
/// it: reports are read on other machines, where this host's absolute
/// paths mean nothing.
fn readable_path(path: &Path) -> PathBuf {
    let Ok(full) = std::fs::canonicalize(path) else {
        return path.to_path_buf();
    };
    std::env::current_dir()
        .and_then(std::fs::canonicalize)
        .ok()
        .and_then(|here| full.strip_prefix(here).ok().map(Path::to_path_buf))
        .unwrap_or(full)
}

/// A finished board run and the wall time it took.
#[derive(Debug, Clone, Serialize)]
pub struct TimedRun {
    /// What the board produced.
    #[serde(flatten)]
    pub run: BoardRun,
    /// Wall seconds from the board's turn to its result.
    pub wall_seconds: f64,
}

/// A (scenario, board) pair that has not reported yet.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct PendingPair {
    /// Scenario name.
    pub scenario: String,
    /// Board name.
    pub board: String,
}

/// Counts over a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Pairs in the run: finished or not.
    pub pairs: usize,
    /// Runs whose every output matched.
    pub passed: usize,
    /// Runs that finished with a wrong output.
    pub mismatched: usize,
    /// Runs that could not finish.
    pub errors: usize,
    /// Pairs that have not reported yet.
    pub pending: usize,
}

/// Everything the reports show, at one moment of a run.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// Heading, e.g. "hilt run (shard 1/2)".
    pub title: String,
    /// When the run started.
    pub started: SystemTime,
    /// Wall time since then.
    pub elapsed: Duration,
    /// The host that ran the boards (board farms have many).
    pub hostname: Option<String>,
    /// Per scenario, by name.
    pub scenarios: BTreeMap<String, ScenarioContext>,
    /// Finished runs, in the order they finished.
    pub runs: Vec<TimedRun>,
    /// Pairs still to report.
    pub pending: Vec<PendingPair>,
}

impl RunReport {
    /// The counts the reports lead with.
    pub fn totals(&self) -> Totals {
        let count =
            |f: fn(&Outcome) -> bool| self.runs.iter().filter(|r| f(&r.run.outcome)).count();
        Totals {
            pairs: self.runs.len() + self.pending.len(),
            passed: count(|o| matches!(o, Outcome::Passed)),
            mismatched: count(|o| matches!(o, Outcome::Mismatch(_))),
            errors: count(|o| matches!(o, Outcome::Error(_))),
            pending: self.pending.len(),
        }
    }

    /// Finished runs by (scenario, board), so files diff cleanly between runs.
    fn sorted_runs(&self) -> Vec<&TimedRun> {
        let mut runs: Vec<&TimedRun> = self.runs.iter().collect();
        runs.sort_by(|a, b| (&a.run.scenario, &a.run.board).cmp(&(&b.run.scenario, &b.run.board)));
        runs
    }
}

/// Keeps a run's report folder up to date as boards finish.
#[derive(Debug)]
pub struct ReportWriter {
    dir: PathBuf,
    clock: Instant,
    report: RunReport,
}

impl ReportWriter {
    /// Creates `dir` and writes the reports of a run that has not started:
    /// every pair pending, each scenario shown with the context its caller
    /// built. Fails before any board runs when `dir` is not writable, rather
    /// than after an hour of boards.
    pub fn new(
        dir: &Path,
        title: &str,
        scenarios: Vec<ScenarioContext>,
        mut pending: Vec<PendingPair>,
    ) -> Result<Self, ReportError> {
        std::fs::create_dir_all(dir).map_err(|source| ReportError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
        pending.sort();
        let mut writer = ReportWriter {
            dir: dir.to_path_buf(),
            clock: Instant::now(),
            report: RunReport {
                title: title.to_string(),
                started: SystemTime::now(),
                elapsed: Duration::ZERO,
                hostname: hostname(),
                scenarios: scenarios.into_iter().map(|s| (s.name.clone(), s)).collect(),
                runs: Vec::new(),
                pending,
            },
        };
        writer.write()?;
        Ok(writer)
    }

    /// Adds a finished run and rewrites every file.
    pub fn record(&mut self, run: &BoardRun, wall: Duration) -> Result<(), ReportError> {
        if let Some(i) = self
            .report
            .pending
            .iter()
            .position(|p| p.scenario == run.scenario && p.board == run.board)
        {
            self.report.pending.remove(i);
        }
        self.report.runs.push(TimedRun {
            run: run.clone(),
            wall_seconds: wall.as_secs_f64(),
        });
        self.write()
    }

    /// Rewrites every file with the elapsed time so far.
    pub fn write(&mut self) -> Result<(), ReportError> {
        self.report.elapsed = self.clock.elapsed();
        let summary = summary_json(&self.report)?;
        write_atomic(&self.dir.join(JUNIT_FILE), &junit_xml(&self.report))?;
        write_atomic(&self.dir.join(SUMMARY_FILE), &summary)?;
        write_atomic(&self.dir.join(HTML_FILE), &html(&self.report))
    }

    /// Writes the final files (with the whole run's elapsed time) and
    /// returns the HTML page's path, for the user to open.
    pub fn finish(&mut self) -> Result<PathBuf, ReportError> {
        self.write()?;
        Ok(self.dir.join(HTML_FILE))
    }

    /// The report as it stands.
    pub fn report(&self) -> &RunReport {
        &self.report
    }

    /// The report folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// `run` as `hilt gate` judged it, for the reports: a changed or missing
/// snapshot fails its test case as a wrong output would (CI then shows
/// what moved), and a snapshot that could not be written is an error.
pub fn gated(run: &BoardRun, verdict: &Verdict) -> BoardRun {
    let mut judged = run.clone();
    if judged.outcome == Outcome::Passed {
        match verdict {
            Verdict::Unchanged | Verdict::Faster(_) => {}
            Verdict::New => {
                judged.outcome = Outcome::Mismatch(format!(
                    "{}; {}",
                    crate::gate::SNAPSHOT_NEW,
                    crate::gate::accept_hint(&run.scenario, &run.board, None)
                ));
            }
            Verdict::Changed(diffs) => {
                judged.outcome = Outcome::Mismatch(crate::gate::changed_message(
                    &run.scenario,
                    &run.board,
                    diffs,
                ));
            }
            Verdict::RunFailed(message) => judged.outcome = Outcome::Error(message.clone()),
            Verdict::Drifted(why) => {
                judged.outcome = Outcome::Mismatch(format!("{}{why}", crate::gate::DRIFTED));
            }
        }
    }
    judged
}

pub(crate) fn hostname() -> Option<String> {
    let name = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())?;
    let name = name.trim();
    (!name.is_empty()).then(|| name.to_string())
}

/// `2024-05-01T12:34:56` in UTC (the JUnit `timestamp` form, no zone).
pub(crate) fn utc_timestamp(at: SystemTime) -> String {
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Text for XML and HTML content and attribute values: markup characters
/// escaped, line breaks kept as character references (attributes would
/// fold them into spaces), and characters XML 1.0 forbids (a garbled
/// firmware log can hold any byte) spelled out as `\xNN`, since one such
/// character makes the whole file unreadable to every CI parser.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {
                let _ = write!(out, "\\x{:02X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Element text: as [`escape`], but with real line breaks so logs read
/// well in a text editor.
fn escape_text(text: &str) -> String {
    escape(text).replace("&#10;", "\n")
}

/// A count with thousands separators (`14,146,280`), as every table of
/// hilt prints counts.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Seconds with three decimals. Never negative, not even `-0.000` (an empty
/// `f64` sum is -0.0), which JUnit readers reject.
fn seconds(value: f64) -> String {
    format!("{:.3}", if value > 0.0 { value } else { 0.0 })
}

fn op_name(context: Option<&ScenarioContext>, op: usize) -> &str {
    context
        .and_then(|c| c.op_names.get(op))
        .map_or("?", String::as_str)
}

/// A run's status in one word: `OFFLINE` for a board that never answered,
/// `FLAKY` for a pass after a failure, else its outcome's.
fn run_status_word(run: &BoardRun) -> &'static str {
    if run.offline {
        "OFFLINE"
    } else if run.flaky.is_some() {
        "FLAKY"
    } else {
        status_word(&run.outcome)
    }
}

fn status_word(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Passed => "PASS",
        // A gated run whose outputs matched but whose snapshot moved.
        Outcome::Mismatch(m) if m.starts_with(crate::gate::SNAPSHOT_CHANGED) => "CHANGED",
        Outcome::Mismatch(m) if m.starts_with(crate::gate::SNAPSHOT_NEW) => "NEW",
        Outcome::Mismatch(m) if m.starts_with(crate::gate::DRIFTED) => "DRIFT",
        Outcome::Mismatch(_) => "MISMATCH",
        Outcome::Error(_) => "ERROR",
    }
}
