//! Many boards at once: build each (board, model) firmware and run the
//! boards concurrently on blocking threads, each under its own time limit.
//! One board's failure or hang never loses another board's results: results
//! are handed out as each board finishes.
//!
//! A real (probe-rs or uart) board is one piece of hardware: runs on it
//! take the board's lock ([`board_lock`]) first, so two scenarios never
//! flash or drive one board at once; QEMU boards are a fresh process per
//! run and need no lock.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::OwnedMutexGuard;

use crate::cancel::KillSwitch;
use crate::config::ConfigError;
use crate::config::board::{self, Board};
use crate::config::scenario::Scenario;
use crate::driver::{self, BoardDriver};
use crate::elf::{self, FirmwareImage};
use crate::firmware::{self, FirmwareRequest};
use crate::outcome::{BoardRun, Outcome};

/// How long opening the probe, attaching and flashing (or a uart board's
/// flash command) may take before a run is given up; the scenario's own
/// time limit starts after it, as it starts right after boot on QEMU.
pub const FLASH_LIMIT: Duration = Duration::from_secs(300);

/// How long a timed-out board thread gets to notice and hand back what it
/// had.
const GRACE: Duration = Duration::from_secs(30);

/// How long a virtual board's run has, once asked to stop at its time
/// limit, to say where its core was and end QEMU itself before QEMU is
/// killed from outside.
const STOP_GRACE: Duration = Duration::from_secs(5);

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
        outcome: Outcome::Error(message),
        ..BoardRun::new(&job.scenario.name, &job.board.name)
    }
}

/// Builds every job's firmware and runs up to `parallel` boards at once;
/// `on_result` sees each result as soon as its board finishes.
pub async fn run_jobs(
    repo: &Path,
    jobs: Vec<Job>,
    parallel: usize,
    mut on_result: impl FnMut(&BoardRun),
) -> Vec<BoardRun> {
    run_jobs_timed(repo, jobs, parallel, |run, _| on_result(run)).await
}

