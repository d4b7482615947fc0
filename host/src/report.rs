//! Reports of a run, for CI and for people: `junit.xml`, `summary.json` and
//! a self-contained `report.html`, rewritten in a report folder as each
//! board finishes.
//!
//! ```no_run
//! # use std::time::Duration;
//! # fn demo(jobs: &[hilt::orchestrate::Job], run: &hilt::runner::BoardRun)
//! #     -> Result<(), hilt::report::ReportError> {
//! let mut reports = hilt::report::ReportWriter::for_jobs("build/reports".as_ref(), "hilt run", jobs)?;
//! reports.record(run, Duration::from_secs(3))?; // after every board
//! let page = reports.finish()?; // once more at the end, with the final elapsed time
//! # Ok(()) }
//! ```
//!
//! Every file is written whole to a temporary name and renamed over the old
//! one, so a reader (or a CI step after a crash) sees the previous complete
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
//!   runs: [BoardRun + wall_seconds], pending: [{scenario, board}]}`.
//! - `report.html`: failures first, one card per scenario × board with its
//!   status, arena figures, the host's arena plan drawn over time
//!   ([`crate::svg::render_svg`]) and per-op cycle bars; no external assets.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::gate::Verdict;
use crate::layout::{BufferRow, Coverage, LayoutOptions, LayoutReport, layout_file};
use crate::orchestrate::Job;
use crate::runner::{BoardRun, Outcome};
use crate::scenario::Scenario;
use crate::svg::render_svg;

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
    /// Reads the scenario's model for its op names and plans its arena.
    pub fn of(scenario: &Scenario) -> Self {
        let options = LayoutOptions {
            planner: scenario.planner,
            ..LayoutOptions::default()
        };
        ScenarioContext {
            name: scenario.name.clone(),
            description: scenario.description.clone(),
            model: readable_path(&scenario.model),
            op_names: op_names(&scenario.model),
            tensor_names: tensor_names(&scenario.model),
            layout: layout_file(&scenario.model, &options).map_err(|e| e.to_string()),
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

/// The model's operator names in execution order, empty when it cannot be
/// read: names only label the figures, so a bad model must not stop a report.
pub fn op_names(model: &Path) -> Vec<String> {
    let Ok(bytes) = std::fs::read(model) else {
        return Vec::new();
    };
    let aligned = crate::host_run::AlignedBytes::new(&bytes);
    match hilt_runtime::model::Model::from_bytes(aligned.as_slice()) {
        Ok(m) => m.operators().map(|op| op.code.to_string()).collect(),
        Err(_) => Vec::new(),
    }
}

/// The model's tensor names by index, empty when it cannot be read.
pub fn tensor_names(model: &Path) -> Vec<String> {
    let Ok(bytes) = std::fs::read(model) else {
        return Vec::new();
    };
    let aligned = crate::host_run::AlignedBytes::new(&bytes);
    match hilt_runtime::model::Model::from_bytes(aligned.as_slice()) {
        Ok(m) => m.tensors().map(|t| t.name.to_string()).collect(),
        Err(_) => Vec::new(),
    }
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
    /// every pair pending. Fails before any board runs when `dir` is not
    /// writable, rather than after an hour of boards.
    pub fn for_jobs(dir: &Path, title: &str, jobs: &[Job]) -> Result<Self, ReportError> {
        let mut scenarios = BTreeMap::new();
        for job in jobs {
            scenarios
                .entry(job.scenario.name.clone())
                .or_insert_with(|| ScenarioContext::of(&job.scenario));
        }
        let pending = jobs
            .iter()
            .map(|j| PendingPair {
                scenario: j.scenario.name.clone(),
                board: j.board.name.clone(),
            })
            .collect();
        Self::new(dir, title, scenarios.into_values().collect(), pending)
    }

    /// [`ReportWriter::for_jobs`] from parts, for callers without [`Job`]s.
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
                judged.outcome = Outcome::Mismatch(
                    "no accepted snapshot: review the .snap.new (cargo insta review)".into(),
                );
            }
            Verdict::Changed(diffs) => {
                judged.outcome =
                    Outcome::Mismatch(format!("snapshot changed: {}", diffs.join("; ")));
            }
            Verdict::RunFailed(message) => judged.outcome = Outcome::Error(message.clone()),
        }
    }
    judged
}

