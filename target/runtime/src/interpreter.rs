//! Runs a model: prepare every kernel, plan and commit the arena, then
//! invoke the kernels in order.
//!
//! ```
//! use hilt_runtime::interpreter::Interpreter;
//! use hilt_runtime::kernels::all_builtins;
//! use hilt_runtime::model::Model;
//! use hilt_runtime::planner::Greedy;
//! use hilt_runtime::schema::{BuiltinOperator, TensorType};
//! use hilt_runtime::writer::{i32_bytes, ModelWriter, Options};
//!
//! let mut w = ModelWriter::new();
//! let x = w.input("x", TensorType::INT8, &[2, 3]);
//! let shape = w.constant("shape", TensorType::INT32, &[1], &i32_bytes(&[6]));
//! let y = w.output("y", TensorType::INT8, &[6]);
//! w.op(BuiltinOperator::RESHAPE, &[Some(x), Some(shape)], &[y], Options::None);
//! let bytes = w.finish();
//!
//! let model = Model::from_bytes(&bytes).unwrap();
//! let resolver = all_builtins();
//! let mut arena = [0u8; 1024];
//! let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
//! interpreter.allocate(&Greedy, &Default::default()).unwrap();
//! interpreter.input_mut(0).unwrap().copy_from_slice(&[1, 2, 3, 4, 5, 6]);
//! interpreter.invoke().unwrap();
//! assert_eq!(interpreter.output(0).unwrap(), &[1, 2, 3, 4, 5, 6]);
//! ```

use core::cell::Cell;
use core::fmt;

#[cfg(feature = "fault-injection")]
use crate::accel::OffloadFault;
use crate::accel::schedule::{self, JobRecord};
use crate::accel::{
    AccelError, Access, Job, JobRegion, JobTrace, Offload, OffloadStats, OpWork, RegionRole, Ticket,
};
use crate::allocation::{
    AllocError, AllocOptions, Allocation, ArenaPlan, Staging, TensorSlot, cast_mut,
};
use crate::arena::{Arena, Region};
use crate::canary::{self, BufferGuard, CanaryFault, CanaryMode, GUARD_BYTES, SectionGuards};
use crate::kernels::context::{IndexList, OpRecord};
use crate::kernels::{InvokeContext, KernelError, PrepareContext, Resolver};
use crate::model::{Model, OpCode, TensorInfo};
use crate::planner::MemoryPlanner;
use crate::request::BufferOwner;
use crate::schema::TensorType;

/// An operator code as plain data, for `Copy` errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OpName {
    /// A builtin operator code.
    Builtin(i32),
    /// A custom operator, with its custom code (the name a model gives a
    /// vendor op).
    Custom(CustomCode),
}

impl OpName {
    /// An operator whose table cannot be read (verification rules this out
    /// for a model that loaded): a custom code that no model can carry.
    pub const UNREADABLE: OpName = OpName::Custom(CustomCode {
        bytes: [0; CustomCode::CAPACITY],
        len: 0,
        cut: false,
    });
}

/// A custom operator's code, held inline so that errors stay `Copy`: the
/// first [`CustomCode::CAPACITY`] bytes, cut at a character boundary (a
/// longer name shows with a trailing `…`).
#[derive(Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CustomCode {
    bytes: [u8; CustomCode::CAPACITY],
    len: u8,
    cut: bool,
}

impl CustomCode {
    /// Bytes kept of a custom code.
    pub const CAPACITY: usize = 32;

    /// `name`, cut to [`Self::CAPACITY`] bytes if longer.
    pub fn new(name: &str) -> Self {
        let mut len = name.len().min(Self::CAPACITY);
        while !name.is_char_boundary(len) {
            len -= 1;
        }
        let mut bytes = [0; Self::CAPACITY];
        bytes[..len].copy_from_slice(&name.as_bytes()[..len]);
        CustomCode {
            bytes,
            len: len as u8,
            cut: len < name.len(),
        }
    }

    /// The code as kept (without the `…` of a cut one).
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }
}

impl fmt::Debug for CustomCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for CustomCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())?;
        if self.cut {
            f.write_str("…")?;
        }
        Ok(())
    }
}

impl From<OpCode<'_>> for OpName {
    fn from(code: OpCode<'_>) -> Self {
        match code {
            OpCode::Builtin(op) => OpName::Builtin(op.0),
            OpCode::Custom(name) => OpName::Custom(CustomCode::new(name)),
        }
    }
}

