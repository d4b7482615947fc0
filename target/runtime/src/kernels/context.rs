//! What a kernel sees: [`PrepareContext`] while the interpreter sets up,
//! [`InvokeContext`] while it runs.
//!
//! Prepare validates shapes and types, computes per-op constants once and
//! stores them in the arena's persistent tail, and requests scratch memory.
//! Invoke only reads that data and computes: it cannot allocate.

use core::cell::Cell;
use core::marker::PhantomData;

use bytemuck::Pod;

use super::KernelError;
use super::tensor::{Tensor, TensorMut};
use crate::allocation::{Staging, TensorSlot};
use crate::arena::{Arena, Region};
use crate::constants::{Constants, IN_IMAGE};
use crate::model::{Model, OperatorInfo, TensorInfo};
use crate::request::BufferRequest;

/// Alignment of per-op data in the tail: enough for any `Pod` a kernel stores.
const OP_DATA_ALIGN: u32 = 8;

/// Scratch buffers one op may request: invoke marks each one taken in a
/// bit of its 128-bit `taken` set (after 64 inputs and 32 outputs).
const MAX_SCRATCH_PER_OP: u32 = 32;

/// A typed array a kernel stored in the tail during prepare, kept in its op
/// data and read back at invoke with [`InvokeContext::stored`].
#[repr(C)]
#[derive(Debug, PartialEq, Eq)]
pub struct Stored<T> {
    offset: u32,
    len: u32,
    _type: PhantomData<T>,
}

impl<T> Clone for Stored<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Stored<T> {}
// SAFETY: two u32 fields and a zero-sized marker; any bit pattern is valid.
unsafe impl<T: 'static> bytemuck::Zeroable for Stored<T> {}
// SAFETY: as above; `repr(C)` with no padding (8 bytes, align 4).
unsafe impl<T: 'static> Pod for Stored<T> {}

impl<T> Stored<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the array is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Per-op bookkeeping in the tail. Still 20 bytes since the tensor lists'
/// places moved in: the narrow fields keep the tail the size it was, and
/// are checked where they are written.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct OpRecord {
    /// Index of the kernel in the resolver.
    pub(crate) kernel: u16,
    /// How many scratch buffers it requested, and [`OpRecord::IN_PLACE`]
    /// when the lean schedule runs it over its input ([`OpRecord::FUSED`],
    /// [`OpRecord::RUNS_CHAIN`] for the ops of a fused chain).
    pub(crate) scratch_count: u16,
    /// Index of the op's first scratch request among all scratch requests.
    pub(crate) scratch_first: u16,
    /// The length of the op data the kernel stored.
    pub(crate) data_len: u16,
    /// Where that op data lies (offset from the arena start).
    pub(crate) data_offset: u32,
    /// Where the op's input list lies in the model (the offset of the
    /// vector's length word; [`OpRecord::NO_LIST`] when it has none), found
    /// at allocate so that an invoke does not walk the flatbuffer's
    /// operator table and vtable for every op.
    pub(crate) inputs_at: u32,
    /// The same for its output list.
    pub(crate) outputs_at: u32,
}

impl OpRecord {
    /// The list offset of an operator without that list.
    pub(crate) const NO_LIST: u32 = u32::MAX;

    /// Set in `scratch_count` for an op the lean schedule runs in place
    /// (a scratch count never reaches it).
    pub(crate) const IN_PLACE: u16 = 1 << 15;

    /// Set in `scratch_count` for an op of a fused chain before its last:
    /// the chain's last op computes it, its invoke does nothing.
    pub(crate) const FUSED: u16 = 1 << 14;

    /// Set in `scratch_count` for a fused chain's last op: it runs the
    /// chain (`kernels::fused`), from the [`OpRecord::FUSED`] ops before it.
    pub(crate) const RUNS_CHAIN: u16 = 1 << 13;

    /// Set in `scratch_count` for an ADD the lean schedule runs over one of
    /// its operands: the interpreter runs it (`kernels::add_rows`), not the
    /// ADD kernel, whose path stays what it was.
    pub(crate) const ADD_IN_PLACE: u16 = 1 << 12;

