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

/// Output 0 and the committed head of one run of `bytes` under `schedule`
/// (the optimal planner), its input 0 filled by `fill`.
pub fn run_scheduled(
    bytes: &[u8],
    schedule: hilt_runtime::schedule::Schedule,
    fill: impl FnOnce(&mut [u8]),
) -> Result<(Vec<u8>, u32), hilt_runtime::interpreter::InterpreterError> {
    let model = Model::from_bytes(bytes).unwrap();
    let resolver = hilt_runtime::kernels::all_builtins();
    let mut arena = vec![0u8; 1 << 20];
    let mut interpreter = hilt_runtime::interpreter::Interpreter::new(model, &resolver, &mut arena);
    let options = hilt_runtime::allocation::AllocOptions {
        schedule,
        ..hilt_runtime::allocation::AllocOptions::DEFAULT
    };
    let head = interpreter
        .allocate(&hilt_runtime::planner::Optimal::default(), &options)?
        .head
        .len;
    fill(interpreter.input_mut(0)?);
    interpreter.invoke()?;
    Ok((interpreter.output(0)?.to_vec(), head))
}