impl fmt::Display for OpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            OpName::Builtin(code) => {
                fmt::Display::fmt(&OpCode::Builtin(crate::schema::BuiltinOperator(code)), f)
            }
            OpName::Custom(code) => write!(f, "CUSTOM({code})"),
        }
    }
}

/// Why the interpreter could not set up or run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum InterpreterError {
    /// `invoke` or tensor access before a successful `allocate`.
    NotAllocated,
    /// No kernel for this operator.
    UnsupportedOperator {
        /// Operator index (execution step).
        op: u32,
        /// Its code.
        code: OpName,
    },
    /// A kernel refused the operator in prepare, or failed in invoke.
    Kernel {
        /// Operator index.
        op: u32,
        /// Its code.
        code: OpName,
        /// What the kernel said.
        error: KernelError,
    },
    /// An operator writes a tensor it also reads, or writes one tensor twice.
    Aliasing {
        /// Operator index.
        op: u32,
        /// The tensor.
        tensor: u32,
    },
    /// An operator reads a tensor that no earlier operator writes and that
    /// is not a model input (nor a constant or variable): its bytes would be
    /// stale arena memory.
    ReadBeforeWrite {
        /// Operator index.
        op: u32,
        /// The tensor.
        tensor: u32,
    },
    /// Arena or planning failure.
    Alloc(AllocError),
    /// A guard band was overwritten: an overrun (see [`crate::canary`]).
    Canary(CanaryFault),
    /// An offloaded op's job failed: refused at submit, failed in the
    /// engine, broke a lease, or missed its deadline (the job was aborted).
    /// At allocate, `job` is 0 and the error names a region the plan could
    /// not make fit the backend.
    Accelerator {
        /// Operator index.
        op: u32,
        /// The backend's job id (0 when none was given yet).
        job: u32,
        /// What went wrong.
        error: AccelError,
    },
    /// A model input/output position that does not exist.
    NoSuchTensor {
        /// The position asked for.
        position: u32,
    },
}

impl fmt::Display for InterpreterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            InterpreterError::NotAllocated => f.write_str("allocate() has not succeeded"),
            InterpreterError::UnsupportedOperator { op, code } => {
                write!(f, "operator {op} ({code}) is not supported")
            }
            InterpreterError::Kernel { op, code, error } => {
                write!(f, "operator {op} ({code}): {error}")
            }
            InterpreterError::ReadBeforeWrite { op, tensor } => write!(
                f,
                "operator {op} reads tensor {tensor}, which no earlier operator writes and which is not a model input"
            ),
            InterpreterError::Aliasing { op, tensor } => {
                write!(
                    f,
                    "operator {op} writes tensor {tensor}, which it also reads or writes elsewhere"
                )
            }
            InterpreterError::Alloc(e) => write!(f, "{e}"),
            InterpreterError::Canary(fault) => write!(f, "canary: {fault}"),
            InterpreterError::Accelerator { op, job, error } => {
                write!(f, "operator {op}, accelerator job {job}: {error}")
            }
            InterpreterError::NoSuchTensor { position } => {
                write!(f, "the model has no tensor at position {position}")
            }
        }
    }
}

impl core::error::Error for InterpreterError {}

impl From<AllocError> for InterpreterError {
    fn from(e: AllocError) -> Self {
        InterpreterError::Alloc(e)
    }
}

/// Reads a clock for per-op profiles (a hardware seam: DWT/SysTick on a
/// target, `Instant` on a host).
pub trait Clock {
    /// A monotonic count (cycles, ticks or nanoseconds).
    fn now(&self) -> u64;
}

#[derive(Debug, Clone, Copy)]
struct Committed {
    allocation: Allocation,
    records: Region,
    /// One [`JobRecord`] per op when offloading; empty otherwise.
    jobs: Region,
}

/// A job in flight during an invoke.
struct Pending<'t> {
    ticket: Ticket<'t>,
    job: Job,
    wait_before: u32,
    /// The backend's clock at submit, to turn its completion time into the
    /// profile clock.
    backend_submitted: u64,
    /// Its entry in the caller's trace, if there is room.
    trace: Option<usize>,
}

/// A profiled run's clock, per-op sums and job trace.
struct Profile<'p, C: ?Sized> {
    clock: &'p C,
    per_op: &'p mut [u64],
    trace: &'p mut [JobTrace],
    start: u64,
}

