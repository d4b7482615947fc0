//! Board drivers: how a scenario gets onto a board and its session runs
//! there — QEMU ([`qemu`]), a debug probe ([`probe_rs`]) or a serial line
//! with a flash command ([`uart`]). Each implements [`BoardDriver`]; the one
//! for a board is chosen from its runner kind in [`for_board`], and nowhere
//! else, so adding a kind of board means one file here and one arm there.
//!
//! ```no_run
//! # fn demo(board: &hilt::config::board::Board, scenario: &hilt::config::scenario::Scenario,
//! #         image: &hilt::elf::FirmwareImage, crc: u32) {
//! let kill = hilt::cancel::KillSwitch::default();
//! let run = hilt::driver::for_board(board).run(board, scenario, image, crc, &kill, Box::new(|| {}));
//! println!("{:?}", run.outcome);
//! # }
//! ```

pub mod flash_command;
pub mod probe_rs;
pub mod qemu;
pub mod uart;

use crate::cancel::KillSwitch;
use crate::config::board::{Board, RunnerKind};
use crate::config::scenario::Scenario;
use crate::elf::FirmwareImage;
use crate::outcome::{BoardRun, Outcome};
use crate::session::RunFailure;

/// Called once the firmware is on the board (the scenario's time limit
/// starts there: flashing a large model takes longer than any run).
pub type OnFlashed = Box<dyn FnOnce() + Send>;

/// One way of driving a board: start or flash it with a firmware image,
/// run the scenario's session on it, and say how it went. Blocking (probe,
/// gdbstub and serial I/O); the orchestrator calls it on a blocking thread.
pub trait BoardDriver: Sync {
    /// Runs `scenario` on `board` with `image` (whose model has CRC
    /// `model_crc`); `kill` ends it from another thread.
    fn run(
        &self,
        board: &Board,
        scenario: &Scenario,
        image: &FirmwareImage,
        model_crc: u32,
        kill: &KillSwitch,
        on_flashed: OnFlashed,
    ) -> BoardRun;

    /// What a real board does before its session (flashing, under a limit
    /// of its own), for the error when that takes too long; `None` for a
    /// virtual board, which has no such phase and needs no lock (each run
    /// gets its own QEMU).
    fn flash_phase(&self) -> Option<&'static str>;
}

/// The driver of `board`: the one place a runner kind becomes behaviour.
pub fn for_board(board: &Board) -> &'static dyn BoardDriver {
    match board.runner {
        RunnerKind::Qemu => &qemu::QemuDriver,
        RunnerKind::ProbeRs => &probe_rs::ProbeRsDriver,
        RunnerKind::Uart => &uart::UartDriver,
    }
}

/// Refuses an ELF built for another board (the board is recorded in the ELF).
pub fn check_image_board(image: &FirmwareImage, board: &Board) -> Result<(), RunFailure> {
    if image.board == board.name {
        return Ok(());
    }
    Err(RunFailure::WrongFirmware(format!(
        "{} was built for {}, not {}",
        image.path.display(),
        image.board,
        board.name
    )))
}

/// Whether `failure`, before the board's Hello, means the board is not
/// there: it could not be started or reached, or it never answered (rather
/// than its firmware crashing, or being the wrong one).
fn unreachable(failure: &RunFailure) -> bool {
    match failure {
        // Its last words: the firmware ran, and failed.
        RunFailure::Link(crate::link::LinkError::FirmwareStopped(_)) => false,
        RunFailure::Start(_) | RunFailure::Link(_) | RunFailure::Stopped(_) => true,
        _ => false,
    }
}

/// Whether a run that ended in `failure` left its core where a backtrace
/// shows why: stopped at its time limit, or stopped by its own last words
/// (a panic, a HardFault).
pub(crate) fn wants_backtrace(failure: &RunFailure) -> bool {
    matches!(
        failure,
        RunFailure::Stopped(_) | RunFailure::Link(crate::link::LinkError::FirmwareStopped(_))
    )
}

/// Reads the stopped `core`'s backtrace into `run` (with the op it was in,
/// named from the scenario's model), or says in its log why there is none.
pub(crate) fn read_backtrace(
    core: &mut dyn crate::backtrace::Core,
    image: &FirmwareImage,
    scenario: &Scenario,
    run: &mut BoardRun,
) {
    let repo = crate::paths::find_repo_from(&image.path);
    let op_name = |n: usize| scenario.model_file.op_name(n).to_string();
    match crate::backtrace::capture(core, &image.path, repo.as_deref(), &op_name) {
        Ok(backtrace) => run.backtrace = Some(backtrace),
        Err(e) => run.logs.push(format!("hilt: no backtrace: {e}")),
    }
}

/// The outcome from how the session ended and what the steps say.
pub(crate) fn conclude(
    mut run: BoardRun,
    result: Result<(), RunFailure>,
    kill: &KillSwitch,
    scenario: &Scenario,
) -> BoardRun {
    if let Err(e) = result {
        run.offline = !run.answered && unreachable(&e);
        let mut message = e.to_string();
        if kill.fired() {
            message = format!("timed out after {:?} ({message})", scenario.timeout);
        }
        // The firmware's last words, unless it only introduced itself or
        // they say what the message already does.
        if let Some(last) = run
            .logs
            .iter()
            .rev()
            .find(|l| !l.starts_with("hilt: "))
            .filter(|l| !l.starts_with("hilt firmware:"))
            .filter(|l| {
                !l.split_once(": ")
                    .is_some_and(|(_, tail)| message.ends_with(tail))
            })
        {
            message.push_str(&format!("; firmware said: {last}"));
        }
        if let Some(backtrace) = &run.backtrace {
            message.push('\n');
            message.push_str(backtrace.to_string().trim_end());
        }
        run.outcome = Outcome::Error(message);
    } else if let Some(bad) = run.steps.iter().find(|s| s.mismatch.is_some()) {
        run.outcome = Outcome::Mismatch(format!(
            "{} step {}: {}",
            bad.case,
            bad.step,
            bad.mismatch.as_deref().unwrap_or_default()
        ));
    }
    run
}
