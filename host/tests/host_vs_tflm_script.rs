//! `ci/host-vs-tflm.py`'s arguments and set-up errors: each missing piece is
//! named with its remedy, and the script stops before timing anything. Its
//! figures are not checked here (a test that times is a flaky test); the
//! book's host table (`docs/performance.md`) is its output.
//!
//! Runs the script with TFLM's Python (`HILT_TFLM_PYTHON`, else
//! `build/tflm-venv/bin/python`) or, for the errors found before TFLM is
//! imported, any `python3`; skipped when there is no Python at all.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A Python to run the script with, or `None` (after a message) to skip.
fn python() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("HILT_TFLM_PYTHON").map(PathBuf::from),
        Some(common::repo().join("build/tflm-venv/bin/python")),
        Some(PathBuf::from("python3")),
    ];
    let found = candidates.into_iter().flatten().find(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        eprintln!("no Python found: host-vs-tflm script checks skipped");
    }
    found
}

/// Runs the script with `args`.
fn script(python: &Path, args: &[&str]) -> Output {
    Command::new(python)
        .arg(common::repo().join("ci/host-vs-tflm.py"))
        .args(args)
        .output()
        .expect("run ci/host-vs-tflm.py")
}

/// The script's stderr, after checking it failed with the set-up code 2.
fn refused(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty(), "timed something: {:?}", out.stdout);
    stderr
}

/// A conformance folder holding only `manifest` as its manifest.json.
fn set_with(manifest: &str, tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hilt-host-vs-tflm-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("manifest.json"), manifest).unwrap();
    dir
}

const ONE_MODEL: &str =
    r#"{"models": [{"name": "tiny", "model": "models/tiny.tflite", "cases": []}]}"#;

#[test]
fn help_lists_every_option() {
    let Some(py) = python() else { return };
    let out = script(&py, &["--help"]);
    let text = common::succeeded(&out);
    for option in [
        "--conformance",
        "--ops",
        "--models",
        "--hilt",
        "--iterations",
        "--seconds",
        "--rounds",
        "--tflm-inputs",
        "--json",
    ] {
        assert!(text.contains(option), "--help lacks {option}:\n{text}");
    }
    // argparse wraps lines: compare with the whitespace folded.
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        folded.contains("cargo build --release -p hilt -j 1"),
        "{text}"
    );
}

#[test]
fn a_missing_set_is_named() {
    let Some(py) = python() else { return };
    let dir = std::env::temp_dir().join("hilt-host-vs-tflm-no-such-set");
    let err = refused(&script(&py, &["--conformance", dir.to_str().unwrap()]));
    assert!(err.contains("conformance set not found"), "{err}");
    assert!(
        err.contains(&dir.join("manifest.json").display().to_string()),
        "{err}"
    );
}

#[test]
fn a_manifest_without_models_is_named() {
    let Some(py) = python() else { return };
    let dir = set_with(r#"{"version": 1}"#, "nomodels");
    let err = refused(&script(&py, &["--conformance", dir.to_str().unwrap()]));
    assert!(err.contains("has no \"models\" list"), "{err}");
    let dir = set_with("{not json", "badjson");
    let err = refused(&script(&py, &["--conformance", dir.to_str().unwrap()]));
    assert!(err.contains("is unreadable"), "{err}");
}

#[test]
fn unknown_models_are_named() {
    let Some(py) = python() else { return };
    let dir = set_with(ONE_MODEL, "unknown");
    let set = dir.to_str().unwrap();
    let err = refused(&script(
        &py,
        &["--conformance", set, "--models", "tiny,nosuch,other"],
    ));
    assert!(err.contains("nosuch, other"), "{err}");
    assert!(
        !err.contains("tiny"),
        "a known model named as unknown: {err}"
    );
}

#[test]
fn a_missing_hilt_binary_names_the_build_command() {
    let Some(py) = python() else { return };
    let dir = set_with(ONE_MODEL, "nohilt");
    let hilt = dir.join("no-hilt-here");
    let args = [
        "--conformance",
        dir.to_str().unwrap(),
        "--hilt",
        hilt.to_str().unwrap(),
    ];
    let err = refused(&script(&py, &args));
    assert!(err.contains(&hilt.display().to_string()), "{err}");
    assert!(err.contains("cargo build --release -p hilt -j 1"), "{err}");
}

#[test]
fn counts_must_be_positive() {
    let Some(py) = python() else { return };
    for (option, value) in [
        ("--rounds", "0"),
        ("--iterations", "-3"),
        ("--seconds", "0"),
    ] {
        let err = refused(&script(&py, &[option, value]));
        assert!(err.contains(option), "{option} {value}: {err}");
    }
}

#[test]
fn a_python_without_tflm_is_sent_to_the_setup() {
    // Needs a Python that lacks tflite-micro: the system's, most often.
    let py = PathBuf::from("python3");
    let lacks = Command::new(&py)
        .args(["-c", "import tflite_micro"])
        .output()
        .is_ok_and(|o| !o.status.success());
    if !lacks {
        eprintln!("no python3 without tflite-micro: check skipped");
        return;
    }
    let dir = set_with(ONE_MODEL, "notflm");
    let args = [
        "--conformance",
        dir.to_str().unwrap(),
        "--hilt",
        env!("CARGO_BIN_EXE_hilt"),
    ];
    let err = refused(&script(&py, &args));
    assert!(
        err.contains("cannot import TFLM's Python interpreter"),
        "{err}"
    );
    assert!(err.contains("ci/setup.sh"), "{err}");
    assert!(err.contains("build/tflm-venv"), "{err}");
}
