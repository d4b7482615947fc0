//! Replays the committed fuzz seeds (and any crash reproducers kept there)
//! through the fuzz target's own checks, so a fixed fuzz finding stays
//! fixed without cargo-fuzz installed, and a seed is held to exactly what
//! the fuzzer holds an input to.

use std::path::Path;

#[path = "../fuzz/checks/load_and_plan.rs"]
mod load_and_plan;

#[test]
fn every_committed_seed_passes_the_fuzz_targets_checks() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/load_and_plan");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/seeds/load_and_plan") {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        // A panic names the seed.
        let outcome = std::panic::catch_unwind(|| load_and_plan::check(&bytes));
        assert!(
            outcome.is_ok(),
            "seed {} broke a fuzz check",
            path.display()
        );
        count += 1;
    }
    assert!(count > 0, "no seeds in {}", dir.display());
}
