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

use core::cell::{Cell, RefCell};

use super::cache::line_span;
use super::{
    AccelError, Accelerator, Access, AddressWindow, CacheMaintenance, Capabilities, Deadline, Job,
    JobId, JobRegion, MAX_JOB_REGIONS, OpKind, OpSupport, RegionRole,
};
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

#[derive(Debug, Clone, Copy)]
struct Running {
    id: JobId,
    job: Job,
    remaining: u64,
    outcome: Option<Result<(), AccelError>>,
    sums: [u32; MAX_JOB_REGIONS],
}

#[derive(Debug)]
struct Shadow<'c> {
    start: usize,
    bytes: &'c mut [u8],
}

/// The engine itself: one job at a time, advanced by [`step`](Self::step).
#[derive(Debug)]
pub struct VnpuCore<'c> {
    config: VnpuConfig<'c>,
    shadow: Option<Shadow<'c>>,
    running: Option<Running>,
    /// Non-coherent mode: the last retired job, and a bit per region it
    /// wrote that the CPU has not invalidated yet.
    unseen: Option<(Running, u16)>,
    next_id: u32,
    violation: Option<Violation>,
    stats: VnpuStats,
}

impl<'c> VnpuCore<'c> {
    /// A coherent engine: it reads and writes memory directly.
    pub fn new(config: VnpuConfig<'c>) -> Self {
        VnpuCore {
            config,
            shadow: None,
            running: None,
            unseen: None,
            next_id: 1,
            violation: None,
            stats: VnpuStats::default(),
        }
    }

    /// A non-coherent engine whose view of memory `[start, start +
    /// shadow.len())` (the arena) is `shadow`: it sees only what was cleaned,
    /// and the CPU sees its writes only once invalidated.
    ///
    /// # Safety
    /// `[start, start + shadow.len())` must stay valid for reads and writes
    /// for as long as the engine exists: `clean` and `invalidate` copy
    /// between it and the shadow.
    pub unsafe fn non_coherent(config: VnpuConfig<'c>, shadow: &'c mut [u8], start: usize) -> Self {
        let mut core = Self::new(config);
        core.shadow = Some(Shadow {
            start,
            bytes: shadow,
        });
        core
    }

