//! Replays the committed fuzz seeds (and any crash reproducers kept there)
//! through load + plan, so a fixed fuzz finding stays fixed without
//! cargo-fuzz installed.

use std::path::Path;

use hilt_runtime::allocation::{AllocOptions, allocate};
use hilt_runtime::arena::Arena;
use hilt_runtime::model::Model;
use hilt_runtime::planner::{Greedy, Linear, MemoryPlanner, Offline, verify_plan};

fn check(bytes: &[u8]) {
    let Ok(model) = Model::from_bytes(bytes) else {
        return;
    };
    let offline = Offline::from_model(&model).ok();
    let mut planners: Vec<&dyn MemoryPlanner> = vec![&Linear, &Greedy];
    if let Some(o) = offline.as_ref() {
        planners.push(o);
    }
    for planner in planners {
        let mut memory = vec![0u8; 1 << 20];
        let mut arena = Arena::new(&mut memory);
        let _ = allocate(
            &model,
            planner,
            &mut arena,
            &AllocOptions::default(),
            &[],
            |plan| {
                assert_eq!(verify_plan(plan.requests, plan.offsets, plan.head), Ok(()));
            },
        );
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
