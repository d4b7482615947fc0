//! Shared helpers for the runtime's integration tests.
#![allow(dead_code, unreachable_pub)]

use hilt_runtime::model::Model;
use hilt_runtime::planner::{MemoryPlanner, verify_plan};
use hilt_runtime::port::check_plan;
use hilt_runtime::request::BufferRequest;

/// Runs `planner` over `requests` with exactly the workspace it asks for.
pub fn plan(planner: &dyn MemoryPlanner, requests: &[BufferRequest]) -> (Vec<u32>, u32) {
    let mut workspace = vec![0u32; planner.workspace_words(requests.len())];
    let mut offsets = vec![u32::MAX; requests.len()];
    let head = planner
        .plan(requests, &mut workspace, &mut offsets)
        .expect("plan");
    (offsets, head)
}

/// Asserts the properties every plan must have: the allocator-port kit's
/// rules (a failure names the buffers), then the lower bound.
pub fn assert_valid_plan(requests: &[BufferRequest], offsets: &[u32], head: u32) {
    if let Err(failure) = check_plan(requests, offsets, head) {
        panic!("{failure}");
    }
    assert_eq!(verify_plan(requests, offsets, head), Ok(()));
}

/// The seed example: input 4 floats → FC 8 → ReLU → FC 2.
pub fn seed_fc_model() -> Vec<u8> {
    hilt_runtime::writer::examples::seed_fc_float()
}

/// Verifies bytes that must be a valid model.
pub fn load(bytes: &[u8]) -> Model<'_> {
    Model::from_bytes(bytes).expect("valid model")
}
