//! An allocation in progress, step by step: [`Staging::begin`] lays out
//! the tail and the tensor requests, kernels append scratch requests as
//! they prepare, and [`Staging::finish`] plans, checks, records and
//! commits.
//!
//! Apart from the allocation's types and its one-call entry
//! ([`allocate`](super::allocate)) because the interpreter drives these
//! steps itself, with kernel preparation between them: the types are what
//! callers read, this is how the arena gets there.

use crate::arena::{Arena, ArenaError, Region};
use crate::canary::{self, BufferGuard, CanaryMode, GUARD_BYTES, SectionGuards};
use crate::model::Model;
use crate::planner::MemoryPlanner;
use crate::pool::{self, POOLS_LINKED, PoolError, PoolLayout};
use crate::request::{BufferOwner, BufferRequest};
use crate::schedule::Schedule;

use super::{
    AllocError, AllocOptions, Allocation, ArenaNeeds, ArenaPlan, TensorSlot, cast_mut,
    model_lower_bound, tail_need,
};

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
    schedule: Schedule,
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
        let schedule = crate::schedule::resolve(model, options.schedule, align);
        let tensor_requests = crate::schedule::tensor_request_count(model, schedule);
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
            schedule,
            #[cfg(feature = "fault-injection")]
            unchecked: false,
        };
        if options.pools.is_split() && !POOLS_LINKED {
            return Err(AllocError::Pool(PoolError::NotLinked));
        }
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
                unplanned_slot(model, &tensor)
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
        crate::schedule::tensor_requests(model, schedule, align, requests);
        if options.canary == CanaryMode::Buffers {
            // Every buffer is planned with its guard band after it.
            for r in requests.iter_mut() {
                r.size = r.size.saturating_add(GUARD_BYTES);
            }
        }
        Ok(staging)
    }

    /// The schedule this allocation runs ([`crate::schedule::resolve`]d).
    pub fn schedule(&self) -> Schedule {
        self.schedule
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

    /// Bytes of each section guard band (the arena's start and end, the
    /// head's end, the tail's start): none when canaries are off.
    fn section_guard(&self) -> u32 {
        if self.canary == CanaryMode::Off {
            0
        } else {
            GUARD_BYTES
        }
    }

    /// Whether the arena is split into pools (never in a `no-pools` build,
    /// which `begin` refused one: the compiler then drops the pools' code).
    #[inline(always)]
    fn split(&self) -> bool {
        POOLS_LINKED && self.pools.is_split()
    }

    fn temp_need(&self, extra_scratch: usize) -> usize {
        let count = self.tensor_requests + self.scratch_requests + extra_scratch;
        count * size_of::<BufferRequest>() + 4 * (self.workspace_words(count) + count)
    }

    /// Planner workspace for `count` requests, plus the pools' share of it
    /// when the arena is split.
    fn workspace_words(&self, count: usize) -> usize {
        let pooled = if self.split() {
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
        let guard = self.section_guard();
        let head_align = extra.iter().fold(self.head_align, |a, r| a.max(r.align));
        AllocError::ArenaTooSmall(ArenaNeeds {
            available: arena.capacity() as u32,
            head: head
                .unwrap_or_else(|| model_lower_bound(model, self.schedule, self.align, extra)),
            head_exact: head.is_some(),
            head_start: arena.aligned_offset(guard, head_align).unwrap_or(guard),
            temp: self.temp_need(extra.len()) as u32,
            // Once scratch slots are in the tail, `tail_bytes` counts them.
            tail: (arena.tail_bytes() as u32).max(tail_need(model, self.align) + scratch_bytes),
            peak_step: peak_step(model, self.schedule, self.align, extra),
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
        if self.split() || own_words <= seed_words {
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
        let guard = self.section_guard();
        let tail = self.reserve_tail_records(model, arena, count)?;
        let (planner, workspace_words) =
            match self.seed_if_better(model, planner, arena, count, guard)? {
                Some(seed) => (seed, seed.workspace_words(count)),
                None => (planner, self.workspace_words(count)),
            };
        let words = arena
            .alloc_temp(4 * (workspace_words + count), 4)
            .map_err(|_| self.too_small(model, arena, None, &[]))?;
        let bounds = self.head_bounds(model, arena)?;
        let temp_bytes = words.end() - self.requests.offset;
        // The first pool starts after the start guard; the one holding the
        // tail ends before the head's end guard and the tail.
        let pools = if self.split() {
            self.pools
        } else {
            PoolLayout::WHOLE
        };
        let windows = pools.windows(
            bounds.start,
            bounds.tail_start.saturating_sub(guard.into()),
            |at| {
                arena
                    .aligned_offset(at, self.head_align)
                    .map_err(AllocError::Arena)
            },
        )?;
        let windows = &windows[..pools.pools().len()];
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
                    tail.scratch_offsets,
                    tail.buffer_table,
                ])
                .ok_or(AllocError::Arena(ArenaError::TempInUse))?;
            let requests: &[BufferRequest] = cast_mut(request_bytes);
            let words: &mut [u32] = cast_mut(word_bytes);
            let (workspace, offsets) = words.split_at_mut(workspace_words);
            let head = self.plan_head(planner, windows, requests, workspace, offsets, &bounds)?;
            report(&ArenaPlan {
                planner: planner.name(),
                requests,
                offsets,
                head,
                tail: bounds.tail_bytes,
                temp: temp_bytes,
                lower_bound: crate::planner::lower_bound(requests).min(u64::from(u32::MAX)) as u32,
                head_start: bounds.start,
            });
            let locations = Locations {
                slots: cast_mut(slot_bytes),
                scratch: cast_mut(scratch_bytes),
                guard_table: cast_mut(table_bytes),
            };
            self.record_locations(requests, offsets, bounds.start, locations);
            head
        };
        if crate::schedule::LEAN_LINKED && self.schedule != Schedule::Tflm {
            // A tensor written over its chain's first lives there.
            let slots: &mut [TensorSlot] = cast_mut(arena.bytes_mut(self.slots));
            for tensor in model.tensors() {
                let first = crate::schedule::buffer_of(model, self.schedule, tensor.index);
                if first != tensor.index {
                    slots[tensor.index as usize].offset = slots[first as usize].offset;
                }
            }
        }
        let guards = self.commit_head(model, arena, bounds.start, head, &tail)?;
        Ok(Allocation {
            slots: self.slots,
            scratch: tail.scratch_offsets,
            head: Region {
                offset: bounds.start,
                len: head,
            },
            tail_bytes: arena.tail_bytes() as u32,
            temp_bytes,
            used_bytes: arena.used_bytes() as u32,
            guards,
        })
    }

    /// The tail records [`Staging::finish`] reserves before planning: the
    /// scratch buffers' locations (kernels look them up at invoke), the
    /// buffer guard table in `Buffers` mode, and the guard band between
    /// head and tail (the tail's lowest bytes).
    fn reserve_tail_records(
        &self,
        model: &Model<'_>,
        arena: &mut Arena<'_>,
        count: usize,
    ) -> Result<TailRecords, AllocError> {
        let guard = self.section_guard();
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
        let tail_guard = if guard > 0 {
            arena
                .alloc_persistent(guard as usize, 1)
                .map_err(|_| self.too_small(model, arena, None, &[]))?
        } else {
            Region::default()
        };
        Ok(TailRecords {
            scratch_offsets,
            buffer_table,
            tail_guard,
        })
    }

    /// Where the head may lie once the tail and temp memory are set, and
    /// what to report if the plan does not fit there.
    fn head_bounds(&self, model: &Model<'_>, arena: &Arena<'_>) -> Result<HeadBounds, AllocError> {
        let guard = self.section_guard();
        // The head starts after the arena's start guard, aligned for its buffers.
        let start = arena
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
                peak_step: u32::MAX,
            },
        };
        Ok(HeadBounds {
            start,
            tail_start,
            guard,
            tail_bytes: arena.tail_bytes() as u32,
            needs_if_too_small,
        })
    }

    /// Plans the requests (pool by pool in a split arena) and checks the
    /// plan before anything is placed by it.
    fn plan_head(
        &self,
        planner: &dyn MemoryPlanner,
        windows: &[pool::Window],
        requests: &[BufferRequest],
        workspace: &mut [u32],
        offsets: &mut [u32],
        bounds: &HeadBounds,
    ) -> Result<u32, AllocError> {
        let head = if !POOLS_LINKED || windows.is_empty() {
            planner.plan(requests, workspace, offsets)?
        } else {
            pool::plan(planner, windows, requests, workspace, offsets).map_err(AllocError::Pool)?
        };
        // Planners are a trait users implement; kernels later hand out
        // views of these buffers, so the plan is checked, not trusted.
        self.check_plan(requests, offsets, head)?;
        // The head (and its end guard) must end before the tail starts;
        // checked before any `head_start + offset` can overflow.
        if u64::from(bounds.start) + u64::from(head) + u64::from(bounds.guard) > bounds.tail_start {
            return Err(AllocError::ArenaTooSmall(ArenaNeeds {
                head,
                head_exact: true,
                ..bounds.needs_if_too_small
            }));
        }
        Ok(head)
    }

    /// Writes where each planned buffer starts, the head starting at
    /// `head_start`: a tensor's offset in its slot, a scratch buffer's
    /// offset and size in the scratch table, and (`Buffers` mode) where
    /// each buffer's guard band is, with its owner and lifetime.
    fn record_locations(
        &self,
        requests: &[BufferRequest],
        offsets: &[u32],
        head_start: u32,
        locations: Locations<'_>,
    ) {
        let Locations {
            slots,
            scratch,
            guard_table,
        } = locations;
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
            if let Some(entry) = guard_table.get_mut(i) {
                *entry = BufferGuard {
                    offset: start + data,
                    owner,
                    first_step: request.first_step,
                    last_step: request.live_until(),
                };
            }
        }
    }

    /// Commits the head (`head` bytes from `head_start`, and its end guard)
    /// over the released temp memory, then fills the section guard bands.
    fn commit_head(
        &self,
        model: &Model<'_>,
        arena: &mut Arena<'_>,
        head_start: u32,
        head: u32,
        tail: &TailRecords,
    ) -> Result<SectionGuards, AllocError> {
        let guard = self.section_guard();
        arena.reset_temp();
        arena
            .commit_head_at(head_start as usize, (head + guard) as usize)
            .map_err(|_| self.too_small(model, arena, Some(head), &[]))?;
        let mut guards = SectionGuards {
            mode: self.canary,
            buffer_table: tail.buffer_table,
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
                tail.tail_guard,
                self.end_guard,
            ];
            for region in guards.regions {
                canary::fill(arena.bytes_mut(region));
            }
        }
        Ok(guards)
    }
}

