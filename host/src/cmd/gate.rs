//! `hilt gate`: run scenarios and judge each board's run against its
//! accepted snapshot (layout and latency), print the verdicts with what to
//! review last, and fail on any change that is not a speed-up; with
//! `--accept`, accept pending snapshots instead, running nothing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use hilt::gate::{Tolerance, Verdict, gate_run, verdict_text};
use hilt::orchestrate::run_jobs_timed;
use hilt::outcome::BoardRun;

use crate::cmd::args::{BoardChoiceArgs, OffloadArgs, ReportArgs, WorkspaceArgs};
use crate::cmd::reporting::RunReporting;
use crate::cmd::workspace::{Workspace, parallel, runtime};

/// `hilt gate`'s arguments: `hilt run`'s flag groups, their help reworded
/// where gating differs from running (`mut_arg` below, the text as clap
/// shows a doc comment: joined, no final period), plus the snapshots and
/// `--accept`. `--snapshots` sits between the groups so the help keeps its
/// order.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("board", |a| a.help(
        "Only these boards (a name or a glob); a name gates each scenario on that board \
         even if its `boards` do not list it",
    )),
    mut_arg("jobs", |a| a.help("Boards to run at once")),
    mut_arg("repo", |a| a.help(
        "The hilt repository (firmware sources, boards, scenarios) [default: found above \
         the scenario files, the current folder or this executable]",
    )),
    mut_arg("report_dir", |a| a.help(
        "Write junit.xml, summary.json and report.html here (a changed snapshot is a \
         failed test case), updated as each board finishes [default: the repository's \
         build/reports/gate; ./hilt-reports/gate when hilt runs outside the repository on \
         scenarios that all lie outside it]",
    )),
    mut_arg("shard", |a| a.help(
        "Gate only this host's share, I of N (1-based), of the sorted (scenario, board) pairs",
    )),
)]
pub(crate) struct GateArgs {
    /// Scenario files (default: every scenarios/*.toml).
    scenarios: Vec<PathBuf>,
    #[command(flatten)]
    boards: BoardChoiceArgs,
    /// The accepted snapshots [default: the repository's snapshots/gate].
    #[arg(long)]
    snapshots: Option<PathBuf>,
    #[command(flatten)]
    workspace: WorkspaceArgs,
    #[command(flatten)]
    reports: ReportArgs,
    /// Accept the pending snapshots (.snap.new, written by an earlier
    /// gate) of these scenarios (files or names; default: all) on
    /// --board (default: all): each replaces its accepted snapshot.
    /// Runs nothing; `cargo insta review` does the same, one by one.
    #[arg(long)]
    accept: bool,
    #[command(flatten)]
    offload: OffloadArgs,
}

/// `hilt gate`: accept, or find the workspace and gate every pair.
pub(crate) fn run(args: GateArgs) -> anyhow::Result<()> {
    let GateArgs {
        scenarios,
        boards,
        snapshots,
        workspace,
        reports,
        accept,
        offload,
    } = args;
    if accept {
        return accept_snapshots(
            &scenarios,
            boards.board.as_deref(),
            snapshots,
            workspace.repo,
        );
    }
    let place = Workspace::find(&scenarios, workspace, offload)?;
    let reporting = RunReporting::from_args(&reports, &place.repo, &scenarios, Some("gate"))?;
    let snapshots = snapshots.unwrap_or_else(|| place.repo.join("snapshots/gate"));
    gate_scenarios(&place, &scenarios, &boards, &snapshots, &reporting)
}

