//! The wait/notify primitive between an engine's completion and the CPU
//! that waits for it.
//!
//! A bare MCU sleeps in `WFE` until the engine's interrupt handler calls
//! `notify` (which sets a flag and executes `SEV`); a host thread waits on a
//! condition variable. The runtime only needs the shape, so each side brings
//! its own: the host implementation lives in the host crate, the target one
//! (WFE) in the firmware.

use core::sync::atomic::{AtomicBool, Ordering};

/// An event a waiter sleeps on until it is notified or a deadline passes.
pub trait EventWait {
    /// Waits until [`notify`](Self::notify) has been called since the last
    /// wait returned `true`, or until `deadline` (in the caller's clock) has
    /// passed. Returns whether the event was notified; it is consumed.
    fn wait_until(&self, deadline: u64) -> bool;
    /// Wakes the waiter. Callable from an interrupt handler: it must not
    /// block or allocate.
    fn notify(&self);
}

/// An event that is a flag only: `wait_until` spins on it (no clock: it
/// returns `false` at once when the flag is clear). For single-threaded
/// drivers that make progress only inside `wait`, and for tests.
#[derive(Debug, Default)]
pub struct FlagEvent {
    set: AtomicBool,
}

impl FlagEvent {
    /// A cleared event.
    pub const fn new() -> Self {
        FlagEvent {
            set: AtomicBool::new(false),
        }
    }
}

impl EventWait for FlagEvent {
    fn wait_until(&self, _deadline: u64) -> bool {
        take(&self.set)
    }

    fn notify(&self) {
        self.set.store(true, Ordering::Release);
    }
}

/// Reads and clears `flag` in one step where the core has atomic
/// read-modify-write instructions.
#[cfg(target_has_atomic = "8")]
fn take(flag: &AtomicBool) -> bool {
    flag.swap(false, Ordering::Acquire)
}

/// ARMv6-M (Cortex-M0/M0+) has no atomic read-modify-write: a load, then a
/// store of `false` only when it was set. A notify landing between the two
/// is merged into the one being consumed, which a flag (not a counter)
/// allows: the waiter has already seen the event it was waiting for.
#[cfg(not(target_has_atomic = "8"))]
fn take(flag: &AtomicBool) -> bool {
    let set = flag.load(Ordering::Acquire);
    if set {
        flag.store(false, Ordering::Relaxed);
    }
    set
}
