//! [`VirtualNpu`]: a device behind [`NpuRegisters`] whose engine is vnpu's
//! [`VnpuCore`], so the driver runs for real where there is no NPU: in
//! host tests and on QEMU boards.
//!
//! Kicked, it reads the descriptor from memory as a DMA engine would,
//! checks it and hands the job to the core; the job then advances only
//! when a timer calls [`step`](VirtualNpu::step) (SysTick on a board, a
//! thread on the host), and when it ends the device raises its flags and
//! [`step`](VirtualNpu::step) reports the interrupt line high: the caller
//! then runs the driver's interrupt handler. Its command stream is the
//! runtime's `Job` itself (it runs hilt's kernel for the op), where an NPU
//! runs the stream the op's prepare compiled.
//!
//! It also stands in for the data cache between CPU and device
//! ([`CacheMaintenance`]): in vnpu's non-coherent mode the engine sees only
//! what was cleaned and the CPU only what was invalidated, so a driver that
//! forgets either computes wrong outputs, and vnpu names the region.
//!
//! The core is behind a critical section, a job's kernel included: the
//! virtual device computes on the CPU it stands beside. A real device's
//! registers need no lock.

use core::cell::RefCell;

use critical_section::Mutex;
use hilt_runtime::accel::vnpu::{Violation, VnpuCore, VnpuStats};
use hilt_runtime::accel::{AccelError, Access, CacheMaintenance, Job, JobId};
use hilt_runtime::marks;

use crate::regs::{DESCRIPTOR_MAGIC, Descriptor, NpuRegisters, REGION_WRITABLE, irq};

/// `ERROR_CODE` when `DESC_ADDR` holds no descriptor, or one whose region
/// table differs from its command stream's job (a driver bug).
pub const BAD_DESCRIPTOR: u32 = 0xDE5C;

#[derive(Debug)]
struct Device<'c> {
    /// The engine; none until a firmware installs one for a run.
    core: Option<VnpuCore<'c>>,
    descriptor: usize,
    irq: u32,
    error: u32,
    running: Option<JobId>,
}

impl Device<'_> {
    fn fail(&mut self, code: u32) {
        self.error = code;
        self.irq |= irq::ERROR;
    }

    /// `CMD = START`: fetch the descriptor and give its job to the engine.
    fn start(&mut self) {
        if self.running.is_some() {
            // A real device ignores a kick while busy; the driver never
            // sends one, so say so loudly.
            self.fail(AccelError::Busy.code(0));
            return;
        }
        let Some(job) = self.fetch() else {
            self.fail(BAD_DESCRIPTOR);
            return;
        };
        let Some(core) = self.core.as_mut() else {
            self.fail(AccelError::Unsupported.code(0));
            return;
        };
        match core.submit(&job) {
            Ok(id) => self.running = Some(id),
            // The engine's own checks, as the device's error register
            // reports them.
            Err(e) => self.fail(e.code(0)),
        }
    }

    /// The job `DESC_ADDR` describes, if the descriptor is well formed.
    fn fetch(&self) -> Option<Job> {
        if self.descriptor == 0
            || !self
                .descriptor
                .is_multiple_of(core::mem::align_of::<Descriptor>())
        {
            return None;
        }
        // SAFETY: the driver's contract (`Driver::submit`): `DESC_ADDR`
        // names its descriptor, live and unchanged until the job ends.
        let descriptor = unsafe { &*(self.descriptor as *const Descriptor) };
        if descriptor.magic != DESCRIPTOR_MAGIC || descriptor.command == 0 {
            return None;
        }
        // SAFETY: the virtual device's command stream is the driver's copy
        // of the job (`command_stream` below), live until the job ends.
        let job = unsafe { *(descriptor.command as *const Job) };
        let same = descriptor.regions().len() == job.regions().len()
            && descriptor
                .regions()
                .iter()
                .zip(job.regions())
                .all(|(d, r)| {
                    d.base == r.address
                        && d.len == r.len
                        && (d.flags & REGION_WRITABLE != 0) == (r.access == Access::ReadWrite)
                });
        // A copy: the engine keeps its own, as it keeps the regions.
        same.then_some(job)
    }
}

/// A device on vnpu's engine, behind the register block the driver uses.
#[derive(Debug)]
pub struct VirtualNpu<'c> {
    device: Mutex<RefCell<Device<'c>>>,
}

impl<'c> VirtualNpu<'c> {
    /// A device around `core` (coherent or non-coherent, with its latency
    /// model, windows and any fault it plays).
    pub fn new(core: VnpuCore<'c>) -> Self {
        let device = Self::unpowered();
        device.install(Some(core));
        device
    }

