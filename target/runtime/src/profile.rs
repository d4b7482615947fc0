//! Per-op profiling: the clock seam an invoke is timed with, and a
//! profiled invoke's running figures (per-op sums and the job trace).
//!
//! A module of its own, below both the interpreter and `accel`, so that the
//! offload path records its jobs' times without reaching back into the
//! interpreter that drives it.

use crate::accel::JobTrace;

/// Reads a clock for per-op profiles (a hardware seam: DWT/SysTick on a
/// target, `Instant` on a host).
pub trait Clock {
    /// A monotonic count (cycles, ticks or nanoseconds).
    fn now(&self) -> u64;
}

/// A profiled run's clock, per-op sums and job trace.
pub(crate) struct Profile<'p, C: ?Sized> {
    pub(crate) clock: &'p C,
    pub(crate) per_op: &'p mut [u64],
    pub(crate) trace: &'p mut [JobTrace],
    pub(crate) start: u64,
}

impl<C: Clock + ?Sized> Profile<'_, C> {
    pub(crate) fn since_start(&self) -> u64 {
        self.clock.now().saturating_sub(self.start)
    }

    pub(crate) fn since_start_u32(&self) -> u32 {
        self.since_start().min(u64::from(u32::MAX)) as u32
    }

    /// Adds the counts since `start` to op `op`'s sum. The clock is read
    /// last, so that the bookkeeping before it is the op's, as it always
    /// was, and nothing after it is.
    #[inline(always)]
    pub(crate) fn charge(&mut self, op: u32, start: u64) {
        if let Some(slot) = self.per_op.get_mut(op as usize) {
            *slot += self.clock.now().saturating_sub(start);
        }
    }
}

/// The clock of an invoke that is not profiled (never read).
#[cfg_attr(hilt_compact, allow(dead_code))]
pub(crate) struct NoClock;

impl Clock for NoClock {
    fn now(&self) -> u64 {
        0
    }
}
