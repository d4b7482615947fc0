//! Where the instructions of each invoke went: executions of every
//! translated block, by the op that ran it, for `hilt run --hotspots`.
//!
//! A block is counted once each time it is entered, with its full length:
//! a block QEMU abandons half-way (a peripheral access under `-icount`) is
//! counted whole, so the figures are exact for kernels and within a few
//! instructions for code that touches peripherals. The host maps each
//! block's address to its function in the ELF.

use std::collections::HashMap;
use std::io::Write;

use crate::checker::Runner;

/// Who ran a block: an op's kernel, an op's job on the engine, or the
/// interpreter between ops.
fn runner_text(runner: Runner) -> String {
    match runner {
        Runner::Op(op) => format!("op:{op}"),
        Runner::Job(op) => format!("job:{op}"),
        Runner::Interpreter => "interpreter".into(),
    }
}

/// Block executions inside invokes, kept until written.
#[derive(Debug, Default)]
pub struct Hotspots {
    /// (runner, block start) → (executions, instructions in the block).
    blocks: HashMap<(Runner, u64), (u64, u64)>,
}

impl Hotspots {
    /// Block `start`, `instructions` long, entered once by `runner`.
    pub fn enter(&mut self, runner: Runner, start: u64, instructions: u64) {
        self.blocks
            .entry((runner, start))
            .or_insert((0, instructions))
            .0 += 1;
    }

    /// Writes every block seen so far, one line each: `runner start
    /// executions instructions` (start in hex), sorted, so that a file
    /// rewritten after every invoke always holds the totals so far.
    pub fn write(&self, out: &mut impl Write) -> std::io::Result<()> {
        let mut lines: Vec<_> = self
            .blocks
            .iter()
            .map(|(&(runner, start), &(runs, len))| (runner_text(runner), start, runs, len))
            .collect();
        lines.sort();
        for (runner, start, runs, len) in lines {
            writeln!(out, "{runner} {start:#x} {runs} {len}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_add_up_by_runner_and_start() {
        let mut p = Hotspots::default();
        p.enter(Runner::Op(2), 0x1000, 5);
        p.enter(Runner::Op(2), 0x1000, 5);
        p.enter(Runner::Interpreter, 0x1000, 5);
        p.enter(Runner::Job(0), 0x2000, 3);
        let mut text = Vec::new();
        p.write(&mut text).unwrap();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "interpreter 0x1000 1 5\njob:0 0x2000 1 3\nop:2 0x1000 2 5\n"
        );
    }
}
