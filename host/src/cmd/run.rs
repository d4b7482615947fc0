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
    let reporting = RunReporting {
        report_dir: reports
            .report_dir
            .unwrap_or_else(|| hilt::paths::default_report_dir(&place.repo, &scenarios, None)),
        shard: reports.shard,
    };
    run_scenarios(
        &place,
        &scenarios,
        boards.board.as_deref(),
        boards.jobs,
        &reporting,
    )
}

/// `hilt run`: run the scenarios on their boards and print each result.
fn run_scenarios(
    place: &Workspace,
    paths: &[PathBuf],
    board_filter: Option<&str>,
    jobs: Option<usize>,
    reporting: &RunReporting,
) -> anyhow::Result<()> {
    let (work, names) = place.jobs(paths, board_filter)?;
    let (work, mut reports) = reporting.start("hilt run", work, &names)?;
    let runtime = runtime()?;
    let on_result = |run: &BoardRun, wall| {
        print_run(run, names.get(&run.scenario).map(|n| &n.ops), wall);
        if let Err(e) = reports.record(run, wall) {
            eprintln!("warning: {e}");
        }
    };
    let results = runtime.block_on(run_jobs_timed(&place.repo, work, parallel(jobs), on_result));
    println!("reports: {}", reports.finish()?.display());
    let failed = results
        .iter()
        .filter(|r| r.outcome != Outcome::Passed)
        .count();
    println!(
        "{} board runs: {} passed, {failed} failed",
        results.len(),
        results.len() - failed
    );
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}
