//! A planner that searches for the smallest head: an anytime branch and
//! bound over canonical placements, seeded with the greedy plan.
//!
//! Why: TFLM's greedy planner leaves holes that a different order would
//! fill (VWW MobileNetV1's head is a third above its liveness lower bound).
//! The exact problem is NP-hard, but the instances a model produces are
//! small and loosely packed, so a search that starts from a good order and
//! prunes hard usually reaches the lower bound in a few hundred nodes.
//!
//! The search is a decision procedure run at decreasing capacities: "does
//! every buffer fit below `capacity`?". Time is cut into *sections*
//! (intervals between consecutive first and last steps); every section keeps
//! a *floor*, the top of the highest buffer placed in it so far. A buffer is
//! placed at its floor, the highest floor over its sections rounded up to its
//! alignment, so it rests on 0 or on a buffer whose lifetime overlaps: the
//! canonical placements. Each node picks the section with the lowest floor
//! that still has unplaced buffers and branches on which of them goes next,
//! lowest offset first, larger first (the ideas of MiniMalloc, Moffitt,
//! ASPLOS 2023, written anew here). Pruning:
//!
//! - *Spatial*: in every section, the padded sizes still to place there,
//!   stacked from the lowest offset any of those buffers can still reach
//!   (its own floor), must stay within the capacity. A buffer placed above a
//!   section's floor, or a section whose buffers all sit higher than its
//!   floor, wastes the gap in between; this test refuses any gap the
//!   section cannot afford, as soon as it appears.
//! - *Symmetry*: buffers identical in lifetime, size and alignment are
//!   placed in request order only.
//! - *Order*: the lowest-section rule lets buffers whose lifetimes do not
//!   overlap be placed in one order only.
//!
//! A depth-first search that goes wrong near the root rarely recovers, so
//! each decision restarts with another candidate order after 1,000, 2,000,
//! 4,000, … placements (a fixed order per round: plans stay deterministic).
//!
//! Without a clock (`no_std`), the budget is a count of search nodes
//! (placements). When it runs out, the best plan found so far is returned,
//! which is never worse than the greedy plan it started from.

use core::cmp::Reverse;

use super::{Greedy, MemoryPlanner, PlanError, check_requests, greedy, head_size, lower_bound};
use crate::request::{BufferRequest, align_up};

/// Marks an unplaced buffer (an offset no valid plan uses: every buffer
/// ends at or below `u32::MAX`, and empty buffers are placed at 0).
const UNPLACED: u32 = u32::MAX;

/// Marks a buffer without an identical one before it.
const NO_TWIN: u32 = u32::MAX;

/// Minimum-head planning by bounded search (see the module doc).
///
/// Working memory: `11 * count` words (linear, like the other planners, so
/// the arena's temp section sizes it the same way): per request its section
/// range, identical predecessor, search path entry and current offset, and
/// per section (at most `2 * count`) its floor, the bytes still to place
/// and the lowest offset they can still reach.
/// Time: `O(n²)` to set up, then `O(n + k·r)` per node for `k` candidates of
/// `r` sections each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Optimal {
    /// Placements the search may try in total, over all capacities.
    pub node_budget: u64,
}

impl Optimal {
    /// The default budget. Every conformance model reaches its lower bound
    /// in a small fraction of it; when the bound is out of reach the whole
    /// budget is spent, about 0.3 s for 100 requests and 2 s for 1,000 on a
    /// host (release build), far longer on a microcontroller: plan on the
    /// host and ship the plan, or give the target a smaller budget.
    pub const DEFAULT_NODE_BUDGET: u64 = 200_000;

    /// A planner that tries at most `node_budget` placements.
    pub const fn new(node_budget: u64) -> Self {
        Optimal { node_budget }
    }
}

impl Default for Optimal {
    fn default() -> Self {
        Optimal::new(Optimal::DEFAULT_NODE_BUDGET)
    }
}

