//! The engine itself, [`VnpuCore`]: one job at a time, checked at submit,
//! advanced by a budget of cycles, leased while it runs and, in
//! non-coherent mode, seeing memory only through its shadow copy.

use super::super::cache::line_span;
use super::super::{
    AccelError, Access, Capabilities, Job, JobId, JobRegion, MAX_JOB_REGIONS, RegionRole,
};
use super::*;

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
    pub(super) config: VnpuConfig<'c>,
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
            // All of the completion is the engine's work on the job (its
            // lease audit reads the job's regions), whatever op the CPU is
            // in when the tick that completes it comes.
            crate::marks::job_start();
            self.check_lease(&mut running);
            if running.outcome.is_none() {
                running.outcome = Some(match self.config.fault {
                    EngineFault::Error(code) => Err(AccelError::Engine { code }),
                    EngineFault::OverRead => {
                        let outcome = self.execute(&running.job);
                        read_past_first_input(&running.job, self.config.line_size as usize);
                        outcome
                    }
                    _ => self.execute(&running.job),
                });
                // The engine's own writes are now part of what it holds.
                self.take_sums(&mut running);
                self.stats.jobs += 1;
            }
            crate::marks::job_end();
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

    /// The cache lines a clean or invalidate of the range maintains: the
    /// whole lines covering it in non-coherent mode, none when coherent
    /// (no cache stands between the CPU and the engine).
    pub fn lines(&self, address: usize, len: usize) -> u64 {
        if self.shadow.is_none() || len == 0 {
            return 0;
        }
        let line = self.config.line_size.max(1) as usize;
        (line_span(address, len, line).1 / line) as u64
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

/// [`EngineFault::OverRead`]: one byte read just past the job's first
/// input region inside the arena (a region in flash is left alone), past
/// the whole cache lines the plan reserves for it and past any other
/// region of the job that follows: a byte no buffer of the job's op holds.
fn read_past_first_input(job: &Job, line: usize) {
    let Some(work) = job.work() else {
        return;
    };
    let (arena, len) = work.arena();
    let line = line.max(1);
    let reserved_end = |r: &JobRegion| (r.address + r.len as usize).next_multiple_of(line);
    let Some(mut at) = job
        .regions()
        .iter()
        .filter(|r| matches!(r.role, RegionRole::Input(_)))
        .map(reserved_end)
        .find(|&end| end >= arena && end < arena + len)
    else {
        return;
    };
    // Step over the job's own regions that start where the last one ended.
    while let Some(r) = job
        .regions()
        .iter()
        .find(|r| r.address <= at && at < reserved_end(r))
    {
        at = reserved_end(r);
    }
    if at < arena + len {
        // SAFETY: inside the arena the job was given; a read only.
        let byte = unsafe { core::ptr::read_volatile(at as *const u8) };
        core::hint::black_box(byte);
    }
}
