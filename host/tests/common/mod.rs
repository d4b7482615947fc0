//! Helpers shared by the host's integration tests.
#![allow(dead_code, unreachable_pub)]

pub mod hard_sets;
pub mod rust_source;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

/// Whether `qemu-system-arm` runs here. Without it the caller's test is
/// skipped with a message, unless `HILT_QEMU_REQUIRED=1` (as in `.ci/run`),
/// which turns the absence into a failure.
pub fn qemu_available(what: &str) -> bool {
    let ok = Command::new("qemu-system-arm")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        let required = std::env::var("HILT_QEMU_REQUIRED").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "qemu-system-arm is required (HILT_QEMU_REQUIRED=1) but missing: run ci/setup.sh"
        );
        eprintln!("qemu-system-arm not installed: {what} skipped (ci/setup.sh installs it)");
    }
    ok
}

/// Runs the `hilt` binary from the repository root.
pub fn hilt<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hilt"))
        .current_dir(repo())
        .args(args)
        .output()
        .expect("run hilt")
}

/// Runs `hilt COMMAND --repo REPO ARGS…` from `dir` (QEMU's working
/// folder too) with `env` set: whether it succeeded, and its stdout and
/// stderr together.
pub fn hilt_in(
    dir: &std::path::Path,
    env: &[(&str, &str)],
    command: &str,
    args: &[&str],
) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hilt"))
        .current_dir(dir)
        .envs(env.iter().copied())
        .arg(command)
        .arg("--repo")
        .arg(repo())
        .args(args)
        .output()
        .expect("run hilt");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

/// The stdout of a `hilt` run that must have succeeded (else the test fails
/// showing both streams).
pub fn succeeded(out: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The shared conformance set and the models to run from it: every model,
/// or those `HILT_CONFORMANCE_MODELS=a,b` names. `None` (after a message)
/// when the set is absent, which fails instead under
/// `HILT_CONFORMANCE_REQUIRED=1`.
pub fn conformance_models() -> Option<(PathBuf, Vec<hilt::conformance::ModelEntry>)> {
    conformance_set_models(hilt::conformance::locate(&repo()))
}

/// Every conformance set ([`hilt::conformance::locate_all`]) and its
/// models, as [`conformance_set_models`] gives them (absent sets skipped
/// after a message, or a failure under `HILT_CONFORMANCE_REQUIRED=1`).
pub fn conformance_sets() -> Vec<(PathBuf, Vec<hilt::conformance::ModelEntry>)> {
    hilt::conformance::locate_all(&repo())
        .into_iter()
        .filter_map(conformance_set_models)
        .collect()
}

/// [`conformance_models`] for the set in folder `dir` (e.g. the second
/// set, `../shared/conformance-ops`): same skip rule, same model filter.
pub fn conformance_set_models(
    dir: PathBuf,
) -> Option<(PathBuf, Vec<hilt::conformance::ModelEntry>)> {
    if !dir.join("manifest.json").is_file() {
        let required = std::env::var("HILT_CONFORMANCE_REQUIRED").is_ok_and(|v| v == "1");
        assert!(!required, "conformance set not found at {}", dir.display());
        eprintln!("conformance set not found at {}: skipped", dir.display());
        return None;
    }
    let manifest = hilt::conformance::read_manifest(&dir).unwrap();
    let only: Option<Vec<String>> = std::env::var("HILT_CONFORMANCE_MODELS")
        .ok()
        .map(|v| v.split(',').map(str::to_string).collect());
    let models = manifest
        .models
        .into_iter()
        .filter(|m| only.as_ref().is_none_or(|o| o.contains(&m.name)))
        .collect();
    Some((dir, models))
}
