//! The invoke loop that watches: per-buffer guard bands (filled when a
//! buffer is first written, checked after every op it is live in),
//! offloaded jobs (submitted, fenced and audited), per-op profiles and
//! injected faults. [`PlainRun`](super::plain::PlainRun) is the same loop
//! without any of them.

use core::cell::Cell;

use crate::accel::in_flight::{InFlight, build_job};
use crate::accel::schedule::{self, JobRecord};
use crate::accel::{AccelError, OFFLOAD_LINKED, Offload, OffloadStats, OpWork};
use crate::canary::{self, CanaryFault};
use crate::kernels::context::OpRecord;
use crate::kernels::{InvokeContext, Registration, Resolver};
use crate::model::Model;
use crate::profile::{Clock, Profile};

use super::error::{InterpreterError, op_name};
use super::faults::Faults;
use super::views::Views;

/// One watched invoke.
pub(super) struct WatchedRun<'p, 'm, 'r, C: ?Sized> {
    pub(super) model: &'p Model<'m>,
    pub(super) resolver: &'r dyn Resolver,
    pub(super) views: Views<'p>,
    /// The backend, when some op is claimed.
    pub(super) offload: Option<Offload<'r>>,
    pub(super) faults: Faults,
    pub(super) profile: Option<Profile<'p, C>>,
    pub(super) stats: OffloadStats,
    /// At most one job in flight: the schedule waits a job before the next
    /// claimed op. Dropped on an early return, which aborts it.
    pub(super) pending: Option<InFlight<'r>>,
}

