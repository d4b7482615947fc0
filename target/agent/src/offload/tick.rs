//! `TickVnpu`: hilt's virtual NPU on a Cortex-M core, asynchronous for real.
//!
//! Three contexts share it, without masking interrupts for engine work
//! (masking would lose SysTick wraps, which the QEMU cycle counter counts):
//! - **SysTick** (highest priority) only pends PendSV while a job is in
//!   the engine. Nothing else.
//! - **PendSV** (lowest priority) is the engine: once the job is due (its
//!   submit time plus its latency, in the counter's counts net of
//!   emulation) it runs the job's kernel there, marks it complete at its
//!   due time and signals the event (`SEV`). Its own time is the
//!   emulation the agent takes out of every figure. A poll that finds the
//!   job due pends PendSV at once, so completion does not wait for a tick;
//!   a wait that slept past the due time (until the next tick, on a core
//!   where `WFE` sleeps) counts the excess as emulation too: a real engine
//!   would have raised its interrupt on time.
//! - **The main program** (the interpreter) submits, polls, waits (`WFE`
//!   until the event or the deadline), cleans and invalidates. It takes a
//!   flag while it touches the engine; a PendSV arriving then does not
//!   touch the core but is re-pended when the flag drops. PendSV never
//!   preempts itself and the main program never runs while PendSV does,
//!   so each side has the core alone while it uses it.
//!
//! Its [`EngineLedger`] says, by category, what the figures leave out (the
//! engine's kernel and checks, the shadow copies, oversleep) and what they
//! put in: a real driver's CPU cost, which the emulation does not pay,
//! modelled per submit and per cache line maintained ([`DriverModel`]).

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering, compiler_fence};

use cortex_m::peripheral::SCB;
use cortex_m::peripheral::scb::SystemHandler;
use hilt_runtime::accel::vnpu::{DriverModel, VNPU_OPS, Violation, VnpuConfig, VnpuCore};
use hilt_runtime::accel::{
    AccelError, Accelerator, AddressWindow, CacheMaintenance, Capabilities, Deadline, Job, JobId,
};

use super::{EngineLedger, EngineSetup, OffloadEngine, TICK_COUNTS};

struct State {
    core: Option<VnpuCore<'static>>,
    /// The window the core's configuration names (kept here: the core
    /// borrows it for as long as it exists).
    window: [AddressWindow; 1],
    /// Counts taken out of the figures (the engine emulated: PendSV, the
    /// engine's side of submit, retire, clean and invalidate, oversleep)
    /// and put in (the modelled driver), by category.
    ledger: EngineLedger,
    /// The modelled driver, in core cycles.
    driver: DriverModel,
    /// Core cycles the modelled driver has cost so far: per submit, per
    /// cache line. Kept in cycles, and the ledger's counts recomputed from
    /// them, so that a line's few cycles are not rounded away one call at a
    /// time.
    driver_cycles: (u64, u64),
    /// The last job that completed, and when (net of emulation).
    completed: Option<(JobId, u64)>,
    /// The job in the engine and when it is due (net of emulation).
    due: Option<(JobId, u64)>,
    /// Engine cycles per `TICK_COUNTS` counts: cycles to counts.
    cycles_per_tick: u32,
    clock: fn() -> u64,
}

impl State {
    /// The counter's reading `raw` net of the ledger: emulation out, the
    /// modelled driver in.
    fn net(&self, raw: u64) -> u64 {
        raw.saturating_sub(self.ledger.removed())
            .saturating_add(self.ledger.kept())
    }

    /// Adds `cycles` of the modelled driver (per submit or per line) and
    /// updates the ledger's counts.
    fn charge_driver(&mut self, submit: u64, lines: u64) {
        self.driver_cycles.0 += submit;
        self.driver_cycles.1 += lines;
        self.ledger.driver_submit = self.counts(self.driver_cycles.0);
        self.ledger.driver_cache = self.counts(self.driver_cycles.1);
    }

