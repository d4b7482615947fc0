//! The reports `hilt run` and `hilt gate` keep while boards run: which share
//! of the (scenario, board) pairs this host takes (`--shard`) and the report
//! folder opened before the first board starts, so an unwritable folder
//! fails the command before any build rather than after the last run.

use std::collections::HashMap;
use std::path::PathBuf;

use hilt::layout::{LayoutOptions, ModelNames, layout_model};
use hilt::orchestrate::Job;
use hilt::report::{PendingPair, ReportWriter, ScenarioContext};

/// Where `hilt run` and `hilt gate` write their reports and which share of
/// the pairs they run.
#[derive(Debug)]
pub(crate) struct RunReporting {
    pub(crate) report_dir: PathBuf,
    pub(crate) shard: Option<hilt::shard::Shard>,
}

impl RunReporting {
    /// Keeps this shard's jobs and opens the report folder (failing before
    /// any board runs when it cannot be written).
    pub(crate) fn start(
        &self,
        command: &str,
        work: Vec<Job>,
        names: &HashMap<String, ModelNames>,
    ) -> anyhow::Result<(Vec<Job>, ReportWriter)> {
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
        Ok((work, reports))
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
