//! Accelerator offload end to end: delegation (builtins and a custom op),
//! the asynchronous schedule and its fences, the plan's holds and
//! alignment, deadlines, and vnpu's coherent and non-coherent modes.

use hilt_runtime::accel::vnpu::{
    Immediate, NEGATE, NEGATE_NAME, Never, Slices, SteppedVnpu, Stepper, VnpuConfig, VnpuCore,
};
use hilt_runtime::accel::{
    AccelError, CacheMaintenance, Coherent, DEFAULT_OFFLOAD, OFFLOAD_LINKED, Offload, OffloadStats,
    OpKind, OpSet, RegionRole,
};
use hilt_runtime::allocation::AllocOptions;
use hilt_runtime::interpreter::{Interpreter, InterpreterError};
use hilt_runtime::kernels::{BUILTINS_CAPACITY, OpResolver, all_builtins};
use hilt_runtime::model::Model;
use hilt_runtime::planner::Greedy;
use hilt_runtime::request::BufferOwner;
use hilt_runtime::schema::{ActivationFunctionType, BuiltinOperator as Op, TensorType};
use hilt_runtime::writer::{ModelWriter, Options, f32_bytes};

const FC: Options = Options::FullyConnected {
    activation: ActivationFunctionType::NONE,
    keep_num_dims: false,
};
const ADD: Options = Options::Add {
    activation: ActivationFunctionType::NONE,
};

fn weights(n: usize) -> Vec<u8> {
    let w: Vec<f32> = (0..n * n)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) / 8.0)
        .collect();
    f32_bytes(&w)
}

fn input(n: usize) -> Vec<u8> {
    let x: Vec<f32> = (0..n).map(|i| (i as f32 - 3.0) / 4.0).collect();
    f32_bytes(&x)
}

/// Two independent branches joined by an ADD:
/// `x → FC → a` (offloaded) beside `x → LOGISTIC ×3 → b3` (CPU), then
/// `y = a + b3` (offloaded, so job 0 is waited before it).
fn branches() -> Vec<u8> {
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::FLOAT32, &[1, 16]);
    let weights = w.constant("w", TensorType::FLOAT32, &[16, 16], &weights(16));
    let a = w.tensor("a", TensorType::FLOAT32, &[1, 16]);
    let b1 = w.tensor("b1", TensorType::FLOAT32, &[1, 16]);
    let b2 = w.tensor("b2", TensorType::FLOAT32, &[1, 16]);
    let b3 = w.tensor("b3", TensorType::FLOAT32, &[1, 16]);
    let y = w.output("y", TensorType::FLOAT32, &[1, 16]);
    w.op(
        Op::FULLY_CONNECTED,
        &[Some(x), Some(weights), None],
        &[a],
        FC,
    );
    w.op(Op::LOGISTIC, &[Some(x)], &[b1], Options::None);
    w.op(Op::LOGISTIC, &[Some(b1)], &[b2], Options::None);
    w.op(Op::LOGISTIC, &[Some(b2)], &[b3], Options::None);
    w.op(Op::ADD, &[Some(a), Some(b3)], &[y], ADD);
    w.finish()
}

/// `t = LOGISTIC(x)`, `a = FC(t)` (offloaded), `u = LOGISTIC(x2)` (CPU,
/// after t's last read), `y = LOGISTIC(a)`. Without the hold on `t`, the
/// planner puts `u` on `t`'s bytes while the engine still holds them.
fn reuse_after_job() -> Vec<u8> {
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::FLOAT32, &[1, 16]);
    let x2 = w.input("x2", TensorType::FLOAT32, &[1, 64]);
    let weights = w.constant("w", TensorType::FLOAT32, &[16, 16], &weights(16));
    let t = w.tensor("t", TensorType::FLOAT32, &[1, 16]);
    let a = w.tensor("a", TensorType::FLOAT32, &[1, 16]);
    let u = w.output("u", TensorType::FLOAT32, &[1, 64]);
    let y = w.output("y", TensorType::FLOAT32, &[1, 16]);
    w.op(Op::LOGISTIC, &[Some(x)], &[t], Options::None);
    w.op(
        Op::FULLY_CONNECTED,
        &[Some(t), Some(weights), None],
        &[a],
        FC,
    );
    w.op(Op::LOGISTIC, &[Some(x2)], &[u], Options::None);
    w.op(Op::LOGISTIC, &[Some(a)], &[y], Options::None);
    w.finish()
}