    /// Core cycles as counts of the counter.
    fn counts(&self, cycles: u64) -> u64 {
        cycles.saturating_mul(u64::from(TICK_COUNTS)) / u64::from(self.cycles_per_tick.max(1))
    }
}

/// The virtual NPU of `hilt_runtime::accel::vnpu`, stepped by SysTick and
/// computing in PendSV. Put it in a `static` and forward both exceptions:
///
/// ```ignore
/// static VNPU: TickVnpu = TickVnpu::new();
/// #[exception] fn SysTick() { VNPU.on_tick(); }
/// #[exception] fn PendSV() { unsafe { VNPU.on_pendsv() } }
/// ```
pub struct TickVnpu {
    state: UnsafeCell<State>,
    /// The main program is using `state`.
    locked: AtomicBool,
    /// A PendSV found `state` in use and must run again.
    deferred: AtomicBool,
    /// A job is in the engine and not complete: SysTick pends PendSV.
    running: AtomicBool,
}

// SAFETY: `state` is touched by the main program only under `locked`, and by
// PendSV only when `locked` is clear (see the module documentation); the
// rest are atomics.
unsafe impl Sync for TickVnpu {}

impl core::fmt::Debug for TickVnpu {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TickVnpu").finish_non_exhaustive()
    }
}

fn no_clock() -> u64 {
    0
}

impl Default for TickVnpu {
    fn default() -> Self {
        Self::new()
    }
}

impl TickVnpu {
    /// An engine with no clock yet, stopped.
    pub const fn new() -> Self {
        TickVnpu {
            state: UnsafeCell::new(State {
                core: None,
                window: [AddressWindow {
                    start: 0,
                    len: 0,
                    writable: true,
                }],
                ledger: EngineLedger {
                    engine: 0,
                    shadow: 0,
                    oversleep: 0,
                    driver_submit: 0,
                    driver_cache: 0,
                },
                driver: DriverModel::FREE,
                driver_cycles: (0, 0),
                completed: None,
                due: None,
                cycles_per_tick: 1,
                clock: no_clock,
            }),
            locked: AtomicBool::new(false),
            deferred: AtomicBool::new(false),
            running: AtomicBool::new(false),
        }
    }

    /// Gives the engine its clock (the firmware's cycle counter, readable
    /// from an interrupt) and makes PendSV the lowest-priority exception,
    /// so SysTick preempts the engine's kernels.
    pub fn start(&self, clock: fn() -> u64) {
        self.with(|s| s.clock = clock);
        // SAFETY: only exception priorities change; the firmware calls this
        // once at start-up, before offloading.
        unsafe {
            let mut p = cortex_m::Peripherals::steal();
            p.SCB.set_priority(SystemHandler::PendSV, 0xFF);
            p.SCB.set_priority(SystemHandler::SysTick, 0x00);
        }
    }

    /// Call from the SysTick exception: lets the engine look at the
    /// running job.
    pub fn on_tick(&self) {
        if self.running.load(Ordering::Acquire) {
            SCB::set_pendsv();
        }
    }

    /// Call from the PendSV exception: runs the job's kernel once it is due.
    ///
    /// # Safety
    /// Only from the PendSV handler (the lowest-priority exception).
    pub unsafe fn on_pendsv(&self) {
        if self.locked.load(Ordering::Acquire) {
            self.deferred.store(true, Ordering::Release);
            return;
        }
        // SAFETY: the main program does not hold the state (checked above)
        // and cannot run until this handler returns; SysTick does not
        // touch it.
        let state = unsafe { &mut *self.state.get() };
        let entered = (state.clock)();
        let now = state.net(entered);
        if let (Some(core), Some((id, due))) = (state.core.as_mut(), state.due)
            && now >= due
            && core.step(u64::MAX)
        {
            state.completed = Some((id, due));
            state.due = None;
            self.running.store(false, Ordering::Release);
            cortex_m::asm::sev();
        }
        state.ledger.engine += (state.clock)().saturating_sub(entered);
    }

