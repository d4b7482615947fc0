//! Where `hilt run`, `hilt gate` and `hilt bench-target` work, and what they
//! run there: the [`Workspace`] (the repository, its boards and conformance
//! sets, found from the flags or the scenario files) and the (scenario,
//! board) pairs of a `--board` filter, with the checks that make a wrong
//! filter an error naming what it missed rather than an empty run. Also how
//! many boards run at once and the async runtime they run on, which every
//! board-running command needs alike.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use hilt::config::board::{Board, load_all};
use hilt::config::scenario::Scenario;
use hilt::layout::{ModelNames, model_names};
use hilt::orchestrate::Job;

use crate::cmd::args::{OffloadArgs, WorkspaceArgs};

/// Where `hilt run` and `hilt gate` work: the repository (firmware sources,
/// default folders), its boards and the conformance set.
#[derive(Debug)]
pub(crate) struct Workspace {
    pub(crate) repo: PathBuf,
    pub(crate) boards: Vec<Board>,
    /// The conformance sets, in search order.
    pub(crate) conformance: Vec<PathBuf>,
    offload: OffloadArgs,
}

/// The jobs of a command and each scenario's model names.
pub(crate) type Work = (Vec<Job>, HashMap<String, ModelNames>);

impl Workspace {
    /// The repository from `--repo` or found from `scenarios` (see
    /// [`hilt::paths::find_repo`]), and its boards from `--boards-dir` or its
    /// `boards/`: each missing one named with where it was looked for and
    /// the flag that sets it.
    pub(crate) fn find(
        scenarios: &[PathBuf],
        place: WorkspaceArgs,
        offload: OffloadArgs,
    ) -> anyhow::Result<Self> {
        let WorkspaceArgs { boards_dir, repo } = place;
        let repo = match repo {
            Some(dir) => hilt::paths::repo_at(dir)?,
            None => hilt::paths::find_repo(scenarios)?,
        };
        let boards_dir = match boards_dir {
            Some(dir) => hilt::paths::folder("the boards folder", dir, "--boards-dir")?,
            None => hilt::paths::folder("the boards folder", repo.join("boards"), "--boards-dir")?,
        };
        Ok(Workspace {
            boards: load_all(&boards_dir)?,
            conformance: hilt::conformance::locate_all(&repo),
            repo,
            offload,
        })
    }

    /// Every (scenario, board) pair of `paths`, with each scenario's model
    /// names for readable output. An explicit `--board NAME` (not a glob)
    /// runs every scenario there, listed or not (with a note).
    pub(crate) fn jobs(
        &self,
        paths: &[PathBuf],
        board_filter: Option<&str>,
    ) -> anyhow::Result<Work> {
        let mut scenarios = Vec::new();
        let mut names = HashMap::new();
        for path in paths {
            let mut scenario = hilt::config::scenario::load(path, &self.conformance)?;
            self.offload.apply(&mut scenario)?;
            for pattern in &scenario.boards {
                hilt::config::board::select(&self.boards, pattern)
                    .map_err(|e| anyhow::anyhow!("{}: `boards`: {e}", path.display()))?;
            }
            names.insert(scenario.name.clone(), model_names(&scenario.model_file));
            scenarios.push(Arc::new(scenario));
        }
        if let Some(filter) = board_filter {
            check_board_filter(&self.boards, filter)?;
        }
        let mut work = hilt::orchestrate::jobs_for(&scenarios, &self.boards, board_filter)?;
        if let Some(name) = board_filter.filter(|f| !is_glob(f)) {
            add_unlisted(&mut work, &scenarios, &self.boards, name);
        }
        // Before any build: an arena that cannot fit fails only at the link.
        for job in &work {
            job.scenario.check_budget(&job.board)?;
        }
        if work.is_empty() {
            anyhow::bail!("{}", no_pairs(&scenarios, board_filter));
        }
        Ok((work, names))
    }
}

/// Whether a `--board` value is a glob rather than one board's name.
fn is_glob(filter: &str) -> bool {
    filter.contains(['*', '?'])
}

/// `--board` names a defined board or matches one: else the error says
/// which it did not, with the closest names or the defined boards.
fn check_board_filter(boards: &[Board], filter: &str) -> anyhow::Result<()> {
    // A filter narrows the pairs the scenarios name, so it may match a
    // board no glob picks (`globs = false`) that a scenario names.
    if boards
        .iter()
        .any(|b| hilt::config::board::glob_match(filter, &b.name))
    {
        return Ok(());
    }
    match hilt::config::board::select(boards, filter) {
        Ok(_) => Ok(()),
        // `--board "qemu-stm32*" matches no board; …`
        Err(e) if is_glob(filter) => Err(anyhow::anyhow!("--board {e}")),
        // `--board: unknown board "…" (did you mean …?); …`
        Err(e) => Err(anyhow::anyhow!("--board: {e}")),
    }
}

/// Adds the pairs of scenarios that do not list board `name` (an explicit
/// `--board`, so the user asked for it), each with a note.
fn add_unlisted(work: &mut Vec<Job>, scenarios: &[Arc<Scenario>], boards: &[Board], name: &str) {
    let Some(board) = boards.iter().find(|b| b.name == name) else {
        return;
    };
    for scenario in scenarios {
        if work
            .iter()
            .any(|j| j.board.name == name && j.scenario.name == scenario.name)
        {
            continue;
        }
        eprintln!(
            "note: scenario {} does not list board {name} (its boards: {}); running it there as --board asks",
            scenario.name,
            scenario.boards.join(", ")
        );
        work.push(Job {
            scenario: scenario.clone(),
            board: board.clone(),
        });
    }
}

/// Why there is nothing to run: a `--board` glob that matches boards none
/// of the scenarios list, said with what each scenario does list.
fn no_pairs(scenarios: &[Arc<Scenario>], board_filter: Option<&str>) -> String {
    let listed: Vec<String> = scenarios
        .iter()
        .map(|s| format!("{} lists {}", s.name, s.boards.join(", ")))
        .collect();
    let filter = board_filter.map_or(String::new(), |f| format!("--board {f:?} matches "));
    format!(
        "no (scenario, board) pair to run: {filter}no board the scenarios list ({})",
        listed.join("; ")
    )
}

/// Boards run at once: `--jobs`, else one per CPU.
pub(crate) fn parallel(jobs: Option<usize>) -> usize {
    jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
}

/// The runtime boards run on (QEMU, probes and serial ports are awaited
/// side by side), built only by the commands that run boards.
pub(crate) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}