/// The tail records [`Staging::finish`] reserves before it plans.
#[derive(Debug, Clone, Copy)]
struct TailRecords {
    /// One [`TensorSlot`] per scratch request.
    scratch_offsets: Region,
    /// One [`BufferGuard`] per request in `Buffers` mode, else empty.
    buffer_table: Region,
    /// The guard band between head and tail (empty with canaries off).
    tail_guard: Region,
}

/// Where the head may lie, fixed before planning.
#[derive(Debug, Clone, Copy)]
struct HeadBounds {
    /// The head's first byte, from the arena's start: after the start
    /// guard, aligned for every buffer.
    start: u32,
    /// Where the tail begins: the head and its end guard end by here.
    tail_start: u64,
    /// Bytes of each section guard band.
    guard: u32,
    /// Persistent bytes, as the plan's report states them.
    tail_bytes: u32,
    /// What a head that does not fit is reported with (its own size apart).
    needs_if_too_small: ArenaNeeds,
}

/// The records [`Staging::finish`] writes each planned buffer's location
/// into.
#[derive(Debug)]
struct Locations<'r> {
    /// One per tensor: a planned tensor's offset.
    slots: &'r mut [TensorSlot],
    /// One per scratch request: its offset and size.
    scratch: &'r mut [TensorSlot],
    /// One per request in `Buffers` mode (else empty): its guard band.
    guard_table: &'r mut [BufferGuard],
}

