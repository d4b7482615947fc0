//! hilt's model of TFLM's planned section (`hilt::tflm_scratch`): the
//! model's tensors plus the scratch TFLM's reference kernels request,
//! planned by TFLM's greedy rules, must give TFLM's own planned head (the
//! manifest's `arena_head`, read from TFLM's RecordingMicroAllocator) on
//! every model of both conformance sets.

mod common;

use hilt::tflm_scratch::{tflm_head, tflm_requests, tflm_scratch};
use hilt_runtime::model::Model;

#[test]
fn tflm_heads_are_reproduced_with_its_kernels_scratch() {
    let mut failures = Vec::new();
    let mut with_scratch = 0;
    for (dir, models) in common::conformance_sets() {
        for entry in models {
            let bytes = std::fs::read(dir.join(&entry.model)).unwrap();
            let model = Model::from_bytes(&bytes).unwrap();
            let requests = tflm_requests(&model);
            let head = tflm_head(&model, &requests, None).unwrap();
            let scratch = tflm_scratch(&model);
            with_scratch += usize::from(!scratch.is_empty());
            println!(
                "{:<40} scratch {:>3} buffers  head {head:>8}  TFLM {:>8}",
                entry.name,
                scratch.len(),
                entry.tflm.arena_head
            );
            if u64::from(head) != entry.tflm.arena_head {
                failures.push(format!(
                    "{}: {head} against TFLM's {} ({} scratch buffers)",
                    entry.name,
                    entry.tflm.arena_head,
                    scratch.len()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    if with_scratch > 0 {
        println!("{with_scratch} models with TFLM kernel scratch");
    }
}
