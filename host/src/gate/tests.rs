//! The gate's tests: comparisons and their tolerance, snapshots rendered
//! from runs (byte for byte against the accepted ones), headlines, and
//! accepting pending snapshots.

use super::compare::{Unit, figure_of, unquote};
use super::*;

fn snapshot(head: u32, op_cycles: &[u64]) -> String {
    let mut s = format!(
        "scenario: s\nboard: b\nlayout:\n  head: {head}\n  buffers:\n    - 'tensor 0 x: steps 0..1, size 16, align 16, offset 0'\nlatency:\n  steps:\n    - 'case0 step 0: {} cycles'\n  ops:\n",
        op_cycles.iter().sum::<u64>()
    );
    for (i, c) in op_cycles.iter().enumerate() {
        s.push_str(&format!("    - 'op {i} CONV_2D: {c} cycles'\n"));
    }
    s
}

/// MPS2 under `-icount shift=0`: one SysTick tick is 40 instructions.
const VIRTUAL: Tolerance = Tolerance {
    percent: 0.0,
    cycles: 40,
};

#[test]
fn one_tick_of_clock_noise_passes_on_a_virtual_board() {
    let old = snapshot(64, &[1_980_000, 40_000]);
    let new = snapshot(64, &[1_980_040, 39_960]);
    assert_eq!(compare(&old, &new, VIRTUAL), Comparison::default());
    // Exact comparison would have flagged them.
    assert!(!compare(&old, &new, Tolerance::EXACT).regressions.is_empty());
}

/// A snapshot of a run the QEMU plugin observed: exact instructions and
/// estimated cycles per op.
fn observed_snapshot(ops: &[(u64, u64)]) -> String {
    let mut s = String::from(
        "scenario: s\nboard: b\nlayout:\n  head: 64\n  buffers:\n    - 'tensor 0 x: steps 0..1, size 16, align 16, offset 0'\nlatency:\n",
    );
    for (section, unit, pick) in [
        ("", "instructions", 0),
        ("estimated ", "estimated cycles", 1),
    ] {
        let figure = |op: &(u64, u64)| if pick == 0 { op.0 } else { op.1 };
        let total: u64 = ops.iter().map(figure).sum();
        s.push_str(&format!(
            "  {section}steps:\n    - 'case0 step 0: {total} {unit}'\n  {section}ops:\n"
        ));
        for (i, op) in ops.iter().enumerate() {
            s.push_str(&format!("    - 'op {i} CONV_2D: {} {unit}'\n", figure(op)));
        }
    }
    s
}

#[test]
fn the_plugins_counts_are_held_to_the_instruction_whatever_the_tolerance() {
    let old = observed_snapshot(&[(1_980_000, 2_400_000), (40_000, 52_000)]);
    // One instruction more in op 1: a tick of SysTick would have hidden it.
    let new = observed_snapshot(&[(1_980_000, 2_400_000), (40_001, 52_000)]);
    let moved = compare(&old, &new, VIRTUAL);
    assert_eq!(
        moved.regressions,
        vec![
            "op 1 CONV_2D: 40000 → 40001 instructions (+0.0%, slower)".to_string(),
            "case0 step 0: 2020000 → 2020001 instructions (+0.0%, slower)".to_string(),
        ]
    );
    // One estimated cycle fewer: an improvement, listed.
    let new = observed_snapshot(&[(1_980_000, 2_399_999), (40_000, 52_000)]);
    let moved = compare(&old, &new, VIRTUAL);
    assert!(moved.regressions.is_empty(), "{moved:?}");
    assert!(
        moved
            .improvements
            .iter()
            .any(|d| d == "op 0 CONV_2D: 2400000 → 2399999 estimated cycles (-0.0%, faster)"),
        "{moved:?}"
    );
    // The same figures: nothing to say.
    assert_eq!(compare(&old, &old, VIRTUAL), Comparison::default());
}