    /// Its capabilities.
    pub fn capabilities(&self) -> Capabilities<'c> {
        self.config.capabilities()
    }

    /// The first lease violation seen, if any.
    pub fn violation(&self) -> Option<Violation> {
        self.violation
    }

    /// Its figures.
    pub fn stats(&self) -> VnpuStats {
        self.stats
    }

    /// Takes the first lease violation seen (the next one is recorded anew).
    pub fn take_violation(&mut self) -> Option<Violation> {
        self.violation.take()
    }

    /// The job in the engine (running, or done and not retired).
    pub fn running_job(&self) -> Option<JobId> {
        self.running.map(|r| r.id)
    }

    /// The settings it runs with.
    pub fn config(&self) -> VnpuConfig<'c> {
        self.config
    }

    /// Whether a job is in the engine (running, or done and not retired).
    pub fn is_busy(&self) -> bool {
        self.running.is_some()
    }

    /// Checks `job` as a driver would, poisons its outputs and starts it.
    pub fn submit(&mut self, job: &Job) -> Result<JobId, AccelError> {
        if self.running.is_some() {
            return Err(AccelError::Busy);
        }
        self.settle();
        self.check(job)?;
        self.check_cleaned(job)?;
        let id = JobId(self.next_id);
        self.next_id = self.next_id.wrapping_add(1).max(1);
        for region in job.regions() {
            if matches!(region.role, RegionRole::Output(_)) {
                self.engine_bytes(region)?.fill(OUTPUT_PATTERN);
            }
        }
        let mut running = Running {
            id,
            job: *job,
            remaining: self.config.latency.cycles(job.macs),
            outcome: None,
            sums: [0; MAX_JOB_REGIONS],
        };
        self.take_sums(&mut running);
        self.running = Some(running);
        Ok(id)
    }

    fn check(&self, job: &Job) -> Result<(), AccelError> {
        let regions = job.regions();
        if regions.len() > self.config.max_regions as usize {
            return Err(AccelError::TooManyRegions {
                count: regions.len() as u8,
            });
        }
        for (i, r) in regions.iter().enumerate() {
            let (region, role) = (i as u8, r.role);
            if !r.address.is_multiple_of(self.config.align.max(1) as usize) {
                return Err(AccelError::Misaligned { region, role });
            }
            let windows = self.config.windows;
            let window = windows
                .iter()
                .find(|w| w.contains(r.address, r.len as usize));
            if !windows.is_empty() && window.is_none() {
                return Err(AccelError::OutsideWindow { region, role });
            }
            let engine_writes = matches!(role, RegionRole::Output(_) | RegionRole::Scratch(_));
            let writable = r.access == Access::ReadWrite && window.is_none_or(|w| w.writable);
            if engine_writes && !writable {
                return Err(AccelError::WriteToReadOnly { region, role });
            }
        }
        if let (Some(shadow), Some(work)) = (&self.shadow, job.work()) {
            let (start, len) = work.arena();
            if start != shadow.start || len > shadow.bytes.len() {
                return Err(AccelError::Engine { code: 1 });
            }
        }
        Ok(())
    }

    /// Non-coherent mode: every region the engine reads must hold in memory
    /// what the CPU last cleaned to it; a difference is a missing clean
    /// (the engine would compute on stale bytes).
    fn check_cleaned(&self, job: &Job) -> Result<(), AccelError> {
        let Some(shadow) = &self.shadow else {
            return Ok(());
        };
        for (i, r) in job.regions().iter().enumerate() {
            if matches!(r.role, RegionRole::Output(_) | RegionRole::Scratch(_)) {
                continue;
            }
            let at = r.address.wrapping_sub(shadow.start);
            let engine = shadow.bytes.get(at..at + r.len as usize);
            if engine != Some(cpu_bytes(r)) {
                return Err(AccelError::NotCleaned {
                    region: i as u8,
                    role: r.role,
                });
            }
        }
        Ok(())
    }

    /// Non-coherent mode: records a violation when the CPU moved on without
    /// invalidating every region the last retired job wrote. Called at the
    /// next submit and by the firmware after each invoke; returns it.
    pub fn settle(&mut self) -> Option<Violation> {
        let (job, missing) = self.unseen.take()?;
        if missing == 0 {
            return None;
        }
        let region = missing.trailing_zeros() as usize;
        let role = job.job.regions().get(region)?.role;
        let violation = Violation {
            job: job.id,
            op: job.job.op,
            error: AccelError::NotInvalidated {
                region: region as u8,
                role,
            },
        };
        self.stats.violations += 1;
        self.violation.get_or_insert(violation);
        Some(violation)
    }

    /// Advances the job by `budget` cycles; returns whether it completed in
    /// this step. Bounded work per call (leases are checked when the job
    /// computes and when it is retired, not at every step), so an
    /// interrupt handler can call it.
    pub fn step(&mut self, budget: u64) -> bool {
        let Some(mut running) = self.running else {
            return false;
        };
        if running.outcome.is_some() || self.config.fault == EngineFault::NeverCompletes {
            return false;
        }
        let used = budget.min(running.remaining);
        running.remaining -= used;
        self.stats.busy_cycles += used;
        if running.remaining == 0 {
            self.check_lease(&mut running);
        }
        if running.remaining == 0 && running.outcome.is_none() {
            running.outcome = Some(match self.config.fault {
                EngineFault::Error(code) => Err(AccelError::Engine { code }),
                _ => self.execute(&running.job),
            });
            // The engine's own writes are now part of what it holds.
            self.take_sums(&mut running);
            self.stats.jobs += 1;
        }
        let done = running.outcome.is_some();
        self.running = Some(running);
        done
    }

    fn execute(&mut self, job: &Job) -> Result<(), AccelError> {
        let Some(work) = job.work() else {
            return Err(AccelError::Unsupported);
        };
        let base = match &mut self.shadow {
            Some(shadow) => shadow.bytes.as_mut_ptr(),
            None => work.arena().0 as *mut u8,
        };
        // SAFETY: the job is live (not yet retired or aborted), `base` is the
        // arena or the shadow of the same length (checked at submit), and the
        // plan keeps everything else off the job's regions until its wait.
        unsafe { work.execute(base) }.map_err(AccelError::Kernel)
    }

    /// Whether job `id` has completed.
    pub fn poll(&self, id: JobId) -> Result<bool, AccelError> {
        match &self.running {
            Some(r) if r.id == id => Ok(r.outcome.is_some()),
            _ => Err(AccelError::UnknownJob),
        }
    }

    /// Retires a completed job: checks its lease a last time, lets go of its
    /// memory and returns its outcome.
    pub fn retire(&mut self, id: JobId) -> Result<(), AccelError> {
        let Some(mut running) = self.running.filter(|r| r.id == id) else {
            return Err(AccelError::UnknownJob);
        };
        let Some(_) = running.outcome else {
            return Err(AccelError::Timeout);
        };
        self.check_lease(&mut running);
        self.running = None;
        if self.shadow.is_some() {
            let written = running
                .job
                .regions()
                .iter()
                .enumerate()
                .filter(|(_, r)| r.access == Access::ReadWrite)
                .fold(0u16, |bits, (i, _)| bits | 1 << i);
            self.unseen = Some((running, written));
        }
        running.outcome.unwrap_or(Err(AccelError::Aborted))
    }

    /// Drops job `id` at once.
    pub fn abort(&mut self, id: JobId) {
        if self.running.is_some_and(|r| r.id == id) {
            self.running = None;
        }
    }

    fn check_lease(&mut self, running: &mut Running) {
        for (i, region) in running.job.regions().iter().enumerate() {
            if checksum(cpu_bytes(region)) != running.sums[i] {
                let error = AccelError::LeaseViolation {
                    region: i as u8,
                    role: region.role,
                };
                self.stats.violations += 1;
                self.violation.get_or_insert(Violation {
                    job: running.id,
                    op: running.job.op,
                    error,
                });
                running.outcome = Some(Err(error));
                // Re-arm, so one overwrite is reported once.
                running.sums[i] = checksum(cpu_bytes(region));
            }
        }
    }

    fn take_sums(&self, running: &mut Running) {
        for (i, region) in running.job.regions().iter().enumerate() {
            running.sums[i] = checksum(cpu_bytes(region));
        }
    }

    /// The bytes of `region` as the engine sees them.
    fn engine_bytes(&mut self, region: &JobRegion) -> Result<&mut [u8], AccelError> {
        match &mut self.shadow {
            Some(shadow) => {
                let at = region
                    .address
                    .checked_sub(shadow.start)
                    .ok_or(AccelError::Engine { code: 1 })?;
                shadow
                    .bytes
                    .get_mut(at..at + region.len as usize)
                    .ok_or(AccelError::Engine { code: 1 })
            }
            // SAFETY: a job's regions are valid memory while the job lives
            // (the contract of `Job::push`), and the engine holds them.
            None => Ok(unsafe {
                core::slice::from_raw_parts_mut(region.address as *mut u8, region.len as usize)
            }),
        }
    }

    /// Non-coherent mode: copies the lines covering the range from memory to
    /// the engine's view (the CPU wrote them back). A no-op when coherent.
    pub fn clean(&mut self, address: usize, len: usize) {
        self.copy_lines(address, len, true);
    }

    /// Non-coherent mode: copies the lines covering the range from the
    /// engine's view to memory (the CPU dropped its stale lines). Whole
    /// lines: a CPU-written neighbour on a shared line is overwritten, as on
    /// hardware. A no-op when coherent.
    pub fn invalidate(&mut self, address: usize, len: usize) {
        self.copy_lines(address, len, false);
        if let Some((job, missing)) = &mut self.unseen {
            for (i, r) in job.job.regions().iter().enumerate() {
                if address <= r.address && r.address + r.len as usize <= address + len {
                    *missing &= !(1 << i);
                }
            }
        }
    }

    fn copy_lines(&mut self, address: usize, len: usize, to_engine: bool) {
        let line = self.config.line_size.max(1) as usize;
        let Some(shadow) = &mut self.shadow else {
            return;
        };
        let (start, span) = line_span(address, len, line);
        // Only the part inside the shadowed window exists in both views.
        let lo = start.max(shadow.start);
        let hi = (start + span).min(shadow.start + shadow.bytes.len());
        if lo >= hi {
            return;
        }
        let engine = &mut shadow.bytes[lo - shadow.start..hi - shadow.start];
        // SAFETY: inside `[start, start + len)` of the shadowed window, valid
        // for reads and writes by the contract of `non_coherent`.
        let memory = unsafe { core::slice::from_raw_parts_mut(lo as *mut u8, hi - lo) };
        if to_engine {
            engine.copy_from_slice(memory);
        } else {
            memory.copy_from_slice(engine);
        }
    }
}

