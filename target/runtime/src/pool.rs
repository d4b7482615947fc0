//! Memory pools: the parts of one arena that differ in who reaches them.
//!
//! An MCU's RAM is several memories: an STM32F746 has 64 KiB of DTCM, then
//! 240 KiB of SRAM1 and 16 KiB of SRAM2, one after the other in the address
//! space; DTCM is the CPU's fastest memory, and a DMA engine or an NPU may
//! not reach it at all. TFLM plans one arena as if it were one memory. Here
//! an arena may span several adjacent pools ([`PoolLayout`]: pool 0 at the
//! arena's start, each next one right after the previous), and the plan
//! puts every buffer into a pool that reaches it:
//!
//! - a buffer an accelerator's job touches ([`Reach::ACCEL`], set when the
//!   schedule claims the op) only into pools the engine reaches;
//! - buffers fill the planned pools in the arena's order, the first pool
//!   first (so a board lists its fastest memory first); when a pool's plan
//!   would not fit, its largest buffer that another pool could take moves
//!   on, until it fits;
//! - each pool's buffers are planned on their own by the chosen planner,
//!   so a pool's head is that planner's head for its share; the tail
//!   (persistent data) grows down from the arena's end, in the last pool,
//!   and set-up memory (temp) uses the first pool's start before the heads
//!   are committed.
//!
//! Because pools are adjacent, a pooled plan is still one list of offsets
//! from the head's start: kernels, canaries and an engine's windows see
//! the same arena as before, and which pool a buffer is in follows from
//! its offset ([`PoolLayout::pool_at`]).
//!
//! ```
//! use hilt_runtime::pool::{Pool, PoolLayout, Reach};
//! let layout = PoolLayout::new(&[
//!     Pool::new(16 * 1024, Reach::CPU),                  // fast, CPU only
//!     Pool::new(64 * 1024, Reach::CPU.with(Reach::ACCEL)),
//! ])
//! .unwrap();
//! assert_eq!(layout.pool_at(20_000), Some(1));
//! assert_eq!(layout.size(), 80 * 1024);
//! ```

use core::fmt;

use bytemuck::Pod;

use crate::planner::{MemoryPlanner, PlanError, lower_bound};
use crate::request::BufferRequest;

/// Who reaches a pool: defined below the requests, which carry it too.
pub use crate::reach::Reach;

/// The most pools one arena may span.
pub const MAX_POOLS: usize = 4;

/// One memory region of the arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Pool {
    /// Bytes of the arena in this pool.
    pub size: u32,
    /// Who reaches it.
    pub reach: Reach,
    /// Whether the CPU reaches it through a data cache (an engine's
    /// buffers there need cleaning and invalidating).
    pub cacheable: bool,
    /// Whether the model's buffers may be planned here (a scenario may
    /// leave a pool of the board's arena unused).
    pub planned: bool,
}

impl Pool {
    /// A planned, uncached pool of `size` bytes.
    pub const fn new(size: u32, reach: Reach) -> Pool {
        Pool {
            size,
            reach,
            cacheable: false,
            planned: true,
        }
    }

    /// The same pool, cached or not.
    #[must_use]
    pub const fn cacheable(mut self, cacheable: bool) -> Pool {
        self.cacheable = cacheable;
        self
    }

    /// The same pool, planned or left unused.
    #[must_use]
    pub const fn planned(mut self, planned: bool) -> Pool {
        self.planned = planned;
        self
    }
}