    /// How many scratch buffers the op requested.
    pub(crate) fn scratch_buffers(&self) -> u32 {
        let flags = Self::IN_PLACE | Self::FUSED | Self::RUNS_CHAIN | Self::ADD_IN_PLACE;
        u32::from(self.scratch_count & !flags)
    }

    /// Whether the lean schedule runs the op over its input's buffer.
    pub(crate) fn in_place(&self) -> bool {
        self.scratch_count & Self::IN_PLACE != 0
    }

    /// Whether a later op of a fused chain computes this one.
    #[cfg(not(feature = "no-lean"))]
    pub(crate) fn fused(&self) -> bool {
        self.scratch_count & Self::FUSED != 0
    }

    /// Whether the lean schedule runs this op itself, not its kernel: a
    /// fused chain's op ([`OpRecord::FUSED`], [`OpRecord::RUNS_CHAIN`]) or
    /// an ADD in place ([`OpRecord::ADD_IN_PLACE`]).
    #[cfg(not(feature = "no-lean"))]
    #[inline(always)]
    pub(crate) fn lean_runs(&self) -> bool {
        self.scratch_count & (Self::FUSED | Self::RUNS_CHAIN | Self::ADD_IN_PLACE) != 0
    }

    /// Whether this op runs a fused chain.
    #[cfg(not(feature = "no-lean"))]
    pub(crate) fn runs_chain(&self) -> bool {
        self.scratch_count & Self::RUNS_CHAIN != 0
    }

    /// The offset of `list` in `model` (what `inputs_at` holds).
    pub(crate) fn list_at(model: &[u8], list: Option<flatbuffers::Vector<'_, i32>>) -> u32 {
        list.and_then(|l| {
            let start = (l.bytes().as_ptr() as usize).checked_sub(model.as_ptr() as usize)?;
            u32::try_from(start.checked_sub(4)?).ok()
        })
        .unwrap_or(Self::NO_LIST)
    }

    /// The op's input list.
    #[inline]
    pub(crate) fn inputs<'m>(&self, model: &Model<'m>) -> IndexList<'m> {
        IndexList::at(model.bytes(), self.inputs_at)
    }

    /// The op's output list.
    #[inline]
    pub(crate) fn outputs<'m>(&self, model: &Model<'m>) -> IndexList<'m> {
        IndexList::at(model.bytes(), self.outputs_at)
    }
}

/// An operator's input or output list as the flatbuffer stores it: one
/// little-endian `i32` tensor index per entry, -1 for an omitted optional
/// tensor. Its place comes from the op's record (found at allocate), so a
/// kernel's lookup is one bounds check and one load instead of a walk
/// through the operator's table and vtable.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct IndexList<'m> {
    bytes: &'m [u8],
}

impl<'m> IndexList<'m> {
    /// The list whose length word is at `at` in `model` (empty when `at` is
    /// [`OpRecord::NO_LIST`] or the list would run past the model).
    #[inline]
    pub(crate) fn at(model: &'m [u8], at: u32) -> Self {
        let at = at as usize;
        let bytes = model
            .get(at..)
            .and_then(|rest| {
                let (len, entries) = rest.split_first_chunk::<4>()?;
                entries.get(..(u32::from_le_bytes(*len) as usize).checked_mul(4)?)
            })
            .unwrap_or(&[]);
        IndexList { bytes }
    }

    /// Entry `position`, `None` past the end or for an omitted tensor.
    #[inline]
    pub(crate) fn get(&self, position: usize) -> Option<u32> {
        let entry = self.bytes.get(4 * position..)?.first_chunk::<4>()?;
        u32::try_from(i32::from_le_bytes(*entry)).ok()
    }
}

/// The context of one kernel's prepare call.
pub struct PrepareContext<'p, 'm, 'a> {
    pub(crate) model: &'p Model<'m>,
    pub(crate) op: OperatorInfo<'m>,
    pub(crate) arena: &'p mut Arena<'a>,
    pub(crate) staging: &'p mut Staging,
    pub(crate) record: OpRecord,
    /// The constant image this op's constants go to, `None` for the tail.
    pub(crate) constants: Option<&'p mut Constants<'a>>,
    /// The lean schedule runs this op over its input's buffer.
    pub(crate) in_place: bool,
}

