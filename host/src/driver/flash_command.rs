//! A board's own commands: flashing a board that has no probe hilt drives
//! itself (the `uart` runner): the board file's `flash_command`, run with
//! its placeholders filled in, as twister's `--device-flash-command` does;
//! and its `power_cycle`, run when the board stops answering. Whatever the
//! tool (a serial bootloader, a vendor flasher, probe-rs' CLI, uhubctl, a
//! relay), hilt only needs its exit status and its last words.

use std::process::{Command, Stdio};

use crate::cancel::KillSwitch;
use crate::config::board::Board;
use crate::elf::FirmwareImage;

/// Why flashing failed.
#[derive(Debug, thiserror::Error)]
pub enum FlashError {
    /// The program could not be started.
    #[error("flash command `{program}` could not be started: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// It ran and failed.
    #[error("flash command `{command}` failed ({status}){output}")]
    Failed {
        /// The command line as run.
        command: String,
        /// Its exit status.
        status: String,
        /// The end of what it printed, prefixed with ": ".
        output: String,
    },
    /// It was killed (the run's time limit).
    #[error("flash command `{0}` was stopped: the run's time limit passed")]
    Cancelled(String),
}

/// The command with `{elf}`, `{board}` and `{serial_port}` replaced.
pub fn expand(command: &[String], board: &Board, image: &FirmwareImage) -> Vec<String> {
    command
        .iter()
        .map(|arg| {
            arg.replace("{elf}", &image.path.to_string_lossy())
                .replace("{board}", &board.name)
                .replace("{serial_port}", board.serial_port.as_deref().unwrap_or(""))
        })
        .collect()
}

/// Runs the board's `power_cycle` command ({board} and {serial_port}
/// filled in): the command line as run, or why it failed (its exit status
/// and last lines).
pub fn power_cycle(command: &[String], board: &Board) -> Result<String, String> {
    let argv: Vec<String> = command
        .iter()
        .map(|arg| {
            arg.replace("{board}", &board.name)
                .replace("{serial_port}", board.serial_port.as_deref().unwrap_or(""))
        })
        .collect();
    let line = argv.join(" ");
    match run_tool(&argv, &KillSwitch::default()) {
        Ok(done) if done.success => Ok(line),
        Ok(done) => Err(format!(
            "power_cycle `{line}` failed ({}){}",
            done.status, done.tail
        )),
        Err(ToolError::Empty) => Err("power_cycle is empty".into()),
        Err(ToolError::Spawn { program, source }) => Err(format!(
            "power_cycle `{line}` could not be started ({program}: {source})"
        )),
    }
}

/// Runs the board's flash command to the end; `kill` stops it.
pub fn run_flash_command(
    command: &[String],
    board: &Board,
    image: &FirmwareImage,
    kill: &KillSwitch,
    logs: &mut Vec<String>,
) -> Result<(), FlashError> {
    let argv = expand(command, board, image);
    let line = argv.join(" ");
    let done = run_tool(&argv, kill).map_err(|e| match e {
        ToolError::Empty => FlashError::Failed {
            command: line.clone(),
            status: "empty command".into(),
            output: String::new(),
        },
        ToolError::Spawn { program, source } => FlashError::Spawn { program, source },
    })?;
    logs.push(format!("hilt: flashed {} with `{line}`", board.name));
    if done.success {
        return Ok(());
    }
    if kill.fired() {
        return Err(FlashError::Cancelled(line));
    }
    Err(FlashError::Failed {
        command: line,
        status: done.status,
        output: done.tail,
    })
}

/// How a board's own command (flash, power cycle) ended.
#[derive(Debug)]
pub struct ToolRun {
    /// Whether it exited 0.
    pub success: bool,
    /// Its exit status, in words.
    pub status: String,
    /// Its last lines of output, `: a | b`, or empty.
    pub tail: String,
}

/// A board command that could not run at all.
#[derive(Debug)]
pub enum ToolError {
    /// No program given.
    Empty,
    /// The program could not be started.
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Runs `argv` to the end (`kill` stops it) and keeps what it said.
pub fn run_tool(argv: &[String], kill: &KillSwitch) -> Result<ToolRun, ToolError> {
    let (program, args) = argv.split_first().ok_or(ToolError::Empty)?;
    let spawn_error = |source| ToolError::Spawn {
        program: program.clone(),
        source,
    };
    let mut child = crate::children::spawn(
        Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .map_err(spawn_error)?;
    kill.arm(child.child().id());
    let output = child.wait_with_output();
    kill.disarm();
    let output = output.map_err(spawn_error)?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(5)..];
    Ok(ToolRun {
        success: output.status.success(),
        status: output.status.to_string(),
        tail: if tail.is_empty() {
            String::new()
        } else {
            format!(": {}", tail.join(" | "))
        },
    })
}
