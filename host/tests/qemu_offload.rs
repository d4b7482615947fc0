//! Offload on the virtual boards: every shipped scenario passes with the
//! convolution family, ADD and pooling on the firmware's vnpu (coherent
//! memory on one board per firmware kind, non-coherent on the M4 and the
//! small STM32F405; or every board `HILT_OFFLOAD_BOARDS` names), the branch
//! model shows real overlap, and every
//! fault of the offload path is caught and named on two boards, one over a
//! UART.
//!
//! Skipped (with a message) without `qemu-system-arm`, unless
//! `HILT_QEMU_REQUIRED=1`.

mod common;

use std::sync::Arc;

use hilt::config::board::{load_all, select};
use hilt::config::scenario::Scenario;
use hilt::orchestrate::{Job, run_jobs};
use hilt::outcome::{BoardRun, Outcome};
use hilt_contract::offload::Accelerator;
use hilt_contract::scenario::{ConstantsPlace, Schedule};
use hilt_proto::AccelFault;

use common::repo;

/// The boards the every-scenario sweep runs on in CI: one per kind of
/// memory the offload path differs by — the M4 with room, and the 128 KiB
/// STM32F405 (where non-coherent halves do not fit). Every other virtual
/// board runs an offloaded scenario in the gate (`branches_vnpu`: the
/// ARMv6-M build with its portable kernels, the M33, the M55, the
/// product-firmware example, the UART boards), and the nightly job sets
/// `HILT_OFFLOAD_BOARDS='qemu-*'` for the whole sweep on all of them. (Five
/// boards here took 200 s of CI's 25 minutes; the ARMv6-M build, the
/// slowest, another 50 s of two cores.)
const OFFLOAD_BOARDS: [&str; 2] = ["qemu-mps2-an386", "qemu-netduinoplus2"];

/// The boards the non-coherent sweep runs on in CI: the cache path
/// (shadow copies, line maintenance) is the driver's, the same whichever
/// kernels run, so the ARMv6-M build (the slowest, portable kernels) runs
/// the coherent sweep only; the STM32F405 stays for the refusal of halves
/// that do not fit.
const NON_COHERENT_BOARDS: [&str; 2] = ["qemu-mps2-an386", "qemu-netduinoplus2"];

/// `scenario`'s boards narrowed to the sweep's (`HILT_OFFLOAD_BOARDS`,
/// comma-separated globs, else [`OFFLOAD_BOARDS`], or
/// [`NON_COHERENT_BOARDS`] for the non-coherent sweep).
fn sweep_boards(scenario: &Scenario, coherent: bool) -> Vec<String> {
    let all = load_all(&repo().join("boards")).unwrap();
    let ci_boards: &[&str] = if coherent {
        &OFFLOAD_BOARDS
    } else {
        &NON_COHERENT_BOARDS
    };
    let wanted: Vec<String> = match std::env::var("HILT_OFFLOAD_BOARDS") {
        Ok(v) if !v.is_empty() => v.split(',').map(str::to_string).collect(),
        _ => ci_boards.iter().map(|b| b.to_string()).collect(),
    };
    all.iter()
        .map(|b| b.name.clone())
        .filter(|b| {
            wanted
                .iter()
                .any(|w| hilt_contract::board::glob_match(w, b))
        })
        .filter(|b| {
            scenario
                .boards
                .iter()
                .any(|p| hilt_contract::board::glob_match(p, b))
        })
        .collect()
}

fn load(path: &str) -> Scenario {
    let conformance = hilt::conformance::locate_all(&repo());
    hilt::config::scenario::load(&repo().join(path), &conformance).unwrap()
}