impl core::fmt::Debug for PrepareContext<'_, '_, '_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PrepareContext")
            .field("op", &self.op.index)
            .finish()
    }
}

impl<'m> PrepareContext<'_, 'm, '_> {
    /// The operator being prepared.
    pub fn op(&self) -> &OperatorInfo<'m> {
        &self.op
    }

    /// Whether the lean schedule runs this op in place: its output 0 is
    /// written into input 0's buffer ([`crate::schedule`]), and invoke
    /// gets the two as one ([`InvokeContext::shared_io`]). The kernel asks
    /// for the temporary its bands need as its first scratch buffer.
    pub fn runs_in_place(&self) -> bool {
        crate::schedule::LEAN_LINKED && self.in_place
    }

    /// The whole model.
    pub fn model(&self) -> &Model<'m> {
        self.model
    }

    /// Number of input positions (including omitted optional ones).
    pub fn input_count(&self) -> usize {
        self.op.inputs().len()
    }

    /// Number of outputs.
    pub fn output_count(&self) -> usize {
        self.op.outputs().len()
    }

    /// Input `i`; an error if it is absent or omitted.
    pub fn input(&self, i: usize) -> Result<TensorInfo<'m>, KernelError> {
        self.optional_input(i)
            .ok_or(KernelError::MissingInput { position: i as u32 })
    }

    /// Input `i`, or `None` if the model omits it (-1) or has fewer inputs.
    pub fn optional_input(&self, i: usize) -> Option<TensorInfo<'m>> {
        let index = self.op.inputs().nth(i)??;
        self.model.tensor(index)
    }

    /// Output `i`.
    pub fn output(&self, i: usize) -> Result<TensorInfo<'m>, KernelError> {
        let index = self
            .op
            .outputs()
            .nth(i)
            .flatten()
            .ok_or(KernelError::MissingOutput { position: i as u32 })?;
        self.model
            .tensor(index)
            .ok_or(KernelError::MissingOutput { position: i as u32 })
    }

    /// Stores the op's data (once): a `Pod` value read back at invoke with
    /// [`InvokeContext::op_data`].
    pub fn store<T: Pod>(&mut self, value: &T) -> Result<(), KernelError> {
        let bytes = bytemuck::bytes_of(value);
        let offset = self.place(bytes.len())?;
        self.put(offset, 0, bytes)?;
        self.record.data_offset = offset;
        self.record.data_len =
            u16::try_from(bytes.len()).map_err(|_| KernelError::UnsupportedParameter {
                what: "op data over 64 KiB",
            })?;
        Ok(())
    }

    /// Stores an array in the tail; keep the returned handle in the op data.
    pub fn store_slice<T: Pod>(&mut self, values: &[T]) -> Result<Stored<T>, KernelError> {
        let bytes: &[u8] = bytemuck::cast_slice(values);
        let offset = self.place(bytes.len())?;
        self.put(offset, 0, bytes)?;
        Ok(Stored {
            offset,
            len: values.len() as u32,
            _type: PhantomData,
        })
    }

    /// Stores an array produced element by element (no temporary buffer).
    pub fn store_from_fn<T: Pod>(
        &mut self,
        len: usize,
        mut f: impl FnMut(usize) -> T,
    ) -> Result<Stored<T>, KernelError> {
        let offset = self.place(len * size_of::<T>())?;
        if offset & IN_IMAGE == 0 {
            let region = Region {
                offset,
                len: (len * size_of::<T>()) as u32,
            };
            let slice: &mut [T] = crate::allocation::cast_mut(self.arena.bytes_mut(region));
            for (i, v) in slice.iter_mut().enumerate() {
                *v = f(i);
            }
        } else {
            for i in 0..len {
                self.put(offset, i * size_of::<T>(), bytemuck::bytes_of(&f(i)))?;
            }
        }
        Ok(Stored {
            offset,
            len: len as u32,
            _type: PhantomData,
        })
    }

    /// An array this op stored earlier in its prepare, read back (to
    /// derive op data from it).
    pub fn stored_values<T: Pod>(&self, stored: Stored<T>) -> Result<&[T], KernelError> {
        let len = (stored.len)
            .checked_mul(size_of::<T>() as u32)
            .ok_or(KernelError::Internal)?;
        let data = if stored.offset & IN_IMAGE != 0 {
            let constants = self.constants.as_deref().ok_or(KernelError::Internal)?;
            constants.bytes(stored.offset & !IN_IMAGE, len)?
        } else {
            if stored.offset as usize + len as usize > self.arena.capacity() {
                return Err(KernelError::Internal);
            }
            self.arena.bytes(Region {
                offset: stored.offset,
                len,
            })
        };
        if data.is_empty() {
            return Ok(&[]);
        }
        bytemuck::try_cast_slice(data).map_err(|_| KernelError::Internal)
    }

    /// Room for `len` bytes of constants: in the constant image when this
    /// op uses one (the offset then carries [`IN_IMAGE`]), else in the tail.
    fn place(&mut self, len: usize) -> Result<u32, KernelError> {
        match self.constants.as_deref_mut() {
            Some(constants) => Ok(constants.reserve(len)? | IN_IMAGE),
            None => self
                .arena
                .alloc_persistent(len, OP_DATA_ALIGN)
                .map(|r| r.offset)
                .map_err(|_| KernelError::OutOfMemory { bytes: len as u32 }),
        }
    }

    /// Puts `bytes` at `skip` bytes into the place at `offset`.
    fn put(&mut self, offset: u32, skip: usize, bytes: &[u8]) -> Result<(), KernelError> {
        let at = (offset & !IN_IMAGE) + skip as u32;
        match self.constants.as_deref_mut() {
            Some(constants) if offset & IN_IMAGE != 0 => constants.put(at, bytes),
            _ => {
                self.arena
                    .bytes_mut(Region {
                        offset: at,
                        len: bytes.len() as u32,
                    })
                    .copy_from_slice(bytes);
                Ok(())
            }
        }
    }

    /// Requests `bytes` of scratch memory, live only while this op runs.
    /// Returns the op's scratch index for [`InvokeContext::scratch`].
    pub fn request_scratch(&mut self, bytes: u32, align: u32) -> Result<u32, KernelError> {
        let local = self.record.scratch_buffers();
        if local >= MAX_SCRATCH_PER_OP {
            return Err(KernelError::UnsupportedParameter {
                what: "more than 32 scratch buffers for one op",
            });
        }
        let request = BufferRequest::scratch(self.op.index, local, bytes).with_align(align);
        let global = self
            .staging
            .request_scratch(self.model, self.arena, request)
            .map_err(|_| KernelError::OutOfMemory { bytes })?;
        if local == 0 {
            self.record.scratch_first =
                u16::try_from(global).map_err(|_| KernelError::UnsupportedParameter {
                    what: "more than 65,535 scratch buffers in one model",
                })?;
        }
        self.record.scratch_count += 1;
        Ok(local)
    }
}

