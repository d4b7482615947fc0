//! End to end on virtual boards: real firmware under QEMU, the host talking
//! to it through the gdbstub and RTT, or over the board's UART on a pty.
//!
//! Needs `qemu-system-arm` and the thumb targets (`ci/setup.sh` installs
//! both). Without them the tests say so and pass, unless
//! `HILT_QEMU_REQUIRED=1` (as in `.ci/run`).

mod common;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use hilt::cancel::KillSwitch;
use hilt::config::board::load_all;
use hilt::driver::qemu::run_on_qemu;
use hilt::orchestrate::{Job, run_jobs};
use hilt::outcome::Outcome;

use common::{hilt, repo};

fn scenario(path: &str) -> Arc<hilt::config::scenario::Scenario> {
    Arc::new(
        hilt::config::scenario::load(&repo().join(path), &hilt::conformance::locate_all(&repo()))
            .unwrap(),
    )
}

/// The lines with cycle figures, without the wall time a board line ends
/// with (host time, which no two runs share).
fn cycles_lines(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| l.contains("cycles"))
        .map(|l| {
            l.rsplit_once("   ")
                .filter(|(_, wall)| wall.ends_with(" s wall"))
                .map_or(l, |(figures, _)| figures)
                .to_string()
        })
        .collect()
}

#[test]
fn smoke_scenario_passes_on_every_virtual_board_with_repeatable_cycles() {
    if !common::qemu_available("QEMU end-to-end tests") {
        return;
    }
    let first = hilt(["run", "scenarios/smoke_reshape.toml"]);
    let out = String::from_utf8_lossy(&first.stdout).into_owned();
    assert!(
        first.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&first.stderr)
    );
    for board in [
        "qemu-mps2-an386",
        "qemu-mps2-an386-armv6m",
        "qemu-mps2-an386-custom",
        "qemu-mps2-an386-uart",
        "qemu-mps2-an500",
        "qemu-mps2-an505",
        "qemu-netduinoplus2",
        "qemu-netduinoplus2-uart",
    ] {
        assert!(
            out.lines()
                .any(|l| l.starts_with(board) && l.contains("PASS")),
            "{board} did not pass:\n{out}"
        );
    }
    assert!(out.contains("8 board runs: 8 passed, 0 failed"), "{out}");
    let second = hilt(["run", "scenarios/smoke_reshape.toml"]);
    let again = String::from_utf8_lossy(&second.stdout).into_owned();
    let (mut a, mut b) = (cycles_lines(&out), cycles_lines(&again));
    a.sort();
    b.sort();
    assert!(!a.is_empty());
    assert_eq!(a, b, "cycle counts differ between two runs under -icount");
}

#[test]
fn a_hung_board_and_a_garbled_frame_fail_alone_and_others_keep_their_results() {
    if !common::qemu_available("QEMU end-to-end tests") {
        return;
    }
    let boards = load_all(&repo().join("boards")).unwrap();
    let board = |name: &str| boards.iter().find(|b| b.name == name).unwrap().clone();
    let jobs = vec![
        Job {
            scenario: scenario("scenarios/smoke_reshape.toml"),
            board: board("qemu-netduinoplus2"),
        },
        Job {
            scenario: scenario("host/tests/fixtures/hang.toml"),
            board: board("qemu-mps2-an386"),
        },
        Job {
            scenario: scenario("host/tests/fixtures/corrupt.toml"),
            board: board("qemu-mps2-an500"),
        },
    ];
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut seen = Vec::new();
    let results = runtime.block_on(run_jobs(&repo(), jobs, 3, |r| seen.push(r.board.clone())));
    assert_eq!(seen.len(), 3);
    let by = |s: &str| results.iter().find(|r| r.scenario == s).unwrap();
    assert_eq!(by("smoke_reshape").outcome, Outcome::Passed);
    match &by("hang").outcome {
        Outcome::Error(m) => assert!(m.contains("timed out after 15s"), "{m}"),
        other => panic!("hang: {other:?}"),
    }
    match &by("corrupt").outcome {
        Outcome::Error(m) => assert!(
            m.contains("garbled frame from the target: CRC mismatch"),
            "{m}"
        ),
        other => panic!("corrupt: {other:?}"),
    }
}

#[test]
fn killing_qemu_mid_run_ends_in_a_clear_error() {
    if !common::qemu_available("QEMU end-to-end tests") {
        return;
    }
    // Over RTT the gdbstub connection drops; over a UART the pty does.
    let boards = load_all(&repo().join("boards")).unwrap();
    for (name, expected) in [
        ("qemu-mps2-an386", "connection to the target lost"),
        ("qemu-mps2-an386-uart", "serial port /dev/pts/"),
    ] {
        let board = boards.iter().find(|b| b.name == name).unwrap().clone();
        let message = kill_mid_run(board);
        eprintln!("{name}: {message}");
        assert!(message.contains(expected), "{name}: {message}");
    }
}

/// Runs the hanging firmware on `board`, kills its QEMU from outside once
/// the run is under way, and returns the run's error.
fn kill_mid_run(board: hilt::config::board::Board) -> String {
    let scenario = scenario("host/tests/fixtures/hang.toml");
    let elf = hilt::firmware::build(
        &repo(),
        &hilt::firmware::FirmwareRequest::for_scenario(&board, &scenario),
    )
    .unwrap();
    let image = hilt::elf::inspect(&elf).unwrap();
    let crc = hilt_proto::crc::crc32(&std::fs::read(&scenario.model).unwrap());
    let kill = KillSwitch::default();
    let k = kill.clone();
    let handle = std::thread::spawn(move || run_on_qemu(&board, &scenario, &image, crc, &k));
    let pid = loop {
        if let Some(pid) = kill.pid() {
            break pid;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Let it get as far as the (hanging) invoke, then kill QEMU from outside.
    std::thread::sleep(Duration::from_secs(3));
    Command::new("kill")
        .arg("-9")
        .arg(pid.to_string())
        .status()
        .unwrap();
    let run = handle.join().unwrap();
    match run.outcome {
        Outcome::Error(m) => m,
        other => panic!("{other:?}"),
    }
}
