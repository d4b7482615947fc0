//! Offloading operators from the firmware to an engine: the seam the agent
//! drives, the host's choice (`SetOffload`), and the clock that leaves an
//! emulated engine's own work out of every figure.
//!
//! The agent holds the runtime's [`Accelerator`] and [`CacheMaintenance`]
//! through one more trait, [`OffloadEngine`], for what only a firmware's
//! engine can tell: how it is set up for a run (coherent or not, its
//! latency model, the window it reaches), the cycles it spent being
//! emulated by the CPU, and the violations it saw. [`TickVnpu`] is hilt's
//! own: the virtual NPU stepped from the SysTick interrupt and computing in
//! PendSV, on every Cortex-M board.

pub use hilt_proto::EngineLedger;
use hilt_proto::{AccelFault, OffloadMode};
use hilt_runtime::accel::vnpu::{DriverModel, EngineFault, LatencyModel, Violation};
use hilt_runtime::accel::{Accelerator, AddressWindow, CacheMaintenance, OpSet};
use hilt_runtime::interpreter::Clock;

#[cfg(feature = "cortex-m")]
mod tick;
#[cfg(feature = "cortex-m")]
pub use tick::TickVnpu;

/// How long one wait may take, in the engine's clock: far above any job's
/// latency (the largest MLPerf Tiny layer is about 25 k cycles in vnpu's
/// default model), low enough that a hung engine fails a run in seconds.
pub const WAIT_TIMEOUT: u64 = 4_000_000;

/// Counts of the cycle counter between two engine ticks (SysTick's period
/// while offloading): a job completes at the first tick after its latency
/// is used up.
pub const TICK_COUNTS: u32 = 1024;

/// The memory an engine in non-coherent mode sees instead of the arena.
#[derive(Debug, Clone, Copy)]
pub struct ShadowMemory {
    /// Address of the first byte it mirrors (the interpreter's arena).
    pub start: usize,
    /// The engine's copy.
    pub shadow: *mut u8,
    /// Bytes mirrored.
    pub len: usize,
}

/// How an engine runs for the next invokes.
#[derive(Debug, Clone, Copy)]
pub struct EngineSetup {
    /// Its latency model, in core cycles.
    pub latency: LatencyModel,
    /// The CPU cost of a real driver, in core cycles, which the figures
    /// keep.
    pub driver: DriverModel,
    /// Core cycles each tick grants ([`TICK_COUNTS`] counts of the
    /// counter, in cycles).
    pub cycles_per_tick: u32,
    /// The one window it reaches (reads and writes).
    pub window: AddressWindow,
    /// Non-coherent mode: its view of memory.
    pub shadow: Option<ShadowMemory>,
    /// A failure to play (fault tests only).
    pub fault: EngineFault,
}

/// An engine a firmware hands the agent (`Agent::offload_engine`).
pub trait OffloadEngine: Accelerator + CacheMaintenance + Sync {
    /// Its name, for the start-up log.
    fn name(&self) -> &'static str;

    /// Sets the engine up for the next invokes; `None` stops it (no
    /// offload). Called only when no job is in flight.
    ///
    /// # Safety
    /// A shadow's memory must be valid for reads and writes and used by
    /// nothing else until the next `configure`.
    unsafe fn configure(&self, setup: Option<EngineSetup>);

    /// What the figures leave out (the CPU's time emulating the engine; 0
    /// for a real engine) and put in (a modelled driver's cost) so far, in
    /// clock counts, by category.
    fn ledger(&self) -> EngineLedger;

    /// The ledger's totals, `(removed, kept)`: what the clock the
    /// interpreter is timed with reads at every op, so an engine keeps it
    /// cheap (no division, two values in registers).
    fn adjustment(&self) -> (u64, u64) {
        let ledger = self.ledger();
        (ledger.removed(), ledger.kept())
    }

    /// Engine (core) cycles spent running jobs so far.
    fn busy_cycles(&self) -> u64;

    /// The cycle counter restarted (before a timed invoke; no job is in
    /// flight): the ledger counts from 0 again, and the engine's times
    /// follow the new count.
    fn rebase(&self);

    /// What the CPU still owes the engine after an invoke (a missing
    /// invalidate), or the first violation seen since the last call.
    fn settle(&self) -> Option<Violation>;
}

