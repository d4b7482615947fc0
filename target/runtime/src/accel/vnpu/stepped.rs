//! [`SteppedVnpu`]: the engine driven from the CPU's own `poll` and `wait`
//! calls, single-threaded, with a [`Stepper`] granting cycles per tick: how
//! host tests and a target without a timer interrupt run it.

use core::cell::{Cell, RefCell};

use super::super::{AccelError, Accelerator, CacheMaintenance, Capabilities, Deadline, Job, JobId};
use super::*;

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
    pub(super) core: RefCell<VnpuCore<'c>>,
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
