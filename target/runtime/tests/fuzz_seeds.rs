//! Replays the committed fuzz seeds (and any crash reproducers kept there)
//! through load + plan, so a fixed fuzz finding stays fixed without
//! cargo-fuzz installed.

use std::path::Path;

use hilt_runtime::allocation::{AllocOptions, allocate};
use hilt_runtime::arena::Arena;
use hilt_runtime::model::Model;
use hilt_runtime::planner::{Greedy, Linear, MemoryPlanner, Offline, verify_plan};
use hilt_runtime::request::BufferRequest;

fn check(bytes: &[u8]) {
    let Ok(model) = Model::from_bytes(bytes) else {
        return;
    };
    let offline = Offline::from_model(&model).ok();
    let mut planners: Vec<&dyn MemoryPlanner> = vec![&Linear, &Greedy];
    if let Some(o) = offline.as_ref() {
        planners.push(o);
    }
    // As the fuzz target's second pass: a scratch buffer with a stricter
    // alignment than the tensors moves the head's start (a fuzz finding:
    // `head_start + offset` overflowed before the head's size was checked).
    let scratch = [BufferRequest::scratch(0, 0, 64).with_align(256)];
    let scratch: &[BufferRequest] = if model.operator_count() > 0 {
        &scratch
    } else {
        &[]
    };
    for planner in planners {
        for extra in [&[][..], scratch] {
            let mut memory = vec![0u8; 1 << 20];
            let mut arena = Arena::new(&mut memory);
            let _ = allocate(
                &model,
                planner,
                &mut arena,
                &AllocOptions::default(),
                extra,
                |plan| {
                    assert_eq!(verify_plan(plan.requests, plan.offsets, plan.head), Ok(()));
                },
            );
        }
    }
}

#[test]
fn every_committed_seed_loads_or_fails_cleanly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/load_and_plan");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/seeds/load_and_plan") {
        let path = entry.unwrap().path();
        check(&std::fs::read(&path).unwrap());
        count += 1;
    }
    assert!(count > 0, "no seeds in {}", dir.display());
}
