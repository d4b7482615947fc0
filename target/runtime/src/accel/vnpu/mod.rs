//! `vnpu`: a virtual NPU that runs claimed ops with hilt's own kernels
//! (bit-exact with the CPU path) and behaves, towards the code that drives
//! it, like a real engine behind a real driver.
//!
//! - **Asynchronous, in slices.** [`VnpuCore::step`] advances the running
//!   job by a budget of cycles from its latency model (a fixed cost per job
//!   plus cycles per MAC); a timer interrupt (target) or a thread (host)
//!   calls it, so completion arrives while the CPU does other work. The
//!   kernel computes when the job's cycles are used up: inputs are read late,
//!   as an engine streaming them would.
//! - **Checked like a driver checks.** Every region's base aligned, inside a
//!   reachable window, and written only if read-write; otherwise the job
//!   fails at submit with an error naming the region.
//! - **Poisoned outputs.** A job's output regions are filled with
//!   [`OUTPUT_PATTERN`] when it starts, so a reader that does not wait sees
//!   garbage, not last run's plausible values.
//! - **Leases.** The engine keeps a checksum of every region of the job it
//!   holds and checks it at each step and when the job is retired: a region
//!   written by someone else (a buffer the plan put on it too early, a
//!   missing fence) is recorded as a violation naming job and region.
//! - **Non-coherent mode.** The engine sees only a shadow copy of the arena:
//!   the CPU's bytes reach it only through [`clean`](VnpuCore::clean), and
//!   its writes reach the CPU only through
//!   [`invalidate`](VnpuCore::invalidate), whole lines at a time, as with a
//!   data cache between them. QEMU models no caches; this makes missing
//!   cache maintenance visible there.
//!
//! [`SteppedVnpu`] drives the core from its own `poll`/`wait` calls with a
//! [`Stepper`] that grants cycles per tick: at once ([`Immediate`]), in
//! slices ([`Slices`]), or never ([`Never`]). The host crate runs the same
//! core on a thread.

use super::{AccelError, AddressWindow, Capabilities, JobId, MAX_JOB_REGIONS, OpKind, OpSupport};
use crate::kernels::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::{BuiltinOperator, TensorType};

/// The byte a job's outputs hold from the job's start until the engine
/// writes them.
pub const OUTPUT_PATTERN: u8 = 0xA5;

/// The custom op vnpu registers: int8 saturating negation, `y = -x`.
pub const NEGATE_NAME: &str = "HILT_VNPU_NEGATE";

/// The kernel of [`NEGATE_NAME`] (register it with
/// [`OpResolver::add_custom`](crate::kernels::OpResolver::add_custom)).
pub const NEGATE: Registration = Registration {
    name: NEGATE_NAME,
    prepare: negate_prepare,
    invoke: negate_invoke,
};

fn negate_prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    for t in [&input, &output] {
        if t.dtype != TensorType::INT8 {
            return Err(KernelError::UnsupportedType {
                tensor: t.index,
                dtype: t.dtype.0,
            });
        }
    }
    if input.bytes != output.bytes {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    Ok(())
}

fn negate_invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    for (y, &x) in output.data.iter_mut().zip(input.data) {
        *y = (x as i8).saturating_neg() as u8;
    }
    Ok(())
}

const TYPES: &[TensorType] = &[TensorType::INT8, TensorType::FLOAT32, TensorType::INT32];

/// What vnpu runs: the six ops of the default offload list and its custom op.
pub const VNPU_OPS: &[OpSupport<'static>] = &[
    OpSupport {
        op: OpKind::Builtin(BuiltinOperator::CONV_2D),
        types: TYPES,
    },
    OpSupport {
        op: OpKind::Builtin(BuiltinOperator::DEPTHWISE_CONV_2D),
        types: TYPES,
    },
    OpSupport {
        op: OpKind::Builtin(BuiltinOperator::FULLY_CONNECTED),
        types: TYPES,
    },
    OpSupport {
        op: OpKind::Builtin(BuiltinOperator::ADD),
        types: TYPES,
    },
    OpSupport {
        op: OpKind::Builtin(BuiltinOperator::AVERAGE_POOL_2D),
        types: TYPES,
    },
    OpSupport {
        op: OpKind::Builtin(BuiltinOperator::MAX_POOL_2D),
        types: TYPES,
    },
    OpSupport {
        op: OpKind::Custom(NEGATE_NAME),
        types: &[TensorType::INT8],
    },
];

/// How long a job takes, in engine cycles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyModel {
    /// Fixed cost per job (set-up, descriptor fetch, completion interrupt).
    pub job_cycles: u64,
    /// Cycles per thousand multiply-accumulates (64 ≈ 16 MACs per cycle).
    pub cycles_per_1000_macs: u64,
}

