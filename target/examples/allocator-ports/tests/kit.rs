//! The conformance kit on the two example ports: the correct one passes
//! every set (TFLM's vectors, adversarial, random, every conformance
//! model's requests), the broken one fails with the pair that shares bytes
//! named.
//!
//! The conformance models are found through `HILT_CONFORMANCE_DIR` or the
//! shared folder beside the repository; without them those checks are
//! skipped with a message (a failure under `HILT_CONFORMANCE_REQUIRED=1`).

use std::path::PathBuf;

use hilt_allocator_ports::{BrokenFirstFit, FirstFit};
use hilt_runtime::port::kit::{KitFailure, PlannerKit, RequestSet, sets};
use hilt_runtime::port::{PlanFailure, check_plan};
use hilt_runtime::request::BufferOwner;

#[test]
fn first_fit_passes_every_shipped_set() {
    let report = PlannerKit::new().run(&FirstFit);
    println!("{report}");
    report.assert_passed();
    // Every set but the one that cannot fit 32 bits was planned: first fit
    // reuses memory, so the huge buffers disjoint in time fit.
    assert_eq!(report.passed.iter().filter(|q| q.head.is_none()).count(), 1);
    assert!(report.worst_ratio() >= 1.0);
}

#[test]
fn broken_first_fit_fails_naming_the_pair_that_shares_a_step() {
    let report = PlannerKit::new().run(&BrokenFirstFit);
    let medium = report
        .failures
        .iter()
        .find(|f| f.set == "tflm medium")
        .expect("tflm medium must fail");
    let (first, second) = medium.overlapping_pair().expect("an overlap");
    assert_eq!((first.index, second.index), (0, 1));
    assert_eq!(first.request.owner(), BufferOwner::Tensor(0));
    assert_eq!((second.request.first_step, first.request.last_step), (1, 1));
    assert_eq!(
        medium.to_string(),
        "set \"tflm medium\": buffers 0 (tensor 0, steps 0..1, [0,10)) and \
         1 (tensor 1, steps 1..2, [0,20)) are live together at step 1 but share bytes [0,10)"
    );
    // Sets where no two buffers only touch still pass: the bug is subtle.
    assert!(report.passed.iter().any(|q| q.set == "tflm basics"));
    assert!(
        report
            .failures
            .iter()
            .any(|f| f.set == "chain sharing one step")
    );
}

#[test]
fn a_quality_limit_is_a_failure_only_when_set() {
    let sets = sets::tflm_vectors();
    let report = PlannerKit::new().check_sets(&FirstFit, &sets);
    report.assert_passed();
    let worst = report.worst_ratio();
    let strict = PlannerKit::new()
        .with_quality_limit(worst - 0.01)
        .check_sets(&FirstFit, &sets);
    assert!(
        strict
            .failures
            .iter()
            .all(|f| matches!(f.failure, KitFailure::AboveLimit { .. })),
        "{strict}"
    );
    assert!(!strict.failures.is_empty());
}

/// The conformance models' folders, or `None` (after a message) without them.
fn conformance_models() -> Option<Vec<PathBuf>> {
    let shared = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../../shared");
    let dirs = match std::env::var_os("HILT_CONFORMANCE_DIR") {
        Some(dir) => vec![PathBuf::from(dir)],
        None => vec![shared.join("conformance"), shared.join("conformance-ops")],
    };
    let mut models: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d.join("models")).ok())
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "tflite"))
        .collect();
    if models.is_empty() {
        let required = std::env::var("HILT_CONFORMANCE_REQUIRED").is_ok_and(|v| v == "1");
        assert!(!required, "conformance set missing");
        eprintln!("conformance set not found: model checks skipped");
        return None;
    }
    models.sort();
    Some(models)
}

fn model_sets(models: &[PathBuf]) -> Vec<RequestSet> {
    models
        .iter()
        .map(|path| {
            let bytes = std::fs::read(path).unwrap();
            let name = path.file_stem().unwrap().to_string_lossy();
            sets::model(&name, &bytes, 16).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .collect()
}

#[test]
fn every_conformance_model_first_fit_passes_and_the_broken_port_fails() {
    let Some(models) = conformance_models() else {
        return;
    };
    let sets = model_sets(&models);
    let good = PlannerKit::new().check_sets(&FirstFit, &sets);
    println!("{good}");
    good.assert_passed();
    assert_eq!(good.passed.len(), models.len());
    let broken = PlannerKit::new().check_sets(&BrokenFirstFit, &sets);
    println!("{broken}");
    // A model whose ops each read one tensor and write the next has pairs
    // that touch at every step: the broken port fails on those.
    assert!(!broken.failures.is_empty());
    for failure in &broken.failures {
        let (first, second) = failure.overlapping_pair().expect("only overlaps");
        let set = sets.iter().find(|s| s.name == failure.set).unwrap();
        assert!(
            set.requests[first.index as usize]
                .overlaps_in_time(&set.requests[second.index as usize])
        );
        // The pair shares exactly a boundary step, the bug's signature.
        let touch = first.request.live_until() == second.request.first_step
            || second.request.live_until() == first.request.first_step
            || first.request.first_step == first.request.live_until()
            || second.request.first_step == second.request.live_until();
        assert!(touch, "{failure}");
    }
}

#[test]
fn check_plan_names_the_bytes_two_live_buffers_share() {
    let requests = sets::from_adds(&[(512, 2, 4), (512, 4, 5)]);
    let failure = check_plan(&requests, &[1024, 1280], 1792).unwrap_err();
    assert!(
        matches!(failure, PlanFailure::Overlap { first, second } if (first.index, second.index) == (0, 1))
    );
    assert_eq!(failure.overlap(), Some((4, 1280, 1536)));
    assert_eq!(
        failure.to_string(),
        "buffers 0 (tensor 0, steps 2..4, [1024,1536)) and 1 (tensor 1, steps 4..5, [1280,1792)) \
         are live together at step 4 but share bytes [1280,1536)"
    );
}
