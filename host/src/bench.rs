//! `hilt bench`: per-invoke time on the host, arena figures, and the ops
//! that take the most time.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::accel::AccelChoice;
use crate::host_run::{AlignedBytes, HostClock, RunError, interpreter_offloaded, planner_for};
use crate::model_file::ModelFile;
use hilt_runtime::planner::PlannerKind;

/// One op's share of the time.
#[derive(Debug, Clone, Serialize)]
pub struct OpTime {
    /// Operator index.
    pub op: u32,
    /// Operator name.
    pub name: String,
    /// Mean microseconds per invoke.
    pub micros: f64,
    /// Share of the total, percent.
    pub percent: f64,
}

/// The figures `hilt bench` prints.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Invocations timed.
    pub iterations: usize,
    /// Median per-invoke time, µs.
    pub median_us: f64,
    /// Fastest, µs.
    pub min_us: f64,
    /// Slowest, µs.
    pub max_us: f64,
    /// Planned head bytes.
    pub arena_head: u32,
    /// Persistent tail bytes.
    pub arena_tail: u32,
    /// `arena_used_bytes()`.
    pub arena_total: usize,
    /// Every op, slowest first.
    pub ops: Vec<OpTime>,
    /// Offload figures, with an accelerator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload: Option<OffloadFigures>,
}

/// Where ops ran and how the engine's work overlapped the CPU's.
#[derive(Debug, Clone, Serialize)]
pub struct OffloadFigures {
    /// The accelerator.
    pub accelerator: String,
    /// How the engine ran here ([`EMULATED`]).
    pub note: &'static str,
    /// Ops it ran (operator indices).
    pub offloaded_ops: Vec<u32>,
    /// Jobs per invoke.
    pub jobs_per_invoke: u32,
    /// CPU ops per invoke that ran while a job was in flight.
    pub cpu_ops_overlapped: u32,
    /// Engine busy time per invoke, µs (its latency model, 1 cycle = 1 ns).
    pub npu_busy_us: f64,
}

/// Input byte `i` of every input: a fixed pattern, as in the Cortex-M
/// measurements of TFLM, so runs are comparable.
pub fn pattern_byte(i: usize) -> u8 {
    ((i * 37 + 11) & 0xFF) as u8
}

/// Times `iterations` invocations of the model at `path` after `warmup` ones.
pub fn bench(
    path: &Path,
    planner: PlannerKind,
    arena: usize,
    iterations: usize,
    warmup: usize,
    accelerator: &AccelChoice,
) -> Result<BenchReport, RunError> {
    let file = ModelFile::open(path)?;
    let model = file.model();
    let planner = planner_for(planner, &model)?;
    let mut memory = AlignedBytes::try_zeroed(arena)?;
    // SAFETY: `memory` is declared first, so it outlives the engine.
    let engine = unsafe { accelerator.engine(memory.as_mut_slice()) }?;
    let offload = engine.as_ref().map(|e| e.offload(&accelerator.offload));
    let mut interp = interpreter_offloaded(model, &planner, &mut memory, offload)?;
    for position in 0..interp.input_count() {
        let input = interp.input_mut(position)?;
        for (i, b) in input.iter_mut().enumerate() {
            *b = pattern_byte(i);
        }
        // Float inputs: keep the pattern but make every value finite.
        if interp.input_info(position)?.dtype == hilt_runtime::schema::TensorType::FLOAT32 {
            let input = interp.input_mut(position)?;
            for (i, chunk) in input.chunks_exact_mut(4).enumerate() {
                let v = (f32::from(pattern_byte(i)) - 128.0) / 128.0;
                chunk.copy_from_slice(&v.to_le_bytes());
            }
        }
    }
    for _ in 0..warmup {
        interp.invoke()?;
    }
    let n_ops = model.operator_count() as usize;
    let mut per_op = vec![0u64; n_ops];
    let clock = HostClock::default();
    let mut times = Vec::with_capacity(iterations);
    let iterations = iterations.max(1);
    for _ in 0..iterations {
        let start = Instant::now();
        interp.invoke()?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    // The profile comes from separate runs so its clock reads do not
    // inflate the timed ones.
    let profiled = iterations.min(50);
    for _ in 0..profiled {
        interp.invoke_profiled(&clock, &mut per_op)?;
    }
    times.sort_by(f64::total_cmp);
    let offload = engine.as_ref().map(|engine| {
        let mut claimed = vec![false; n_ops];
        let _ = interp.claimed_ops(&mut claimed);
        let stats = interp.offload_stats();
        let invokes = (warmup + iterations + profiled).max(1) as f64;
        OffloadFigures {
            accelerator: "vnpu".into(),
            note: EMULATED,
            offloaded_ops: (0..n_ops as u32).filter(|&i| claimed[i as usize]).collect(),
            jobs_per_invoke: stats.jobs,
            cpu_ops_overlapped: stats.cpu_ops_overlapped,
            npu_busy_us: engine.stats().busy_cycles as f64 / 1e3 / invokes,
        }
    });
    let allocation = interp.allocation()?;
    let total_ns: u64 = per_op.iter().sum::<u64>().max(1);
    let mut ops: Vec<OpTime> = model
        .operators()
        .map(|op| {
            let ns = per_op[op.index as usize];
            OpTime {
                op: op.index,
                name: op.code.to_string(),
                micros: ns as f64 / 1e3 / profiled as f64,
                percent: 100.0 * ns as f64 / total_ns as f64,
            }
        })
        .collect();
    ops.sort_by(|a, b| b.micros.total_cmp(&a.micros));
    Ok(BenchReport {
        iterations,
        median_us: times[times.len() / 2],
        min_us: times[0],
        max_us: times[times.len() - 1],
        arena_head: allocation.head.len,
        arena_tail: allocation.tail_bytes,
        arena_total: interp.arena_used_bytes(),
        ops,
        offload,
    })
}

/// What the host's timings with an accelerator are: not an NPU's speed.
pub const EMULATED: &str = "vnpu is emulated on a host thread (hilt's own kernels, paced by its latency model at one engine cycle per ns): these times are the emulation's, not an NPU's; `hilt run` on a virtual board reports cycles net of the emulation";

/// The report as text, with the `top` slowest ops.
pub fn render(report: &BenchReport, name: &str, top: usize) -> String {
    let mut s = format!(
        "{name}: {} invocations\n  per invoke   median {:.1} µs   min {:.1} µs   max {:.1} µs\n  arena        head {} B   tail {} B   total {} B\n\n  slowest ops:\n",
        report.iterations,
        report.median_us,
        report.min_us,
        report.max_us,
        report.arena_head,
        report.arena_tail,
        report.arena_total
    );
    if let Some(o) = &report.offload {
        s.insert_str(
            s.find("\n\n  slowest").unwrap_or(s.len()),
            &format!(
                "\n  offload      {}: {} jobs per invoke (ops {:?}), {} CPU ops overlapped, engine busy {:.1} µs\n  note         {}",
                o.accelerator, o.jobs_per_invoke, o.offloaded_ops, o.cpu_ops_overlapped, o.npu_busy_us, EMULATED
            ),
        );
    }
    for op in report.ops.iter().take(top) {
        s.push_str(&format!(
            "  {:>4}  {:<30} {:>10.1} µs {:>6.1}%\n",
            op.op, op.name, op.micros, op.percent
        ));
    }
    s
}
