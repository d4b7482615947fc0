//! The formats' own checks, on hand-built reports.

use super::html::{arena_picture, board_layout};
use super::*;
use crate::outcome::{PlannedBuffer, StepResult};

fn run(scenario: &str, board: &str, outcome: Outcome) -> BoardRun {
    BoardRun {
        scenario: scenario.into(),
        board: board.into(),
        outcome,
        steps: vec![StepResult {
            case: "case0".into(),
            step: 0,
            total_cycles: 1500,
            op_cycles: vec![1000, 250],
            mismatch: None,
            observed: None,
            offload: None,
        }],
        cpu_alone: None,
        arena: Some([4096, 1024, 64, 1088]),
        logs: vec!["booted".into()],
        plan: Vec::new(),
        offload: None,
        pools: None,
        ..BoardRun::new("", "")
    }
}

fn report(runs: Vec<BoardRun>, pending: Vec<PendingPair>) -> RunReport {
    RunReport {
        title: "hilt run".into(),
        started: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        elapsed: Duration::from_millis(12_345),
        hostname: Some("farm-1".into()),
        scenarios: BTreeMap::new(),
        runs: runs
            .into_iter()
            .map(|run| TimedRun {
                run,
                wall_seconds: 1.5,
            })
            .collect(),
        pending,
    }
}

