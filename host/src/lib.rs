//! hilt's host side: the `hilt` CLI and the orchestrator library behind it.
//!
//! It plans arenas (`hilt layout`) and runs models (`hilt infer`,
//! `hilt bench`) on the host with the same runtime crate the firmware runs,
//! and runs scenarios on boards (`hilt run`, `hilt gate`).
//!
//! The modules, from the bottom up (no module imports one above it; the
//! test `host/tests/module_graph.rs` checks there is no cycle):
//! - leaves: [`cancel`] (ending a run from another thread), [`memory`]
//!   (the target-memory seam), [`elf`], [`tensor_file`], [`svg`] (with
//!   [`buffer_labels`]), [`paths`],
//!   [`plan`] (any buffer list from a CSV),
//!   [`holds`] (buffers an offloaded job keeps past their last use);
//! - [`config`]: board and scenario files (typed in `hilt-contract`);
//! - [`link`]: hilt-proto over RTT (through a probe or QEMU's gdbstub) or a
//!   serial line;
//! - [`session`]: the protocol session with a started board; [`outcome`]:
//!   what a run produced;
//! - [`driver`]: QEMU, probe-rs and UART boards behind one trait;
//! - [`orchestrate`]: builds, locks, limits and runs boards in parallel;
//! - [`gate`] and [`report`]: what a run is judged against and written as;
//!   [`results`]: the store every run is recorded in, and its history;
//! - [`offline_plan`]: a layout stored in the model as TFLM's offline plan.

pub mod accel;
pub mod aligned;
pub mod backtrace;
pub mod bench;
pub mod buffer_labels;
pub mod buffer_list;
pub mod byte_size;
pub mod cancel;
pub mod children;
pub mod config;
pub mod conformance;
pub mod driver;
pub mod elf;
pub mod firmware;
pub mod flash_parts;
pub mod gate;
pub mod holds;
pub mod host_run;
pub mod infer;
pub mod layout;
pub mod link;
pub mod memory;
pub mod model_file;
pub mod observer;
pub mod offline_plan;
pub mod orchestrate;
pub mod outcome;
pub mod part_estimate;
pub mod paths;
pub mod quarantine;
pub mod report;
pub mod reshape_sharing;
pub mod results;
pub mod session;
pub mod shard;
pub mod svg;
pub mod target_bench;
pub mod tensor_file;
pub mod tflm_scratch;
