//! The ports inside the interpreter, on the models of the shipped
//! scenarios, with buffer canaries: the correct port gives the greedy
//! planner's outputs; the broken one is refused by the runtime's plan
//! check with the pair named, and, committed unchecked, is caught by the
//! buffer canaries on the scenario the board test runs.

use std::path::PathBuf;

use hilt_allocator_ports::{BrokenFirstFit, FirstFit};
use hilt_runtime::allocation::{AllocError, AllocOptions};
use hilt_runtime::canary::CanaryMode;
use hilt_runtime::canary::GUARD_BYTES;
use hilt_runtime::interpreter::{Interpreter, InterpreterError};
use hilt_runtime::kernels::all_builtins;
use hilt_runtime::model::Model;
use hilt_runtime::planner::{Greedy, MemoryPlanner};
use hilt_runtime::port::PlanFailure;
use hilt_runtime::port::kit::sets;

fn repo_file(path: &str) -> Vec<u8> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..");
    std::fs::read(root.join(path)).unwrap()
}

const BUFFERS: AllocOptions = AllocOptions {
    align: 16,
    canary: CanaryMode::Buffers,
    ..AllocOptions::DEFAULT
};

/// Runs `model` once on `input` with `planner`; the outputs, or the error.
fn run(
    model: &[u8],
    input: &[u8],
    planner: &dyn MemoryPlanner,
    unchecked: bool,
) -> Result<Vec<u8>, InterpreterError> {
    let model = Model::from_bytes(model).unwrap();
    let resolver = all_builtins();
    let mut arena = vec![0u8; 256 * 1024];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    if unchecked {
        interpreter.inject_unchecked_plan();
    }
    interpreter.allocate(planner, &BUFFERS)?;
    interpreter.input_mut(0)?.copy_from_slice(input);
    interpreter.invoke()?;
    Ok(interpreter.output(0)?.to_vec())
}

#[test]
fn first_fit_gives_greedys_outputs_on_the_shipped_models() {
    for (model, input) in [
        (
            "scenarios/models/tiny_convnet_int8.tflite",
            "scenarios/data/tiny_convnet_in.bin",
        ),
        (
            "scenarios/models/reshape_int8.tflite",
            "scenarios/data/reshape_in.bin",
        ),
    ] {
        let (model, input) = (repo_file(model), repo_file(input));
        let greedy = run(&model, &input, &Greedy, false).unwrap();
        assert_eq!(run(&model, &input, &FirstFit, false).unwrap(), greedy);
    }
}

#[test]
fn the_runtime_refuses_the_broken_ports_plan_naming_the_pair() {
    let model = repo_file("scenarios/models/tiny_convnet_int8.tflite");
    let input = repo_file("scenarios/data/tiny_convnet_in.bin");
    let e = run(&model, &input, &BrokenFirstFit, false).unwrap_err();
    let InterpreterError::Alloc(AllocError::PlanRejected(failure)) = e else {
        panic!("expected a rejected plan, got {e:?}");
    };
    assert!(matches!(failure, PlanFailure::Overlap { .. }), "{failure}");
    println!("{e}");
    assert!(
        e.to_string()
            .contains("plan is invalid: Overlap: buffers 0 (tensor 0"),
        "{e}"
    );
}

#[test]
fn unchecked_the_broken_plan_is_caught_by_the_buffer_canaries() {
    let model = repo_file("scenarios/models/tiny_convnet_int8.tflite");
    let input = repo_file("scenarios/data/tiny_convnet_in.bin");
    let e = run(&model, &input, &BrokenFirstFit, true).unwrap_err();
    println!("{e}");
    let InterpreterError::Canary(fault) = e else {
        panic!("expected a canary fault, got {e:?}");
    };
    assert_eq!(fault.op, Some(0), "{fault}");
}

/// Why the runtime checks every plan: on the RESHAPE smoke model the broken
/// port puts the output exactly on the input (same offset, same size, both
/// live at step 0), so their guards coincide and no canary can see the
/// overlap. (Run unchecked, the kernel's copy between the two overlapping
/// buffers is undefined behaviour: a debug build aborts on it.)
#[test]
fn some_broken_plans_are_invisible_to_canaries() {
    let model = repo_file("scenarios/models/reshape_int8.tflite");
    let mut set = sets::model("reshape", &model, 16).unwrap();
    for r in &mut set.requests {
        r.size += GUARD_BYTES;
    }
    let mut offsets = vec![0; set.requests.len()];
    BrokenFirstFit
        .plan(&set.requests, &mut [], &mut offsets)
        .unwrap();
    assert_eq!(set.requests.len(), 2);
    assert_eq!(offsets[0], offsets[1]);
    assert_eq!(set.requests[0].size, set.requests[1].size);
    let input = repo_file("scenarios/data/reshape_in.bin");
    let e = run(&model, &input, &BrokenFirstFit, false).unwrap_err();
    assert!(
        matches!(
            e,
            InterpreterError::Alloc(AllocError::PlanRejected(PlanFailure::Overlap { .. }))
        ),
        "{e}"
    );
}
