//! The lean schedule and constants in flash, end to end on the host:
//!
//! - `hilt layout --schedule lean --constants flash`: what runs in place
//!   and why the rest does not, TFLM's bound beside the lean one, and the
//!   constants moved out of the tail;
//! - every case of every conformance model under the lean schedule, with
//!   kernel constants in a constant image and the optimal planner, gives
//!   TFLM's outputs, and the book's table (`docs/memory.md`, "Below the
//!   liveness bound") holds: at most 0.6 × TFLM's arena on the M4 where
//!   hilt gets there, the committed bytes themselves, the bounds.
//!
//! A conformance set that is absent is skipped unless
//! `HILT_CONFORMANCE_REQUIRED=1`.

mod common;

use hilt::conformance::{RunSetup, run_model_with};
use hilt_runtime::schedule::Schedule;
use hilt_runtime::writer::examples::mobilenet_blocks_int8;

/// TFLM's arena on the Cortex-M4 (32-bit; `tflm-cortex-m4.md`), and the
/// head + tail hilt commits on the host with the lean schedule, constants
/// in flash and the optimal planner (= what `qemu-mps2-an386` commits).
const HELD: [(&str, u64, usize); 5] = [
    ("mlperf_tiny_kws_dscnn_int8", 22_772, 10_852),
    ("mlperf_tiny_vww_mobilenetv1_int8", 100_660, 56_636),
    ("mlperf_tiny_ic_resnet8_int8", 54_340, 29_336),
    ("mlperf_tiny_ad_autoencoder_int8", 2_260, 1_216),
    ("tflm_person_detect_int8", 82_292, 47_460),
];