#[test]
fn a_run_observed_for_the_first_time_is_a_change_of_unit_not_a_speed_up() {
    let old = snapshot(64, &[1_980_000, 40_000]);
    let new = observed_snapshot(&[(1_979_990, 2_400_000), (39_990, 52_000)]);
    let moved = compare(&old, &new, VIRTUAL);
    assert!(
        moved
            .regressions
            .iter()
            .any(|d| d == "ops op 0 CONV_2D: 1980000 cycles → 1979990 instructions"),
        "{moved:?}"
    );
    assert!(moved.improvements.is_empty(), "{moved:?}");
}

#[test]
fn figures_are_read_with_their_unit() {
    assert_eq!(figure_of("3840 cycles"), Some((3840.0, Unit::Cycles)));
    assert_eq!(
        figure_of("3412 instructions"),
        Some((3412.0, Unit::Instructions))
    );
    assert_eq!(
        figure_of("4102 estimated cycles"),
        Some((4102.0, Unit::EstimatedCycles))
    );
    assert_eq!(figure_of("3412instructions"), None);
    assert_eq!(figure_of("many cycles"), None);
}

#[test]
fn an_op_one_percent_slower_fails_naming_the_op() {
    let old = snapshot(64, &[1_980_000, 40_000]);
    let new = snapshot(64, &[1_999_800, 40_000]);
    let moved = compare(&old, &new, VIRTUAL);
    assert!(
        moved
            .regressions
            .iter()
            .any(|d| d.starts_with("op 0 CONV_2D: 1980000 → 1999800 cycles (+1.0%, slower)")),
        "{moved:?}"
    );
    // The step total moved too, and is named as such.
    assert!(
        moved
            .regressions
            .iter()
            .any(|d| d.starts_with("case0 step 0:"))
    );
}

#[test]
fn a_faster_op_passes_and_is_listed() {
    let old = snapshot(64, &[1_980_000, 40_000]);
    let new = snapshot(64, &[1_900_000, 40_000]);
    let moved = compare(&old, &new, VIRTUAL);
    assert!(moved.regressions.is_empty(), "{moved:?}");
    assert_eq!(moved.improvements.len(), 2, "{moved:?}");
}

#[test]
fn percent_tolerance_scales_with_the_figure() {
    let real = Tolerance {
        percent: 2.0,
        cycles: 0,
    };
    let old = snapshot(64, &[100_000]);
    assert!(
        compare(&old, &snapshot(64, &[101_900]), real)
            .regressions
            .is_empty()
    );
    assert!(
        !compare(&old, &snapshot(64, &[102_100]), real)
            .regressions
            .is_empty()
    );
}

#[test]
fn layouts_are_exact_whatever_the_latency_tolerance() {
    let old = snapshot(64, &[1_000]);
    let new = snapshot(128, &[1_000]);
    let loose = Tolerance {
        percent: 50.0,
        cycles: 1_000_000,
    };
    assert_eq!(
        compare(&old, &new, loose).regressions,
        vec!["layout head: 64 → 128".to_string()]
    );
}

