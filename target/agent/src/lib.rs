#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]
#![doc = include_str!("../README.md")]

#[cfg(feature = "calibration-loop")]
mod calibration;
mod config;
mod counter;
#[cfg(feature = "fault-injection")]
mod faults;
mod link;
mod notes;
mod offload;
mod pin;
mod planner;
mod report;
mod requests;
mod session;
mod workspace;

pub use embedded_hal;
pub use embedded_io;
pub use hilt_proto as proto;
pub use hilt_runtime as runtime;

pub use config::{Aligned, Config, META_LEN, meta};
pub use counter::CycleCounter;
#[cfg(all(feature = "cortex-m", not(hilt_no_cyccnt)))]
pub use counter::cortex_m::DwtCounter;
#[cfg(feature = "cortex-m")]
pub use counter::cortex_m::SysTickCounter;
pub use link::{Line, WireError, send_log};
pub use notes::Note;
#[cfg(feature = "cortex-m")]
pub use offload::TickVnpu;
pub use offload::{
    EngineLedger, EngineSetup, OffloadEngine, ShadowMemory, TICK_COUNTS, WAIT_TIMEOUT,
};
pub use pin::NoPin;
pub use planner::{Custom, OfflineFromModel, PlannerKind, PlannerSource};
pub use session::{Agent, Session};
pub use workspace::{MAX_JOBS, MAX_OPS, MAX_PLAN, Parts, Workspace};