impl MemoryPlanner for Optimal {
    fn name(&self) -> &'static str {
        "optimal"
    }

    fn workspace_words(&self, count: usize) -> usize {
        11 * count
    }

    /// Greedy: this search starts from its plan, in 5.5 times its
    /// workspace.
    fn seed(&self) -> Option<&dyn MemoryPlanner> {
        Some(&Greedy)
    }

    fn plan(
        &self,
        requests: &[BufferRequest],
        workspace: &mut [u32],
        offsets: &mut [u32],
    ) -> Result<u32, PlanError> {
        check_requests(
            requests,
            workspace,
            self.workspace_words(requests.len()),
            offsets,
        )?;
        greedy::place(requests, |_| None, workspace, offsets)?;
        let mut best = head_size(requests, offsets)?;
        // `best` fits in 32 bits and is at least the bound, so the bound does too.
        let bound = lower_bound(requests).min(u64::from(best)) as u32;
        if best == bound {
            return Ok(best);
        }
        let mut search = Search::new(requests, workspace);
        let mut budget = self.node_budget;
        // The bound first (real models usually reach it), then bisection
        // between the bound and the best plan so far.
        let (mut low, mut high) = (bound, best - 1);
        let mut capacity = bound;
        while low <= high && budget > 0 {
            let mut share = if low == high {
                budget
            } else {
                budget - budget / 2
            };
            budget -= share;
            let outcome = search.decide_with_restarts(capacity, &mut share, offsets);
            budget += share;
            match outcome {
                Outcome::Found(head) => {
                    best = head;
                    high = head.saturating_sub(1);
                    if head == 0 {
                        break;
                    }
                }
                Outcome::Refuted | Outcome::OutOfBudget => low = capacity + 1,
            }
            capacity = low + (high.saturating_sub(low)) / 2;
        }
        Ok(best)
    }
}

/// How one decision at a fixed capacity ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Every buffer placed; the head reached, at most the capacity.
    Found(u32),
    /// No canonical placement fits.
    Refuted,
    /// The node budget ran out first.
    OutOfBudget,
}

/// The order candidates are tried in: lowest offset, then the round's
/// preference (larger first in round 0), then earlier request.
type Key = (u64, Reverse<u32>, u32);

/// Placements in the first round of a decision; each restart doubles it.
const FIRST_ROUND_NODES: u64 = 1_000;

/// The search state, all of it in the caller's workspace.
struct Search<'a> {
    requests: &'a [BufferRequest],
    /// Per request: its first section.
    lo: &'a mut [u32],
    /// Per request: one past its last section.
    hi: &'a mut [u32],
    /// Per request: the last earlier request identical to it, or [`NO_TWIN`].
    twin: &'a mut [u32],
    /// The requests placed, in order.
    path: &'a mut [u32],
    /// Per request: its offset, or [`UNPLACED`].
    current: &'a mut [u32],
    /// Per section: the top of the highest buffer placed in it.
    floor: &'a mut [u32],
    /// Per section: padded bytes of the unplaced buffers live in it.
    remaining: &'a mut [u32],
    /// Per section: the lowest offset an unplaced buffer live in it can
    /// still take (scratch for [`Search::consistent`]).
    reach: &'a mut [u32],
    /// Requests with a non-empty buffer (the others sit at 0).
    to_place: usize,
    /// The restart round: which tie-breaking order candidates follow.
    round: u32,
}

impl<'a> Search<'a> {
    /// Cuts time into sections and finds each request's range and twin.
    fn new(requests: &'a [BufferRequest], workspace: &'a mut [u32]) -> Self {
        let n = requests.len();
        let (lo, rest) = workspace.split_at_mut(n);
        let (hi, rest) = rest.split_at_mut(n);
        let (twin, rest) = rest.split_at_mut(n);
        let (path, rest) = rest.split_at_mut(n);
        let (current, rest) = rest.split_at_mut(n);
        let (floor, rest) = rest.split_at_mut(2 * n);
        let (remaining, rest) = rest.split_at_mut(2 * n);
        let reach = &mut rest[..2 * n];

        // Section boundaries: every first step and every step after a last
        // one (none after u32::MAX: that section runs to the end).
        let mut count = 0;
        for r in requests {
            remaining[count] = r.first_step;
            count += 1;
            if let Some(after) = r.live_until().checked_add(1) {
                remaining[count] = after;
                count += 1;
            }
        }
        let bounds = &mut remaining[..count];
        bounds.sort_unstable();
        let mut sections = 0;
        for i in 0..count {
            if sections == 0 || bounds[i] != bounds[sections - 1] {
                bounds[sections] = bounds[i];
                sections += 1;
            }
        }
        let bounds = &bounds[..sections];
        let index = |step: u32| bounds.binary_search(&step).unwrap_or(0) as u32;
        for (i, r) in requests.iter().enumerate() {
            lo[i] = index(r.first_step);
            hi[i] = r.live_until().checked_add(1).map_or(sections as u32, index);
        }
        let padded = |i: usize| requests[i].padded_size().unwrap_or(0);
        for i in 0..n {
            twin[i] = (0..i)
                .rev()
                .find(|&j| {
                    lo[j] == lo[i]
                        && hi[j] == hi[i]
                        && padded(j) == padded(i)
                        && requests[j].align == requests[i].align
                })
                .map_or(NO_TWIN, |j| j as u32);
        }
        let to_place = (0..n).filter(|&i| padded(i) > 0).count();
        Search {
            requests,
            lo,
            hi,
            twin,
            path,
            current,
            floor: &mut floor[..sections],
            remaining: &mut remaining[..sections],
            reach: &mut reach[..sections],
            to_place,
            round: 0,
        }
    }

