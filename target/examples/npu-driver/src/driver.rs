//! [`Driver`]: the runtime's [`Accelerator`] over a device's registers,
//! wired as an NPU driver is: submit starts the job and returns, the
//! device's interrupt completes it, and a wait sleeps until then.
//!
//! One job is in the device at a time. Its life, in [`Phase`]s:
//!
//! ```text
//! Idle ─submit─▶ Preparing ─kick─▶ Running ─IRQ DONE/ERROR─▶ Ended ─wait─▶ Idle
//!                                     └─abort─▶ Stopping ─IRQ STOPPED─┘
//! ```
//!
//! The phase lives in a critical section, because the submitting code and
//! the interrupt handler both change it; everything else the two share is
//! the device's registers, which the hardware serialises.

use core::cell::{Cell, UnsafeCell};

use critical_section::Mutex;
use hilt_runtime::accel::{
    AccelError, Accelerator, Access, CacheMaintenance, Capabilities, Deadline, EventWait, Job,
    JobId, RegionRole,
};
use hilt_runtime::interpreter::Clock;

use crate::regs::{Descriptor, NpuRegisters, irq};

/// How [`Accelerator::wait`] learns that the job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitMode {
    /// The device's interrupt calls [`Driver::on_interrupt`], which wakes
    /// the waiter through the [`EventWait`]; the waiter sleeps meanwhile
    /// (`WFE` on a Cortex-M).
    Interrupt,
    /// No interrupt is wired: `poll` and `wait` read the device's interrupt
    /// flags themselves (a bring-up aid, or a part whose NPU interrupt is
    /// taken by something else).
    Poll,
}

/// Where the job in the device is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No job.
    Idle,
    /// Claimed by a submit that is still writing the descriptor.
    Preparing,
    /// Started; its memory belongs to the device.
    Running,
    /// Asked to stop; its memory still belongs to the device.
    Stopping,
    /// The device let go of it; the outcome waits for `wait`.
    Ended(Result<(), AccelError>),
}

/// Counts since the driver was made, for tests and bring-up logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Jobs started on the device.
    pub started: u32,
    /// Jobs whose end the interrupt handler recorded.
    pub ended_by_interrupt: u32,
    /// Jobs whose end a polling `poll` or `wait` recorded.
    pub ended_by_poll: u32,
    /// Interrupts that found no flag, or no job to end.
    pub spurious_interrupts: u32,
    /// Stop requests sent to the device.
    pub stops: u32,
}

#[derive(Debug, Clone, Copy)]
struct State {
    phase: Phase,
    /// The job in the device (meaningful unless `Idle`).
    id: u32,
    next_id: u32,
    /// The last ended job and when, in the driver's clock.
    completed_at: Option<(u32, u64)>,
    stats: DriverStats,
}

/// Who noticed that the device raised a flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Interrupt,
    Poll,
}

/// What a driver needs of the platform: the core's cache maintenance by
/// address range, an event the interrupt handler wakes the waiter with, and
/// a clock deadlines are given in.
#[derive(Clone, Copy)]
pub struct Platform<'p> {
    /// Clean / invalidate by address (the SCB's by-address operations on a
    /// Cortex-M7 or M55; [`hilt_runtime::accel::Coherent`] where the NPU and
    /// the CPU share no cache).
    pub cache: &'p (dyn CacheMaintenance + Sync),
    /// Sleeps the waiter until the interrupt handler notifies it.
    pub event: &'p (dyn EventWait + Sync),
    /// The clock of `now` and of every deadline.
    pub clock: &'p (dyn Clock + Sync),
}

impl core::fmt::Debug for Platform<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Platform")
            .field("line_size", &self.cache.line_size())
            .finish_non_exhaustive()
    }
}

/// An NPU driver over the register block `R`.
///
/// Share it as a `static` (or a reference that outlives every job) between
/// the code that runs the interpreter and the NPU's interrupt handler,
/// which calls [`on_interrupt`](Self::on_interrupt).
///
/// The driver keeps the caches itself: it cleans every region of a job and
/// its own descriptor before starting it, and invalidates every region the
/// device may have written once the job has ended. The interpreter then
/// needs no maintenance of its own: give its `Offload` the no-op
/// [`hilt_runtime::accel::Coherent`].
pub struct Driver<'p, R> {
    regs: R,
    capabilities: Capabilities<'p>,
    platform: Platform<'p>,
    mode: WaitMode,
    state: Mutex<Cell<State>>,
    /// The driver's copy of the job in the device: the virtual device's
    /// command stream, and the list of regions to invalidate at its end.
    job: UnsafeCell<Job>,
    /// What the device reads at `DESC_ADDR`.
    descriptor: UnsafeCell<Descriptor>,
}

