//! Shared helpers for the runtime's integration tests.
#![allow(dead_code, unreachable_pub)]

use hilt_runtime::model::Model;
use hilt_runtime::planner::{MemoryPlanner, verify_plan};
use hilt_runtime::request::BufferRequest;
use hilt_runtime::schema::{ActivationFunctionType, BuiltinOperator, TensorType};
use hilt_runtime::writer::{ModelWriter, Options, f32_bytes};

/// Runs `planner` over `requests` with exactly the workspace it asks for.
pub fn plan(planner: &dyn MemoryPlanner, requests: &[BufferRequest]) -> (Vec<u32>, u32) {
    let mut workspace = vec![0u32; planner.workspace_words(requests.len())];
    let mut offsets = vec![u32::MAX; requests.len()];
    let head = planner
        .plan(requests, &mut workspace, &mut offsets)
        .expect("plan");
    (offsets, head)
}

/// Asserts the properties every plan must have.
pub fn assert_valid_plan(requests: &[BufferRequest], offsets: &[u32], head: u32) {
    assert_eq!(verify_plan(requests, offsets, head), Ok(()));
}

/// The seed example: input 4 floats → FC 8 → ReLU → FC 2.
pub fn seed_fc_model() -> Vec<u8> {
    let mut w = ModelWriter::new();
    let input = w.input("input", TensorType::FLOAT32, &[1, 4]);
    let w1 = w.constant(
        "fc1/weights",
        TensorType::FLOAT32,
        &[8, 4],
        &f32_bytes(&[0.5; 32]),
    );
    let b1 = w.constant("fc1/bias", TensorType::FLOAT32, &[8], &f32_bytes(&[0.1; 8]));
    let hidden = w.tensor("fc1/out", TensorType::FLOAT32, &[1, 8]);
    let relu = w.tensor("relu/out", TensorType::FLOAT32, &[1, 8]);
    let w2 = w.constant(
        "fc2/weights",
        TensorType::FLOAT32,
        &[2, 8],
        &f32_bytes(&[0.25; 16]),
    );
    let b2 = w.constant("fc2/bias", TensorType::FLOAT32, &[2], &f32_bytes(&[0.0; 2]));
    let output = w.output("output", TensorType::FLOAT32, &[1, 2]);
    let fc = Options::FullyConnected {
        activation: ActivationFunctionType::NONE,
        keep_num_dims: false,
    };
    w.op(
        BuiltinOperator::FULLY_CONNECTED,
        &[Some(input), Some(w1), Some(b1)],
        &[hidden],
        fc.clone(),
    );
    w.op(
        BuiltinOperator::RELU,
        &[Some(hidden)],
        &[relu],
        Options::None,
    );
    w.op(
        BuiltinOperator::FULLY_CONNECTED,
        &[Some(relu), Some(w2), Some(b2)],
        &[output],
        fc,
    );
    w.finish()
}

/// Verifies bytes that must be a valid model.
pub fn load(bytes: &[u8]) -> Model<'_> {
    Model::from_bytes(bytes).expect("valid model")
}
