//! Real ops through the driver: the interpreter offloads a model's
//! FULLY_CONNECTED and ADD to the virtual device behind the driver, the
//! device runs them from its timer, and the outputs must be bit-exact with
//! the CPU's. Coherent and non-coherent (where only the driver's own cache
//! maintenance makes the outputs right), the interrupt wired or polled.

mod common;

use common::{HostPlatform, Line, RecordingCache, with_timer};
use hilt_npu_driver::{Driver, DriverStats, Platform, VirtualNpu, WaitMode};
use hilt_runtime::accel::vnpu::{Violation, VnpuConfig, VnpuCore};
use hilt_runtime::accel::{AccelError, Coherent, DEFAULT_OFFLOAD, Offload, OpSet, RegionRole};
use hilt_runtime::allocation::AllocOptions;
use hilt_runtime::interpreter::{Interpreter, InterpreterError};
use hilt_runtime::kernels::all_builtins;
use hilt_runtime::model::Model;
use hilt_runtime::planner::Greedy;
use hilt_runtime::schema::{ActivationFunctionType, BuiltinOperator as Op, TensorType};
use hilt_runtime::writer::{ModelWriter, Options, f32_bytes};

/// `x → FC → a` (offloaded) beside `x → LOGISTIC ×3 → b` (CPU), then
/// `y = a + b` (offloaded): two jobs, the first overlapping CPU ops.
fn branches() -> Vec<u8> {
    const N: i32 = 16;
    let weights: Vec<f32> = (0..N * N)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) / 8.0)
        .collect();
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::FLOAT32, &[1, N]);
    let wt = w.constant("w", TensorType::FLOAT32, &[N, N], &f32_bytes(&weights));
    let a = w.tensor("a", TensorType::FLOAT32, &[1, N]);
    let b1 = w.tensor("b1", TensorType::FLOAT32, &[1, N]);
    let b2 = w.tensor("b2", TensorType::FLOAT32, &[1, N]);
    let b3 = w.tensor("b3", TensorType::FLOAT32, &[1, N]);
    let y = w.output("y", TensorType::FLOAT32, &[1, N]);
    let fc = Options::FullyConnected {
        activation: ActivationFunctionType::NONE,
        keep_num_dims: false,
    };
    w.op(Op::FULLY_CONNECTED, &[Some(x), Some(wt), None], &[a], fc);
    w.op(Op::LOGISTIC, &[Some(x)], &[b1], Options::None);
    w.op(Op::LOGISTIC, &[Some(b1)], &[b2], Options::None);
    w.op(Op::LOGISTIC, &[Some(b2)], &[b3], Options::None);
    let add = Options::Add {
        activation: ActivationFunctionType::NONE,
    };
    w.op(Op::ADD, &[Some(a), Some(b3)], &[y], add);
    w.finish()
}

fn input() -> Vec<u8> {
    let x: Vec<f32> = (0..16).map(|i| (i as f32 - 3.0) / 4.0).collect();
    f32_bytes(&x)
}

/// What a run through the driver gave.
struct Run {
    output: Result<Vec<u8>, InterpreterError>,
    claimed: Vec<bool>,
    driver: DriverStats,
    violation: Option<Violation>,
}

/// Runs the model once on `arena`, offloaded through a driver over
/// `device` when there is one (`drop_invalidates`: a driver whose
/// invalidate hook does nothing).
fn run(
    arena: &mut [u8],
    device: Option<&VirtualNpu<'_>>,
    mode: WaitMode,
    drop_invalidates: bool,
) -> Run {
    let bytes = branches();
    let model = Model::from_bytes(&bytes).unwrap();
    let resolver = all_builtins();
    let mut interpreter = Interpreter::new(model, &resolver, arena);
    let Some(device) = device else {
        interpreter
            .allocate(&Greedy, &AllocOptions::default())
            .unwrap();
        interpreter.input_mut(0).unwrap().copy_from_slice(&input());
        interpreter.invoke().unwrap();
        return Run {
            output: Ok(interpreter.output(0).unwrap().to_vec()),
            claimed: vec![false; 5],
            driver: DriverStats::default(),
            violation: None,
        };
    };
    let host = HostPlatform::new();
    let mut cache = RecordingCache::new(device);
    cache.drop_invalidates = drop_invalidates;
    let platform = Platform {
        cache: &cache,
        event: &host,
        clock: &host,
    };
    let caps = VnpuConfig::default().capabilities();
    let driver = Driver::new(device, caps, platform, mode);
    let line = match mode {
        WaitMode::Interrupt => Line::Wired,
        WaitMode::Poll => Line::Unwired,
    };
    // The driver keeps the caches: the interpreter is told memory is
    // coherent, so only the driver's maintenance makes a non-coherent
    // device right.
    interpreter.set_offload(Some(Offload {
        accelerator: &driver,
        cache: &Coherent,
        ops: OpSet::from_kinds(DEFAULT_OFFLOAD),
        timeout: 2_000_000,
    }));
    interpreter
        .allocate(&Greedy, &AllocOptions::default())
        .unwrap();
    interpreter.input_mut(0).unwrap().copy_from_slice(&input());
    let output = with_timer(device, &driver, 2_000, line, || {
        interpreter
            .invoke()
            .map(|()| interpreter.output(0).unwrap().to_vec())
    });
    let mut claimed = vec![false; 5];
    interpreter.claimed_ops(&mut claimed).unwrap();
    Run {
        output,
        claimed,
        driver: driver.stats(),
        violation: device.violation(),
    }
}