/// A run and names rebuilt from an accepted snapshot's own lines.
fn run_from_snapshot(body: &str) -> (BoardRun, ModelNames) {
    use crate::outcome::{PlannedBuffer, StepResult};
    let field = |key: &str| -> String {
        body.lines()
            .find_map(|l| l.trim().strip_prefix(key).map(str::to_string))
            .unwrap()
    };
    let mut run = BoardRun::new(&field("scenario: "), &field("board: "));
    let n = |k: &str| field(k).parse::<u32>().unwrap();
    run.arena = Some([n("capacity: "), n("head: "), n("tail: "), n("used: ")]);
    let mut names = ModelNames::default();
    let mut op_cycles = Vec::new();
    let mut observed_ops: Vec<crate::outcome::OpCount> = Vec::new();
    for line in body.lines().filter_map(|l| l.trim().strip_prefix("- ")) {
        let line = unquote(line);
        if let Some((name, figures)) = line.split_once(": start ") {
            // `fast: start 0, size 32768, cpu, head 4096` (no canaries
            // in these scenarios: the head starts at the arena's start).
            let parts: Vec<&str> = figures.split(", ").collect();
            let pools = run.pools.get_or_insert(crate::outcome::RunPools {
                pools: Vec::new(),
                guard: 0,
            });
            pools.pools.push(crate::outcome::PoolRange {
                name: name.into(),
                start: parts[0].parse().unwrap(),
                size: parts[1].trim_start_matches("size ").parse().unwrap(),
                reach: parts[2].into(),
                planned: !figures.contains("not planned"),
            });
        } else if let Some((head, tail)) = line.rsplit_once(": steps ") {
            let mut parts = head.splitn(3, ' ');
            let kind = if parts.next() == Some("tensor") {
                "tensor"
            } else {
                "scratch"
            };
            let index: u16 = parts.next().unwrap().parse().unwrap();
            let name = parts.next().unwrap_or("").to_string();
            if kind == "tensor" && names.tensors.len() <= usize::from(index) {
                names.tensors.resize(usize::from(index) + 1, String::new());
            }
            if kind == "tensor" {
                names.tensors[usize::from(index)] = name;
            }
            let v: Vec<u32> = tail
                .split(|c: char| !c.is_ascii_digit())
                .filter(|p| !p.is_empty())
                .map(|p| p.parse().unwrap())
                .collect();
            run.plan.push(PlannedBuffer {
                kind,
                index,
                first_step: v[0] as u16,
                last_step: v[1] as u16,
                size: v[2],
                align: v[3],
                offset: v[4],
            });
        } else if let Some(rest) = line.strip_prefix("op ") {
            let (head, figure) = rest.rsplit_once(": ").unwrap();
            let (value, unit) = figure_of(figure).unwrap();
            let value = value as u64;
            let op: usize = head.split_once(' ').unwrap().0.parse().unwrap();
            if names.ops.len() <= op {
                names.ops.push(head.split_once(' ').unwrap().1.to_string());
            }
            match unit {
                Unit::Cycles => op_cycles.push(value as u32),
                Unit::Instructions => observed_ops.push(crate::outcome::OpCount {
                    instructions: value,
                    ..Default::default()
                }),
                Unit::EstimatedCycles => observed_ops[op].estimated_cycles = value,
            }
        } else if let Some((head, figure)) = line.rsplit_once(": ") {
            let (case, step) = head.split_once(" step ").unwrap();
            let (value, unit) = figure_of(figure).unwrap();
            let value = value as u64;
            let observed = |instructions| crate::outcome::ObservedStep {
                instructions,
                estimated_cycles: 0,
                stack_high_water: 0,
                ops: Vec::new(),
                engine_instructions: 0,
            };
            match unit {
                Unit::EstimatedCycles => {
                    let step = run
                        .steps
                        .iter_mut()
                        .find(|s| s.case == case && s.step.to_string() == step)
                        .unwrap();
                    step.observed.as_mut().unwrap().estimated_cycles = value;
                    continue;
                }
                Unit::Instructions | Unit::Cycles => run.steps.push(StepResult {
                    case: case.into(),
                    step: step.parse().unwrap(),
                    total_cycles: if unit == Unit::Cycles { value } else { 0 },
                    op_cycles: Vec::new(),
                    mismatch: None,
                    observed: (unit == Unit::Instructions).then(|| observed(value)),
                    offload: None,
                }),
            }
        }
    }
    run.steps[0].op_cycles = op_cycles;
    if let Some(first) = run.steps[0].observed.as_mut() {
        first.ops = observed_ops;
    }
    (run, names)
}

#[test]
fn runs_without_offload_render_the_accepted_snapshots_byte_for_byte() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../snapshots/gate");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "snap") {
            continue;
        }
        let body = read_snapshot(&path).unwrap();
        // Offload runs carry placement and holds: the next test.
        if body.contains("\noffload:\n") {
            continue;
        }
        let (run, names) = run_from_snapshot(&body);
        assert_eq!(render(&run, &names), body, "{}", path.display());
        seen += 1;
    }
    assert!(seen >= 5, "the accepted snapshots were not found");
}

