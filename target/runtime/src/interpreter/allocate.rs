//! Allocate: every kernel prepared in order, the offload schedule's side of
//! the plan (alignment, holds, reach), the plan checked and committed, and
//! the jobs checked against the backend before the first invoke.

use crate::accel::in_flight::build_job;
use crate::accel::schedule::{self, JobRecord};
use crate::accel::{AccelError, OFFLOAD_LINKED, Offload};
use crate::allocation::{
    AllocError, AllocOptions, Allocation, ArenaPlan, Staging, TensorSlot, cast_mut,
};
use crate::arena::{ArenaError, Region, Section};
use crate::kernels::PrepareContext;
use crate::kernels::context::OpRecord;
use crate::planner::MemoryPlanner;
use crate::request::BufferOwner;
use crate::schedule::Schedule;

use super::error::{InterpreterError, OpName};
use super::{Committed, Interpreter, bytemuck_slice};

impl<'m, 'a, 'r> Interpreter<'m, 'a, 'r> {
    /// Prepares every kernel, plans and commits the arena.
    pub fn allocate(
        &mut self,
        planner: &dyn MemoryPlanner,
        options: &AllocOptions,
    ) -> Result<&Allocation, InterpreterError> {
        self.allocate_with_report(planner, options, |_| {})
    }