/// The bytes of `region` in memory (the CPU's view).
fn cpu_bytes(region: &JobRegion) -> &[u8] {
    // SAFETY: a job's regions are valid memory while the job lives (the
    // contract of `Job::push`); only read, to compare checksums.
    unsafe { core::slice::from_raw_parts(region.address as *const u8, region.len as usize) }
}

/// FNV-1a: cheap and good enough to notice a changed byte.
fn checksum(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// Cycles an engine is granted per tick of a [`SteppedVnpu`].
pub trait Stepper {
    /// Cycles for the next tick.
    fn budget(&mut self) -> u64;
}

/// Completes any job at its first tick.
#[derive(Debug, Clone, Copy, Default)]
pub struct Immediate;

impl Stepper for Immediate {
    fn budget(&mut self) -> u64 {
        u64::MAX
    }
}

/// Grants a fixed number of cycles per tick: a job of `c` cycles completes
/// after `c / n` ticks.
#[derive(Debug, Clone, Copy)]
pub struct Slices(pub u64);

impl Stepper for Slices {
    fn budget(&mut self) -> u64 {
        self.0
    }
}

/// Never grants a cycle: a hung engine.
#[derive(Debug, Clone, Copy, Default)]
pub struct Never;

impl Stepper for Never {
    fn budget(&mut self) -> u64 {
        0
    }
}

/// vnpu driven from the CPU's own calls, single-threaded: each `poll` and
/// each round of `wait` is one tick (one timer interrupt), in which the
/// stepper grants cycles. Its clock counts ticks.
#[derive(Debug)]
pub struct SteppedVnpu<'c, S> {
    config: VnpuConfig<'c>,
    core: RefCell<VnpuCore<'c>>,
    stepper: RefCell<S>,
    ticks: Cell<u64>,
}

