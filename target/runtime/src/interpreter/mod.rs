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

use core::fmt;

use crate::accel::schedule::JobRecord;
use crate::accel::{JobTrace, OFFLOAD_LINKED, Offload, OffloadStats};
use crate::allocation::{Allocation, TensorSlot, cast_mut};
use crate::arena::{Arena, Region};
use crate::canary::{self, CanaryFault, CanaryMode, SectionGuards};
use crate::constants::Constants;
use crate::kernels::Resolver;
use crate::model::{Model, TensorInfo};
#[cfg(not(hilt_compact))]
use crate::profile::NoClock;
use crate::profile::Profile;
use crate::schema::TensorType;

mod allocate;
mod error;
mod faults;
mod plain;
mod views;
mod watched;

pub use crate::profile::Clock;
pub use error::{CustomCode, InterpreterError, OpName};

use faults::Faults;
use plain::PlainRun;
use views::Views;
use watched::WatchedRun;

/// What allocate committed: the allocation and the tail tables invoke reads.
#[derive(Debug, Clone, Copy)]
struct Committed {
    allocation: Allocation,
    records: Region,
    /// One [`JobRecord`] per op when offloading; empty otherwise.
    jobs: Region,
}

/// A model, its kernels and its arena.
pub struct Interpreter<'m, 'a, 'r> {
    model: Model<'m>,
    resolver: &'r dyn Resolver,
    arena: Arena<'a>,
    committed: Option<Committed>,
    offload: Option<Offload<'r>>,
    offload_stats: OffloadStats,
    faults: Faults,
    /// Where kernels' prepared constants go: the tail or a constant image.
    constants: Constants<'a>,
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
            faults: Faults::default(),
            constants: Constants::Tail,
        }
    }

    /// Where kernels' prepared constants go from the next
    /// [`allocate`](Self::allocate) on: the arena's tail (the default), a
    /// constant image to build ([`Constants::write`], the host's side) or
    /// one to read and check ([`Constants::read`], a firmware's side, the
    /// image in flash). See [`crate::constants`].
    pub fn set_constants(&mut self, constants: Constants<'a>) {
        self.constants = constants;
        self.committed = None;
    }

    /// The constant image bytes the last allocate wrote or checked (empty
    /// when constants are in the tail).
    pub fn constant_image(&self) -> &[u8] {
        self.constants.used()
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

    /// The backend, in a build that links offloading: a constant `None`
    /// under the `no-offload` feature, so that the compiler drops the
    /// schedule, the job records and the waits.
    #[inline(always)]
    fn linked_offload(&self) -> Option<Offload<'r>> {
        self.offload.filter(|_| OFFLOAD_LINKED)
    }

    fn committed(&self) -> Result<Committed, InterpreterError> {
        self.committed.ok_or(InterpreterError::NotAllocated)
    }

    /// Runs every kernel once, in order (claimed ops as jobs on the backend,
    /// each waited before the first op that conflicts with it, all of them
    /// before this returns).
    pub fn invoke(&mut self) -> Result<(), InterpreterError> {
        // A size build runs the same watched loop as the profiled invoke
        // (through `dyn Clock`), not a second copy of it for no clock.
        #[cfg(hilt_compact)]
        return self.run(None::<Profile<'_, dyn Clock>>);
        #[cfg(not(hilt_compact))]
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

    // Out of line, with the plain loop inlined into it: the invoke is
    // compiled alike whatever request loop calls it (inlined into a
    // firmware's, its registers moved with every change there).
    #[inline(never)]
    fn run<C: Clock + ?Sized>(
        &mut self,
        profile: Option<Profile<'_, C>>,
    ) -> Result<(), InterpreterError> {
        // Ended on every way out, the section guards' check included.
        let _marks = crate::marks::InvokeMarks::start();
        let committed = self.committed()?;
        let model = self.model;
        // SAFETY: the base and length of the arena `committed` was carved in.
        let views = unsafe {
            Views::of(
                self.arena.base_ptr(),
                self.arena.capacity(),
                &committed,
                self.constants.used(),
            )
        };
        let offload = self.linked_offload().filter(|_| !views.jobs.is_empty());
        self.offload_stats = OffloadStats::default();
        if offload.is_none() && profile.is_none() && views.guards.is_empty() && !self.faults.any() {
            PlainRun {
                model: &model,
                resolver: self.resolver,
                records: views.records,
                slots: views.slots,
                scratch: views.scratch,
                base: views.base,
                len: views.len,
                constants: views.constants,
            }
            .run()?;
        } else {
            self.offload_stats = WatchedRun {
                model: &model,
                resolver: self.resolver,
                views,
                offload,
                faults: self.faults,
                profile,
                stats: OffloadStats::default(),
                pending: None,
            }
            .run()?;
        }
        if committed.allocation.guards.mode != CanaryMode::Off {
            self.check_canaries(model.operator_count().checked_sub(1))?;
        }
        Ok(())
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
        self.nth_tensor(self.model.inputs().nth(position), position)
    }

    /// Description of model output `position`.
    pub fn output_info(&self, position: usize) -> Result<TensorInfo<'m>, InterpreterError> {
        self.nth_tensor(self.model.outputs().nth(position), position)
    }

    /// The tensor `index` (a model input's or output's, at `position`).
    fn nth_tensor(
        &self,
        index: Option<u32>,
        position: usize,
    ) -> Result<TensorInfo<'m>, InterpreterError> {
        let missing = InterpreterError::NoSuchTensor {
            position: position as u32,
        };
        self.model.tensor(index.ok_or(missing)?).ok_or(missing)
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

/// `bytes` as a slice of `T` (empty bytes, whatever their alignment, as
/// an empty slice).
fn bytemuck_slice<T: bytemuck::Pod>(bytes: &[u8]) -> &[T] {
    if bytes.is_empty() {
        return &[];
    }
    match bytemuck::try_cast_slice(bytes) {
        Ok(values) => values,
        // A fixed message, as `allocation::cast_mut`'s.
        Err(_) => panic!("an arena region is not aligned or sized for its records"),
    }
}
