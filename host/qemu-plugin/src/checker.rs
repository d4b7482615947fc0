//! The access check: from the control file's memory and the committed
//! plan, whether one load or store is one the code running may make.
//!
//! Within an invoke, an op's kernel (between its start and done marks) may
//! touch in the arena's planned head only its own buffers (inputs, outputs,
//! scratch); a job's kernel on an engine only its op's. The persistent tail
//! is open to both (the plan does not say which op owns which tail bytes).
//! While a job is in flight, a CPU op may not touch what the job writes,
//! nor write what it reads. The interpreter's own work between ops may
//! touch the whole arena. Everyone may touch the firmware's code, data and
//! statics, the stack and the peripherals; a stack access (through SP)
//! outside the stack is an overflow; anything else is outside every region.
//!
//! A plan whose buffers share bytes while both are live (a broken planner
//! or allocator port, committed without the runtime's plan check) passes
//! the rule above: each op writes only its own buffers. So a store by an
//! op (or its job) into bytes that one of its written buffers shares with
//! another buffer live at that op is a violation of its own, made at the
//! first store that clobbers live data. And an op stores only into the
//! buffers it writes (outputs, scratch, intermediates): a store into one of
//! its inputs is a violation too.

use crate::control::{Control, Plan, Span};

/// Who is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Runner {
    /// Op `n`'s kernel on the CPU.
    Op(u32),
    /// The job of op `n`, computed by an engine.
    Job(u32),
    /// The interpreter between ops.
    Interpreter,
}

/// Why an access is a violation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// In the planned head, outside every buffer the runner may touch.
    NotItsBuffer,
    /// A buffer the job in flight holds.
    HeldByJob,
    /// Through SP, outside the stack.
    StackOverflow,
    /// Outside every region of the firmware.
    Unmapped,
    /// Into bytes its output shares with another buffer live at the op.
    OverwritesLiveBuffer,
    /// A store into one of its inputs (a buffer it may only read).
    WritesInput,
}

impl Fault {
    /// The word the results file uses.
    pub fn word(self) -> &'static str {
        match self {
            Fault::NotItsBuffer => "not-its-buffer",
            Fault::HeldByJob => "held-by-job",
            Fault::StackOverflow => "stack-overflow",
            Fault::Unmapped => "unmapped",
            Fault::OverwritesLiveBuffer => "overwrites-live-buffer",
            Fault::WritesInput => "writes-input",
        }
    }
}

/// One load or store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// Guest address.
    pub addr: u64,
    /// Bytes.
    pub size: u64,
    /// A store (else a load).
    pub store: bool,
    /// Made through SP (a push, a pop, an SP-relative load or store).
    pub via_sp: bool,
}

/// The check, built once per plan.
#[derive(Debug, Clone, Default)]
pub struct Checker {
    arena: Option<Span>,
    head: Option<Span>,
    /// Per op: the absolute spans of its buffers, sorted by start.
    uses: Vec<Vec<Span>>,
    /// Per op: the spans it writes.
    writes: Vec<Vec<Span>>,
    /// Per op: the bytes its written buffers share with another buffer
    /// live at that op.
    clobbers: Vec<Vec<Span>>,
    allowed: Vec<Span>,
    stack: Option<Span>,
}

fn spans(plan: &Plan, base: u64, numbers: &[usize]) -> Vec<Span> {
    let mut v: Vec<Span> = numbers
        .iter()
        .filter_map(|&n| plan.buffers.get(n))
        .map(|b| Span {
            start: base + b.offset,
            end: base + b.offset + b.size,
        })
        .collect();
    v.sort_by_key(|s| s.start);
    v
}

/// The bytes op `op`'s written buffers share with another buffer live at
/// `op` (buffers without lifetimes are taken as never sharing).
fn clobbers(plan: &Plan, base: u64, op: usize) -> Vec<Span> {
    let step = op as u64;
    let live = |n: usize| {
        plan.buffers[n]
            .live
            .is_some_and(|(first, last)| first <= step && step <= last)
    };
    let mut out = Vec::new();
    for &w in &plan.ops[op].writes {
        let a = &plan.buffers[w];
        for (n, b) in plan.buffers.iter().enumerate() {
            if n == w || !live(n) || !live(w) {
                continue;
            }
            let start = a.offset.max(b.offset);
            let end = (a.offset + a.size).min(b.offset + b.size);
            if start < end {
                out.push(Span {
                    start: base + start,
                    end: base + end,
                });
            }
        }
    }
    out
}

impl Checker {
    /// The check for `control`'s memory and, once committed, `plan`.
    pub fn new(control: &Control, plan: Option<&Plan>) -> Checker {
        let mut c = Checker {
            allowed: control.allowed.iter().map(|(_, s)| *s).collect(),
            stack: control.stack,
            ..Checker::default()
        };
        if let Some(plan) = plan
            && let Some(arena) = plan.arena
        {
            c.arena = Some(arena);
            c.head = Some(Span {
                start: arena.start,
                end: arena.start + plan.head.min(arena.end - arena.start),
            });
            c.uses = plan
                .ops
                .iter()
                .map(|o| spans(plan, arena.start, &o.uses))
                .collect();
            c.writes = plan
                .ops
                .iter()
                .map(|o| spans(plan, arena.start, &o.writes))
                .collect();
            c.clobbers = (0..plan.ops.len())
                .map(|op| clobbers(plan, arena.start, op))
                .collect();
        }
        c
    }

