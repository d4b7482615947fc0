//! Guard bands: off costs nothing, clean runs raise no alarm, and overruns
//! are caught with the guard, place, size and op named.

use hilt_runtime::allocation::AllocOptions;
use hilt_runtime::canary::{CanaryFault, CanaryMode, GUARD_BYTES, GuardOwner};
use hilt_runtime::interpreter::{Interpreter, InterpreterError};
use hilt_runtime::kernels::all_builtins;
use hilt_runtime::model::Model;
use hilt_runtime::planner::Greedy;
use hilt_runtime::writer::examples;

fn options(canary: CanaryMode) -> AllocOptions {
    AllocOptions {
        canary,
        ..AllocOptions::default()
    }
}

#[repr(align(16))]
struct Memory([u8; 64 * 1024]);

fn run(
    model_bytes: &[u8],
    canary: CanaryMode,
    overrun: Option<(u32, u32)>,
) -> (Result<(), InterpreterError>, usize, u32) {
    let model = Model::from_bytes(model_bytes).unwrap();
    let resolver = all_builtins();
    let mut memory = Box::new(Memory([0; 64 * 1024]));
    let mut interpreter = Interpreter::new(model, &resolver, &mut memory.0);
    let head = interpreter
        .allocate(&Greedy, &options(canary))
        .unwrap()
        .head
        .len;
    if let Some((op, bytes)) = overrun {
        interpreter.inject_overrun(op, bytes);
    }
    let input = interpreter.input_mut(0).unwrap();
    for (i, b) in input.iter_mut().enumerate() {
        *b = (i * 37 + 11) as u8;
    }
    (interpreter.invoke(), interpreter.arena_used_bytes(), head)
}

#[test]
fn off_costs_nothing_and_checks_nothing() {
    let model = examples::tiny_convnet_int8();
    let (plain, used_plain, head_plain) = run(&model, CanaryMode::Off, None);
    plain.unwrap();
    assert_eq!(head_plain, 3 * 2048, "the hand-computed head, unchanged");
    // An overrun into unplanned space goes unnoticed with canaries off.
    let (result, used, _) = run(&model, CanaryMode::Off, Some((6, 4)));
    assert!(result.is_ok());
    assert_eq!(used, used_plain);
}

#[test]
fn clean_runs_raise_no_alarm_in_any_mode() {
    for model in [examples::tiny_convnet_int8(), examples::reshape_int8()] {
        for mode in [CanaryMode::Bounds, CanaryMode::Buffers] {
            let (result, _, _) = run(&model, mode, None);
            assert_eq!(result, Ok(()), "{mode:?}");
        }
    }
}

#[test]
fn guards_are_accounted_in_the_plan() {
    let model = examples::tiny_convnet_int8();
    let (_, used_off, head_off) = run(&model, CanaryMode::Off, None);
    let (_, used_bounds, head_bounds) = run(&model, CanaryMode::Bounds, None);
    let (_, used_buffers, head_buffers) = run(&model, CanaryMode::Buffers, None);
    assert_eq!(head_bounds, head_off);
    assert!(
        used_bounds >= used_off + 4 * GUARD_BYTES as usize,
        "{used_bounds} vs {used_off}"
    );
    // Three 2 KiB buffers live at once, each with its guard (rounded to 16).
    assert_eq!(head_buffers, 3 * (2048 + GUARD_BYTES));
    assert!(used_buffers > used_bounds);
}

#[test]
fn an_overrun_is_caught_at_the_op_that_did_it_in_buffers_mode() {
    let model = examples::tiny_convnet_int8();
    // Op 1 (depthwise) writes tensor 6 ("dw2/out", 2048 bytes).
    for bytes in [1, 3, 16, 40] {
        let (result, _, _) = run(&model, CanaryMode::Buffers, Some((1, bytes)));
        match result {
            Err(InterpreterError::Canary(CanaryFault {
                owner,
                bytes_hit,
                op,
                ..
            })) => {
                assert_eq!(owner, GuardOwner::Tensor(6));
                assert_eq!(op, Some(1));
                assert_eq!(bytes_hit, bytes.min(GUARD_BYTES));
            }
            other => panic!("overrun of {bytes} bytes: {other:?}"),
        }
    }
}

#[test]
fn an_overrun_past_the_head_is_caught_in_bounds_mode() {
    // Greedy puts RESHAPE's output y (64 B) at offset 0 and its input x at
    // 64 of a 128-byte head. Writing 72 bytes past y runs through x (which
    // bounds mode cannot see) and 8 bytes into the guard after the head.
    let model = examples::reshape_int8();
    let (result, _, _) = run(&model, CanaryMode::Bounds, Some((0, 72)));
    match result {
        Err(InterpreterError::Canary(CanaryFault {
            owner: GuardOwner::HeadEnd,
            bytes_hit: 8,
            op: Some(0),
            ..
        })) => {}
        other => panic!("{other:?}"),
    }
}

/// A clock that moves 1,000 counts per read: kernels never read it, so
/// every op takes exactly 1,000 unless something stretches it.
struct SteppingClock(core::cell::Cell<u64>);

impl hilt_runtime::interpreter::Clock for SteppingClock {
    fn now(&self) -> u64 {
        let t = self.0.get() + 1_000;
        self.0.set(t);
        t
    }
}

fn profile(slowdown: Option<(u32, u32)>) -> Vec<u64> {
    let bytes = examples::tiny_convnet_int8();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = all_builtins();
    let mut memory = Box::new(Memory([0; 64 * 1024]));
    let mut interpreter = Interpreter::new(model, &resolver, &mut memory.0);
    interpreter
        .allocate(&Greedy, &options(CanaryMode::Off))
        .unwrap();
    if let Some((op, permille)) = slowdown {
        interpreter.inject_slowdown(op, permille);
    }
    let mut per_op = vec![0u64; model.operator_count() as usize];
    let clock = SteppingClock(core::cell::Cell::new(0));
    interpreter.invoke_profiled(&clock, &mut per_op).unwrap();
    per_op
}

#[test]
fn an_injected_slowdown_stretches_only_its_op() {
    let plain = profile(None);
    assert!(plain.iter().all(|&c| c == 1_000), "{plain:?}");
    let slowed = profile(Some((2, 10)));
    assert!(slowed[2] >= 1_010, "{slowed:?}");
    for (op, (&a, &b)) in plain.iter().zip(&slowed).enumerate() {
        if op != 2 {
            assert_eq!(a, b, "op {op}");
        }
    }
}
