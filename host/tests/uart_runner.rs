//! The `uart` runner, for boards hilt reaches only through a serial line
//! and flashes with the board's own `flash_command`, tested against QEMU's
//! `-serial pty`: the "board" is QEMU running the firmware built for
//! `qemu-mps2-an386-uart` (its UART0), the "flasher" is
//! `fixtures/qemu-flash.sh`, which (re)starts QEMU on the new ELF and links
//! its pty at the board's fixed `serial_port`, as a USB adapter's
//! `/dev/serial/by-id/…` name stays put. No gdbstub is used: the host has
//! nothing but the serial line, as with real hardware.
//!
//! Needs `qemu-system-arm` (skipped with a message without it, unless
//! `HILT_QEMU_REQUIRED=1`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use hilt::config::board::Board;
use hilt::orchestrate::{Job, run_jobs};
use hilt::outcome::Outcome;

use common::repo;

/// A board folder of its own with one uart-runner board, and the QEMU the
/// flasher started for it (killed on drop).
struct SerialBoard {
    dir: PathBuf,
    port: PathBuf,
}

impl Drop for SerialBoard {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.port.with_extension("pid")) {
            // SIGKILL: this QEMU blocks SIGTERM while its guest spins (it
            // outlived the test, holding a core, when sent one).
            let _ = Command::new("kill").args(["-9", pid.trim()]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl SerialBoard {
    /// `qemu-mps2-an386-uart` turned into a serial-only board: runner
    /// `uart`, a fixed port path, and `flash` as its flash command.
    fn new(tag: &str, flash: Option<&[&str]>) -> Self {
        let dir = std::env::temp_dir().join(format!("hilt-uart-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("qemu-mps2-an386-uart")).unwrap();
        std::fs::copy(
            repo().join("boards/qemu-mps2-an386-uart/memory.x"),
            dir.join("qemu-mps2-an386-uart/memory.x"),
        )
        .unwrap();
        let port = dir.join("tty");
        let shipped =
            std::fs::read_to_string(repo().join("boards/qemu-mps2-an386-uart.toml")).unwrap();
        // Everything but the runner and its [qemu] table stays as shipped.
        let mut toml = String::new();
        let mut skipping = false;
        for line in shipped.lines() {
            if line.starts_with('[') {
                skipping = line == "[qemu]";
            }
            if skipping {
                continue;
            }
            if line.starts_with("runner =") {
                toml.push_str(&format!(
                    "runner = \"uart\"\nserial_port = {:?}\n",
                    port.display().to_string()
                ));
                if let Some(argv) = flash {
                    toml.push_str(&format!("flash_command = {argv:?}\n"));
                }
            } else {
                toml.push_str(line);
                toml.push('\n');
            }
        }
        std::fs::write(dir.join("qemu-mps2-an386-uart.toml"), toml).unwrap();
        SerialBoard { dir, port }
    }

    fn board(&self) -> Board {
        hilt::config::board::load(&self.dir.join("qemu-mps2-an386-uart.toml")).unwrap()
    }

    /// Runs the flasher by hand (for a board without a flash command).
    fn flash_by_hand(&self, elf: &Path) {
        let status = Command::new("sh")
            .arg(flasher())
            .arg("mps2-an386")
            .arg(elf)
            .arg(&self.port)
            .status()
            .unwrap();
        assert!(status.success());
    }
}

fn flasher() -> String {
    repo()
        .join("host/tests/fixtures/qemu-flash.sh")
        .display()
        .to_string()
}

fn flash_with_qemu() -> Vec<String> {
    vec![
        "sh".into(),
        flasher(),
        "mps2-an386".into(),
        "{elf}".into(),
        "{serial_port}".into(),
    ]
}

fn scenario(path: &str) -> Arc<hilt::config::scenario::Scenario> {
    Arc::new(
        hilt::config::scenario::load(&repo().join(path), &hilt::conformance::locate_all(&repo()))
            .unwrap(),
    )
}

fn run(board: &Board, scenarios: &[&str]) -> Vec<hilt::outcome::BoardRun> {
    let jobs = scenarios
        .iter()
        .map(|s| Job {
            scenario: scenario(s),
            board: board.clone(),
        })
        .collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(run_jobs(&repo(), jobs, 2, |_| {}))
}

fn error_of(run: &hilt::outcome::BoardRun) -> &str {
    match &run.outcome {
        Outcome::Error(m) => m,
        other => panic!("{}: expected an error, got {other:?}", run.scenario),
    }
}

#[test]
fn scenarios_pass_over_a_serial_line_each_flashed_by_the_board_command() {
    if !common::qemu_available("uart runner tests") {
        return;
    }
    let argv = flash_with_qemu();
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let serial = SerialBoard::new("cli", Some(&argv));
    let reports = serial.dir.join("reports");
    // Two models: each run must flash its own firmware before it talks.
    let mut args: Vec<std::ffi::OsString> = [
        "run",
        "scenarios/smoke_reshape.toml",
        "scenarios/keyword_scrambled_svdf.toml",
        "--board",
        "qemu-mps2-an386-uart",
    ]
    .iter()
    .map(Into::into)
    .collect();
    args.extend(["--boards-dir".into(), serial.dir.clone().into_os_string()]);
    args.extend(["--report-dir".into(), reports.clone().into_os_string()]);
    let out = common::hilt(&args);
    let stdout = common::succeeded(&out);
    assert!(
        stdout.contains("2 board runs: 2 passed, 0 failed"),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("keyword_scrambled_svdf") && l.contains("PASS (9 steps)")),
        "{stdout}"
    );
    // The run's log says how the board was flashed, and that the host could
    // not read memory to check the guards itself.
    let summary = std::fs::read_to_string(reports.join("summary.json")).unwrap();
    assert!(
        summary.contains("hilt: flashed qemu-mps2-an386-uart with `sh"),
        "{summary}"
    );
}

#[test]
fn a_board_without_a_flash_command_must_already_run_the_scenario_firmware() {
    if !common::qemu_available("uart runner tests") {
        return;
    }
    let serial = SerialBoard::new("preflashed", None);
    let board = serial.board();
    let smoke = scenario("scenarios/smoke_reshape.toml");
    let elf = hilt::firmware::build(
        &repo(),
        &hilt::firmware::FirmwareRequest::for_scenario(&board, &smoke),
    )
    .unwrap();
    serial.flash_by_hand(&elf);
    let results = run(&board, &["scenarios/smoke_reshape.toml"]);
    assert_eq!(results[0].outcome, Outcome::Passed, "{:?}", results[0].logs);
    // Another model: the Hello's model hash gives the board away.
    let results = run(&board, &["scenarios/tiny_convnet_int8.toml"]);
    let message = error_of(&results[0]);
    assert!(
        message.contains("firmware embeds a different model")
            && message.contains("qemu-mps2-an386-uart has no flash_command"),
        "{message}"
    );
}

#[test]
fn a_hung_board_and_a_garbled_frame_over_the_serial_line_are_clear_errors() {
    if !common::qemu_available("uart runner tests") {
        return;
    }
    let argv = flash_with_qemu();
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let serial = SerialBoard::new("faults", Some(&argv));
    let results = run(
        &serial.board(),
        &[
            "host/tests/fixtures/hang.toml",
            "host/tests/fixtures/corrupt.toml",
        ],
    );
    let by = |s: &str| results.iter().find(|r| r.scenario == s).unwrap();
    let hang = error_of(by("hang"));
    assert!(hang.starts_with("timed out after 15s"), "{hang}");
    let corrupt = error_of(by("corrupt"));
    assert!(
        corrupt.contains("garbled frame from the target: CRC mismatch"),
        "{corrupt}"
    );
}

#[test]
fn a_failing_flash_command_and_a_missing_port_name_the_culprit() {
    if !common::qemu_available("uart runner tests") {
        return;
    }
    let failing = SerialBoard::new(
        "badflash",
        Some(&["sh", "-c", "echo no board on the bench >&2; exit 3"]),
    );
    let results = run(&failing.board(), &["scenarios/smoke_reshape.toml"]);
    let message = error_of(&results[0]);
    assert!(
        message.contains("flash command `sh -c echo no board on the bench >&2; exit 3` failed (exit status: 3): no board on the bench"),
        "{message}"
    );
    let unplugged = SerialBoard::new("noport", None);
    let results = run(&unplugged.board(), &["scenarios/smoke_reshape.toml"]);
    let message = error_of(&results[0]);
    let port = unplugged.port.display().to_string();
    assert!(
        message.contains(&format!("serial port {port}: cannot open it")),
        "{message}"
    );
}
