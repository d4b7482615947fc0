//! The product's NPU (feature `npu-driver`): the template driver of
//! `target/examples/npu-driver` over its virtual device, handed to the
//! agent instead of hilt's `TickVnpu`.
//!
//! On a part with an NPU, `DEVICE` would be the register block at the
//! NPU's base address and `PendSV` below the NPU's interrupt vector; the
//! rest stays. Here the device is vnpu's engine: SysTick (the cycle
//! counter's wrap, every `TICK_COUNTS` counts while offloading) pends
//! PendSV while a job is in the device, and PendSV advances the engine by a
//! tick's cycles and, when the device raises its line, runs the driver's
//! interrupt handler — the NPU's interrupt, at the lowest priority.
//!
//! Unlike `TickVnpu`, this engine keeps no ledger: its emulation (the job's
//! kernel in PendSV) stays in the run's figures, as a real engine's driver
//! cost does. It is here to show the wiring, not to be measured.

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use cortex_m::peripheral::SCB;
use cortex_m::peripheral::scb::SystemHandler;
use hilt_agent::runtime::accel::vnpu::{VNPU_OPS, Violation, VnpuConfig, VnpuCore};
use hilt_agent::runtime::accel::{
    AccelError, Accelerator, CacheMaintenance, Capabilities, Deadline, EventWait, Job, JobId,
    MAX_JOB_REGIONS,
};
use hilt_agent::runtime::interpreter::Clock;
use hilt_agent::{EngineLedger, EngineSetup, OffloadEngine, SysTickCounter};
use hilt_npu_driver::{Driver, Platform, VirtualNpu, WaitMode};

/// The device (vnpu's engine behind the register block), given an engine
/// per run by `configure`.
static DEVICE: VirtualNpu<'static> = VirtualNpu::unpowered();

/// Engine cycles one SysTick grants the device.
static BUDGET: AtomicU32 = AtomicU32::new(0);

/// What the driver knows of the device from its documentation: vnpu's ops,
/// 16-byte aligned bases, 32-byte cache lines, every region of one job in
/// its table, and all of SRAM in reach.
const CAPABILITIES: Capabilities<'static> = Capabilities {
    ops: VNPU_OPS,
    align: 16,
    line_size: 32,
    max_regions: MAX_JOB_REGIONS as u32,
    windows: &[],
};

/// `WFE` until the interrupt handler's `SEV` or the deadline.
struct WfeEvent {
    set: AtomicBool,
}

impl EventWait for WfeEvent {
    fn wait_until(&self, deadline: u64) -> bool {
        loop {
            if self.set.swap(false, Ordering::Acquire) {
                return true;
            }
            if SysTickCounter::read() >= deadline {
                return false;
            }
            // Woken by the handler's SEV, or by any exception's return
            // (SysTick's next wrap): then the deadline is checked again.
            cortex_m::asm::wfe();
        }
    }

    fn notify(&self) {
        self.set.store(true, Ordering::Release);
        cortex_m::asm::sev();
    }
}

static EVENT: WfeEvent = WfeEvent {
    set: AtomicBool::new(false),
};

/// The driver's clock: the agent's cycle counter, in which its deadlines
/// come.
struct Cycles;

impl Clock for Cycles {
    fn now(&self) -> u64 {
        SysTickCounter::read()
    }
}

static CYCLES: Cycles = Cycles;

/// The driver. Its cache hooks are the device's: the data cache between
/// the CPU and the engine that vnpu models in its non-coherent mode (on a
/// Cortex-M7 they would be the SCB's clean and invalidate by address).
static DRIVER: Driver<'static, &'static VirtualNpu<'static>> = Driver::new(
    &DEVICE,
    CAPABILITIES,
    Platform {
        cache: &DEVICE,
        event: &EVENT,
        clock: &CYCLES,
    },
    WaitMode::Interrupt,
);

/// The engine the agent drives: the driver, and what the agent asks of a
/// firmware's engine besides.
pub struct Npu;

/// Hand it to the agent: `Agent::offload_engine(&npu::NPU)`.
pub static NPU: Npu = Npu;

/// Makes PendSV (the NPU's interrupt here) the lowest-priority exception,
/// below SysTick, whose wraps the cycle counter must not lose.
pub fn start() {
    // SAFETY: only exception priorities change, once, before offloading.
    unsafe {
        let mut p = cortex_m::Peripherals::steal();
        p.SCB.set_priority(SystemHandler::PendSV, 0xFF);
        p.SCB.set_priority(SystemHandler::SysTick, 0x00);
    }
}

/// Call from SysTick: a job in the device, or a flag no handler has taken,
/// gets a tick of the device's clock.
pub fn on_tick() {
    if DEVICE.needs_tick() {
        SCB::set_pendsv();
    }
}

/// Call from PendSV: the device's clock runs the job, and its interrupt
/// line, when high, runs the driver's handler.
pub fn on_pendsv() {
    if DEVICE.step(u64::from(BUDGET.load(Ordering::Relaxed))) {
        DRIVER.on_interrupt();
    }
}

impl Accelerator for Npu {
    fn capabilities(&self) -> Capabilities<'_> {
        DRIVER.capabilities()
    }
    fn now(&self) -> u64 {
        DRIVER.now()
    }
    fn submit(&self, job: &Job) -> Result<JobId, AccelError> {
        DRIVER.submit(job)
    }
    fn poll(&self, job: JobId) -> Result<bool, AccelError> {
        DRIVER.poll(job)
    }
    fn wait(&self, job: JobId, deadline: Deadline) -> Result<(), AccelError> {
        DRIVER.wait(job, deadline)
    }
    fn completed_at(&self, job: JobId) -> Option<u64> {
        DRIVER.completed_at(job)
    }
    fn abort(&self, job: JobId) {
        DRIVER.abort(job);
    }
}

/// The driver keeps the caches itself (every region cleaned before the
/// start, the written ones invalidated after the end), so the interpreter's
/// own maintenance is a no-op; the line size still gives the plan whole
/// lines per buffer.
impl CacheMaintenance for Npu {
    fn line_size(&self) -> u32 {
        CAPABILITIES.line_size
    }
    fn clean(&self, _address: usize, _len: usize) {}
    fn invalidate(&self, _address: usize, _len: usize) {}
}

impl OffloadEngine for Npu {
    fn name(&self) -> &'static str {
        "npu-driver"
    }

    unsafe fn configure(&self, setup: Option<EngineSetup>) {
        let core = setup.map(|setup| {
            BUDGET.store(setup.cycles_per_tick, Ordering::Relaxed);
            let config = VnpuConfig {
                ops: VNPU_OPS,
                latency: setup.latency,
                fault: setup.fault,
                ..VnpuConfig::default()
            };
            match setup.shadow {
                None => VnpuCore::new(config),
                // SAFETY: the caller of `configure` guarantees the shadow
                // until the next `configure`, which replaces this core.
                Some(m) => unsafe {
                    let shadow = core::slice::from_raw_parts_mut(m.shadow, m.len);
                    VnpuCore::non_coherent(config, shadow, m.start)
                },
            }
        });
        DEVICE.install(core);
    }

    /// Nothing taken out, nothing modelled: the figures are what the CPU
    /// spent, the emulated engine's kernels included.
    fn ledger(&self) -> EngineLedger {
        EngineLedger::default()
    }

    fn busy_cycles(&self) -> u64 {
        DEVICE.stats().busy_cycles
    }

    fn rebase(&self) {}

    fn settle(&self) -> Option<Violation> {
        DEVICE.take_violation()
    }
}