impl LatencyModel {
    /// vnpu's default: a small microcontroller NPU. Arm's Ethos-U55 comes
    /// in configurations of 32 to 256 int8 MACs per cycle (Arm's Ethos-U55
    /// product brief); this is the smallest, 32, at half use (layers'
    /// edges, weight streaming and the odd shape keep a real one well below
    /// its peak): 16 MACs a cycle, 63 cycles per thousand, rounded to 64.
    /// Each job pays 10,000 cycles for fetching its command stream, setting
    /// up its DMA and taking its completion interrupt. Both figures are a
    /// model of ours, not a measurement of any part: scenarios and boards
    /// set their own under `[vnpu]`. (The old default, 2,000 + 4 per 1000
    /// MACs, was 256 MACs a cycle at full use: KWS in 71,640 cycles.)
    pub const MICRO_NPU: LatencyModel = LatencyModel {
        job_cycles: 10_000,
        cycles_per_1000_macs: 64,
    };

    /// Cycles a job of `macs` multiply-accumulates takes (at least 1).
    pub fn cycles(&self, macs: u64) -> u64 {
        self.job_cycles
            .saturating_add(macs.saturating_mul(self.cycles_per_1000_macs) / 1000)
            .max(1)
    }
}

/// What a real driver costs the CPU, which an emulated engine's figures
/// keep: the emulation is taken out of every figure and this is put in, so
/// that an offloaded run is not credited with a driver that costs nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverModel {
    /// CPU cycles per submit: writing the job's command-stream and buffer
    /// base registers, starting the engine and the driver's bookkeeping.
    pub submit_cycles: u64,
    /// CPU cycles per cache line cleaned or invalidated (a by-address
    /// maintenance loop: one store to the cache's maintenance register and
    /// the loop's own instructions per line). Only a non-coherent engine
    /// has lines to maintain.
    pub cycles_per_line: u64,
}

impl DriverModel {
    /// vnpu's default driver: 1,000 cycles per submit and 4 per line. A
    /// model of ours, not a measurement of any driver; scenarios and boards
    /// set their own under `[vnpu]` (`driver_submit_cycles`,
    /// `driver_cycles_per_line`).
    pub const MICRO_NPU: DriverModel = DriverModel {
        submit_cycles: 1_000,
        cycles_per_line: 4,
    };

    /// A driver that costs nothing (figures of the engine alone).
    pub const FREE: DriverModel = DriverModel {
        submit_cycles: 0,
        cycles_per_line: 0,
    };
}

/// A failure vnpu plays, for the tests that must catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineFault {
    /// None: jobs run to completion.
    #[default]
    None,
    /// Jobs never complete (a hung engine): every wait reaches its deadline.
    NeverCompletes,
    /// Every job completes with `AccelError::Engine { code }`.
    Error(u32),
    /// Each job, computing, also reads one byte just past its first input
    /// in the arena (a transfer a beat too long): nothing the engine
    /// reports, only an access check (the QEMU plugin) can see it.
    OverRead,
}

/// vnpu's settings: what it reports as its capabilities, and its latency.
#[derive(Debug, Clone, Copy)]
pub struct VnpuConfig<'c> {
    /// Operators and types it claims.
    pub ops: &'c [OpSupport<'c>],
    /// Base-address alignment it checks.
    pub align: u32,
    /// Cache-line size of the modelled cache.
    pub line_size: u32,
    /// Regions per job it accepts.
    pub max_regions: u32,
    /// Windows it reaches (empty: everywhere).
    pub windows: &'c [AddressWindow],
    /// Latency model.
    pub latency: LatencyModel,
    /// A failure to play (tests only; `None` otherwise).
    pub fault: EngineFault,
}

impl Default for VnpuConfig<'static> {
    fn default() -> Self {
        VnpuConfig {
            ops: VNPU_OPS,
            // Ethos-U's base-address rule and a Cortex-M7 cache line.
            align: 16,
            line_size: 32,
            max_regions: MAX_JOB_REGIONS as u32,
            windows: &[],
            latency: LatencyModel::MICRO_NPU,
            fault: EngineFault::None,
        }
    }
}

impl<'c> VnpuConfig<'c> {
    /// The capabilities these settings describe.
    pub fn capabilities(&self) -> Capabilities<'c> {
        Capabilities {
            ops: self.ops,
            align: self.align,
            line_size: self.line_size,
            max_regions: self.max_regions,
            windows: self.windows,
        }
    }
}

/// A lease broken while the engine held a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Violation {
    /// The job.
    pub job: JobId,
    /// Its operator.
    pub op: u32,
    /// What happened, naming the region.
    pub error: AccelError,
}

/// Figures since the engine was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VnpuStats {
    /// Jobs completed.
    pub jobs: u32,
    /// Cycles spent running jobs.
    pub busy_cycles: u64,
    /// Lease violations seen.
    pub violations: u32,
}

mod engine;
mod stepped;
#[cfg(test)]
mod tests;

pub use engine::VnpuCore;
pub use stepped::{Immediate, Never, Slices, SteppedVnpu, Stepper};