impl<C: Clock + ?Sized> Profile<'_, C> {
    fn since_start(&self) -> u64 {
        self.clock.now().saturating_sub(self.start)
    }

    fn since_start_u32(&self) -> u32 {
        self.since_start().min(u64::from(u32::MAX)) as u32
    }
}

/// A model, its kernels and its arena.
pub struct Interpreter<'m, 'a, 'r> {
    model: Model<'m>,
    resolver: &'r dyn Resolver,
    arena: Arena<'a>,
    committed: Option<Committed>,
    offload: Option<Offload<'r>>,
    offload_stats: OffloadStats,
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
}

impl fmt::Debug for Interpreter<'_, '_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interpreter")
            .field("model", &self.model)
            .field("arena", &self.arena)
            .finish()
    }
}

impl<'m, 'a, 'r> Interpreter<'m, 'a, 'r> {
    /// An interpreter over the caller's arena bytes. Nothing is allocated
    /// until [`allocate`](Self::allocate).
    pub fn new(model: Model<'m>, resolver: &'r dyn Resolver, arena: &'a mut [u8]) -> Self {
        Interpreter {
            model,
            resolver,
            arena: Arena::new(arena),
            committed: None,
            offload: None,
            offload_stats: OffloadStats::default(),
            #[cfg(feature = "fault-injection")]
            drop_holds: false,
            #[cfg(feature = "fault-injection")]
            overrun: None,
            #[cfg(feature = "fault-injection")]
            slowdown: None,
            #[cfg(feature = "fault-injection")]
            offload_fault: None,
            #[cfg(feature = "fault-injection")]
            unchecked_plan: false,
        }
    }