/// A pool layout that cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum PoolError {
    /// The arena is split into pools, but this build has the runtime's
    /// `no-pools` feature.
    NotLinked,
    /// More pools than [`MAX_POOLS`].
    TooMany {
        /// Pools given.
        count: u32,
    },
    /// The pools' sizes add up past 4 GiB.
    TooLarge,
    /// No pool is planned.
    NonePlanned,
    /// The arena is not the size of its pools.
    SizeMismatch {
        /// Bytes of the pools.
        pools: u32,
        /// Bytes of the arena.
        arena: u32,
    },
    /// A buffer that no planned pool reaches.
    Unreachable {
        /// Request position.
        request: u32,
        /// Who must reach it.
        needs: Reach,
    },
    /// A pool whose share of the buffers does not fit, with no other pool
    /// able to take any of them.
    Short {
        /// The pool, by position.
        pool: u32,
        /// Bytes its buffers need (the planner's head, or the lower bound
        /// when that alone does not fit).
        needs: u32,
        /// Bytes it has for them.
        capacity: u32,
    },
    /// The planner refused a pool's share.
    Plan(PlanError),
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PoolError::TooMany { count } => {
                write!(f, "{count} memory pools given, at most {MAX_POOLS}")
            }
            PoolError::NotLinked => f.write_str(
                "the arena is split into memory pools, but this build has the `no-pools` feature",
            ),
            PoolError::TooLarge => f.write_str("the memory pools add up past 4 GiB"),
            PoolError::NonePlanned => f.write_str("no memory pool is planned"),
            PoolError::SizeMismatch { pools, arena } => write!(
                f,
                "the memory pools hold {pools} bytes but the arena is {arena} bytes"
            ),
            PoolError::Unreachable { request, needs } => write!(
                f,
                "buffer request {request}: no planned pool is reached by {needs:?}"
            ),
            PoolError::Short {
                pool,
                needs,
                capacity,
            } => write!(
                f,
                "pool {pool} is short: its buffers need {needs} bytes, it has {capacity} ({} short)",
                needs.saturating_sub(capacity)
            ),
            PoolError::Plan(e) => write!(f, "planning a pool: {e}"),
        }
    }
}

impl core::error::Error for PoolError {}

/// Whether memory pools are linked: off under the `no-pools` feature (a
/// firmware whose arena is one memory), where an arena split into pools is
/// refused at allocate and the compiler drops the pools' planning.
pub const POOLS_LINKED: bool = !cfg!(feature = "no-pools");

/// The pools of one arena, in address order. The default is one pool
/// that is the whole arena, reached by everyone: today's single arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PoolLayout {
    pools: [Pool; MAX_POOLS],
    count: u8,
}

impl Default for PoolLayout {
    fn default() -> Self {
        PoolLayout::WHOLE
    }
}

impl PoolLayout {
    /// One pool, the whole arena, reached by the CPU and any engine.
    pub const WHOLE: PoolLayout = PoolLayout {
        pools: [Pool::new(0, Reach::from_bits(0)); MAX_POOLS],
        count: 0,
    };

    /// Adjacent pools, the first at the arena's start.
    pub const fn new(pools: &[Pool]) -> Result<PoolLayout, PoolError> {
        if pools.len() > MAX_POOLS {
            return Err(PoolError::TooMany {
                count: pools.len() as u32,
            });
        }
        let mut out = PoolLayout::WHOLE;
        let mut total = 0u64;
        let mut planned = false;
        let mut i = 0;
        while i < pools.len() {
            out.pools[i] = pools[i];
            total += pools[i].size as u64;
            planned |= pools[i].planned;
            i += 1;
        }
        if total > u32::MAX as u64 {
            return Err(PoolError::TooLarge);
        }
        if !planned && !pools.is_empty() {
            return Err(PoolError::NonePlanned);
        }
        out.count = pools.len() as u8;
        Ok(out)
    }

    /// The pools; empty for [`WHOLE`](Self::WHOLE).
    pub fn pools(&self) -> &[Pool] {
        &self.pools[..self.count as usize]
    }

    /// Whether the arena is split (more than the one whole pool).
    pub const fn is_split(&self) -> bool {
        self.count > 0
    }

    /// Bytes of all pools.
    pub fn size(&self) -> u32 {
        self.pools().iter().map(|p| p.size).sum()
    }

    /// Offset of pool `pool`'s first byte from the arena's start.
    pub fn start(&self, pool: usize) -> u32 {
        self.pools()[..pool.min(self.count as usize)]
            .iter()
            .map(|p| p.size)
            .sum()
    }

