//! What the marks mean: which op is running, who is touching memory, and
//! each op's instructions, cycles and deepest stack, closed into an
//! invoke's figures at its end mark.
//!
//! An op's figures run from its start mark to the next op's (the last op's
//! to the invoke's end, the first op's from the invoke's start), so the
//! ops of an invoke add up to it exactly.
//!
//! An accelerator job's own work (between the job marks of a submitted
//! job: on a virtual board, the firmware emulating the engine inside an
//! interrupt) is not the CPU's: it is taken out of the op it interrupted
//! and of the invoke, and counted apart as the engine's, as the
//! firmware's own figures remove it.

use crate::checker::Runner;
use crate::control::Mark;

/// The two running counts a mark reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Instructions executed.
    pub instructions: u64,
    /// Estimated cycles.
    pub cycles: u64,
}

impl Counts {
    fn since(self, start: Counts) -> Counts {
        Counts {
            instructions: self.instructions - start.instructions,
            cycles: self.cycles - start.cycles,
        }
    }

    fn plus(self, other: Counts) -> Counts {
        Counts {
            instructions: self.instructions + other.instructions,
            cycles: self.cycles + other.cycles,
        }
    }

    fn less(self, other: Counts) -> Counts {
        Counts {
            instructions: self.instructions.saturating_sub(other.instructions),
            cycles: self.cycles.saturating_sub(other.cycles),
        }
    }
}

/// One op's figures in one invoke.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpFigures {
    /// Instructions and cycles.
    pub counts: Counts,
    /// The lowest stack address touched while it ran.
    pub stack_low: Option<u64>,
}

/// A finished invoke.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invoke {
    /// Its number (from 1, per QEMU run).
    pub number: u64,
    /// Its total, the CPU's (the engine's work taken out).
    pub counts: Counts,
    /// Per op, in order (the CPU's, as the total).
    pub ops: Vec<OpFigures>,
    /// The accelerator jobs' own work during the invoke.
    pub engine: Counts,
}

/// The state the marks move.
#[derive(Debug, Default)]
pub struct Ledger {
    invokes: u64,
    /// The invoke running: its start and the figures so far.
    running: Option<(Counts, Vec<OpFigures>)>,
    /// The current op and where its figures started.
    op: Option<(u32, Counts)>,
    /// Between an op's start and done marks.
    in_kernel: bool,
    /// The op whose job is in flight.
    job: Option<u32>,
    /// How deep in (nested) job start marks the engine is: above 0, it is
    /// computing the job now.
    job_depth: u32,
    /// Where the running job's own work started (its outer start mark).
    engine_from: Option<Counts>,
    /// The engine's work in the current op, and in the invoke.
    engine_in_op: Counts,
    engine_in_invoke: Counts,
}

impl Ledger {
    /// Moves the state for `mark` at `now`; the invoke's figures when it ends.
    pub fn mark(&mut self, mark: Mark, now: Counts) -> Option<Invoke> {
        match mark {
            Mark::InvokeStart => {
                self.invokes += 1;
                self.running = Some((now, Vec::new()));
                self.op = None;
                self.in_kernel = false;
                self.job = None;
                self.job_depth = 0;
                self.engine_from = None;
                self.engine_in_op = Counts::default();
                self.engine_in_invoke = Counts::default();
            }
            Mark::OpStart => {
                let (start, ops) = self.running.as_mut()?;
                let next = match self.op {
                    Some((op, from)) => {
                        if let Some(f) = ops.get_mut(op as usize) {
                            f.counts = now.since(from).less(self.engine_in_op);
                        }
                        op + 1
                    }
                    None => 0,
                };
                let from = if next == 0 { *start } else { now };
                ops.push(OpFigures::default());
                self.op = Some((next, from));
                self.engine_in_op = Counts::default();
                self.in_kernel = true;
            }
            Mark::OpDone => self.in_kernel = false,
            Mark::JobSubmitted => self.job = self.op.map(|(op, _)| op),
            Mark::JobStart if self.job.is_some() => {
                if self.job_depth == 0 {
                    self.engine_from = Some(now);
                }
                self.job_depth += 1;
            }
            Mark::JobStart => {}
            Mark::JobEnd => {
                self.job_depth = self.job_depth.saturating_sub(1);
                if self.job_depth == 0
                    && let Some(from) = self.engine_from.take()
                {
                    let work = now.since(from);
                    self.engine_in_op = self.engine_in_op.plus(work);
                    self.engine_in_invoke = self.engine_in_invoke.plus(work);
                }
            }
            Mark::JobRetired => {
                self.job = None;
                self.job_depth = 0;
            }
            Mark::InvokeEnd => {
                let (start, mut ops) = self.running.take()?;
                if let Some((op, from)) = self.op.take()
                    && let Some(f) = ops.get_mut(op as usize)
                {
                    f.counts = now.since(from).less(self.engine_in_op);
                }
                self.in_kernel = false;
                self.job = None;
                self.job_depth = 0;
                self.engine_from = None;
                return Some(Invoke {
                    number: self.invokes,
                    counts: now.since(start).less(self.engine_in_invoke),
                    ops,
                    engine: self.engine_in_invoke,
                });
            }
        }
        None
    }