    fn size(&self, i: usize) -> u32 {
        self.requests[i].padded_size().unwrap_or(0)
    }

    fn sections(&self, i: usize) -> core::ops::Range<usize> {
        self.lo[i] as usize..self.hi[i] as usize
    }

    /// Empties the plan: every floor at 0, every buffer still to place.
    fn reset(&mut self) {
        self.floor.fill(0);
        self.remaining.fill(0);
        for i in 0..self.requests.len() {
            let size = self.size(i);
            self.current[i] = if size == 0 { 0 } else { UNPLACED };
            for t in self.sections(i) {
                // Never above the greedy head (checked by the caller's bound).
                self.remaining[t] = self.remaining[t].saturating_add(size);
            }
        }
    }

    /// [`Search::decide`] with restarts. A search that goes wrong near the
    /// root rarely recovers within a budget, while a different order of
    /// equally low candidates often succeeds at once; so the budget is spent
    /// in rounds of doubling size, each with its own order (round 0 larger
    /// first, later rounds a fixed pseudo-random one: deterministic). A
    /// refutation in any round ends the decision: every canonical
    /// placement was tried, whatever the order.
    fn decide_with_restarts(
        &mut self,
        capacity: u32,
        budget: &mut u64,
        offsets: &mut [u32],
    ) -> Outcome {
        let mut round_nodes = FIRST_ROUND_NODES;
        self.round = 0;
        loop {
            let last = round_nodes >= *budget;
            let mut share = if last { *budget } else { round_nodes };
            *budget -= share;
            let outcome = self.decide(capacity, &mut share, offsets);
            *budget += share;
            if outcome != Outcome::OutOfBudget || last || *budget == 0 {
                return outcome;
            }
            self.round += 1;
            round_nodes = round_nodes.saturating_mul(2);
        }
    }

    /// Where request `i`, placed at `offset`, stands in this round's order.
    fn key(&self, i: usize, offset: u64) -> Key {
        let preference = if self.round == 0 {
            self.size(i)
        } else {
            // A multiplicative hash of (request, round): a fixed shuffle.
            (i as u32 ^ self.round.wrapping_mul(0x9E37_79B9)).wrapping_mul(0x85EB_CA6B) ^ self.round
        };
        (offset, Reverse(preference), i as u32)
    }

    /// Whether every buffer fits below `capacity` (see [`Outcome`]); on
    /// success the offsets are written to `offsets`. Every placement tried
    /// costs one unit of `budget`.
    fn decide(&mut self, capacity: u32, budget: &mut u64, offsets: &mut [u32]) -> Outcome {
        self.reset();
        if self.remaining.iter().any(|&r| r > capacity) {
            return Outcome::Refuted;
        }
        let mut depth = 0;
        let mut after: Option<Key> = None;
        loop {
            if depth == self.to_place {
                offsets[..self.requests.len()].copy_from_slice(self.current);
                let head = (0..self.requests.len())
                    .map(|i| self.current[i] + self.size(i))
                    .max()
                    .unwrap_or(0);
                return Outcome::Found(head);
            }
            let choice = self
                .lowest_section()
                .and_then(|t| self.next_candidate(t, after, capacity));
            match choice {
                Some((i, offset)) => {
                    if *budget == 0 {
                        return Outcome::OutOfBudget;
                    }
                    *budget -= 1;
                    self.place(i, offset);
                    self.path[depth] = i as u32;
                    depth += 1;
                    after = None;
                    if !self.consistent(capacity) {
                        depth -= 1;
                        self.remove(i, depth);
                        after = Some(self.key(i, u64::from(offset)));
                    }
                }
                None if depth == 0 => return Outcome::Refuted,
                None => {
                    depth -= 1;
                    let i = self.path[depth] as usize;
                    self.remove(i, depth);
                    after = Some(self.key(i, self.skyline(i)));
                }
            }
        }
    }