    /// The pool holding the arena's byte `offset`.
    pub fn pool_at(&self, offset: u32) -> Option<usize> {
        let mut end = 0u32;
        for (i, p) in self.pools().iter().enumerate() {
            end += p.size;
            if offset < end {
                return Some(i);
            }
        }
        None
    }

    /// Checks the layout against an arena of `arena` bytes.
    pub fn check_arena(&self, arena: u32) -> Result<(), PoolError> {
        if self.is_split() && self.size() != arena {
            return Err(PoolError::SizeMismatch {
                pools: self.size(),
                arena,
            });
        }
        Ok(())
    }
}

impl PoolLayout {
    /// `u32` words [`plan`](Self::plan) needs for `count` requests with
    /// `planner`.
    pub fn workspace_words(planner: &dyn MemoryPlanner, count: usize) -> usize {
        planner.workspace_words(count) + extra_words(count)
    }

    /// Places `requests` in the pools as the allocator does, with the head
    /// at the arena's start: offsets are from the first pool's start, and
    /// each pool's share starts at its own start, aligned for the most
    /// aligned request. What a port planner is run through when it is
    /// checked against pools (the allocator-port kit).
    pub fn plan(
        &self,
        planner: &dyn MemoryPlanner,
        requests: &[BufferRequest],
        words: &mut [u32],
        offsets: &mut [u32],
    ) -> Result<u32, PoolError> {
        let align = requests.iter().map(|r| r.align).max().unwrap_or(1).max(1);
        let aligned = |at: u32| {
            let up = crate::request::align_up(u64::from(at), u64::from(align));
            Ok::<u32, PoolError>(up.min(u64::from(u32::MAX)) as u32)
        };
        let windows = self.windows(0, u64::MAX, aligned)?;
        if offsets.len() < requests.len() {
            return Err(PoolError::Plan(PlanError::OffsetsTooShort {
                needed: requests.len() as u32,
                given: offsets.len() as u32,
            }));
        }
        plan(
            planner,
            &windows[..self.pools().len()],
            requests,
            words,
            offsets,
        )
    }

    /// Each pool's room for buffers, from the head's start: a pool starts
    /// no lower than `head_start`, at the offset `aligned` gives (the
    /// alignment of every buffer, by address), and ends no higher than
    /// `head_limit` (where the head must end before the tail).
    pub(crate) fn windows<E>(
        &self,
        head_start: u32,
        head_limit: u64,
        aligned: impl Fn(u32) -> Result<u32, E>,
    ) -> Result<[Window; MAX_POOLS], E> {
        let mut windows = [Window::default(); MAX_POOLS];
        for (k, p) in self.pools().iter().enumerate() {
            let start = aligned(self.start(k).max(head_start))?;
            let end = (u64::from(self.start(k)) + u64::from(p.size)).min(head_limit);
            windows[k] = Window {
                start: start - head_start,
                end: end.saturating_sub(u64::from(head_start)) as u32,
                reach: p.reach,
                planned: p.planned,
            };
        }
        Ok(windows)
    }
}

/// Where a pool's buffers may go, in head coordinates (bytes from the
/// head's start): `[start, end)`, `start` aligned for every buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Window {
    pub(crate) start: u32,
    pub(crate) end: u32,
    pub(crate) reach: Reach,
    pub(crate) planned: bool,
}

impl Window {
    fn capacity(&self) -> u32 {
        self.end.saturating_sub(self.start)
    }
}

/// `u32` words [`plan`] needs beyond the planner's own workspace.
pub(crate) const fn extra_words(count: usize) -> usize {
    // A copy of each request (8 words), its offset in the pool, its pool
    // and its position in the copy.
    count * (size_of::<BufferRequest>() / 4 + 3)
}