// SAFETY: `job` and `descriptor` are written only by the submit that moved
// the phase from `Idle` to `Preparing` inside the critical section, and read
// (by the device, by `wait`'s invalidation) only until the phase returns to
// `Idle`; the phase itself is behind the critical section. The registers
// are shared as the hardware's are, which `R: Sync` vouches for.
unsafe impl<R: Sync> Sync for Driver<'_, R> {}

impl<R> core::fmt::Debug for Driver<'_, R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Driver")
            .field("mode", &self.mode)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl<R> Driver<'_, R> {
    /// Counts since the driver was made.
    pub fn stats(&self) -> DriverStats {
        self.with_state(|s| s.stats)
    }

    fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        critical_section::with(|cs| {
            let cell = self.state.borrow(cs);
            let mut state = cell.get();
            let out = f(&mut state);
            cell.set(state);
            out
        })
    }
}

impl<'p, R: NpuRegisters> Driver<'p, R> {
    /// A driver for the device behind `regs`, which can do what
    /// `capabilities` says (from the device's documentation).
    pub const fn new(
        regs: R,
        capabilities: Capabilities<'p>,
        platform: Platform<'p>,
        mode: WaitMode,
    ) -> Self {
        Driver {
            regs,
            capabilities,
            platform,
            mode,
            state: Mutex::new(Cell::new(State {
                phase: Phase::Idle,
                id: 0,
                next_id: 1,
                completed_at: None,
                stats: DriverStats {
                    started: 0,
                    ended_by_interrupt: 0,
                    ended_by_poll: 0,
                    spurious_interrupts: 0,
                    stops: 0,
                },
            })),
            job: UnsafeCell::new(Job::new(0)),
            descriptor: UnsafeCell::new(Descriptor::EMPTY),
        }
    }

    /// The register block (for a firmware's own diagnostics).
    pub fn registers(&self) -> &R {
        &self.regs
    }

    /// The NPU's interrupt handler: call it from the vector the device's
    /// interrupt line is wired to. It reads and clears the device's flags,
    /// records how the job ended and wakes the waiter. It never blocks.
    pub fn on_interrupt(&self) {
        self.service(Source::Interrupt);
    }

    /// Reads the device's flags and ends the job they speak of.
    fn service(&self, source: Source) {
        let flags = self.regs.irq_status() & irq::ALL;
        if flags == 0 {
            if source == Source::Interrupt {
                self.with_state(|s| s.stats.spurious_interrupts += 1);
            }
            return;
        }
        // ERROR_CODE is meaningful only while its flag is pending.
        let outcome = if flags & irq::ERROR != 0 {
            Err(self.regs.decode_error(self.regs.error_code()))
        } else if flags & irq::STOPPED != 0 {
            Err(AccelError::Aborted)
        } else {
            Ok(())
        };
        self.regs.clear_irq(flags);
        let now = self.platform.clock.now();
        let ended = self.with_state(|s| {
            if !matches!(s.phase, Phase::Running | Phase::Stopping) {
                s.stats.spurious_interrupts += 1;
                return false;
            }
            s.phase = Phase::Ended(outcome);
            s.completed_at = Some((s.id, now));
            match source {
                Source::Interrupt => s.stats.ended_by_interrupt += 1,
                Source::Poll => s.stats.ended_by_poll += 1,
            }
            true
        });
        if ended {
            self.platform.event.notify();
        }
    }

    /// The checks the device's documentation asks of every job, made before
    /// the device sees it, so an error names the region.
    fn validate(&self, job: &Job) -> Result<(), AccelError> {
        let caps = &self.capabilities;
        let regions = job.regions();
        if regions.len() > caps.max_regions as usize {
            return Err(AccelError::TooManyRegions {
                count: regions.len() as u8,
            });
        }
        for (i, r) in regions.iter().enumerate() {
            let (region, role) = (i as u8, r.role);
            if !r.address.is_multiple_of(caps.align.max(1) as usize) {
                return Err(AccelError::Misaligned { region, role });
            }
            let window = caps
                .windows
                .iter()
                .find(|w| w.contains(r.address, r.len as usize));
            if !caps.windows.is_empty() && window.is_none() {
                return Err(AccelError::OutsideWindow { region, role });
            }
            let written = matches!(role, RegionRole::Output(_) | RegionRole::Scratch(_));
            let writable = r.access == Access::ReadWrite && window.is_none_or(|w| w.writable);
            if written && !writable {
                return Err(AccelError::WriteToReadOnly { region, role });
            }
        }
        Ok(())
    }