/// The context of one kernel's invoke call: typed views of the op's
/// tensors, its op data and its scratch buffers.
///
/// Views come from one raw pointer to the arena. That is sound because the
/// interpreter has checked, before the first invoke, that the plan keeps
/// every buffer live at this step apart (`verify_plan`), that no tensor is
/// both an input and an output of one op, and that no output or variable
/// tensor appears twice; and each mutable view can be taken only once per
/// invoke (`taken`).
pub struct InvokeContext<'i, 'm> {
    pub(crate) base: *mut u8,
    pub(crate) len: usize,
    pub(crate) model: &'i Model<'m>,
    /// The operator's execution step.
    pub(crate) op_index: u32,
    /// Its input and output tensor indices, where the op's record says
    /// they lie in the flatbuffer.
    pub(crate) inputs: IndexList<'m>,
    pub(crate) outputs: IndexList<'m>,
    pub(crate) slots: &'i [TensorSlot],
    pub(crate) record: OpRecord,
    pub(crate) scratch: &'i [TensorSlot],
    pub(crate) taken: Cell<u128>,
    /// The constant image (empty when constants are in the tail).
    pub(crate) constants: &'i [u8],
}

impl core::fmt::Debug for InvokeContext<'_, '_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("InvokeContext")
            .field("op", &self.op_index)
            .finish()
    }
}

