//! What a firmware needs of a board's memories, checked before it is built:
//! a run whose arena cannot fit would otherwise link for a minute and end
//! in the linker's `will not fit in region 'RAM'`.
//!
//! How the firmware lays out its memories (`hilt-firmware-build`'s linker
//! sections over cortex-m-rt's): `RAM` holds `.data`, `.bss`, then the
//! arena (`.hilt_arena`, `AFTER .bss`), and the stack grows down from the
//! top of `RAM` towards it; a board with an `ARENA` region links the arena
//! there alone, and `RAM` keeps the rest. `FLASH` holds the code, the
//! read-only data and the model slot. The sizes of `.data`, `.bss` and the
//! code are only known after the link, so these checks are the necessary
//! part: the arena and the least stack in `RAM` (or the arena in `ARENA`),
//! the model's slot with some code in `FLASH`. What they pass may still
//! fail the link or the built firmware's own stack check, by the size of
//! its data; what they refuse can never work.

use super::{ARENA_REGION, Board};

/// The least stack a firmware is given: the agent's session, a kernel's
/// prepare and the deepest invoke together need about 10 KiB on Cortex-M
/// (seen: 9.4 KiB was not enough); the rest is margin. The host checks a
/// built firmware leaves it this much (`firmware::check_stack_room`).
pub const MIN_STACK_BYTES: u64 = 16 * 1024;

/// What does not fit one of a board's memories, by how much.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MemoryShortfall {
    /// The arena and the least stack exceed `RAM` (which also holds the
    /// firmware's data).
    #[error(
        "arena {} B + stack {} B do not fit RAM {} B (by {} B)",
        grouped(*arena),
        grouped(*stack),
        grouped(*ram),
        grouped(arena + stack - ram)
    )]
    Ram {
        /// Arena bytes.
        arena: u64,
        /// The least stack.
        stack: u64,
        /// `RAM`'s bytes.
        ram: u64,
    },
    /// The arena exceeds the board's `ARENA` region.
    #[error(
        "arena {} B does not fit the ARENA region {} B (by {} B)",
        grouped(*arena),
        grouped(*region),
        grouped(arena - region)
    )]
    ArenaRegion {
        /// Arena bytes.
        arena: u64,
        /// The region's bytes.
        region: u64,
    },
    /// The least stack exceeds `RAM` (the arena lives elsewhere).
    #[error("stack {} B does not fit RAM {} B", grouped(*stack), grouped(*ram))]
    Stack {
        /// The least stack.
        stack: u64,
        /// `RAM`'s bytes.
        ram: u64,
    },
    /// The model's slot leaves no `FLASH` for the code.
    #[error(
        "model slot {} B (the model and its {}-byte header) leaves no room for the code in \
         FLASH {} B (over by at least {} B)",
        grouped(*slot),
        hilt_proto::model_slot::HEADER,
        grouped(*flash),
        grouped(slot + 1 - flash)
    )]
    ModelSlot {
        /// The least slot holding the model.
        slot: u64,
        /// `FLASH`'s bytes.
        flash: u64,
    },
}

/// `1,000,000`: a byte count people read at a glance.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The smallest model slot a model of `model_len` bytes fits: its header
/// and bytes, in the slot's 64-byte granule (the firmware build's least
/// slot).
pub fn least_slot(model_len: u64) -> u64 {
    (model_len + hilt_proto::model_slot::HEADER as u64).next_multiple_of(64)
}

impl Board {
    /// Bytes of memory region `name`, if the board has it.
    fn region_len(&self, name: &str) -> Option<u64> {
        self.memory
            .iter()
            .find(|r| r.name == name)
            .map(|r| r.length)
    }

    /// Whether an `arena`-byte arena, the least stack and (when given) a
    /// model of `model_len` bytes can fit this board's memories: the
    /// necessary conditions, checked before a build (see the module's
    /// doc for what the link adds).
    pub fn check_budget(&self, arena: u64, model_len: Option<u64>) -> Result<(), MemoryShortfall> {
        let ram = self.region_len("RAM").unwrap_or(0);
        let stack = MIN_STACK_BYTES;
        match self.region_len(ARENA_REGION) {
            Some(region) if arena > region => {
                return Err(MemoryShortfall::ArenaRegion { arena, region });
            }
            Some(_) if stack > ram => return Err(MemoryShortfall::Stack { stack, ram }),
            Some(_) => {}
            None if arena + stack > ram => {
                return Err(MemoryShortfall::Ram { arena, stack, ram });
            }
            None => {}
        }
        let flash = self.region_len("FLASH").unwrap_or(0);
        match model_len.map(least_slot) {
            Some(slot) if slot >= flash => Err(MemoryShortfall::ModelSlot { slot, flash }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_are_grouped_by_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(131_072), "131,072");
        assert_eq!(grouped(1_000_000), "1,000,000");
    }

    #[test]
    fn shortfalls_say_what_does_not_fit_by_how_much() {
        let ram = MemoryShortfall::Ram {
            arena: 1_000_000,
            stack: 16_384,
            ram: 131_072,
        };
        assert_eq!(
            ram.to_string(),
            "arena 1,000,000 B + stack 16,384 B do not fit RAM 131,072 B (by 885,312 B)"
        );
        let slot = MemoryShortfall::ModelSlot {
            slot: 1_048_640,
            flash: 1_048_576,
        };
        assert_eq!(
            slot.to_string(),
            "model slot 1,048,640 B (the model and its 64-byte header) leaves no room for the \
             code in FLASH 1,048,576 B (over by at least 65 B)"
        );
    }
}
