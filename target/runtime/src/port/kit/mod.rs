//! The conformance kit for allocator ports (cargo feature `port-kit`).
//!
//! Call it from your own tests, on your own port: [`PlannerKit::run`]
//! plans TFLM's planner vectors, adversarial sets and seeded random sets
//! (add your models' requests with [`sets::model`]), checks every plan
//! ([`check_plan`](super::check_plan): live buffers never share a byte,
//! alignment, bounds, fixed offsets), plans each set again in a dirty and a
//! larger workspace (the same input must give the same plan), feeds the
//! port invalid inputs (each must be an error), and reports the head
//! against the liveness lower bound as a figure. [`check_allocators`] runs
//! the rules of the persistent and temporary allocators the same way.
//!
//! Failures are values that name what broke: for an overlap, both
//! buffers (positions, owners, lifetimes, offsets, sizes), the step and the
//! shared bytes. The kit needs `alloc` (request sets are `Vec`s) but no
//! `std`; a port that panics fails the calling test as any panic does.
//!
//! ```
//! use hilt_runtime::planner::Greedy;
//! use hilt_runtime::port::kit::PlannerKit;
//!
//! let report = PlannerKit::new().run(&Greedy);
//! assert!(report.failures.is_empty(), "{report}");
//! // Greedy is within 2x of the bound on every shipped set.
//! assert!(report.worst_ratio() < 2.0, "{report}");
//! ```
//!
//! Every set is also planned into memory pools, as the allocator plans a
//! split arena ([`PoolLayout::plan`](crate::pool::PoolLayout::plan)): a
//! CPU-only pool holding half the set's lower bound, then a pool an engine
//! reaches, with every second buffer an engine's. Each buffer must lie
//! inside one pool that reaches it, and the same set in pools too small for
//! the engine's buffers must be an out-of-memory error, not a plan.

mod allocator;
mod report;
pub mod sets;

use alloc::vec;
use alloc::vec::Vec;

pub use allocator::{
    AllocatorFailure, AllocatorReport, KitAllocation, MIN_MEMORY, check_allocators,
};
pub use report::{KitFailure, KitReport, PlanQuality, SetFailure};
pub use sets::RequestSet;

use super::{PlacedBuffer, check_fixed, check_plan};
use crate::planner::{MemoryPlanner, PlanError, lower_bound};
use crate::request::BufferRequest;

/// How many seeded random sets [`PlannerKit::run`] plans.
pub const RANDOM_SETS: u64 = 64;

/// Words a dirty workspace is filled with: a planner that reads its
/// workspace before writing it gives another plan.
const DIRTY: u32 = 0xA5A5_5A5A;

/// Runs a planner port through the kit's checks.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlannerKit {
    /// Fail a set whose head exceeds `limit × lower bound`.
    quality_limit: Option<f64>,
}

/// One plan: the offsets and the head.
type Plan = (Vec<u32>, u32);

impl PlannerKit {
    /// The kit with no quality limit (the head is reported, not judged).
    pub fn new() -> Self {
        PlannerKit::default()
    }

    /// Fails sets whose head is more than `ratio` times the liveness lower
    /// bound (sets whose bound is 0 are never over).
    #[must_use]
    pub fn with_quality_limit(mut self, ratio: f64) -> Self {
        self.quality_limit = Some(ratio);
        self
    }

    /// Every shipped check: invalid inputs, TFLM's vectors, the adversarial
    /// sets and [`RANDOM_SETS`] random ones (seeds 1, 2, ...).
    pub fn run(&self, planner: &dyn MemoryPlanner) -> KitReport {
        let mut all = sets::tflm_vectors();
        all.extend(sets::adversarial());
        all.extend((1..=RANDOM_SETS).map(|seed| sets::random(seed, 40)));
        let mut report = self.check_sets(planner, &all);
        if let Err(failure) = check_invalid_inputs(planner) {
            report.failures.insert(0, failure);
        }
        report
    }

    /// Checks each set; one failure does not stop the others.
    pub fn check_sets(&self, planner: &dyn MemoryPlanner, sets: &[RequestSet]) -> KitReport {
        let mut report = KitReport::new(planner.name());
        for set in sets {
            match self.check_set(planner, set) {
                Ok(quality) => report.passed.push(quality),
                Err(failure) => report.failures.push(failure),
            }
        }
        report
    }