impl<'c, S: Stepper> SteppedVnpu<'c, S> {
    /// A coherent engine.
    pub fn new(config: VnpuConfig<'c>, stepper: S) -> Self {
        Self::with_core(VnpuCore::new(config), stepper)
    }

    /// An engine around `core` (for the non-coherent mode).
    pub fn with_core(core: VnpuCore<'c>, stepper: S) -> Self {
        SteppedVnpu {
            config: core.config,
            core: RefCell::new(core),
            stepper: RefCell::new(stepper),
            ticks: Cell::new(0),
        }
    }

    /// Replaces the stepper (a hung engine that recovers, say).
    pub fn set_stepper(&self, stepper: S) {
        *self.stepper.borrow_mut() = stepper;
    }

    /// The first lease violation seen.
    pub fn violation(&self) -> Option<Violation> {
        self.core.borrow().violation()
    }

    /// Its figures.
    pub fn stats(&self) -> VnpuStats {
        self.core.borrow().stats()
    }

    /// See [`VnpuCore::settle`].
    pub fn settle(&self) -> Option<Violation> {
        self.core.borrow_mut().settle()
    }

    fn tick(&self) {
        let budget = self.stepper.borrow_mut().budget();
        self.core.borrow_mut().step(budget);
        self.ticks.set(self.ticks.get() + 1);
    }
}

impl<S: Stepper> Accelerator for SteppedVnpu<'_, S> {
    fn capabilities(&self) -> Capabilities<'_> {
        self.config.capabilities()
    }

    fn now(&self) -> u64 {
        self.ticks.get()
    }

    fn submit(&self, job: &Job) -> Result<JobId, AccelError> {
        self.core.borrow_mut().submit(job)
    }

    fn poll(&self, job: JobId) -> Result<bool, AccelError> {
        self.tick();
        self.core.borrow().poll(job)
    }

    fn wait(&self, job: JobId, deadline: Deadline) -> Result<(), AccelError> {
        loop {
            if self.core.borrow().poll(job)? {
                return self.core.borrow_mut().retire(job);
            }
            if self.ticks.get() >= deadline {
                return Err(AccelError::Timeout);
            }
            self.tick();
        }
    }

    fn abort(&self, job: JobId) {
        self.core.borrow_mut().abort(job);
    }
}

