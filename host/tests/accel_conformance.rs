//! `hilt infer --accelerator vnpu` on the shared conformance set: the first
//! step of every case of every model gives the same bytes as the CPU-only
//! run, with vnpu running the default offload list on its own thread, with
//! coherent memory and behind a modelled cache (`--coherent false`).
//!
//! Skipped when the set is absent unless `HILT_CONFORMANCE_REQUIRED=1`;
//! `HILT_CONFORMANCE_MODELS=a,b` limits the run, as in `conformance_outputs`.

mod common;

use hilt::accel::AccelChoice;
use hilt::infer::{InferRequest, infer};
use hilt_runtime::planner::PlannerKind;

#[test]
fn vnpu_outputs_match_the_cpu_on_every_conformance_model() {
    let Some((dir, models)) = common::conformance_models() else {
        return;
    };
    let mut failed = Vec::new();
    for entry in &models {
        for case in &entry.cases {
            let Some(step) = case.steps.first() else {
                continue;
            };
            let request = |accelerator| InferRequest {
                model: dir.join(&entry.model),
                inputs: step
                    .inputs
                    .iter()
                    .map(|i| dir.join("cases").join(&entry.name).join(&i.file))
                    .collect(),
                outputs: Vec::new(),
                arena: hilt::host_run::DEFAULT_ARENA,
                planner: PlannerKind::Greedy,
                steps: 1,
                accelerator,
            };
            let cpu = infer(&request(AccelChoice::default()));
            let non_coherent = AccelChoice {
                coherent: false,
                ..AccelChoice::vnpu()
            };
            for (mode, choice) in [
                ("coherent", AccelChoice::vnpu()),
                ("non-coherent", non_coherent),
            ] {
                let npu = infer(&request(choice));
                let (cpu, npu) = match (&cpu, npu) {
                    (Ok(c), Ok(n)) => (&c.0, n.0),
                    (c, n) => {
                        failed.push(format!(
                            "{} {} {mode}: cpu {:?} / vnpu {:?}",
                            entry.name,
                            case.name,
                            c.as_ref().err(),
                            n.err()
                        ));
                        continue;
                    }
                };
                let same =
                    cpu.len() == npu.len() && cpu.iter().zip(&npu).all(|(a, b)| a.data == b.data);
                println!(
                    "{:<36} {:<8} {mode:<13} {}",
                    entry.name,
                    case.name,
                    if same { "same" } else { "DIFFERENT" }
                );
                if !same {
                    failed.push(format!(
                        "{} {} {mode}: outputs differ",
                        entry.name, case.name
                    ));
                }
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
