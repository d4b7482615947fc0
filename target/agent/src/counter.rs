//! The cycle counter seam: what the agent times each invoke and each
//! operator with.

use hilt_runtime::interpreter::Clock;

/// A free-running count the agent reads around every invoke and every
/// operator (through the runtime's [`Clock`]).
///
/// Figures must be comparable run to run: a counter whose zero point
/// depends on when it was last read (SysTick under QEMU's `-icount`
/// realigns its period to the moment it is written) restarts in
/// [`restart`](Self::restart), which the agent calls right before each
/// timed invoke, so a count depends only on the instructions executed since.
pub trait CycleCounter: Clock {
    /// What counts ("dwt", "systick", "timer2"), for the start-up log.
    fn source(&self) -> &'static str;

    /// Called before each timed invoke, outside the timed region. Counters
    /// that are exact from any starting point (DWT CYCCNT) do nothing.
    fn restart(&self) {}
}

#[cfg(feature = "cortex-m")]
pub(crate) mod cortex_m {
    //! The two counters of a Cortex-M core.

    #[cfg(not(hilt_no_cyccnt))]
    use core::cell::Cell;
    use core::sync::atomic::{AtomicU32, Ordering};

    use cortex_m::peripheral::SYST;
    use cortex_m::peripheral::syst::SystClkSource;
    #[cfg(not(hilt_no_cyccnt))]
    use cortex_m::peripheral::{DCB, DWT};
    use hilt_runtime::interpreter::Clock;

    use super::CycleCounter;

    const RELOAD: u32 = 0x00FF_FFFF;

    /// SysTick wraps since the last restart (the software high word).
    static WRAPS: AtomicU32 = AtomicU32::new(0);

    /// SysTick on the processor clock, wrapping every 2^24 ticks into a
    /// software high word. The one counter that works under QEMU (its DWT
    /// CYCCNT reads 0), where with `-icount` it counts instructions.
    ///
    /// The firmware must forward the SysTick exception:
    /// `#[exception] fn SysTick() { SysTickCounter::on_wrap() }` (the agent
    /// does not claim the handler: your firmware may have its own).
    pub struct SysTickCounter {
        /// Held so that nothing else can take SysTick.
        _syst: SYST,
    }

    impl core::fmt::Debug for SysTickCounter {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.debug_struct("SysTickCounter").finish_non_exhaustive()
        }
    }

    impl SysTickCounter {
        /// Takes SysTick: processor clock, full reload, wrap interrupt on.
        pub fn start(mut syst: SYST) -> Self {
            syst.set_clock_source(SystClkSource::Core);
            syst.set_reload(RELOAD);
            syst.clear_current();
            syst.enable_interrupt();
            syst.enable_counter();
            SysTickCounter { _syst: syst }
        }

        /// Counts one wrap: call it from the SysTick exception handler.
        pub fn on_wrap() {
            // Load and store, not fetch_add: ARMv6-M has no atomic
            // read-modify-write, and nothing preempts this handler's update.
            WRAPS.store(
                WRAPS.load(Ordering::Relaxed).wrapping_add(1),
                Ordering::Relaxed,
            );
        }
    }

    impl Clock for SysTickCounter {
        fn now(&self) -> u64 {
            loop {
                let high = WRAPS.load(Ordering::Acquire);
                let low = RELOAD - SYST::get_current();
                if WRAPS.load(Ordering::Acquire) == high {
                    return (u64::from(high) << 24) | u64::from(low);
                }
            }
        }
    }

    impl CycleCounter for SysTickCounter {
        fn source(&self) -> &'static str {
            "systick"
        }

        /// Restarts the count at 0. QEMU's SysTick realigns its period to
        /// the moment CVR is written, so counts measured from here depend
        /// only on the instructions executed since, not on how long the
        /// firmware happened to wait for the host before: two runs give
        /// identical figures.
        fn restart(&self) {
            // SAFETY: writing CVR only clears the current value; SysTick is ours alone.
            unsafe { (*SYST::PTR).cvr.write(0) };
            // CVR reads 0 until the next tick reloads it: start counting
            // from that reload, with no wrap pending.
            while SYST::get_current() == 0 {}
            WRAPS.store(0, Ordering::Release);
        }
    }

    /// DWT CYCCNT, extended to 64 bits on every read (reads come at least
    /// once per operator, far more often than the 32-bit counter wraps).
    /// True cycles on real cores; reads 0 under QEMU. (Not on ARMv6-M,
    /// which has no CYCCNT.)
    #[cfg(not(hilt_no_cyccnt))]
    pub struct DwtCounter {
        /// Held so that nothing else can turn trace or the counter off.
        _dcb: DCB,
        _dwt: DWT,
        last: Cell<u32>,
        high: Cell<u64>,
    }

    #[cfg(not(hilt_no_cyccnt))]
    impl core::fmt::Debug for DwtCounter {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.debug_struct("DwtCounter")
                .field("high", &self.high)
                .finish_non_exhaustive()
        }
    }

    #[cfg(not(hilt_no_cyccnt))]
    impl DwtCounter {
        /// Enables trace and the cycle counter, from 0.
        pub fn start(mut dcb: DCB, mut dwt: DWT) -> Self {
            dcb.enable_trace();
            DWT::unlock();
            dwt.set_cycle_count(0);
            dwt.enable_cycle_counter();
            DwtCounter {
                _dcb: dcb,
                _dwt: dwt,
                last: Cell::new(0),
                high: Cell::new(0),
            }
        }
    }

    #[cfg(not(hilt_no_cyccnt))]
    impl Clock for DwtCounter {
        fn now(&self) -> u64 {
            let now = DWT::cycle_count();
            if now < self.last.get() {
                self.high.set(self.high.get() + (1 << 32));
            }
            self.last.set(now);
            self.high.get() | u64::from(now)
        }
    }

    #[cfg(not(hilt_no_cyccnt))]
    impl CycleCounter for DwtCounter {
        fn source(&self) -> &'static str {
            "dwt"
        }
    }
}
