//! One depth-first search for a plan at a fixed capacity (see the
//! parent module for the ideas): its state lives in the caller's
//! workspace, and it can stop after a number of placements and resume
//! where it stopped, so that several searches can run side by side.

use crate::request::{BufferRequest, align_up};

/// Marks an unplaced buffer (an offset no valid plan uses: every buffer
/// ends at or below `u32::MAX`, and empty buffers are placed at 0).
const UNPLACED: u32 = u32::MAX;

/// Workspace words one search takes per request.
pub(super) const WORDS_PER_REQUEST: usize = 20;

/// How one decision at a fixed capacity ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Every buffer placed; the head reached, at most the capacity.
    Found(u32),
    /// No canonical placement fits.
    Refuted,
    /// The node budget ran out first.
    OutOfBudget,
}

/// A placement's place in the search order: its offset, then its rank in
/// the round's static order.
type Key = (u64, u32);

/// Orders the search tries, in turn (MiniMalloc's default set): each
/// letter a criterion, larger first, the next letter breaking ties, then
/// the request's index. `W`: lifetime in steps; `A`: area (bytes × steps);
/// `T`: the most bytes live in any of its sections.
pub(super) const ORDERS: [[Criterion; 3]; 3] = [
    [Criterion::Width, Criterion::Area, Criterion::Total],
    [Criterion::Total, Criterion::Area, Criterion::Width],
    [Criterion::Total, Criterion::Width, Criterion::Area],
];

/// One criterion of a static order (see [`ORDERS`]).
#[derive(Debug, Clone, Copy)]
pub(super) enum Criterion {
    Width,
    Area,
    Total,
}

/// How a round of the search chooses the next placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Strategy {
    /// MiniMalloc's canonical order: every buffer in [`Key`] order, with
    /// dominance and hatless pruning and a floor that only rises.
    Canonical,
    /// The section with the lowest floor first, and a buffer live in it
    /// (larger first in round 0, a fixed shuffle after): packings cut
    /// like a guillotine, where every step is full, fall to this one
    /// at once and take the canonical order very long.
    LowestSection(u32),
}

/// Marks a buffer without an identical one before it.
const NO_TWIN: u32 = u32::MAX;

/// Set on a path entry whose placement raised no unplaced buffer's
/// lowest offset: when its subtree fails, its siblings would too.
const HATLESS: u32 = 1 << 31;

/// The search state, all of it in the caller's workspace.
pub(super) struct Search<'a> {
    requests: &'a [BufferRequest],
    /// Per request: its padded size.
    sizes: &'a mut [u32],
    /// Per request: its first section.
    lo: &'a mut [u32],
    /// Per request: one past its last section.
    hi: &'a mut [u32],
    /// Per request: its rank in the current order (0 first).
    rank: &'a mut [u32],
    /// Per request: the last earlier request identical to it, or
    /// [`NO_TWIN`] (the lowest-section strategy places twins in order;
    /// the canonical order does so by itself).
    twin: &'a mut [u32],
    /// The requests placed, in order, each with [`HATLESS`] when it applies.
    path: &'a mut [u32],
    /// Per request: its offset, or [`UNPLACED`].
    current: &'a mut [u32],
    /// The unplaced requests with bytes, in no order (the first
    /// `unplaced_count`): the loops of a node run over these alone.
    unplaced: &'a mut [u32],
    /// Per request: where it stands in `unplaced`, while it is there.
    slot: &'a mut [u32],
    /// How many requests `unplaced` holds.
    unplaced_count: usize,
    /// Per unplaced request: where it would go now, its skyline (the
    /// highest floor over its sections, aligned), kept up to date as
    /// neighbours are placed and taken back.
    lowest: &'a mut [u32],
    /// Per section: the top of the highest buffer placed in it.
    floor: &'a mut [u32],
    /// Per section: padded bytes of the unplaced buffers live in it.
    remaining: &'a mut [u32],
    /// Per section: the lowest offset an unplaced buffer live in it can
    /// still take (scratch for [`Search::consistent`]).
    reach: &'a mut [u32],
    /// Per boundary between a section and the next: the unplaced buffers
    /// live on both sides. Where it is 0 the problem falls apart into
    /// independent parts.
    cover: &'a mut [u32],
    /// Per path entry: the first and one past the last section of the part
    /// it was placed in (two words each).
    part: &'a mut [u32],
    /// This round's strategy.
    strategy: Strategy,
    /// Placements on the path now (where a stopped search resumes).
    depth: usize,
    /// The sibling tried last at `depth`, if any.
    after: Option<Key>,
}

