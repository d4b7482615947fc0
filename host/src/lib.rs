//! hilt's host side: the `hilt` CLI and the orchestrator library behind it.
//!
//! Today it plans arenas on the host (`hilt layout`) with the same runtime
//! crate the firmware runs, so a layout can be checked without a board.

pub mod conformance;
pub mod host_run;
pub mod layout;
pub mod svg;