    /// A device with no engine yet (for a `static`): every job fails with
    /// `Unsupported` until [`install`](Self::install) gives it one.
    pub const fn unpowered() -> Self {
        VirtualNpu {
            device: Mutex::new(RefCell::new(Device {
                core: None,
                descriptor: 0,
                irq: 0,
                error: 0,
                running: None,
            })),
        }
    }

    /// Replaces the engine (a firmware sets it up per run: coherent or not,
    /// its latency model, the window it reaches). Any job in it is dropped
    /// and every flag cleared; call it with no job in flight.
    pub fn install(&self, core: Option<VnpuCore<'c>>) {
        self.with(|d| {
            d.core = core;
            d.running = None;
            d.irq = 0;
            d.error = 0;
        });
    }

    fn with<T>(&self, f: impl FnOnce(&mut Device<'c>) -> T) -> T {
        critical_section::with(|cs| f(&mut self.device.borrow(cs).borrow_mut()))
    }

    /// One tick of the device's clock: advances the running job by `budget`
    /// engine cycles. Returns whether the interrupt line is high (a flag is
    /// pending), so the caller runs the driver's interrupt handler.
    pub fn step(&self, budget: u64) -> bool {
        self.with(|d| {
            if let (Some(id), Some(core)) = (d.running, d.core.as_mut())
                && core.step(budget)
            {
                d.running = None;
                // The device lets go of the job as it ends: vnpu's last
                // lease audit reads the job's regions, which is the
                // engine's work, whichever op the CPU is in (the QEMU
                // plugin's access check knows it by these marks).
                marks::job_start();
                let outcome = core.retire(id);
                marks::job_end();
                match outcome {
                    Ok(()) => d.irq |= irq::DONE,
                    Err(e) => d.fail(e.code(0)),
                }
            }
            d.irq != 0
        })
    }

    /// Whether a job is in the engine.
    pub fn is_busy(&self) -> bool {
        self.with(|d| d.running.is_some())
    }

    /// Whether the device needs its clock: a job is in the engine, or a
    /// flag is pending that no handler has taken yet (a job refused at its
    /// start, a stop). A timer that steps the device only then saves the
    /// idle ticks.
    pub fn needs_tick(&self) -> bool {
        self.with(|d| d.running.is_some() || d.irq != 0)
    }

    /// The engine's figures.
    pub fn stats(&self) -> VnpuStats {
        self.with(|d| d.core.as_ref().map(VnpuCore::stats).unwrap_or_default())
    }

    /// The first lease or cache violation the engine saw, if any, after
    /// settling what the CPU still owes it (a missing invalidate).
    pub fn violation(&self) -> Option<Violation> {
        self.with(|d| {
            let core = d.core.as_mut()?;
            let owed = core.settle();
            core.violation().or(owed)
        })
    }

    /// Takes the first violation seen (the next one is recorded anew), after
    /// settling what the CPU still owes the engine.
    pub fn take_violation(&self) -> Option<Violation> {
        self.with(|d| {
            let core = d.core.as_mut()?;
            let owed = core.settle();
            core.take_violation().or(owed)
        })
    }
}

impl NpuRegisters for VirtualNpu<'_> {
    fn set_descriptor(&self, address: usize) {
        self.with(|d| d.descriptor = address);
    }

    fn start(&self) {
        self.with(Device::start);
    }

    fn stop(&self) {
        self.with(|d| {
            if let Some(id) = d.running.take() {
                if let Some(core) = d.core.as_mut() {
                    core.abort(id);
                }
                d.irq |= irq::STOPPED;
            }
        });
    }

    fn irq_status(&self) -> u32 {
        self.with(|d| d.irq)
    }

    fn clear_irq(&self, flags: u32) {
        self.with(|d| d.irq &= !flags);
    }

    fn error_code(&self) -> u32 {
        self.with(|d| d.error)
    }

    /// The virtual device's codes are the runtime's own error words.
    fn decode_error(&self, code: u32) -> AccelError {
        AccelError::from_code(code).map_or(AccelError::Engine { code }, |(error, _)| error)
    }

    fn command_stream(&self, job: &Job) -> usize {
        job as *const Job as usize
    }
}

/// The data cache between the CPU and the virtual device: a no-op when the
/// core is coherent; in non-coherent mode, copies between memory and the
/// engine's view, whole lines.
impl CacheMaintenance for VirtualNpu<'_> {
    fn line_size(&self) -> u32 {
        self.with(|d| d.core.as_ref().map_or(1, |c| c.config().line_size))
    }

    fn clean(&self, address: usize, len: usize) {
        self.with(|d| d.core.as_mut().map(|c| c.clean(address, len)));
    }

    fn invalidate(&self, address: usize, len: usize) {
        self.with(|d| d.core.as_mut().map(|c| c.invalidate(address, len)));
    }
}