    /// The stack's range, if known.
    pub fn stack(&self) -> Option<Span> {
        self.stack
    }

    /// Whether op `op` has a plan to be checked against.
    pub fn knows_op(&self, op: u32) -> bool {
        (op as usize) < self.uses.len()
    }

    fn within(spans: &[Span], a: &Access) -> bool {
        // Sorted by start: any span starting at or before the address (an
        // op's buffers may overlap one another: an in-place op's, or a
        // broken plan's, which the plan check names, not this one).
        let i = spans.partition_point(|s| s.start <= a.addr);
        spans[..i].iter().any(|s| s.holds(a.addr, a.size))
    }

    fn meets(spans: &[Span], a: &Access) -> bool {
        spans.iter().any(|s| s.meets(a.addr, a.size))
    }

    /// The fault in `a` made by `runner` while the job of op `in_flight`
    /// (if any) is on an engine; `None` when it is allowed.
    pub fn check(&self, runner: Runner, in_flight: Option<u32>, a: &Access) -> Option<Fault> {
        if let Some(stack) = self.stack {
            if stack.holds(a.addr, a.size) {
                return None;
            }
            if a.via_sp {
                return Some(Fault::StackOverflow);
            }
        }
        if let Some(arena) = self.arena
            && arena.meets(a.addr, a.size)
        {
            return self.check_arena(runner, in_flight, a);
        }
        if self.allowed.iter().any(|s| s.holds(a.addr, a.size)) {
            None
        } else {
            Some(Fault::Unmapped)
        }
    }

