//! Faults a test build injects (feature `fault-injection`): the bugs a
//! kernel, a planner port or an NPU integration really has, armed one at a
//! time so that the test that must catch each can show it does.
//!
//! Without the feature [`Faults`] is empty and every check below is a
//! constant, so the invoke loop carries none of this.

use crate::accel::Job;
#[cfg(feature = "fault-injection")]
use crate::accel::{Access, OffloadFault, RegionRole};
use crate::allocation::TensorSlot;
#[cfg(feature = "fault-injection")]
use crate::canary;
use crate::profile::Clock;

#[cfg(feature = "fault-injection")]
use super::Interpreter;

/// The armed faults (none by default).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Faults {
    #[cfg(feature = "fault-injection")]
    drop_holds: bool,
    #[cfg(feature = "fault-injection")]
    overrun: Option<(u32, u32)>,
    #[cfg(feature = "fault-injection")]
    slowdown: Option<(u32, u32, u64)>,
    #[cfg(feature = "fault-injection")]
    offload_fault: Option<OffloadFault>,
    #[cfg(feature = "fault-injection")]
    unchecked_plan: bool,
    /// Op whose kernel then reads one byte past its first input.
    #[cfg(feature = "fault-injection")]
    over_read: Option<u32>,
    /// Op whose kernel then writes its first input (the byte it holds).
    #[cfg(feature = "fault-injection")]
    write_input: Option<u32>,
    /// Op after whose kernel a function of the firmware's runs, inside the
    /// op (a fault the runtime cannot make itself: a stack overflow).
    #[cfg(feature = "fault-injection")]
    after_op: Option<(u32, fn())>,
}

impl Faults {
    /// Whether a fault is armed that the watched loop acts on (the plain
    /// loop has none of them).
    #[inline(always)]
    pub(super) fn any(&self) -> bool {
        #[cfg(feature = "fault-injection")]
        if self.overrun.is_some()
            || self.slowdown.is_some()
            || self.offload_fault.is_some()
            || self.over_read.is_some()
            || self.write_input.is_some()
            || self.after_op.is_some()
        {
            return true;
        }
        false
    }

    /// Whether the schedule's waits are skipped.
    #[inline(always)]
    pub(super) fn skips_waits(&self) -> bool {
        #[cfg(feature = "fault-injection")]
        if self.offload_fault == Some(OffloadFault::SkipWait) {
            return true;
        }
        false
    }

    /// Whether the CPU cleans before a submit and invalidates after a wait
    /// (both, unless a fault leaves one out).
    #[inline(always)]
    pub(super) fn cleans(&self) -> (bool, bool) {
        #[cfg(feature = "fault-injection")]
        match self.offload_fault {
            Some(OffloadFault::MissingClean) => return (false, true),
            Some(OffloadFault::MissingInvalidate) => return (true, false),
            _ => {}
        }
        (true, true)
    }

    /// Whether the plan is made without the offload holds.
    pub(super) fn drops_holds(&self) -> bool {
        #[cfg(feature = "fault-injection")]
        if self.drop_holds {
            return true;
        }
        false
    }

    /// Whether the planner's plan is committed unchecked.
    #[cfg(feature = "fault-injection")]
    pub(super) fn skips_plan_check(&self) -> bool {
        self.unchecked_plan
    }

    /// Damages the job a kernel path built, as the armed fault says.
    #[cfg_attr(not(feature = "fault-injection"), allow(unused_variables))]
    pub(super) fn damage_job(&self, job: &mut Job) {
        #[cfg(feature = "fault-injection")]
        match self.offload_fault {
            Some(OffloadFault::Misaligned) => job.map_regions(|r| {
                if matches!(r.role, RegionRole::Output(_)) {
                    r.address += 4;
                }
            }),
            Some(OffloadFault::WriteReadOnly) => job.map_regions(|r| {
                if matches!(r.role, RegionRole::Output(_)) {
                    r.access = Access::Read;
                }
            }),
            _ => {}
        }
    }

    /// After op `op`'s kernel, started at `start` on `clock`: spins as long
    /// as a slowed-down kernel would have taken (inside the op's timing).
    #[cfg_attr(not(feature = "fault-injection"), allow(unused_variables))]
    #[inline(always)]
    pub(super) fn stretch<C: Clock + ?Sized>(
        &self,
        op: u32,
        clock: Option<&C>,
        start: Option<u64>,
    ) {
        #[cfg(feature = "fault-injection")]
        if let (Some((fault_op, permille, extra)), Some(clock), Some(start)) =
            (self.slowdown, clock, start)
            && fault_op == op
        {
            // The kernel's own time, stretched by `permille` and `extra`
            // counts: as if its code did that much more work.
            let took = clock.now().saturating_sub(start);
            let until = took + took * u64::from(permille) / 1000 + extra;
            while clock.now().saturating_sub(start) < until {
                core::hint::spin_loop();
            }
        }
    }

