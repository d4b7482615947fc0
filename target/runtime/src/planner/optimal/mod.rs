//! A planner that searches for the smallest head: an anytime branch and
//! bound over canonical placements, seeded with the greedy plan.
//!
//! Why: TFLM's greedy planner leaves holes that a different order would
//! fill (VWW MobileNetV1's head is a third above its liveness lower bound).
//! The exact problem is NP-hard. The instances a model produces are small
//! and loosely packed, and a search reaches their lower bound in a few
//! hundred nodes; MiniMalloc's published "challenging" sets (a few hundred
//! buffers that just fit 1 MiB) need the whole of its ideas (Moffitt,
//! ASPLOS 2023; written anew here).
//!
//! The search is a decision procedure run at decreasing capacities: "does
//! every buffer fit below `capacity`?". Time is cut into *sections*
//! (intervals between consecutive first and last steps); every section keeps
//! a *floor*, the top of the highest buffer placed in it so far. A buffer is
//! placed at its *skyline*, the highest floor over its sections rounded up
//! to its alignment, so it rests on 0 or on a buffer whose lifetime
//! overlaps. Two strategies choose the next placement
//! ([`search`]):
//!
//! - *Canonical*: every buffer in the order of (skyline, rank in a static
//!   order), so that each plan is reached once. A buffer is not placed at
//!   or above the lowest top another unplaced buffer can reach (that gap
//!   would have to be filled out of order: *dominance*); a buffer whose
//!   placement lifts no other buffer's skyline is final (when its subtree
//!   fails, so do its siblings: *hatless*); and when no unplaced buffer
//!   spans a section boundary, the two sides are independent parts,
//!   solved one after the other (a part that fails fails the placement
//!   that made it: *decomposition*).
//! - *Lowest section*: the section with the lowest floor first, and any
//!   buffer live in it, larger first. Packings cut like a guillotine,
//!   where every step is full, fall to it at once, where the canonical
//!   order can take very long.
//!
//! Both prune with *spatial inference*: in every section, the sizes still
//! to place there, stacked from the lowest offset any of those buffers can
//! still reach, must stay within the capacity (for the canonical strategy,
//! never below the last placement's offset: its floor only rises).
//!
//! Which order succeeds fast differs from input to input by orders of
//! magnitude, and no order wins everywhere. So on a host the four
//! searches (lowest section, and canonical by three static orders:
//! MiniMalloc's `WAT`, `TAW`, `TWA`) run side by side, a slice of
//! placements each in turn, and the first to decide ends the decision
//! ([`Optimal::lanes`]): the work is about four times that of the luckiest
//! order. With one lane (the target's default: a quarter of the workspace)
//! they take turns in restarts of doubling length instead.
//!
//! Without a clock (`no_std`), the budget is a count of search nodes
//! (placements). When it runs out, the best plan found so far is returned,
//! which is never worse than the greedy plan it started from.

mod search;

use search::{Criterion, ORDERS, Outcome, Search, Strategy, WORDS_PER_REQUEST};

use super::{Greedy, MemoryPlanner, PlanError, check_requests, greedy, head_size, lower_bound};
use crate::request::BufferRequest;

/// Placements a lane runs before the next lane's turn.
const SLICE: u64 = 512;

/// Placements per request for the look at the lower bound before a looser
/// goal (see [`Optimal::goal`]).
const PROBE_NODES_PER_REQUEST: u64 = 16;

/// Minimum-head planning by bounded search (see the module doc).
///
/// Working memory: `20 * count` words per lane (linear, like the other
/// planners, so the arena's temp section sizes it the same way): per
/// request its padded size, section range, rank, identical predecessor,
/// path entry, offset, place in the unplaced list (both ways), skyline and
/// part, and per section (at most
/// `2 * count`) its floor, the bytes still to place, the lowest offset they
/// can still reach and the buffers spanning its end.
/// Time: `O(n²)` to set up, then `O(u + s)` per node for `u` unplaced
/// buffers spanning `s` sections in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Optimal {
    /// Placements the search may try in total, over all capacities and
    /// lanes.
    pub node_budget: u64,
    /// Searches run side by side: 4 (every strategy at once) or 1 (in
    /// turn, in a quarter of the workspace); any other count is taken as
    /// the nearest of the two.
    pub lanes: u8,
    /// A head that is enough: the search decides at it first (MiniMalloc's
    /// question: "does it fit this capacity?") and stops at the first plan
    /// at or below it; when it finds none there, it goes on looking for the
    /// smallest head above. `None`: the smallest head the budget finds.
    pub goal: Option<u32>,
}

