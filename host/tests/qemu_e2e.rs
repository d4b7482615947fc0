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
        "qemu-mps3-an547",
        "qemu-netduinoplus2",
        "qemu-netduinoplus2-uart",
    ] {
        assert!(
            out.lines()
                .any(|l| l.starts_with(board) && l.contains("PASS")),
            "{board} did not pass:\n{out}"
        );
    }
    assert!(out.contains("9 board runs: 9 passed, 0 failed"), "{out}");
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
        // Stopped at its limit, the run says where the core was: the
        // fault's endless loop in the agent.
        Outcome::Error(m) => {
            assert!(m.contains("timed out after 15s"), "{m}");
            assert!(m.contains("the core was at pc 0x"), "{m}");
            assert!(m.contains(" in hilt_agent::"), "{m}");
            // And how it got there: the backtrace the host unwound, from
            // the fault's endless loop down to the firmware's main.
            assert!(m.contains("\nbacktrace:\n"), "{m}");
            let hang = m.find("in hilt_agent::faults::hang at target/agent/src/faults.rs:");
            let main = m.find("__cortex_m_rt_main at target/firmware/src/main.rs:");
            assert!(hang.is_some() && hang < main, "{m}");
        }
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
    // Over RTT the gdbstub connection drops, over a UART the pty does:
    // either way the error says QEMU itself is gone, and how.
    let boards = load_all(&repo().join("boards")).unwrap();
    for name in ["qemu-mps2-an386", "qemu-mps2-an386-uart"] {
        let board = boards.iter().find(|b| b.name == name).unwrap().clone();
        let message = kill_mid_run(board);
        eprintln!("{name}: {message}");
        assert!(
            message.contains("qemu-system-arm exited during the run (killed by signal 9, SIGKILL)"),
            "{name}: {message}"
        );
        assert!(!message.contains("Broken pipe"), "{name}: {message}");
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
        // A run that ends before its QEMU starts would leave this waiting
        // for ever: its outcome is the failure.
        if handle.is_finished() {
            panic!(
                "the run ended before QEMU started: {:?}",
                handle.join().unwrap().outcome
            );
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

/// A scenario file in a folder of its own, outside the repository, whose
/// paths point at the repository's model and data.
fn scenario_outside(name: &str, body: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("hilt-e2e-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.toml"));
    let scenarios = repo().join("scenarios");
    std::fs::write(
        &path,
        body.replace("@SCENARIOS@", &scenarios.display().to_string()),
    )
    .unwrap();
    path
}

#[test]
fn every_iteration_computes_on_the_steps_input_though_the_plan_reuses_its_bytes() {
    if !common::qemu_available("QEMU end-to-end tests") {
        return;
    }
    let model = "scenarios/models/tiny_convnet_int8.tflite";
    // The premise: the board's plan puts a later activation over the input
    // (as TFLM's does), so a second invoke on what is left there would
    // compute on other bytes.
    let layout = common::succeeded(&hilt([
        "layout",
        model,
        "--board",
        "qemu-mps2-an386",
        "--format",
        "json",
    ]));
    let layout: serde_json::Value = serde_json::from_str(&layout).unwrap();
    let buffers = layout["buffers"].as_array().unwrap();
    let range = |b: &serde_json::Value| {
        let offset = b["offset"].as_u64().unwrap();
        (offset, offset + b["size"].as_u64().unwrap())
    };
    let input = buffers.iter().find(|b| b["tensor"] == 0).unwrap();
    let (start, end) = range(input);
    assert!(
        buffers
            .iter()
            .any(|b| b["first_step"].as_u64() > input["last_step"].as_u64()
                && range(b).0 < end
                && start < range(b).1),
        "no later buffer reuses the input's bytes: the test no longer covers the case"
    );
    let scenario = scenario_outside(
        "iterations",
        r#"model = "@SCENARIOS@/models/tiny_convnet_int8.tflite"
compare = "exact"
expected_from_host = true
boards = ["qemu-mps2-an386"]
iterations = 3
timeout_s = 120

[[steps]]
inputs = ["@SCENARIOS@/data/tiny_convnet_in.bin"]

[[steps]]
inputs = ["@SCENARIOS@/data/tiny_convnet_in.bin"]
"#,
    );
    let reports = scenario.with_file_name("reports");
    let out = hilt([
        "run".as_ref(),
        scenario.as_os_str(),
        "--repo".as_ref(),
        repo().as_os_str(),
        "--report-dir".as_ref(),
        reports.as_os_str(),
    ]);
    let stdout = common::succeeded(&out);
    assert!(
        stdout.contains("PASS (2 steps)"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The live children of `pid` whose command is `name`.
fn children_named(pid: u32, name: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let Some((head, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let comm = head.split_once(" (").map_or("", |(_, c)| c);
        let mut fields = rest.split_whitespace();
        let (state, ppid) = (fields.next(), fields.next());
        if comm == name && ppid == Some(&pid.to_string()) && state != Some("Z") {
            found.push(entry.file_name().to_string_lossy().parse().unwrap());
        }
    }
    found
}

/// Whether process `pid` still runs (a zombie does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(") ")
            .is_some_and(|(_, r)| !r.starts_with('Z'))
    })
}

#[cfg(target_os = "linux")]
#[test]
fn a_cancelled_hilt_leaves_no_qemu_running() {
    if !common::qemu_available("QEMU end-to-end tests") {
        return;
    }
    let reports = std::env::temp_dir().join(format!("hilt-e2e-{}-cancel", std::process::id()));
    for (signal, code) in [("TERM", 143), ("INT", 130)] {
        let mut hilt = Command::new(env!("CARGO_BIN_EXE_hilt"))
            .current_dir(repo())
            .args(["run", "host/tests/fixtures/hang.toml", "--report-dir"])
            .arg(&reports)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Wait for its QEMU (the first run may build the firmware first).
        let deadline = std::time::Instant::now() + Duration::from_secs(300);
        let qemu = loop {
            if let Some(&pid) = children_named(hilt.id(), "qemu-system-arm").first() {
                break pid;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no QEMU started within 300 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        std::thread::sleep(Duration::from_millis(500));
        Command::new("kill")
            .args([format!("-{signal}"), hilt.id().to_string()])
            .status()
            .unwrap();
        let status = hilt.wait().unwrap();
        let mut stderr = String::new();
        std::io::Read::read_to_string(hilt.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        assert_eq!(status.code(), Some(code), "SIG{signal}: {status}\n{stderr}");
        assert!(
            stderr.contains(&format!("hilt: SIG{signal}: stopped 1 child process")),
            "{stderr}"
        );
        let gone = std::time::Instant::now() + Duration::from_secs(5);
        while alive(qemu) && std::time::Instant::now() < gone {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            !alive(qemu),
            "QEMU {qemu} still runs after hilt was sent SIG{signal}"
        );
    }
}

/// A firmware of the model's kernels only, for a model smaller than the
/// build's own seed model: its slot is just the model's size, so the
/// build's placeholder is the model itself (the seed would not fit).
#[test]
fn a_small_model_runs_on_a_firmware_of_its_own_kernels() {
    if !common::qemu_available("QEMU end-to-end tests") {
        return;
    }
    let scenario = scenario_outside(
        "own-kernels",
        r#"model = "@SCENARIOS@/models/reshape_int8.tflite"
compare = "exact"
expected_from_host = true
boards = ["qemu-mps2-an386"]
kernels = "model"

[[steps]]
inputs = ["@SCENARIOS@/data/reshape_in.bin"]
"#,
    );
    let out = hilt([std::ffi::OsStr::new("run"), scenario.as_os_str()]);
    let stdout = common::succeeded(&out);
    assert!(
        stdout.contains("1 board runs: 1 passed, 0 failed"),
        "{stdout}"
    );
}
