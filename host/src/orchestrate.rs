//! Many boards at once: build each (board, model) firmware, then run the
//! boards concurrently on blocking threads, each under its own time limit.
//! One board's failure or hang never loses another board's results: results
//! are handed out as each board finishes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::board::{Board, RunnerKind};
use crate::elf;
use crate::firmware::{self, FirmwareRequest};
use crate::runner::{BoardRun, KillSwitch, Outcome, run_on_qemu};
use crate::scenario::Scenario;

/// One (scenario, board) pair to run.
#[derive(Debug, Clone)]
pub struct Job {
    /// What to run.
    pub scenario: Arc<Scenario>,
    /// Where.
    pub board: Board,
}

fn error_run(job: &Job, message: String) -> BoardRun {
    BoardRun {
        scenario: job.scenario.name.clone(),
        board: job.board.name.clone(),
        outcome: Outcome::Error(message),
        steps: Vec::new(),
        arena: None,
        logs: Vec::new(),
    }
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// Builds every job's firmware (one cargo at a time: builds share a lock
/// anyway), then runs up to `parallel` boards at once; `on_result` sees
/// each result as soon as its board finishes.
pub async fn run_jobs(
    repo: &Path,
    jobs: Vec<Job>,
    parallel: usize,
    mut on_result: impl FnMut(&BoardRun),
) -> Vec<BoardRun> {
    run_jobs_timed(repo, jobs, parallel, |run, _| on_result(run)).await
}

/// [`run_jobs`], also handing `on_result` the wall time the board took:
/// from its turn to run (not its wait for a free slot) to its result, or
/// the firmware build's time when the build failed. Reports need it;
/// [`BoardRun`] stays what the board produced.
pub async fn run_jobs_timed(
    repo: &Path,
    jobs: Vec<Job>,
    parallel: usize,
    mut on_result: impl FnMut(&BoardRun, Duration),
) -> Vec<BoardRun> {
    let mut built: Vec<(Job, Result<PathBuf, String>, Duration)> = Vec::new();
    for job in jobs {
        let repo = repo.to_path_buf();
        let j = job.clone();
        let build_started = Instant::now();
        let elf = tokio::task::spawn_blocking(move || {
            let arena_size = j.scenario.arena_size.unwrap_or(j.board.arena_size);
            firmware::build(
                &repo,
                &FirmwareRequest {
                    board: &j.board,
                    model: &j.scenario.model,
                    arena_size,
                    planner: j.scenario.planner,
                    features: &j.scenario.firmware_features,
                },
            )
            .map_err(|e| e.to_string())
        })
        .await
        .unwrap_or_else(|e| Err(format!("build task failed: {e}")));
        built.push((job, elf, build_started.elapsed()));
    }

    let semaphore = Arc::new(tokio::sync::Semaphore::new(parallel.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    let mut results = Vec::new();
    for (job, elf, build_time) in built {
        let elf = match elf {
            Ok(e) => e,
            Err(message) => {
                let run = error_run(&job, message);
                on_result(&run, build_time);
                results.push(run);
                continue;
            }
        };
        let semaphore = semaphore.clone();
        tasks.spawn(async move {
            let _permit = semaphore.acquire_owned().await;
            let started = Instant::now();
            let run = run_one(job, elf).await;
            (run, started.elapsed())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        let (run, wall) = match joined {
            Ok(timed) => timed,
            Err(e) => (
                BoardRun {
                    scenario: String::new(),
                    board: String::new(),
                    outcome: Outcome::Error(format!("board task failed: {e}")),
                    steps: Vec::new(),
                    arena: None,
                    logs: Vec::new(),
                },
                Duration::ZERO,
            ),
        };
        on_result(&run, wall);
        results.push(run);
    }
    results
}

async fn run_one(job: Job, elf: PathBuf) -> BoardRun {
    let image = match elf::inspect(&elf) {
        Ok(i) => i,
        Err(e) => return error_run(&job, e.to_string()),
    };
    let model_crc = match std::fs::read(&job.scenario.model) {
        Ok(bytes) => crc32(&bytes),
        Err(e) => return error_run(&job, format!("{}: {e}", job.scenario.model.display())),
    };
    if job.board.runner != RunnerKind::Qemu {
        return error_run(
            &job,
            format!(
                "{}: only qemu boards can run on this host (no probe-rs runner for {:?} yet)",
                job.board.name, job.board.runner
            ),
        );
    }
    let kill = KillSwitch::default();
    let limit = job.scenario.timeout;
    let (j, k) = (job.clone(), kill.clone());
    let mut handle = tokio::task::spawn_blocking(move || {
        run_on_qemu(&j.board, &j.scenario, &image, model_crc, &k)
    });
    match tokio::time::timeout(limit, &mut handle).await {
        Ok(Ok(run)) => run,
        Ok(Err(e)) => error_run(&job, format!("board thread failed: {e}")),
        Err(_) => {
            // Kill QEMU; the blocked thread then fails fast and keeps what it had.
            kill.fire();
            match tokio::time::timeout(Duration::from_secs(30), handle).await {
                Ok(Ok(mut run)) => {
                    if run.outcome == Outcome::Passed {
                        run.outcome = Outcome::Error(format!("timed out after {limit:?}"));
                    }
                    run
                }
                _ => error_run(&job, format!("timed out after {limit:?} and did not stop")),
            }
        }
    }
}