impl<'i, 'm> InvokeContext<'i, 'm> {
    /// The operator being run (its execution step).
    pub fn op_index(&self) -> u32 {
        self.op_index
    }

    /// The operator's description, re-read from the flatbuffer (opcode
    /// table included): for errors and set-up, not for every invoke.
    pub fn op(&self) -> Option<OperatorInfo<'m>> {
        self.model.operator(self.op_index)
    }

    fn region_bytes(&self, offset: u32, len: u32) -> Result<&'i [u8], KernelError> {
        let end = offset as usize + len as usize;
        if end > self.len {
            return Err(KernelError::Internal);
        }
        // SAFETY: inside the arena (checked above); regions read here (op
        // data, stored arrays, input tensors) are never written during this
        // invoke (see the type's documentation).
        Ok(unsafe { core::slice::from_raw_parts(self.base.add(offset as usize), len as usize) })
    }

    /// Marks a mutable view as handed out: bits 0..64 inputs, 64..96
    /// outputs, 96..128 scratch buffers.
    fn take(&self, bit: u32) -> Result<(), KernelError> {
        if bit >= 128 {
            return Err(KernelError::Internal);
        }
        let mask = 1u128 << bit;
        if self.taken.get() & mask != 0 {
            return Err(KernelError::TakenTwice);
        }
        self.taken.set(self.taken.get() | mask);
        Ok(())
    }

    fn region_bytes_mut(&self, offset: u32, len: u32) -> Result<&'i mut [u8], KernelError> {
        let end = offset as usize + len as usize;
        if end > self.len {
            return Err(KernelError::Internal);
        }
        // SAFETY: inside the arena; the caller took this view's bit, so no
        // other view of these bytes exists during this invoke.
        Ok(
            unsafe {
                core::slice::from_raw_parts_mut(self.base.add(offset as usize), len as usize)
            },
        )
    }

    /// Constants prepare stored at `offset`: in the tail, or in the
    /// constant image when the offset carries [`IN_IMAGE`].
    #[inline]
    fn constant_bytes(&self, offset: u32, len: u32) -> Result<&'i [u8], KernelError> {
        if !crate::constants::IMAGE_LINKED || offset & IN_IMAGE == 0 {
            return self.region_bytes(offset, len);
        }
        let start = (offset & !IN_IMAGE) as usize;
        self.constants
            .get(start..start + len as usize)
            .ok_or(KernelError::Internal)
    }

    /// The op data stored at prepare.
    pub fn op_data<T: Pod>(&self) -> Result<&'i T, KernelError> {
        let bytes =
            self.constant_bytes(self.record.data_offset, u32::from(self.record.data_len))?;
        bytemuck::try_from_bytes(bytes).map_err(|_| KernelError::Internal)
    }

    /// An array stored at prepare.
    pub fn stored<T: Pod>(&self, stored: Stored<T>) -> Result<&'i [T], KernelError> {
        let bytes = self.constant_bytes(stored.offset, stored.len * size_of::<T>() as u32)?;
        if bytes.is_empty() {
            return Ok(&[]);
        }
        bytemuck::try_cast_slice(bytes).map_err(|_| KernelError::Internal)
    }

    /// The tensor at `position` of the op's inputs or outputs, `None` when
    /// the list is shorter or the entry is omitted (-1). One indexed read
    /// of the flatbuffer vector, not a walk along it (this runs for every
    /// tensor of every op of every invoke).
    #[inline]
    fn listed(&self, position: usize, output: bool) -> Option<u32> {
        if output {
            self.outputs.get(position)
        } else {
            self.inputs.get(position)
        }
    }

    fn tensor_index(&self, position: usize, output: bool) -> Result<u32, KernelError> {
        self.listed(position, output).ok_or(if output {
            KernelError::MissingOutput {
                position: position as u32,
            }
        } else {
            KernelError::MissingInput {
                position: position as u32,
            }
        })
    }

    /// Input `position`, read-only (constants come from the model bytes).
    /// Costs a slot lookup: where each tensor's data lies was recorded at
    /// allocation, so nothing is re-read from the flatbuffer here.
    pub fn input(&self, position: usize) -> Result<Tensor<'i, 'm>, KernelError> {
        let index = self.tensor_index(position, false)?;
        self.input_at(index)
    }

    /// Tensor `index`'s data as an input.
    fn input_at(&self, index: u32) -> Result<Tensor<'i, 'm>, KernelError> {
        let slot = *self
            .slots
            .get(index as usize)
            .ok_or(KernelError::Internal)?;
        let data = match slot.model_offset() {
            Some(offset) => {
                let bytes = self.model.bytes();
                bytes
                    .get(offset as usize..offset as usize + slot.bytes as usize)
                    .ok_or(KernelError::Internal)?
            }
            None if slot.offset == TensorSlot::NOT_IN_ARENA => return Err(KernelError::Internal),
            None => self.region_bytes(slot.offset, slot.bytes)?,
        };
        Ok(Tensor {
            index,
            data,
            model: self.model,
        })
    }

    /// Input 0 and output 0 as one buffer, when the lean schedule runs
    /// this op in place (both live at one offset: the plan made them one
    /// buffer); `None` otherwise. Its length is the larger of the two.
    /// Takes both views: neither [`input`](Self::input)`(0)` nor
    /// [`output`](Self::output)`(0)` may be asked for after it.
    pub fn shared_io(&self) -> Result<Option<&'i mut [u8]>, KernelError> {
        // Only an op allocate ran in place: two buffers a broken plan put
        // on one offset are not one buffer (the access checks name them).
        if !crate::schedule::LEAN_LINKED || !self.record.in_place() {
            return Ok(None);
        }
        self.shared_io_at(0)
    }

    /// Input `position` and output 0 as one buffer, as
    /// [`shared_io`](Self::shared_io) for input 0 (an element-wise op may
    /// write over either operand).
    pub fn shared_io_at(&self, position: usize) -> Result<Option<&'i mut [u8]>, KernelError> {
        if !crate::schedule::LEAN_LINKED || !self.record.in_place() || position >= 64 {
            return Ok(None);
        }
        let (input, output) = (
            self.tensor_index(position, false)?,
            self.tensor_index(0, true)?,
        );
        let slot = |t: u32| {
            self.slots
                .get(t as usize)
                .copied()
                .ok_or(KernelError::Internal)
        };
        let (x, y) = (slot(input)?, slot(output)?);
        let in_model =
            |s: &TensorSlot| s.offset == TensorSlot::NOT_IN_ARENA || s.model_offset().is_some();
        if x.offset != y.offset || in_model(&x) || input == output {
            return Ok(None);
        }
        self.take(position as u32)?;
        self.take(64)?;
        self.region_bytes_mut(x.offset, x.bytes.max(y.bytes))
            .map(Some)
    }

    /// The context of op `op` (an earlier op of the fused chain this op
    /// runs), whose record is `records[op]`: its op data, constants and
    /// tensors, for read-only use.
    #[cfg(not(feature = "no-lean"))]
    pub(crate) fn op_context(
        &self,
        records: &[OpRecord],
        op: u32,
    ) -> Result<InvokeContext<'i, 'm>, KernelError> {
        let record = *records.get(op as usize).ok_or(KernelError::Internal)?;
        Ok(InvokeContext {
            base: self.base,
            len: self.len,
            model: self.model,
            op_index: op,
            inputs: record.inputs(self.model),
            outputs: record.outputs(self.model),
            slots: self.slots,
            record,
            scratch: self.scratch,
            taken: Cell::new(0),
            constants: self.constants,
        })
    }

    /// Input `position`, or `None` when the model omits it.
    pub fn optional_input(&self, position: usize) -> Result<Option<Tensor<'i, 'm>>, KernelError> {
        match self.listed(position, false) {
            Some(index) => self.input_at(index).map(Some),
            None => Ok(None),
        }
    }

    fn mutable(&self, position: usize, output: bool) -> Result<TensorMut<'i, 'm>, KernelError> {
        let index = self.tensor_index(position, output)?;
        let slot = *self
            .slots
            .get(index as usize)
            .ok_or(KernelError::Internal)?;
        if slot.offset == TensorSlot::NOT_IN_ARENA || slot.model_offset().is_some() {
            return Err(KernelError::Internal);
        }
        let limit = if output { 32 } else { 64 };
        if position >= limit {
            return Err(KernelError::Internal);
        }
        self.take(if output {
            64 + position as u32
        } else {
            position as u32
        })?;
        Ok(TensorMut {
            index,
            data: self.region_bytes_mut(slot.offset, slot.bytes)?,
            model: self.model,
        })
    }

    /// Output `position`, writable (once per invoke).
    pub fn output(&self, position: usize) -> Result<TensorMut<'i, 'm>, KernelError> {
        self.mutable(position, true)
    }

    /// Variable-tensor input `position` (SVDF/LSTM state), writable once per invoke.
    pub fn variable(&self, position: usize) -> Result<TensorMut<'i, 'm>, KernelError> {
        let index = self.tensor_index(position, false)?;
        if !self.model.is_variable(index) {
            return Err(KernelError::NotVariable {
                position: position as u32,
            });
        }
        self.mutable(position, false)
    }

    /// Scratch buffer `k` requested at prepare, writable once per invoke.
    pub fn scratch(&self, k: u32) -> Result<&'i mut [u8], KernelError> {
        if k >= self.record.scratch_buffers() || k >= MAX_SCRATCH_PER_OP {
            return Err(KernelError::Internal);
        }
        let slot = *self
            .scratch
            .get(usize::from(self.record.scratch_first) + k as usize)
            .ok_or(KernelError::Internal)?;
        self.take(96 + k)?;
        self.region_bytes_mut(slot.offset, slot.bytes)
    }
}

