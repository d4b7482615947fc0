//! From a verified model to a committed arena: the per-tensor records and
//! variable tensors in the tail, the request list and planner in temp, and
//! the planned buffers in the head.
//!
//! This module holds the results and errors and [`allocate`], the one-call
//! entry; the steps themselves are [`Staging`]'s (module `staging`).
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

mod staging;

pub use staging::Staging;

use crate::schedule::Schedule;
use core::fmt;

use bytemuck::{Pod, Zeroable};

use crate::arena::{Arena, ArenaError, Region};
use crate::canary::{CanaryMode, SectionGuards};
use crate::model::Model;
use crate::planner::{MemoryPlanner, PlanError};
use crate::pool::{PoolError, PoolLayout};
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

    /// Set in `offset` for constant tensors: the rest of `offset` is then
    /// the data's offset in the model bytes (flash), so kernels reach
    /// constants without walking the flatbuffer again.
    pub const IN_MODEL: u32 = 1 << 31;

    /// The data's offset in the model bytes, for constant tensors.
    pub const fn model_offset(&self) -> Option<u32> {
        if self.offset != Self::NOT_IN_ARENA && self.offset & Self::IN_MODEL != 0 {
            Some(self.offset & !Self::IN_MODEL)
        } else {
            None
        }
    }
}

/// Settings for [`allocate`].
#[derive(Debug, Clone, Copy)]
pub struct AllocOptions {
    /// Alignment of every activation tensor (a power of two up to 1 MiB).
    pub align: u32,
    /// Guard bands to reserve and check.
    pub canary: CanaryMode,
    /// The memory pools the arena spans ([`PoolLayout::WHOLE`]: one).
    pub pools: PoolLayout,
    /// TFLM's schedule, or the lean one (ops writing over their inputs).
    pub schedule: Schedule,
}

impl AllocOptions {
    /// 16-byte alignment, no canaries, one pool.
    pub const DEFAULT: AllocOptions = AllocOptions {
        align: DEFAULT_ALIGN,
        canary: CanaryMode::Off,
        pools: PoolLayout::WHOLE,
        schedule: Schedule::Tflm,
    };
}

impl Default for AllocOptions {
    fn default() -> Self {
        AllocOptions::DEFAULT
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
    /// One [`TensorSlot`] per scratch request: its offset from the arena's
    /// start and its size.
    pub scratch: Region,
    /// The planned section.
    pub head: Region,
    /// Persistent bytes (tail, with padding).
    pub tail_bytes: u32,
    /// Peak set-up bytes.
    pub temp_bytes: u32,
    /// The arena's high-water mark: what this model needs at this address.
    pub used_bytes: u32,
    /// Where the guard bands are.
    pub guards: SectionGuards,
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
    /// Bytes before the head's first buffer: the arena's start guard and
    /// the padding up to the head's alignment (large when a buffer asks for
    /// an alignment the arena's start is far from).
    pub head_start: u32,
    /// Set-up memory for the request list and planner workspace.
    pub temp: u32,
    /// Persistent section.
    pub tail: u32,
    /// The op (step) at which the most bytes are live: where the arena
    /// runs out first under this schedule; `u32::MAX` when not known.
    pub peak_step: u32,
}

impl ArenaNeeds {
    /// Bytes missing: what the sections need beyond what was given.
    pub fn short(&self) -> u32 {
        let needs =
            u64::from(self.head_start) + u64::from(self.head.max(self.temp)) + u64::from(self.tail);
        needs
            .saturating_sub(u64::from(self.available))
            .min(u64::from(u32::MAX)) as u32
    }
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
    /// The planner's plan breaks a rule (overlap of live buffers,
    /// misalignment, a buffer outside the head), with the buffers at fault
    /// named (positions, owners, lifetimes, offsets): what a port author
    /// needs.
    PlanRejected(crate::planner::check::PlanFailure),
    /// A request or option asked for an invalid alignment.
    InvalidAlignment {
        /// The alignment.
        align: u32,
    },
    /// The buffers cannot be placed in the arena's memory pools.
    Pool(PoolError),
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllocError::ArenaTooSmall(n) => {
                write!(f, "arena too small: {} bytes given", n.available)?;
                if n.short() > 0 {
                    write!(f, ", {} short", n.short())?;
                }
                write!(
                    f,
                    "; needs head {}{}{} + tail {} (and {} of set-up memory before the head is committed)",
                    if n.head_exact { "" } else { "at least " },
                    n.head,
                    HeadStart(n.head_start),
                    n.tail,
                    n.temp
                )?;
                if n.peak_step != u32::MAX {
                    write!(f, "; the most bytes are live at op {}", n.peak_step)?;
                }
                Ok(())
            }
            AllocError::Plan(e) => write!(f, "planning failed: {e}"),
            AllocError::Arena(e) => write!(f, "{e}"),
            // Short: a firmware's log line (160 bytes) must still hold both buffers.
            AllocError::PlanRejected(p) => write!(f, "plan is invalid: {}: {p}", p.kind()),
            AllocError::InvalidAlignment { align } => {
                write!(f, "alignment {align} is not a power of two up to 1 MiB")
            }
            AllocError::Pool(e) => write!(f, "{e}"),
        }
    }
}

/// ` from byte N` when the head cannot start at the arena's first byte.
struct HeadStart(u32);

impl fmt::Display for HeadStart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            Ok(())
        } else {
            write!(f, " from byte {} (guard and alignment)", self.0)
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
///
/// The interpreter runs the same steps with kernel preparation in between:
/// [`Staging::begin`], [`Staging::request_scratch`] per kernel request,
/// [`Staging::finish`].
pub fn allocate(
    model: &Model<'_>,
    planner: &dyn MemoryPlanner,
    arena: &mut Arena<'_>,
    options: &AllocOptions,
    scratch: &[BufferRequest],
    report: impl FnOnce(&ArenaPlan<'_>),
) -> Result<Allocation, AllocError> {
    let mut staging = Staging::begin(model, planner, arena, options)?;
    for request in scratch {
        staging.request_scratch(model, arena, *request)?;
    }
    staging.finish(model, planner, arena, report)
}

/// Views arena bytes as records. The allocator aligns every region it
/// carves for its type, so the cast cannot fail except for empty regions,
/// whose dangling pointer carries no alignment.
pub(crate) fn cast_mut<T: Pod>(bytes: &mut [u8]) -> &mut [T] {
    if bytes.is_empty() {
        return &mut [];
    }
    match bytemuck::try_cast_slice_mut(bytes) {
        Ok(values) => values,
        // A fixed message: a formatted one would link `core::fmt` into a
        // firmware built without it.
        Err(_) => panic!("an arena region is not aligned or sized for its records"),
    }
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
fn model_lower_bound(
    model: &Model<'_>,
    schedule: Schedule,
    align: u32,
    scratch: &[BufferRequest],
) -> u32 {
    let mut most = 0;
    crate::schedule::for_each_live_sum(model, schedule, align, scratch, |_, live| {
        most = most.max(live)
    });
    most.min(u64::from(u32::MAX)) as u32
}