/// `hilt gate`: run the scenarios (default: every one of the repository)
/// and judge each run against its accepted snapshot.
fn gate_scenarios(
    place: &Workspace,
    paths: &[PathBuf],
    boards: &BoardChoiceArgs,
    snapshots: &Path,
    reporting: &RunReporting,
) -> anyhow::Result<()> {
    let paths = if paths.is_empty() {
        every_scenario(&place.repo.join("scenarios"))?
    } else {
        paths.to_vec()
    };
    let (mut work, names) = place.jobs(&paths, boards.board.as_deref())?;
    boards.apply_retries(&mut work);
    let (work, mut reports, mut log) = reporting.start("hilt gate", work, &names)?;
    // How to accept names the folder only when it is not the default.
    let hint_snapshots = (snapshots != place.repo.join("snapshots/gate")).then_some(snapshots);
    let tolerance: HashMap<String, Tolerance> = work
        .iter()
        .map(|j| (j.board.name.clone(), j.board.latency_tolerance()))
        .collect();
    // Noisy boards are judged against the results store's last nights
    // (read before this gate's runs are recorded); a store that cannot be
    // read leaves them to their snapshots, said once.
    let mut store = if tolerance.values().any(|t| t.percent > 0.0) {
        log.open_for_reading()
    } else {
        None
    };
    let commit = log.commit().to_string();
    let runtime = runtime()?;
    let mut verdicts = Vec::new();
    let on_result = |run: &BoardRun, wall| {
        let names = names.get(&run.scenario).cloned().unwrap_or_default();
        let tol = tolerance
            .get(&run.board)
            .copied()
            .unwrap_or(Tolerance::EXACT);
        let verdict = match store.as_mut() {
            Some(store) if tol.percent > 0.0 => {
                hilt::results::drift::gate_run(snapshots, run, &names, tol, store, &commit)
            }
            _ => gate_run(snapshots, run, &names, tol),
        }
        .unwrap_or_else(|e| Verdict::RunFailed(format!("cannot write snapshot: {e}")));
        let key = (run.scenario.clone(), run.board.clone());
        let text = verdict_text(&run.scenario, &run.board, &verdict, hint_snapshots, true);
        println!("{text}");
        if let Err(e) = reports.record(&hilt::report::gated(run, &verdict), wall) {
            eprintln!("warning: {e}");
        }
        log.keep(run, wall);
        verdicts.push((key, verdict));
    };
    let parallel = parallel(boards.jobs);
    runtime.block_on(run_jobs_timed(&place.repo, work, parallel, on_result));
    println!("reports: {}", reports.finish()?.display());
    let recorded = log.save(&names, false);
    if let Err(e) = &recorded {
        eprintln!("error: {e}");
    }
    print_verdicts(&verdicts, hint_snapshots, reporting);
    recorded.map_err(|_| anyhow::anyhow!("the runs were not recorded (above)"))
}

/// The runs to look at again, last, where a log's tail shows them, and the
/// tally; exits 1 when any run is to review or fix.
fn print_verdicts(
    verdicts: &[((String, String), Verdict)],
    hint_snapshots: Option<&Path>,
    reporting: &RunReporting,
) {
    let failing: Vec<&((String, String), Verdict)> =
        verdicts.iter().filter(|(_, v)| !v.passes()).collect();
    if !failing.is_empty() {
        println!("to review or fix:");
        for ((scenario, board), verdict) in &failing {
            println!(
                "{}",
                verdict_text(scenario, board, verdict, hint_snapshots, false)
            );
        }
    }
    let quarantined = failing
        .iter()
        .filter(|((scenario, board), _)| !reporting.fails(scenario, board))
        .count();
    let bad = failing.len();
    let faster = verdicts
        .iter()
        .filter(|(_, v)| matches!(v, Verdict::Faster(_)))
        .count();
    println!(
        "gate: {} runs, {} unchanged, {faster} faster, {bad} to review or fix{}",
        verdicts.len(),
        verdicts.len() - bad - faster,
        if quarantined > 0 {
            format!(" ({quarantined} of them quarantined, not counted)")
        } else {
            String::new()
        }
    );
    if bad > quarantined {
        std::process::exit(1);
    }
}

/// Every `*.toml` of `dir`, sorted.
fn every_scenario(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let dir = hilt::paths::folder("the scenarios folder", dir.to_path_buf(), "--repo")?;
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "toml") {
            paths.push(path);
        }
    }
    paths.sort();
    Ok(paths)
}

/// `hilt gate --accept`: the pending snapshots of the scenarios named (by
/// file or name; all when none) on the boards `board` matches replace the
/// accepted ones. Nothing runs; the repository (for its snapshots/gate) is
/// found as for a gate run.
fn accept_snapshots(
    scenarios: &[PathBuf],
    board: Option<&str>,
    snapshots: Option<PathBuf>,
    repo: Option<PathBuf>,
) -> anyhow::Result<()> {
    let snapshots = match snapshots {
        Some(dir) => dir,
        None => {
            let files: Vec<PathBuf> = scenarios.iter().filter(|p| p.is_file()).cloned().collect();
            let repo = match repo {
                Some(dir) => hilt::paths::repo_at(dir)?,
                None => hilt::paths::find_repo(&files)?,
            };
            repo.join("snapshots/gate")
        }
    };
    let names: Vec<String> = scenarios
        .iter()
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    let accepted = hilt::gate::accept(&snapshots, &names, board)?;
    if accepted.is_empty() {
        anyhow::bail!(
            "nothing to accept: no pending snapshot (.snap.new) in {}{}{}",
            snapshots.display(),
            if names.is_empty() {
                String::new()
            } else {
                format!(" for {}", names.join(", "))
            },
            board.map_or(String::new(), |b| format!(" on {b}"))
        );
    }
    for a in &accepted {
        println!("accepted {} @ {}: {}", a.scenario, a.board, a.change);
    }
    println!(
        "{} snapshot(s) accepted in {}",
        accepted.len(),
        snapshots.display()
    );
    Ok(())
}
