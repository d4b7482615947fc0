//! hilt's QEMU TCG plugin: behind every virtual board run, it counts the
//! instructions of each op exactly, estimates their cycles on the board's
//! core, and checks every load and store against the arena plan the board
//! committed.
//!
//! Licence: GPL-2.0-or-later, because the `qemu-plugin` crate it links is;
//! the rest of hilt is Apache-2.0 and only starts QEMU with this library
//! loaded (see README.md).

pub mod checker;
pub mod control;
pub mod hotspots;
pub mod ledger;
#[cfg(feature = "qemu")]
mod observer;
pub mod restart;
pub mod sp_access;
pub mod timing;
