//! Instructions QEMU runs twice: taking back the first, aborted count.
//!
//! Each instruction's count is an inline add at its start. Under `-icount`
//! a block that touches a peripheral (a SysTick read, a UART register)
//! anywhere but at its end is abandoned at that access and the access is
//! run again as a block of its own (QEMU's I/O recompile). The abandoned
//! instruction had already been counted, so it would be counted twice.
//! Whether a given access lands mid-block depends on where QEMU cut the
//! blocks, which depends on when the next timer event falls, which
//! depends on how long the host took to answer: the double count came
//! and went between runs of the same firmware, by one instruction in an
//! op. The gate holds counts to the instruction, so it is taken back here.
//!
//! The rule: a block that was entered but whose last instruction never
//! ran was abandoned; if the next block starts at one of its instructions,
//! that instruction runs again and its first count is taken back. (A block
//! abandoned for an exception continues in the handler, not inside
//! itself, and keeps its counts: the faulting instruction did start.)

use std::sync::Arc;

/// One translated block: each instruction's address and the cycles its
/// inline add charges.
pub type Block = Arc<[(u64, u64)]>;

/// The last block entered, and the count of finished blocks at its entry.
#[derive(Debug, Default)]
pub struct Restarts {
    last: Option<(Block, u64)>,
}

impl Restarts {
    /// A block `block` starting at `start` is entered; `finished` counts the
    /// blocks whose last instruction has run. Returns the cycles to take
    /// back with one instruction when `start` re-runs an instruction the
    /// abandoned previous block had counted.
    pub fn enter(&mut self, start: u64, block: Block, finished: u64) -> Option<u64> {
        let previous = self.last.replace((block, finished));
        let (prev, finished_then) = previous?;
        if finished != finished_then {
            return None;
        }
        prev.iter()
            .find(|&&(pc, _)| pc == start)
            .map(|&(_, cycles)| cycles)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(pcs: &[u64]) -> Block {
        pcs.iter().map(|&pc| (pc, pc / 2)).collect()
    }

    #[test]
    fn a_block_abandoned_at_a_peripheral_access_gives_back_that_instruction() {
        let mut r = Restarts::default();
        // Block A [0x100, 0x102, 0x106] entered with 7 blocks finished.
        assert_eq!(r.enter(0x100, block(&[0x100, 0x102, 0x106]), 7), None);
        // Its last instruction never ran (still 7) and QEMU runs 0x102
        // again, alone: its first count (and its 0x81 cycles) go back.
        assert_eq!(r.enter(0x102, block(&[0x102]), 7), Some(0x81));
        // That block finished (8); the next one is ordinary.
        assert_eq!(r.enter(0x106, block(&[0x106]), 8), None);
    }

    #[test]
    fn finished_blocks_loops_and_exceptions_keep_their_counts() {
        let mut r = Restarts::default();
        assert_eq!(r.enter(0x100, block(&[0x100, 0x104]), 0), None);
        // A loop back to its own start after finishing: no restart.
        assert_eq!(r.enter(0x100, block(&[0x100, 0x104]), 1), None);
        // Abandoned for an exception: the handler is elsewhere.
        assert_eq!(r.enter(0x8000, block(&[0x8000]), 1), None);
        // The first block of a run has nothing before it.
        assert_eq!(Restarts::default().enter(0x100, block(&[0x100]), 0), None);
    }
}