/// Views planner workspace words as records (`T` a whole number of
/// words, 4-byte aligned: the caller sizes the slice for it).
fn cast_words<T: Pod>(words: &mut [u32]) -> &mut [T] {
    bytemuck::try_cast_slice_mut(words).unwrap_or(&mut [])
}

/// Marks a request not yet given a pool.
const UNASSIGNED: u32 = u32::MAX;

/// Puts every request into a window and plans each window's share with
/// `planner`; writes head-relative offsets and returns the head (the end
/// of the highest buffer).
pub(crate) fn plan(
    planner: &dyn MemoryPlanner,
    windows: &[Window],
    requests: &[BufferRequest],
    words: &mut [u32],
    offsets: &mut [u32],
) -> Result<u32, PoolError> {
    let n = requests.len();
    let planner_words = planner.workspace_words(n);
    let needed = planner_words + extra_words(n);
    if words.len() < needed {
        return Err(PoolError::Plan(PlanError::WorkspaceTooSmall {
            needed: needed as u32,
            given: words.len() as u32,
        }));
    }
    let mut work = PoolWork::carve(words, planner_words, requests);
    work.pool_of.fill(UNASSIGNED);
    check_reachable(windows, requests)?;
    for (p, window) in windows.iter().enumerate() {
        if window.planned {
            plan_pool(planner, windows, p, requests, &mut work, offsets)?;
        }
    }
    let mut head = 0u64;
    // Every request has a pool: one a later pool could not take was never
    // moved, so its last pool either took it or returned `Short`.
    for (i, r) in requests.iter().enumerate() {
        head = head.max(u64::from(offsets[i]) + u64::from(r.padded_size().unwrap_or(0)));
    }
    Ok(head.min(u64::from(u32::MAX)) as u32)
}

/// The words [`plan`] is given, carved into the planner's workspace and
/// the records `plan` keeps of its own ([`extra_words`] of them).
struct PoolWork<'w> {
    /// The planner's workspace, for one pool's share at a time.
    workspace: &'w mut [u32],
    /// The share being planned: copies of the pool's candidate requests.
    copy: &'w mut [BufferRequest],
    /// The planner's offsets for the share, from the pool's start.
    sub_offsets: &'w mut [u32],
    /// Each request's pool, or [`UNASSIGNED`].
    pool_of: &'w mut [u32],
    /// The share's requests, by position in the request list.
    members: &'w mut [u32],
}

impl<'w> PoolWork<'w> {
    /// Splits `words` (at least `planner_words + extra_words(n)` long).
    fn carve(words: &'w mut [u32], planner_words: usize, requests: &[BufferRequest]) -> Self {
        let n = requests.len();
        let (workspace, rest) = words.split_at_mut(planner_words);
        let (copy_words, rest) = rest.split_at_mut(core::mem::size_of_val(requests) / 4);
        let (sub_offsets, rest) = rest.split_at_mut(n);
        let (pool_of, rest) = rest.split_at_mut(n);
        let members = &mut rest[..n];
        PoolWork {
            workspace,
            copy: cast_words(copy_words),
            sub_offsets,
            pool_of,
            members,
        }
    }
}

/// Fails on the first request that no planned pool reaches.
fn check_reachable(windows: &[Window], requests: &[BufferRequest]) -> Result<(), PoolError> {
    for (i, r) in requests.iter().enumerate() {
        if !windows
            .iter()
            .any(|w| w.planned && w.reach.covers(r.reach()))
        {
            return Err(PoolError::Unreachable {
                request: i as u32,
                needs: r.reach(),
            });
        }
    }
    Ok(())
}

