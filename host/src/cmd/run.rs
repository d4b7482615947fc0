//! `hilt run`: run scenarios on their boards (virtual ones under QEMU, real
//! ones through probe-rs), print each board's result as it ends, keep the
//! reports, and fail when any run did.

use std::path::PathBuf;

use hilt::orchestrate::run_jobs_timed;
use hilt::outcome::{BoardRun, Outcome};

use crate::cmd::args::{BoardChoiceArgs, ObserveArgs, OffloadArgs, ReportArgs, WorkspaceArgs};
use crate::cmd::print::print_run;
use crate::cmd::reporting::RunReporting;
use crate::cmd::workspace::{Workspace, parallel, runtime};

/// `hilt run`'s arguments. The flags are groups `hilt gate` shares (in the
/// same order, so both helps read alike).
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// Scenario files (scenarios/NAME.toml).
    #[arg(required = true)]
    scenarios: Vec<PathBuf>,
    #[command(flatten)]
    boards: BoardChoiceArgs,
    #[command(flatten)]
    workspace: WorkspaceArgs,
    #[command(flatten)]
    reports: ReportArgs,
    #[command(flatten)]
    offload: OffloadArgs,
    #[command(flatten)]
    observe: ObserveArgs,
}

/// `hilt run`: find the workspace, then run every pair.
pub(crate) fn run(args: RunArgs) -> anyhow::Result<()> {
    let RunArgs {
        scenarios,
        boards,
        workspace,
        reports,
        offload,
        observe,
    } = args;
    let place = Workspace::find(&scenarios, workspace, offload)?;
    observe.apply(&place.repo.join("boards"))?;
    let reporting = RunReporting::from_args(&reports, &place.repo, &scenarios, None)?;
    run_scenarios(&place, &scenarios, &boards, &reporting)
}

/// `hilt run`: run the scenarios on their boards and print each result.
fn run_scenarios(
    place: &Workspace,
    paths: &[PathBuf],
    boards: &BoardChoiceArgs,
    reporting: &RunReporting,
) -> anyhow::Result<()> {
    let (mut work, names) = place.jobs(paths, boards.board.as_deref())?;
    boards.apply_retries(&mut work);
    let (work, mut reports, mut log) = reporting.start("hilt run", work, &names)?;
    let runtime = runtime()?;
    let on_result = |run: &BoardRun, wall| {
        print_run(run, names.get(&run.scenario).map(|n| &n.ops), wall);
        if run.outcome != Outcome::Passed && !reporting.fails(&run.scenario, &run.board) {
            println!("    quarantined (--quarantine): this failure does not fail the run");
        }
        if let Err(e) = reports.record(run, wall) {
            eprintln!("warning: {e}");
        }
        log.keep(run, wall);
    };
    let results = runtime.block_on(run_jobs_timed(
        &place.repo,
        work,
        parallel(boards.jobs),
        on_result,
    ));
    println!("reports: {}", reports.finish()?.display());
    let recorded = log.save(&names, false);
    let not_passed: Vec<&BoardRun> = results
        .iter()
        .filter(|r| r.outcome != Outcome::Passed)
        .collect();
    let failed = not_passed
        .iter()
        .filter(|r| reporting.fails(&r.scenario, &r.board))
        .count();
    let quarantined = not_passed.len() - failed;
    let flaky = results.iter().filter(|r| r.flaky.is_some()).count();
    let offline = not_passed.iter().filter(|r| r.offline).count();
    let mut notes = Vec::new();
    if flaky > 0 {
        notes.push(format!("{flaky} flaky"));
    }
    if offline > 0 {
        notes.push(format!(
            "{offline} of them board offline, not a model's failure"
        ));
    }
    if quarantined > 0 {
        notes.push(format!("{quarantined} failed in quarantine, not counted"));
    }
    println!(
        "{} board runs: {} passed, {failed} failed{}",
        results.len(),
        results.len() - not_passed.len(),
        if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join(", "))
        }
    );
    if failed > 0 {
        if let Err(e) = recorded {
            eprintln!("error: {e}");
        }
        std::process::exit(1);
    }
    recorded
}