impl<C: Clock + ?Sized> WatchedRun<'_, '_, '_, C> {
    /// Runs every op once; the offload figures of the run.
    pub(super) fn run(mut self) -> Result<OffloadStats, InterpreterError> {
        let model = self.model;
        for index in 0..model.operator_count() {
            // (`OFFLOAD_LINKED` first: a `no-offload` build drops the job
            // paths here, where the backend is only known to be absent at
            // run time.)
            if OFFLOAD_LINKED
                && self
                    .pending
                    .as_ref()
                    .is_some_and(|p| p.wait_before == index)
                && !self.faults.skips_waits()
            {
                self.retire()?;
            }
            // Buffers first written by this op get fresh guards.
            for g in self.views.guards.iter().filter(|g| g.first_step == index) {
                canary::fill(self.views.guard_bytes(g.offset));
            }
            let record = *self
                .views
                .records
                .get(index as usize)
                .ok_or(InterpreterError::NotAllocated)?;
            let kernel = self.resolver.get(u32::from(record.kernel)).ok_or_else(|| {
                InterpreterError::UnsupportedOperator {
                    op: index,
                    code: op_name(model, index),
                }
            })?;
            if OFFLOAD_LINKED
                && self.offload.is_some()
                && let Some(job_record) = self.views.jobs.get(index as usize)
                && job_record.claimed != 0
            {
                // An offloaded op runs no kernel on the CPU: its submission
                // is the driver's work (cache maintenance by whole lines,
                // across buffer edges), watched as the interpreter's.
                crate::marks::op_starts(index);
                crate::marks::op_done();
                self.submit(index, kernel, record, *job_record)?;
                continue;
            }
            self.audit(index)?;
            crate::marks::op_starts(index);
            let done = self.invoke_op(index, kernel, record);
            crate::marks::op_done();
            done?;
            self.check_guards(index)?;
        }
        if OFFLOAD_LINKED && self.pending.is_some() {
            self.retire()?;
        }
        Ok(self.stats)
    }

    /// Waits the job in flight (there is one).
    fn retire(&mut self) -> Result<(), InterpreterError> {
        if let (Some(offload), Some(p)) = (&self.offload, self.pending.take()) {
            p.finish(
                offload,
                &mut self.stats,
                self.profile.as_mut(),
                self.faults.cleans().1,
            )?;
        }
        Ok(())
    }

    /// Op `index` as a job on the backend.
    fn submit(
        &mut self,
        index: u32,
        kernel: &Registration,
        record: OpRecord,
        job_record: JobRecord,
    ) -> Result<(), InterpreterError> {
        let Some(offload) = self.offload else {
            return Ok(());
        };
        // One job at a time: with the schedule's fences the last one was
        // waited already (this is only for a skipped wait).
        if self.pending.is_some() {
            self.retire()?;
        }
        let start = self.profile.as_ref().map(|p| p.clock.now());
        let fail = |error| InterpreterError::Accelerator {
            op: index,
            job: 0,
            error,
        };
        let views = &self.views;
        let mut job = build_job(
            self.model,
            index,
            views.slots,
            views.scratch,
            record,
            job_record,
            views.base,
        )
        .map_err(fail)?;
        self.faults.damage_job(&mut job);
        job.set_work(OpWork::new(
            kernel.invoke,
            self.model,
            index,
            views.slots,
            views.scratch,
            record,
            views.base,
            views.len,
        ));
        let flight = InFlight::submit(
            &offload,
            job,
            job_record.wait_before,
            self.faults.cleans().0,
            self.profile.as_mut(),
            &mut self.stats,
        )
        .map_err(fail)?;
        self.pending = Some(flight);
        if let (Some(p), Some(start)) = (self.profile.as_mut(), start) {
            p.charge(index, start);
        }
        Ok(())
    }

    /// The schedule's own audit before CPU op `index`: it never touches
    /// memory a job in flight still owns (a skipped fence is named, not
    /// computed on); and whether it overlaps the engine's work.
    fn audit(&mut self, index: u32) -> Result<(), InterpreterError> {
        let Some(p) = self.pending.as_ref().filter(|_| OFFLOAD_LINKED) else {
            return Ok(());
        };
        if let Some(job_op) = self.model.operator(p.op())
            && let Some(op) = self.model.operator(index)
            && schedule::conflicts(&job_op, &op)
        {
            return Err(InterpreterError::Accelerator {
                op: p.op(),
                job: p.id(),
                error: AccelError::NotWaited { by_op: index },
            });
        }
        if p.is_running() {
            self.stats.cpu_ops_overlapped += 1;
        }
        Ok(())
    }

    /// Op `index`'s kernel on the CPU, timed when profiling.
    fn invoke_op(
        &mut self,
        index: u32,
        kernel: &Registration,
        record: OpRecord,
    ) -> Result<(), InterpreterError> {
        let views = &self.views;
        let ctx = InvokeContext {
            base: views.base,
            len: views.len,
            model: self.model,
            op_index: index,
            inputs: record.inputs(self.model),
            outputs: record.outputs(self.model),
            slots: views.slots,
            record,
            scratch: views.scratch,
            taken: Cell::new(0),
            constants: self.views.constants,
        };
        let start = self.profile.as_ref().map(|p| p.clock.now());
        #[cfg(not(feature = "no-lean"))]
        let done = crate::kernels::fused::invoke(kernel, &ctx, views.records);
        #[cfg(feature = "no-lean")]
        let done = (kernel.invoke)(&ctx);
        done.map_err(|error| InterpreterError::Kernel {
            op: index,
            code: op_name(self.model, index),
            error,
        })?;
        self.faults
            .stretch(index, self.profile.as_ref().map(|p| p.clock), start);
        if let (Some(p), Some(start)) = (self.profile.as_mut(), start) {
            p.charge(index, start);
        }
        self.faults.after_kernel(
            index,
            || record.inputs(self.model).get(0),
            || record.outputs(self.model).get(0),
            views.slots,
            views.base,
            views.len,
        );
        Ok(())
    }

    /// After op `index`: every buffer live now owns its guard, so any
    /// damage is this op's.
    fn check_guards(&self, index: u32) -> Result<(), InterpreterError> {
        for g in self
            .views
            .guards
            .iter()
            .filter(|g| g.first_step <= index && index <= g.last_step)
        {
            if let Some((first, count)) = canary::damage(self.views.guard_bytes(g.offset)) {
                return Err(InterpreterError::Canary(CanaryFault {
                    owner: g.owner(),
                    offset: g.offset + first as u32,
                    bytes_hit: count as u32,
                    op: Some(index),
                }));
            }
        }
        Ok(())
    }
}