    /// After op `op`'s kernel, still inside the op: the armed kernel bug
    /// of that op, if any. Writes past the end of its first output (the
    /// tensor `first_output` names, asked only when armed), reads one byte
    /// past its first input, writes its first input (the byte it holds, so
    /// only an access check sees it), or runs the firmware's own fault.
    #[cfg_attr(not(feature = "fault-injection"), allow(unused_variables))]
    #[inline(always)]
    pub(super) fn after_kernel(
        &self,
        op: u32,
        first_input: impl FnOnce() -> Option<u32>,
        first_output: impl FnOnce() -> Option<u32>,
        slots: &[TensorSlot],
        base: *mut u8,
        len: usize,
    ) {
        #[cfg(feature = "fault-injection")]
        {
            if let Some((fault_op, bytes)) = self.overrun
                && fault_op == op
                && let Some(out) = first_output()
                && let Some(slot) = slots.get(out as usize)
            {
                let end = (slot.offset + slot.bytes) as usize;
                for i in 0..(bytes as usize).min(len.saturating_sub(end)) {
                    // SAFETY: inside the arena; this is the injected bug itself.
                    unsafe { *base.add(end + i) = !canary::pattern(i) };
                }
            }
            let input = if self.over_read == Some(op) || self.write_input == Some(op) {
                first_input()
                    .and_then(|t| slots.get(t as usize))
                    .filter(|s| s.bytes > 0 && s.offset & TensorSlot::IN_MODEL == 0)
            } else {
                None
            };
            if self.over_read == Some(op)
                && let Some(slot) = input
                && ((slot.offset + slot.bytes) as usize) < len
            {
                // SAFETY: inside the arena; the injected bug: a loop bound
                // one element too far.
                let byte = unsafe {
                    core::ptr::read_volatile(base.add((slot.offset + slot.bytes) as usize))
                };
                core::hint::black_box(byte);
            }
            if self.write_input == Some(op)
                && let Some(slot) = input
            {
                // SAFETY: inside the arena, the input's own first byte,
                // written back unchanged: the injected bug is the store.
                unsafe {
                    let at = base.add(slot.offset as usize);
                    core::ptr::write_volatile(at, core::ptr::read_volatile(at));
                }
            }
            if let Some((fault_op, fault)) = self.after_op
                && fault_op == op
            {
                fault();
            }
        }
    }
}

#[cfg(feature = "fault-injection")]
impl Interpreter<'_, '_, '_> {
    /// Test builds only: after op `op` runs, write `bytes` bytes just past
    /// the end of its first output, as a buggy kernel would.
    pub fn inject_overrun(&mut self, op: u32, bytes: u32) {
        self.faults.overrun = Some((op, bytes));
    }

    /// Test builds only: after op `op` runs, read one byte just past its
    /// first input, as a kernel whose loop runs one element too far would.
    pub fn inject_over_read(&mut self, op: u32) {
        self.faults.over_read = Some(op);
    }

    /// Test builds only: after op `op` runs, store into its first input (a
    /// buffer still live, not its output).
    pub fn inject_write_input(&mut self, op: u32) {
        self.faults.write_input = Some(op);
    }

    /// Test builds only: after op `op`'s kernel, inside the op, run
    /// `fault` (the firmware's own, e.g. a stack overflow).
    pub fn inject_after_op(&mut self, op: u32, fault: fn()) {
        self.faults.after_op = Some((op, fault));
    }

    /// Test builds only: the offload path has `fault` (see [`OffloadFault`]).
    pub fn inject_offload_fault(&mut self, fault: Option<OffloadFault>) {
        self.faults.offload_fault = fault;
    }

    /// Test builds only: plan without the offload holds, as a scheduler that
    /// forgot them would (takes effect at the next allocate). The engine's
    /// lease check is what must then catch it.
    pub fn inject_drop_holds(&mut self) {
        self.faults.drop_holds = true;
    }

    /// Test builds only: commit the planner's plan even if live buffers
    /// overlap (from the next allocate; alignment and bounds are still
    /// checked), so that a broken planner port's overlapping buffers reach
    /// the kernels and the buffer canaries must catch them.
    pub fn inject_unchecked_plan(&mut self) {
        self.faults.unchecked_plan = true;
    }

    /// Test builds only: op `op` takes `permille`/1000 longer than its
    /// kernel does (a kernel made slower), in profiled invokes. The gate's
    /// tests use it to show that a slower kernel fails the gate by name.
    pub fn inject_slowdown(&mut self, op: u32, permille: u32) {
        self.faults.slowdown = Some((op, permille, 0));
    }

    /// Test builds only: op `op` takes `counts` more of the profiling
    /// clock's counts than its kernel does (on a virtual board, ticks of
    /// 40 instructions): the smallest slowdown the gate must still catch.
    pub fn inject_delay(&mut self, op: u32, counts: u64) {
        self.faults.slowdown = Some((op, 0, counts));
    }
}