/// Writes `text` to a temporary file beside `path`, flushes it to disk and
/// renames it over `path`: readers see the old file or the new, never a part.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), ReportError> {
    let name = path
        .file_name()
        .map_or_else(|| "report".into(), |n| n.to_string_lossy().into_owned());
    let temp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    result.map_err(|source| {
        let _ = std::fs::remove_file(&temp);
        ReportError::Write {
            path: path.to_path_buf(),
            source,
        }
    })
}

fn hostname() -> Option<String> {
    let name = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())?;
    let name = name.trim();
    (!name.is_empty()).then(|| name.to_string())
}

/// `2024-05-01T12:34:56` in UTC (the JUnit `timestamp` form, no zone).
fn utc_timestamp(at: SystemTime) -> String {
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
fn escape(text: &str) -> String {
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

fn thousands(n: u64) -> String {
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

fn status_word(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Passed => "PASS",
        Outcome::Mismatch(_) => "MISMATCH",
        Outcome::Error(_) => "ERROR",
    }
}

/// The cycle figures and firmware log of one run, as plain text.
fn run_text(run: &BoardRun, context: Option<&ScenarioContext>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} on {}: {}",
        run.scenario,
        run.board,
        status_word(&run.outcome)
    );
    match &run.outcome {
        Outcome::Passed => {}
        Outcome::Mismatch(m) | Outcome::Error(m) => {
            let _ = writeln!(s, "{m}");
        }
    }
    if let Some([capacity, head, tail, used]) = run.arena {
        let _ = writeln!(
            s,
            "arena: {used} of {capacity} bytes used (head {head}, tail {tail})"
        );
    }
    for step in &run.steps {
        let _ = writeln!(
            s,
            "{} step {}: {} cycles{}",
            step.case,
            step.step,
            thousands(step.total_cycles),
            step.mismatch
                .as_deref()
                .map_or(String::new(), |m| format!(" — MISMATCH: {m}"))
        );
        for (op, cycles) in step.op_cycles.iter().enumerate() {
            let _ = writeln!(
                s,
                "  op {op:>3} {:<28} {:>12} cycles",
                op_name(context, op),
                thousands(u64::from(*cycles))
            );
        }
    }
    if !run.logs.is_empty() {
        let _ = writeln!(s, "firmware log:");
        for line in &run.logs {
            let _ = writeln!(s, "  {line}");
        }
    }
    s
}