    // A failure names two buffers in full: large, but made once per failing
    // set in a test, and matched on by callers (a Box would only get in the way).
    #[allow(clippy::result_large_err)]
    /// Plans `set` three times (clean workspace, dirty workspace, a larger
    /// dirty one), checks the plan and that all three agree, and measures
    /// the head against the lower bound.
    pub fn check_set(
        &self,
        planner: &dyn MemoryPlanner,
        set: &RequestSet,
    ) -> Result<PlanQuality, SetFailure> {
        let fail = |failure| SetFailure::new(set, failure);
        let bound = lower_bound(&set.requests);
        let (offsets, head) = match plan(planner, &set.requests, 0, 0) {
            Ok(plan) => plan,
            Err(PlanError::SizeOverflow { .. }) if set.may_overflow || sum_overflows(set) => {
                return Ok(PlanQuality::refused(set, bound));
            }
            Err(e) => return Err(fail(KitFailure::Refused(e))),
        };
        check_plan(&set.requests, &offsets, head).map_err(|f| fail(KitFailure::Invalid(f)))?;
        check_fixed(&set.requests, &offsets, &set.fixed)
            .map_err(|f| fail(KitFailure::Invalid(f)))?;
        for (extra, fill) in [(0, DIRTY), (64, !DIRTY)] {
            let again = plan(planner, &set.requests, extra, fill)
                .map_err(|e| fail(KitFailure::Refused(e)))?;
            same_plan(&set.requests, (&offsets, head), &again).map_err(fail)?;
        }
        check_pools(planner, set).map_err(fail)?;
        let quality = PlanQuality::planned(set, head, bound);
        match self.quality_limit {
            Some(limit) if quality.ratio() > limit => Err(fail(KitFailure::AboveLimit {
                head,
                lower_bound: bound,
                limit,
            })),
            _ => Ok(quality),
        }
    }
}

/// Plans `set` into two pools (see the module's docs) and checks where
/// every buffer went; then into pools too small for it.
fn check_pools(planner: &dyn MemoryPlanner, set: &RequestSet) -> Result<(), KitFailure> {
    use crate::pool::{Pool, PoolError, PoolLayout, Reach};
    let padded = |r: &BufferRequest| u64::from(r.padded_size().unwrap_or(u32::MAX));
    let total: u64 = set.requests.iter().map(padded).sum();
    let align = set.requests.iter().map(|r| r.align).max().unwrap_or(1);
    // Offline sets fix offsets in one head; sets near 4 GiB leave no room
    // for a second pool.
    if !set.fixed.is_empty()
        || set.requests.is_empty()
        || total + 4 * u64::from(align) > u64::from(u32::MAX / 2)
    {
        return Ok(());
    }
    let requests: Vec<BufferRequest> = set
        .requests
        .iter()
        .enumerate()
        .map(|(i, r)| {
            if i % 2 == 1 {
                r.reached_by(Reach::ACCEL)
            } else {
                *r
            }
        })
        .collect();
    let both = Reach::CPU.with(Reach::ACCEL);
    let half = crate::request::align_up(lower_bound(&requests) / 2, u64::from(align)) as u32;
    let room = (total + 2 * u64::from(align)) as u32;
    let layout = PoolLayout::new(&[
        Pool::new(half.max(align), Reach::CPU),
        Pool::new(room, both),
    ])
    .map_err(KitFailure::PoolRefused)?;
    let mut words = vec![DIRTY; PoolLayout::workspace_words(planner, requests.len())];
    let mut offsets = vec![DIRTY; requests.len()];
    let head = layout
        .plan(planner, &requests, &mut words, &mut offsets)
        .map_err(KitFailure::PoolRefused)?;
    check_plan(&requests, &offsets, head).map_err(KitFailure::Invalid)?;
    for (i, r) in requests.iter().enumerate() {
        let size = r.padded_size().unwrap_or(0);
        if size == 0 {
            continue;
        }
        let first = layout.pool_at(offsets[i]);
        let last = layout.pool_at(offsets[i].saturating_add(size - 1));
        let reached = first.is_some_and(|p| layout.pools()[p].reach.covers(r.reach()));
        if first != last || !reached {
            return Err(KitFailure::OutsidePool {
                buffer: PlacedBuffer::of(&requests, &offsets, i),
                pool: first.map(|p| p as u32),
            });
        }
    }
    // The engine's buffers must all go to the second pool: one byte less
    // than their lower bound cannot hold them.
    let engines: Vec<BufferRequest> = requests
        .iter()
        .copied()
        .filter(|r| r.reach() == both)
        .collect();
    let need = lower_bound(&engines) as u32;
    if need > align {
        let small = PoolLayout::new(&[Pool::new(room, Reach::CPU), Pool::new(need - 1, both)])
            .map_err(KitFailure::PoolRefused)?;
        match small.plan(planner, &requests, &mut words, &mut offsets) {
            Err(PoolError::Short { .. }) => {}
            Err(e) => return Err(KitFailure::PoolRefused(e)),
            Ok(_) => return Err(KitFailure::PoolOverfilled),
        }
    }
    Ok(())
}