/// Plans pool `p`'s share: every request still open that it reaches,
/// less the largest ones a later pool could take, one at a time, until
/// the share fits; records each placed request's pool and offset.
fn plan_pool(
    planner: &dyn MemoryPlanner,
    windows: &[Window],
    p: usize,
    requests: &[BufferRequest],
    work: &mut PoolWork<'_>,
    offsets: &mut [u32],
) -> Result<(), PoolError> {
    let window = &windows[p];
    // The candidates: every request still open that this pool reaches.
    let mut count = 0;
    for (i, r) in requests.iter().enumerate() {
        if work.pool_of[i] == UNASSIGNED && window.reach.covers(r.reach()) {
            work.members[count] = i as u32;
            count += 1;
        }
    }
    while count > 0 {
        for k in 0..count {
            work.copy[k] = requests[work.members[k] as usize];
        }
        let share = &work.copy[..count];
        let sub_offsets = &mut work.sub_offsets[..count];
        let head = share_head(
            planner,
            share,
            window.capacity(),
            work.workspace,
            sub_offsets,
        )?;
        if head <= window.capacity() {
            for k in 0..count {
                let i = work.members[k] as usize;
                work.pool_of[i] = p as u32;
                offsets[i] = window.start + work.sub_offsets[k];
            }
            return Ok(());
        }
        let Some(k) = largest_movable(&windows[p + 1..], requests, &work.members[..count]) else {
            return Err(PoolError::Short {
                pool: p as u32,
                needs: head,
                capacity: window.capacity(),
            });
        };
        work.members.copy_within(k + 1..count, k);
        count -= 1;
    }
    Ok(())
}

/// The head `share` needs: its liveness lower bound when that alone is
/// over `capacity` (no plan can fit, so the planner is not run), else the
/// planner's head, raised to cover every buffer it placed.
fn share_head(
    planner: &dyn MemoryPlanner,
    share: &[BufferRequest],
    capacity: u32,
    workspace: &mut [u32],
    sub_offsets: &mut [u32],
) -> Result<u32, PoolError> {
    let bound = lower_bound(share).min(u64::from(u32::MAX)) as u32;
    if bound > capacity {
        return Ok(bound);
    }
    let said = planner
        .plan(share, workspace, sub_offsets)
        .map_err(PoolError::Plan)?;
    // A port's head is not trusted to cover its buffers: a
    // buffer past the pool's end would sit in the next pool.
    Ok(share
        .iter()
        .zip(&*sub_offsets)
        .map(|(r, &o)| u64::from(o) + u64::from(r.padded_size().unwrap_or(u32::MAX)))
        .fold(u64::from(said), u64::max)
        .min(u64::from(u32::MAX)) as u32)
}

