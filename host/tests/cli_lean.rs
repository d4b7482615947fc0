//! `hilt layout --schedule lean --constants flash`: what the lean schedule
//! runs in place and why it leaves the rest, TFLM's bound beside the lean
//! one, and the constants moved out of the tail.

use std::path::PathBuf;
use std::process::{Command, Output};

use hilt_runtime::writer::examples::mobilenet_blocks_int8;

fn hilt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hilt"))
        .args(args)
        .output()
        .expect("run hilt")
}

fn model_file() -> String {
    let dir = std::env::temp_dir().join(format!("hilt-cli-lean-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("blocks.tflite");
    std::fs::write(&path, mobilenet_blocks_int8(48, 12)).unwrap();
    path.to_string_lossy().into_owned()
}

fn boards() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../boards")
        .to_string_lossy()
        .into_owned()
}

fn json(model: &str, extra: &[&str]) -> serde_json::Value {
    let boards = boards();
    let mut args = vec![
        "layout",
        model,
        "--board",
        "qemu-mps2-an386",
        "--boards-dir",
        &boards,
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--format", "json"]);
    let out = hilt(&args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
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

    let boards = boards();
    let out = hilt(&[
        "layout",
        &model,
        "--board",
        "qemu-mps2-an386",
        "--boards-dir",
        &boards,
        "--schedule",
        "lean",
        "--constants",
        "flash",
    ]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for line in [
        "classic          13824 B",
        "lean schedule: ",
        "as TFLM's: op 0 CONV_2D: not a 1×1 convolution of one group",
        "(kernel constants in flash, beside the model: not in the arena)",
    ] {
        assert!(table.contains(line), "no {line:?} in:\n{table}");
    }
}
