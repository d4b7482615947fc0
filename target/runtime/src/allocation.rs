//! From a verified model to a committed arena: the per-tensor records and
//! variable tensors in the tail, the request list and planner in temp, and
//! the planned buffers in the head.
//!
//! ```
//! # use hilt_runtime::{allocation::{allocate, AllocOptions}, arena::Arena, model::Model, planner::Greedy};
//! # fn demo(model_bytes: &[u8]) -> Result<(), hilt_runtime::allocation::AllocError> {
//! let model = Model::from_bytes(model_bytes).unwrap();
//! let mut memory = [0u8; 8192];
//! let mut arena = Arena::new(&mut memory);
//! let allocation = allocate(&model, &Greedy, &mut arena, &AllocOptions::default(), &[], |plan| {
//!     // The full plan, readable while set-up memory still holds it.
//!     assert!(plan.head >= plan.lower_bound);
//! })?;
//! assert_eq!(allocation.used_bytes as usize, arena.used_bytes());
//! # Ok(()) }
//! ```

use core::fmt;

use bytemuck::{Pod, Zeroable};

use crate::arena::{Arena, ArenaError, Region};
use crate::liveness;
use crate::model::Model;
use crate::planner::{MemoryPlanner, PlanError};
use crate::request::{BufferRequest, DEFAULT_ALIGN, align_up};

/// Where a tensor's data lives: 8 bytes per tensor, against the 12 bytes of
/// TFLM's `TfLiteEvalTensor` on 32-bit targets. Shape and type stay in the
/// model (flash), so only the location is kept.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct TensorSlot {
    /// Offset from the start of the arena slice, or [`TensorSlot::NOT_IN_ARENA`].
    pub offset: u32,
    /// Bytes of data.
    pub bytes: u32,
}

impl TensorSlot {
    /// The tensor's data is not in the arena (constant data in the model, or
    /// a tensor no operator touches).
    pub const NOT_IN_ARENA: u32 = u32::MAX;
}

/// Settings for [`allocate`].
#[derive(Debug, Clone, Copy)]
pub struct AllocOptions {
    /// Alignment of every activation tensor (a power of two up to 1 MiB).
    pub align: u32,
}

impl Default for AllocOptions {
    fn default() -> Self {
        AllocOptions {
            align: DEFAULT_ALIGN,
        }
    }
}

/// The plan as it stands between planning and commit, passed to the
/// caller's report callback. Borrowed from temp memory: copy what you keep.
#[derive(Debug, Clone, Copy)]
pub struct ArenaPlan<'p> {
    /// The planner's name.
    pub planner: &'static str,
    /// Every buffer request: tensors in index order, then scratch.
    pub requests: &'p [BufferRequest],
    /// Offset of each request from the start of the head.
    pub offsets: &'p [u32],
    /// Planned (non-persistent) section, bytes.
    pub head: u32,
    /// Persistent section, bytes (including alignment padding).
    pub tail: u32,
    /// Set-up memory the request list and planner took.
    pub temp: u32,
    /// Largest sum of padded sizes live at one step: no plan can be smaller.
    pub lower_bound: u32,
    /// Offset of the head's first byte from the start of the arena slice.
    pub head_start: u32,
}

/// The committed result.
#[derive(Debug, Clone, Copy)]
pub struct Allocation {
    /// The per-tensor [`TensorSlot`] array (in the tail).
    pub slots: Region,
    /// The planned section.
    pub head: Region,
    /// Persistent bytes (tail, with padding).
    pub tail_bytes: u32,
    /// Peak set-up bytes.
    pub temp_bytes: u32,
    /// The arena's high-water mark: what this model needs at this address.
    pub used_bytes: u32,
}

/// Bytes each section needs, stated when the arena is too small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ArenaNeeds {
    /// Bytes the caller gave.
    pub available: u32,
    /// Planned head. Exact when `head_exact`, otherwise the liveness lower
    /// bound (planning itself did not fit).
    pub head: u32,
    /// Whether `head` is the planner's exact figure.
    pub head_exact: bool,
    /// Set-up memory for the request list and planner workspace.
    pub temp: u32,
    /// Persistent section.
    pub tail: u32,
}

/// Why allocation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum AllocError {
    /// The arena cannot hold the model; states what each section needs.
    ArenaTooSmall(ArenaNeeds),
    /// The planner refused the requests.
    Plan(PlanError),
    /// An arena operation failed for another reason.
    Arena(ArenaError),
    /// A request or option asked for an invalid alignment.
    InvalidAlignment {
        /// The alignment.
        align: u32,
    },
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllocError::ArenaTooSmall(n) => write!(
                f,
                "arena too small: {} bytes given; needs head {}{} + tail {} (and {} of set-up memory before the head is committed)",
                n.available,
                if n.head_exact { "" } else { "at least " },
                n.head,
                n.tail,
                n.temp
            ),
            AllocError::Plan(e) => write!(f, "planning failed: {e}"),
            AllocError::Arena(e) => write!(f, "{e}"),
            AllocError::InvalidAlignment { align } => {
                write!(f, "alignment {align} is not a power of two up to 1 MiB")
            }
        }
    }
}

impl core::error::Error for AllocError {}

impl From<PlanError> for AllocError {
    fn from(e: PlanError) -> Self {
        AllocError::Plan(e)
    }
}