/// The JUnit XML of `report`.
pub fn junit_xml(report: &RunReport) -> String {
    let totals = report.totals();
    let mut suites: BTreeMap<&str, (Vec<&TimedRun>, Vec<&PendingPair>)> = BTreeMap::new();
    for run in report.sorted_runs() {
        suites.entry(&run.run.scenario).or_default().0.push(run);
    }
    for pair in &report.pending {
        suites.entry(&pair.scenario).or_default().1.push(pair);
    }
    let timestamp = utc_timestamp(report.started);
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        s,
        r#"<testsuites name="{}" tests="{}" failures="{}" errors="{}" time="{}">"#,
        escape(&report.title),
        totals.pairs,
        totals.mismatched,
        totals.errors,
        seconds(report.elapsed.as_secs_f64())
    );
    for (id, (scenario, (runs, pending))) in suites.iter().enumerate() {
        let failures = runs
            .iter()
            .filter(|r| matches!(r.run.outcome, Outcome::Mismatch(_)))
            .count();
        let errors = runs
            .iter()
            .filter(|r| matches!(r.run.outcome, Outcome::Error(_)))
            .count();
        let time: f64 = runs.iter().map(|r| r.wall_seconds).sum();
        let _ = write!(
            s,
            r#"  <testsuite name="{}" tests="{}" failures="{failures}" errors="{errors}" skipped="{}" time="{}" timestamp="{timestamp}" id="{id}""#,
            escape(scenario),
            runs.len() + pending.len(),
            pending.len(),
            seconds(time),
        );
        if let Some(host) = &report.hostname {
            let _ = write!(s, r#" hostname="{}""#, escape(host));
        }
        s.push_str(">\n");
        let context = report.scenarios.get(*scenario);
        if let Some(c) = context {
            let _ = writeln!(
                s,
                "    <properties>\n      <property name=\"model\" value=\"{}\"/>\n      <property name=\"description\" value=\"{}\"/>\n    </properties>",
                escape(&c.model.display().to_string()),
                escape(&c.description)
            );
        }
        for run in runs {
            let _ = write!(
                s,
                r#"    <testcase classname="{}" name="{}" time="{}">"#,
                escape(&run.run.scenario),
                escape(&run.run.board),
                seconds(run.wall_seconds)
            );
            s.push('\n');
            let (element, kind) = match &run.run.outcome {
                Outcome::Passed => ("", ""),
                Outcome::Mismatch(_) => ("failure", "mismatch"),
                Outcome::Error(_) => ("error", "error"),
            };
            if let Outcome::Mismatch(message) | Outcome::Error(message) = &run.run.outcome {
                let mut body = message.clone();
                for step in &run.run.steps {
                    if let Some(m) = &step.mismatch {
                        let _ = write!(body, "\n{} step {}: {m}", step.case, step.step);
                    }
                }
                let _ = writeln!(
                    s,
                    r#"      <{element} message="{}" type="{kind}">{}</{element}>"#,
                    escape(message),
                    escape_text(&body)
                );
            }
            let _ = writeln!(
                s,
                "      <system-out>{}</system-out>\n    </testcase>",
                escape_text(&run_text(&run.run, context))
            );
        }
        for pair in pending {
            let _ = writeln!(
                s,
                r#"    <testcase classname="{}" name="{}" time="0.000">
      <skipped message="did not finish: no result from this board when the report was written" type="pending"/>
    </testcase>"#,
                escape(&pair.scenario),
                escape(&pair.board)
            );
        }
        s.push_str("  </testsuite>\n");
    }
    s.push_str("</testsuites>\n");
    s
}

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
.message { background: #fff8f8; border: 1px solid #ffcecb; border-radius: 4px; padding: 6px 10px; white-space: pre-wrap; font-family: ui-monospace, monospace; font-size: 12.5px; }
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

fn op_bars(run: &BoardRun, context: Option<&ScenarioContext>) -> String {
    let Some(step) = run.steps.first() else {
        return r#"<p class="none">No cycle figures: the board stopped before the first step finished.</p>"#.into();
    };
    let largest = step.op_cycles.iter().copied().max().unwrap_or(0).max(1);
    let sum: u64 = step.op_cycles.iter().map(|&c| u64::from(c)).sum();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<h3>Per-op cycles ({} step {}{}, {} cycles in all)</h3>",
        escape(&step.case),
        step.step,
        if run.steps.len() > 1 {
            format!(", first of {} steps", run.steps.len())
        } else {
            String::new()
        },
        thousands(step.total_cycles)
    );
    if step.op_cycles.is_empty() {
        s.push_str(r#"<p class="none">The firmware reported no per-op figures.</p>"#);
        return s;
    }
    s.push_str(r#"<div class="ops"><span class="idx head-row">op</span><span class="head-row">name</span><span class="head-row">relative to the largest</span><span class="cyc head-row">cycles</span><span class="pct head-row">share</span>"#);
    s.push('\n');
    for (op, &cycles) in step.op_cycles.iter().enumerate() {
        let name = op_name(context, op);
        let share = if sum == 0 {
            0.0
        } else {
            100.0 * f64::from(cycles) / sum as f64
        };
        let _ = writeln!(
            s,
            r#"<span class="idx">{op}</span><span class="name" title="{name}">{name}</span><div class="track"><div class="bar{}" style="width:{:.2}%"></div></div><span class="cyc">{}</span><span class="pct">{share:.1}%</span>"#,
            if cycles == largest { " top" } else { "" },
            100.0 * f64::from(cycles) / f64::from(largest),
            thousands(u64::from(cycles)),
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
fn board_layout(run: &BoardRun, context: Option<&ScenarioContext>) -> Option<LayoutReport> {
    let buffers: Vec<BufferRow> = run
        .plan
        .iter()
        .map(|b| {
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
                size: b.size,
                align: b.align.max(1),
                offset: b.offset,
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
        lower_bound,
        buffers,
    })
}

/// The arena over time: the plan the board committed when it reported one,
/// else the host's plan of the same model with the same planner.
fn arena_picture(run: &BoardRun, context: Option<&ScenarioContext>) -> String {
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
        status_word(&r.outcome),
        escape(&r.scenario),
        escape(&r.board)
    );
    if let Outcome::Mismatch(m) | Outcome::Error(m) = &r.outcome {
        let _ = writeln!(s, r#"<div class="message">{}</div>"#, escape_text(m));
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
                status_word(&r.outcome),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::{PlannedBuffer, StepResult};

    fn run(scenario: &str, board: &str, outcome: Outcome) -> BoardRun {
        BoardRun {
            scenario: scenario.into(),
            board: board.into(),
            outcome,
            steps: vec![StepResult {
                case: "case0".into(),
                step: 0,
                total_cycles: 1500,
                op_cycles: vec![1000, 250],
                mismatch: None,
            }],
            arena: Some([4096, 1024, 64, 1088]),
            logs: vec!["booted".into()],
            plan: Vec::new(),
        }
    }

    fn report(runs: Vec<BoardRun>, pending: Vec<PendingPair>) -> RunReport {
        RunReport {
            title: "hilt run".into(),
            started: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            elapsed: Duration::from_millis(12_345),
            hostname: Some("farm-1".into()),
            scenarios: BTreeMap::new(),
            runs: runs
                .into_iter()
                .map(|run| TimedRun {
                    run,
                    wall_seconds: 1.5,
                })
                .collect(),
            pending,
        }
    }

    #[test]
    fn timestamps_are_utc_civil_dates() {
        assert_eq!(utc_timestamp(UNIX_EPOCH), "1970-01-01T00:00:00");
        assert_eq!(
            utc_timestamp(UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
            "2023-11-14T22:13:20"
        );
        // A leap day.
        assert_eq!(
            utc_timestamp(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00"
        );
    }

    #[test]
    fn escaping_keeps_xml_well_formed_whatever_the_log_holds() {
        assert_eq!(
            escape("a<b & \"c\" 'd'>\n\u{1b}[0m\u{0}"),
            "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;&#10;\\x1B[0m\\x00"
        );
        assert_eq!(escape_text("x\ny"), "x\ny");
    }

    #[test]
    fn totals_count_each_outcome_and_the_pending_pairs() {
        let r = report(
            vec![
                run("s", "a", Outcome::Passed),
                run("s", "b", Outcome::Mismatch("out 0 differs".into())),
                run("t", "a", Outcome::Error("timed out".into())),
            ],
            vec![PendingPair {
                scenario: "t".into(),
                board: "b".into(),
            }],
        );
        assert_eq!(
            r.totals(),
            Totals {
                pairs: 4,
                passed: 1,
                mismatched: 1,
                errors: 1,
                pending: 1
            }
        );
        let xml = junit_xml(&r);
        assert!(
            xml.contains(
                r#"<testsuites name="hilt run" tests="4" failures="1" errors="1" time="12.345">"#
            ),
            "{xml}"
        );
        assert!(
            xml.contains(
                r#"<testsuite name="t" tests="2" failures="0" errors="1" skipped="1" time="1.500""#
            ),
            "{xml}"
        );
        assert!(xml.contains(r#"<failure message="out 0 differs" type="mismatch">"#));
        assert!(xml.contains(r#"<error message="timed out" type="error">"#));
        assert!(xml.contains(r#"<skipped message="did not finish"#));
        assert!(xml.contains("op   0 ?"), "{xml}");
    }

    #[test]
    fn the_html_lists_failures_first_and_loads_nothing_from_outside() {
        let r = report(
            vec![
                run("a", "x", Outcome::Passed),
                run("b", "x", Outcome::Mismatch("m".into())),
                run("c", "x", Outcome::Error("e".into())),
            ],
            Vec::new(),
        );
        let page = html(&r);
        let error = page.find(r#"id="c--x""#).unwrap();
        let mismatch = page.find(r#"id="b--x""#).unwrap();
        let pass = page.find(r#"id="a--x""#).unwrap();
        assert!(error < mismatch && mismatch < pass);
        for external in ["<script", "<link", "src=", "url(", "@import"] {
            assert!(!page.contains(external), "{external}");
        }
        // Bars are scaled to the largest op.
        assert!(page.contains("width:100.00%") && page.contains("width:25.00%"));
    }

    fn planned(index: u16, steps: (u16, u16), size: u32, align: u32, offset: u32) -> PlannedBuffer {
        PlannedBuffer {
            kind: "tensor",
            index,
            first_step: steps.0,
            last_step: steps.1,
            size,
            align,
            offset,
        }
    }

    #[test]
    fn the_picture_draws_the_plan_the_board_committed_with_tensor_names() {
        let mut r = run("s", "a", Outcome::Passed);
        r.plan = vec![
            planned(0, (0, 1), 100, 16, 0),
            planned(1, (1, 2), 64, 16, 112),
        ];
        let context = ScenarioContext {
            name: "s".into(),
            description: String::new(),
            model: "m.tflite".into(),
            op_names: Vec::new(),
            tensor_names: vec!["input".into(), "conv/out".into()],
            layout: Err("not planned".into()),
        };
        let layout = board_layout(&r, Some(&context)).unwrap();
        assert_eq!(layout.buffers[1].name, "conv/out");
        // Step 1 holds both: 112 + 64 bytes.
        assert_eq!(layout.lower_bound, 176);
        let picture = arena_picture(&r, Some(&context));
        assert!(
            picture.contains("as the board committed it (head 1,024 B)"),
            "{picture}"
        );
        assert!(picture.contains("<svg") && picture.contains("conv/out"));
    }

    #[test]
    fn a_garbled_plan_is_left_out_not_drawn_or_trusted() {
        let mut r = run("s", "a", Outcome::Passed);
        r.plan = vec![
            planned(0, (3, 1), 100, 0, 0),
            planned(1, (0, 0), u32::MAX, 16, 0),
            planned(2, (0, 0), 16, 16, u32::MAX - 4),
        ];
        // Zero alignment counts as 1 and a reversed life as one step; the
        // rows whose end passes 4 GiB are dropped.
        let layout = board_layout(&r, None).unwrap();
        assert_eq!(layout.buffers.len(), 1);
        assert_eq!(
            (layout.buffers[0].align, layout.buffers[0].last_step),
            (1, 3)
        );
        let _ = arena_picture(&r, None);
        r.plan = vec![planned(1, (0, 0), u32::MAX, 16, 0)];
        assert!(board_layout(&r, None).is_none());
        assert!(arena_picture(&r, None).contains("scenario is unknown"));
    }

    #[test]
    fn a_gate_verdict_other_than_unchanged_fails_the_test_case() {
        let passed = run("s", "a", Outcome::Passed);
        assert_eq!(gated(&passed, &Verdict::Unchanged).outcome, Outcome::Passed);
        assert!(matches!(
            gated(&passed, &Verdict::New).outcome,
            Outcome::Mismatch(m) if m.starts_with("no accepted snapshot")
        ));
        assert_eq!(
            gated(
                &passed,
                &Verdict::Changed(vec!["op 3: +12%".into(), "head".into()])
            )
            .outcome,
            Outcome::Mismatch("snapshot changed: op 3: +12%; head".into())
        );
        assert_eq!(
            gated(&passed, &Verdict::RunFailed("cannot write".into())).outcome,
            Outcome::Error("cannot write".into())
        );
        // A run that failed keeps its own outcome.
        let failed = run("s", "a", Outcome::Error("timed out".into()));
        assert_eq!(
            gated(&failed, &Verdict::RunFailed("timed out".into())).outcome,
            Outcome::Error("timed out".into())
        );
    }

    #[test]
    fn the_summary_has_every_run_and_the_totals() {
        let r = report(vec![run("s", "a", Outcome::Passed)], Vec::new());
        let v: serde_json::Value = serde_json::from_str(&summary_json(&r).unwrap()).unwrap();
        assert_eq!(v["totals"]["passed"], 1);
        assert_eq!(v["runs"][0]["board"], "a");
        assert_eq!(v["runs"][0]["outcome"]["status"], "passed");
        assert_eq!(v["runs"][0]["wall_seconds"], 1.5);
        assert_eq!(v["started_at"], "2023-11-14T22:13:20Z");
    }
}
