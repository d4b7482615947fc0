//! The reports `hilt run` and `hilt gate` keep while boards run: which share
//! of the (scenario, board) pairs this host takes (`--shard`) and the report
//! folder opened before the first board starts, so an unwritable folder
//! fails the command before any build rather than after the last run.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use hilt::layout::{LayoutOptions, ModelNames, layout_model};
use hilt::orchestrate::Job;
use hilt::outcome::BoardRun;
use hilt::report::{PendingPair, ReportWriter, ScenarioContext};
use hilt::results::{Invocation, Recorded, Store, StoreTarget};

/// Where `hilt run` and `hilt gate` write their reports and which share of
/// the pairs they run.
#[derive(Debug)]
pub(crate) struct RunReporting {
    pub(crate) report_dir: PathBuf,
    pub(crate) shard: Option<hilt::shard::Shard>,
    /// The results store every board run is recorded in (`--results`).
    pub(crate) results: StoreTarget,
    /// The repository (its commit is recorded with the runs).
    pub(crate) repo: PathBuf,
    /// Known-flaky pairs whose failures do not fail the command.
    pub(crate) quarantine: hilt::quarantine::Quarantine,
}

impl RunReporting {
    /// The reporting of `run` and `gate`: `reports`' flags over the
    /// defaults (`sub`: the report folder's subfolder).
    pub(crate) fn from_args(
        reports: &crate::cmd::args::ReportArgs,
        repo: &std::path::Path,
        scenarios: &[PathBuf],
        sub: Option<&str>,
    ) -> anyhow::Result<Self> {
        let quarantine = match &reports.quarantine {
            Some(path) => hilt::quarantine::Quarantine::load(path)?,
            None => hilt::quarantine::Quarantine::default(),
        };
        Ok(RunReporting {
            report_dir: reports
                .report_dir
                .clone()
                .unwrap_or_else(|| hilt::paths::default_report_dir(repo, scenarios, sub)),
            shard: reports.shard,
            results: StoreTarget::choose(reports.results.as_deref(), repo),
            repo: repo.to_path_buf(),
            quarantine,
        })
    }

    /// Whether a run that did not pass still fails the command (it is not
    /// quarantined).
    pub(crate) fn fails(&self, scenario: &str, board: &str) -> bool {
        !self.quarantine.holds(scenario, board)
    }
}

impl RunReporting {
    /// Keeps this shard's jobs and opens the report folder (failing before
    /// any board runs when it cannot be written).
    pub(crate) fn start(
        &self,
        command: &str,
        work: Vec<Job>,
        names: &HashMap<String, ModelNames>,
    ) -> anyhow::Result<(Vec<Job>, ReportWriter, ResultsLog)> {
        let mut title = command.to_string();
        let work = match self.shard {
            Some(shard) => {
                let all = work.len();
                let part = shard.select(work, |j| (j.scenario.name.clone(), j.board.name.clone()));
                println!(
                    "shard {shard}: {} of {all} (scenario, board) pairs",
                    part.len()
                );
                title.push_str(&format!(" (shard {shard})"));
                part
            }
            None => work,
        };
        let reports = ReportWriter::new(
            &self.report_dir,
            &title,
            scenario_contexts(&work, names),
            pending_pairs(&work),
        )?;
        let log = ResultsLog::new(self.results.clone(), command, &self.repo, &work);
        Ok((work, reports, log))
    }
}

/// The board runs of one command, kept as they end and recorded in the
/// results store after the reports are written (so a store that cannot be
/// reached loses nothing of the run).
#[derive(Debug)]
pub(crate) struct ResultsLog {
    target: StoreTarget,
    invocation: Invocation,
    /// Per board: its runner and probe selector.
    boards: HashMap<String, (&'static str, Option<String>)>,
    runs: Vec<(BoardRun, Duration)>,
}

impl ResultsLog {
    /// A log for `command`'s runs of `work`, to be recorded in `target`.
    pub(crate) fn new(
        target: StoreTarget,
        command: &str,
        repo: &std::path::Path,
        work: &[Job],
    ) -> Self {
        let boards = work
            .iter()
            .map(|j| {
                let runner = j.board.runner.name();
                let probe = j.board.probe.as_ref().map(ToString::to_string);
                (j.board.name.clone(), (runner, probe))
            })
            .collect();
        ResultsLog {
            target,
            invocation: Invocation::now(command, repo),
            boards,
            runs: Vec::new(),
        }
    }