/// Plans `model` (plus `scratch` requests from kernels) with `planner` into
/// `arena`, calls `report` with the full plan while it is still in temp
/// memory, then commits the head and records each tensor's location.
pub fn allocate(
    model: &Model<'_>,
    planner: &dyn MemoryPlanner,
    arena: &mut Arena<'_>,
    options: &AllocOptions,
    scratch: &[BufferRequest],
    report: impl FnOnce(&ArenaPlan<'_>),
) -> Result<Allocation, AllocError> {
    let align = options.align;
    if !align.is_power_of_two() || align > crate::request::MAX_ALIGN {
        return Err(AllocError::InvalidAlignment { align });
    }
    let tensor_requests = liveness::tensor_request_count(model);
    let count = tensor_requests + scratch.len();
    let workspace_words = planner.workspace_words(count);
    let temp_need = count * size_of::<BufferRequest>() + 4 * (workspace_words + count);
    let too_small = |arena: &Arena<'_>, head: Option<u32>| {
        let tail = tail_need(model, align);
        AllocError::ArenaTooSmall(ArenaNeeds {
            available: arena.capacity() as u32,
            head: head.unwrap_or_else(|| model_lower_bound(model, align, scratch)),
            head_exact: head.is_some(),
            temp: temp_need as u32,
            tail,
        })
    };

    // Tail: one slot per tensor, then the variable tensors' state.
    let n_tensors = model.tensor_count() as usize;
    let slots = arena
        .alloc_persistent(
            n_tensors * size_of::<TensorSlot>(),
            align_of::<TensorSlot>() as u32,
        )
        .map_err(|_| too_small(arena, None))?;
    for tensor in model.tensors() {
        let slot = if tensor.is_variable && tensor.constant.is_none() {
            let region = arena
                .alloc_persistent(tensor.bytes as usize, align)
                .map_err(|_| too_small(arena, None))?;
            TensorSlot {
                offset: region.offset,
                bytes: tensor.bytes,
            }
        } else {
            TensorSlot {
                offset: TensorSlot::NOT_IN_ARENA,
                bytes: tensor.bytes,
            }
        };
        let i = tensor.index as usize;
        bytemuck::cast_slice_mut::<u8, TensorSlot>(arena.bytes_mut(slots))[i] = slot;
    }

    // Temp: requests, planner workspace, offsets.
    let head_align = scratch.iter().map(|r| r.align).fold(align, u32::max);
    let head_start = arena.head_start(head_align).map_err(AllocError::Arena)?;
    let temp = arena
        .alloc_temp(temp_need, 4)
        .map_err(|_| too_small(arena, None))?;
    let tail_bytes = arena.tail_bytes() as u32;
    let head = {
        let (temp_bytes, slot_bytes) = arena
            .pair_mut(temp, slots)
            .ok_or(AllocError::Arena(ArenaError::TempInUse))?;
        let (request_bytes, rest) = temp_bytes.split_at_mut(count * size_of::<BufferRequest>());
        let requests: &mut [BufferRequest] = bytemuck::cast_slice_mut(request_bytes);
        let words: &mut [u32] = bytemuck::cast_slice_mut(rest);
        let (workspace, offsets) = words.split_at_mut(workspace_words);
        liveness::tensor_requests(model, align, &mut requests[..tensor_requests]);
        requests[tensor_requests..].copy_from_slice(scratch);
        let head = planner.plan(requests, workspace, offsets)?;
        report(&ArenaPlan {
            planner: planner.name(),
            requests,
            offsets,
            head,
            tail: tail_bytes,
            temp: temp_need as u32,
            lower_bound: crate::planner::lower_bound(requests).min(u64::from(u32::MAX)) as u32,
            head_start,
        });
        let slots: &mut [TensorSlot] = bytemuck::cast_slice_mut(slot_bytes);
        for (request, &offset) in requests.iter().zip(offsets.iter()) {
            if let Some(t) = request.tensor_index() {
                slots[t as usize].offset = head_start + offset;
            }
        }
        head
    };

    // Commit the head over the released temp memory.
    arena.reset_temp();
    let head_region = arena
        .commit_head(head as usize, head_align)
        .map_err(|_| too_small(arena, Some(head)))?;
    Ok(Allocation {
        slots,
        head: head_region,
        tail_bytes,
        temp_bytes: temp_need as u32,
        used_bytes: arena.used_bytes() as u32,
    })
}

/// Persistent bytes `model` needs with activation alignment `align`, for an
/// arena whose end is `align`-aligned (padding at other addresses can add
/// up to `align - 1` bytes per variable tensor).
pub fn tail_need(model: &Model<'_>, align: u32) -> u32 {
    let slots = u64::from(model.tensor_count()) * size_of::<TensorSlot>() as u64;
    let mut end = align_up(slots, u64::from(align));
    for tensor in model.tensors() {
        if tensor.is_variable && tensor.constant.is_none() {
            end = align_up(end + u64::from(tensor.bytes), u64::from(align));
        }
    }
    end.min(u64::from(u32::MAX)) as u32
}

/// The liveness lower bound computed straight from the model, with no
/// memory: used to state what the head needs when planning did not fit.
fn model_lower_bound(model: &Model<'_>, align: u32, scratch: &[BufferRequest]) -> u32 {
    let padded = |r: &BufferRequest| u64::from(r.padded_size().unwrap_or(0));
    let live_at = |step: u32| {
        let tensors = liveness::tensor_request_iter(model)
            .map(|r| r.with_align(align))
            .filter(|r| r.first_step <= step && step <= r.live_until())
            .map(|r| padded(&r))
            .sum::<u64>();
        let scratch = scratch
            .iter()
            .filter(|r| r.first_step <= step && step <= r.live_until())
            .map(padded)
            .sum::<u64>();
        tensors + scratch
    };
    let steps = model.operator_count().max(1);
    (0..steps)
        .map(live_at)
        .max()
        .unwrap_or(0)
        .min(u64::from(u32::MAX)) as u32
}
