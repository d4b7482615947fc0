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
use crate::canary::{self, BufferGuard, CanaryMode, GUARD_BYTES, SectionGuards};
use crate::liveness;
use crate::model::Model;
use crate::planner::{MemoryPlanner, PlanError};
use crate::pool::{self, PoolError, PoolLayout};
use crate::request::{BufferOwner, BufferRequest, DEFAULT_ALIGN, align_up};

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
}

impl AllocOptions {
    /// 16-byte alignment, no canaries, one pool.
    pub const DEFAULT: AllocOptions = AllocOptions {
        align: DEFAULT_ALIGN,
        canary: CanaryMode::Off,
        pools: PoolLayout::WHOLE,
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
            AllocError::ArenaTooSmall(n) => write!(
                f,
                "arena too small: {} bytes given; needs head {}{}{} + tail {} (and {} of set-up memory before the head is committed)",
                n.available,
                if n.head_exact { "" } else { "at least " },
                n.head,
                HeadStart(n.head_start),
                n.tail,
                n.temp
            ),
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

/// An allocation in progress: tensor records and variables are in the tail,
/// the tensor requests at the bottom of temp, and kernel scratch requests
/// are appended after them as kernels prepare.
#[derive(Debug)]
pub struct Staging {
    slots: Region,
    requests: Region,
    tensor_requests: usize,
    scratch_requests: usize,
    align: u32,
    head_align: u32,
    workspace_per_request: usize,
    canary: CanaryMode,
    end_guard: Region,
    pools: PoolLayout,
    /// Fault-injection builds only: commit a plan whose live buffers overlap.
    #[cfg(feature = "fault-injection")]
    unchecked: bool,
}

impl Staging {
    /// Reserves the tensor records and variable tensors in the tail and
    /// writes the tensor requests into temp memory.
    pub fn begin(
        model: &Model<'_>,
        planner: &dyn MemoryPlanner,
        arena: &mut Arena<'_>,
        options: &AllocOptions,
    ) -> Result<Self, AllocError> {
        let align = options.align;
        if !align.is_power_of_two() || align > crate::request::MAX_ALIGN {
            return Err(AllocError::InvalidAlignment { align });
        }
        let tensor_requests = liveness::tensor_request_count(model);
        let mut staging = Staging {
            slots: Region::default(),
            requests: Region::default(),
            tensor_requests,
            scratch_requests: 0,
            align,
            head_align: align,
            // Planners' workspace grows linearly with the request count.
            workspace_per_request: planner.workspace_words(1),
            canary: options.canary,
            end_guard: Region::default(),
            pools: options.pools,
            #[cfg(feature = "fault-injection")]
            unchecked: false,
        };
        options
            .pools
            .check_arena(arena.capacity() as u32)
            .map_err(AllocError::Pool)?;
        // The arena's last bytes: a stack growing down into the arena, or a
        // tail allocation running past its end, hits this guard first.
        if options.canary != CanaryMode::Off {
            staging.end_guard = arena
                .alloc_persistent(GUARD_BYTES as usize, 1)
                .map_err(|_| staging.too_small(model, arena, None, &[]))?;
        }

        // Tail: one slot per tensor, then the variable tensors' state.
        let n_tensors = model.tensor_count() as usize;
        staging.slots = arena
            .alloc_persistent(
                n_tensors * size_of::<TensorSlot>(),
                align_of::<TensorSlot>() as u32,
            )
            .map_err(|_| staging.too_small(model, arena, None, &[]))?;
        for tensor in model.tensors() {
            let slot = if tensor.is_variable && tensor.constant.is_none() {
                let region = arena
                    .alloc_persistent(tensor.bytes as usize, align)
                    .map_err(|_| staging.too_small(model, arena, None, &[]))?;
                TensorSlot {
                    offset: region.offset,
                    bytes: tensor.bytes,
                }
            } else {
                match tensor.constant {
                    // Where the constant sits in the model bytes (both are slices of one file).
                    Some(data) => {
                        let at =
                            (data.as_ptr() as usize).wrapping_sub(model.bytes().as_ptr() as usize);
                        let offset = u32::try_from(at)
                            .ok()
                            .filter(|&o| o < TensorSlot::IN_MODEL - 1);
                        TensorSlot {
                            offset: offset
                                .map_or(TensorSlot::NOT_IN_ARENA, |o| o | TensorSlot::IN_MODEL),
                            bytes: tensor.bytes,
                        }
                    }
                    None => TensorSlot {
                        offset: TensorSlot::NOT_IN_ARENA,
                        bytes: tensor.bytes,
                    },
                }
            };
            let i = tensor.index as usize;
            cast_mut::<TensorSlot>(arena.bytes_mut(staging.slots))[i] = slot;
        }

        // Temp: the tensor requests, in TFLM's order (tensor index order).
        staging.requests = arena
            .alloc_temp(
                tensor_requests * size_of::<BufferRequest>(),
                align_of::<BufferRequest>() as u32,
            )
            .map_err(|_| staging.too_small(model, arena, None, &[]))?;
        let requests: &mut [BufferRequest] = cast_mut(arena.bytes_mut(staging.requests));
        liveness::tensor_requests(model, align, requests);
        if options.canary == CanaryMode::Buffers {
            // Every buffer is planned with its guard band after it.
            for r in requests.iter_mut() {
                r.size = r.size.saturating_add(GUARD_BYTES);
            }
        }
        Ok(staging)
    }

    /// The tensor records' region (one [`TensorSlot`] per tensor).
    pub fn slots(&self) -> Region {
        self.slots
    }

    /// Every request so far (tensors, then scratch), to adjust before
    /// planning: an accelerator's alignment and holds.
    pub(crate) fn requests_mut<'x>(&self, arena: &'x mut Arena<'_>) -> &'x mut [BufferRequest] {
        cast_mut(arena.bytes_mut(self.requests))
    }

    /// Test builds only: commit the planner's plan even if live buffers
    /// overlap (alignment and bounds are still checked), so that a broken
    /// port's overlap reaches the kernels and the buffer canaries must
    /// catch it. Unsound with such a plan (kernels get views that alias);
    /// never in a release.
    #[cfg(feature = "fault-injection")]
    pub(crate) fn skip_plan_check(&mut self) {
        self.unchecked = true;
    }

    /// Raises the head's start alignment to at least `align` (a request's
    /// offset is aligned from the head's start).
    pub(crate) fn raise_head_align(&mut self, align: u32) {
        self.head_align = self.head_align.max(align);
    }

    /// Appends a kernel's scratch request; returns its index among the
    /// scratch requests.
    pub fn request_scratch(
        &mut self,
        model: &Model<'_>,
        arena: &mut Arena<'_>,
        request: BufferRequest,
    ) -> Result<u32, AllocError> {
        let mut request = request;
        if self.canary == CanaryMode::Buffers {
            request.size = request.size.saturating_add(GUARD_BYTES);
        }
        if request.padded_size().is_none() {
            return Err(AllocError::InvalidAlignment {
                align: request.align,
            });
        }
        let size = size_of::<BufferRequest>();
        let region = arena
            .alloc_temp(size, align_of::<BufferRequest>() as u32)
            .map_err(|_| self.too_small(model, arena, None, &[request]))?;
        if region.offset != self.requests.end() {
            // Another temp allocation came in between: the list would not be contiguous.
            return Err(AllocError::Arena(ArenaError::TempInUse));
        }
        self.requests.len += size as u32;
        cast_mut::<BufferRequest>(arena.bytes_mut(region))[0] = request;
        self.head_align = self.head_align.max(request.align);
        self.scratch_requests += 1;
        Ok(self.scratch_requests as u32 - 1)
    }

    fn temp_need(&self, extra_scratch: usize) -> usize {
        let count = self.tensor_requests + self.scratch_requests + extra_scratch;
        count * size_of::<BufferRequest>() + 4 * (self.workspace_words(count) + count)
    }

    /// Planner workspace for `count` requests, plus the pools' share of it
    /// when the arena is split.
    fn workspace_words(&self, count: usize) -> usize {
        let pooled = if self.pools.is_split() {
            pool::extra_words(count)
        } else {
            0
        };
        self.workspace_per_request * count + pooled
    }

    fn too_small(
        &self,
        model: &Model<'_>,
        arena: &Arena<'_>,
        head: Option<u32>,
        extra: &[BufferRequest],
    ) -> AllocError {
        let scratch_bytes = 8 * (self.scratch_requests + extra.len()) as u32;
        let guard = if self.canary == CanaryMode::Off {
            0
        } else {
            GUARD_BYTES
        };
        let head_align = extra.iter().fold(self.head_align, |a, r| a.max(r.align));
        AllocError::ArenaTooSmall(ArenaNeeds {
            available: arena.capacity() as u32,
            head: head.unwrap_or_else(|| model_lower_bound(model, self.align, extra)),
            head_exact: head.is_some(),
            head_start: arena.aligned_offset(guard, head_align).unwrap_or(guard),
            temp: self.temp_need(extra.len()) as u32,
            // Once scratch slots are in the tail, `tail_bytes` counts them.
            tail: (arena.tail_bytes() as u32).max(tail_need(model, self.align) + scratch_bytes),
        })
    }

    /// The rules every plan keeps, a failure naming the buffers. (A plan
    /// that keeps them cannot be below the liveness lower bound, so that
    /// bound needs no check of its own.)
    fn check_plan(
        &self,
        requests: &[BufferRequest],
        offsets: &[u32],
        head: u32,
    ) -> Result<(), AllocError> {
        match crate::planner::check::check_plan(requests, offsets, head) {
            Ok(()) => Ok(()),
            // Alignment and bounds were checked before overlaps: only the
            // overlap, the fault under test, gets through.
            #[cfg(feature = "fault-injection")]
            Err(crate::planner::check::PlanFailure::Overlap { .. }) if self.unchecked => Ok(()),
            Err(failure) => Err(AllocError::PlanRejected(failure)),
        }
    }

    /// `planner`'s seed ([`MemoryPlanner::seed`]) when its plan commits a
    /// smaller total than `planner`'s would: the seed is run in temp memory
    /// first, and kept when `planner`'s workspace alone would reach past
    /// the seed's whole plan (its head and end guard, or its own set-up
    /// memory). Its head being no larger, `planner` is never worse
    /// otherwise. Not for split arenas, whose pools plan each window.
    fn seed_if_better<'p>(
        &self,
        model: &Model<'_>,
        planner: &'p dyn MemoryPlanner,
        arena: &mut Arena<'_>,
        count: usize,
        guard: u32,
    ) -> Result<Option<&'p dyn MemoryPlanner>, AllocError> {
        let Some(seed) = planner.seed() else {
            return Ok(None);
        };
        let (own_words, seed_words) = (self.workspace_words(count), seed.workspace_words(count));
        if self.pools.is_split() || own_words <= seed_words {
            return Ok(None);
        }
        let words = arena
            .alloc_temp(4 * (seed_words + count), 4)
            .map_err(|_| self.too_small(model, arena, None, &[]))?;
        let head_start = arena
            .aligned_offset(guard, self.head_align)
            .map_err(AllocError::Arena)?;
        let [request_bytes, word_bytes] = arena
            .regions_mut([self.requests, words])
            .ok_or(AllocError::Arena(ArenaError::TempInUse))?;
        let word_slice: &mut [u32] = cast_mut(word_bytes);
        let (workspace, offsets) = word_slice.split_at_mut(seed_words);
        let seed_head = seed.plan(cast_mut(request_bytes), workspace, offsets)?;
        arena.release_temp_from(words);
        let seed_end = (u64::from(head_start) + u64::from(seed_head) + u64::from(guard))
            .max(u64::from(words.end()));
        let own_end = u64::from(words.offset) + 4 * (own_words + count) as u64;
        Ok((own_end > seed_end).then_some(seed))
    }

