//! TFLM itself runs the models `hilt layout --write-offline` writes: same
//! outputs as the original, in the planned head hilt's plan promises.
//!
//! Runs `ci/tflm-offline-check.py` with TFLM's Python interpreter (the
//! tflite-micro package that `ci/setup.sh` installs into `build/tflm-venv`,
//! or the Python named by `HILT_TFLM_PYTHON`). Skipped when that Python,
//! the package or the conformance set is missing, unless
//! `HILT_CONFORMANCE_REQUIRED=1` (CI), which makes the absence a failure.

mod common;

use std::path::PathBuf;
use std::process::Command;

/// The Python that has tflite-micro, or `None` (after a message) to skip.
fn tflm_python() -> Option<PathBuf> {
    let python = std::env::var_os("HILT_TFLM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::repo().join("build/tflm-venv/bin/python"));
    let ok = Command::new(&python)
        .args(["-c", "import tflite_micro"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        let required = std::env::var("HILT_CONFORMANCE_REQUIRED").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "{} has no tflite-micro (HILT_CONFORMANCE_REQUIRED=1): run ci/setup.sh",
            python.display()
        );
        eprintln!(
            "{} has no tflite-micro: TFLM check skipped (ci/setup.sh installs it)",
            python.display()
        );
    }
    ok.then_some(python)
}

/// Runs the check script on `models` and returns its per-model figures.
fn check(
    python: &PathBuf,
    dir: &std::path::Path,
    models: &[&str],
    strict: bool,
) -> serde_json::Value {
    let json = std::env::temp_dir().join(format!(
        "hilt-tflm-check-{}-{}.json",
        std::process::id(),
        if strict { "strict" } else { "all" }
    ));
    let mut cmd = Command::new(python);
    cmd.arg(common::repo().join("ci/tflm-offline-check.py"))
        .arg("--hilt")
        .arg(env!("CARGO_BIN_EXE_hilt"))
        .arg("--conformance")
        .arg(dir)
        .arg("--models")
        .arg(models.join(","))
        .arg("--json")
        .arg(&json);
    if strict {
        cmd.arg("--strict-head");
    }
    let out = cmd.output().expect("run ci/tflm-offline-check.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

#[test]
fn tflm_runs_vww_in_the_optimal_head_with_the_same_outputs() {
    let Some((dir, models)) = common::conformance_models() else {
        return;
    };
    let name = "mlperf_tiny_vww_mobilenetv1_int8";
    let Some(entry) = models.iter().find(|m| m.name == name) else {
        eprintln!("{name} not selected: skipped");
        return;
    };
    let Some(python) = tflm_python() else {
        return;
    };
    let rows = check(&python, &dir, &[name], true);
    let row = &rows[0];
    // TFLM's own greedy head without the plan, the lower bound with it.
    assert_eq!(row["tflm_head_original"], entry.tflm.arena_head);
    assert_eq!(row["tflm_head_offline"], entry.liveness_lower_bound_bytes);
    assert_eq!(row["tflm_head_offline"], 55_296);
    assert_eq!(row["hilt_head"], row["tflm_head_offline"]);
    assert_eq!(row["outputs_equal"], true);
    assert_eq!(row["outputs_expected"], true);
}

/// Every model of both conformance sets: TFLM gives the same outputs with
/// hilt's plan, its planned head is the one hilt predicted (its kernels'
/// scratch placed around the fixed tensors) and never above its own plan's;
/// where hilt could not promise that, it wrote nothing.
#[test]
fn tflm_gives_the_same_outputs_for_every_offline_planned_model() {
    let Some(python) = tflm_python() else {
        return;
    };
    for (dir, models) in common::conformance_sets() {
        let names: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
        let rows = check(&python, &dir, &names, false);
        for row in rows.as_array().unwrap() {
            if row["written"] == false {
                assert!(row["refusal"].as_str().is_some(), "{row}");
                continue;
            }
            assert_eq!(row["outputs_equal"], true, "{row}");
            assert_eq!(
                row["tflm_head_offline"], row["tflm_head_predicted"],
                "{row}"
            );
            assert!(
                row["tflm_head_offline"].as_u64() <= row["tflm_head_original"].as_u64(),
                "{row}"
            );
            // A fixed plan never makes TFLM's head smaller than hilt's.
            assert!(
                row["tflm_head_offline"].as_u64() >= row["hilt_head"].as_u64(),
                "{row}"
            );
        }
    }
}
