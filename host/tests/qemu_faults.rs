//! Fault injection on three virtual boards (two over RTT, one over its UART,
//! where the host still reads the guards through QEMU's gdbstub): every
//! injected fault is caught and reported as the right fault, with its
//! location; a HardFault in a kernel comes back as a backtrace; clean runs
//! of the shipped scenarios with buffer canaries raise no alarm.
//!
//! Every fault is armed in one fault-injection firmware per board and
//! canary mode (the host writes the armed faults into a copy of the ELF,
//! as it writes the model), so the fixtures share their builds: the
//! plugin's checks and the planner's faults all run with buffer canaries,
//! the stack faults with bounds canaries (the mode they test).
//!
//! Skipped (with a message) without `qemu-system-arm`, unless
//! `HILT_QEMU_REQUIRED=1`.

mod common;

use std::sync::Arc;

use hilt::config::board::{load_all, select};
use hilt::orchestrate::{Job, run_jobs};
use hilt::outcome::{BoardRun, Outcome};

use common::repo;

/// The board the shipped scenarios run on with buffer canaries: an RTT
/// board with room for every scenario's guard bands. A canary mode is a
/// firmware build per board, and the gate already runs every shipped
/// scenario on every virtual board with the plugin's access checks; the
/// host's guard reads through the gdbstub of a UART board are held by the
/// fault fixtures (`blind` on the STM32F405 over its UART), which name
/// their own boards. (The STM32F405 here as well took another minute of
/// two cores.)
const FAULT_BOARDS: [&str; 1] = ["qemu-mps2-an386"];

fn run(paths: &[&str], canary_override: Option<&str>) -> Vec<BoardRun> {
    let boards = load_all(&repo().join("boards")).unwrap();
    let conformance = hilt::conformance::locate_all(&repo());
    let mut jobs = Vec::new();
    for path in paths {
        let mut scenario = hilt::config::scenario::load(&repo().join(path), &conformance).unwrap();
        if let Some(c) = canary_override {
            scenario.canary = c.parse().expect("a canary mode");
            // The first case of each: the sweep looks for false alarms of
            // the guards around every planned buffer, which the same plan
            // has on every input (the gate runs every case).
            scenario.cases.truncate(1);
            // The shipped scenarios' patterns narrowed to the sweep's
            // board (when a scenario runs on it: pooled ones need a board
            // that has their pools).
            scenario.boards = FAULT_BOARDS
                .iter()
                .filter(|b| {
                    scenario
                        .boards
                        .iter()
                        .any(|p| hilt_contract::board::glob_match(p, b))
                })
                .map(|b| b.to_string())
                .collect();
        }
        let scenario = Arc::new(scenario);
        for pattern in &scenario.boards {
            for board in select(&boards, pattern).unwrap() {
                jobs.push(Job {
                    scenario: scenario.clone(),
                    board: board.clone(),
                });
            }
        }
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(run_jobs(&repo(), jobs, 2, |_| {}))
}

fn error_of<'r>(results: &'r [BoardRun], scenario: &str, board: &str) -> &'r str {
    let run = results
        .iter()
        .find(|r| r.scenario == scenario && r.board == board)
        .unwrap();
    match &run.outcome {
        Outcome::Error(m) => m,
        other => panic!("{scenario} on {board}: expected a caught fault, got {other:?}"),
    }
}