#[cfg(all(test, feature = "writer"))]
mod tests {
    use super::{IndexList, OpRecord};
    use crate::model::Model;

    #[test]
    fn a_records_lists_are_the_operators_lists() {
        for (name, bytes) in crate::writer::examples::all() {
            let model = Model::from_bytes(&bytes).unwrap();
            for op in model.operators() {
                let record = OpRecord {
                    inputs_at: OpRecord::list_at(model.bytes(), op.raw().inputs()),
                    outputs_at: OpRecord::list_at(model.bytes(), op.raw().outputs()),
                    ..OpRecord::default()
                };
                let (inputs, outputs) = (record.inputs(&model), record.outputs(&model));
                let expected: Vec<_> = op.inputs().collect();
                let read: Vec<_> = (0..expected.len()).map(|i| inputs.get(i)).collect();
                assert_eq!(read, expected, "{name} op {}", op.index);
                assert_eq!(inputs.get(expected.len()), None, "{name} op {}", op.index);
                let expected: Vec<_> = op.outputs().collect();
                let read: Vec<_> = (0..expected.len()).map(|i| outputs.get(i)).collect();
                assert_eq!(read, expected, "{name} op {}", op.index);
            }
        }
    }

    #[test]
    fn a_list_place_past_the_model_reads_as_empty() {
        let model = [8u8, 0, 0, 0, 2, 0, 0, 0, 7, 0, 0, 0];
        // Two entries announced, one present: the list would run past.
        assert_eq!(IndexList::at(&model, 4).get(0), None);
        assert_eq!(IndexList::at(&model, OpRecord::NO_LIST).get(0), None);
        assert_eq!(IndexList::at(&model, 100).get(0), None);
        // Two entries, the second omitted (-1).
        let model = [2u8, 0, 0, 0, 7, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF];
        let list = IndexList::at(&model, 0);
        assert_eq!(
            (list.get(0), list.get(1), list.get(2)),
            (Some(7), None, None)
        );
        // Seven announced from byte 4: past the end.
        assert_eq!(IndexList::at(&model, 4).get(0), None);
    }
}