impl<S> CacheMaintenance for SteppedVnpu<'_, S> {
    fn line_size(&self) -> u32 {
        self.config.line_size
    }

    fn clean(&self, address: usize, len: usize) {
        self.core.borrow_mut().clean(address, len);
    }

    fn invalidate(&self, address: usize, len: usize) {
        self.core.borrow_mut().invalidate(address, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accel::{NEVER, Ticket};

    /// A 64-byte aligned buffer for hand-made jobs.
    #[repr(C, align(64))]
    struct Buf([u8; 256]);

    fn job(regions: &[JobRegion]) -> Job {
        let mut job = Job::new(7);
        for r in regions {
            // SAFETY: every test region lies in a `Buf` that outlives the job.
            assert!(unsafe { job.push(*r) });
        }
        job
    }

    /// Regions are addresses from one raw pointer to the buffer; the tests
    /// touch the buffer only through that pointer while jobs hold it.
    fn region(base: *mut u8, at: usize, len: u32, access: Access, role: RegionRole) -> JobRegion {
        JobRegion {
            address: base as usize + at,
            len,
            access,
            role,
        }
    }

    #[test]
    fn the_driver_checks_name_the_region_at_fault() {
        let mut buf = Buf([0; 256]);
        let base = buf.0.as_mut_ptr();
        let input = region(base, 0, 32, Access::Read, RegionRole::Input(1));
        let output = region(base, 64, 32, Access::ReadWrite, RegionRole::Output(2));
        let mut core = VnpuCore::new(VnpuConfig::default());
        let misaligned = region(base, 8, 16, Access::Read, RegionRole::Input(3));
        assert_eq!(
            core.submit(&job(&[input, misaligned])),
            Err(AccelError::Misaligned {
                region: 1,
                role: RegionRole::Input(3)
            })
        );
        let read_only_output = JobRegion {
            access: Access::Read,
            ..output
        };
        assert_eq!(
            core.submit(&job(&[input, read_only_output])),
            Err(AccelError::WriteToReadOnly {
                region: 1,
                role: RegionRole::Output(2)
            })
        );
        let windows = [
            AddressWindow {
                start: base as usize,
                len: 64,
                writable: false,
            },
            AddressWindow {
                start: base as usize + 64,
                len: 64,
                writable: true,
            },
        ];
        let mut windowed = VnpuCore::new(VnpuConfig {
            windows: &windows,
            ..VnpuConfig::default()
        });
        let far = region(base, 128, 32, Access::Read, RegionRole::Input(4));
        assert_eq!(
            windowed.submit(&job(&[input, output, far])),
            Err(AccelError::OutsideWindow {
                region: 2,
                role: RegionRole::Input(4)
            })
        );
        let output_in_rom = region(base, 32, 32, Access::ReadWrite, RegionRole::Output(2));
        assert_eq!(
            windowed.submit(&job(&[input, output_in_rom])),
            Err(AccelError::WriteToReadOnly {
                region: 1,
                role: RegionRole::Output(2)
            })
        );
        let mut two = VnpuCore::new(VnpuConfig {
            max_regions: 1,
            ..VnpuConfig::default()
        });
        assert_eq!(
            two.submit(&job(&[input, output])),
            Err(AccelError::TooManyRegions { count: 2 })
        );
        // A job with no kernel to run completes with `Unsupported`, and only
        // after its cycles: fixed cost 2000.
        let id = windowed.submit(&job(&[input, output])).unwrap();
        assert_eq!(windowed.submit(&job(&[input])), Err(AccelError::Busy));
        assert!(!windowed.step(1_999));
        assert_eq!(windowed.poll(id), Ok(false));
        assert!(windowed.step(1));
        assert_eq!(windowed.retire(id), Err(AccelError::Unsupported));
        assert!(!windowed.is_busy());
    }

    #[test]
    fn outputs_hold_the_pattern_from_the_start_and_leases_catch_writes() {
        let mut buf = Buf([0; 256]);
        let base = buf.0.as_mut_ptr();
        let input = region(base, 0, 32, Access::Read, RegionRole::Input(1));
        let output = region(base, 64, 32, Access::ReadWrite, RegionRole::Output(2));
        let mut core = VnpuCore::new(VnpuConfig::default());
        let id = core.submit(&job(&[input, output])).unwrap();
        // SAFETY: inside `buf`, through the pointer the job's regions use.
        let byte = |i: usize| unsafe { base.add(i).read_volatile() };
        assert!((64..96).all(|i| byte(i) == OUTPUT_PATTERN));
        core.step(10);
        assert_eq!(core.violation(), None);
        // Someone writes the input while the engine holds it: seen when
        // the job computes (leases are not checked at every step).
        // SAFETY: as above.
        unsafe { base.add(5).write_volatile(1) };
        core.step(10);
        assert_eq!(core.violation(), None);
        core.step(10_000);
        let v = core.violation().unwrap();
        assert_eq!((v.job, v.op), (id, 7));
        assert_eq!(
            v.error,
            AccelError::LeaseViolation {
                region: 0,
                role: RegionRole::Input(1)
            }
        );
        assert_eq!(core.retire(id), Err(v.error));
    }

    #[test]
    fn dropping_an_unwaited_ticket_aborts_the_job() {
        let mut buf = Buf([0; 256]);
        let base = buf.0.as_mut_ptr();
        let input = region(base, 0, 32, Access::Read, RegionRole::Input(1));
        let engine = SteppedVnpu::new(VnpuConfig::default(), Never);
        {
            let _ticket = Ticket::submit(&engine, &job(&[input])).unwrap();
            assert!(engine.core.borrow().is_busy());
        }
        assert!(!engine.core.borrow().is_busy());
        // Aborted explicitly, or waited past its deadline: freed as well.
        let ticket = Ticket::submit(&engine, &job(&[input])).unwrap();
        ticket.abort();
        assert!(!engine.core.borrow().is_busy());
        let ticket = Ticket::submit(&engine, &job(&[input])).unwrap();
        assert_eq!(ticket.wait(5), Err(AccelError::Timeout));
        assert!(!engine.core.borrow().is_busy());
    }

    #[test]
    fn steppers_complete_at_once_late_or_never() {
        let mut buf = Buf([0; 256]);
        let base = buf.0.as_mut_ptr();
        let input = region(base, 0, 32, Access::Read, RegionRole::Input(1));
        let at_once = SteppedVnpu::new(VnpuConfig::default(), Immediate);
        let ticket = Ticket::submit(&at_once, &job(&[input])).unwrap();
        assert_eq!(ticket.poll(), Ok(true));
        assert_eq!(ticket.wait(NEVER), Err(AccelError::Unsupported));
        // 2000 cycles at 500 per tick: done at the fourth tick.
        let late = SteppedVnpu::new(VnpuConfig::default(), Slices(500));
        let ticket = Ticket::submit(&late, &job(&[input])).unwrap();
        assert_eq!(ticket.poll(), Ok(false));
        assert_eq!(late.now(), 1);
        assert_eq!(ticket.wait(NEVER), Err(AccelError::Unsupported));
        assert_eq!(late.now(), 4);
        assert_eq!(late.stats().busy_cycles, 2000);
    }

    #[test]
    fn invalidate_copies_whole_lines_back() {
        let mut memory = Buf([1; 256]);
        let mut shadow = [0u8; 256];
        let start = memory.0.as_mut_ptr() as usize;
        {
            // SAFETY: `memory` outlives `core` and is what the shadow mirrors.
            let mut core =
                unsafe { VnpuCore::non_coherent(VnpuConfig::default(), &mut shadow, start) };
            // One byte invalidated: its whole 32-byte line comes back from the
            // engine's view, destroying the CPU's neighbours on that line.
            core.invalidate(start + 40, 1);
        }
        assert!(memory.0[32..64].iter().all(|&b| b == 0));
        assert!(
            memory.0[..32]
                .iter()
                .chain(&memory.0[64..])
                .all(|&b| b == 1)
        );
    }
}
