//! Flashing a board that has no probe hilt drives itself (the `uart`
//! runner): the board file's `flash_command`, run with its placeholders
//! filled in, as twister's `--device-flash-command` does. Whatever the tool
//! (a serial bootloader, a vendor flasher, probe-rs' CLI), hilt only needs
//! its exit status; its output goes into the run's log.

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
    let (program, args) = argv.split_first().ok_or_else(|| FlashError::Failed {
        command: line.clone(),
        status: "empty command".into(),
        output: String::new(),
    })?;
    let mut child = crate::children::spawn(
        Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .map_err(|source| FlashError::Spawn {
        program: program.clone(),
        source,
    })?;
    kill.arm(child.child().id());
    let output = child.wait_with_output();
    kill.disarm();
    let output = output.map_err(|source| FlashError::Spawn {
        program: program.clone(),
        source,
    })?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    logs.push(format!("hilt: flashed {} with `{line}`", board.name));
    if output.status.success() {
        return Ok(());
    }
    if kill.fired() {
        return Err(FlashError::Cancelled(line));
    }
    let tail = &lines[lines.len().saturating_sub(5)..];
    Err(FlashError::Failed {
        command: line,
        status: output.status.to_string(),
        output: if tail.is_empty() {
            String::new()
        } else {
            format!(": {}", tail.join(" | "))
        },
    })
}
