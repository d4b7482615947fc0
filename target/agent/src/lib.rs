//! # hilt-agent
//!
//! hilt's target side as a library, for your own firmware. Give it a byte
//! pipe to the host (any [`embedded_io`] `Read + Write`: a UART, RTT
//! channels, a USB serial port), a [`CycleCounter`], the model and the arena,
//! and `hilt run` drives your board like one of hilt's own: it streams the
//! inputs, invokes, compares the outputs, and reads per-op cycles, the arena
//! plan and canary reports. hilt's own board binaries (`target/firmware`)
//! are thin wrappers over this crate, so your firmware and hilt's speak the
//! same protocol through the same code.
//!
//! What a firmware adds (the statics come from `hilt-firmware-build` in its
//! `build.rs`, which embeds the model the host asks for):
//!
//! ```ignore
//! mod hilt { include!(concat!(env!("OUT_DIR"), "/hilt.rs")); }
//!
//! #[entry]
//! fn main() -> ! {
//!     let p = cortex_m::Peripherals::take().unwrap();
//!     let counter = hilt_agent::SysTickCounter::start(p.SYST);
//!     let resolver = hilt_agent::runtime::kernels::all_builtins();
//!     // SAFETY: the only call, before anything else uses hilt's statics.
//!     let parts = unsafe { hilt::take() };
//!     let mut session = hilt_agent::Agent::new(hilt::CONFIG, my_uart, counter)
//!         .planner(hilt_agent::Planner::Greedy)
//!         .start(parts, &resolver)
//!         .unwrap();
//!     let error = session.run();
//!     panic!("wire to the host: {error}");
//! }
//!
//! #[exception]
//! fn SysTick() {
//!     hilt_agent::SysTickCounter::on_wrap();
//! }
//! ```
//!
//! Seams, each a small trait with a do-nothing or host-testable stand-in:
//! - the wire: `embedded_io::Read + embedded_io::Write` ([`Session::poll`]
//!   blocks in `read` until bytes arrive, as `embedded_io` defines it);
//! - the clock: [`CycleCounter`] (DWT, SysTick under QEMU, or your timer);
//! - a timestamp pin: any `embedded_hal` [`OutputPin`](embedded_hal::digital::OutputPin),
//!   high for the duration of each invoke (MLPerf Tiny's energy runner and
//!   logic analysers read it), or [`NoPin`];
//! - the memory planner: [`Planner`] (linear, greedy = TFLM, the model's
//!   offline plan, or your own `MemoryPlanner`);
//! - an accelerator: [`Accelerator`], a place kept for backends that take
//!   over operators (none yet: [`NoAccelerator`]).
//!
//! No heap, no `std`: the big buffers live in a [`Workspace`] the firmware
//! places in a static, the model in flash, the arena wherever the firmware
//! puts it.

#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]

mod config;
mod counter;
#[cfg(any(
    feature = "fault-corrupt-frame",
    feature = "fault-stack-overflow",
    feature = "fault-hang-on-invoke",
    feature = "fault-blind-checker",
))]
mod faults;
mod link;
mod pin;
mod planner;
mod report;
mod session;
mod workspace;

pub use embedded_hal;
pub use embedded_io;
pub use hilt_proto as proto;
pub use hilt_runtime as runtime;

pub use config::{Aligned, Config, META_LEN, meta};
pub use counter::CycleCounter;
#[cfg(feature = "cortex-m")]
pub use counter::cortex_m::{DwtCounter, SysTickCounter};
pub use link::{Line, WireError, send_log};
pub use pin::NoPin;
pub use planner::{Accelerator, NoAccelerator, NoCustomPlanner, Planner, UnknownPlanner};
pub use session::{Agent, Session};
pub use workspace::{MAX_OPS, MAX_PLAN, Parts, Workspace};