fn cpu_output() -> Vec<u8> {
    let mut arena = vec![0u8; 16 * 1024];
    run(&mut arena, None, WaitMode::Interrupt, false)
        .output
        .unwrap()
}

#[test]
fn offloaded_ops_end_in_the_interrupt_handler_and_match_the_cpu() {
    let mut arena = vec![0u8; 16 * 1024];
    let device = VirtualNpu::new(VnpuCore::new(VnpuConfig::default()));
    let run = run(&mut arena, Some(&device), WaitMode::Interrupt, false);
    assert_eq!(run.output.unwrap(), cpu_output());
    assert_eq!(run.claimed, [true, false, false, false, true]);
    assert_eq!(device.stats().jobs, 2);
    assert_eq!(run.driver.started, 2);
    assert_eq!(run.driver.ended_by_interrupt, 2, "{:?}", run.driver);
    assert_eq!(run.driver.ended_by_poll, 0);
    assert_eq!(run.violation, None);
}

#[test]
fn a_polling_driver_ends_the_same_jobs_without_the_interrupt() {
    let mut arena = vec![0u8; 16 * 1024];
    let device = VirtualNpu::new(VnpuCore::new(VnpuConfig::default()));
    let run = run(&mut arena, Some(&device), WaitMode::Poll, false);
    assert_eq!(run.output.unwrap(), cpu_output());
    assert_eq!(run.driver.ended_by_poll, 2, "{:?}", run.driver);
    assert_eq!(run.driver.ended_by_interrupt, 0);
}

/// A device behind a data cache: it sees the arena only through `shadow`.
fn non_coherent<'s>(arena: &mut [u8], shadow: &'s mut [u8]) -> VirtualNpu<'s> {
    let start = arena.as_mut_ptr() as usize;
    // SAFETY: every caller keeps `arena` alive, declared before the device,
    // until the device is dropped.
    VirtualNpu::new(unsafe { VnpuCore::non_coherent(VnpuConfig::default(), shadow, start) })
}

#[test]
fn behind_a_data_cache_the_drivers_own_maintenance_makes_the_outputs_right() {
    let mut arena = vec![0u8; 16 * 1024];
    let mut shadow = vec![0u8; arena.len()];
    let device = non_coherent(&mut arena, &mut shadow);
    let run = run(&mut arena, Some(&device), WaitMode::Interrupt, false);
    assert_eq!(run.output.unwrap(), cpu_output());
    assert_eq!(run.violation, None);
}

#[test]
fn behind_a_data_cache_a_driver_that_never_invalidates_is_named() {
    let mut arena = vec![0u8; 16 * 1024];
    let mut shadow = vec![0u8; arena.len()];
    let device = non_coherent(&mut arena, &mut shadow);
    let run = run(&mut arena, Some(&device), WaitMode::Interrupt, true);
    // The CPU reads stale lines where the engine wrote: the output is not
    // the CPU's, and vnpu names the region the driver left stale.
    assert_ne!(run.output.as_ref().ok(), Some(&cpu_output()));
    let violation = run.violation.expect("a missing invalidate");
    assert!(
        matches!(
            violation.error,
            AccelError::NotInvalidated {
                role: RegionRole::Output(_),
                ..
            }
        ),
        "{violation:?}"
    );
}