impl Optimal {
    /// The default budget: on a hosted system 4,000,000 placements
    /// (every conformance model reaches its lower bound in a small fraction
    /// of it, and MiniMalloc's challenging sets fit within it; when the
    /// bound is out of reach it is all spent, about 2 µs a placement for
    /// 150 requests, release build), on bare metal 200,000 (far longer
    /// there: plan on the host and ship the plan, or set a smaller budget).
    pub const DEFAULT_NODE_BUDGET: u64 = if cfg!(target_os = "none") {
        200_000
    } else {
        4_000_000
    };

    /// Lanes by default: four on a hosted system, one on bare metal, where
    /// the workspace comes out of the arena.
    pub const DEFAULT_LANES: u8 = if cfg!(target_os = "none") { 1 } else { 4 };

    /// The planner as a board runs it: 200,000 placements, one lane (the
    /// workspace comes out of the arena). [`PlannerKind`](super::PlannerKind)
    /// gives this one on the host too, so that `hilt layout` states what
    /// the board commits.
    pub const ON_TARGET: Optimal = Optimal {
        node_budget: 200_000,
        lanes: 1,
        goal: None,
    };

    /// A planner that tries at most `node_budget` placements, in
    /// [`Optimal::DEFAULT_LANES`] lanes.
    pub const fn new(node_budget: u64) -> Self {
        Optimal {
            node_budget,
            lanes: Self::DEFAULT_LANES,
            goal: None,
        }
    }

    /// The same planner with `lanes` lanes (see [`Optimal::lanes`]).
    pub const fn with_lanes(self, lanes: u8) -> Self {
        Optimal { lanes, ..self }
    }

    /// The same planner, content with a head of `goal` bytes or less (see
    /// [`Optimal::goal`]).
    pub const fn with_goal(self, goal: u32) -> Self {
        Optimal {
            goal: Some(goal),
            ..self
        }
    }

    /// Whether the four searches run side by side.
    fn side_by_side(&self) -> bool {
        self.lanes > 2
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
        let lanes = if self.side_by_side() { 4 } else { 1 };
        lanes * WORDS_PER_REQUEST * count
    }

    /// Greedy: this search starts from its plan, in a fraction of its
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
        let best = head_size(requests, offsets)?;
        // `best` fits in 32 bits and is at least the bound, so the bound does too.
        let bound = lower_bound(requests).min(u64::from(best)) as u32;
        if best == bound || self.goal.is_some_and(|g| best <= g) {
            return Ok(best);
        }
        let words = WORDS_PER_REQUEST * requests.len();
        if !self.side_by_side() {
            let mut search = Search::new(requests, &mut workspace[..words]);
            return Ok(
                self.bisect(bound, best, offsets, &mut |capacity, budget, offsets| {
                    search.decide_with_restarts(capacity, budget, offsets)
                }),
            );
        }
        let (a, rest) = workspace.split_at_mut(words);
        let (b, rest) = rest.split_at_mut(words);
        let (c, rest) = rest.split_at_mut(words);
        let mut searches = [a, b, c, &mut rest[..words]].map(|w| Search::new(requests, w));
        Ok(
            self.bisect(bound, best, offsets, &mut |capacity, budget, offsets| {
                side_by_side(&mut searches, capacity, budget, offsets)
            }),
        )
    }
}

/// Decides whether every buffer fits below a capacity, within a budget of
/// placements (what is left of it is given back), writing the offsets of a
/// plan it finds.
type Decide<'d> = dyn FnMut(u32, &mut u64, &mut [u32]) -> Outcome + 'd;

impl Optimal {
    /// The smallest head `decide` finds within the budget: the goal or
    /// else the bound first (real models usually reach it), then bisection
    /// between the bound and the best plan so far (`best`, greedy's, whose
    /// offsets are in `offsets`), until a plan meets the goal.
    fn bisect(
        &self,
        bound: u32,
        mut best: u32,
        offsets: &mut [u32],
        decide: &mut Decide<'_>,
    ) -> u32 {
        let mut budget = self.node_budget;
        let (mut low, mut high) = (bound, best - 1);
        if self.goal.is_some_and(|g| g > bound) {
            // A tighter capacity prunes harder: a short look at the bound
            // first often finds a plan at once that a looser goal would
            // search long for.
            let mut share = (PROBE_NODES_PER_REQUEST * offsets.len() as u64).min(budget / 2);
            budget -= share;
            let outcome = decide(bound, &mut share, offsets);
            budget += share;
            if let Outcome::Found(head) = outcome {
                return head;
            }
            low = bound + 1;
        }
        let mut capacity = self.goal.map_or(bound, |g| g.clamp(low, high.max(low)));
        while low <= high && budget > 0 {
            let mut share = if low == high {
                budget
            } else {
                budget - budget / 2
            };
            budget -= share;
            let outcome = decide(capacity, &mut share, offsets);
            budget += share;
            match outcome {
                Outcome::Found(head) => {
                    best = head;
                    high = head.saturating_sub(1);
                    if head == 0 || self.goal.is_some_and(|g| head <= g) {
                        break;
                    }
                }
                Outcome::Refuted | Outcome::OutOfBudget => low = capacity + 1,
            }
            capacity = low + (high.saturating_sub(low)) / 2;
        }
        best
    }
}

