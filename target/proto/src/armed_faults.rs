//! The faults a test firmware arms at run time: one firmware per board
//! carries every fault (feature `fault-injection` of hilt-agent and of
//! hilt's firmware), and the host writes which ones are armed into a word
//! of the built ELF, as it writes the model into the model slot.
//!
//! Why: each fault used to be a cargo feature, so each was a firmware of
//! its own, a fat-LTO link (~10 s) per fault and board; hilt's fault tests
//! built seventeen. Arming by a word keeps one build per board and the
//! faults as exact as before: an unarmed site is one load and a branch.
//!
//! The word is the `u32` named [`SYMBOL`], in flash, little-endian; bit
//! `n` arms the fault whose [`Fault::bit`] is `n`.

/// The symbol of the armed-faults word, so the host finds it in the ELF.
pub const SYMBOL: &str = "HILT_ARMED_FAULTS";

/// One fault a test firmware can inject. Each is a bug a kernel, a planner
/// port, a firmware or an NPU integration really has; the test that arms
/// it shows that hilt catches and names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Fault {
    /// Never answers once asked to invoke (a firmware stuck in a kernel).
    HangOnInvoke,
    /// Flips one byte of the first result frame after its CRC was made.
    CorruptFrame,
    /// Op 0 writes 8 bytes past its output.
    Overrun,
    /// Op 0 reads one byte past its first input.
    OverRead,
    /// Op 1 stores into its first input, a live buffer not its output.
    WriteInput,
    /// Inside op 0 the stack overflows by one word (a push below its end).
    StackInOp,
    /// Op 2 takes 1% longer than its kernel does.
    SlowOp,
    /// Op 2 takes 3 counts of the clock longer (3 SysTick ticks on a
    /// virtual board): the smallest slowdown the gate must name.
    SlowOp3Ticks,
    /// The planner's plan has one buffer moved onto a live neighbour.
    Misplan,
    /// The plan is committed without the runtime's plan check.
    UncheckedPlan,
    /// The stack grows down into the arena's end before each invoke.
    StackOverflow,
    /// The firmware ignores its own canary check.
    BlindChecker,
    /// The host may ask for an offload fault with `SetOffload`.
    Accel,
    /// Inside op 0 a load through a bad pointer (an address no memory
    /// answers): a bus fault, escalated to a HardFault.
    BadPointer,
}

impl Fault {
    /// Every fault, in bit order.
    pub const ALL: [Fault; 14] = [
        Fault::HangOnInvoke,
        Fault::CorruptFrame,
        Fault::Overrun,
        Fault::OverRead,
        Fault::WriteInput,
        Fault::StackInOp,
        Fault::SlowOp,
        Fault::SlowOp3Ticks,
        Fault::Misplan,
        Fault::UncheckedPlan,
        Fault::StackOverflow,
        Fault::BlindChecker,
        Fault::Accel,
        Fault::BadPointer,
    ];

    /// Its bit in the armed-faults word.
    pub const fn bit(self) -> u32 {
        self as u32
    }

    /// The name a scenario's `faults` list uses.
    pub const fn name(self) -> &'static str {
        match self {
            Fault::HangOnInvoke => "hang-on-invoke",
            Fault::CorruptFrame => "corrupt-frame",
            Fault::Overrun => "overrun",
            Fault::OverRead => "over-read",
            Fault::WriteInput => "write-input",
            Fault::StackInOp => "stack-in-op",
            Fault::SlowOp => "slow-op",
            Fault::SlowOp3Ticks => "slow-op-3-ticks",
            Fault::Misplan => "misplan",
            Fault::UncheckedPlan => "unchecked-plan",
            Fault::StackOverflow => "stack-overflow",
            Fault::BlindChecker => "blind-checker",
            Fault::Accel => "accel",
            Fault::BadPointer => "bad-pointer",
        }
    }

    /// The fault `name` names, if any.
    pub fn from_name(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// A set of armed faults: the word the host writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ArmedFaults(pub u32);

impl ArmedFaults {
    /// No fault armed.
    pub const NONE: ArmedFaults = ArmedFaults(0);

    /// Whether `fault` is armed.
    pub const fn contains(self, fault: Fault) -> bool {
        self.0 & (1 << fault.bit()) != 0
    }

    /// This set with `fault` armed too.
    pub const fn with(self, fault: Fault) -> ArmedFaults {
        ArmedFaults(self.0 | (1 << fault.bit()))
    }

    /// Whether no fault is armed.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The armed faults, in bit order.
    pub fn iter(self) -> impl Iterator<Item = Fault> {
        Fault::ALL.into_iter().filter(move |f| self.contains(*f))
    }

    /// The word as it is stored in the firmware (little-endian).
    pub const fn to_le_bytes(self) -> [u8; 4] {
        self.0.to_le_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_has_its_own_bit_and_a_name_that_reads_back() {
        let mut word = 0u32;
        for (i, fault) in Fault::ALL.into_iter().enumerate() {
            assert_eq!(fault.bit(), i as u32);
            assert_eq!(Fault::from_name(fault.name()), Some(fault));
            word |= 1 << fault.bit();
        }
        assert_eq!(word.count_ones() as usize, Fault::ALL.len());
        assert_eq!(Fault::from_name("fault-overrun"), None);
    }

    #[test]
    fn a_set_holds_exactly_what_was_armed() {
        let set = ArmedFaults::NONE
            .with(Fault::Misplan)
            .with(Fault::UncheckedPlan);
        assert!(set.contains(Fault::Misplan) && set.contains(Fault::UncheckedPlan));
        assert!(!set.contains(Fault::Overrun));
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            [Fault::Misplan, Fault::UncheckedPlan]
        );
        assert!(ArmedFaults::NONE.is_empty() && !set.is_empty());
        assert_eq!(set.to_le_bytes(), [0, 3, 0, 0]);
    }
}