impl<'a> Search<'a> {
    /// Cuts time into sections and finds each request's range.
    pub(super) fn new(requests: &'a [BufferRequest], workspace: &'a mut [u32]) -> Self {
        let n = requests.len();
        let (sizes, rest) = workspace.split_at_mut(n);
        let (lo, rest) = rest.split_at_mut(n);
        let (hi, rest) = rest.split_at_mut(n);
        let (rank, rest) = rest.split_at_mut(n);
        let (twin, rest) = rest.split_at_mut(n);
        let (path, rest) = rest.split_at_mut(n);
        let (current, rest) = rest.split_at_mut(n);
        let (unplaced, rest) = rest.split_at_mut(n);
        let (slot, rest) = rest.split_at_mut(n);
        let (lowest, rest) = rest.split_at_mut(n);
        let (floor, rest) = rest.split_at_mut(2 * n);
        let (remaining, rest) = rest.split_at_mut(2 * n);
        let (reach, rest) = rest.split_at_mut(2 * n);
        let (cover, rest) = rest.split_at_mut(2 * n);
        let part = &mut rest[..2 * n];

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
        for (size, r) in sizes.iter_mut().zip(requests) {
            *size = r.padded_size().unwrap_or(0);
        }
        for i in 0..n {
            twin[i] = (0..i)
                .rev()
                .find(|&j| {
                    lo[j] == lo[i]
                        && hi[j] == hi[i]
                        && sizes[j] == sizes[i]
                        && requests[j].align == requests[i].align
                })
                .map_or(NO_TWIN, |j| j as u32);
        }
        Search {
            requests,
            sizes,
            lo,
            hi,
            rank,
            twin,
            path,
            current,
            unplaced,
            slot,
            unplaced_count: 0,
            lowest,
            floor: &mut floor[..sections],
            remaining: &mut remaining[..sections],
            reach: &mut reach[..sections],
            cover: &mut cover[..sections],
            part,
            strategy: Strategy::Canonical,
            depth: 0,
            after: None,
        }
    }

    fn size(&self, i: usize) -> u32 {
        self.sizes[i]
    }