/// The four searches side by side, a slice of placements each in turn,
/// until one decides: lowest section, then canonical by each of
/// [`ORDERS`].
fn side_by_side(
    searches: &mut [Search<'_>; 4],
    capacity: u32,
    budget: &mut u64,
    offsets: &mut [u32],
) -> Outcome {
    let strategies: [(Strategy, &[Criterion; 3]); 4] = [
        (Strategy::LowestSection(0), &ORDERS[0]),
        (Strategy::Canonical, &ORDERS[0]),
        (Strategy::Canonical, &ORDERS[1]),
        (Strategy::Canonical, &ORDERS[2]),
    ];
    for (search, (strategy, order)) in searches.iter_mut().zip(strategies) {
        search.start(strategy, order);
    }
    loop {
        for (lane, search) in searches.iter_mut().enumerate() {
            // The lowest-section strategy wins at once or not at all (a
            // guillotine packing is its early case): a quarter slice.
            let slice = if lane == 0 { SLICE / 4 } else { SLICE };
            let mut share = slice.min(*budget);
            *budget -= share;
            let outcome = search.run(capacity, &mut share, offsets);
            *budget += share;
            if outcome != Outcome::OutOfBudget {
                return outcome;
            }
            if *budget == 0 {
                return Outcome::OutOfBudget;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests that reach their bound only by search: greedy's
    /// largest-first order leaves a hole.
    fn chain_with_a_hole() -> [BufferRequest; 5] {
        [
            BufferRequest::tensor(0, 64, 0, 1),
            BufferRequest::tensor(1, 48, 1, 2),
            BufferRequest::tensor(2, 32, 2, 3),
            BufferRequest::tensor(3, 80, 3, 4),
            BufferRequest::tensor(4, 16, 0, 4),
        ]
    }

    /// One lane and four reach the same bound.
    #[test]
    fn one_lane_and_four_reach_the_same_bound() {
        let requests = chain_with_a_hole();
        for lanes in [1, 4] {
            let planner = Optimal::default().with_lanes(lanes);
            let mut workspace = [0u32; 4 * WORDS_PER_REQUEST * 5];
            let mut offsets = [0u32; 5];
            let head = planner
                .plan(&requests, &mut workspace, &mut offsets)
                .unwrap();
            assert_eq!(u64::from(head), lower_bound(&requests), "{lanes} lanes");
        }
        assert_eq!(
            Optimal::default().with_lanes(1).workspace_words(5) * 4,
            Optimal::default().with_lanes(4).workspace_words(5)
        );
    }

    /// With a goal the search stops at the first plan that meets it: a goal
    /// at greedy's head keeps greedy's plan, a goal at the bound is met.
    #[test]
    fn a_goal_is_enough() {
        let requests = chain_with_a_hole();
        let mut workspace = [0u32; 4 * WORDS_PER_REQUEST * 5];
        let mut offsets = [0u32; 5];
        let greedy = {
            let mut ws = [0u32; 64];
            Greedy.plan(&requests, &mut ws, &mut offsets).unwrap()
        };
        let bound = lower_bound(&requests) as u32;
        assert!(greedy > bound);
        let at_greedy = Optimal::default().with_goal(greedy);
        assert_eq!(
            at_greedy.plan(&requests, &mut workspace, &mut offsets),
            Ok(greedy)
        );
        let at_bound = Optimal::default().with_goal(bound);
        assert_eq!(
            at_bound.plan(&requests, &mut workspace, &mut offsets),
            Ok(bound)
        );
        // Between the two: the look at the bound finds it first.
        let between = Optimal::default().with_goal(greedy - 1);
        assert_eq!(
            between.plan(&requests, &mut workspace, &mut offsets),
            Ok(bound)
        );
    }
}
