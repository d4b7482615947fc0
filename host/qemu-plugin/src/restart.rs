//! Where QEMU cut its blocks must not show in the figures.
//!
//! Each instruction's count is an inline add at its start, and its static
//! cycles are costed at translation with the instruction before it in the
//! same block. Where QEMU ends a block depends on more than the code:
//! under `-icount` a block is cut short when the next timer event is near,
//! and that depends on how long the host took to answer. Two things then
//! came and went between runs of the same firmware, and the gate holds the
//! figures to the instruction, so both are put right here:
//!
//! - **Instructions run twice.** A block that touches a peripheral (a
//!   SysTick read, a UART register) anywhere but at its end is abandoned at
//!   that access, and the access runs again as a block of its own (QEMU's
//!   I/O recompile). The abandoned instruction had been counted. Rule: a
//!   block that was entered but whose last instruction never ran was
//!   abandoned; if the next block starts at one of its instructions, that
//!   instruction's first count and cycles are taken back. (A block
//!   abandoned for an exception continues in the handler, not inside
//!   itself, and keeps its counts: the faulting instruction did start.)
//! - **Pipelining across a cut.** A load after a load costs a cycle less
//!   on the M3/M4 family; costed per block, the pair lost its discount
//!   whenever a cut fell between them. Rule: the first instruction of a
//!   block is costed again against the instruction that really ran before
//!   it (the last of the previous block, when that block finished and did
//!   not branch; the one before the re-run instruction, after an abandoned
//!   block), and the difference is taken back.

use std::sync::Arc;

use crate::timing::Insn;

/// One instruction of a translated block: its address, the cycles its
/// inline add charges, and its decoding.
#[derive(Debug, Clone, Copy)]
pub struct BlockInsn {
    /// Address.
    pub pc: u64,
    /// Cycles charged at its start.
    pub cycles: u64,
    /// Decoded.
    pub insn: Insn,
}

/// One translated block, in order.
pub type Block = Arc<[BlockInsn]>;

/// What entering a block changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Entry {
    /// Cycles to take back with one instruction: the re-run one's first
    /// count.
    pub rerun: Option<u64>,
    /// The instruction that ran just before this block's first, when it is
    /// known: the first is costed against it.
    pub previous: Option<Insn>,
}

/// The last block entered, and the count of finished blocks at its entry.
#[derive(Debug, Default)]
pub struct Restarts {
    last: Option<(Block, u64)>,
}

impl Restarts {
    /// A block `block` starting at `start` is entered; `finished` counts the
    /// blocks whose last instruction has run.
    pub fn enter(&mut self, start: u64, block: Block, finished: u64) -> Entry {
        let Some((prev, finished_then)) = self.last.replace((block, finished)) else {
            return Entry::default();
        };
        if finished != finished_then {
            // The previous block ran to its end: its last instruction came
            // just before this one (a branch, when it branched here, which
            // pipelines with nothing).
            return Entry {
                rerun: None,
                previous: prev.last().map(|i| i.insn),
            };
        }
        match prev.iter().position(|i| i.pc == start) {
            Some(k) => Entry {
                rerun: Some(prev[k].cycles),
                previous: k.checked_sub(1).map(|p| prev[p].insn),
            },
            None => Entry::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::decode;

    /// `ldr r0, [r1]`, `adds r0, #1`, `b .`: a load, an add, a branch.
    const LDR: [u8; 2] = [0x08, 0x68];
    const ADDS: [u8; 2] = [0x01, 0x30];
    const B: [u8; 2] = [0xfe, 0xe7];

    fn block(insns: &[(u64, [u8; 2])]) -> Block {
        insns
            .iter()
            .map(|&(pc, bytes)| BlockInsn {
                pc,
                cycles: pc / 2,
                insn: decode(&bytes),
            })
            .collect()
    }

    #[test]
    fn a_block_abandoned_at_a_peripheral_access_gives_back_that_instruction() {
        let mut r = Restarts::default();
        let a = block(&[(0x100, ADDS), (0x102, LDR), (0x104, LDR)]);
        assert_eq!(r.enter(0x100, a, 7), Entry::default());
        // Its last instruction never ran (still 7) and QEMU runs 0x104
        // again, alone: its first count (and its 0x82 cycles) go back, and
        // it is costed after the load at 0x102.
        let e = r.enter(0x104, block(&[(0x104, LDR)]), 7);
        assert_eq!(e.rerun, Some(0x82));
        assert_eq!(e.previous, Some(decode(&LDR)));
    }

    #[test]
    fn a_block_cut_mid_way_hands_its_last_instruction_to_the_next() {
        let mut r = Restarts::default();
        r.enter(0x100, block(&[(0x100, ADDS), (0x102, LDR)]), 0);
        // Finished (1), cut after the load: the next load follows it.
        let e = r.enter(0x104, block(&[(0x104, LDR)]), 1);
        assert_eq!((e.rerun, e.previous), (None, Some(decode(&LDR))));
        // A block ending in a branch hands over the branch.
        r.enter(0x200, block(&[(0x200, B)]), 1);
        let e = r.enter(0x200, block(&[(0x200, B)]), 2);
        assert_eq!(e.previous, Some(decode(&B)));
        // Abandoned for an exception: the handler is elsewhere.
        r.enter(0x300, block(&[(0x300, LDR), (0x302, ADDS)]), 3);
        assert_eq!(
            r.enter(0x8000, block(&[(0x8000, LDR)]), 3),
            Entry::default()
        );
    }
}