/// Whether the padded sizes add up past 32 bits: a planner that reuses
/// nothing (which is a valid planner) cannot fit such a set, so refusing it
/// with `SizeOverflow` is a right answer.
fn sum_overflows(set: &RequestSet) -> bool {
    let padded = |r: &BufferRequest| u64::from(r.padded_size().unwrap_or(u32::MAX));
    set.requests.iter().map(padded).sum::<u64>() > u64::from(u32::MAX)
}

/// Plans `requests` with the workspace the planner asks for plus `extra`
/// words, every word (and every offset) first set to `fill`.
fn plan(
    planner: &dyn MemoryPlanner,
    requests: &[BufferRequest],
    extra: usize,
    fill: u32,
) -> Result<Plan, PlanError> {
    let mut workspace = vec![fill; planner.workspace_words(requests.len()) + extra];
    let mut offsets = vec![fill; requests.len()];
    let head = planner.plan(requests, &mut workspace, &mut offsets)?;
    Ok((offsets, head))
}

/// The second plan must equal the first, offset for offset.
fn same_plan(
    requests: &[BufferRequest],
    (offsets, head): (&[u32], u32),
    again: &Plan,
) -> Result<(), KitFailure> {
    if let Some(i) = (0..requests.len()).find(|&i| offsets[i] != again.0[i]) {
        return Err(KitFailure::OffsetChanged {
            buffer: PlacedBuffer::of(requests, offsets, i),
            second: again.0[i],
        });
    }
    if head != again.1 {
        return Err(KitFailure::HeadChanged {
            first: head,
            second: again.1,
        });
    }
    Ok(())
}

/// Inputs every planner must refuse with an error, never a plan.
#[allow(clippy::result_large_err)]
fn check_invalid_inputs(planner: &dyn MemoryPlanner) -> Result<(), SetFailure> {
    let ok = BufferRequest::tensor(0, 64, 0, 1);
    let cases: [(&'static str, Vec<BufferRequest>, usize); 5] = [
        ("alignment 3", vec![ok, ok.with_align(3)], 0),
        ("alignment 2 MiB", vec![ok.with_align(2 << 20)], 0),
        (
            "first step after last step",
            vec![BufferRequest::tensor(0, 16, 5, 2)],
            0,
        ),
        (
            "size u32::MAX (padding overflows)",
            vec![BufferRequest::tensor(0, u32::MAX, 0, 0)],
            0,
        ),
        ("offsets slice one short", vec![ok, ok], 1),
    ];
    for (case, requests, short) in cases {
        let mut workspace = vec![0; planner.workspace_words(requests.len())];
        let mut offsets = vec![0; requests.len() - short];
        if planner
            .plan(&requests, &mut workspace, &mut offsets)
            .is_ok()
        {
            return Err(SetFailure::invalid_input(case));
        }
    }
    let requests = [ok, ok];
    let words = planner.workspace_words(requests.len());
    if words > 0 {
        let mut workspace = vec![0; words - 1];
        let mut offsets = [0; 2];
        if planner
            .plan(&requests, &mut workspace, &mut offsets)
            .is_ok()
        {
            return Err(SetFailure::invalid_input("workspace one word short"));
        }
    }
    Ok(())
}
