//! A claimed op's job from submit to retire, as the interpreter's invoke
//! loop drives it: built from the committed plan (every region by
//! address), cleaned and submitted, then waited and invalidated, with its
//! times in the profile's job trace.
//!
//! The static side of offloading (which ops are claimed, before which step
//! each job is waited, what the plan must hold) is [`schedule`]'s; this is
//! the run-time side, one job in flight at a time.

use super::schedule::{self, JobRecord};
use super::{
    AccelError, Access, Job, JobRegion, JobTrace, MAX_JOB_REGIONS, Offload, OffloadStats,
    RegionRole, Ticket,
};
use crate::allocation::TensorSlot;
use crate::kernels::context::OpRecord;
use crate::model::Model;
use crate::profile::{Clock, Profile};

/// A job's failure, with the op and job it belongs to (job 0 when it
/// failed before the backend numbered it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JobFault {
    pub(crate) op: u32,
    pub(crate) job: u32,
    pub(crate) error: AccelError,
}

/// A job in flight during an invoke.
pub(crate) struct InFlight<'t> {
    ticket: Ticket<'t>,
    job: Job,
    /// The step before which it is waited (the schedule's fence).
    pub(crate) wait_before: u32,
    /// The backend's clock at submit, to turn its completion time into the
    /// profile clock.
    backend_submitted: u64,
    /// Its entry in the caller's trace, if there is room.
    trace: Option<usize>,
}

impl<'t> InFlight<'t> {
    /// Cleans what the engine reads (it reads memory, not the CPU's cache;
    /// unless `cleans` is off, an injected fault) and submits `job`,
    /// recording it in the profile's trace.
    pub(crate) fn submit<C: Clock + ?Sized>(
        offload: &Offload<'t>,
        job: Job,
        wait_before: u32,
        cleans: bool,
        profile: Option<&mut Profile<'_, C>>,
        stats: &mut OffloadStats,
    ) -> Result<Self, AccelError> {
        if cleans {
            for r in job.regions() {
                offload.cache.clean(r.address, r.len as usize);
            }
        }
        let backend_submitted = offload.accelerator.now();
        let ticket = Ticket::submit(offload.accelerator, &job)?;
        crate::marks::job_submitted();
        let trace = profile.and_then(|p| {
            let at = p.since_start_u32();
            let entry = p.trace.get_mut(stats.jobs as usize)?;
            *entry = JobTrace {
                op: job.op,
                submitted: at,
                ..JobTrace::default()
            };
            Some(stats.jobs as usize)
        });
        stats.jobs += 1;
        Ok(InFlight {
            ticket,
            job,
            wait_before,
            backend_submitted,
            trace,
        })
    }

    /// The op the job computes.
    pub(crate) fn op(&self) -> u32 {
        self.job.op
    }

    /// The backend's number for it.
    pub(crate) fn id(&self) -> u32 {
        self.ticket.id().0
    }

    /// Whether the engine is still on it (an error counts as done: the
    /// wait reports it).
    pub(crate) fn is_running(&self) -> bool {
        !self.ticket.poll().unwrap_or(true)
    }

    /// Waits the job, then invalidates what the engine wrote so the CPU
    /// reads it (unless `invalidates` is off, an injected fault).
    pub(crate) fn finish<C: Clock + ?Sized>(
        self,
        offload: &Offload<'_>,
        stats: &mut OffloadStats,
        mut profile: Option<&mut Profile<'_, C>>,
        invalidates: bool,
    ) -> Result<(), JobFault> {
        let p = self;
        let id = p.ticket.id();
        if !p.ticket.poll().unwrap_or(true) {
            stats.waits_blocked += 1;
        }
        let wait_started = profile.as_ref().map(|p| p.since_start_u32());
        let deadline = offload.accelerator.now().saturating_add(offload.timeout);
        let waited = p.ticket.wait(deadline);
        crate::marks::job_retired();
        waited.map_err(|error| JobFault {
            op: p.job.op,
            job: id.0,
            error,
        })?;
        if let (Some(profile), Some(wait_started)) = (profile.as_mut(), wait_started) {
            let retired = profile.since_start_u32();
            stats.waited += u64::from(retired - wait_started);
            if let Some(entry) = p.trace.and_then(|i| profile.trace.get_mut(i)) {
                // The engine's completion, moved from its clock to the profile's.
                let completed = offload
                    .accelerator
                    .completed_at(id)
                    .map(|c| {
                        let took = c.saturating_sub(p.backend_submitted);
                        entry
                            .submitted
                            .saturating_add(took.min(u64::from(u32::MAX)) as u32)
                    })
                    .unwrap_or(retired);
                entry.completed = completed.min(retired);
                entry.wait_started = wait_started;
                entry.retired = retired;
            }
        }
        if invalidates {
            for r in p
                .job
                .regions()
                .iter()
                .filter(|r| r.access == Access::ReadWrite)
            {
                offload.cache.invalidate(r.address, r.len as usize);
            }
        }
        Ok(())
    }
}

/// The job for op `op`: its activation inputs (read), outputs and scratch
/// (read-write) and its descriptor (read), by address.
pub(crate) fn build_job(
    model: &Model<'_>,
    op: u32,
    slots: &[TensorSlot],
    scratch: &[TensorSlot],
    record: OpRecord,
    job_record: JobRecord,
    base: *mut u8,
) -> Result<Job, AccelError> {
    let info = model.operator(op).ok_or(AccelError::Unsupported)?;
    let mut job = Job::new(op);
    job.macs = schedule::estimate_macs(model, &info);
    let mut push = |offset: u32, len: u32, access, role| {
        if len == 0 {
            return Ok(());
        }
        let region = JobRegion {
            address: base as usize + offset as usize,
            len,
            access,
            role,
        };
        // SAFETY: every offset here was carved inside the arena by the
        // allocator; the arena outlives the interpreter's borrow of it, and
        // the interpreter waits (or, on an error, aborts) every job before
        // `invoke` returns, so the memory outlives the job.
        if unsafe { job.push(region) } {
            Ok(())
        } else {
            Err(AccelError::TooManyRegions {
                count: MAX_JOB_REGIONS as u8 + 1,
            })
        }
    };
    let in_arena = |t: u32| {
        slots
            .get(t as usize)
            .filter(|s| s.offset != TensorSlot::NOT_IN_ARENA && s.model_offset().is_none())
            .copied()
    };
    for t in info.inputs().flatten() {
        if let Some(slot) = in_arena(t) {
            // State the op updates (SVDF, LSTM) is written too.
            let access = if model.is_variable(t) {
                Access::ReadWrite
            } else {
                Access::Read
            };
            push(slot.offset, slot.bytes, access, RegionRole::Input(t))?;
        }
    }
    for t in info.outputs().flatten() {
        if let Some(slot) = in_arena(t) {
            push(
                slot.offset,
                slot.bytes,
                Access::ReadWrite,
                RegionRole::Output(t),
            )?;
        }
    }
    for k in 0..record.scratch_buffers() {
        if let Some(slot) = scratch.get(usize::from(record.scratch_first) + k as usize) {
            push(
                slot.offset,
                slot.bytes,
                Access::ReadWrite,
                RegionRole::Scratch(k),
            )?;
        }
    }
    push(
        job_record.desc_offset,
        job_record.desc_len,
        Access::Read,
        RegionRole::Descriptor,
    )?;
    Ok(job)
}