#[test]
fn every_injected_fault_is_caught_where_it_differs() {
    if !common::qemu_available("fault-injection tests") {
        return;
    }
    let results = run(
        &[
            "host/tests/fixtures/overrun.toml",
            "host/tests/fixtures/misplan.toml",
            "host/tests/fixtures/too_small.toml",
            "host/tests/fixtures/stack.toml",
            "host/tests/fixtures/blind.toml",
            "host/tests/fixtures/over_read.toml",
            "host/tests/fixtures/write_input.toml",
            "host/tests/fixtures/stack_in_op.toml",
            "host/tests/fixtures/misplan_unchecked.toml",
        ],
        None,
    );
    // Each fault on the boards where it differs: the plugin's check over
    // RTT and over a UART; the planner's and the allocator's refusals once
    // per memory budget; the stack on both memory maps (MPS2 over RTT, the
    // STM32F405 over its UART); the host's own
    // guard check through RTT's memory reads and through the gdbstub; the
    // plugin's other checks (a read past an input, a store into an input,
    // the stack overflowing inside an op, two live buffers sharing bytes)
    // over RTT and over a UART.
    assert_eq!(results.len(), 17);
    let on = |scenario: &str| -> Vec<&str> {
        results
            .iter()
            .filter(|r| r.scenario == scenario)
            .map(|r| r.board.as_str())
            .collect()
    };
    for board in on("overrun") {
        // The QEMU plugin sees the first bad store as it happens, before
        // the firmware's own guard check after the op: the run names the
        // op, the access, the code and the buffer it ran past.
        let m = error_of(&results, "overrun", board);
        assert!(
            m.contains("access check: op 0 (RESHAPE): store of 1 byte at 0x")
                && m.contains("past the end of buffer 1 (tensor 2 `y`, 64 bytes, live 0..0), outside every buffer of op 0")
                && m.contains("(8 violations in all)"),
            "{m}"
        );
    }
    for board in on("misplan") {
        let m = error_of(&results, "misplan", board);
        assert!(
            m.contains("ALLOCATE") && m.contains("plan is invalid: Overlap"),
            "{m}"
        );
    }
    for board in on("too_small") {
        let m = error_of(&results, "too_small", board);
        assert!(m.contains("ALLOCATE") && m.contains("out of memory"), "{m}");
    }
    for board in on("stack") {
        let m = error_of(&results, "stack", board);
        assert!(
            m.contains("firmware check: the arena's end guard was overwritten"),
            "{m}"
        );
    }
    for board in on("over_read") {
        let m = error_of(&results, "over_read", board);
        assert!(
            m.contains("access check: op 0 (RESHAPE): load of 1 byte at 0x")
                && m.contains("1 byte past the end of buffer")
                && m.contains("outside every buffer of op 0"),
            "{m}"
        );
    }
    for board in on("write_input") {
        let m = error_of(&results, "write_input", board);
        assert!(
            m.contains("access check: op 1 (DEPTHWISE_CONV_2D): store of 1 byte at 0x")
                && m.contains("an input of op 1: it may read it, not store into it"),
            "{m}"
        );
    }
    for board in on("stack_in_op") {
        let m = error_of(&results, "stack_in_op", board);
        assert!(
            m.contains("access check: op 0 (RESHAPE): store of 4 bytes at 0x")
                && m.contains("a stack access 4 bytes below the stack's end"),
            "{m}"
        );
    }
    // A planner's overlap committed unchecked (as a broken allocator
    // port's would be): the first store into the shared bytes.
    for board in on("misplan_unchecked") {
        let m = error_of(&results, "misplan_unchecked", board);
        assert!(
            m.contains("access check: op 0 (RESHAPE): store of")
                && m.contains("both live at op 0, sharing these bytes (the plan overlaps them)"),
            "{m}"
        );
    }
    for board in on("blind") {
        let m = error_of(&results, "blind", board);
        assert!(
            m.contains("host check after case0 step 0: the arena's end guard was overwritten"),
            "{m}"
        );
    }
}