    /// Whether the running job's due time has passed.
    fn is_due(&self) -> bool {
        self.with(|s| {
            let now = s.net((s.clock)());
            s.due.is_some_and(|(_, due)| now >= due)
        })
    }

    /// Runs `f` with the state, holding off the engine's PendSV.
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        self.locked.store(true, Ordering::Release);
        compiler_fence(Ordering::SeqCst);
        // SAFETY: `locked` keeps PendSV off the state; only the main
        // program calls this (never from an interrupt), so no one else
        // holds it.
        let result = f(unsafe { &mut *self.state.get() });
        compiler_fence(Ordering::SeqCst);
        self.locked.store(false, Ordering::Release);
        // Only a PendSV that found `locked` set sets `deferred`, and none
        // can have run since it was cleared above without seeing it clear:
        // a load and a store are enough (ARMv6-M has no swap).
        if self.deferred.load(Ordering::Acquire) {
            self.deferred.store(false, Ordering::Release);
            SCB::set_pendsv();
        }
        result
    }

    /// A wait that went on past the job's due time (a `WFE` that slept to
    /// the next tick) had the CPU idle where a real engine's interrupt
    /// would have woken it: the excess counts as emulation.
    fn forgive_oversleep(&self, job: JobId, started: u64) {
        self.with(|s| {
            let Some((_, due)) = s.completed.filter(|(id, _)| *id == job) else {
                return;
            };
            let now = s.net((s.clock)());
            s.ledger.oversleep += now.saturating_sub(due.max(started));
        });
    }

    /// `with`, counting the time `f` takes as emulation: the engine's own
    /// work, or (`shadow`) its shadow copies.
    fn emulating<R>(&self, shadow: bool, f: impl FnOnce(&mut VnpuCore<'static>) -> R) -> Option<R> {
        self.with(|s| {
            let entered = (s.clock)();
            let result = s.core.as_mut().map(f);
            let took = (s.clock)().saturating_sub(entered);
            if shadow {
                s.ledger.shadow += took;
            } else {
                s.ledger.engine += took;
            }
            result
        })
    }

    /// A clean or invalidate of the range: the shadow copy (emulation) and
    /// the modelled driver's cost of its lines.
    fn maintain(&self, address: usize, len: usize, clean: bool) {
        // The bookkeeping is the emulation's (a real driver keeps none).
        self.with(|s| {
            let entered = (s.clock)();
            let lines = s.core.as_ref().map_or(0, |c| c.lines(address, len));
            s.charge_driver(0, lines.saturating_mul(s.driver.cycles_per_line));
            s.ledger.shadow += (s.clock)().saturating_sub(entered);
        });
        self.emulating(true, |core| {
            if clean {
                core.clean(address, len);
            } else {
                core.invalidate(address, len);
            }
        });
    }
}