#[test]
fn offload_runs_record_placement_and_name_each_hold() {
    use crate::holds::Liveness;
    use crate::outcome::{
        KeptCycles, OffloadSetting, PlannedBuffer, RemovedCycles, StepOffload, StepResult,
    };
    let mut run = BoardRun::new("s", "b");
    let buffer = |kind, index, last_step| PlannedBuffer {
        kind,
        index,
        first_step: 0,
        last_step,
        size: 16,
        align: 16,
        offset: 0,
    };
    // Tensor 1 is last read by op 1 but held to step 2; tensor 2 is not
    // held; op 1's scratch is held to step 2.
    run.plan = vec![
        buffer("tensor", 1, 2),
        buffer("tensor", 2, 2),
        buffer("scratch", 1, 2),
    ];
    run.steps.push(StepResult {
        case: "case0".into(),
        step: 0,
        total_cycles: 10,
        op_cycles: vec![4, 3, 3],
        mismatch: None,
        observed: None,
        offload: Some(StepOffload {
            on_npu: vec![false, true, false],
            removed: RemovedCycles {
                engine: 900,
                shadow_copies: 0,
                oversleep: 40,
            },
            kept: KeptCycles {
                driver_submit: 1000,
                driver_cache: 0,
            },
            ..StepOffload::default()
        }),
    });
    let names = ModelNames {
        tensors: vec!["in".into(), "mid".into(), "out".into()],
        ops: vec!["ADD".into(), "CONV_2D".into(), "ADD".into()],
        liveness: Liveness {
            last_step: vec![Some(0), Some(1), Some(2)],
            users: vec![vec![0], vec![0, 1], vec![1, 2]],
        },
    };
    let plain = render(&run, &names);
    assert!(
        !plain.contains("held") && !plain.contains("offload:"),
        "{plain}"
    );
    run.offload = Some(OffloadSetting {
        mode: "coherent",
        ops: vec!["CONV_2D".into()],
        job_cycles: 2000,
        cycles_per_1000_macs: 4,
        driver_submit_cycles: 1000,
        driver_cycles_per_line: 4,
        fault: None,
    });
    let text = render(&run, &names);
    assert!(
        text.contains(
            "'tensor 1 mid: steps 0..2, size 16, align 16, offset 0, held to step 2 (job of op 1)'"
        ),
        "{text}"
    );
    assert!(
        text.contains("'tensor 2 out: steps 0..2, size 16, align 16, offset 0'\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "scratch 1 : steps 0..2, size 16, align 16, offset 0, held to step 2 (job of op 1)"
        ),
        "{text}"
    );
    assert!(
        text.ends_with(
            "offload:\n  mode: coherent\n  npu ops: [1]\n  \
             removed from the figures (emulation):\n    \
             - 'engine (kernels and checks): 900 cycles'\n    \
             - 'shadow copies: 0 cycles'\n    \
             - 'oversleep: 40 cycles'\n  \
             kept in the figures (modelled driver):\n    \
             - 'submits: 1000 cycles'\n    \
             - 'cache lines: 0 cycles'\n"
        ),
        "{text}"
    );
    // The categories are latencies to the gate: a modelled driver that
    // costs more fails it by name.
    let costlier = text.replace("'submits: 1000 cycles'", "'submits: 1100 cycles'");
    let moved = compare(&text, &costlier, Tolerance::EXACT);
    assert_eq!(
        moved.regressions,
        ["submits: 1000 → 1100 cycles (+10.0%, slower)"]
    );
    // A hold that moves is a layout change the gate names.
    let moved = compare(&plain, &text, Tolerance::EXACT);
    assert!(
        moved
            .regressions
            .iter()
            .any(|d| d.starts_with("buffer tensor 1 mid: held")
                && d.ends_with("to step 2 (job of op 1)")),
        "{moved:?}"
    );
}

#[test]
fn the_headline_is_the_arena_figure_then_any_layout_change() {
    let diffs: Vec<String> = vec![
        "op 2 CONV_2D: 10 → 12 cycles (+20.0%, slower)".into(),
        "buffer tensor 3 x: offset 0 → 64".into(),
        "layout used: 7384 → 7448".into(),
        "layout head: 16000 → 72736".into(),
    ];
    assert_eq!(headline(&diffs), Some("layout head: 16000 → 72736"));
    assert_eq!(headline(&diffs[..3]), Some("layout used: 7384 → 7448"));
    assert_eq!(headline(&diffs[..1]), Some(diffs[0].as_str()));
    assert_eq!(headline(&[]), None);
}

