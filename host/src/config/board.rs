//! Board definitions (`boards/NAME.toml` + `boards/NAME/memory.x`). The
//! types and their validation live in `hilt-contract`, which the firmware's
//! build script reads too, so the board file is typed once for both sides;
//! this module re-exports them under the host's name for them.
//!
//! ```no_run
//! let boards = hilt::config::board::load_all("boards".as_ref())?;
//! for board in hilt::config::board::select(&boards, "qemu-*")? {
//!     println!("{} ({})", board.name, board.runner);
//! }
//! # Ok::<(), hilt::config::ConfigError>(())
//! ```

pub use hilt_contract::board::*;

/// What is wrong with a board file: the one config error (boards and
/// scenarios share it), under the name callers of this module know.
pub type BoardError = hilt_contract::ConfigError;