    /// The commit the runs are recorded at.
    pub(crate) fn commit(&self) -> &str {
        &self.invocation.commit
    }

    /// The store, opened to read what earlier runs recorded (a gate judges
    /// noisy boards by it); `None`, said once, when there is none to read.
    pub(crate) fn open_for_reading(&self) -> Option<Store> {
        if let StoreTarget::Sqlite(path) = &self.target
            && !path.is_file()
        {
            return None;
        }
        if self.target == StoreTarget::Off {
            return None;
        }
        match Store::open(&self.target) {
            Ok(store) => Some(store),
            Err(e) => {
                eprintln!(
                    "warning: results store {}: {e}: noisy boards are judged by their snapshots",
                    self.target.name()
                );
                None
            }
        }
    }

    /// Keeps a run that ended.
    pub(crate) fn keep(&mut self, run: &BoardRun, wall: Duration) {
        self.runs.push((run.clone(), wall));
    }

    /// Records the kept runs, all or none, and says where (on standard
    /// error when standard output is a table a script reads, `stderr`); an
    /// error names the store.
    pub(crate) fn save(
        self,
        names: &HashMap<String, ModelNames>,
        stderr: bool,
    ) -> anyhow::Result<()> {
        if self.target == StoreTarget::Off || self.runs.is_empty() {
            return Ok(());
        }
        let failed = |e: hilt::results::StoreError| {
            anyhow::anyhow!(
                "results store {}: {e} (the runs' reports are written; nothing recorded)",
                self.target.name()
            )
        };
        let no_ops = Vec::new();
        let recorded: Vec<Recorded<'_>> = self
            .runs
            .iter()
            .map(|(run, wall)| {
                let (runner, probe) = self
                    .boards
                    .get(&run.board)
                    .map_or(("qemu", None), |(r, p)| (*r, p.as_deref()));
                Recorded {
                    run,
                    wall: *wall,
                    runner,
                    probe,
                    op_names: names.get(&run.scenario).map_or(&no_ops, |n| &n.ops),
                }
            })
            .collect();
        let mut store = Store::open(&self.target).map_err(failed)?;
        store.record(&self.invocation, &recorded).map_err(failed)?;
        let said = format!(
            "results: {} board runs recorded in {} (commit {}; `hilt history` shows them)",
            recorded.len(),
            store.name(),
            self.invocation.commit
        );
        if stderr {
            eprintln!("{said}");
        } else {
            println!("{said}");
        }
        Ok(())
    }
}

/// What the reports show of each scenario of `work`: its model's names
/// (read once, for the run's own lines too) and the host's plan of its arena
/// with the scenario's planner.
fn scenario_contexts(work: &[Job], names: &HashMap<String, ModelNames>) -> Vec<ScenarioContext> {
    let mut contexts: Vec<ScenarioContext> = Vec::new();
    for job in work {
        let scenario = &job.scenario;
        if contexts.iter().any(|c| c.name == scenario.name) {
            continue;
        }
        let options = LayoutOptions {
            planner: scenario.planner,
            ..LayoutOptions::default()
        };
        let layout = layout_model(&scenario.model_file, &options).map_err(|e| e.to_string());
        let names = names.get(&scenario.name).cloned().unwrap_or_default();
        contexts.push(ScenarioContext::new(
            scenario,
            names.ops,
            names.tensors,
            layout,
        ));
    }
    contexts
}

/// Every pair of `work`, none reported yet.
fn pending_pairs(work: &[Job]) -> Vec<PendingPair> {
    work.iter()
        .map(|j| PendingPair {
            scenario: j.scenario.name.clone(),
            board: j.board.name.clone(),
        })
        .collect()
}
