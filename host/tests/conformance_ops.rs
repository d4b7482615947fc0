//! Conformance suite, part 2 (`../shared/conformance-ops`, or
//! `HILT_CONFORMANCE_OPS_DIR`): every model whose operators all have a
//! kernel in `all_builtins` runs every case and must match TFLM exactly (or
//! within the stated float tolerance); the others are listed with the
//! operators that block them. Which models are checked comes from the
//! resolver, so a model is checked as soon as its kernels exist. A kernel
//! that exists but refuses the model's tensor types in prepare (e.g. CONV_2D
//! on int16 activations) also blocks it, and is listed as such; any other
//! set-up error fails the test.
//!
//! Skipped when the set is absent unless `HILT_CONFORMANCE_REQUIRED=1`.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use hilt::conformance::{ModelEntry, run_model};
use hilt::host_run::{AlignedBytes, DEFAULT_ARENA, RunError, interpreter, read_model, verify};
use hilt_runtime::interpreter::InterpreterError;
use hilt_runtime::kernels::{KernelError, Resolver, all_builtins};
use hilt_runtime::planner::Greedy;

fn ops_dir() -> PathBuf {
    match std::env::var_os("HILT_CONFORMANCE_OPS_DIR") {
        Some(d) => PathBuf::from(d),
        None => common::repo().join("../shared/conformance-ops"),
    }
}

/// What keeps `entry`'s model from running: the operators `all_builtins`
/// has no kernel for (read from the model file, not the manifest), else a
/// kernel that refuses the model's tensor types in prepare.
fn blockers(dir: &Path, entry: &ModelEntry) -> BTreeSet<String> {
    let path = dir.join(&entry.model);
    let bytes = read_model(&path).unwrap_or_else(|e| panic!("{}: {e}", entry.name));
    let model = verify(&path, &bytes).unwrap_or_else(|e| panic!("{}: {e}", entry.name));
    let resolver = all_builtins();
    let missing: BTreeSet<String> = model
        .operators()
        .filter(|op| resolver.find(op.code).is_none())
        .map(|op| op.code.to_string())
        .collect();
    if !missing.is_empty() {
        return missing;
    }
    let mut arena = AlignedBytes::zeroed(DEFAULT_ARENA);
    match interpreter(model, &Greedy, &mut arena) {
        Err(RunError::Interpreter(InterpreterError::Kernel {
            code,
            error: KernelError::UnsupportedType { dtype, .. },
            ..
        })) => BTreeSet::from([format!(
            "{code} ({} not implemented)",
            hilt::host_run::tensor_type_name(hilt_runtime::schema::TensorType(dtype))
        )]),
        // Other set-up errors are real failures: run_model reports them.
        _ => BTreeSet::new(),
    }
}

#[test]
fn supported_ops_models_match_tflm() {
    let Some((dir, models)) = common::conformance_set_models(ops_dir()) else {
        return;
    };
    let (mut failed, mut matched, mut blocked) = (Vec::new(), Vec::new(), Vec::new());
    for entry in &models {
        let missing = blockers(&dir, entry);
        if !missing.is_empty() {
            blocked.push(format!(
                "{:<32} blocked by {}",
                entry.name,
                missing.into_iter().collect::<Vec<_>>().join(", ")
            ));
            continue;
        }
        let outcome = run_model(&dir, entry);
        println!(
            "{:<32} {}/{} cases match",
            entry.name, outcome.cases_passed, outcome.cases
        );
        if outcome.failures.is_empty() && outcome.cases > 0 {
            matched.push(entry.name.clone());
        }
        for f in &outcome.failures {
            failed.push(format!("{}: {f}", entry.name));
        }
    }
    println!(
        "{} of {} models match exactly:",
        matched.len(),
        models.len()
    );
    for name in &matched {
        println!("    {name}");
    }
    println!("{} models still blocked:", blocked.len());
    for line in &blocked {
        println!("    {line}");
    }
    assert!(
        failed.is_empty(),
        "{} failures:\n{}",
        failed.len(),
        failed.join("\n")
    );
}