#[test]
fn shipped_scenarios_raise_no_false_alarm_with_buffer_canaries() {
    if !common::qemu_available("fault-injection tests") {
        return;
    }
    let conformance = hilt::conformance::locate_all(&repo());
    if !conformance
        .iter()
        .all(|set| set.join("manifest.json").is_file())
    {
        let required = std::env::var("HILT_CONFORMANCE_REQUIRED").is_ok_and(|v| v == "1");
        assert!(!required, "conformance set missing");
        eprintln!("conformance set missing: shipped scenarios skipped");
        return;
    }
    let shipped: Vec<String> = std::fs::read_dir(repo().join("scenarios"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| p.strip_prefix(repo()).unwrap().display().to_string())
        .collect();
    let paths: Vec<&str> = shipped.iter().map(String::as_str).collect();
    let results = run(&paths, Some("buffers"));
    // Every scenario on the AN386. A scenario for a small part only (its boards are ones no glob
    // picks: the 64 KiB AN386, the micro:bit) is left out: its arena has no
    // room for guard bands, and the gate runs it there with the plugin's
    // access checks.
    let boards = load_all(&repo().join("boards")).unwrap();
    let small_part_only = |path: &str| {
        let scenario = hilt::config::scenario::load(&repo().join(path), &conformance).unwrap();
        scenario.boards.iter().all(|p| {
            boards
                .iter()
                .any(|b| !b.globs && hilt_contract::board::glob_match(p, &b.name))
        })
    };
    for path in shipped.iter().filter(|p| !small_part_only(p)) {
        let name = std::path::Path::new(path)
            .file_stem()
            .unwrap()
            .to_string_lossy();
        assert!(
            results.iter().any(|r| r.scenario == name),
            "{name} did not run"
        );
    }
    let failures: Vec<String> = results
        .iter()
        .filter(|r| r.outcome != Outcome::Passed)
        .map(|r| format!("{} on {}: {:?}", r.scenario, r.board, r.outcome))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A board's declared stack (`stack_size`) holds every run on it: the
/// plugin takes the stack to start that far below its top, so a run that
/// goes deeper fails as a stack overflow, named, even while RAM is left
/// below. person_detect passes on the 64 KiB board within the 10,752 bytes
/// it declares; the same board declaring 4 KiB fails.
#[test]
fn a_run_deeper_than_the_boards_declared_stack_is_an_overflow() {
    if !common::qemu_available("QEMU fault tests") || common::conformance_models().is_none() {
        return;
    }
    let boards = load_all(&repo().join("boards")).unwrap();
    let conformance = hilt::conformance::locate_all(&repo());
    let scenario = hilt::config::scenario::load(
        &repo().join("scenarios/person_detect_64k.toml"),
        &conformance,
    )
    .unwrap();
    let declared = select(&boards, "qemu-mps2-an386-64k").unwrap()[0].clone();
    let mut shallow = declared.clone();
    shallow.stack_size = Some(4096);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let on = |board| {
        let job = Job {
            scenario: Arc::new(scenario.clone()),
            board,
        };
        let mut results = runtime.block_on(run_jobs(&repo(), vec![job], 1, |_| {}));
        results.pop().unwrap()
    };
    let (passed, failed) = (on(declared), on(shallow));
    assert!(
        matches!(passed.outcome, Outcome::Passed),
        "{:?}",
        passed.outcome
    );
    let deepest = passed.stack_high_water.unwrap();
    assert!((4096..=0x2A00).contains(&deepest), "{deepest} bytes deep");
    let Outcome::Error(error) = &failed.outcome else {
        panic!("expected a stack overflow, got {:?}", failed.outcome)
    };
    assert!(
        error.contains("a stack access") && error.contains("the stack overflowed"),
        "{error}"
    );
}

/// A HardFault inside a kernel (a load through a bad pointer, armed in the
/// fault-injection firmware) comes back as the fault in words and a
/// backtrace: the host stops the core, reads its registers (through
/// QEMU's gdbstub, over RTT and over a UART alike), unwinds the stack
/// through the HardFault's exception frame with the ELF's call-frame
/// information and names each frame, and the op that was running.
#[test]
fn a_hard_fault_in_a_kernel_comes_back_as_a_backtrace() {
    if !common::qemu_available("fault-injection tests") {
        return;
    }
    let results = run(&["host/tests/fixtures/bad_pointer.toml"], None);
    assert_eq!(results.len(), 2);
    for run in &results {
        let board = &run.board;
        let m = error_of(&results, "bad_pointer", board);
        assert!(
            m.contains("HardFault (escalated): precise data bus error at 0xf0000000"),
            "{board}: {m}"
        );
        let backtrace = run
            .backtrace
            .as_ref()
            .unwrap_or_else(|| panic!("{board}: no backtrace: {m}"));
        assert_eq!(backtrace.op.as_deref(), Some("op 0 (RESHAPE)"), "{board}");
        assert!(m.contains("backtrace (in op 0 (RESHAPE)):"), "{board}: {m}");
        let at = |function: &str| {
            backtrace
                .frames
                .iter()
                .position(|f| f.function.contains(function))
                .unwrap_or_else(|| panic!("{board}: no frame in {function}:\n{backtrace}"))
        };
        // The faulting function, with its file and line, interrupted by
        // the HardFault whose handler's frames come first; below it the
        // interpreter that ran the op, and below that the firmware's main.
        let faulted = at("hilt_agent::faults::load_through_bad_pointer");
        let frame = &backtrace.frames[faulted];
        let entered = backtrace
            .frames
            .iter()
            .position(|f| f.interrupted_by.as_deref() == Some("HardFault"))
            .unwrap_or_else(|| panic!("{board}: no HardFault entry:\n{backtrace}"));
        assert_eq!(backtrace.frames[entered].pc, frame.pc, "{backtrace}");
        assert!(
            frame
                .place
                .as_deref()
                .is_some_and(|p| p.starts_with("target/agent/src/faults.rs:")),
            "{backtrace}"
        );
        assert!(at("HardFault") < faulted, "{backtrace}");
        assert!(faulted < at("hilt_runtime::interpreter::"), "{backtrace}");
        assert!(
            at("hilt_runtime::interpreter::") < at("__cortex_m_rt_main"),
            "{backtrace}"
        );
        assert!(backtrace.stopped.is_none(), "{board}: {backtrace}");
    }
}
