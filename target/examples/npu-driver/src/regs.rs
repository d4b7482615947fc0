//! The device's side of the driver: its register block, as a trait a
//! vendor fills with MMIO, and the job descriptor it reads from memory.
//!
//! The driver never touches a register except through [`NpuRegisters`], so
//! the same driver runs on silicon (volatile reads and writes at the
//! block's base address) and on the virtual device
//! ([`crate::VirtualNpu`]) in host tests and on QEMU boards.

use hilt_runtime::accel::{AccelError, Access, Job, MAX_JOB_REGIONS, RegionRole};

/// Interrupt flags (the `IRQ_STATUS` register; write 1 to clear).
pub mod irq {
    /// The job ran to its end.
    pub const DONE: u32 = 1 << 0;
    /// The job failed; `ERROR_CODE` says why.
    pub const ERROR: u32 = 1 << 1;
    /// The job was stopped on request and the device let go of its memory.
    pub const STOPPED: u32 = 1 << 2;
    /// Every flag.
    pub const ALL: u32 = DONE | ERROR | STOPPED;
}

/// The device's register block: the seam a vendor fills with their MMIO.
///
/// Methods take `&self` because registers are shared between the code that
/// submits and the interrupt handler, as memory-mapped registers are.
pub trait NpuRegisters {
    /// Writes the address of the job's [`Descriptor`] (`DESC_ADDR`).
    fn set_descriptor(&self, address: usize);
    /// Starts the job `DESC_ADDR` names (`CMD = START`). Returns at once:
    /// the device raises its interrupt when the job ends.
    fn start(&self);
    /// Asks the device to stop the running job (`CMD = STOP`). It raises
    /// [`irq::STOPPED`] once it no longer touches the job's memory; a job
    /// that ended before the request raises what it ended with.
    fn stop(&self);
    /// Reads `IRQ_STATUS` (the [`irq`] flags pending).
    fn irq_status(&self) -> u32;
    /// Clears the given [`irq`] flags (`IRQ_CLEAR`, write 1 to clear), which
    /// lowers the interrupt line once none is left.
    fn clear_irq(&self, flags: u32);
    /// Reads `ERROR_CODE`, meaningful while [`irq::ERROR`] is pending.
    fn error_code(&self) -> u32;

    /// What an `ERROR_CODE` means. A vendor maps its own codes (bus fault,
    /// illegal command) to the runtime's errors; unknown ones stay numbers.
    fn decode_error(&self, code: u32) -> AccelError {
        AccelError::Engine { code }
    }

    /// The address of the command stream the device runs for `job`: on an
    /// NPU, the stream the op's prepare compiled into its op data, which the
    /// job names as its [`RegionRole::Descriptor`] region. `job` is the
    /// driver's own copy, which lives until the job is waited or aborted.
    fn command_stream(&self, job: &Job) -> usize {
        job.regions()
            .iter()
            .find(|r| r.role == RegionRole::Descriptor)
            .map_or(0, |r| r.address)
    }
}

/// Tells a descriptor from stray memory (`"HNPU"`).
pub const DESCRIPTOR_MAGIC: u32 = u32::from_le_bytes(*b"HNPU");

/// [`DescriptorRegion::flags`]: the device may write the region.
pub const REGION_WRITABLE: u32 = 1 << 0;

/// One buffer the device reaches, as the descriptor's table holds it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescriptorRegion {
    /// First byte's address.
    pub base: usize,
    /// Length in bytes.
    pub len: u32,
    /// [`REGION_WRITABLE`] or 0.
    pub flags: u32,
}

/// The job as the device reads it from memory, by DMA: where its command
/// stream is and the base-address table the stream refers to by index.
///
/// Its layout is the device's contract (`repr(C)`); it is aligned to a
/// cache line, so cleaning it touches no neighbour.
#[repr(C, align(32))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor {
    /// [`DESCRIPTOR_MAGIC`].
    pub magic: u32,
    /// Entries of `regions` in use.
    pub count: u32,
    /// The command stream's address ([`NpuRegisters::command_stream`]).
    pub command: usize,
    /// The job's regions, in the job's order (region `i` of an error is
    /// entry `i`).
    pub regions: [DescriptorRegion; MAX_JOB_REGIONS],
}

impl Descriptor {
    /// An empty descriptor (no command, no region).
    pub const EMPTY: Descriptor = Descriptor {
        magic: 0,
        count: 0,
        command: 0,
        regions: [DescriptorRegion {
            base: 0,
            len: 0,
            flags: 0,
        }; MAX_JOB_REGIONS],
    };

    /// The descriptor of `job`, whose command stream is at `command`.
    pub fn for_job(job: &Job, command: usize) -> Self {
        let mut descriptor = Descriptor {
            magic: DESCRIPTOR_MAGIC,
            count: job.regions().len() as u32,
            command,
            ..Descriptor::EMPTY
        };
        for (entry, region) in descriptor.regions.iter_mut().zip(job.regions()) {
            *entry = DescriptorRegion {
                base: region.address,
                len: region.len,
                flags: match region.access {
                    Access::Read => 0,
                    Access::ReadWrite => REGION_WRITABLE,
                },
            };
        }
        descriptor
    }

    /// The entries in use.
    pub fn regions(&self) -> &[DescriptorRegion] {
        &self.regions[..(self.count as usize).min(MAX_JOB_REGIONS)]
    }
}

/// A shared device: the driver can own a reference, so that a timer (the
/// virtual device's clock) or a diagnostic reaches the same block.
impl<T: NpuRegisters + ?Sized> NpuRegisters for &T {
    fn set_descriptor(&self, address: usize) {
        (**self).set_descriptor(address);
    }
    fn start(&self) {
        (**self).start();
    }
    fn stop(&self) {
        (**self).stop();
    }
    fn irq_status(&self) -> u32 {
        (**self).irq_status()
    }
    fn clear_irq(&self, flags: u32) {
        (**self).clear_irq(flags);
    }
    fn error_code(&self) -> u32 {
        (**self).error_code()
    }
    fn decode_error(&self, code: u32) -> AccelError {
        (**self).decode_error(code)
    }
    fn command_stream(&self, job: &Job) -> usize {
        (**self).command_stream(job)
    }
}
