//! An NPU driver to copy: the runtime's accelerator seam implemented the
//! way a driver for a real NPU is wired, and a virtual device on vnpu's
//! engine that it runs on where there is no NPU.
//!
//! - [`NpuRegisters`] is the device: a register block (descriptor address,
//!   start, stop, interrupt status and clear, error code). A vendor fills
//!   it with volatile reads and writes at the block's address.
//! - [`Driver`] implements [`Accelerator`] over it: `submit` validates the
//!   job against the device's capabilities, writes a [`Descriptor`], cleans
//!   the caches by address range and starts the device, then returns;
//!   [`Driver::on_interrupt`], called from the NPU's interrupt vector, ends
//!   the job and wakes the waiter; `wait` sleeps on an [`EventWait`] (or
//!   polls the flags, [`WaitMode::Poll`]) until then or its deadline, and
//!   invalidates what the device wrote; `abort` asks the device to stop.
//! - [`VirtualNpu`] is a device on vnpu's [`VnpuCore`]: stepped from a
//!   timer, it raises its interrupt when the job's kernel has run, and in
//!   non-coherent mode it sees only what the driver cleaned.
//!
//! `docs/writing-a-backend.md` in the book walks through it.
//!
//! ```
//! use hilt_npu_driver::{Driver, Platform, VirtualNpu, WaitMode};
//! use hilt_runtime::accel::vnpu::{VnpuConfig, VnpuCore};
//! use hilt_runtime::accel::{Accelerator, AccelError, Coherent, FlagEvent, Job, JobId};
//! # struct Zero;
//! # impl hilt_runtime::interpreter::Clock for Zero { fn now(&self) -> u64 { 0 } }
//! let config = VnpuConfig::default();
//! let platform = Platform { cache: &Coherent, event: &FlagEvent::new(), clock: &Zero };
//! let driver = Driver::new(
//!     VirtualNpu::new(VnpuCore::new(config)),
//!     config.capabilities(),
//!     platform,
//!     WaitMode::Interrupt,
//! );
//! assert_eq!(driver.poll(JobId(1)), Err(AccelError::UnknownJob));
//! ```
//!
//! [`Accelerator`]: hilt_runtime::accel::Accelerator
//! [`EventWait`]: hilt_runtime::accel::EventWait
//! [`VnpuCore`]: hilt_runtime::accel::vnpu::VnpuCore

#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]

mod driver;
mod regs;
mod virtual_device;

pub use driver::{Driver, DriverStats, Platform, WaitMode};
pub use regs::{
    DESCRIPTOR_MAGIC, Descriptor, DescriptorRegion, NpuRegisters, REGION_WRITABLE, irq,
};
pub use virtual_device::{BAD_DESCRIPTOR, VirtualNpu};
