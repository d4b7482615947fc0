//! The lean schedule: ops written over their inputs give TFLM's schedule's
//! outputs bit for bit, in a smaller head; and the ops it cannot run in
//! place are named with the reason.

mod common;

use hilt_runtime::allocation::AllocOptions;
use hilt_runtime::interpreter::{Interpreter, InterpreterError};
use hilt_runtime::kernels::all_builtins;
use hilt_runtime::model::Model;
use hilt_runtime::planner::Greedy;
use hilt_runtime::schedule::{Refusal, Schedule, in_place};
use hilt_runtime::writer::examples::{mobilenet_blocks_int8, tiny_convnet_int8};

/// Output 0 and the committed head of one run under `schedule`.
fn run(bytes: &[u8], schedule: Schedule, seed: u8) -> Result<(Vec<u8>, u32), InterpreterError> {
    common::run_scheduled(bytes, schedule, |input| {
        for (i, v) in input.iter_mut().enumerate() {
            *v = (i as u8).wrapping_mul(31).wrapping_add(seed);
        }
    })
}

#[test]
fn lean_outputs_equal_tflm_schedule_outputs_on_every_shape() {
    // Rows shorter and longer than a band, maps narrower than the ring's
    // lines and wider, odd sizes for the stride-2 layer.
    for (h, w) in [(25, 5), (9, 9), (48, 12), (7, 3), (16, 31), (1, 40)] {
        let bytes = mobilenet_blocks_int8(h, w);
        for seed in [0, 77] {
            let (tflm, tflm_head) = run(&bytes, Schedule::Tflm, seed).unwrap();
            let (lean, lean_head) = run(&bytes, Schedule::Lean, seed).unwrap();
            assert_eq!(lean, tflm, "{h}×{w}, seed {seed}");
            // Maps of a few rows gain nothing: a band is a whole row.
            assert!(
                lean_head < tflm_head || (h < 9 && lean_head == tflm_head),
                "{h}×{w}: lean head {lean_head} against {tflm_head}"
            );
        }
    }
}

#[test]
fn the_lean_head_is_about_the_largest_activation() {
    // 48×12×16 bytes is the widest tensor (9,216): TFLM's schedule needs
    // it beside the 4,608-byte input of the widening op; the lean one
    // needs it and one op's band temporary (up to 2 KiB of band rows,
    // plus the rows held back).
    let bytes = mobilenet_blocks_int8(48, 12);
    let (_, tflm) = run(&bytes, Schedule::Tflm, 1).unwrap();
    let (_, lean) = run(&bytes, Schedule::Lean, 1).unwrap();
    assert_eq!(tflm, 9_216 + 4_608);
    assert!(lean <= 9_216 + 2_560, "lean head {lean}");
}

#[test]
fn ops_that_cannot_run_in_place_say_why() {
    let bytes = tiny_convnet_int8();
    let model = Model::from_bytes(&bytes).unwrap();
    // conv1's input is the model input; its output feeds the depthwise
    // conv and the residual ADD: op 1 cannot write over it.
    assert_eq!(
        in_place(&model, Schedule::Lean, 1).err(),
        Some(Refusal::InputStillRead { op: 3 })
    );
    assert_eq!(
        in_place(&model, Schedule::Lean, 1)
            .err()
            .unwrap()
            .to_string(),
        "input still read by op 3"
    );
    // The 3×3 conv is not pointwise.
    assert!(matches!(
        in_place(&model, Schedule::Lean, 0).err(),
        Some(Refusal::Shape { .. })
    ));
    // The pointwise conv's input (the depthwise output) dies there.
    let pointwise = in_place(&model, Schedule::Lean, 2).unwrap();
    assert_eq!(pointwise.op, 2);
    // The residual ADD writes over conv1's output, which dies there.
    let add = in_place(&model, Schedule::Narrowing, 3).unwrap();
    assert_eq!(Some(add.input), in_place_input(&model, 1));
    // The global average pool has no in-place form.
    assert_eq!(
        in_place(&model, Schedule::Lean, 4).err(),
        Some(Refusal::NoInPlaceForm)
    );
    // And the model still runs alike.
    let (tflm, _) = run(&bytes, Schedule::Tflm, 5).unwrap();
    let (lean, _) = run(&bytes, Schedule::Lean, 5).unwrap();
    assert_eq!(lean, tflm);
}

/// Input 0 of op `op`.
fn in_place_input(model: &Model<'_>, op: u32) -> Option<u32> {
    model.operator(op)?.inputs().next().flatten()
}

#[test]
fn greedy_plans_the_lean_schedule_too() {
    let bytes = mobilenet_blocks_int8(25, 5);
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = all_builtins();
    let mut arena = vec![0u8; 1 << 18];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    let options = AllocOptions {
        schedule: Schedule::Lean,
        ..AllocOptions::DEFAULT
    };
    interpreter.allocate(&Greedy, &options).unwrap();
    interpreter.invoke().unwrap();
}

/// The lean schedule handed to a build with the `no-lean` feature is
/// refused at allocate, by name; the default build runs it. CI runs this
/// test in both builds.
#[test]
fn a_no_lean_build_refuses_the_lean_schedule_by_name() {
    let bytes = mobilenet_blocks_int8(16, 16);
    let result = run(&bytes, Schedule::Lean, 3);
    if hilt_runtime::schedule::LEAN_LINKED {
        assert_eq!(result.unwrap().0, run(&bytes, Schedule::Tflm, 3).unwrap().0);
    } else {
        assert_eq!(result.err(), Some(InterpreterError::LeanNotLinked));
        assert!(run(&bytes, Schedule::Tflm, 3).is_ok());
    }
}