/// `y = HILT_VNPU_NEGATE(x)`, int8.
fn custom_negate() -> Vec<u8> {
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::INT8, &[1, 40]);
    let y = w.output("y", TensorType::INT8, &[1, 40]);
    w.custom_op(NEGATE_NAME, &[x], &[y]);
    w.finish()
}

fn resolver() -> OpResolver<BUILTINS_CAPACITY> {
    let mut r = all_builtins();
    r.add_custom(NEGATE_NAME, NEGATE).unwrap();
    r
}

struct Run {
    output: Vec<u8>,
    stats: OffloadStats,
    claimed: Vec<bool>,
}

fn run(
    bytes: &[u8],
    x: &[u8],
    offload: Option<Offload<'_>>,
    drop_holds: bool,
) -> Result<Run, InterpreterError> {
    let model = Model::from_bytes(bytes).unwrap();
    let resolver = resolver();
    let mut arena = vec![0u8; 16 * 1024];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    interpreter.set_offload(offload);
    if drop_holds {
        interpreter.inject_drop_holds();
    }
    interpreter.allocate(&Greedy, &AllocOptions::default())?;
    interpreter.input_mut(0)?.copy_from_slice(x);
    for i in 1..interpreter.input_count() {
        let second = interpreter.input_mut(i)?;
        // Other values than input 0's, so no two tensors look alike.
        let values: Vec<f32> = (0..second.len() / 4)
            .map(|i| 2.0 - i as f32 / 8.0)
            .collect();
        second.copy_from_slice(&f32_bytes(&values));
    }
    interpreter.invoke()?;
    let mut claimed = vec![false; model.operator_count() as usize];
    interpreter.claimed_ops(&mut claimed)?;
    Ok(Run {
        output: interpreter.output(0)?.to_vec(),
        stats: interpreter.offload_stats(),
        claimed,
    })
}

fn offload<'o, S: Stepper>(engine: &'o SteppedVnpu<'_, S>, ops: &'o [OpKind<'o>]) -> Offload<'o> {
    Offload {
        accelerator: engine,
        cache: engine,
        ops: OpSet::from_kinds(ops),
        timeout: 1_000,
    }
}

fn small_jobs() -> VnpuConfig<'static> {
    let mut config = VnpuConfig::default();
    config.latency.job_cycles = 3;
    config.latency.cycles_per_1000_macs = 0;
    config
}

#[test]
fn offloaded_outputs_are_bit_exact_and_claims_follow_the_list() {
    let bytes = branches();
    let cpu = run(&bytes, &input(16), None, false).unwrap();
    assert_eq!(cpu.claimed, [false; 5]);
    let engine = SteppedVnpu::new(VnpuConfig::default(), Immediate);
    let npu = run(
        &bytes,
        &input(16),
        Some(offload(&engine, DEFAULT_OFFLOAD)),
        false,
    )
    .unwrap();
    assert_eq!(npu.output, cpu.output);
    assert_eq!(npu.claimed, [true, false, false, false, true]);
    assert_eq!(npu.stats.jobs, 2);
    assert_eq!(engine.stats().jobs, 2);
    assert_eq!(engine.violation(), None);
    // Only FULLY_CONNECTED listed: ADD stays on the CPU.
    let fc_only = [OpKind::Builtin(Op::FULLY_CONNECTED)];
    let npu = run(&bytes, &input(16), Some(offload(&engine, &fc_only)), false).unwrap();
    assert_eq!(npu.claimed, [true, false, false, false, false]);
    assert_eq!(npu.output, cpu.output);
}

