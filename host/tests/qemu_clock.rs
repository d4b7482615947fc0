//! The virtual boards' clock, calibrated: a firmware whose invoke is a
//! loop of exactly 100,000 instructions (`calibration-loop`) must report
//! 100,000 instructions, give or take a tick of its counter, on each
//! virtual machine and clock. Under `-icount shift=0` one instruction is one
//! nanosecond of virtual time, so on the 25 MHz MPS2 boards a SysTick
//! count is 40 instructions; `sleep=off` keeps idle time out of it. A board
//! file with another clock or shift, or QEMU flags that let host time in,
//! would move these figures.
//!
//! Skipped (with a message) without `qemu-system-arm`, unless
//! `HILT_QEMU_REQUIRED=1`.

mod common;

use std::sync::Arc;

use hilt::config::board::load_all;
use hilt::orchestrate::{Job, run_jobs};

use common::repo;

/// What the loop runs: 50,000 passes of `subs` + `bne`.
const LOOP_INSTRUCTIONS: u64 = 100_000;

#[test]
fn one_count_of_every_virtual_clock_is_the_instructions_its_board_says() {
    if !common::qemu_available("clock calibration") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("hilt-clock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scenarios = repo().join("scenarios");
    let path = dir.join("calibration.toml");
    std::fs::write(
        &path,
        format!(
            "model = {:?}\nexpected_from_host = true\nboards = [\"qemu-*\"]\nfirmware_features = [\"calibration-loop\"]\ntimeout_s = 60\n\n[[steps]]\ninputs = [{:?}]\n",
            scenarios.join("models/reshape_int8.tflite").display().to_string(),
            scenarios.join("data/reshape_in.bin").display().to_string(),
        ),
    )
    .unwrap();
    let scenario = Arc::new(
        hilt::config::scenario::load(&path, &hilt::conformance::locate_all(&repo())).unwrap(),
    );
    let boards = load_all(&repo().join("boards")).unwrap();
    // One board per machine and clock: the M4 and the M33 MPS2 boards at
    // 25 MHz (40 instructions a count), the STM32F405 at its own clock.
    let names = ["qemu-mps2-an386", "qemu-mps2-an505", "qemu-netduinoplus2"];
    let jobs: Vec<Job> = names
        .iter()
        .map(|name| Job {
            scenario: scenario.clone(),
            board: boards.iter().find(|b| b.name == *name).unwrap().clone(),
        })
        .collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let results = runtime.block_on(run_jobs(&repo(), jobs, 2, |_| {}));
    for name in names {
        let run = results.iter().find(|r| r.board == name).unwrap();
        let board = boards.iter().find(|b| b.name == name).unwrap();
        // The loop leaves the outputs alone: a mismatch is expected, the
        // figures are what count.
        let step = run
            .steps
            .first()
            .unwrap_or_else(|| panic!("{name}: no step ran: {:?}", run.outcome));
        let tick = board.cycle_scale();
        let measured = step.total_cycles as f64;
        let loop_instructions = LOOP_INSTRUCTIONS as f64;
        eprintln!(
            "{name}: {measured} instructions for the {LOOP_INSTRUCTIONS}-instruction loop ({tick:.2} per count)"
        );
        // At least the loop less the tick a read may fall short by; at
        // most the loop plus the calls and counter reads around it (a few
        // dozen instructions) and a tick.
        assert!(
            measured >= loop_instructions - tick && measured <= loop_instructions + 100.0 + tick,
            "{name}: {measured} instructions measured for a {LOOP_INSTRUCTIONS}-instruction loop ({tick} per count)"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