    /// [`allocate`](Self::allocate), calling `report` with the full plan
    /// (tensors and kernel scratch) before it is committed.
    pub fn allocate_with_report(
        &mut self,
        planner: &dyn MemoryPlanner,
        options: &AllocOptions,
        report: impl FnOnce(&ArenaPlan<'_>),
    ) -> Result<&Allocation, InterpreterError> {
        // Start over on the whole arena (allocate may be retried).
        self.committed = None;
        self.arena.reset();
        self.constants.rewind();
        if !self.constants.in_tail() && !crate::constants::IMAGE_LINKED {
            return Err(InterpreterError::ConstantImageNotLinked);
        }
        if !self.constants.aligned() {
            return Err(InterpreterError::ConstantImageMisaligned);
        }
        let model = self.model;
        self.check_aliasing()?;
        let mut staging = Staging::begin(&model, planner, &mut self.arena, options)?;
        #[cfg(feature = "fault-injection")]
        if self.faults.skips_plan_check() {
            staging.skip_plan_check();
        }
        let n_ops = model.operator_count() as usize;
        let records = self.alloc_table(n_ops * size_of::<OpRecord>(), align_of::<OpRecord>())?;
        if self.offload.is_some() && !OFFLOAD_LINKED {
            return Err(InterpreterError::OffloadNotLinked);
        }
        if self.offload.is_some() && options.schedule != Schedule::Tflm {
            return Err(InterpreterError::LeanWithOffload);
        }
        if options.schedule != Schedule::Tflm && !crate::schedule::LEAN_LINKED {
            return Err(InterpreterError::LeanNotLinked);
        }
        let offload = self.linked_offload();
        let buffer_align = offload.map_or(1, |o| {
            o.accelerator
                .capabilities()
                .buffer_align(o.cache.line_size())
        });
        let jobs = match offload {
            Some(_) => self.alloc_table(n_ops * size_of::<JobRecord>(), align_of::<JobRecord>())?,
            None => Region::default(),
        };
        // Unclaimed ops keep an all-zero record: the arena may hold an
        // earlier interpreter's bytes.
        self.arena.bytes_mut(jobs).fill(0);
        let schedule = staging.schedule();
        self.prepare_ops(&mut staging, records, jobs, (buffer_align, schedule))?;
        if offload.is_some() {
            self.schedule_jobs(&mut staging, jobs, buffer_align);
        }
        self.constants
            .check_fully_used()
            .map_err(|(used, image)| InterpreterError::ConstantImageLonger { used, image })?;
        self.commit(staging, planner, records, jobs, buffer_align, report)
    }

    /// Prepares every op's kernel in order, writing its op record (and,
    /// for an op the backend claims, its job record and descriptor lines).
    fn prepare_ops(
        &mut self,
        staging: &mut Staging,
        records: Region,
        jobs: Region,
        (buffer_align, schedule): (u32, Schedule),
    ) -> Result<(), InterpreterError> {
        let model = self.model;
        let offload = self.linked_offload();
        for op in model.operators() {
            let claimed = offload.is_some_and(|o| schedule::claims(&o, &model, &op));
            let code = OpName::from(op.code);
            let kernel_index = self
                .resolver
                .find(op.code)
                .ok_or(InterpreterError::UnsupportedOperator { op: op.index, code })?;
            let kernel = *self
                .resolver
                .get(kernel_index)
                .ok_or(InterpreterError::UnsupportedOperator { op: op.index, code })?;
            // A claimed op's descriptor (all the op data its prepare stores,
            // contiguous since the tail grows down) gets whole aligned lines.
            let desc_top = if claimed {
                Some(self.align_tail(buffer_align)?)
            } else {
                None
            };
            let mut ctx = PrepareContext {
                model: &model,
                op,
                arena: &mut self.arena,
                staging,
                record: OpRecord {
                    kernel: u16::try_from(kernel_index).map_err(|_| {
                        InterpreterError::UnsupportedOperator { op: op.index, code }
                    })?,
                    inputs_at: OpRecord::list_at(model.bytes(), op.raw().inputs()),
                    outputs_at: OpRecord::list_at(model.bytes(), op.raw().outputs()),
                    ..OpRecord::default()
                },
                // A claimed op's op data is its descriptor: in the arena,
                // where the engine reads it.
                constants: if !crate::constants::IMAGE_LINKED || claimed || self.constants.in_tail()
                {
                    None
                } else {
                    Some(&mut self.constants)
                },
                in_place: schedule != Schedule::Tflm
                    && crate::schedule::in_place(&model, schedule, op.index).is_ok(),
            };
            let fail = |error| InterpreterError::Kernel {
                op: op.index,
                code,
                error,
            };
            (kernel.prepare)(&mut ctx).map_err(fail)?;
            let chain = if schedule == Schedule::Tflm {
                None
            } else {
                crate::schedule::chain_of(&model, schedule, op.index)
            };
            // The chain's last op asks for its ring after its own scratch.
            let runs_chain = chain.filter(|c| c.runner == op.index);
            if let Some(chain) = &runs_chain {
                crate::kernels::fused::prepare(&mut ctx, chain).map_err(fail)?;
            }
            let mut record = ctx.record;
            if ctx.in_place {
                record.scratch_count |= OpRecord::IN_PLACE;
            }
            let add = op.code == crate::model::OpCode::Builtin(crate::schema::BuiltinOperator::ADD);
            match (chain, runs_chain) {
                (Some(_), Some(_)) => record.scratch_count |= OpRecord::RUNS_CHAIN,
                (Some(_), None) => record.scratch_count |= OpRecord::FUSED,
                (None, _) if ctx.in_place && add => record.scratch_count |= OpRecord::ADD_IN_PLACE,
                _ => {}
            }
            cast_mut::<OpRecord>(self.arena.bytes_mut(records))[op.index as usize] = record;
            if let Some(top) = desc_top {
                let bottom = self.align_tail(buffer_align)?;
                cast_mut::<JobRecord>(self.arena.bytes_mut(jobs))[op.index as usize] = JobRecord {
                    claimed: 1,
                    wait_before: model.operator_count(),
                    desc_offset: bottom,
                    desc_len: top - bottom,
                };
            }
        }
        Ok(())
    }

    /// Checks the prepared model, plans (the schedule's holds included)
    /// and commits; `report` sees the full plan first.
    fn commit(
        &mut self,
        staging: Staging,
        planner: &dyn MemoryPlanner,
        records: Region,
        jobs: Region,
        buffer_align: u32,
        report: impl FnOnce(&ArenaPlan<'_>),
    ) -> Result<&Allocation, InterpreterError> {
        let model = self.model;
        let offload = self.linked_offload();
        // After every kernel's prepare, so that a kernel's own, more specific
        // refusal (an SVDF state that is not a variable, say) comes first.
        if let Some((tensor, op)) = crate::liveness::first_read_before_write(&model) {
            return Err(InterpreterError::ReadBeforeWrite { op, tensor });
        }
        // The plan is checked against the schedule before it is committed:
        // every buffer a job touches aligned for the backend, in whole lines,
        // and held until the job's wait.
        let mut plan_fault = None;
        let arena_base = self.arena.base_ptr() as usize;
        let check_holds = !self.faults.drops_holds();
        let allocation = staging.finish(&model, planner, &mut self.arena, |plan| {
            // (`OFFLOAD_LINKED` first: this closure runs out of line, where
            // a `no-offload` build cannot see that there is no backend.)
            if OFFLOAD_LINKED && let Some(offload) = &offload {
                plan_fault = schedule::check_plan(
                    offload,
                    &model,
                    plan,
                    arena_base,
                    buffer_align,
                    check_holds,
                )
                .err()
                .map(|(op, error)| InterpreterError::Accelerator { op, job: 0, error });
            }
            report(plan);
        })?;
        if let Some(fault) = plan_fault {
            return Err(fault);
        }
        self.committed = Some(Committed {
            allocation,
            records,
            jobs,
        });
        if let Some(offload) = offload
            && let Err(e) = self.check_jobs(&offload)
        {
            // Not usable: invoke must not submit a job the backend refuses.
            self.committed = None;
            return Err(e);
        }
        self.reset_variables();
        Ok(&self
            .committed
            .as_ref()
            .ok_or(InterpreterError::NotAllocated)?
            .allocation)
    }

    /// A table of `bytes` in the tail (op or job records).
    fn alloc_table(&mut self, bytes: usize, align: usize) -> Result<Region, InterpreterError> {
        self.arena
            .alloc_persistent(bytes, align as u32)
            .map_err(|_| {
                InterpreterError::Alloc(AllocError::Arena(ArenaError::OutOfMemory {
                    section: Section::Tail,
                    requested: bytes as u32,
                    free: self.arena.free_bytes() as u32,
                }))
            })
    }

    /// Aligns the tail's free end down to `align`; returns its offset.
    fn align_tail(&mut self, align: u32) -> Result<u32, InterpreterError> {
        self.arena
            .alloc_persistent(0, align)
            .map(|r| r.offset)
            .map_err(|e| InterpreterError::Alloc(AllocError::Arena(e)))
    }

    /// The static schedule: before which step each job is waited, and the
    /// plan's side of it. Every buffer a job touches gets the backend's
    /// alignment in whole cache lines, and is held until the step of the
    /// job's wait, so the planner puts nothing on it while the engine may
    /// still read or write it.
    fn schedule_jobs(&mut self, staging: &mut Staging, jobs: Region, buffer_align: u32) {
        let model = self.model;
        let n = model.operator_count();
        for k in 0..n {
            let table: &[JobRecord] = bytemuck_slice(self.arena.bytes(jobs));
            if table[k as usize].claimed == 0 {
                continue;
            }
            let wait_before = schedule::wait_before(&model, k, |j| table[j as usize].claimed != 0);
            cast_mut::<JobRecord>(self.arena.bytes_mut(jobs))[k as usize].wait_before = wait_before;
            let Some(op) = model.operator(k) else {
                continue;
            };
            // The wait comes first in step `wait_before`, before that op
            // touches memory: the job's buffers are the engine's through
            // the step before.
            let hold = wait_before.saturating_sub(1).min(n.saturating_sub(1));
            let hold = if self.faults.drops_holds() { 0 } else { hold };
            for request in staging.requests_mut(&mut self.arena) {
                let touched = match request.owner() {
                    BufferOwner::Tensor(t) => {
                        op.inputs().chain(op.outputs()).flatten().any(|x| x == t)
                    }
                    BufferOwner::Scratch { op, .. } => op == k,
                };
                if touched {
                    request.align = request.align.max(buffer_align);
                    // Only a pool the engine reaches may hold it.
                    *request = request
                        .held_until(hold)
                        .reached_by(crate::reach::Reach::ACCEL);
                }
            }
        }
        staging.raise_head_align(buffer_align);
    }

    /// Checks every job against the backend before the first invoke: each
    /// region aligned to the backend (and to whole cache lines), inside a
    /// window it reaches, and no more regions than it takes.
    fn check_jobs(&mut self, offload: &Offload<'_>) -> Result<(), InterpreterError> {
        let committed = self.committed()?;
        let caps = offload.accelerator.capabilities();
        let align = caps.buffer_align(offload.cache.line_size()) as usize;
        let base = self.arena.base_ptr();
        let model = self.model;
        let table: &[JobRecord] = bytemuck_slice(self.arena.bytes(committed.jobs));
        let slots: &[TensorSlot] = bytemuck_slice(self.arena.bytes(committed.allocation.slots));
        let scratch: &[TensorSlot] = bytemuck_slice(self.arena.bytes(committed.allocation.scratch));
        let records: &[OpRecord] = bytemuck_slice(self.arena.bytes(committed.records));
        for op in model.operators() {
            let job_record = table[op.index as usize];
            if job_record.claimed == 0 {
                continue;
            }
            let fail = |error| InterpreterError::Accelerator {
                op: op.index,
                job: 0,
                error,
            };
            let job = build_job(
                &model,
                op.index,
                slots,
                scratch,
                records[op.index as usize],
                job_record,
                base,
            )
            .map_err(fail)?;
            if job.regions().len() > caps.max_regions as usize {
                return Err(fail(AccelError::TooManyRegions {
                    count: job.regions().len() as u8,
                }));
            }
            for (i, r) in job.regions().iter().enumerate() {
                let (region, role) = (i as u8, r.role);
                if !r.address.is_multiple_of(align) {
                    return Err(fail(AccelError::Misaligned { region, role }));
                }
                if !caps.windows.is_empty()
                    && !caps
                        .windows
                        .iter()
                        .any(|w| w.contains(r.address, r.len as usize))
                {
                    return Err(fail(AccelError::OutsideWindow { region, role }));
                }
            }
        }
        Ok(())
    }

    /// Refuses operators whose outputs alias their inputs or each other, and
    /// variable tensors passed twice: kernels get disjoint views.
    fn check_aliasing(&self) -> Result<(), InterpreterError> {
        for op in self.model.operators() {
            for (i, out) in op.outputs().enumerate() {
                let Some(out) = out else { continue };
                let in_inputs = op.inputs().flatten().any(|t| t == out);
                let twice = op.outputs().skip(i + 1).flatten().any(|t| t == out);
                if in_inputs || twice {
                    return Err(InterpreterError::Aliasing {
                        op: op.index,
                        tensor: out,
                    });
                }
            }
            for (i, input) in op.inputs().enumerate() {
                let Some(input) = input else { continue };
                let variable = self.model.tensor(input).is_some_and(|t| t.is_variable);
                if variable && op.inputs().skip(i + 1).flatten().any(|t| t == input) {
                    return Err(InterpreterError::Aliasing {
                        op: op.index,
                        tensor: input,
                    });
                }
            }
        }
        Ok(())
    }
}