impl Accelerator for TickVnpu {
    fn capabilities(&self) -> Capabilities<'_> {
        self.with(|s| s.core.as_ref().map(|c| c.capabilities()))
            .unwrap_or(Capabilities {
                ops: &[],
                align: 1,
                line_size: 1,
                max_regions: 0,
                windows: &[],
            })
    }

    fn now(&self) -> u64 {
        self.with(|s| s.net((s.clock)()))
    }

    fn submit(&self, job: &Job) -> Result<JobId, AccelError> {
        // The driver's set-up comes first; the job is due from the moment
        // it is submitted (before the engine's own checks, which are
        // emulation).
        self.with(|s| {
            let entered = (s.clock)();
            s.charge_driver(s.driver.submit_cycles, 0);
            s.ledger.engine += (s.clock)().saturating_sub(entered);
        });
        let submitted = self.now();
        let id = self
            .emulating(false, |core| core.submit(job))
            .unwrap_or(Err(AccelError::Unsupported))?;
        self.with(|s| {
            let cycles = s
                .core
                .as_ref()
                .map_or(0, |c| c.config().latency.cycles(job.macs));
            s.due = Some((id, submitted + s.counts(cycles)));
        });
        self.running.store(true, Ordering::Release);
        Ok(id)
    }

    fn poll(&self, job: JobId) -> Result<bool, AccelError> {
        let poll = || {
            self.with(|s| s.core.as_ref().map(|c| c.poll(job)))
                .unwrap_or(Err(AccelError::UnknownJob))
        };
        if !poll()? && self.is_due() {
            // The engine would have raised its interrupt by now: PendSV is
            // taken as soon as it is pended (the main program has the
            // lowest priority), and completes the job.
            SCB::set_pendsv();
            cortex_m::asm::isb();
        }
        poll()
    }

    fn wait(&self, job: JobId, deadline: Deadline) -> Result<(), AccelError> {
        let started = self.now();
        loop {
            if self.poll(job)? {
                let result = self
                    .emulating(false, |core| core.retire(job))
                    .unwrap_or(Err(AccelError::UnknownJob));
                self.forgive_oversleep(job, started);
                return result;
            }
            if self.now() >= deadline {
                return Err(AccelError::Timeout);
            }
            // Woken by the engine's SEV, or by any interrupt (SysTick's
            // next tick): then the deadline is checked again.
            cortex_m::asm::wfe();
        }
    }

    fn completed_at(&self, job: JobId) -> Option<u64> {
        // The due time: when a real engine's interrupt would have come.
        self.with(|s| s.completed.filter(|(id, _)| *id == job).map(|(_, t)| t))
    }

    fn abort(&self, job: JobId) {
        self.emulating(false, |core| core.abort(job));
        self.with(|s| s.due = None);
        self.running.store(false, Ordering::Release);
    }
}

impl CacheMaintenance for TickVnpu {
    fn line_size(&self) -> u32 {
        self.with(|s| s.core.as_ref().map_or(1, |c| c.config().line_size))
    }

    fn clean(&self, address: usize, len: usize) {
        self.maintain(address, len, true);
    }

    fn invalidate(&self, address: usize, len: usize) {
        self.maintain(address, len, false);
    }
}

impl OffloadEngine for TickVnpu {
    fn name(&self) -> &'static str {
        "vnpu"
    }

    unsafe fn configure(&self, setup: Option<EngineSetup>) {
        self.running.store(false, Ordering::Release);
        self.with(|s| {
            // The old core borrows the window: it goes first.
            s.core = None;
            s.completed = None;
            let Some(setup) = setup else {
                return;
            };
            s.cycles_per_tick = setup.cycles_per_tick;
            s.driver = setup.driver;
            s.window = [setup.window];
            // SAFETY: `s.window` lives in this engine, which the firmware
            // keeps in a `static`; it is only rewritten here, after the core
            // that borrowed it was dropped.
            let windows: &'static [AddressWindow] = unsafe { &*(&raw const s.window) };
            let config = VnpuConfig {
                ops: VNPU_OPS,
                windows,
                latency: setup.latency,
                fault: setup.fault,
                ..VnpuConfig::default()
            };
            s.core = Some(match setup.shadow {
                None => VnpuCore::new(config),
                // SAFETY: the caller of `configure` guarantees the shadow.
                Some(m) => unsafe {
                    let shadow = core::slice::from_raw_parts_mut(m.shadow, m.len);
                    VnpuCore::non_coherent(config, shadow, m.start)
                },
            });
        });
    }

    fn rebase(&self) {
        self.with(|s| {
            s.ledger = EngineLedger::default();
            s.driver_cycles = (0, 0);
            s.completed = None;
        });
    }

    fn ledger(&self) -> EngineLedger {
        self.with(|s| s.ledger)
    }

    fn adjustment(&self) -> (u64, u64) {
        self.with(|s| (s.ledger.removed(), s.ledger.kept()))
    }

    fn busy_cycles(&self) -> u64 {
        self.with(|s| s.core.as_ref().map_or(0, |c| c.stats().busy_cycles))
    }

    fn settle(&self) -> Option<Violation> {
        self.with(|s| {
            let core = s.core.as_mut()?;
            let owed = core.settle();
            core.take_violation().or(owed)
        })
    }
}