    /// The section with the lowest floor among those with bytes still to
    /// place (the earliest on a tie).
    fn lowest_section(&self) -> Option<usize> {
        (0..self.floor.len())
            .filter(|&t| self.remaining[t] > 0)
            .min_by_key(|&t| (self.floor[t], t))
    }

    /// Where request `i` would go now: its highest floor, aligned.
    fn skyline(&self, i: usize) -> u64 {
        let top = self.floor[self.sections(i)].iter().copied().max();
        align_up(
            u64::from(top.unwrap_or(0)),
            u64::from(self.requests[i].align),
        )
    }

    /// The first unplaced buffer live in `section`, in [`Key`] order after
    /// `after`, whose placement passes the pruning tests.
    fn next_candidate(
        &self,
        section: usize,
        after: Option<Key>,
        capacity: u32,
    ) -> Option<(usize, u32)> {
        let mut best: Option<(Key, usize, u32)> = None;
        for i in 0..self.requests.len() {
            if self.current[i] != UNPLACED || !self.sections(i).contains(&section) {
                continue;
            }
            let twin = self.twin[i];
            if twin != NO_TWIN && self.current[twin as usize] == UNPLACED {
                continue;
            }
            let offset = self.skyline(i);
            let key = self.key(i, offset);
            if after.is_some_and(|a| key <= a) || best.is_some_and(|(b, _, _)| key >= b) {
                continue;
            }
            if self.fits(i, offset, capacity) {
                best = Some((key, i, offset as u32));
            }
        }
        best.map(|(_, i, offset)| (i, offset))
    }

    /// The pruning tests: the buffer ends within the capacity, and in each
    /// of its sections the gap it leaves below it plus everything still to
    /// place there (itself included) stays within the capacity.
    fn fits(&self, i: usize, offset: u64, capacity: u32) -> bool {
        let capacity = u64::from(capacity);
        offset + u64::from(self.size(i)) <= capacity
            && self
                .sections(i)
                .all(|t| offset + u64::from(self.remaining[t]) <= capacity)
    }

    /// Whether the unplaced buffers can still fit: each one below the
    /// capacity from where it can go now, and in each section all of them
    /// stacked from the lowest such place.
    fn consistent(&mut self, capacity: u32) -> bool {
        let capacity = u64::from(capacity);
        self.reach.fill(u32::MAX);
        for i in 0..self.requests.len() {
            if self.current[i] != UNPLACED {
                continue;
            }
            let offset = self.skyline(i);
            if offset + u64::from(self.size(i)) > capacity {
                return false;
            }
            for t in self.sections(i) {
                // Below the capacity (just checked), so it fits in 32 bits.
                self.reach[t] = self.reach[t].min(offset as u32);
            }
        }
        self.remaining
            .iter()
            .zip(self.reach.iter())
            .all(|(&left, &low)| left == 0 || u64::from(low) + u64::from(left) <= capacity)
    }

    fn place(&mut self, i: usize, offset: u32) {
        let size = self.size(i);
        self.current[i] = offset;
        for t in self.sections(i) {
            self.floor[t] = offset + size;
            self.remaining[t] -= size;
        }
    }

    /// Takes back request `i`, the one placed at `depth`: its sections'
    /// floors are recomputed from the buffers placed before it.
    fn remove(&mut self, i: usize, depth: usize) {
        let size = self.size(i);
        self.current[i] = UNPLACED;
        for t in self.sections(i) {
            self.remaining[t] += size;
            self.floor[t] = self.path[..depth]
                .iter()
                .map(|&j| j as usize)
                .filter(|&j| self.sections(j).contains(&t))
                .map(|j| self.current[j] + self.size(j))
                .max()
                .unwrap_or(0);
        }
    }
}
