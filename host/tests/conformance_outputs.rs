//! Conformance suite, outputs: every case of every model of every set
//! (`HILT_CONFORMANCE_DIR`, `:`-separated; default `../shared/conformance`
//! and `../shared/conformance-ops`), every step, compared with TFLM's
//! outputs (exact or within the stated float tolerance), plus the arena
//! hilt needs against TFLM's. None is skipped: a model hilt cannot load
//! fails, naming every operator it lacks.
//!
//! A set that is absent is skipped unless `HILT_CONFORMANCE_REQUIRED=1`.
//! `HILT_CONFORMANCE_MODELS=a,b` limits the run to some models.

mod common;

use hilt::conformance::run_model;

#[test]
fn every_model_matches_tflm() {
    let mut failed = Vec::new();
    println!(
        "{:<36} {:>7} {:>8} {:>12} {:>12}",
        "model", "cases", "result", "hilt arena", "TFLM arena"
    );
    let sets = common::conformance_sets();
    for (dir, entry) in sets
        .iter()
        .flat_map(|(d, ms)| ms.iter().map(move |m| (d, m)))
    {
        let outcome = run_model(dir, entry);
        let ok = outcome.failures.is_empty();
        println!(
            "{:<36} {:>3}/{:<3} {:>8} {:>12} {:>12}",
            entry.name,
            outcome.cases_passed,
            outcome.cases,
            if ok { "match" } else { "MISMATCH" },
            outcome.arena_used,
            entry.tflm.arena_used_total
        );
        for f in &outcome.failures {
            println!("    {f}");
            failed.push(format!("{}: {f}", entry.name));
        }
    }
    assert!(
        failed.is_empty(),
        "{} failures:\n{}",
        failed.len(),
        failed.join("\n")
    );
}