    /// Cleans what the device reads: every region (inputs so that it sees
    /// the CPU's bytes; outputs and scratch so that no dirty line is
    /// evicted over what it writes) and the descriptor.
    fn clean_for_device(&self, job: &Job) {
        let cache = self.platform.cache;
        for r in job.regions() {
            cache.clean(r.address, r.len as usize);
        }
        cache.clean(
            self.descriptor.get() as usize,
            core::mem::size_of::<Descriptor>(),
        );
    }

    /// Invalidates what the device may have written, so the CPU's next
    /// reads fetch it rather than stale lines.
    fn invalidate_written(&self) {
        // SAFETY: called only while the phase is `Ended`, so no submit
        // writes the job copy (see the `Sync` impl).
        let job = unsafe { &*self.job.get() };
        for r in job
            .regions()
            .iter()
            .filter(|r| r.access == Access::ReadWrite)
        {
            self.platform.cache.invalidate(r.address, r.len as usize);
        }
    }

    /// The outcome of job `id` if it ended, `None` while it runs.
    fn outcome(&self, id: JobId) -> Result<Option<Result<(), AccelError>>, AccelError> {
        self.with_state(|s| match s.phase {
            Phase::Idle | Phase::Preparing => Err(AccelError::UnknownJob),
            _ if s.id != id.0 => Err(AccelError::UnknownJob),
            Phase::Ended(outcome) => Ok(Some(outcome)),
            Phase::Running | Phase::Stopping => Ok(None),
        })
    }
}

impl<R: NpuRegisters> Accelerator for Driver<'_, R> {
    fn capabilities(&self) -> Capabilities<'_> {
        self.capabilities
    }

    fn now(&self) -> u64 {
        self.platform.clock.now()
    }

    /// Validates the job, writes its descriptor, cleans the caches and
    /// starts the device; returns without waiting for it.
    fn submit(&self, job: &Job) -> Result<JobId, AccelError> {
        self.validate(job)?;
        let id = self.with_state(|s| {
            if s.phase != Phase::Idle {
                return Err(AccelError::Busy);
            }
            s.phase = Phase::Preparing;
            s.id = s.next_id;
            s.next_id = s.next_id.wrapping_add(1).max(1);
            Ok(s.id)
        })?;
        // SAFETY: the phase moved to `Preparing` above, which makes this
        // submit the only writer of the job copy and the descriptor.
        let copy = unsafe {
            *self.job.get() = *job;
            &*self.job.get()
        };
        let descriptor = Descriptor::for_job(copy, self.regs.command_stream(copy));
        // SAFETY: as above; the device reads it only after `start`.
        unsafe { *self.descriptor.get() = descriptor };
        self.clean_for_device(copy);
        // A flag of an earlier job must not end this one.
        self.regs.clear_irq(irq::ALL);
        self.with_state(|s| {
            s.phase = Phase::Running;
            s.stats.started += 1;
        });
        self.regs.set_descriptor(self.descriptor.get() as usize);
        self.regs.start();
        Ok(JobId(id))
    }

    fn poll(&self, job: JobId) -> Result<bool, AccelError> {
        if self.mode == WaitMode::Poll {
            self.service(Source::Poll);
        }
        Ok(self.outcome(job)?.is_some())
    }

    /// Sleeps (or polls) until the job ended or `deadline` passed. An ended
    /// job is invalidated, forgotten and its outcome returned; a late one
    /// stays in the device (`Timeout`), for the caller to abort.
    fn wait(&self, job: JobId, deadline: Deadline) -> Result<(), AccelError> {
        loop {
            if self.mode == WaitMode::Poll {
                self.service(Source::Poll);
            }
            if let Some(outcome) = self.outcome(job)? {
                self.invalidate_written();
                self.with_state(|s| s.phase = Phase::Idle);
                return outcome;
            }
            if self.platform.clock.now() >= deadline {
                return Err(AccelError::Timeout);
            }
            match self.mode {
                // Returns on the handler's notify or at the deadline; a
                // notify that came since the check above is not lost (the
                // event is a flag).
                WaitMode::Interrupt => {
                    self.platform.event.wait_until(deadline);
                }
                WaitMode::Poll => core::hint::spin_loop(),
            }
        }
    }

    fn completed_at(&self, job: JobId) -> Option<u64> {
        self.with_state(|s| s.completed_at)
            .filter(|&(id, _)| id == job.0)
            .map(|(_, at)| at)
    }

    /// Sends the device a stop request; the wait that follows returns once
    /// the device raised `STOPPED` (or ended the job first).
    fn abort(&self, job: JobId) {
        let stop = self.with_state(|s| {
            let running = s.id == job.0 && s.phase == Phase::Running;
            if running {
                s.phase = Phase::Stopping;
                s.stats.stops += 1;
            }
            running
        });
        if stop {
            self.regs.stop();
        }
    }
}
