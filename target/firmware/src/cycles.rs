//! Cycle counting, a hardware seam with two implementations: DWT CYCCNT on
//! real cores, SysTick on QEMU (where CYCCNT reads 0, but SysTick under
//! `-icount` counts instructions deterministically).

use hilt_runtime::interpreter::Clock;

#[cfg(feature = "qemu")]
mod imp {
    use core::sync::atomic::{AtomicU32, Ordering};

    use cortex_m::peripheral::SYST;
    use cortex_m::peripheral::syst::SystClkSource;
    use cortex_m_rt::exception;

    const RELOAD: u32 = 0x00FF_FFFF;
    static WRAPS: AtomicU32 = AtomicU32::new(0);

    #[exception]
    fn SysTick() {
        WRAPS.fetch_add(1, Ordering::Relaxed);
    }

    /// SysTick on the processor clock, wrapping every 2^24 ticks into a
    /// software high word.
    pub(crate) struct Counter;

    impl Counter {
        pub(crate) fn start(mut syst: SYST) -> Self {
            syst.set_clock_source(SystClkSource::Core);
            syst.set_reload(RELOAD);
            syst.clear_current();
            syst.enable_interrupt();
            syst.enable_counter();
            core::mem::forget(syst);
            Counter
        }

        /// Restarts the count at 0. QEMU's SysTick realigns its period to
        /// the moment CVR is written, so counts measured from here depend
        /// only on the instructions executed since, not on how long the
        /// firmware happened to wait for the host before: two runs give
        /// identical figures.
        pub(crate) fn restart(&self) {
            // SAFETY: writing CVR only clears the current value; SysTick is ours alone.
            unsafe { (*SYST::PTR).cvr.write(0) };
            WRAPS.store(0, Ordering::Release);
        }

        pub(crate) fn now(&self) -> u64 {
            loop {
                let high = WRAPS.load(Ordering::Acquire);
                let low = RELOAD - SYST::get_current();
                if WRAPS.load(Ordering::Acquire) == high {
                    return (u64::from(high) << 24) | u64::from(low);
                }
            }
        }

        /// What counts: instructions under QEMU's `-icount`.
        pub(crate) const SOURCE: &'static str = "systick";
    }
}

#[cfg(not(feature = "qemu"))]
mod imp {
    use core::cell::Cell;

    use cortex_m::peripheral::{DCB, DWT};

    /// DWT CYCCNT, extended to 64 bits on every read (reads come at least
    /// once per operator, far more often than the 32-bit counter wraps).
    pub(crate) struct Counter {
        last: Cell<u32>,
        high: Cell<u64>,
    }

    impl Counter {
        pub(crate) fn start(mut dcb: DCB, mut dwt: DWT) -> Self {
            dcb.enable_trace();
            DWT::unlock();
            dwt.set_cycle_count(0);
            dwt.enable_cycle_counter();
            core::mem::forget((dcb, dwt));
            Counter {
                last: Cell::new(0),
                high: Cell::new(0),
            }
        }

        /// Cycle counts are exact on real cores: nothing to realign.
        pub(crate) fn restart(&self) {}

        pub(crate) fn now(&self) -> u64 {
            let now = DWT::cycle_count();
            if now < self.last.get() {
                self.high.set(self.high.get() + (1 << 32));
            }
            self.last.set(now);
            self.high.get() | u64::from(now)
        }

        pub(crate) const SOURCE: &'static str = "dwt";
    }
}

pub(crate) use imp::Counter;

impl Clock for Counter {
    fn now(&self) -> u64 {
        Counter::now(self)
    }
}