#[test]
fn lean_runs_match_tflm_below_its_arena() {
    let setup = RunSetup {
        schedule: Schedule::Lean,
        constants_in_flash: true,
        optimal: true,
    };
    let mut failed = Vec::new();
    println!(
        "{:<36} {:>7} {:>8} {:>12} {:>14}",
        "model", "cases", "result", "lean arena", "TFLM (x86-64)"
    );
    for (dir, entry) in common::conformance_sets()
        .iter()
        .flat_map(|(d, ms)| ms.iter().map(move |m| (d, m)))
    {
        let outcome = run_model_with(dir, entry, setup);
        let ok = outcome.failures.is_empty();
        println!(
            "{:<36} {:>3}/{:<3} {:>8} {:>12} {:>14}",
            entry.name,
            outcome.cases_passed,
            outcome.cases,
            if ok { "match" } else { "MISMATCH" },
            outcome.arena_used,
            entry.tflm.arena_used_total
        );
        for f in &outcome.failures {
            failed.push(format!("{}: {f}", entry.name));
        }
        if let Some(&(_, tflm_m4, held)) = HELD.iter().find(|(n, ..)| *n == entry.name) {
            if outcome.arena_used != held {
                failed.push(format!(
                    "{}: commits {} bytes, the book says {held}",
                    entry.name, outcome.arena_used
                ));
            }
            let ratio = outcome.arena_used as f64 / tflm_m4 as f64;
            println!("    {ratio:.3} × TFLM's {tflm_m4} bytes on the M4");
        }
    }
    assert!(
        failed.is_empty(),
        "{} failures:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// The book's table (`docs/memory.md`, "Below the liveness bound"), row
/// by row as `hilt layout --board qemu-mps2-an386 --planner optimal
/// --schedule lean --constants flash` works it out: TFLM's schedule's
/// bound, the lean bound, head + tail, and for person_detect the constant
/// image and the tail it leaves.
#[test]
fn the_books_lean_table_holds() {
    // (model, classic bound, lean bound, head + tail, constants, tail)
    let rows: [(&str, u32, u32, u32, u32, u32); 5] = [
        (
            "mlperf_tiny_kws_dscnn_int8",
            16_000,
            10_240,
            10_852,
            5_896,
            612,
        ),
        (
            "mlperf_tiny_vww_mobilenetv1_int8",
            55_296,
            55_296,
            56_636,
            25_240,
            1_340,
        ),
        (
            "mlperf_tiny_ic_resnet8_int8",
            49_152,
            28_672,
            29_336,
            3_888,
            664,
        ),
        ("mlperf_tiny_ad_autoencoder_int8", 768, 768, 1_216, 800, 448),
        (
            "tflm_person_detect_int8",
            55_296,
            46_080,
            47_460,
            25_344,
            1_380,
        ),
    ];
    let board =
        hilt::config::board::load_named(&common::repo().join("boards"), "qemu-mps2-an386").unwrap();
    let options = hilt::layout::LayoutOptions {
        planner: hilt_runtime::planner::PlannerKind::Optimal,
        constants: hilt::config::scenario::ConstantsPlace::Flash,
        schedule: Schedule::Lean,
        ..hilt::layout::LayoutOptions::for_board(&board)
    };
    let mut seen = 0;
    for (dir, entry) in common::conformance_sets()
        .iter()
        .flat_map(|(d, ms)| ms.iter().map(move |m| (d, m)))
    {
        let Some(&(_, classic, lean, total, constants, tail)) =
            rows.iter().find(|r| r.0 == entry.name)
        else {
            continue;
        };
        seen += 1;
        let bytes = std::fs::read(dir.join(&entry.model)).unwrap();
        let report = hilt::layout::layout_bytes(&bytes, &options).unwrap();
        let got = (
            report.lean.as_ref().map_or(0, |l| l.classic_bound),
            report.lower_bound,
            report.head + report.tail,
            report.constants,
            report.tail,
        );
        assert_eq!(
            got,
            (classic, lean, total, constants, tail),
            "{}",
            entry.name
        );
        assert_eq!(report.constant_image.len(), constants as usize);
        if entry.name == "mlperf_tiny_ic_resnet8_int8" {
            // Its residual blocks' chains, and why the stem starts none.
            let lean = report.lean.as_ref().unwrap();
            assert_eq!(
                lean.fused,
                [
                    "ops 1, 2, 3 (CONV_2D → CONV_2D → ADD; op 3 runs them, the ADD over the input)",
                    "ops 4, 5 (CONV_2D → CONV_2D; op 5 runs them)",
                ]
            );
            assert!(
                lean.not_fused.contains(
                    &"op 0 CONV_2D: its output is read by op 3 too (needs a whole buffer)".into()
                ),
                "{:?}",
                lean.not_fused
            );
        }
    }
    assert!(
        seen == 0 || seen == rows.len(),
        "{seen} of the table's models found"
    );
}

fn model_file() -> String {
    let dir = std::env::temp_dir().join(format!("hilt-cli-lean-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("blocks.tflite");
    std::fs::write(&path, mobilenet_blocks_int8(48, 12)).unwrap();
    path.to_string_lossy().into_owned()
}

/// `hilt layout MODEL` on the AN386 as JSON, with `extra` arguments (run
/// from the repository root, so `boards` is the shipped folder).
fn json(model: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "layout",
        model,
        "--board",
        "qemu-mps2-an386",
        "--boards-dir",
        "boards",
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--format", "json"]);
    serde_json::from_str(&common::succeeded(&common::hilt(&args))).unwrap()
}

#[test]
fn the_lean_layout_says_what_runs_in_place_and_what_it_saves() {
    let model = model_file();
    let tflm = json(&model, &[]);
    let lean = json(&model, &["--schedule", "lean", "--constants", "flash"]);
    // TFLM's schedule: no lean report, constants in the tail.
    assert!(tflm.get("lean").is_none() && tflm.get("constants").is_none());
    let figures =
        |v: &serde_json::Value| (v["head"].as_u64().unwrap(), v["tail"].as_u64().unwrap());
    let ((tflm_head, tflm_tail), (lean_head, lean_tail)) = (figures(&tflm), figures(&lean));
    assert!(
        lean_head < tflm_head,
        "head {lean_head} against {tflm_head}"
    );
    let constants = lean["constants"].as_u64().unwrap();
    assert!(
        constants > 0 && lean_tail < tflm_tail,
        "tail {lean_tail} against {tflm_tail}"
    );
    // The classic bound is TFLM's schedule's: the widest tensor (48×12×16)
    // beside the widening op's input (48×12×8).
    assert_eq!(lean["lean"]["classic_bound"], 9_216 + 4_608);
    assert!(
        lean["lean"]["in_place"]
            .as_array()
            .unwrap()
            .contains(&2.into())
    );

    let table = common::succeeded(&common::hilt([
        "layout",
        &model,
        "--board",
        "qemu-mps2-an386",
        "--boards-dir",
        "boards",
        "--schedule",
        "lean",
        "--constants",
        "flash",
    ]));
    for line in [
        "classic          13824 B",
        "lean schedule: ",
        "as TFLM's: op 0 CONV_2D: not a 1×1 convolution of one group",
        "(kernel constants in flash, beside the model: not in the arena)",
    ] {
        assert!(table.contains(line), "no {line:?} in:\n{table}");
    }
}

/// The 64 KiB board (`qemu-mps2-an386-64k`, issue 24's small part): as
/// that board commits them, person_detect's plan on TFLM's schedule cannot
/// fit its arena and the error names the bytes short and the op where most
/// are live; on the lean schedule with constants in flash it fits. (The
/// run itself, outputs equal to TFLM's and no stack overflow, is the
/// `person_detect_64k` scenario of the gate.)
#[test]
fn person_detect_fits_the_64k_board_only_on_the_lean_schedule() {
    let Some((dir, models)) = common::conformance_models() else {
        return;
    };
    let Some(entry) = models.iter().find(|m| m.name == "tflm_person_detect_int8") else {
        return;
    };
    let model = dir.join(&entry.model).to_string_lossy().into_owned();
    let on_board = |extra: &[&str]| {
        let mut args = vec![
            "layout",
            model.as_str(),
            "--board",
            "qemu-mps2-an386-64k",
            "--boards-dir",
            "boards",
            "--planner",
            "optimal",
        ];
        args.extend_from_slice(extra);
        common::hilt(&args)
    };
    let tflm = on_board(&[]);
    let said = String::from_utf8_lossy(&tflm.stderr);
    assert!(!tflm.status.success(), "{said}");
    assert!(
        said.contains("arena too small: 47488 bytes given, 34488 short")
            && said.contains("the most bytes are live at op 2"),
        "{said}"
    );
    let lean = on_board(&[
        "--schedule",
        "lean",
        "--constants",
        "flash",
        "--format",
        "json",
    ]);
    let lean: serde_json::Value = serde_json::from_str(&common::succeeded(&lean)).unwrap();
    let committed = lean["head"].as_u64().unwrap() + lean["tail"].as_u64().unwrap();
    assert_eq!(committed, 47_460, "{lean}");
    assert!(committed <= 0xB980);
}