/// Of the share's `members`, the position of the largest request that a
/// pool in `later` could take (the last of equal sizes), if any.
fn largest_movable(later: &[Window], requests: &[BufferRequest], members: &[u32]) -> Option<usize> {
    let movable = |r: &BufferRequest| later.iter().any(|w| w.planned && w.reach.covers(r.reach()));
    let mut pick: Option<usize> = None;
    for (k, &m) in members.iter().enumerate() {
        let r = &requests[m as usize];
        if !movable(r) {
            continue;
        }
        let size = r.padded_size().unwrap_or(0);
        let better = match pick {
            None => true,
            Some(j) => size >= requests[members[j] as usize].padded_size().unwrap_or(0),
        };
        if better {
            pick = Some(k);
        }
    }
    pick
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::{Greedy, verify_plan};

    fn window(start: u32, end: u32, reach: Reach) -> Window {
        Window {
            start,
            end,
            reach,
            planned: true,
        }
    }

    fn run(windows: &[Window], requests: &[BufferRequest]) -> Result<(Vec<u32>, u32), PoolError> {
        let mut words =
            vec![0u32; Greedy.workspace_words(requests.len()) + extra_words(requests.len())];
        let mut offsets = vec![0u32; requests.len()];
        let head = plan(&Greedy, windows, requests, &mut words, &mut offsets)?;
        Ok((offsets, head))
    }

    fn in_window(w: &Window, r: &BufferRequest, offset: u32) -> bool {
        offset >= w.start && offset + r.padded_size().unwrap() <= w.end
    }

    const BOTH: Reach = Reach::CPU.with(Reach::ACCEL);

    #[test]
    fn buffers_fill_the_first_pool_and_the_largest_move_on() {
        // Three buffers live together: 64 + 32 + 16 bytes; the fast pool holds 64.
        let requests = [
            BufferRequest::tensor(0, 64, 0, 2),
            BufferRequest::tensor(1, 32, 0, 2),
            BufferRequest::tensor(2, 16, 0, 2),
        ];
        let windows = [window(0, 64, Reach::CPU), window(64, 1024, BOTH)];
        let (offsets, head) = run(&windows, &requests).unwrap();
        // The 64-byte one moved out; the two small ones share the fast pool.
        assert!(in_window(&windows[1], &requests[0], offsets[0]));
        assert!(in_window(&windows[0], &requests[1], offsets[1]));
        assert!(in_window(&windows[0], &requests[2], offsets[2]));
        verify_plan(&requests, &offsets, head).unwrap();
        assert_eq!(head, 64 + 64);
    }

    #[test]
    fn an_engines_buffer_goes_only_where_the_engine_reaches() {
        let requests = [
            BufferRequest::tensor(0, 16, 0, 1).reached_by(Reach::ACCEL),
            BufferRequest::tensor(1, 16, 0, 1),
        ];
        let windows = [window(0, 1024, Reach::CPU), window(1024, 2048, BOTH)];
        let (offsets, head) = run(&windows, &requests).unwrap();
        assert!(in_window(&windows[1], &requests[0], offsets[0]));
        assert!(in_window(&windows[0], &requests[1], offsets[1]));
        verify_plan(&requests, &offsets, head).unwrap();
    }

    #[test]
    fn a_short_pool_is_named_with_its_shortfall() {
        let requests = [
            BufferRequest::tensor(0, 48, 0, 1).reached_by(Reach::ACCEL),
            BufferRequest::tensor(1, 48, 0, 1).reached_by(Reach::ACCEL),
        ];
        let windows = [window(0, 1024, Reach::CPU), window(1024, 1088, BOTH)];
        let e = run(&windows, &requests).unwrap_err();
        assert_eq!(
            e,
            PoolError::Short {
                pool: 1,
                needs: 96,
                capacity: 64
            }
        );
        assert_eq!(
            e.to_string(),
            "pool 1 is short: its buffers need 96 bytes, it has 64 (32 short)"
        );
    }

    #[test]
    fn a_buffer_no_pool_reaches_is_named() {
        let requests = [
            BufferRequest::tensor(0, 16, 0, 1),
            BufferRequest::tensor(1, 16, 0, 1).reached_by(Reach::ACCEL),
        ];
        let mut unplanned = window(1024, 2048, BOTH);
        unplanned.planned = false;
        let windows = [window(0, 1024, Reach::CPU), unplanned];
        assert_eq!(
            run(&windows, &requests).unwrap_err(),
            PoolError::Unreachable {
                request: 1,
                needs: BOTH
            }
        );
    }

    #[test]
    fn a_layout_names_the_pool_of_an_offset_and_checks_the_arena() {
        let layout = PoolLayout::new(&[Pool::new(100, Reach::CPU), Pool::new(50, BOTH)]).unwrap();
        assert_eq!(
            [
                layout.pool_at(0),
                layout.pool_at(99),
                layout.pool_at(100),
                layout.pool_at(150)
            ],
            [Some(0), Some(0), Some(1), None]
        );
        assert_eq!(layout.start(1), 100);
        assert_eq!(
            layout.check_arena(160),
            Err(PoolError::SizeMismatch {
                pools: 150,
                arena: 160
            })
        );
        assert!(PoolLayout::WHOLE.check_arena(160).is_ok());
        let none = [Pool::new(8, Reach::CPU).planned(false)];
        assert_eq!(PoolLayout::new(&none), Err(PoolError::NonePlanned));
        assert_eq!(
            PoolLayout::new(&[Pool::new(8, Reach::CPU); 5]),
            Err(PoolError::TooMany { count: 5 })
        );
        assert_eq!(format!("{BOTH:?}"), "cpu+accel");
    }
}
