//! Conformance suite, outputs: every case of every model in the shared set,
//! every step, compared with TFLM's outputs (exact or within the stated
//! float tolerance), plus the arena hilt needs against TFLM's.
//!
//! Skipped when the set is absent unless `HILT_CONFORMANCE_REQUIRED=1`.
//! `HILT_CONFORMANCE_MODELS=a,b` limits the run to some models.

use std::path::Path;

use hilt::conformance::{locate, read_manifest, run_model};

#[test]
fn every_model_matches_tflm() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let dir = locate(repo);
    if !dir.join("manifest.json").is_file() {
        let required = std::env::var("HILT_CONFORMANCE_REQUIRED").is_ok_and(|v| v == "1");
        assert!(!required, "conformance set not found at {}", dir.display());
        eprintln!(
            "conformance set not found at {}: suite skipped",
            dir.display()
        );
        return;
    }
    let manifest = read_manifest(&dir).unwrap();
    let only: Option<Vec<String>> = std::env::var("HILT_CONFORMANCE_MODELS")
        .ok()
        .map(|v| v.split(',').map(str::to_string).collect());
    let mut failed = Vec::new();
    println!(
        "{:<36} {:>7} {:>8} {:>12} {:>12}",
        "model", "cases", "result", "hilt arena", "TFLM arena"
    );
    for entry in &manifest.models {
        if only.as_ref().is_some_and(|o| !o.contains(&entry.name)) {
            continue;
        }
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