/// The counter the interpreter is timed with while offloading: the cycle
/// counter minus the engine's emulation, plus a real driver's modelled
/// cost, so per-op and total figures are what the run would take beside a
/// real engine and its driver.
pub(crate) struct NetClock<'a, C> {
    pub(crate) counter: &'a C,
    pub(crate) engine: Option<&'a dyn OffloadEngine>,
}

impl<C: Clock> Clock for NetClock<'_, C> {
    fn now(&self) -> u64 {
        // Without an engine this is the counter alone: every profiled run
        // reads it twice per op, inside the op's own figure.
        let Some(engine) = self.engine else {
            return self.counter.now();
        };
        let (removed, kept) = engine.adjustment();
        self.counter
            .now()
            .saturating_sub(removed)
            .saturating_add(kept)
    }
}

/// `BuiltinOperator` 32 in the TFLite schema: a custom op.
const CUSTOM_CODE: u8 = 32;

/// The ops of a `SetOffload` list: builtin codes, `CUSTOM` for the custom
/// ops the engine registers.
pub(crate) fn op_set(codes: &[u8]) -> OpSet {
    let mut set = OpSet::EMPTY;
    for &code in codes {
        if code == CUSTOM_CODE {
            set.insert_custom();
        } else {
            set.insert_builtin(i32::from(code));
        }
    }
    set
}

/// The host's choice, as the agent keeps it between invokes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OffloadChoice {
    pub(crate) mode: OffloadMode,
    pub(crate) fault: AccelFault,
    pub(crate) latency: LatencyModel,
    pub(crate) driver: DriverModel,
    /// Core cycles per count of the counter, times 1000.
    pub(crate) cycles_per_count_milli: u32,
    pub(crate) ops: OpSet,
}

impl OffloadChoice {
    pub(crate) const OFF: OffloadChoice = OffloadChoice {
        mode: OffloadMode::Off,
        fault: AccelFault::None,
        latency: LatencyModel {
            job_cycles: 0,
            cycles_per_1000_macs: 0,
        },
        driver: DriverModel::FREE,
        cycles_per_count_milli: 1000,
        ops: OpSet::EMPTY,
    };

    /// Core cycles per engine tick.
    pub(crate) fn cycles_per_tick(&self) -> u32 {
        (u64::from(TICK_COUNTS) * u64::from(self.cycles_per_count_milli) / 1000)
            .clamp(1, u64::from(u32::MAX)) as u32
    }

    /// Engine cycles as counts of the counter (what the wire carries).
    pub(crate) fn counts(&self, cycles: u64) -> u64 {
        cycles.saturating_mul(1000) / u64::from(self.cycles_per_count_milli.max(1))
    }

    /// The engine's part of an injected fault.
    pub(crate) fn engine_fault(&self) -> EngineFault {
        match self.fault {
            AccelFault::NeverCompletes => EngineFault::NeverCompletes,
            AccelFault::EngineError => EngineFault::Error(0xE1),
            AccelFault::OverRead => EngineFault::OverRead,
            _ => EngineFault::None,
        }
    }

    /// The interpreter's part of an injected fault.
    #[cfg(feature = "fault-injection")]
    pub(crate) fn runtime_fault(&self) -> Option<hilt_runtime::accel::OffloadFault> {
        use hilt_runtime::accel::OffloadFault as F;
        match self.fault {
            AccelFault::SkipWait => Some(F::SkipWait),
            AccelFault::Misaligned => Some(F::Misaligned),
            AccelFault::WriteReadOnly => Some(F::WriteReadOnly),
            AccelFault::MissingClean => Some(F::MissingClean),
            AccelFault::MissingInvalidate => Some(F::MissingInvalidate),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hilt_runtime::model::OpCode;
    use hilt_runtime::schema::BuiltinOperator;

    #[test]
    fn a_set_offload_list_becomes_an_op_set() {
        let set = op_set(&[3, 4, 32]);
        assert!(set.contains(OpCode::Builtin(BuiltinOperator::CONV_2D)));
        assert!(set.contains(OpCode::Builtin(BuiltinOperator::DEPTHWISE_CONV_2D)));
        assert!(!set.contains(OpCode::Builtin(BuiltinOperator::ADD)));
        assert!(set.contains(OpCode::Custom("HILT_VNPU_NEGATE")));
        assert!(op_set(&[]).is_empty());
    }
}
