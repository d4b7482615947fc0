//! `junit.xml`: the JUnit shape CI systems read — one `<testsuite>` per
//! scenario, one `<testcase>` per board, failures, errors and pending pairs
//! told apart, cycle figures and the firmware log in `<system-out>`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{
    PendingPair, RunReport, ScenarioContext, TimedRun, escape, escape_text, op_name,
    run_status_word, seconds, thousands, utc_timestamp,
};
use crate::outcome::{BoardRun, Outcome};

/// The cycle figures and firmware log of one run, as plain text.
fn run_text(run: &BoardRun, context: Option<&ScenarioContext>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} on {}: {}",
        run.scenario,
        run.board,
        run_status_word(run)
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
    if let (Some(violations), Some(timing)) = (run.access_violations, &run.timing) {
        let _ = writeln!(
            s,
            "QEMU plugin: {violations} access violations, cycles estimated for {timing}"
        );
    }
    for step in &run.steps {
        let mismatch = step
            .mismatch
            .as_deref()
            .map_or(String::new(), |m| format!(" — MISMATCH: {m}"));
        match &step.observed {
            // The plugin's exact count first, the firmware's beside it.
            Some(seen) => {
                let _ = writeln!(
                    s,
                    "{} step {}: {} instructions, {} estimated cycles, stack {} B (SysTick: {}){mismatch}",
                    step.case,
                    step.step,
                    thousands(seen.instructions),
                    thousands(seen.estimated_cycles),
                    seen.stack_high_water,
                    thousands(step.total_cycles),
                );
                for (op, count) in seen.ops.iter().enumerate() {
                    let _ = writeln!(
                        s,
                        "  op {op:>3} {:<28} {:>12} instructions {:>12} estimated cycles",
                        op_name(context, op),
                        thousands(count.instructions),
                        thousands(count.estimated_cycles)
                    );
                }
            }
            None => {
                let _ = writeln!(
                    s,
                    "{} step {}: {} cycles{mismatch}",
                    step.case,
                    step.step,
                    thousands(step.total_cycles),
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

/// A test case's failure, error and flaky elements, as its run ended.
fn outcome_elements(run: &BoardRun) -> String {
    let mut s = String::new();
    let (element, kind) = match &run.outcome {
        Outcome::Passed => ("", ""),
        Outcome::Mismatch(_) => ("failure", "mismatch"),
        // A board that never answered is the farm's failure, not
        // the model's: its own type, so CI can tell them apart.
        Outcome::Error(_) if run.offline => ("error", "board-offline"),
        Outcome::Error(_) => ("error", "error"),
    };
    if let Outcome::Mismatch(message) | Outcome::Error(message) = &run.outcome {
        let mut body = message.clone();
        for step in &run.steps {
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
    // A pass after a retry, as Maven Surefire writes one: the first
    // failure as a flakyFailure (a wrong output) or flakyError.
    if let Some(first) = &run.flaky {
        let element = if first.starts_with("MISMATCH") {
            "flakyFailure"
        } else {
            "flakyError"
        };
        let _ = writeln!(
            s,
            r#"      <{element} message="{}" type="flaky"><stackTrace>{}</stackTrace></{element}>"#,
            escape(&format!(
                "passed on attempt {} of {}; the first failed",
                run.attempts, run.attempts
            )),
            escape_text(first)
        );
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
            s.push_str(&outcome_elements(&run.run));
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