#[test]
fn the_cpu_runs_the_other_branch_while_the_job_runs() {
    let bytes = branches();
    let cpu = run(&bytes, &input(16), None, false).unwrap();
    // One cycle per tick, three per job: job 0 completes during the third
    // CPU op of the other branch.
    let engine = SteppedVnpu::new(small_jobs(), Slices(1));
    let npu = run(
        &bytes,
        &input(16),
        Some(offload(&engine, DEFAULT_OFFLOAD)),
        false,
    )
    .unwrap();
    assert_eq!(npu.output, cpu.output);
    assert_eq!(npu.stats.cpu_ops_overlapped, 2, "{:?}", npu.stats);
    // A slower engine: all three CPU ops overlap and the wait blocks.
    let engine = SteppedVnpu::new(VnpuConfig::default(), Slices(100));
    let npu = run(
        &bytes,
        &input(16),
        Some(offload(&engine, DEFAULT_OFFLOAD)),
        false,
    )
    .unwrap();
    assert_eq!(npu.output, cpu.output);
    assert_eq!(npu.stats.cpu_ops_overlapped, 3);
    assert!(npu.stats.waits_blocked >= 1);
}

#[test]
fn a_custom_op_resolves_by_name_and_is_claimed_by_the_backend_that_registers_it() {
    let bytes = custom_negate();
    let x: Vec<u8> = (0..40).map(|i| (i * 5 - 100) as i8 as u8).collect();
    let expected: Vec<u8> = x
        .iter()
        .map(|&v| (v as i8).saturating_neg() as u8)
        .collect();
    let cpu = run(&bytes, &x, None, false).unwrap();
    assert_eq!(cpu.output, expected);
    let engine = SteppedVnpu::new(VnpuConfig::default(), Slices(500));
    let names = [OpKind::Custom(NEGATE_NAME)];
    let npu = run(&bytes, &x, Some(offload(&engine, &names)), false).unwrap();
    assert_eq!(npu.claimed, [true]);
    assert_eq!(npu.output, expected);
    // Without the name registered, the op has no kernel.
    let model = Model::from_bytes(&bytes).unwrap();
    let builtins = all_builtins();
    let mut arena = vec![0u8; 4096];
    let mut interpreter = Interpreter::new(model, &builtins, &mut arena);
    assert!(matches!(
        interpreter.allocate(&Greedy, &AllocOptions::default()),
        Err(InterpreterError::UnsupportedOperator { op: 0, .. })
    ));
}

#[test]
fn buffers_a_job_touches_are_aligned_whole_lines_and_held_until_its_wait() {
    let bytes = reuse_after_job();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = resolver();
    let engine = SteppedVnpu::new(VnpuConfig::default(), Immediate);
    let fc_only = [OpKind::Builtin(Op::FULLY_CONNECTED)];
    let mut arena = vec![0u8; 16 * 1024];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    interpreter.set_offload(Some(offload(&engine, &fc_only)));
    let mut seen = Vec::new();
    interpreter
        .allocate_with_report(&Greedy, &AllocOptions::default(), |plan| {
            seen = plan.requests.to_vec();
        })
        .unwrap();
    // Tensors: x 0, x2 1, w 2 (constant), t 3, a 4, u 5, y 6.
    let find = |t: u32| {
        *seen
            .iter()
            .find(|r| r.owner() == BufferOwner::Tensor(t))
            .unwrap()
    };
    let line = VnpuConfig::default().line_size;
    for t in [3, 4] {
        let r = find(t);
        assert!(r.align >= line && r.align.is_multiple_of(16), "{r:?}");
        assert!(r.padded_size().unwrap().is_multiple_of(line));
    }
    // t is last read by op 1, but the job is waited before op 3 (first
    // thing in step 3): it is held through step 2.
    assert_eq!((find(3).last_step, find(3).live_until()), (1, 2));
    assert_eq!(find(5).live_until(), 3);
}

