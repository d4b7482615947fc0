//! Who reaches a memory, or must reach a buffer: the CPU, an accelerator.
//!
//! A buffer request carries it (an engine's job buffers must land where the
//! engine reaches) and a pool declares it, so it sits below both: requests
//! and pools name it, and it names neither.

use core::fmt;

/// Who reaches a memory (or must reach a buffer): bit flags.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Reach(u16);

impl Reach {
    /// The CPU (every pool and buffer).
    pub const CPU: Reach = Reach(1);
    /// A DMA engine or accelerator.
    pub const ACCEL: Reach = Reach(2);

    /// From raw bits (unknown bits are kept, so a newer firmware's flags
    /// are never silently dropped).
    pub const fn from_bits(bits: u16) -> Reach {
        Reach(bits)
    }

    /// The raw bits.
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// Both sets.
    #[must_use]
    pub const fn with(self, other: Reach) -> Reach {
        Reach(self.0 | other.0)
    }

    /// Whether everyone in `other` is in `self`.
    pub const fn covers(self, other: Reach) -> bool {
        self.0 & other.0 == other.0
    }
}

impl fmt::Debug for Reach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (bit, name) in [(Reach::CPU, "cpu"), (Reach::ACCEL, "accel")] {
            if self.covers(bit) {
                if !first {
                    f.write_str("+")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}