#[test]
fn a_change_prints_its_headline_first_its_diff_once_and_how_to_accept() {
    let diffs: Vec<String> = vec![
        "buffer tensor 3 x: offset 0 → 64".into(),
        "layout head: 16000 → 72736".into(),
    ];
    let verdict = Verdict::Changed(diffs);
    assert_eq!(
        verdict_text("tiny", "qemu-mps2-an386", &verdict, None, true),
        "CHANGED  tiny @ qemu-mps2-an386: layout head: 16000 → 72736\n\
         \x20          buffer tensor 3 x: offset 0 → 64\n\
         \x20          accept with: hilt gate --accept tiny --board qemu-mps2-an386 \
         (or cargo insta review)"
    );
    // The closing list: the headline alone, pointing at the diff above.
    let dir = Path::new("/tmp/snaps");
    assert_eq!(
        verdict_text("tiny", "b", &verdict, Some(dir), false),
        "CHANGED  tiny @ b: layout head: 16000 → 72736 (and 1 more, above)\n\
         \x20          accept with: hilt gate --accept tiny --board b --snapshots /tmp/snaps \
         (or cargo insta review)"
    );
    let new = verdict_text("tiny", "b", &Verdict::New, None, true);
    assert!(
        new.starts_with("NEW      tiny @ b: no accepted snapshot\n"),
        "{new}"
    );
    assert!(
        new.ends_with("accept with: hilt gate --accept tiny --board b (or cargo insta review)")
    );
    let faster = verdict_text(
        "t",
        "b",
        &Verdict::Faster(vec!["op 1: faster".into()]),
        None,
        true,
    );
    assert!(faster.contains("op 1: faster\n") && faster.contains("hilt gate --accept t --board b"));
    assert_eq!(
        verdict_text("t", "b", &Verdict::Unchanged, None, true),
        "ok       t @ b"
    );
}

#[test]
fn accepting_moves_the_chosen_pending_snapshots_over_the_accepted_ones() {
    let dir = std::env::temp_dir().join(format!("hilt-gate-accept-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let old = snapshot(16000, &[100]);
    let new = snapshot(72736, &[120]);
    for board in ["qemu-a", "qemu-b"] {
        write_snapshot(&snapshot_path(&dir, "s", board), &old, "s").unwrap();
        write_snapshot(
            &snapshot_path(&dir, "s", board).with_extension("snap.new"),
            &new,
            "s",
        )
        .unwrap();
    }
    write_snapshot(&dir.join("fresh@qemu-a.snap.new"), &new, "fresh").unwrap();
    let accepted = accept(&dir, &["s".into()], Some("qemu-a")).unwrap();
    assert_eq!(
        accepted,
        vec![Accepted {
            scenario: "s".into(),
            board: "qemu-a".into(),
            change: "layout head: 16000 → 72736 (and 2 more)".into(),
        }]
    );
    assert_eq!(
        read_snapshot(&dir.join("s@qemu-a.snap")).as_deref(),
        Some(new.as_str())
    );
    assert!(!dir.join("s@qemu-a.snap.new").exists());
    // Other boards and scenarios keep theirs until asked.
    assert!(dir.join("s@qemu-b.snap.new").exists() && dir.join("fresh@qemu-a.snap.new").exists());
    let rest = accept(&dir, &[], None).unwrap();
    let changes: Vec<&str> = rest.iter().map(|a| a.change.as_str()).collect();
    assert_eq!(
        changes,
        ["new snapshot", "layout head: 16000 → 72736 (and 2 more)"]
    );
    assert!(accept(&dir, &[], None).unwrap().is_empty());
    let missing = accept(&dir.join("nope"), &[], None)
        .unwrap_err()
        .to_string();
    assert!(missing.starts_with("cannot list the snapshots folder ") && missing.contains("nope"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn only_passing_verdicts_pass() {
    assert!(Verdict::Unchanged.passes());
    assert!(Verdict::Faster(vec![]).passes());
    assert!(!Verdict::New.passes());
    assert!(!Verdict::Changed(vec![]).passes());
    assert!(!Verdict::RunFailed(String::new()).passes());
}
