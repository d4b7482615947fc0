//! Replays the committed fuzz seeds and corpus (and any crash reproducers
//! kept there) through the fuzz targets' own checks, so a fixed fuzz
//! finding stays fixed without cargo-fuzz installed, and a committed input
//! is held to exactly what the fuzzer holds an input to.

use std::path::Path;

#[path = "../fuzz/checks/load_and_plan.rs"]
mod load_and_plan;

#[path = "../fuzz/checks/invoke.rs"]
mod invoke;

/// Runs `check` on every file of `fuzz/seeds/TARGET`; a panic names the file.
fn replay(target: &str, check: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target);
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let outcome = std::panic::catch_unwind(|| check(&bytes));
        assert!(
            outcome.is_ok(),
            "{} broke the {target} fuzz checks",
            path.display()
        );
        count += 1;
    }
    assert!(count > 0, "no seeds in {}", dir.display());
}

#[test]
fn every_committed_seed_passes_the_load_and_plan_checks() {
    replay("load_and_plan", load_and_plan::check);
}

#[test]
fn every_committed_invoke_input_passes_the_invoke_checks() {
    replay("invoke", invoke::check);
}
