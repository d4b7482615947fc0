//! hilt's host side: the `hilt` CLI and the orchestrator library behind it.
//!
//! Today it plans arenas (`hilt layout`) and runs models (`hilt infer`,
//! `hilt bench`) on the host with the same runtime crate the firmware runs,
//! so a layout or an output can be checked without a board.

pub mod accel;
pub mod bench;
pub mod board;
pub mod conformance;
pub mod elf;
pub mod firmware;
pub mod flash;
pub mod gate;
pub mod gdbstub;
pub mod host_run;
pub mod infer;
pub mod layout;
pub mod link;
pub mod memory;
pub mod orchestrate;
pub mod probe;
pub mod qemu;
pub mod report;
pub mod rtt;
pub mod runner;
pub mod scenario;
pub mod serial;
pub mod shard;
pub mod svg;
pub mod tensor_file;