/// The step at which the most bytes are live (tensors under `schedule`,
/// and `extra`); `u32::MAX` for a model without ops.
fn peak_step(model: &Model<'_>, schedule: Schedule, align: u32, extra: &[BufferRequest]) -> u32 {
    let mut most = (0, u32::MAX);
    crate::schedule::for_each_live_sum(model, schedule, align, extra, |step, live| {
        if live > most.0 || most.1 == u32::MAX {
            most = (live, step);
        }
    });
    if model.operator_count() == 0 {
        u32::MAX
    } else {
        most.1
    }
}

/// The slot of a tensor that is neither planned nor a variable: where a
/// constant sits in the model bytes (both are slices of one file), else
/// nowhere.
fn unplanned_slot(model: &Model<'_>, tensor: &crate::model::TensorInfo<'_>) -> TensorSlot {
    let offset = tensor.constant.and_then(|data| {
        let at = (data.as_ptr() as usize).wrapping_sub(model.bytes().as_ptr() as usize);
        u32::try_from(at)
            .ok()
            .filter(|&o| o < TensorSlot::IN_MODEL - 1)
    });
    TensorSlot {
        offset: offset.map_or(TensorSlot::NOT_IN_ARENA, |o| o | TensorSlot::IN_MODEL),
        bytes: tensor.bytes,
    }
}
