//! The offload ledger: what an emulated engine's figures leave out of the
//! firmware's cycle counter and what they put in, by category. The agent
//! keeps it while it times a run and the `Offload` message carries it, so
//! that the host reports each category (run output, JSON, gate snapshots).

/// What an emulated engine's figures leave out of the cycle counter and put
/// in, in counter counts, by category. Removed: the CPU's work that a real
/// engine does itself. Kept: the CPU's work that a real driver does, which
/// an emulation does not (or not at its cost), modelled by the runtime's
/// `vnpu::DriverModel`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineLedger {
    /// Removed: the engine's own work emulated on the CPU (the job's
    /// kernel, in PendSV, and its checks at submit, retire and abort).
    pub engine: u64,
    /// Removed: a non-coherent engine's shadow copies at clean and
    /// invalidate (a real cache writes back or drops lines instead).
    pub shadow: u64,
    /// Removed: waits that slept past the job's completion (a `WFE` woken
    /// by the next tick, where a real engine's interrupt comes on time).
    pub oversleep: u64,
    /// Kept (modelled): the driver's job set-up, per submit.
    pub driver_submit: u64,
    /// Kept (modelled): cache maintenance, per line cleaned or invalidated.
    pub driver_cache: u64,
}

impl EngineLedger {
    /// Everything removed.
    pub fn removed(&self) -> u64 {
        self.engine + self.shadow + self.oversleep
    }

    /// Everything kept (put in).
    pub fn kept(&self) -> u64 {
        self.driver_submit + self.driver_cache
    }

    /// What was added since `earlier`.
    pub fn since(&self, earlier: &EngineLedger) -> EngineLedger {
        EngineLedger {
            engine: self.engine - earlier.engine,
            shadow: self.shadow - earlier.shadow,
            oversleep: self.oversleep - earlier.oversleep,
            driver_submit: self.driver_submit - earlier.driver_submit,
            driver_cache: self.driver_cache - earlier.driver_cache,
        }
    }
}