fn run(scenarios: Vec<Scenario>) -> Vec<BoardRun> {
    let boards = load_all(&repo().join("boards")).unwrap();
    let mut jobs = Vec::new();
    for scenario in scenarios {
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

fn shipped() -> Vec<String> {
    let mut paths: Vec<String> = std::fs::read_dir(repo().join("scenarios"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| p.strip_prefix(repo()).unwrap().display().to_string())
        .collect();
    paths.sort();
    paths
}

/// The (scenario, board) pairs that cannot run non-coherent: that mode
/// halves the arena (the other half is the engine's view of memory), so a
/// model whose arena (planned on the host, as the firmware plans it) needs
/// more than half of the board's arena must be refused, naming the arena.
fn too_big_for_half<'a>(
    scenarios: impl IntoIterator<Item = &'a Scenario>,
) -> Vec<(String, String)> {
    use hilt_runtime::allocation::AllocOptions;
    use hilt_runtime::interpreter::Interpreter;
    let boards = load_all(&repo().join("boards")).unwrap();
    let resolver = hilt_runtime::kernels::all_builtins();
    let mut pairs = Vec::new();
    for scenario in scenarios {
        let bytes = std::fs::read(&scenario.model).unwrap();
        let model = hilt_runtime::model::Model::from_bytes(&bytes).unwrap();
        let mut arena = vec![0u8; 4 << 20];
        let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
        interpreter
            .allocate(&hilt_runtime::planner::Greedy, &AllocOptions::default())
            .unwrap();
        let need = interpreter.arena_used_bytes();
        for board in boards.iter().filter(|b| scenario.boards.contains(&b.name)) {
            if need > board.arena_size as usize / 2 {
                pairs.push((scenario.name.clone(), board.name.clone()));
            }
        }
    }
    pairs
}

/// What a non-coherent copy of a scenario has after its name.
const NON_COHERENT: &str = " (non-coherent)";

#[test]
fn every_shipped_scenario_passes_offloaded_coherent_and_not() {
    // The shipped scenarios run the conformance set's models.
    if !common::qemu_available("offload tests") || common::conformance_models().is_none() {
        return;
    }
    // Both sweeps in one run, so that one's builds and runs overlap the
    // other's; a non-coherent copy is named apart.
    let mut scenarios = Vec::new();
    for coherent in [true, false] {
        scenarios.extend(
            shipped()
                .iter()
                .map(|path| load(path))
                // The lean schedule and constants in flash refuse an
                // accelerator by name when the scenario is read (the
                // contract tests hold that refusal): nothing to sweep.
                .filter(|s| s.schedule == Schedule::Tflm && s.constants == ConstantsPlace::Tail)
                // A split arena cannot be halved for the engine's view:
                // pooled scenarios run coherent only (the host refuses the
                // rest, a test below checks it).
                .filter(|s| coherent || s.pools.is_none())
                .map(|mut s| {
                    // The first case of each: what the sweep checks (ops
                    // claimed, jobs fenced, outputs equal with the engine
                    // and coherent or not) is the same on every input, and
                    // the gate runs every case of the offloaded scenario.
                    s.cases.truncate(1);
                    s.offload.accelerator = Accelerator::Vnpu;
                    s.offload.coherent = coherent;
                    s.boards = sweep_boards(&s, coherent);
                    if !coherent {
                        s.name = format!("{}{NON_COHERENT}", s.name);
                    }
                    s
                }),
        );
    }
    let too_big = too_big_for_half(scenarios.iter().filter(|s| !s.offload.coherent));
    let every = run(scenarios);
    for coherent in [true, false] {
        let results: Vec<&BoardRun> = every
            .iter()
            .filter(|r| r.scenario.ends_with(NON_COHERENT) != coherent)
            .collect();
        let mut failures = Vec::new();
        for &r in &results {
            let cannot_fit = too_big.contains(&(r.scenario.clone(), r.board.clone()));
            match (&r.outcome, cannot_fit) {
                (Outcome::Passed, false) => {
                    let offloaded = r.steps.iter().all(|s| s.offload.is_some());
                    if !offloaded {
                        failures.push(format!("{} on {}: no offload figures", r.scenario, r.board));
                    }
                }
                (Outcome::Error(m), true) if m.contains("arena") => {}
                (other, _) => failures.push(format!(
                    "{} on {} (coherent: {coherent}): {other:?}",
                    r.scenario, r.board
                )),
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        // The default list was claimed: KWS's convolutions ran on the
        // engine, on every swept board it ran on (HILT_OFFLOAD_BOARDS may
        // leave out the AN386; a non-coherent half too big for a board's
        // arena is a checked refusal above).
        let kws: Vec<&BoardRun> = results
            .iter()
            .copied()
            .filter(|r| {
                r.scenario.trim_end_matches(NON_COHERENT) == "kws_dscnn_int8"
                    && r.outcome == Outcome::Passed
            })
            .collect();
        assert!(!kws.is_empty(), "kws_dscnn_int8 passed on no swept board");
        for run in kws {
            let figures = run.steps[0].offload.as_ref().unwrap();
            let placement = &figures.on_npu;
            let jobs = placement.iter().filter(|&&npu| npu).count();
            assert!(
                jobs >= 5,
                "{} (coherent: {coherent}): {placement:?}",
                run.board
            );
            // What the figures leave out and keep, by category: the
            // engine's kernels ran (and were taken out); every submit
            // costs the board's modelled 1,000 cycles (within a count's
            // rounding); only non-coherent memory has shadow copies and
            // lines to maintain (4 cycles each: KWS's jobs touch tens of
            // KiB, thousands of 32-byte lines).
            let (removed, kept) = (figures.removed, figures.kept);
            let what = format!("{} (coherent: {coherent}): {figures:?}", run.board);
            assert!(removed.engine > 0, "{what}");
            let submits = 1_000 * jobs as u64;
            assert!(
                (submits * 98 / 100..=submits * 102 / 100 + 100).contains(&kept.driver_submit),
                "{what}"
            );
            if coherent {
                assert_eq!((removed.shadow_copies, kept.driver_cache), (0, 0), "{what}");
            } else {
                assert!(removed.shadow_copies > 0, "{what}");
                assert!(kept.driver_cache >= 4_000, "{what}");
            }
        }
    }
}

#[test]
fn non_coherent_offload_of_a_split_arena_is_refused_by_name() {
    if !common::qemu_available("offload tests") {
        return;
    }
    let mut s = load("scenarios/branches_pools.toml");
    s.offload.coherent = false;
    s.boards = vec!["qemu-mps2-an386".into()];
    let results = run(vec![s]);
    let [r] = results.as_slice() else {
        panic!("{results:?}");
    };
    match &r.outcome {
        Outcome::Error(m) => assert!(
            m.contains("scenario branches_pools splits the arena into pools: non-coherent offload"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_branch_model_overlaps_cpu_and_engine() {
    if !common::qemu_available("offload tests") {
        return;
    }
    let offloaded = load("scenarios/branches_vnpu.toml");
    let mut cpu_only = offloaded.clone();
    cpu_only.offload.accelerator = Accelerator::None;
    cpu_only.name = "branches_cpu".into();
    let results = run(vec![offloaded, cpu_only]);
    let on = |scenario: &str| {
        results
            .iter()
            .find(|r| r.scenario == scenario && r.board == "qemu-mps2-an386")
            .unwrap()
    };
    let (npu, cpu) = (on("branches_vnpu"), on("branches_cpu"));
    assert_eq!(npu.outcome, Outcome::Passed, "{:?}", npu.logs);
    assert_eq!(cpu.outcome, Outcome::Passed);
    let step = &npu.steps[0];
    let figures = step.offload.as_ref().unwrap();
    assert_eq!(figures.on_npu, [true, false, false, false]);
    // CPU work alone (the whole CPU-only run) plus the engine's busy time
    // is more than the offloaded run took: they ran at the same time.
    let cpu_total = cpu.steps[0].total_cycles;
    assert!(
        step.total_cycles < cpu_total + figures.busy,
        "no overlap: {} vs {} + {}",
        step.total_cycles,
        cpu_total,
        figures.busy
    );
    assert!(figures.overlapped >= 2, "{figures:?}");
    assert!(figures.waited < figures.busy, "{figures:?}");
    // The run's own yardstick, measured with offload turned off on the
    // same firmware, is the CPU-only run's figure; and with this engine
    // (about as slow as the CPU's other branch) the ADD waits a little,
    // and the whole still takes less than the CPU alone.
    assert_eq!(npu.cpu_alone, Some(cpu_total));
    assert_eq!(cpu.cpu_alone, None, "not offloaded: no second run");
    assert!(figures.waited > 0, "{figures:?}");
    assert!(
        step.total_cycles < cpu_total,
        "{} vs {cpu_total}",
        step.total_cycles
    );
    // The job's input, last read by the CPU's first depthwise (step 1), is
    // held through step 2: the ADD (step 3) waits for the job first thing.
    let input = npu.plan.iter().find(|b| b.kind == "tensor" && b.index == 0);
    assert_eq!(input.map(|b| b.last_step), Some(2), "{:?}", npu.plan);
    // What the figures leave out and keep, by category. Coherent: the
    // engine's kernel ran (and was taken out), no shadow, no line to
    // maintain; the one submit costs the board's modelled 1,000 cycles.
    assert!(figures.removed.engine > 10_000, "{figures:?}");
    assert_eq!(figures.removed.shadow_copies, 0, "{figures:?}");
    assert_eq!(
        (figures.kept.driver_submit, figures.kept.driver_cache),
        (1_000, 0),
        "{figures:?}"
    );
}

/// A fault, the memory mode it shows in, and what the error must say.
const FAULTS: [(AccelFault, bool, &[&str]); 10] = [
    (
        AccelFault::SkipWait,
        true,
        &[
            "op 0",
            "op 3 touched the job's memory before the job was waited",
        ],
    ),
    (
        AccelFault::DropHolds,
        true,
        &["op 0", "written by someone else while the engine held it"],
    ),
    (
        AccelFault::Misaligned,
        true,
        &["op 0", "(Output(", "is misaligned for the engine"],
    ),
    (
        AccelFault::OutsideWindow,
        true,
        &["op 0", "is outside every window the engine reaches"],
    ),
    (
        AccelFault::WriteReadOnly,
        true,
        &["op 0", "(Output(", "would be written but is read-only"],
    ),
    (
        AccelFault::MissingClean,
        false,
        &["op 0", "read by the engine without the CPU cleaning it"],
    ),
    (
        AccelFault::MissingInvalidate,
        false,
        &["op 0", "(Output(", "never invalidated by the CPU"],
    ),
    (
        AccelFault::NeverCompletes,
        true,
        &["op 0", "the job missed its deadline"],
    ),
    (AccelFault::EngineError, true, &["op 0", "engine error 225"]),
    // Nothing the engine reports: the QEMU plugin's access check, at the
    // job's first read outside its op's buffers.
    (
        AccelFault::OverRead,
        true,
        &["access check: the job of op 0 (CONV_2D): load of 1 byte at 0x"],
    ),
];

#[test]
fn every_offload_fault_is_caught_and_named_on_two_boards() {
    if !common::qemu_available("offload fault tests") {
        return;
    }
    let base = load("host/tests/fixtures/accel_faults.toml");
    let mut scenarios = vec![base.clone()];
    for (fault, coherent, _) in FAULTS {
        let mut s = base.clone();
        s.name = fault.name().into();
        s.accel_fault = fault;
        s.offload.coherent = coherent;
        scenarios.push(s);
    }
    let results = run(scenarios);
    assert_eq!(results.len(), 2 * (FAULTS.len() + 1));
    for board in ["qemu-mps2-an386", "qemu-netduinoplus2-uart"] {
        let of = |name: &str| {
            results
                .iter()
                .find(|r| r.scenario == name && r.board == board)
                .unwrap()
        };
        // The fault firmware without a fault: no false alarm.
        assert_eq!(of("accel_faults").outcome, Outcome::Passed, "{board}");
        for (fault, _, expected) in FAULTS {
            let run = of(fault.name());
            let Outcome::Error(message) = &run.outcome else {
                panic!("{} on {board}: not caught: {:?}", fault.name(), run.outcome);
            };
            for part in expected {
                assert!(
                    message.contains(part),
                    "{} on {board}: {message:?} lacks {part:?}",
                    fault.name()
                );
            }
        }
    }
}
