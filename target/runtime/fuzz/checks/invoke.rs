//! The invoke checks, shared by the fuzz target (`fuzz_targets/invoke.rs`)
//! and the replay of the committed corpus (`tests/fuzz_seeds.rs`): a model
//! that passes the verifier reaches the kernels with whatever shapes,
//! types, options and quantisation it carries, so every input is loaded,
//! allocated (every kernel's prepare) and invoked with every resolver
//! kernel, and held to what a caller relies on:
//!
//! - no panic, anywhere: a bad model is a typed error from allocate or
//!   invoke, and every error displays;
//! - no kernel writes outside its planned buffers: the arena is allocated
//!   with a guard after every buffer and around every section, checked
//!   after every op, and a guard hit is a failure, not an error to accept;
//! - an invoke is a pure function of the inputs: after a reset (variable
//!   tensors back to their zero points) the same inputs give the same
//!   outputs, so no kernel reads bytes nobody wrote this invoke.

use hilt_runtime::allocation::AllocOptions;
use hilt_runtime::canary::CanaryMode;
use hilt_runtime::interpreter::{Interpreter, InterpreterError};
use hilt_runtime::kernels::{BUILTINS_CAPACITY, OpResolver, all_builtins};
use hilt_runtime::model::Model;
use hilt_runtime::planner::Greedy;
use std::cell::RefCell;

/// Arena size: the conformance models up to VWW fit, and a mutated shape
/// that needs more is refused by allocate (a path worth fuzzing too).
const ARENA_BYTES: usize = 2 << 20;
/// Inputs whose rough multiply-accumulate count is above this are loaded
/// but not run, so one execution stays well under libFuzzer's timeout.
const MAX_WORK: u64 = 1 << 27;
/// Above these counts the input is only loaded.
const MAX_TENSORS: u32 = 4096;
const MAX_OPERATORS: u32 = 1024;

thread_local! {
    static RESOLVER: OpResolver<BUILTINS_CAPACITY> = all_builtins();
    /// The arena, allocated once; allocate and invoke write before they read.
    static MEMORY: RefCell<Vec<u8>> = RefCell::new(vec![0u8; ARENA_BYTES]);
}

/// Every check on one input: panics on any broken invariant.
pub(crate) fn check(data: &[u8]) {
    let Ok(model) = Model::from_bytes(data) else {
        return;
    };
    if model.tensor_count() > MAX_TENSORS
        || model.operator_count() > MAX_OPERATORS
        || estimated_work(&model) > MAX_WORK
    {
        return;
    }
    RESOLVER.with(|resolver| {
        MEMORY.with_borrow_mut(|memory| run(model, resolver, memory, input_seed(data)))
    });
}

fn run(model: Model<'_>, resolver: &OpResolver<BUILTINS_CAPACITY>, memory: &mut [u8], seed: u32) {
    let mut interpreter = Interpreter::new(model, resolver, memory);
    let options = AllocOptions {
        canary: CanaryMode::Buffers,
        ..AllocOptions::DEFAULT
    };
    if let Err(e) = interpreter.allocate(&Greedy, &options) {
        let _ = format!("{e}");
        return;
    }
    let Some(first) = invoke_once(&mut interpreter, seed) else {
        return;
    };
    interpreter
        .reset()
        .expect("reset after a successful invoke");
    let again =
        invoke_once(&mut interpreter, seed).expect("a second invoke of the same inputs failed");
    assert!(
        first == again,
        "the same inputs gave different outputs on a second invoke"
    );
}

/// Fills every input from `seed`, invokes, and returns the outputs (None
/// when invoke refused the model with a typed error).
/// One invoke's outputs: each output's bytes, or the error reading it gave.
type Outputs = Vec<Result<Vec<u8>, String>>;

fn invoke_once(interpreter: &mut Interpreter<'_, '_, '_>, seed: u32) -> Option<Outputs> {
    let mut state = seed;
    for position in 0..interpreter.input_count() {
        // A subgraph input the arena does not hold (a constant, say) is a
        // typed error, not one to fill.
        let input = match interpreter.input_mut(position) {
            Ok(input) => input,
            Err(e) => {
                let _ = format!("{e}");
                continue;
            }
        };
        for byte in input.iter_mut() {
            // xorshift32: cheap, deterministic, every byte value reachable.
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            *byte = state as u8;
        }
    }
    match interpreter.invoke() {
        Ok(()) => {}
        Err(InterpreterError::Canary(fault)) => {
            panic!("a kernel wrote outside its buffers: {fault:?}")
        }
        Err(e) => {
            let _ = format!("{e}");
            return None;
        }
    }
    let outputs = (0..interpreter.output_count())
        .map(|position| match interpreter.output(position) {
            Ok(bytes) => Ok(bytes.to_vec()),
            Err(e) => Err(format!("{e}")),
        })
        .collect();
    Some(outputs)
}

/// A seed for the input bytes taken from the model bytes, so the fuzzer
/// that changes one byte also reaches new input values.
fn input_seed(data: &[u8]) -> u32 {
    let hash = data.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    hash | 1
}

/// A rough bound on the multiply-accumulates of one invoke: per operator,
/// its output elements times its largest input's elements per output
/// channel (a conv or matrix product's inner size; an overestimate for
/// element-wise ops, which are cheap anyway).
fn estimated_work(model: &Model<'_>) -> u64 {
    let elements = |index: u32| -> u64 {
        model
            .tensor(index)
            .map(|t| {
                t.shape()
                    .fold(1u64, |n, d| n.saturating_mul(d.max(1) as u64))
            })
            .unwrap_or(1)
    };
    let mut total = 0u64;
    for op in model.operators() {
        let out_elements = op
            .outputs()
            .flatten()
            .map(elements)
            .fold(0u64, u64::saturating_add)
            .max(1);
        let channels = op
            .outputs()
            .flatten()
            .next()
            .and_then(|o| model.tensor(o))
            .and_then(|t| t.shape().last())
            .map_or(1, |d| d.max(1) as u64);
        let largest_in = op.inputs().flatten().map(elements).max().unwrap_or(1);
        let per_output = (largest_in / channels).max(1);
        total = total.saturating_add(out_elements.saturating_mul(per_output));
    }
    total
}