/// [`run_jobs`], also handing `on_result` the wall time the board took:
/// from its turn to run (not its wait for its board or a free slot) to its
/// result, or the firmware build's time when the build failed. Reports need
/// it; [`BoardRun`] stays what the board produced.
///
/// Builds and runs overlap: a job's board runs as soon as its firmware is
/// built, while later jobs' firmware builds, as many at once as there are
/// build folders ([`firmware::parallel_builds`]). A fat-LTO link keeps one
/// core busy and a virtual board another, so building everything first and
/// running afterwards left a core idle for most of a many-board run.
pub async fn run_jobs_timed(
    repo: &Path,
    jobs: Vec<Job>,
    parallel: usize,
    on_result: impl FnMut(&BoardRun, Duration),
) -> Vec<BoardRun> {
    // Every virtual board runs with hilt's QEMU plugin: built (or found
    // cached) once, before the firmware; a plugin that does not build
    // fails those runs, never leaves them unobserved.
    let observing = if jobs
        .iter()
        .any(|j| j.board.runner == board::RunnerKind::Qemu)
    {
        let repo = repo.to_path_buf();
        tokio::task::spawn_blocking(move || {
            crate::observer::prepare(&repo).map_err(|e| e.to_string())
        })
        .await
        .unwrap_or_else(|e| Err(format!("plugin build task failed: {e}")))
    } else {
        Ok(())
    };
    let builds = Arc::new(tokio::sync::Semaphore::new(firmware::parallel_builds()));
    let runs = Arc::new(tokio::sync::Semaphore::new(parallel.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for job in jobs {
        let (repo, builds, runs) = (repo.to_path_buf(), builds.clone(), runs.clone());
        let observing = observing.clone();
        tasks.spawn(async move {
            let (elf, build_time) = match (observing, job.board.runner) {
                (Err(e), board::RunnerKind::Qemu) => (Err(e), Duration::ZERO),
                _ => build_one(&repo, &job, &builds).await,
            };
            run_built_job(job, elf, build_time, runs).await
        });
    }
    collect(tasks, on_result).await
}

/// Builds (or finds cached) `job`'s firmware once one of `builds`' places
/// is free; the time is the build's own, from that place on.
async fn build_one(
    repo: &Path,
    job: &Job,
    builds: &Arc<tokio::sync::Semaphore>,
) -> (Result<PathBuf, String>, Duration) {
    let _permit = builds.clone().acquire_owned().await;
    let (repo, j) = (repo.to_path_buf(), job.clone());
    let started = Instant::now();
    let elf = tokio::task::spawn_blocking(move || {
        // A pool choice the board cannot meet is the scenario's error,
        // named before any build (the build script would only panic).
        j.scenario
            .pool_layout(&j.board)
            .map_err(|e| e.to_string())?;
        firmware::build(&repo, &FirmwareRequest::for_scenario(&j.board, &j.scenario))
            .map_err(|e| e.to_string())
    })
    .await
    .unwrap_or_else(|e| Err(format!("build task failed: {e}")));
    (elf, started.elapsed())
}

/// Every task's run as it finishes, handed to `on_result` then kept; a task
/// that panicked is an error run, never a lost one.
async fn collect(
    mut tasks: tokio::task::JoinSet<(BoardRun, Duration)>,
    mut on_result: impl FnMut(&BoardRun, Duration),
) -> Vec<BoardRun> {
    let mut results = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (run, wall) = joined.unwrap_or_else(|e| {
            (
                BoardRun {
                    outcome: Outcome::Error(format!("board task failed: {e}")),
                    ..BoardRun::new("", "")
                },
                Duration::ZERO,
            )
        });
        on_result(&run, wall);
        results.push(run);
    }
    results
}

/// The board lock of `name`: one per board name for the whole process, so
/// every run (of any scenario, from any task) that drives that board waits
/// for the one before it.
pub fn board_lock(name: &str) -> Arc<tokio::sync::Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> = OnceLock::new();
    let mut locks = LOCKS
        .get_or_init(Default::default)
        .lock()
        // A panic elsewhere while holding the map cannot leave it half
        // written (insert is the only change): keep using it.
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    locks.entry(name.to_string()).or_default().clone()
}

/// Every (scenario, board) pair to run: each scenario on the boards its
/// `boards` patterns name (each board once), narrowed to `board_filter`
/// (a name or glob) when given.
pub fn jobs_for(
    scenarios: &[Arc<Scenario>],
    boards: &[Board],
    board_filter: Option<&str>,
) -> Result<Vec<Job>, ConfigError> {
    let mut work = Vec::new();
    for scenario in scenarios {
        let mut chosen: Vec<&Board> = Vec::new();
        for pattern in &scenario.boards {
            for b in board::select(boards, pattern)? {
                if !chosen.iter().any(|c| c.name == b.name) {
                    chosen.push(b);
                }
            }
        }
        if let Some(filter) = board_filter {
            chosen.retain(|b| board::glob_match(filter, &b.name));
        }
        work.extend(chosen.into_iter().map(|board| Job {
            scenario: scenario.clone(),
            board: board.clone(),
        }));
    }
    Ok(work)
}

/// Takes `board`'s lock if it is real hardware (see [`board_lock`]).
async fn lock_if_real(board: &Board) -> Option<OwnedMutexGuard<()>> {
    match driver::for_board(board).flash_phase() {
        Some(_) => Some(board_lock(&board.name).lock_owned().await),
        None => None,
    }
}

/// Runs jobs whose firmware is built (or whose build failed, given as the
/// error text), up to `parallel` boards at once. A job waits for its board's
/// lock before it takes one of the `parallel` places, so jobs queued on one
/// real board never hold places other boards could use.
pub async fn run_built(
    built: Vec<(Job, Result<PathBuf, String>)>,
    parallel: usize,
    mut on_result: impl FnMut(&BoardRun),
) -> Vec<BoardRun> {
    let built = built
        .into_iter()
        .map(|(job, elf)| (job, elf, Duration::ZERO))
        .collect();
    run_built_timed(built, parallel, |run, _| on_result(run)).await
}

