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
use crate::shortfall::MemoryShortfall;

/// The stack a firmware is given unless its board declares one
/// (`stack_size`): the agent's session, a kernel's prepare and the deepest
/// invoke of every kernel together need about 10 KiB on Cortex-M (seen:
/// 9.4 KiB was not enough); the rest is margin. The host checks a built
/// firmware leaves its board this much (`firmware::check_stack_room`).
pub const MIN_STACK_BYTES: u64 = 16 * 1024;

/// The least `stack_size` a board may declare: below it not even the
/// agent's session and a small model's prepare fit. A board that declares
/// a stack this small runs only the models its scenarios were measured
/// with (the QEMU plugin reports the stack high-water and flags any access
/// below the stack as an overflow).
pub const LEAST_STACK_BYTES: u64 = 4 * 1024;

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

    /// Whether an `arena`-byte arena, the board's stack and (when given) a
    /// model of `model_len` bytes can fit this board's memories: the
    /// necessary conditions, checked before a build (see the module's
    /// doc for what the link adds).
    pub fn check_budget(&self, arena: u64, model_len: Option<u64>) -> Result<(), MemoryShortfall> {
        let ram = self.region_len("RAM").unwrap_or(0);
        let stack = self.stack_budget();
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
