//! Conformance suite, outputs: every case of every model in the shared set,
//! every step, compared with TFLM's outputs (exact or within the stated
//! float tolerance), plus the arena hilt needs against TFLM's.
//!
//! Skipped when the set is absent unless `HILT_CONFORMANCE_REQUIRED=1`.
//! `HILT_CONFORMANCE_MODELS=a,b` limits the run to some models.

mod common;

use hilt::conformance::run_model;

#[test]
fn every_model_matches_tflm() {
    let Some((dir, models)) = common::conformance_models() else {
        return;
    };
    let mut failed = Vec::new();
    println!(
        "{:<36} {:>7} {:>8} {:>12} {:>12}",
        "model", "cases", "result", "hilt arena", "TFLM arena"
    );
    for entry in &models {
        let outcome = run_model(&dir, entry);
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