#[test]
fn timestamps_are_utc_civil_dates() {
    assert_eq!(utc_timestamp(UNIX_EPOCH), "1970-01-01T00:00:00");
    assert_eq!(
        utc_timestamp(UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
        "2023-11-14T22:13:20"
    );
    // A leap day.
    assert_eq!(
        utc_timestamp(UNIX_EPOCH + Duration::from_secs(951_782_400)),
        "2000-02-29T00:00:00"
    );
}

#[test]
fn escaping_keeps_xml_well_formed_whatever_the_log_holds() {
    assert_eq!(
        escape("a<b & \"c\" 'd'>\n\u{1b}[0m\u{0}"),
        "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;&#10;\\x1B[0m\\x00"
    );
    assert_eq!(escape_text("x\ny"), "x\ny");
}

#[test]
fn totals_count_each_outcome_and_the_pending_pairs() {
    let r = report(
        vec![
            run("s", "a", Outcome::Passed),
            run("s", "b", Outcome::Mismatch("out 0 differs".into())),
            run("t", "a", Outcome::Error("timed out".into())),
        ],
        vec![PendingPair {
            scenario: "t".into(),
            board: "b".into(),
        }],
    );
    assert_eq!(
        r.totals(),
        Totals {
            pairs: 4,
            passed: 1,
            mismatched: 1,
            errors: 1,
            pending: 1
        }
    );
    let xml = junit_xml(&r);
    assert!(
        xml.contains(
            r#"<testsuites name="hilt run" tests="4" failures="1" errors="1" time="12.345">"#
        ),
        "{xml}"
    );
    assert!(
        xml.contains(
            r#"<testsuite name="t" tests="2" failures="0" errors="1" skipped="1" time="1.500""#
        ),
        "{xml}"
    );
    assert!(xml.contains(r#"<failure message="out 0 differs" type="mismatch">"#));
    assert!(xml.contains(r#"<error message="timed out" type="error">"#));
    assert!(xml.contains(r#"<skipped message="did not finish"#));
    assert!(xml.contains("op   0 ?"), "{xml}");
}

#[test]
fn the_html_lists_failures_first_and_loads_nothing_from_outside() {
    let r = report(
        vec![
            run("a", "x", Outcome::Passed),
            run("b", "x", Outcome::Mismatch("m".into())),
            run("c", "x", Outcome::Error("e".into())),
        ],
        Vec::new(),
    );
    let page = html(&r);
    let error = page.find(r#"id="c--x""#).unwrap();
    let mismatch = page.find(r#"id="b--x""#).unwrap();
    let pass = page.find(r#"id="a--x""#).unwrap();
    assert!(error < mismatch && mismatch < pass);
    for external in ["<script", "<link", "src=", "url(", "@import"] {
        assert!(!page.contains(external), "{external}");
    }
    // Bars are scaled to the largest op.
    assert!(page.contains("width:100.00%") && page.contains("width:25.00%"));
}

#[test]
fn a_run_the_plugin_observed_shows_its_exact_counts_in_junit_and_html() {
    use crate::outcome::{ObservedStep, OpCount};
    let mut observed = run("kws", "qemu-mps2-an386", Outcome::Passed);
    observed.steps[0].observed = Some(ObservedStep {
        instructions: 1_482,
        estimated_cycles: 1_903,
        stack_high_water: 312,
        ops: vec![
            OpCount {
                instructions: 1_000,
                estimated_cycles: 1_300,
                stack_high_water: 312,
            },
            OpCount {
                instructions: 482,
                estimated_cycles: 603,
                stack_high_water: 200,
            },
        ],
        engine_instructions: 0,
    });
    observed.access_violations = Some(0);
    observed.timing = Some("cortex-m4".into());
    let r = report(
        vec![observed, run("kws", "real", Outcome::Passed)],
        Vec::new(),
    );
    let xml = junit_xml(&r);
    assert!(
        xml.contains(
            "case0 step 0: 1,482 instructions, 1,903 estimated cycles, stack 312 B (SysTick: 1,500)"
        ),
        "{xml}"
    );
    assert!(xml.contains("QEMU plugin: 0 access violations, cycles estimated for cortex-m4"));
    assert!(
        xml.contains("482 instructions          603 estimated cycles"),
        "{xml}"
    );
    // The run it did not observe keeps the firmware's cycles.
    assert!(xml.contains("case0 step 0: 1,500 cycles"));
    let page = html(&r);
    assert!(page.contains("Per-op instructions (case0 step 0, 1,482 instructions in all)"));
    assert!(page.contains(
        "1,903 estimated cycles on cortex-m4, stack high-water 312 B, 0 access violations"
    ));
    // Bars over the exact counts: 482 of the largest op's 1,000.
    assert!(page.contains("width:48.20%"), "{page}");
    assert!(page.contains("Per-op cycles (case0 step 0, 1,500 cycles in all)"));
}

fn planned(index: u16, steps: (u16, u16), size: u32, align: u32, offset: u32) -> PlannedBuffer {
    PlannedBuffer {
        kind: "tensor",
        index,
        first_step: steps.0,
        last_step: steps.1,
        size,
        align,
        offset,
    }
}

#[test]
fn the_picture_draws_the_plan_the_board_committed_with_tensor_names() {
    let mut r = run("s", "a", Outcome::Passed);
    r.plan = vec![
        planned(0, (0, 1), 100, 16, 0),
        planned(1, (1, 2), 64, 16, 112),
    ];
    let context = ScenarioContext {
        name: "s".into(),
        description: String::new(),
        model: "m.tflite".into(),
        op_names: Vec::new(),
        tensor_names: vec!["input".into(), "conv/out".into()],
        layout: Err("not planned".into()),
    };
    let layout = board_layout(&r, Some(&context)).unwrap();
    assert_eq!(layout.buffers[1].name, "conv/out");
    // Step 1 holds both: 112 + 64 bytes.
    assert_eq!(layout.lower_bound, 176);
    let picture = arena_picture(&r, Some(&context));
    assert!(
        picture.contains("as the board committed it (head 1,024 B)"),
        "{picture}"
    );
    assert!(picture.contains("<svg") && picture.contains("conv/out"));
}

#[test]
fn a_garbled_plan_is_left_out_not_drawn_or_trusted() {
    let mut r = run("s", "a", Outcome::Passed);
    r.plan = vec![
        planned(0, (3, 1), 100, 0, 0),
        planned(1, (0, 0), u32::MAX, 16, 0),
        planned(2, (0, 0), 16, 16, u32::MAX - 4),
    ];
    // Zero alignment counts as 1 and a reversed life as one step; the
    // rows whose end passes 4 GiB are dropped.
    let layout = board_layout(&r, None).unwrap();
    assert_eq!(layout.buffers.len(), 1);
    assert_eq!(
        (layout.buffers[0].align, layout.buffers[0].last_step),
        (1, 3)
    );
    let _ = arena_picture(&r, None);
    r.plan = vec![planned(1, (0, 0), u32::MAX, 16, 0)];
    assert!(board_layout(&r, None).is_none());
    assert!(arena_picture(&r, None).contains("scenario is unknown"));
}

#[test]
fn a_gate_verdict_other_than_unchanged_fails_the_test_case() {
    let passed = run("s", "a", Outcome::Passed);
    assert_eq!(gated(&passed, &Verdict::Unchanged).outcome, Outcome::Passed);
    assert!(matches!(
        gated(&passed, &Verdict::New).outcome,
        Outcome::Mismatch(m) if m.starts_with("no accepted snapshot")
    ));
    // The headline (the arena's head) first, every other difference once,
    // then how to accept.
    assert_eq!(
        gated(
            &passed,
            &Verdict::Changed(vec![
                "op 3: 10 → 12 cycles (+20.0%, slower)".into(),
                "layout head: 16000 → 72736".into()
            ])
        )
        .outcome,
        Outcome::Mismatch(
            "snapshot changed: layout head: 16000 → 72736\n\
             op 3: 10 → 12 cycles (+20.0%, slower)\n\
             accept with: hilt gate --accept s --board a (or cargo insta review)"
                .into()
        )
    );
    assert_eq!(
        gated(&passed, &Verdict::RunFailed("cannot write".into())).outcome,
        Outcome::Error("cannot write".into())
    );
    // A run that failed keeps its own outcome.
    let failed = run("s", "a", Outcome::Error("timed out".into()));
    assert_eq!(
        gated(&failed, &Verdict::RunFailed("timed out".into())).outcome,
        Outcome::Error("timed out".into())
    );
}

#[test]
fn the_html_report_calls_a_changed_snapshot_changed_and_wraps_its_diff() {
    let passed = run("s", "a", Outcome::Passed);
    let changed = gated(
        &passed,
        &Verdict::Changed(vec!["layout head: 16000 → 72736".into()]),
    );
    let new = gated(&run("t", "a", Outcome::Passed), &Verdict::New);
    let page = super::html::html(&report(vec![changed, new], Vec::new()));
    assert!(
        page.contains(r#"<span class="badge">CHANGED</span>s"#),
        "{page}"
    );
    assert!(
        page.contains(r#"<span class="badge">NEW</span>t"#),
        "{page}"
    );
    assert!(!page.contains(">MISMATCH<"), "{page}");
    assert!(
        page.contains("snapshot changed: layout head: 16000 → 72736\naccept with: hilt gate --accept s --board a"),
        "{page}"
    );
    assert!(page.contains("white-space: pre-wrap; overflow-wrap: anywhere"));
}

#[test]
fn the_summary_has_every_run_and_the_totals() {
    let r = report(vec![run("s", "a", Outcome::Passed)], Vec::new());
    let v: serde_json::Value = serde_json::from_str(&summary_json(&r).unwrap()).unwrap();
    assert_eq!(v["totals"]["passed"], 1);
    assert_eq!(v["runs"][0]["board"], "a");
    assert_eq!(v["runs"][0]["outcome"]["status"], "passed");
    assert_eq!(v["runs"][0]["wall_seconds"], 1.5);
    assert_eq!(v["started_at"], "2023-11-14T22:13:20Z");
}

#[test]
fn the_summary_names_the_arena_figures_and_each_op() {
    let mut r = report(vec![run("s", "a", Outcome::Passed)], Vec::new());
    r.scenarios.insert(
        "s".into(),
        ScenarioContext {
            name: "s".into(),
            description: String::new(),
            model: "m.tflite".into(),
            // One name short: the second op's is unknown.
            op_names: vec!["CONV_2D".into()],
            tensor_names: Vec::new(),
            layout: Err("not planned".into()),
        },
    );
    let v: serde_json::Value = serde_json::from_str(&summary_json(&r).unwrap()).unwrap();
    assert_eq!(
        v["runs"][0]["arena"],
        serde_json::json!({"capacity": 4096, "head": 1024, "tail": 64, "used": 1088})
    );
    assert_eq!(
        v["runs"][0]["steps"][0]["op_cycles"],
        serde_json::json!([
            {"index": 0, "name": "CONV_2D", "cycles": 1000},
            {"index": 1, "name": null, "cycles": 250},
        ])
    );
    // The step's other figures stay as they were.
    assert_eq!(v["runs"][0]["steps"][0]["total_cycles"], 1500);
}

/// A step of three ops (op 1 offloaded) whose figures make one cycle one
/// pixel: 600 cycles in all.
fn offload_step() -> StepResult {
    use crate::outcome::{JobSpan, KeptCycles, RemovedCycles, StepOffload};
    StepResult {
        case: "case0".into(),
        step: 0,
        total_cycles: 600,
        op_cycles: vec![100, 20, 280],
        mismatch: None,
        observed: None,
        offload: Some(StepOffload {
            jobs: 1,
            overlapped: 1,
            busy: 300,
            waited: 100,
            removed: RemovedCycles {
                engine: 30,
                shadow_copies: 15,
                oversleep: 5,
            },
            kept: KeptCycles {
                driver_submit: 10,
                driver_cache: 2,
            },
            on_npu: vec![false, true, false],
            job_times: vec![JobSpan {
                op: 1,
                submitted: 120,
                completed: 500,
                wait_started: 400,
                retired: 500,
            }],
        }),
    }
}

#[test]
fn the_timeline_draws_both_lanes_with_bars_placed_by_the_figures() {
    use super::timeline::{LEFT, timeline_svg};
    let names = ["CONV_2D".to_string(), "CONV_2D".into(), "ADD".into()];
    let svg = timeline_svg(&offload_step(), &names).unwrap();
    assert!(
        svg.contains(">CPU</text>") && svg.contains(">NPU</text>"),
        "{svg}"
    );
    let rect = |class: &str, x: f64, width: f64| {
        format!(r#"<rect class="{class}" x="{:.1}" y=""#, LEFT + x) + &format!("{width:.1}")
    };
    let has = |class: &str, x: f64, width: f64| {
        let start = format!(r#"<rect class="{class}" x="{:.1}""#, LEFT + x);
        let size = format!(r#"width="{width:.1}""#);
        assert!(
            svg.lines()
                .any(|l| l.starts_with(&start) && l.contains(&size)),
            "no {} in\n{svg}",
            rect(class, x, width)
        );
    };
    // CPU lane: ops back to back; op 1's share is its submit.
    has("cpu-op", 0.0, 100.0);
    has("submit", 100.0, 20.0);
    has("cpu-op", 120.0, 280.0);
    // NPU lane: the job from submit to completion; the wait on the CPU lane.
    has("job", 120.0, 380.0);
    has("wait", 400.0, 100.0);
    assert!(svg.contains(
        "NPU busy 300, CPU waited 100, overlap 200, 1 jobs · emulation removed 50 (engine 30, shadow copies 15, oversleep 5) · modelled driver kept 12"
    ));
    // Labels where they fit: whole on the 280-px ADD and the 380-px job,
    // the index alone on the 20-px submit.
    assert!(svg.contains(r#"fill="white">2 ADD</text>"#), "{svg}");
    assert!(svg.contains(r#"fill="white">1 CONV_2D</text>"#), "{svg}");
    assert!(svg.contains(r#"fill="white">1</text>"#), "{svg}");
    assert_eq!(svg.matches(r#"class="op-label""#).count(), 4, "{svg}");
    // An axis of round ticks (0 to 600 by 100) and a legend of every kind.
    for tick in [0, 100, 300, 600] {
        assert!(
            svg.contains(&format!(r#"text-anchor="middle">{tick}</text>"#)),
            "{svg}"
        );
    }
    for meaning in [
        "op on the CPU",
        "CPU submits a job",
        "job on the NPU",
        "CPU waits for a job",
    ] {
        assert!(svg.contains(&format!(">{meaning}</text>")), "{svg}");
    }
    // No offload, no timeline.
    let plain = StepResult {
        offload: None,
        ..offload_step()
    };
    assert_eq!(timeline_svg(&plain, &names), None);
}

#[test]
fn timeline_ticks_are_round_and_few() {
    use super::timeline::tick_step;
    assert_eq!(tick_step(600), 100);
    assert_eq!(tick_step(314_960), 50_000);
    assert_eq!(tick_step(1_000_000), 100_000);
    assert_eq!(tick_step(7), 1);
    assert_eq!(tick_step(0), 1);
}

#[test]
fn the_page_shows_the_timeline_only_for_offload_runs() {
    let mut offloaded = run("s", "b", Outcome::Passed);
    offloaded.steps = vec![offload_step()];
    offloaded.cpu_alone = Some(1_200);
    let page = html::html(&report(vec![offloaded], Vec::new()));
    assert!(page.contains("CPU and NPU over the first step"));
    assert!(
        page.contains("offload off): 1,200 cycles; with the engine 600 cycles (0.50×)"),
        "{page}"
    );
    assert!(page.contains(r#"class="timeline""#));
    let page = html::html(&report(vec![run("s", "b", Outcome::Passed)], Vec::new()));
    assert!(!page.contains("timeline"));
}

#[test]
fn a_split_arena_shows_its_pools_in_the_picture() {
    use crate::outcome::{PoolRange, RunPools};
    let mut r = run("s", "a", Outcome::Passed);
    // Two 64-byte buffers live together: one in each pool.
    r.plan = vec![
        planned(0, (0, 1), 64, 16, 0),
        planned(1, (0, 1), 64, 16, 4096),
    ];
    r.arena = Some([8192, 4160, 64, 4224]);
    let pool = |name: &str, start, size, reach: &str| PoolRange {
        name: name.into(),
        start,
        size,
        reach: reach.into(),
        planned: true,
    };
    r.pools = Some(RunPools {
        pools: vec![
            pool("fast", 0, 4096, "cpu"),
            pool("sram", 4096, 4096, "cpu+accel"),
        ],
        guard: 0,
    });
    let layout = board_layout(&r, None).unwrap();
    let pools: Vec<(&str, u32, u32, u32)> = layout
        .pools
        .iter()
        .map(|p| (p.name.as_str(), p.head, p.tail, p.buffers))
        .collect();
    assert_eq!(pools, [("fast", 64, 0, 1), ("sram", 64, 64, 1)]);
    assert_eq!(layout.buffers[1].pool.as_deref(), Some("sram"));
    let picture = arena_picture(&r, None);
    assert!(
        picture.contains("pool sram (cpu+accel): head 64 B"),
        "{picture}"
    );
}

#[test]
fn a_defmt_log_shows_in_the_page_and_the_summary_with_its_timestamps_and_levels() {
    use crate::outcome::{DefmtLine, DefmtLog};
    let line = |timestamp: &str, level, message: &str, location: Option<&str>| DefmtLine {
        timestamp: Some(timestamp.into()),
        level,
        message: message.into(),
        location: location.map(Into::into),
    };
    let mut logged = run("s", "a", Outcome::Passed);
    logged.defmt = Some(DefmtLog {
        lines: vec![
            line(
                "0.000412",
                Some("info"),
                "model <m>: 2468 bytes",
                Some("src/main.rs:7"),
            ),
            line("1.250000", Some("error"), "invoke failed", None),
        ],
        problems: vec!["defmt frame 3 (2 bytes: 01 02) could not be decoded".into()],
    });
    let plain = run("t", "a", Outcome::Passed);
    let r = report(vec![logged, plain], Vec::new());
    let page = html(&r);
    assert!(
        page.contains(r#"<details class="defmt" open><summary>defmt log (2 lines; timestamps: the firmware's <code>defmt::timestamp!</code>)</summary>"#),
        "{page}"
    );
    assert!(page.contains(
        r#"<tr class="lvl-info"><td class="ts">0.000412</td><td class="lvl">INFO</td><td class="msg">model &lt;m&gt;: 2468 bytes</td><td class="at">src/main.rs:7</td></tr>"#
    ));
    assert!(page.contains(
        r#"<tr class="lvl-error"><td class="ts">1.250000</td><td class="lvl">ERROR</td>"#
    ));
    assert!(page.contains(
        r#"<p class="defmt-problem">hilt: defmt frame 3 (2 bytes: 01 02) could not be decoded</p>"#
    ));
    // Only the run with a log has the section.
    assert_eq!(page.matches("<details class=\"defmt\"").count(), 1);
    let v: serde_json::Value = serde_json::from_str(&summary_json(&r).unwrap()).unwrap();
    let runs = v["runs"].as_array().unwrap();
    let with = runs.iter().find(|r| r["scenario"] == "s").unwrap();
    assert_eq!(
        with["defmt"]["lines"][0],
        serde_json::json!({"timestamp": "0.000412", "level": "info", "message": "model <m>: 2468 bytes", "location": "src/main.rs:7"})
    );
    assert_eq!(with["defmt"]["lines"][1]["level"], "error");
    assert_eq!(with["defmt"]["problems"].as_array().unwrap().len(), 1);
    let without = runs.iter().find(|r| r["scenario"] == "t").unwrap();
    assert!(without.get("defmt").is_none(), "{without}");
}
