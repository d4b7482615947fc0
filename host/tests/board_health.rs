//! Board health: a board that stops answering is power-cycled (its
//! `power_cycle` command) and tried once more; one that still does not
//! answer, or has no power cycle, is *board offline*, apart from model
//! failures in every report; a power cycle that fails says how.
//!
//! The board is `qemu-mps2-an386-uart` (a copy in a scratch boards folder,
//! with a `power_cycle`), running a firmware built with
//! `silent-until-power-cycled`: it says nothing until the file
//! `hilt-power-cycled` is in QEMU's working folder, which the test's power
//! cycle, `touch hilt-power-cycled`, creates there.

mod common;

use std::path::{Path, PathBuf};

use common::repo;

/// A scratch folder with the scenario and a boards folder whose
/// `qemu-mps2-an386-uart` has `power_cycle` (none when `None`).
fn setup(name: &str, power_cycle: Option<&str>) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hilt-health-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let boards = dir.join("boards");
    std::fs::create_dir_all(boards.join("qemu-mps2-an386-uart")).unwrap();
    let shipped = repo().join("boards");
    let mut toml = std::fs::read_to_string(shipped.join("qemu-mps2-an386-uart.toml")).unwrap();
    if let Some(command) = power_cycle {
        toml = toml.replacen(
            "transport = \"uart\"\n",
            &format!("transport = \"uart\"\npower_cycle = {command}\n"),
            1,
        );
    }
    std::fs::write(boards.join("qemu-mps2-an386-uart.toml"), toml).unwrap();
    std::fs::copy(
        shipped.join("qemu-mps2-an386-uart/memory.x"),
        boards.join("qemu-mps2-an386-uart/memory.x"),
    )
    .unwrap();
    std::fs::write(
        dir.join("silent.toml"),
        "conformance = \"tflm_hello_world_int8\"\nboards = [\"qemu-mps2-an386-uart\"]\n\
         kernels = \"model\"\nfirmware_features = [\"silent-until-power-cycled\"]\ntimeout_s = 4\n",
    )
    .unwrap();
    dir
}

/// `hilt run` of the silent scenario from `dir`, with its boards.
fn run(dir: &Path) -> (bool, String) {
    let args = [
        "silent.toml",
        "--boards-dir",
        "boards",
        "--report-dir",
        "reports",
    ];
    let results = ["--results", "results.sqlite"];
    common::hilt_in(dir, &[], "run", &[&args[..], &results[..]].concat())
}

#[test]
fn a_board_that_stops_answering_is_power_cycled_or_reported_offline() {
    if !common::qemu_available("board health tests") || common::conformance_models().is_none() {
        return;
    }
    // Power-cycled, it answers: the run passes, flaky, saying why.
    let dir = setup("cycled", Some("[\"touch\", \"hilt-power-cycled\"]"));
    let (ok, said) = run(&dir);
    assert!(ok, "{said}");
    assert!(
        said.contains("FLAKY: passed on attempt 2 of 2; the first failed: ERROR: ")
            && said.contains("(then power-cycled with `touch hilt-power-cycled`)"),
        "{said}"
    );
    assert!(dir.join("hilt-power-cycled").is_file());
    // No power cycle: board offline, in every report, not a model failure.
    let dir = setup("offline", None);
    let (ok, said) = run(&dir);
    assert!(!ok);
    assert!(
        said.contains("ERROR: board offline: ")
            && said.contains("(1 of them board offline, not a model's failure)"),
        "{said}"
    );
    let junit = std::fs::read_to_string(dir.join("reports/junit.xml")).unwrap();
    assert!(junit.contains("type=\"board-offline\""), "{junit}");
    let summary = std::fs::read_to_string(dir.join("reports/summary.json")).unwrap();
    assert!(summary.contains("\"offline\": true"), "{summary}");
    let html = std::fs::read_to_string(dir.join("reports/report.html")).unwrap();
    assert!(html.contains("OFFLINE"));
    let history = std::process::Command::new(env!("CARGO_BIN_EXE_hilt"))
        .current_dir(&dir)
        .args(["history", "--results", "results.sqlite"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&history.stdout).contains("OFFLINE"));
    // A power cycle that fails: its status and words, and still offline.
    let dir = setup(
        "cycle-fails",
        Some("[\"sh\", \"-c\", \"echo relay 3 does not answer; exit 3\"]"),
    );
    let (ok, said) = run(&dir);
    assert!(!ok);
    assert!(
        said.contains("board offline: ")
            && said.contains(
                "power_cycle `sh -c echo relay 3 does not answer; exit 3` failed (exit status: 3): relay 3 does not answer"
            ),
        "{said}"
    );
}