    fn check_arena(&self, runner: Runner, in_flight: Option<u32>, a: &Access) -> Option<Fault> {
        let in_head = self.head.is_some_and(|h| h.meets(a.addr, a.size));
        let op = match runner {
            Runner::Op(op) | Runner::Job(op) => op,
            Runner::Interpreter => return None,
        };
        if let (Runner::Op(_), Some(job)) = (runner, in_flight)
            && job != op
        {
            let held = self
                .writes
                .get(job as usize)
                .is_some_and(|w| Self::meets(w, a))
                || (a.store
                    && self
                        .uses
                        .get(job as usize)
                        .is_some_and(|u| Self::meets(u, a)));
            if held {
                return Some(Fault::HeldByJob);
            }
        }
        if !in_head {
            // The persistent tail (or the gap past the head): open to all.
            return None;
        }
        if a.store
            && self
                .clobbers
                .get(op as usize)
                .is_some_and(|c| Self::meets(c, a))
        {
            return Some(Fault::OverwritesLiveBuffer);
        }
        match self.uses.get(op as usize) {
            // Its own buffers: a store only into what it writes (an
            // in-place op's output shares its input's bytes, and is among
            // them).
            Some(uses) if Self::within(uses, a) => {
                let writes = self.writes.get(op as usize).map_or(&[][..], Vec::as_slice);
                (a.store && !Self::within(writes, a)).then_some(Fault::WritesInput)
            }
            Some(_) => Some(Fault::NotItsBuffer),
            // No plan for this op (none sent yet): not checked.
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checker() -> Checker {
        let control = Control::parse(
            "out o\nregion code 0x0 0x10000\nregion data 0x20000000 0x100000\nstack 0x20100000 0x1000\n",
        )
        .unwrap();
        // Arena at 0x20010000: head 0x100; buffers 0 [0,64) 1 [64,96) 2 [0,32) (2 reuses 0's bytes).
        let plan = Plan::parse(
            "arena 0x20010000 0x1000 head 0x100\nbuffer 0 64\nbuffer 64 32\nbuffer 0 32\n\
             op 0,1 1\nop 1,2 2\n",
        )
        .unwrap();
        Checker::new(&control, Some(&plan))
    }

    fn load(addr: u64, size: u64) -> Access {
        Access {
            addr,
            size,
            store: false,
            via_sp: false,
        }
    }

    fn store(addr: u64, size: u64) -> Access {
        Access {
            store: true,
            ..load(addr, size)
        }
    }

    #[test]
    fn an_op_touches_its_own_buffers_and_nothing_else_in_the_head() {
        let c = checker();
        assert_eq!(c.check(Runner::Op(0), None, &load(0x2001_0000, 4)), None);
        assert_eq!(c.check(Runner::Op(0), None, &load(0x2001_005c, 4)), None);
        // One element past buffer 1 (ends at 96).
        assert_eq!(
            c.check(Runner::Op(0), None, &load(0x2001_0060, 1)),
            Some(Fault::NotItsBuffer)
        );
        // Straddling the end.
        assert_eq!(
            c.check(Runner::Op(0), None, &load(0x2001_005e, 4)),
            Some(Fault::NotItsBuffer)
        );
        // Op 1 may not touch buffer 0's bytes beyond buffer 2's 32.
        assert_eq!(
            c.check(Runner::Op(1), None, &load(0x2001_0020, 4)),
            Some(Fault::NotItsBuffer)
        );
        // The interpreter may; the tail is open to all.
        assert_eq!(
            c.check(Runner::Interpreter, None, &load(0x2001_0020, 4)),
            None
        );
        assert_eq!(c.check(Runner::Op(1), None, &load(0x2001_0800, 4)), None);
    }

    #[test]
    fn a_buffer_inside_another_of_the_same_op_hides_nothing() {
        let control = Control::parse("out o\n").unwrap();
        // Buffer 1 [40,48) lies inside buffer 0 [0,768): byte 51 is buffer 0's.
        let plan = Plan::parse(
            "arena 0x20000000 0x1000 head 0x400\nbuffer 0 768\nbuffer 40 8\nop 0,1 1\n",
        )
        .unwrap();
        let c = Checker::new(&control, Some(&plan));
        assert_eq!(c.check(Runner::Op(0), None, &load(0x2000_0033, 4)), None);
    }

    #[test]
    fn a_cpu_op_may_not_touch_what_the_job_in_flight_holds() {
        let c = checker();
        // Job of op 0 writes buffer 1: op 1 reading it is caught.
        assert_eq!(
            c.check(Runner::Op(1), Some(0), &load(0x2001_0040, 4)),
            Some(Fault::HeldByJob)
        );
        // The job itself may.
        assert_eq!(
            c.check(Runner::Job(0), Some(0), &load(0x2001_0040, 4)),
            None
        );
    }

    #[test]
    fn stack_accesses_outside_the_stack_are_an_overflow_and_wild_ones_unmapped() {
        let c = checker();
        let push = Access {
            addr: 0x200f_fffc,
            size: 4,
            store: true,
            via_sp: true,
        };
        assert_eq!(
            c.check(Runner::Interpreter, None, &push),
            Some(Fault::StackOverflow)
        );
        let inside = Access {
            addr: 0x2010_0ffc,
            ..push
        };
        assert_eq!(c.check(Runner::Op(0), None, &inside), None);
        assert_eq!(
            c.check(Runner::Op(0), None, &load(0x3000_0000, 4)),
            Some(Fault::Unmapped)
        );
        assert_eq!(c.check(Runner::Op(0), None, &load(0x100, 4)), None);
    }

    #[test]
    fn a_store_into_bytes_shared_with_a_live_buffer_is_named_at_once() {
        let control = Control::parse("out o\nregion data 0x20000000 0x100000\n").unwrap();
        // A broken first fit: op 0 reads buffer 0 [0,64) (live 0..0) and
        // writes buffer 1 [32,96) (live 0..1), sharing [32,64) while both
        // are live; buffer 2 [0,32) reuses buffer 0's bytes after it died.
        let plan = Plan::parse(
            "arena 0x20010000 0x1000 head 0x100\nbuffer 0 64 0 0\nbuffer 32 64 0 1\n\
             buffer 0 32 1 1\nop 0,1 1\nop 1,2 2\n",
        )
        .unwrap();
        let c = Checker::new(&control, Some(&plan));
        let store = |addr| store(addr, 4);
        let base = 0x2001_0000;
        // Op 0's store into the shared bytes: caught at the first one.
        assert_eq!(
            c.check(Runner::Op(0), None, &store(base + 32)),
            Some(Fault::OverwritesLiveBuffer)
        );
        // Its job's too.
        assert_eq!(
            c.check(Runner::Job(0), None, &store(base + 60)),
            Some(Fault::OverwritesLiveBuffer)
        );
        // The rest of its output is its own; reading the shared bytes is
        // what it was planned to do.
        assert_eq!(c.check(Runner::Op(0), None, &store(base + 64)), None);
        assert_eq!(c.check(Runner::Op(0), None, &load(base + 32, 4)), None);
        // Op 1 writes buffer 2 over buffer 0's bytes after buffer 0 died.
        assert_eq!(c.check(Runner::Op(1), None, &store(base)), None);
    }

    #[test]
    fn an_op_may_read_its_inputs_but_store_only_into_what_it_writes() {
        let c = checker();
        let store = |addr| store(addr, 1);
        // Op 0 uses buffers 0 [0,64) and 1 [64,96) and writes 1.
        let base = 0x2001_0000;
        assert_eq!(c.check(Runner::Op(0), None, &load(base, 1)), None);
        assert_eq!(c.check(Runner::Op(0), None, &store(base + 64)), None);
        assert_eq!(
            c.check(Runner::Op(0), None, &store(base)),
            Some(Fault::WritesInput)
        );
        assert_eq!(
            c.check(Runner::Job(0), None, &store(base + 8)),
            Some(Fault::WritesInput)
        );
    }
}