#[test]
fn removing_the_holds_is_caught_by_the_engine_lease_check() {
    let bytes = reuse_after_job();
    let fc_only = [OpKind::Builtin(Op::FULLY_CONNECTED)];
    let engine = SteppedVnpu::new(VnpuConfig::default(), Slices(100));
    let ok = run(&bytes, &input(16), Some(offload(&engine, &fc_only)), false).unwrap();
    assert_eq!(
        ok.output,
        run(&bytes, &input(16), None, false).unwrap().output
    );
    assert_eq!(engine.violation(), None);

    let engine = SteppedVnpu::new(VnpuConfig::default(), Slices(100));
    let err = run(&bytes, &input(16), Some(offload(&engine, &fc_only)), true)
        .err()
        .expect("a plan without holds must fail");
    match err {
        InterpreterError::Accelerator {
            op: 1,
            error: AccelError::LeaseViolation { role, .. },
            ..
        } => assert_eq!(role, RegionRole::Input(3)),
        other => panic!("unexpected {other:?}"),
    }
    let violation = engine.violation().unwrap();
    assert_eq!(violation.op, 1);
}

#[test]
fn a_missed_deadline_names_op_and_job_and_reset_recovers() {
    let bytes = branches();
    let cpu = run(&bytes, &input(16), None, false).unwrap();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = resolver();
    let engine = SteppedVnpu::new(VnpuConfig::default(), Hung(true));
    let mut arena = vec![0u8; 16 * 1024];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    interpreter.set_offload(Some(Offload {
        timeout: 50,
        ..offload(&engine, DEFAULT_OFFLOAD)
    }));
    interpreter
        .allocate(&Greedy, &AllocOptions::default())
        .unwrap();
    interpreter
        .input_mut(0)
        .unwrap()
        .copy_from_slice(&input(16));
    let err = interpreter.invoke().unwrap_err();
    assert!(
        matches!(
            err,
            InterpreterError::Accelerator {
                op: 0,
                job: 1,
                error: AccelError::Timeout
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("operator 0, accelerator job 1"));
    // The engine recovers; the interpreter runs again after reset.
    engine.set_stepper(Hung(false));
    interpreter.reset().unwrap();
    interpreter
        .input_mut(0)
        .unwrap()
        .copy_from_slice(&input(16));
    interpreter.invoke().unwrap();
    assert_eq!(interpreter.output(0).unwrap(), cpu.output.as_slice());
}

/// `Never` until told otherwise, then `Immediate`.
struct Hung(bool);

impl Stepper for Hung {
    fn budget(&mut self) -> u64 {
        if self.0 {
            Never.budget()
        } else {
            Immediate.budget()
        }
    }
}

#[test]
fn non_coherent_engine_matches_when_the_cpu_cleans_and_invalidates() {
    let bytes = branches();
    let x = input(16);
    let cpu = run(&bytes, &x, None, false).unwrap();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = resolver();
    let mut arena = vec![0u8; 16 * 1024];
    let mut shadow = vec![0u8; arena.len()];
    let start = arena.as_mut_ptr() as usize;
    // SAFETY: `arena` outlives the engine (declared before it) and is the
    // memory the shadow mirrors.
    let core = unsafe { VnpuCore::non_coherent(VnpuConfig::default(), &mut shadow, start) };
    let engine = SteppedVnpu::with_core(core, Slices(1_000));
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    interpreter.set_offload(Some(offload(&engine, DEFAULT_OFFLOAD)));
    interpreter
        .allocate(&Greedy, &AllocOptions::default())
        .unwrap();
    interpreter.input_mut(0).unwrap().copy_from_slice(&x);
    interpreter.invoke().unwrap();
    assert_eq!(interpreter.output(0).unwrap(), cpu.output.as_slice());
    assert_eq!(engine.violation(), None);
}

#[test]
fn non_coherent_engine_without_cache_maintenance_gives_wrong_outputs() {
    let bytes = branches();
    let x = input(16);
    let cpu = run(&bytes, &x, None, false).unwrap();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = resolver();
    let mut arena = vec![0u8; 16 * 1024];
    let mut shadow = vec![0u8; arena.len()];
    let start = arena.as_mut_ptr() as usize;
    // SAFETY: as above.
    let core = unsafe { VnpuCore::non_coherent(VnpuConfig::default(), &mut shadow, start) };
    let engine = SteppedVnpu::with_core(core, Immediate);
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    // The CPU believes memory is coherent: it never cleans nor invalidates.
    let no_maintenance: &dyn CacheMaintenance = &Coherent;
    interpreter.set_offload(Some(Offload {
        cache: no_maintenance,
        ..offload(&engine, DEFAULT_OFFLOAD)
    }));
    interpreter
        .allocate(&Greedy, &AllocOptions::default())
        .unwrap();
    interpreter.input_mut(0).unwrap().copy_from_slice(&x);
    // The engine would read stale inputs: it refuses the job at submit,
    // naming the first region whose memory differs from what was cleaned.
    let err = interpreter.invoke().unwrap_err();
    assert!(
        matches!(
            err,
            InterpreterError::Accelerator {
                op: 0,
                error: AccelError::NotCleaned {
                    role: RegionRole::Input(_) | RegionRole::Descriptor,
                    ..
                },
                ..
            }
        ),
        "{err:?}"
    );
    let _ = cpu;
}

#[test]
fn offload_keeps_every_guard_band_intact() {
    use hilt_runtime::canary::CanaryMode;
    let bytes = branches();
    let x = input(16);
    let cpu = run(&bytes, &x, None, false).unwrap();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = resolver();
    let engine = SteppedVnpu::new(VnpuConfig::default(), Slices(700));
    let mut arena = vec![0u8; 16 * 1024];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    interpreter.set_offload(Some(offload(&engine, DEFAULT_OFFLOAD)));
    let options = AllocOptions {
        canary: CanaryMode::Buffers,
        ..AllocOptions::default()
    };
    interpreter.allocate(&Greedy, &options).unwrap();
    for _ in 0..3 {
        interpreter.input_mut(0).unwrap().copy_from_slice(&x);
        interpreter.invoke().unwrap();
        assert_eq!(interpreter.output(0).unwrap(), cpu.output.as_slice());
    }
    assert_eq!(interpreter.offload_stats().jobs, 2);
}

#[test]
fn an_arena_the_engine_cannot_reach_is_refused_at_allocate() {
    use hilt_runtime::accel::AddressWindow;
    let bytes = branches();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = resolver();
    let mut arena = vec![0u8; 16 * 1024];
    // The engine reaches only the arena's first 64 bytes.
    let windows = [AddressWindow {
        start: arena.as_ptr() as usize,
        len: 64,
        writable: true,
    }];
    let engine = SteppedVnpu::new(
        VnpuConfig {
            windows: &windows,
            ..VnpuConfig::default()
        },
        Immediate,
    );
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    interpreter.set_offload(Some(offload(&engine, DEFAULT_OFFLOAD)));
    let err = interpreter
        .allocate(&Greedy, &AllocOptions::default())
        .unwrap_err();
    assert!(
        matches!(
            err,
            InterpreterError::Accelerator {
                op: 0,
                job: 0,
                error: AccelError::OutsideWindow { .. }
            }
        ),
        "{err:?}"
    );
    assert_eq!(interpreter.invoke(), Err(InterpreterError::NotAllocated));
}

/// A backend handed to a build with the `no-offload` feature is refused at
/// allocate, by name, and nothing is claimed; the default build offloads
/// the same set-up. CI runs this test in both builds.
#[test]
fn a_no_offload_build_refuses_a_backend_by_name() {
    let bytes = branches();
    let engine = SteppedVnpu::new(VnpuConfig::default(), Immediate);
    let result = run(
        &bytes,
        &input(16),
        Some(offload(&engine, DEFAULT_OFFLOAD)),
        false,
    );
    if OFFLOAD_LINKED {
        assert_eq!(result.unwrap().stats.jobs, 2);
    } else {
        assert_eq!(result.err(), Some(InterpreterError::OffloadNotLinked));
        assert_eq!(engine.stats().jobs, 0);
        let cpu = run(&bytes, &input(16), None, false).unwrap();
        assert_eq!(cpu.claimed, [false; 5]);
    }
}

/// Runs the two-branch model non-coherently with `fault` in the CPU's
/// offload path; returns the invoke's result and the engine's violation.
fn run_with_fault(
    fault: Option<hilt_runtime::accel::OffloadFault>,
    config: VnpuConfig<'static>,
    ops: &[OpKind<'_>],
) -> (
    Result<(), InterpreterError>,
    Option<hilt_runtime::accel::vnpu::Violation>,
) {
    let bytes = branches();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = resolver();
    let mut arena = vec![0u8; 16 * 1024];
    let mut shadow = vec![0u8; arena.len()];
    let start = arena.as_mut_ptr() as usize;
    // SAFETY: `arena` outlives the engine and is the memory it mirrors.
    let core = unsafe { VnpuCore::non_coherent(config, &mut shadow, start) };
    let engine = SteppedVnpu::with_core(core, Slices(100));
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    interpreter.set_offload(Some(offload(&engine, ops)));
    interpreter.inject_offload_fault(fault);
    interpreter
        .allocate(&Greedy, &AllocOptions::default())
        .unwrap();
    interpreter
        .input_mut(0)
        .unwrap()
        .copy_from_slice(&input(16));
    let result = interpreter.invoke();
    let _ = interpreter.into_arena();
    // What a firmware does after each invoke: the engine's last word.
    let settled = engine.settle();
    (result, engine.violation().or(settled))
}

#[test]
fn every_offload_fault_is_caught_and_named() {
    use hilt_runtime::accel::OffloadFault as F;
    use hilt_runtime::accel::vnpu::EngineFault;
    let (clean, violation) = run_with_fault(None, VnpuConfig::default(), DEFAULT_OFFLOAD);
    assert_eq!((clean.is_ok(), violation), (true, None));
    let accel_error = |r: Result<(), InterpreterError>| match r {
        Err(InterpreterError::Accelerator { op, error, .. }) => (op, error),
        other => panic!("expected an accelerator error, got {other:?}"),
    };
    // Only FULLY_CONNECTED offloaded: job 0 is still running when op 4
    // (the ADD joining the branches, on the CPU) reads its output; the
    // schedule's audit names both.
    let fc_only = [OpKind::Builtin(Op::FULLY_CONNECTED)];
    let (op, error) =
        accel_error(run_with_fault(Some(F::SkipWait), VnpuConfig::default(), &fc_only).0);
    assert_eq!((op, error), (0, AccelError::NotWaited { by_op: 4 }));
    assert!(
        run_with_fault(None, VnpuConfig::default(), &fc_only)
            .0
            .is_ok()
    );
    let (op, error) =
        accel_error(run_with_fault(Some(F::Misaligned), VnpuConfig::default(), DEFAULT_OFFLOAD).0);
    assert!(
        matches!(
            error,
            AccelError::Misaligned {
                role: RegionRole::Output(_),
                ..
            }
        ) && op == 0,
        "{error:?}"
    );
    let (_, error) = accel_error(
        run_with_fault(
            Some(F::WriteReadOnly),
            VnpuConfig::default(),
            DEFAULT_OFFLOAD,
        )
        .0,
    );
    assert!(matches!(
        error,
        AccelError::WriteToReadOnly {
            role: RegionRole::Output(_),
            ..
        }
    ));
    let (_, error) = accel_error(
        run_with_fault(
            Some(F::MissingClean),
            VnpuConfig::default(),
            DEFAULT_OFFLOAD,
        )
        .0,
    );
    assert!(matches!(error, AccelError::NotCleaned { .. }), "{error:?}");
    let (result, violation) = run_with_fault(
        Some(F::MissingInvalidate),
        VnpuConfig::default(),
        DEFAULT_OFFLOAD,
    );
    let violation = violation.expect("a missing invalidate is recorded");
    assert!(
        matches!(
            violation.error,
            AccelError::NotInvalidated {
                role: RegionRole::Output(_),
                ..
            }
        ),
        "{violation:?} {result:?}"
    );
    let hung = VnpuConfig {
        fault: EngineFault::NeverCompletes,
        ..VnpuConfig::default()
    };
    assert_eq!(
        accel_error(run_with_fault(None, hung, DEFAULT_OFFLOAD).0),
        (0, AccelError::Timeout)
    );
    let failing = VnpuConfig {
        fault: EngineFault::Error(0xE1),
        ..VnpuConfig::default()
    };
    assert_eq!(
        accel_error(run_with_fault(None, failing, DEFAULT_OFFLOAD).0),
        (0, AccelError::Engine { code: 0xE1 })
    );
}

#[test]
fn a_traced_invoke_records_each_job_and_the_time_spent_waiting() {
    use core::cell::Cell;
    use hilt_runtime::accel::JobTrace;
    use hilt_runtime::interpreter::Clock;
    /// Advances by one per reading, so every event gets its own time.
    struct Steps(Cell<u64>);
    impl Clock for Steps {
        fn now(&self) -> u64 {
            self.0.set(self.0.get() + 1);
            self.0.get()
        }
    }
    let bytes = branches();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = resolver();
    let engine = SteppedVnpu::new(VnpuConfig::default(), Slices(100));
    let mut arena = vec![0u8; 16 * 1024];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    interpreter.set_offload(Some(offload(&engine, DEFAULT_OFFLOAD)));
    interpreter
        .allocate(&Greedy, &AllocOptions::default())
        .unwrap();
    interpreter
        .input_mut(0)
        .unwrap()
        .copy_from_slice(&input(16));
    let mut per_op = [0u64; 5];
    let mut trace = [JobTrace::default(); 4];
    let clock = Steps(Cell::new(0));
    let start = clock.now();
    interpreter
        .invoke_traced(&clock, &mut per_op, &mut trace, start)
        .unwrap();
    let stats = interpreter.offload_stats();
    assert_eq!(stats.jobs, 2);
    let ops: Vec<u32> = trace[..2].iter().map(|t| t.op).collect();
    assert_eq!(ops, [0, 4]);
    for t in &trace[..2] {
        assert!(
            t.submitted < t.wait_started && t.wait_started < t.retired,
            "{t:?}"
        );
        assert!(t.completed <= t.retired);
    }
    assert_eq!(
        stats.waited,
        trace[..2]
            .iter()
            .map(|t| u64::from(t.retired - t.wait_started))
            .sum::<u64>()
    );
    assert_eq!(trace[2], JobTrace::default());
}

#[test]
fn an_arena_holding_old_bytes_claims_only_what_the_backend_claims() {
    // A firmware re-plans in the same arena when the host changes the
    // offload: nothing from the last plan may read as a claim.
    let bytes = branches();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = resolver();
    let engine = SteppedVnpu::new(VnpuConfig::default(), Immediate);
    let fc_only = [OpKind::Builtin(Op::FULLY_CONNECTED)];
    let mut arena = vec![0xFFu8; 16 * 1024];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    interpreter.set_offload(Some(offload(&engine, &fc_only)));
    interpreter
        .allocate(&Greedy, &AllocOptions::default())
        .unwrap();
    let mut claimed = [false; 5];
    interpreter.claimed_ops(&mut claimed).unwrap();
    assert_eq!(claimed, [true, false, false, false, false]);
    interpreter
        .input_mut(0)
        .unwrap()
        .copy_from_slice(&input(16));
    interpreter.invoke().unwrap();
    assert_eq!(interpreter.offload_stats().jobs, 1);
}