    /// The unplaced requests with bytes.
    fn free(&self) -> impl Iterator<Item = usize> + '_ {
        self.unplaced[..self.unplaced_count]
            .iter()
            .map(|&i| i as usize)
    }

    fn sections(&self, i: usize) -> core::ops::Range<usize> {
        self.lo[i] as usize..self.hi[i] as usize
    }

    /// Empties the plan: every floor at 0, every buffer still to place.
    fn reset(&mut self) {
        self.floor.fill(0);
        self.remaining.fill(0);
        self.cover.fill(0);
        self.unplaced_count = 0;
        for i in 0..self.requests.len() {
            let size = self.size(i);
            self.current[i] = if size == 0 { 0 } else { UNPLACED };
            self.lowest[i] = 0;
            if size > 0 {
                self.unplaced[self.unplaced_count] = i as u32;
                self.slot[i] = self.unplaced_count as u32;
                self.unplaced_count += 1;
                for b in self.boundaries(i) {
                    self.cover[b] += 1;
                }
            }
            for t in self.sections(i) {
                // Never above the greedy head (checked by the caller's bound).
                self.remaining[t] = self.remaining[t].saturating_add(size);
            }
        }
    }

    /// Sets the round's strategy and ranks the requests for it: by
    /// `order` (see [`ORDERS`]) for the canonical one; larger first, or a
    /// fixed shuffle after round 0, for the lowest-section one. Uses
    /// `path` as scratch; [`Search::reset`] must have run (the totals are
    /// its section sums).
    fn rank_for(&mut self, strategy: Strategy, order: &[Criterion; 3]) {
        self.strategy = strategy;
        let n = self.requests.len();
        let path = core::mem::take(&mut self.path);
        for (k, p) in path.iter_mut().enumerate() {
            *p = k as u32;
        }
        let measure = |i: usize, c: Criterion| -> u64 {
            let r = &self.requests[i];
            let width = u64::from(r.live_until().saturating_sub(r.first_step)) + 1;
            match c {
                Criterion::Width => width,
                Criterion::Area => width * u64::from(self.size(i)),
                Criterion::Total => self
                    .sections(i)
                    .map(|t| self.remaining[t])
                    .max()
                    .map_or(0, u64::from),
            }
        };
        let preference = |i: usize| -> u64 {
            match strategy {
                Strategy::LowestSection(0) => u64::from(self.size(i)),
                // A multiplicative hash of (request, round): a fixed shuffle.
                Strategy::LowestSection(round) => u64::from(
                    (i as u32 ^ round.wrapping_mul(0x9E37_79B9)).wrapping_mul(0x85EB_CA6B) ^ round,
                ),
                Strategy::Canonical => 0,
            }
        };
        path[..n].sort_unstable_by(|&a, &b| {
            let (a, b) = (a as usize, b as usize);
            if strategy != Strategy::Canonical {
                return preference(b).cmp(&preference(a)).then(a.cmp(&b));
            }
            for &c in order {
                let (x, y) = (measure(a, c), measure(b, c));
                if x != y {
                    return y.cmp(&x);
                }
            }
            a.cmp(&b)
        });
        for (k, &i) in path[..n].iter().enumerate() {
            self.rank[i as usize] = k as u32;
        }
        self.path = path;
    }

    /// A new search with `strategy` (and `order`, for the canonical one),
    /// from an empty plan.
    pub(super) fn start(&mut self, strategy: Strategy, order: &[Criterion; 3]) {
        self.reset();
        self.rank_for(strategy, order);
        self.depth = 0;
        self.after = None;
    }

    /// [`Search::run`] in rounds, each with a node limit that doubles
    /// every round (from twice the request count): in each round the
    /// lowest-section strategy, then the canonical one in each of
    /// [`ORDERS`]. A search that goes wrong near the root rarely recovers
    /// within a budget, while another order often succeeds at once; and
    /// neither strategy wins everywhere. A refutation in any round ends
    /// the decision: each strategy tries every placement it must.
    pub(super) fn decide_with_restarts(
        &mut self,
        capacity: u32,
        budget: &mut u64,
        offsets: &mut [u32],
    ) -> Outcome {
        let mut round_nodes = 2 * self.requests.len() as u64;
        let mut round = 0;
        loop {
            let lowest = (Strategy::LowestSection(round), &ORDERS[0]);
            let canonical = ORDERS.iter().map(|order| (Strategy::Canonical, order));
            for (strategy, order) in core::iter::once(lowest).chain(canonical) {
                // The lowest-section strategy wins at once or not at all
                // (a guillotine packing is its round-0 case): after two
                // rounds, a quarter of the limit.
                let limit = if strategy == Strategy::Canonical || round < 2 {
                    round_nodes
                } else {
                    round_nodes / 4
                };
                let mut share = limit.min(*budget);
                *budget -= share;
                self.start(strategy, order);
                let outcome = self.run(capacity, &mut share, offsets);
                *budget += share;
                if outcome != Outcome::OutOfBudget || *budget == 0 {
                    return outcome;
                }
            }
            round += 1;
            round_nodes = round_nodes.saturating_mul(2);
        }
    }

    /// Where request `i`, placed at `offset`, stands in this round's order.
    fn key(&self, i: usize, offset: u64) -> Key {
        (offset, self.rank[i])
    }

    /// The request placed at `depth`.
    fn placed(&self, depth: usize) -> usize {
        (self.path[depth] & !HATLESS) as usize
    }

    /// Whether every buffer fits below `capacity` (see [`Outcome`]); on
    /// success the offsets are written to `offsets`. Every placement tried
    /// costs one unit of `budget`; when it runs out the search stops where
    /// it is, and the next call (at the same capacity) goes on from there.
    /// [`Search::start`] begins a search.
    ///
    /// Buffers are placed in increasing [`Key`] order, each at the lowest
    /// offset its placed neighbours in time leave it (its skyline), so a
    /// plan is found once, in one order (MiniMalloc's canonical
    /// solutions); a buffer is not placed at or above the top some other
    /// unplaced buffer could reach (that would leave a gap the other one
    /// must fill later, out of order: dominance).
    pub(super) fn run(&mut self, capacity: u32, budget: &mut u64, offsets: &mut [u32]) -> Outcome {
        if self.depth == 0 && self.remaining.iter().any(|&r| r > capacity) {
            return Outcome::Refuted;
        }
        let (mut depth, mut after) = (self.depth, self.after);
        let outcome = loop {
            if self.unplaced_count == 0 {
                offsets[..self.requests.len()].copy_from_slice(self.current);
                let head = (0..self.requests.len())
                    .map(|i| self.current[i] + self.size(i))
                    .max()
                    .unwrap_or(0);
                break Outcome::Found(head);
            }
            let canonical = self.strategy == Strategy::Canonical;
            let part = if canonical {
                self.first_part()
            } else {
                (0, self.floor.len())
            };
            // The canonical order holds within a part, from its first
            // placement on: a part split off (or shrunk) starts afresh.
            let last = depth
                .checked_sub(1)
                .filter(|&d| canonical && self.part_of(d) == part)
                .map(|d| {
                    let i = self.placed(d);
                    self.key(i, u64::from(self.current[i]))
                });
            let choice = if canonical {
                self.next_candidate(part, last, after, capacity)
            } else {
                self.lowest_section()
                    .and_then(|t| self.next_in_section(t, after, capacity))
            };
            match choice {
                Some((i, offset)) => {
                    if *budget == 0 {
                        break Outcome::OutOfBudget;
                    }
                    *budget -= 1;
                    let hatless = canonical && self.hatless(i, offset);
                    self.place(i, offset);
                    self.path[depth] = i as u32 | if hatless { HATLESS } else { 0 };
                    self.part[2 * depth] = part.0 as u32;
                    self.part[2 * depth + 1] = part.1 as u32;
                    depth += 1;
                    after = None;
                    let floor = if canonical && self.first_part() == part {
                        offset
                    } else {
                        0
                    };
                    if !self.consistent(capacity, floor, part) {
                        depth -= 1;
                        self.remove(i, depth);
                        after = Some(self.sibling_after(i, offset, hatless));
                    }
                }
                None => {
                    // The part failed: so did the placement that made it a
                    // part of its own (the last one placed in a part that
                    // overlaps it). The parts solved since lie elsewhere and
                    // no other choice there can help: take them back too.
                    let Some(k) = (0..depth).rev().find(|&d| {
                        let (lo, hi) = self.part_of(d);
                        lo < part.1 && part.0 < hi
                    }) else {
                        break Outcome::Refuted;
                    };
                    while depth > k + 1 {
                        depth -= 1;
                        self.remove(self.placed(depth), depth);
                    }
                    depth = k;
                    let hatless = self.path[k] & HATLESS != 0;
                    let i = self.placed(k);
                    let offset = self.current[i];
                    self.remove(i, k);
                    after = Some(self.sibling_after(i, offset, hatless));
                }
            }
        };
        (self.depth, self.after) = (depth, after);
        outcome
    }

    /// Where the next sibling of request `i`, placed at `offset`, must
    /// come in order: after it, or nowhere when it was hatless.
    fn sibling_after(&self, i: usize, offset: u32, hatless: bool) -> Key {
        if hatless {
            (u64::MAX, u32::MAX)
        } else {
            self.key(i, u64::from(offset))
        }
    }

    /// The sections of the part the path entry at `depth` was placed in.
    fn part_of(&self, depth: usize) -> (usize, usize) {
        (
            self.part[2 * depth] as usize,
            self.part[2 * depth + 1] as usize,
        )
    }

    /// The boundaries request `i` spans (boundary `b` lies between
    /// sections `b` and `b + 1`).
    fn boundaries(&self, i: usize) -> core::ops::Range<usize> {
        self.lo[i] as usize..(self.hi[i] as usize).saturating_sub(1)
    }

    /// The first part of the unplaced buffers: from the earliest section
    /// with bytes still to place, as far as unplaced buffers span the
    /// boundaries (MiniMalloc's decomposition). Parts are solved one after
    /// another, first to last; a part never shares a section with another.
    fn first_part(&self) -> (usize, usize) {
        let sections = self.floor.len();
        let Some(lo) = (0..sections).find(|&t| self.remaining[t] > 0) else {
            return (sections, sections);
        };
        let mut hi = lo + 1;
        while hi < sections && self.cover[hi - 1] > 0 {
            hi += 1;
        }
        (lo, hi)
    }

    /// Where request `i` would go now: its highest floor, aligned.
    fn skyline(&self, i: usize) -> u64 {
        let top = self.floor[self.sections(i)].iter().copied().max();
        align_up(
            u64::from(top.unwrap_or(0)),
            u64::from(self.requests[i].align),
        )
    }

    /// The unplaced buffer with the smallest [`Key`] above both `last`
    /// (the previous placement) and `after` (the sibling just tried) whose
    /// placement passes the pruning tests.
    fn next_candidate(
        &self,
        part: (usize, usize),
        last: Option<Key>,
        after: Option<Key>,
        capacity: u32,
    ) -> Option<(usize, u32)> {
        let unplaced = || self.free().filter(|&i| self.in_part(i, part));
        // Dominance: no buffer goes at or above the lowest top any
        // unplaced buffer can reach.
        let min_height = unplaced()
            .map(|i| u64::from(self.lowest[i]) + u64::from(self.size(i)))
            .min()?;
        let mut best: Option<(Key, usize, u32)> = None;
        for i in unplaced() {
            let offset = u64::from(self.lowest[i]);
            if offset >= min_height {
                continue;
            }
            let key = self.key(i, offset);
            if last.is_some_and(|l| key <= l)
                || after.is_some_and(|a| key <= a)
                || best.is_some_and(|(b, _, _)| key >= b)
            {
                continue;
            }
            if self.fits(i, offset, capacity) {
                best = Some((key, i, offset as u32));
            }
        }
        best.map(|(_, i, offset)| (i, offset))
    }

    /// The section with the lowest floor among those with bytes still to
    /// place (the earliest on a tie).
    fn lowest_section(&self) -> Option<usize> {
        (0..self.floor.len())
            .filter(|&t| self.remaining[t] > 0)
            .min_by_key(|&t| (self.floor[t], t))
    }

    /// The unplaced buffer live in `section` with the smallest [`Key`]
    /// after `after` whose placement passes the pruning tests; of
    /// identical buffers only the first unplaced one.
    fn next_in_section(
        &self,
        section: usize,
        after: Option<Key>,
        capacity: u32,
    ) -> Option<(usize, u32)> {
        let mut best: Option<(Key, usize, u32)> = None;
        for i in self.free() {
            if !self.sections(i).contains(&section) {
                continue;
            }
            let twin = self.twin[i];
            if twin != NO_TWIN && self.current[twin as usize] == UNPLACED {
                continue;
            }
            let offset = u64::from(self.lowest[i]);
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

    /// Whether placing request `i` at `offset` raises no unplaced buffer's
    /// skyline: then nothing is ever placed between it and the buffers
    /// overhead, it sits there in every completion, and when its subtree
    /// fails no sibling can succeed (MiniMalloc's hatless pruning).
    fn hatless(&self, i: usize, offset: u32) -> bool {
        let top = u64::from(offset) + u64::from(self.size(i));
        self.free()
            .all(|j| j == i || !self.overlap(i, j) || u64::from(self.lowest[j]) >= top)
    }

    /// Whether the unplaced buffers can still fit, placed from `offset`
    /// (the last placement's) up: each one below the capacity from where
    /// it can go now, none unreachable (a buffer that would end at or
    /// below `offset` can no longer be placed in order), and in each
    /// section all of them stacked from the lowest such place.
    fn consistent(&mut self, capacity: u32, offset: u32, part: (usize, usize)) -> bool {
        let capacity = u64::from(capacity);
        self.reach.fill(u32::MAX);
        for k in 0..self.unplaced_count {
            let i = self.unplaced[k] as usize;
            let floor = if self.in_part(i, part) {
                u64::from(offset)
            } else {
                0
            };
            let skyline = u64::from(self.lowest[i]);
            let size = u64::from(self.size(i));
            let lowest = skyline.max(floor);
            if skyline + size <= floor || lowest + size > capacity {
                return false;
            }
            let range = self.sections(i);
            // Below the capacity (just checked), so it fits in 32 bits.
            let lowest = lowest as u32;
            for reach in &mut self.reach[range] {
                *reach = (*reach).min(lowest);
            }
        }
        self.remaining
            .iter()
            .zip(self.reach.iter())
            .all(|(&left, &low)| left == 0 || u64::from(low) + u64::from(left) <= capacity)
    }

    /// Whether request `i` lives in `part`'s sections.
    fn in_part(&self, i: usize, part: (usize, usize)) -> bool {
        part.0 <= self.lo[i] as usize && self.hi[i] as usize <= part.1
    }

    /// Whether requests `i` and `j` are live at a common step.
    fn overlap(&self, i: usize, j: usize) -> bool {
        self.lo[j] < self.hi[i] && self.lo[i] < self.hi[j]
    }

    fn place(&mut self, i: usize, offset: u32) {
        let size = self.size(i);
        let top = offset + size;
        self.current[i] = offset;
        let range = self.sections(i);
        self.floor[range.clone()].fill(top);
        for left in &mut self.remaining[range] {
            *left -= size;
        }
        let range = self.boundaries(i);
        for cover in &mut self.cover[range] {
            *cover -= 1;
        }
        // Out of the unplaced list: the last one takes its slot.
        let k = self.slot[i] as usize;
        self.unplaced_count -= 1;
        let last = self.unplaced[self.unplaced_count];
        self.unplaced[k] = last;
        self.slot[last as usize] = k as u32;
        for k in 0..self.unplaced_count {
            let j = self.unplaced[k] as usize;
            if self.overlap(i, j) && self.lowest[j] < top {
                // Aligned below the capacity, which fits in 32 bits.
                self.lowest[j] = align_up(u64::from(top), u64::from(self.requests[j].align)) as u32;
            }
        }
    }

    /// Takes back request `i`, the one placed at `depth`: its sections'
    /// floors are recomputed from the buffers placed before it.
    fn remove(&mut self, i: usize, depth: usize) {
        let size = self.size(i);
        let top = u64::from(self.current[i]) + u64::from(size);
        self.current[i] = UNPLACED;
        let range = self.sections(i);
        self.floor[range.clone()].fill(0);
        for left in &mut self.remaining[range] {
            *left += size;
        }
        let range = self.boundaries(i);
        for cover in &mut self.cover[range] {
            *cover += 1;
        }
        for d in 0..depth {
            let j = self.placed(d);
            if self.overlap(i, j) {
                let top = self.current[j] + self.size(j);
                let from = self.lo[i].max(self.lo[j]) as usize;
                let to = self.hi[i].min(self.hi[j]) as usize;
                for floor in &mut self.floor[from..to] {
                    *floor = (*floor).max(top);
                }
            }
        }
        self.lowest[i] = self.skyline(i) as u32;
        for k in 0..self.unplaced_count {
            let j = self.unplaced[k] as usize;
            // Only a neighbour that rested on `i` can come down.
            if self.overlap(i, j)
                && u64::from(self.lowest[j]) == align_up(top, u64::from(self.requests[j].align))
            {
                self.lowest[j] = self.skyline(j) as u32;
            }
        }
        // Back into the unplaced list.
        self.unplaced[self.unplaced_count] = i as u32;
        self.slot[i] = self.unplaced_count as u32;
        self.unplaced_count += 1;
    }
}