    /// Whether an invoke is running.
    pub fn in_invoke(&self) -> bool {
        self.running.is_some()
    }

    /// The invoke's number (the last started).
    pub fn invoke_number(&self) -> u64 {
        self.invokes
    }

    /// Who is touching memory now.
    pub fn runner(&self) -> Runner {
        match (self.job_depth > 0, self.job, self.op) {
            (true, Some(job), _) => Runner::Job(job),
            (_, _, Some((op, _))) if self.in_kernel => Runner::Op(op),
            _ => Runner::Interpreter,
        }
    }

    /// The op whose job is in flight.
    pub fn in_flight(&self) -> Option<u32> {
        self.job
    }

    /// Notes a stack access at `addr` for the current op.
    pub fn note_stack(&mut self, addr: u64) {
        if let (Some((_, ops)), Some((op, _))) = (self.running.as_mut(), self.op)
            && let Some(f) = ops.get_mut(op as usize)
        {
            f.stack_low = Some(f.stack_low.map_or(addr, |low| low.min(addr)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(i: u64) -> Counts {
        Counts {
            instructions: i,
            cycles: 2 * i,
        }
    }

    #[test]
    fn ops_partition_the_invoke_exactly() {
        let mut l = Ledger::default();
        assert_eq!(
            l.mark(Mark::OpStart, at(1)),
            None,
            "no op outside an invoke"
        );
        l.mark(Mark::InvokeStart, at(100));
        l.mark(Mark::OpStart, at(110));
        assert_eq!(l.runner(), Runner::Op(0));
        l.mark(Mark::OpDone, at(150));
        assert_eq!(l.runner(), Runner::Interpreter);
        l.mark(Mark::OpStart, at(160));
        l.note_stack(0x2000_0100);
        l.note_stack(0x2000_00f0);
        l.mark(Mark::OpDone, at(190));
        let inv = l.mark(Mark::InvokeEnd, at(200)).unwrap();
        assert_eq!(inv.number, 1);
        assert_eq!(inv.counts, at(100));
        assert_eq!(inv.ops.len(), 2);
        assert_eq!(
            inv.ops[0].counts,
            at(60),
            "from the invoke's start to op 1's"
        );
        assert_eq!(inv.ops[1].counts, at(40));
        assert_eq!(inv.ops[1].stack_low, Some(0x2000_00f0));
        let sum: u64 = inv.ops.iter().map(|o| o.counts.instructions).sum();
        assert_eq!(sum, inv.counts.instructions);
        assert!(!l.in_invoke());
    }

    #[test]
    fn a_job_runs_as_its_op_and_is_held_until_retired() {
        let mut l = Ledger::default();
        l.mark(Mark::InvokeStart, at(0));
        l.mark(Mark::OpStart, at(1));
        l.mark(Mark::JobSubmitted, at(2));
        l.mark(Mark::OpDone, at(3));
        l.mark(Mark::OpStart, at(4));
        assert_eq!((l.runner(), l.in_flight()), (Runner::Op(1), Some(0)));
        l.mark(Mark::JobStart, at(5));
        assert_eq!(l.runner(), Runner::Job(0));
        // The engine's completion wraps the kernel's own marks.
        l.mark(Mark::JobStart, at(5));
        l.mark(Mark::JobEnd, at(6));
        assert_eq!(
            l.runner(),
            Runner::Job(0),
            "still inside the outer job marks"
        );
        l.mark(Mark::JobEnd, at(6));
        assert_eq!(l.runner(), Runner::Op(1));
        l.mark(Mark::JobRetired, at(7));
        assert_eq!(l.in_flight(), None);
    }

    #[test]
    fn the_engines_work_is_taken_out_of_the_op_it_interrupted() {
        let mut l = Ledger::default();
        l.mark(Mark::InvokeStart, at(0));
        l.mark(Mark::OpStart, at(10));
        l.mark(Mark::JobSubmitted, at(20));
        l.mark(Mark::OpDone, at(30));
        l.mark(Mark::OpStart, at(40));
        // The engine completes inside op 1: 500 of its instructions.
        l.mark(Mark::JobStart, at(100));
        l.mark(Mark::JobStart, at(110));
        l.mark(Mark::JobEnd, at(590));
        l.mark(Mark::JobEnd, at(600));
        l.mark(Mark::JobRetired, at(700));
        // The CPU's own work through the job path (no job in flight) is
        // the CPU's.
        l.mark(Mark::JobStart, at(710));
        l.mark(Mark::JobEnd, at(720));
        let inv = l.mark(Mark::InvokeEnd, at(800)).unwrap();
        assert_eq!(inv.engine, at(500));
        assert_eq!(inv.ops[0].counts, at(40));
        assert_eq!(inv.ops[1].counts, at(260), "760 less the engine's 500");
        assert_eq!(inv.counts, at(300));
        let sum: u64 = inv.ops.iter().map(|o| o.counts.instructions).sum();
        assert_eq!(sum, inv.counts.instructions);
    }
}