/// [`run_built`] with wall times, as [`run_jobs_timed`] hands them out; a
/// failed build reports the build time given beside it.
pub async fn run_built_timed(
    built: Vec<(Job, Result<PathBuf, String>, Duration)>,
    parallel: usize,
    on_result: impl FnMut(&BoardRun, Duration),
) -> Vec<BoardRun> {
    let semaphore = Arc::new(tokio::sync::Semaphore::new(parallel.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for (job, elf, build_time) in built {
        tasks.spawn(run_built_job(job, elf, build_time, semaphore.clone()));
    }
    collect(tasks, on_result).await
}

/// Runs `job` on its built `elf` once its board (if real) and one of
/// `runs`' places are free, with the run's wall time; a failed build is
/// the job's error, with the build's time.
async fn run_built_job(
    job: Job,
    elf: Result<PathBuf, String>,
    build_time: Duration,
    runs: Arc<tokio::sync::Semaphore>,
) -> (BoardRun, Duration) {
    let elf = match elf {
        Ok(e) => e,
        Err(message) => return (error_run(&job, message), build_time),
    };
    let _permit = runs.acquire_owned().await;
    let started = Instant::now();
    // A failed run is run again, up to the scenario's `retries`: one that
    // then passes is flaky and says so (its first failure), never a plain
    // pass; one that fails every time keeps its last failure. A board that
    // does not answer is power-cycled (its `power_cycle`) and tried once
    // more, retries or not; one that still does not is *board offline*.
    let mut first_failure = None;
    let (mut attempt, mut retries_left, mut cycled) = (1, job.scenario.retries, false);
    loop {
        let board = lock_if_real(&job.board).await;
        let mut run = run_one(job.clone(), elf.clone(), board).await;
        run.attempts = attempt;
        run.power_cycled = cycled;
        if run.outcome == Outcome::Passed {
            run.flaky = first_failure;
            return (run, started.elapsed());
        }
        let failure = run.outcome.to_string();
        if run.offline
            && !cycled
            && let Some(command) = job.board.power_cycle.clone()
        {
            let board = job.board.clone();
            let cycle = tokio::task::spawn_blocking(move || {
                driver::flash_command::power_cycle(&command, &board)
            })
            .await
            .unwrap_or_else(|e| Err(format!("power_cycle task failed: {e}")));
            match cycle {
                Ok(line) => {
                    first_failure
                        .get_or_insert(format!("{failure} (then power-cycled with `{line}`)"));
                    cycled = true;
                    attempt += 1;
                    continue;
                }
                Err(why) => {
                    run.outcome = Outcome::Error(format!(
                        "board offline: {}; {why}",
                        message_of(&run.outcome)
                    ));
                    return (run, started.elapsed());
                }
            }
        }
        if retries_left == 0 {
            if run.offline {
                let after = if cycled {
                    " (no answer after its power cycle either)"
                } else {
                    ""
                };
                run.outcome = Outcome::Error(format!(
                    "board offline{after}: {}",
                    message_of(&run.outcome)
                ));
            }
            return (run, started.elapsed());
        }
        retries_left -= 1;
        first_failure.get_or_insert(failure);
        attempt += 1;
    }
}

/// The words of a failed outcome (without `ERROR: `).
fn message_of(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Passed => String::new(),
        Outcome::Mismatch(m) | Outcome::Error(m) => m.clone(),
    }
}

async fn run_one(job: Job, elf: PathBuf, board: Option<OwnedMutexGuard<()>>) -> BoardRun {
    let image = match elf::inspect(&elf) {
        Ok(i) => i,
        Err(e) => return error_run(&job, e.to_string()),
    };
    let model_crc = job.scenario.model_file.crc32();
    let driver = driver::for_board(&job.board);
    if let Some(phase) = driver.flash_phase() {
        return run_real_job(job, driver, phase, image, model_crc, board, FLASH_LIMIT).await;
    }
    let kill = KillSwitch::default();
    let limit = job.scenario.timeout;
    let (j, k) = (job.clone(), kill.clone());
    let mut handle = tokio::task::spawn_blocking(move || {
        driver.run(
            &j.board,
            &j.scenario,
            &image,
            model_crc,
            &k,
            Box::new(|| {}),
        )
    });
    match tokio::time::timeout(limit, &mut handle).await {
        Ok(Ok(run)) => run,
        Ok(Err(e)) => error_run(&job, format!("board thread failed: {e}")),
        Err(_) => {
            // Ask the run to stop first: it notices within a poll, reads
            // where the core is through the gdbstub and ends QEMU itself.
            // A thread blocked elsewhere is unblocked by killing QEMU.
            kill.stop();
            let stopped = match tokio::time::timeout(STOP_GRACE, &mut handle).await {
                Ok(joined) => Ok(joined),
                Err(_) => {
                    kill.fire();
                    tokio::time::timeout(Duration::from_secs(30), handle).await
                }
            };
            match stopped {
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

/// A real-board run (probe-rs, or uart with its flash command) on a
/// blocking thread that holds the board's lock until it really ends (even
/// past a timeout: the hardware is still in use until then). Two limits:
/// `flash_limit` up to the firmware being on the board, then the scenario's
/// own from there. On either, the run's [`KillSwitch`] fires, the thread's
/// next wait or memory access fails and the run ends with what it had.
async fn run_real_job(
    job: Job,
    driver: &'static dyn BoardDriver,
    flash_phase: &'static str,
    image: FirmwareImage,
    model_crc: u32,
    board: Option<OwnedMutexGuard<()>>,
    flash_limit: Duration,
) -> BoardRun {
    let kill = KillSwitch::default();
    let (flashed_tx, flashed_rx) = tokio::sync::oneshot::channel::<()>();
    let (j, k) = (job.clone(), kill.clone());
    let handle = tokio::task::spawn_blocking(move || {
        let _board = board;
        let flashed = Box::new(move || {
            let _ = flashed_tx.send(());
        });
        driver.run(&j.board, &j.scenario, &image, model_crc, &k, flashed)
    });
    let limits = Limits {
        flash_phase,
        flash_limit,
    };
    supervise(&job, kill, flashed_rx, handle, limits).await
}

/// The first limit of a real-board run: what it covers (for its error) and
/// how long it is.
#[derive(Debug, Clone, Copy)]
struct Limits {
    flash_phase: &'static str,
    flash_limit: Duration,
}

/// Waits for a board thread under the two limits of [`run_real_job`].
async fn supervise(
    job: &Job,
    kill: KillSwitch,
    flashed: tokio::sync::oneshot::Receiver<()>,
    mut handle: tokio::task::JoinHandle<BoardRun>,
    limits: Limits,
) -> BoardRun {
    let Limits {
        flash_phase,
        flash_limit,
    } = limits;
    let joined = |r: Result<BoardRun, tokio::task::JoinError>| {
        r.unwrap_or_else(|e| error_run(job, format!("board thread failed: {e}")))
    };
    // Phase 1: until flashed (or the thread ends early, e.g. no probe).
    tokio::select! {
        r = &mut handle => return joined(r),
        _ = flashed => {}
        _ = tokio::time::sleep(flash_limit) => {
            kill.fire();
            return match tokio::time::timeout(GRACE, handle).await {
                Ok(r) => {
                    // What the thread said after its cancellation is an
                    // echo of it; the cause is the limit.
                    let mut run = joined(r);
                    run.outcome = Outcome::Error(format!(
                        "{flash_phase} did not finish within {flash_limit:?}"
                    ));
                    run
                }
                Err(_) => error_run(
                    job,
                    format!("{flash_phase} did not finish within {flash_limit:?} and did not stop"),
                ),
            };
        }
    }
    // Phase 2: the scenario's limit, as on QEMU.
    let limit = job.scenario.timeout;
    match tokio::time::timeout(limit, &mut handle).await {
        Ok(r) => joined(r),
        Err(_) => {
            kill.fire();
            match tokio::time::timeout(GRACE, handle).await {
                Ok(r) => {
                    let mut run = joined(r);
                    if run.outcome == Outcome::Passed {
                        run.outcome = Outcome::Error(format!("timed out after {limit:?}"));
                    }
                    run
                }
                Err(_) => error_run(job, format!("timed out after {limit:?} and did not stop")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(timeout: Duration) -> Job {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut scenario = crate::config::scenario::load(
            &repo.join("scenarios/smoke_reshape.toml"),
            &crate::conformance::locate_all(&repo),
        )
        .unwrap();
        scenario.timeout = timeout;
        let board = crate::config::board::load(&repo.join("boards/nrf52840-dk.toml")).unwrap();
        Job {
            scenario: Arc::new(scenario),
            board,
        }
    }

    /// A board thread that reports "flashed" after `flash`, then works
    /// until `work` has passed or (if it `heeds` it) its kill switch fires,
    /// as a probe run does at its next memory access.
    async fn fake_board_thread(
        job: &Job,
        flash: Duration,
        work: Duration,
        heeds: bool,
        flash_limit: Duration,
    ) -> BoardRun {
        let kill = KillSwitch::default();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (k, j) = (kill.clone(), job.clone());
        let handle = tokio::task::spawn_blocking(move || {
            let start = std::time::Instant::now();
            while start.elapsed() < flash {
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = tx.send(());
            let mut run = error_run(&j, String::new());
            run.outcome = Outcome::Passed;
            while start.elapsed() < flash + work {
                if heeds && k.fired() {
                    run.outcome = Outcome::Error("cancelled".into());
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            run
        });
        let limits = Limits {
            flash_phase: driver::for_board(&job.board)
                .flash_phase()
                .unwrap_or("flashing"),
            flash_limit,
        };
        supervise(job, kill, rx, handle, limits).await
    }

    #[tokio::test]
    async fn the_scenario_limit_starts_after_flashing() {
        // Flashing takes longer than the scenario's limit, the run does not.
        let job = job(Duration::from_millis(300));
        let run = fake_board_thread(
            &job,
            Duration::from_millis(400),
            Duration::from_millis(100),
            true,
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(run.outcome, Outcome::Passed);
    }

    #[tokio::test]
    async fn a_hung_run_ends_with_a_timeout_error() {
        let job = job(Duration::from_millis(200));
        let run = fake_board_thread(
            &job,
            Duration::ZERO,
            Duration::from_secs(60),
            true,
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(run.outcome, Outcome::Error("cancelled".into()));
        // A thread that finishes "passed" after its limit is overruled.
        let late = fake_board_thread(
            &job,
            Duration::ZERO,
            Duration::from_millis(400),
            false,
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(late.outcome, Outcome::Error("timed out after 200ms".into()));
    }

    #[tokio::test]
    async fn a_flash_that_never_ends_is_its_own_error() {
        let job = job(Duration::from_secs(5));
        let run = fake_board_thread(
            &job,
            Duration::from_millis(500),
            Duration::from_secs(60),
            true,
            Duration::from_millis(100),
        )
        .await;
        assert_eq!(
            run.outcome,
            Outcome::Error("opening the probe and flashing did not finish within 100ms".into())
        );
    }

    #[test]
    fn one_lock_per_board_name() {
        assert!(Arc::ptr_eq(&board_lock("a"), &board_lock("a")));
        assert!(!Arc::ptr_eq(&board_lock("a"), &board_lock("b")));
    }
}
