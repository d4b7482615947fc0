//! Conformance suite: the greedy plan of every model in the shared
//! conformance set (real TFLite-Micro and MLPerf Tiny models), compared with
//! TFLM's own figures and pinned as insta snapshots under `snapshots/layout/`.
//!
//! Reads `HILT_CONFORMANCE_DIR`, else `../shared/conformance` beside the
//! repository. When the set is absent the suite says so and passes, unless
//! `HILT_CONFORMANCE_REQUIRED=1` (as in `.ci/run`).

use std::path::{Path, PathBuf};

use hilt::layout::{LayoutOptions, layout_file};
use hilt_runtime::planner::PlannerKind;
use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

/// Every conformance set present ([`hilt::conformance::locate_all`]); an
/// absent one is skipped with a message, or fails the suite under
/// `HILT_CONFORMANCE_REQUIRED=1`.
fn conformance_dirs() -> Vec<PathBuf> {
    let required = std::env::var("HILT_CONFORMANCE_REQUIRED").is_ok_and(|v| v == "1");
    hilt::conformance::locate_all(&repo_root())
        .into_iter()
        .filter(|dir| {
            let present = dir.join("manifest.json").is_file();
            assert!(
                present || !required,
                "conformance set not found at {} (HILT_CONFORMANCE_REQUIRED=1)",
                dir.display()
            );
            if !present {
                eprintln!("conformance set not found at {}: skipped", dir.display());
            }
            present
        })
        .collect()
}

/// Ops whose TFLM kernels request scratch buffers in prepare, which hilt's
/// planner only sees once kernels exist (TFLM's head then includes them).
const SCRATCH_OPS: [&str; 3] = ["SVDF", "UNIDIRECTIONAL_SEQUENCE_LSTM", "TRANSPOSE_CONV"];

#[test]
fn greedy_layouts_match_tflm_and_snapshots() {
    let mut failures = Vec::new();
    println!(
        "{:<36} {:>8} {:>10} {:>8} {:>12} {:>12}  result",
        "model", "head", "TFLM head", "lower", "hilt total", "TFLM total"
    );
    for dir in conformance_dirs() {
        greedy_layouts_in(&dir, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every model of the set in `dir`: greedy's head is TFLM's, the lower
/// bound the manifest's, the layout the accepted snapshot.
fn greedy_layouts_in(dir: &Path, failures: &mut Vec<String>) {
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let models = manifest["models"].as_array().expect("manifest.models");
    assert!(!models.is_empty());
    for entry in models {
        let name = entry["name"].as_str().unwrap();
        let path = dir.join(entry["model"].as_str().unwrap());
        let report = layout_file(
            &path,
            &LayoutOptions {
                planner: PlannerKind::Greedy,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let tflm_head = entry["tflm"]["arena_head"].as_u64().unwrap();
        let tflm_total = entry["tflm"]["arena_used_total"].as_u64().unwrap();
        let lower = entry["liveness_lower_bound_bytes"].as_u64().unwrap();
        let uses_scratch = entry["ops"]
            .as_object()
            .unwrap()
            .keys()
            .any(|op| SCRATCH_OPS.contains(&op.as_str()));
        let verdict = if u64::from(report.head) == tflm_head {
            "head = TFLM"
        } else if uses_scratch {
            "TFLM head includes kernel scratch"
        } else {
            failures.push(format!("{name}: head {} != TFLM {tflm_head}", report.head));
            "MISMATCH"
        };
        if u64::from(report.lower_bound) != lower {
            failures.push(format!(
                "{name}: lower bound {} != manifest {lower}",
                report.lower_bound
            ));
        }
        println!(
            "{name:<36} {:>8} {tflm_head:>10} {:>8} {:>12} {tflm_total:>12}  {verdict}",
            report.head, report.lower_bound, report.total
        );
        insta::with_settings!({
            snapshot_path => repo_root().join("snapshots/layout"),
            prepend_module_to_snapshot => false,
            omit_expression => true,
            info => &entry["sha256"],
        }, {
            insta::assert_yaml_snapshot!(name, report);
        });
    }
}

/// The optimal planner reaches the liveness lower bound on every model of
/// every set (greedy does not on VWW: 73,728 against 55,296 for int8; nor,
/// in the second set, where TFLM's greedy head is above the bound on three
/// models).
#[test]
fn optimal_layouts_reach_the_lower_bound() {
    let dirs = conformance_dirs();
    let mut failures = Vec::new();
    for dir in &dirs {
        optimal_reaches_the_bound_in(dir, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The optimal planner's head on a plan's buffers (their sizes, alignments
/// and lifetimes), run directly rather than through set-up.
fn search_head(rows: &[hilt::layout::BufferRow]) -> u32 {
    use hilt_runtime::planner::{MemoryPlanner, Optimal};
    use hilt_runtime::request::BufferRequest;
    let requests: Vec<BufferRequest> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            BufferRequest::tensor(i as u32, r.size, r.first_step, r.last_step).with_align(r.align)
        })
        .collect();
    let planner = Optimal::default();
    let mut workspace = vec![0u32; planner.workspace_words(requests.len())];
    let mut offsets = vec![0u32; requests.len()];
    planner
        .plan(&requests, &mut workspace, &mut offsets)
        .unwrap()
}

/// Every model of the set in `dir`: optimal's head is the manifest's bound.
fn optimal_reaches_the_bound_in(dir: &std::path::Path, failures: &mut Vec<String>) {
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let models = manifest["models"].as_array().expect("manifest.models");
    assert!(!models.is_empty());
    println!(
        "{:<36} {:>8} {:>8} {:>8} {:>10}",
        "model", "greedy", "optimal", "lower", "time (ms)"
    );
    for entry in models {
        let name = entry["name"].as_str().unwrap();
        let path = dir.join(entry["model"].as_str().unwrap());
        let layout = |planner| {
            layout_file(
                &path,
                &LayoutOptions {
                    planner,
                    ..Default::default()
                },
            )
            .unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        let greedy = layout(PlannerKind::Greedy);
        let start = std::time::Instant::now();
        let optimal = layout(PlannerKind::Optimal);
        let elapsed = start.elapsed();
        let lower = entry["liveness_lower_bound_bytes"].as_u64().unwrap();
        println!(
            "{name:<36} {:>8} {:>8} {lower:>8} {:>10.1}",
            greedy.head,
            optimal.head,
            elapsed.as_secs_f64() * 1e3
        );
        // Where the search's workspace would commit more than greedy's whole
        // plan, set-up keeps greedy's (same total); the search itself must
        // still reach the bound on the same requests.
        let head = match optimal.kept {
            Some(kept) => {
                assert_eq!(kept, "greedy", "{name}");
                assert_eq!(optimal.total, greedy.total, "{name}: kept plan's total");
                search_head(&greedy.buffers)
            }
            None => optimal.head,
        };
        if u64::from(head) != lower || u64::from(optimal.lower_bound) != lower {
            failures.push(format!(
                "{name}: optimal head {head} (bound {}), manifest bound {lower}",
                optimal.lower_bound
            ));
        }
        assert!(optimal.head <= greedy.head, "{name}: optimal above greedy");
    }
}