    /// Plans every request, reports the plan, records the tensors' and
    /// scratch buffers' locations, releases temp memory and commits the head.
    pub fn finish(
        self,
        model: &Model<'_>,
        planner: &dyn MemoryPlanner,
        arena: &mut Arena<'_>,
        report: impl FnOnce(&ArenaPlan<'_>),
    ) -> Result<Allocation, AllocError> {
        let count = self.tensor_requests + self.scratch_requests;
        let workspace_words = self.workspace_words(count);
        let guard = if self.canary == CanaryMode::Off {
            0
        } else {
            GUARD_BYTES
        };
        // Scratch locations are persistent: kernels look them up at invoke.
        let scratch_offsets = arena
            .alloc_persistent(
                size_of::<TensorSlot>() * self.scratch_requests,
                align_of::<TensorSlot>() as u32,
            )
            .map_err(|_| self.too_small(model, arena, None, &[]))?;
        let buffer_table = if self.canary == CanaryMode::Buffers {
            arena
                .alloc_persistent(
                    size_of::<BufferGuard>() * count,
                    align_of::<BufferGuard>() as u32,
                )
                .map_err(|_| self.too_small(model, arena, None, &[]))?
        } else {
            Region::default()
        };
        // The tail's lowest bytes: the guard between head and tail.
        let tail_guard = if guard > 0 {
            arena
                .alloc_persistent(guard as usize, 1)
                .map_err(|_| self.too_small(model, arena, None, &[]))?
        } else {
            Region::default()
        };
        let (planner, workspace_words) =
            match self.seed_if_better(model, planner, arena, count, guard)? {
                Some(seed) => (seed, seed.workspace_words(count)),
                None => (planner, workspace_words),
            };
        let words = arena
            .alloc_temp(4 * (workspace_words + count), 4)
            .map_err(|_| self.too_small(model, arena, None, &[]))?;
        // The head starts after the arena's start guard, aligned for its buffers.
        let head_start = arena
            .aligned_offset(guard, self.head_align)
            .map_err(AllocError::Arena)?;
        let tail_start = (arena.capacity() - arena.tail_bytes()) as u64;
        let needs_if_too_small = match self.too_small(model, arena, Some(0), &[]) {
            AllocError::ArenaTooSmall(needs) => needs,
            _ => ArenaNeeds {
                available: 0,
                head: 0,
                head_exact: true,
                head_start: 0,
                temp: 0,
                tail: 0,
            },
        };
        let tail_bytes = arena.tail_bytes() as u32;
        let temp_bytes = words.end() - self.requests.offset;
        // The first pool starts after the start guard; the one holding the
        // tail ends before the head's end guard and the tail.
        let windows =
            self.pools
                .windows(head_start, tail_start.saturating_sub(guard.into()), |at| {
                    arena
                        .aligned_offset(at, self.head_align)
                        .map_err(AllocError::Arena)
                })?;
        let windows = &windows[..self.pools.pools().len()];
        let head = {
            let [
                request_bytes,
                word_bytes,
                slot_bytes,
                scratch_bytes,
                table_bytes,
            ] = arena
                .regions_mut([
                    self.requests,
                    words,
                    self.slots,
                    scratch_offsets,
                    buffer_table,
                ])
                .ok_or(AllocError::Arena(ArenaError::TempInUse))?;
            let requests: &[BufferRequest] = cast_mut(request_bytes);
            let words: &mut [u32] = cast_mut(word_bytes);
            let (workspace, offsets) = words.split_at_mut(workspace_words);
            let head = if windows.is_empty() {
                planner.plan(requests, workspace, offsets)?
            } else {
                pool::plan(planner, windows, requests, workspace, offsets)
                    .map_err(AllocError::Pool)?
            };
            // Planners are a trait users implement; kernels later hand out
            // views of these buffers, so the plan is checked, not trusted.
            self.check_plan(requests, offsets, head)?;
            // The head (and its end guard) must end before the tail starts;
            // checked before any `head_start + offset` below can overflow.
            if u64::from(head_start) + u64::from(head) + u64::from(guard) > tail_start {
                return Err(AllocError::ArenaTooSmall(ArenaNeeds {
                    head,
                    head_exact: true,
                    ..needs_if_too_small
                }));
            }
            report(&ArenaPlan {
                planner: planner.name(),
                requests,
                offsets,
                head,
                tail: tail_bytes,
                temp: temp_bytes,
                lower_bound: crate::planner::lower_bound(requests).min(u64::from(u32::MAX)) as u32,
                head_start,
            });
            let slots: &mut [TensorSlot] = cast_mut(slot_bytes);
            let scratch: &mut [TensorSlot] = cast_mut(scratch_bytes);
            let table: &mut [BufferGuard] = cast_mut(table_bytes);
            // In `Buffers` mode each request carries its guard: the data is
            // the first `size - guard` bytes, the guard the rest.
            let buffer_guard = if self.canary == CanaryMode::Buffers {
                GUARD_BYTES
            } else {
                0
            };
            for (i, (request, &offset)) in requests.iter().zip(offsets.iter()).enumerate() {
                let start = head_start + offset;
                let data = request.size - buffer_guard;
                let owner = match request.owner() {
                    BufferOwner::Tensor(t) => {
                        slots[t as usize].offset = start;
                        t
                    }
                    BufferOwner::Scratch { op, .. } => {
                        scratch[i - self.tensor_requests] = TensorSlot {
                            offset: start,
                            bytes: data,
                        };
                        BufferGuard::SCRATCH | op
                    }
                };
                if let Some(entry) = table.get_mut(i) {
                    *entry = BufferGuard {
                        offset: start + data,
                        owner,
                        first_step: request.first_step,
                        last_step: request.live_until(),
                    };
                }
            }
            head
        };

        // Commit the head over the released temp memory.
        arena.reset_temp();
        arena
            .commit_head_at(head_start as usize, (head + guard) as usize)
            .map_err(|_| self.too_small(model, arena, Some(head), &[]))?;
        let mut guards = SectionGuards {
            mode: self.canary,
            buffer_table,
            ..SectionGuards::default()
        };
        if guard > 0 {
            guards.regions = [
                Region {
                    offset: head_start - guard,
                    len: guard,
                },
                Region {
                    offset: head_start + head,
                    len: guard,
                },
                tail_guard,
                self.end_guard,
            ];
            for region in guards.regions {
                canary::fill(arena.bytes_mut(region));
            }
        }
        Ok(Allocation {
            slots: self.slots,
            scratch: scratch_offsets,
            head: Region {
                offset: head_start,
                len: head,
            },
            tail_bytes: arena.tail_bytes() as u32,
            temp_bytes,
            used_bytes: arena.used_bytes() as u32,
            guards,
        })
    }
}

/// Views arena bytes as records. The allocator aligns every region it
/// carves for its type, so the cast cannot fail except for empty regions,
/// whose dangling pointer carries no alignment.
pub(crate) fn cast_mut<T: Pod>(bytes: &mut [u8]) -> &mut [T] {
    if bytes.is_empty() {
        &mut []
    } else {
        bytemuck::cast_slice_mut(bytes)
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
