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

    /// Raises a periodic interrupt every `cycles` counts (SysTick), for an
    /// engine stepped from it (`TickVnpu`), or stops it (`None`). Returns
    /// whether the counter can; one without a timer says `false`, and the
    /// agent then refuses to offload.
    fn tick_every(&self, cycles: Option<u32>) -> bool {
        let _ = cycles;
        false
    }
}

#[cfg(feature = "cortex-m")]
pub(crate) mod cortex_m {
    //! The two counters of a Cortex-M core.

    use core::sync::atomic::{AtomicU32, Ordering};

    use cortex_m::peripheral::SYST;
    use cortex_m::peripheral::syst::SystClkSource;
    #[cfg(not(hilt_no_cyccnt))]
    use cortex_m::peripheral::{DCB, DWT};
    use hilt_runtime::interpreter::Clock;

    use super::CycleCounter;

    const FULL: u32 = 0x00FF_FFFF;

    /// SysTick wraps since the last restart (the software high word).
    static WRAPS: AtomicU32 = AtomicU32::new(0);
    /// The reload value: a full 24-bit period, or an engine's tick.
    static RELOAD: AtomicU32 = AtomicU32::new(FULL);

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
            syst.set_reload(FULL);
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

    impl SysTickCounter {
        /// The count, readable from an interrupt handler too (an engine's
        /// clock).
        pub fn read() -> u64 {
            let reload = RELOAD.load(Ordering::Relaxed);
            loop {
                let high = WRAPS.load(Ordering::Acquire);
                let low = reload - SYST::get_current().min(reload);
                if WRAPS.load(Ordering::Acquire) == high {
                    // The full period (no engine ticking) is a shift: the
                    // timed code stays as short as it can be.
                    return if reload == FULL {
                        (u64::from(high) << 24) | u64::from(low)
                    } else {
                        u64::from(high) * u64::from(reload + 1) + u64::from(low)
                    };
                }
            }
        }
    }

    impl Clock for SysTickCounter {
        fn now(&self) -> u64 {
            Self::read()
        }
    }

    impl CycleCounter for SysTickCounter {
        fn source(&self) -> &'static str {
            "systick"
        }

        /// Restarts the count at 0. QEMU's SysTick realigns its period to the moment CVR is written,
        /// so counts measured from here depend only on the instructions
        /// executed since, not on how long the firmware happened to wait
        /// for the host before: two runs give identical figures.
        fn restart(&self) {
            // SAFETY: writing CVR only clears the current value; SysTick is ours alone.
            unsafe { (*SYST::PTR).cvr.write(0) };
            // CVR reads 0 until the next tick reloads it: start counting
            // from that reload, with no wrap pending.
            while SYST::get_current() == 0 {}
            WRAPS.store(0, Ordering::Release);
        }

        /// A shorter period while an engine is stepped from SysTick (the
        /// count stays exact: each wrap adds the period), the full 24 bits
        /// otherwise.
        fn tick_every(&self, cycles: Option<u32>) -> bool {
            let reload = cycles.map_or(FULL, |c| c.clamp(2, FULL + 1) - 1);
            RELOAD.store(reload, Ordering::Relaxed);
            // SAFETY: SysTick is ours alone; the count restarts from the new
            // period at the next timed invoke.
            unsafe { (*SYST::PTR).rvr.write(reload) };
            self.restart();
            true
        }
    }

    /// The high word and last reading of the extended DWT count (statics,
    /// so an engine's interrupt handler reads the same clock).
    #[cfg(not(hilt_no_cyccnt))]
    static DWT_HIGH: AtomicU32 = AtomicU32::new(0);
    #[cfg(not(hilt_no_cyccnt))]
    static DWT_LAST: AtomicU32 = AtomicU32::new(0);

    /// DWT CYCCNT, extended to 64 bits on every read (reads come at least
    /// once per operator, far more often than the 32-bit counter wraps).
    /// True cycles on real cores; reads 0 under QEMU. (Not on ARMv6-M,
    /// which has no CYCCNT.) SysTick, which it leaves free, can raise an
    /// engine's tick ([`with_tick`](Self::with_tick)).
    #[cfg(not(hilt_no_cyccnt))]
    pub struct DwtCounter {
        /// Held so that nothing else can turn trace or the counter off.
        _dcb: DCB,
        _dwt: DWT,
        syst: Option<SYST>,
    }

    #[cfg(not(hilt_no_cyccnt))]
    impl core::fmt::Debug for DwtCounter {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.debug_struct("DwtCounter").finish_non_exhaustive()
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
                syst: None,
            }
        }

        /// Takes SysTick too, to raise an engine's tick when asked.
        pub fn with_tick(mut self, syst: SYST) -> Self {
            self.syst = Some(syst);
            self
        }

        /// The count, readable from an interrupt handler too.
        pub fn read() -> u64 {
            cortex_m::interrupt::free(|_| {
                let now = DWT::cycle_count();
                let mut high = DWT_HIGH.load(Ordering::Relaxed);
                if now < DWT_LAST.load(Ordering::Relaxed) {
                    high = high.wrapping_add(1);
                    DWT_HIGH.store(high, Ordering::Relaxed);
                }
                DWT_LAST.store(now, Ordering::Relaxed);
                (u64::from(high) << 32) | u64::from(now)
            })
        }
    }

    #[cfg(not(hilt_no_cyccnt))]
    impl Clock for DwtCounter {
        fn now(&self) -> u64 {
            Self::read()
        }
    }

    #[cfg(not(hilt_no_cyccnt))]
    impl CycleCounter for DwtCounter {
        fn source(&self) -> &'static str {
            "dwt"
        }

        fn tick_every(&self, cycles: Option<u32>) -> bool {
            if self.syst.is_none() {
                return false;
            }
            // SAFETY: SysTick is ours (`with_tick`); only its reload, value
            // and control change.
            unsafe {
                let syst = &*SYST::PTR;
                match cycles {
                    Some(c) => {
                        syst.rvr.write(c.clamp(2, FULL + 1) - 1);
                        syst.cvr.write(0);
                        // Processor clock, interrupt on, counter on.
                        syst.csr.write(0b111);
                    }
                    None => syst.csr.write(0),
                }
            }
            true
        }
    }
}