    /// The model.
    pub fn model(&self) -> &Model<'m> {
        &self.model
    }

    /// Lets a backend run the ops it claims (from the next
    /// [`allocate`](Self::allocate) on); `None` runs everything on the CPU.
    pub fn set_offload(&mut self, offload: Option<Offload<'r>>) {
        self.offload = offload;
        self.committed = None;
    }

    /// The last invoke's offload figures (jobs, overlap, blocked waits).
    pub fn offload_stats(&self) -> OffloadStats {
        self.offload_stats
    }

    /// Which ops the backend claimed, as `claimed[op]` (false everywhere
    /// without offload); entries past the op count are left alone.
    pub fn claimed_ops(&self, claimed: &mut [bool]) -> Result<(), InterpreterError> {
        let committed = self.committed()?;
        let jobs: &[JobRecord] = bytemuck_slice(self.arena.bytes(committed.jobs));
        for (slot, record) in claimed.iter_mut().zip(jobs) {
            *slot = record.claimed != 0;
        }
        Ok(())
    }

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
        let model = self.model;
        self.check_aliasing()?;
        let mut staging = Staging::begin(&model, planner, &mut self.arena, options)?;
        #[cfg(feature = "fault-injection")]
        if self.unchecked_plan {
            staging.skip_plan_check();
        }
        let n_ops = model.operator_count() as usize;
        let records = self
            .arena
            .alloc_persistent(n_ops * size_of::<OpRecord>(), align_of::<OpRecord>() as u32)
            .map_err(|_| {
                InterpreterError::Alloc(AllocError::Arena(crate::arena::ArenaError::OutOfMemory {
                    section: crate::arena::Section::Tail,
                    requested: (n_ops * size_of::<OpRecord>()) as u32,
                    free: self.arena.free_bytes() as u32,
                }))
            })?;
        let offload = self.offload;
        let buffer_align = offload.map_or(1, |o| {
            o.accelerator
                .capabilities()
                .buffer_align(o.cache.line_size())
        });
        let jobs = match offload {
            Some(_) => self
                .arena
                .alloc_persistent(
                    n_ops * size_of::<JobRecord>(),
                    align_of::<JobRecord>() as u32,
                )
                .map_err(|_| {
                    InterpreterError::Alloc(AllocError::Arena(
                        crate::arena::ArenaError::OutOfMemory {
                            section: crate::arena::Section::Tail,
                            requested: (n_ops * size_of::<JobRecord>()) as u32,
                            free: self.arena.free_bytes() as u32,
                        },
                    ))
                })?,
            None => Region::default(),
        };
        // Unclaimed ops keep an all-zero record: the arena may hold an
        // earlier interpreter's bytes.
        self.arena.bytes_mut(jobs).fill(0);
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
                staging: &mut staging,
                record: OpRecord {
                    kernel: kernel_index,
                    ..OpRecord::default()
                },
            };
            (kernel.prepare)(&mut ctx).map_err(|error| InterpreterError::Kernel {
                op: op.index,
                code,
                error,
            })?;
            let record = ctx.record;
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
        if offload.is_some() {
            self.schedule_jobs(&mut staging, jobs, buffer_align);
        }
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
        #[cfg(feature = "fault-injection")]
        let check_holds = !self.drop_holds;
        #[cfg(not(feature = "fault-injection"))]
        let check_holds = true;
        let allocation = staging.finish(&model, planner, &mut self.arena, |plan| {
            if let Some(offload) = &offload {
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
            #[cfg(feature = "fault-injection")]
            let hold = if self.drop_holds { 0 } else { hold };
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

    fn committed(&self) -> Result<Committed, InterpreterError> {
        self.committed.ok_or(InterpreterError::NotAllocated)
    }

    /// Runs every kernel once, in order (claimed ops as jobs on the backend,
    /// each waited before the first op that conflicts with it, all of them
    /// before this returns).
    pub fn invoke(&mut self) -> Result<(), InterpreterError> {
        self.run(None::<Profile<'_, NoClock>>)
    }

    /// [`invoke`](Self::invoke), adding each op's elapsed clock counts to
    /// `per_op[op]` (`per_op` holds one entry per operator).
    pub fn invoke_profiled(
        &mut self,
        clock: &dyn Clock,
        per_op: &mut [u64],
    ) -> Result<(), InterpreterError> {
        // No trace: the start time is never used (and not read: a reading
        // is an instruction more in the caller's timed region).
        self.invoke_traced(clock, per_op, &mut [], 0)
    }

    /// [`invoke_profiled`](Self::invoke_profiled), also recording each
    /// offloaded job's times in `jobs` (in order, as many as fit; the
    /// number submitted is [`offload_stats`](Self::offload_stats)`.jobs`),
    /// counted from `start` (a reading of `clock` the caller took just
    /// before, for its own total), and the time spent waiting in
    /// `offload_stats().waited`.
    pub fn invoke_traced(
        &mut self,
        clock: &dyn Clock,
        per_op: &mut [u64],
        jobs: &mut [JobTrace],
        start: u64,
    ) -> Result<(), InterpreterError> {
        self.run(Some(Profile {
            clock,
            per_op,
            trace: jobs,
            start,
        }))
    }

    fn run<C: Clock + ?Sized>(
        &mut self,
        mut profile: Option<Profile<'_, C>>,
    ) -> Result<(), InterpreterError> {
        let committed = self.committed()?;
        let model = self.model;
        let len = self.arena.capacity();
        let base = self.arena.base_ptr();
        // SAFETY: the tail regions below (tensor slots, op records, scratch
        // slots) were carved by the allocator inside the arena and are never
        // written after commit; kernels only get views of the head, of
        // variable tensors and of their own op data, all disjoint from them.
        let guards = committed.allocation.guards;
        let (slots, records, scratch, table) = unsafe {
            let view = |r: Region| {
                core::slice::from_raw_parts(base.add(r.offset as usize), r.len as usize)
            };
            (
                bytemuck_slice::<TensorSlot>(view(committed.allocation.slots)),
                bytemuck_slice::<OpRecord>(view(committed.records)),
                bytemuck_slice::<TensorSlot>(view(committed.allocation.scratch)),
                bytemuck_slice::<BufferGuard>(view(guards.buffer_table)),
            )
        };
        let guard_bytes = |offset: u32| {
            // SAFETY: guard bands lie inside the arena (planned with their
            // buffers) and no kernel view exists between two ops.
            unsafe {
                core::slice::from_raw_parts_mut(base.add(offset as usize), GUARD_BYTES as usize)
            }
        };
        // SAFETY: as above, a tail region carved at allocate, never written after.
        let job_records = unsafe {
            bytemuck_slice::<JobRecord>(core::slice::from_raw_parts(
                base.add(committed.jobs.offset as usize),
                committed.jobs.len as usize,
            ))
        };
        let offload = self.offload.filter(|_| !job_records.is_empty());
        self.offload_stats = OffloadStats::default();
        if offload.is_none() && profile.is_none() && table.is_empty() && !self.injects_faults() {
            let plain = PlainRun {
                model: &model,
                resolver: self.resolver,
                records,
                slots,
                scratch,
                base,
                len,
            };
            plain.run()?;
            if guards.mode != CanaryMode::Off {
                self.check_canaries(model.operator_count().checked_sub(1))?;
            }
            return Ok(());
        }
        let mut stats = OffloadStats::default();
        // At most one job in flight: the schedule waits a job before the
        // next claimed op. Dropped on an early return, which aborts it.
        let mut pending: Option<Pending<'r>> = None;
        for index in 0..model.operator_count() {
            // The op's table and tensor lists, read once; its opcode is
            // resolved only to name it in an error.
            let raw = model
                .operator_table(index)
                .ok_or(InterpreterError::UnsupportedOperator {
                    op: index,
                    code: OpName::UNREADABLE,
                })?;
            let code = || op_name(&model, index);
            if let (Some(offload), Some(p)) = (&offload, &pending)
                && p.wait_before == index
                && !self.skips_waits()
                && let Some(p) = pending.take()
            {
                finish_job(offload, p, &mut stats, profile.as_mut(), self.cleans())?;
            }
            // Buffers first written by this op get fresh guards.
            for g in table.iter().filter(|g| g.first_step == index) {
                canary::fill(guard_bytes(g.offset));
            }
            let record = records[index as usize];
            let kernel = self.resolver.get(record.kernel).ok_or_else(|| {
                InterpreterError::UnsupportedOperator {
                    op: index,
                    code: code(),
                }
            })?;
            if let Some(offload) = &offload
                && let Some(job_record) = job_records.get(index as usize)
                && job_record.claimed != 0
            {
                // One job at a time: with the schedule's fences the last
                // one was waited already (this is only for a skipped wait).
                if let Some(p) = pending.take() {
                    finish_job(offload, p, &mut stats, profile.as_mut(), self.cleans())?;
                }
                let start = profile.as_ref().map(|p| p.clock.now());
                let fail = |job: u32, error| InterpreterError::Accelerator {
                    op: index,
                    job,
                    error,
                };
                let mut job = build_job(&model, index, slots, scratch, record, *job_record, base)
                    .map_err(|e| fail(0, e))?;
                #[cfg(feature = "fault-injection")]
                self.damage_job(&mut job);
                job.set_work(OpWork::new(
                    kernel.invoke,
                    &model,
                    index,
                    slots,
                    scratch,
                    record,
                    base,
                    len,
                ));
                // The engine reads memory, not the CPU's cache.
                if self.cleans().0 {
                    for r in job.regions() {
                        offload.cache.clean(r.address, r.len as usize);
                    }
                }
                let backend_submitted = offload.accelerator.now();
                let ticket = Ticket::submit(offload.accelerator, &job).map_err(|e| fail(0, e))?;
                let trace = profile.as_mut().and_then(|p| {
                    let at = p.since_start_u32();
                    let entry = p.trace.get_mut(stats.jobs as usize)?;
                    *entry = JobTrace {
                        op: index,
                        submitted: at,
                        ..JobTrace::default()
                    };
                    Some(stats.jobs as usize)
                });
                stats.jobs += 1;
                pending = Some(Pending {
                    ticket,
                    job,
                    wait_before: job_record.wait_before,
                    backend_submitted,
                    trace,
                });
                if let (Some(p), Some(start)) = (profile.as_mut(), start)
                    && let Some(slot) = p.per_op.get_mut(index as usize)
                {
                    *slot += p.clock.now().saturating_sub(start);
                }
                continue;
            }
            // The schedule's own audit: a CPU op never touches memory a job
            // in flight still owns (a skipped fence is named, not computed on).
            if let Some(p) = &pending
                && let Some(job_op) = model.operator(p.job.op)
                && let Some(op) = model.operator(index)
                && schedule::conflicts(&job_op, &op)
            {
                return Err(InterpreterError::Accelerator {
                    op: p.job.op,
                    job: p.ticket.id().0,
                    error: AccelError::NotWaited { by_op: index },
                });
            }
            if let Some(p) = &pending
                && !p.ticket.poll().unwrap_or(true)
            {
                stats.cpu_ops_overlapped += 1;
            }
            let ctx = InvokeContext {
                base,
                len,
                model: &model,
                op_index: index,
                inputs: IndexList::new(raw.inputs()),
                outputs: IndexList::new(raw.outputs()),
                slots,
                record,
                scratch,
                taken: Cell::new(0),
            };
            let start = profile.as_ref().map(|p| p.clock.now());
            (kernel.invoke)(&ctx).map_err(|error| InterpreterError::Kernel {
                op: index,
                code: code(),
                error,
            })?;
            #[cfg(feature = "fault-injection")]
            if let (Some((fault_op, permille, extra)), Some(clock), Some(start)) =
                (self.slowdown, profile.as_ref().map(|p| p.clock), start)
                && fault_op == index
            {
                // The kernel's own time, stretched by `permille` and `extra`
                // counts: as if its code did that much more work, inside
                // the op's timing.
                let took = clock.now().saturating_sub(start);
                let until = took + took * u64::from(permille) / 1000 + extra;
                while clock.now().saturating_sub(start) < until {
                    core::hint::spin_loop();
                }
            }
            if let (Some(p), Some(start)) = (profile.as_mut(), start)
                && let Some(slot) = p.per_op.get_mut(index as usize)
            {
                *slot += p.clock.now().saturating_sub(start);
            }
            #[cfg(feature = "fault-injection")]
            if let Some((fault_op, bytes)) = self.overrun
                && fault_op == index
                && let Some(out) = IndexList::new(raw.outputs()).get(0)
                && let Some(slot) = slots.get(out as usize)
            {
                let end = (slot.offset + slot.bytes) as usize;
                for i in 0..(bytes as usize).min(len.saturating_sub(end)) {
                    // SAFETY: inside the arena; this is the injected bug itself.
                    unsafe { *base.add(end + i) = !canary::pattern(i) };
                }
            }
            // Every buffer live now owns its guard: any damage is this op's.
            for g in table
                .iter()
                .filter(|g| g.first_step <= index && index <= g.last_step)
            {
                if let Some((first, count)) = canary::damage(guard_bytes(g.offset)) {
                    return Err(InterpreterError::Canary(CanaryFault {
                        owner: g.owner(),
                        offset: g.offset + first as u32,
                        bytes_hit: count as u32,
                        op: Some(index),
                    }));
                }
            }
        }
        if let (Some(offload), Some(p)) = (&offload, pending.take()) {
            finish_job(offload, p, &mut stats, profile.as_mut(), self.cleans())?;
        }
        self.offload_stats = stats;
        if guards.mode != CanaryMode::Off {
            self.check_canaries(model.operator_count().checked_sub(1))?;
        }
        Ok(())
    }

    /// Test builds only: after op `op` runs, write `bytes` bytes just past
    /// the end of its first output, as a buggy kernel would.
    #[cfg(feature = "fault-injection")]
    pub fn inject_overrun(&mut self, op: u32, bytes: u32) {
        self.overrun = Some((op, bytes));
    }

    /// Whether a test build has armed a fault that the full loop of
    /// [`run`](Self::run) acts on (the plain loop has none of them).
    fn injects_faults(&self) -> bool {
        #[cfg(feature = "fault-injection")]
        if self.overrun.is_some() || self.slowdown.is_some() || self.offload_fault.is_some() {
            return true;
        }
        false
    }

    /// Whether the schedule's waits are skipped (an injected fault).
    fn skips_waits(&self) -> bool {
        #[cfg(feature = "fault-injection")]
        if self.offload_fault == Some(OffloadFault::SkipWait) {
            return true;
        }
        false
    }

    /// Whether the CPU cleans before a submit and invalidates after a wait
    /// (both, unless a fault leaves one out).
    fn cleans(&self) -> (bool, bool) {
        #[cfg(feature = "fault-injection")]
        match self.offload_fault {
            Some(OffloadFault::MissingClean) => return (false, true),
            Some(OffloadFault::MissingInvalidate) => return (true, false),
            _ => {}
        }
        (true, true)
    }

    /// Test builds only: the offload path has `fault` (see [`OffloadFault`]).
    #[cfg(feature = "fault-injection")]
    pub fn inject_offload_fault(&mut self, fault: Option<OffloadFault>) {
        self.offload_fault = fault;
    }

    /// An injected fault in the job a kernel path builds.
    #[cfg(feature = "fault-injection")]
    fn damage_job(&self, job: &mut Job) {
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

    /// Test builds only: plan without the offload holds, as a scheduler that
    /// forgot them would (takes effect at the next allocate). The engine's
    /// lease check is what must then catch it.
    #[cfg(feature = "fault-injection")]
    pub fn inject_drop_holds(&mut self) {
        self.drop_holds = true;
    }

    /// Test builds only: commit the planner's plan even if live buffers
    /// overlap (from the next allocate; alignment and bounds are still
    /// checked), so that a broken planner port's overlapping buffers reach
    /// the kernels and the buffer canaries must catch them.
    #[cfg(feature = "fault-injection")]
    pub fn inject_unchecked_plan(&mut self) {
        self.unchecked_plan = true;
    }

    /// Test builds only: op `op` takes `permille`/1000 longer than its
    /// kernel does (a kernel made slower), in profiled invokes. The gate's
    /// tests use it to show that a slower kernel fails the gate by name.
    #[cfg(feature = "fault-injection")]
    pub fn inject_slowdown(&mut self, op: u32, permille: u32) {
        self.slowdown = Some((op, permille, 0));
    }

    /// Test builds only: op `op` takes `counts` more of the profiling
    /// clock's counts than its kernel does (on a virtual board, ticks of
    /// 40 instructions): the smallest slowdown the gate must still catch.
    #[cfg(feature = "fault-injection")]
    pub fn inject_delay(&mut self, op: u32, counts: u64) {
        self.slowdown = Some((op, 0, counts));
    }

    /// Checks the section guards (arena start and end, head end, tail
    /// start); `last_op` is reported as the op that ran last.
    pub fn check_canaries(&self, last_op: Option<u32>) -> Result<(), InterpreterError> {
        let guards = self.committed()?.allocation.guards;
        if guards.mode == CanaryMode::Off {
            return Ok(());
        }
        for (region, owner) in guards.regions.iter().zip(SectionGuards::OWNERS) {
            if let Some((first, count)) = canary::damage(self.arena.bytes(*region)) {
                return Err(InterpreterError::Canary(CanaryFault {
                    owner,
                    offset: region.offset + first as u32,
                    bytes_hit: count as u32,
                    op: last_op,
                }));
            }
        }
        Ok(())
    }

    /// Sets every variable tensor to its zero point (zero for floats), as
    /// TFLM's `ResetVariableTensors`; done once by `allocate`.
    pub fn reset(&mut self) -> Result<(), InterpreterError> {
        self.committed()?;
        self.reset_variables();
        Ok(())
    }

    fn reset_variables(&mut self) {
        let Some(committed) = self.committed else {
            return;
        };
        for tensor in self
            .model
            .tensors()
            .filter(|t| t.is_variable && t.constant.is_none())
        {
            let slot = cast_mut::<TensorSlot>(self.arena.bytes_mut(committed.allocation.slots))
                [tensor.index as usize];
            let fill = match tensor.dtype {
                TensorType::INT8 | TensorType::UINT8 => {
                    crate::kernels::tensor::quant(&tensor).map_or(0, |q| q.zero_point as u8)
                }
                _ => 0,
            };
            self.arena
                .bytes_mut(Region {
                    offset: slot.offset,
                    len: slot.bytes,
                })
                .fill(fill);
        }
    }

    /// The committed allocation's figures.
    pub fn allocation(&self) -> Result<Allocation, InterpreterError> {
        Ok(self.committed()?.allocation)
    }

    /// The arena's high-water mark: head or set-up memory, plus tail.
    pub fn arena_used_bytes(&self) -> usize {
        self.arena.used_bytes()
    }

    /// Number of model inputs.
    pub fn input_count(&self) -> usize {
        self.model.inputs().len()
    }

    /// Number of model outputs.
    pub fn output_count(&self) -> usize {
        self.model.outputs().len()
    }

    /// Description of model input `position`.
    pub fn input_info(&self, position: usize) -> Result<TensorInfo<'m>, InterpreterError> {
        let index = self
            .model
            .inputs()
            .nth(position)
            .ok_or(InterpreterError::NoSuchTensor {
                position: position as u32,
            })?;
        self.model
            .tensor(index)
            .ok_or(InterpreterError::NoSuchTensor {
                position: position as u32,
            })
    }

    /// Description of model output `position`.
    pub fn output_info(&self, position: usize) -> Result<TensorInfo<'m>, InterpreterError> {
        let index = self
            .model
            .outputs()
            .nth(position)
            .ok_or(InterpreterError::NoSuchTensor {
                position: position as u32,
            })?;
        self.model
            .tensor(index)
            .ok_or(InterpreterError::NoSuchTensor {
                position: position as u32,
            })
    }

    fn tensor_region(&self, info: &TensorInfo<'m>) -> Result<Region, InterpreterError> {
        let committed = self.committed()?;
        let slots: &[TensorSlot] = bytemuck_slice(self.arena.bytes(committed.allocation.slots));
        let slot = slots[info.index as usize];
        if slot.offset == TensorSlot::NOT_IN_ARENA || slot.model_offset().is_some() {
            return Err(InterpreterError::NoSuchTensor {
                position: info.index,
            });
        }
        Ok(Region {
            offset: slot.offset,
            len: slot.bytes,
        })
    }

    /// Model input `position`'s bytes, to fill before `invoke`.
    pub fn input_mut(&mut self, position: usize) -> Result<&mut [u8], InterpreterError> {
        let info = self.input_info(position)?;
        let region = self.tensor_region(&info)?;
        Ok(self.arena.bytes_mut(region))
    }

    /// Ends the interpreter and gives its arena back, e.g. to run the model
    /// again with another offload or in a smaller part of the memory.
    pub fn into_arena(self) -> &'a mut [u8] {
        self.arena.into_bytes()
    }

    /// Model output `position`'s bytes after `invoke`.
    pub fn output(&self, position: usize) -> Result<&[u8], InterpreterError> {
        let info = self.output_info(position)?;
        let region = self.tensor_region(&info)?;
        Ok(self.arena.bytes(region))
    }
}

/// Waits a job, then invalidates what the engine wrote so the CPU reads it.
fn finish_job<C: Clock + ?Sized>(
    offload: &Offload<'_>,
    p: Pending<'_>,
    stats: &mut OffloadStats,
    mut profile: Option<&mut Profile<'_, C>>,
    (_, invalidates): (bool, bool),
) -> Result<(), InterpreterError> {
    let id = p.ticket.id();
    if !p.ticket.poll().unwrap_or(true) {
        stats.waits_blocked += 1;
    }
    let wait_started = profile.as_ref().map(|p| p.since_start_u32());
    let deadline = offload.accelerator.now().saturating_add(offload.timeout);
    p.ticket
        .wait(deadline)
        .map_err(|error| InterpreterError::Accelerator {
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

/// The common invoke (no offload, no profile, no per-buffer guards): each
/// op is its record, its kernel and its tensor lists, and nothing else. A
/// loop of its own, chosen once per invoke, so that small models do not
/// pay per op for the checks only offloading and profiling need.
struct PlainRun<'p, 'm> {
    model: &'p Model<'m>,
    resolver: &'p dyn Resolver,
    records: &'p [OpRecord],
    slots: &'p [TensorSlot],
    scratch: &'p [TensorSlot],
    base: *mut u8,
    len: usize,
}

impl PlainRun<'_, '_> {
    fn run(&self) -> Result<(), InterpreterError> {
        let model = self.model;
        // One record per op (allocate wrote them): checked once, so the
        // loop below cannot stop short.
        if self.records.len() < model.operator_count() as usize {
            return Err(InterpreterError::NotAllocated);
        }
        for (index, record) in (0..model.operator_count()).zip(self.records) {
            let unsupported = |code| InterpreterError::UnsupportedOperator { op: index, code };
            let raw = model
                .operator_table(index)
                .ok_or(unsupported(OpName::UNREADABLE))?;
            let kernel = self
                .resolver
                .get(record.kernel)
                .ok_or_else(|| unsupported(op_name(model, index)))?;
            let ctx = InvokeContext {
                base: self.base,
                len: self.len,
                model,
                op_index: index,
                inputs: IndexList::new(raw.inputs()),
                outputs: IndexList::new(raw.outputs()),
                slots: self.slots,
                record: *record,
                scratch: self.scratch,
                taken: Cell::new(0),
            };
            (kernel.invoke)(&ctx).map_err(|error| InterpreterError::Kernel {
                op: index,
                code: op_name(model, index),
                error,
            })?;
        }
        Ok(())
    }
}

/// The job for op `op`: its activation inputs (read), outputs and scratch
/// (read-write) and its descriptor (read), by address.
fn build_job(
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
                count: crate::accel::MAX_JOB_REGIONS as u8 + 1,
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
    for k in 0..record.scratch_count {
        if let Some(slot) = scratch.get((record.scratch_first + k) as usize) {
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

/// Op `index`'s code, for an error message.
fn op_name(model: &Model<'_>, index: u32) -> OpName {
    model
        .operator(index)
        .map_or(OpName::UNREADABLE, |op| OpName::from(op.code))
}

struct NoClock;

impl Clock for NoClock {
    fn now(&self) -> u64 {
        0
    }
}

fn bytemuck_slice<T: bytemuck::Pod>(bytes: &[u8]) -> &[T] {
    if bytes.is_empty() {
        &[]
    } else {
        bytemuck::cast_slice(bytes)
    }
}
