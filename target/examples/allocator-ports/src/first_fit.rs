//! First fit, right and wrong: one placement loop, two ideas of when two
//! buffers are live together.

use hilt_runtime::planner::{MemoryPlanner, PlanError, check_requests};
use hilt_runtime::request::BufferRequest;

/// Buffers in request order, each at the lowest aligned offset that shares
/// no byte with an already placed buffer live at a common step.
#[derive(Debug, Clone, Copy, Default)]
pub struct FirstFit;

/// [`FirstFit`] with the off-by-one: buffers whose lifetimes only touch
/// (one ends at the step the other starts) are taken as never live
/// together. **Wrong on purpose**, to show what the kit reports.
#[derive(Debug, Clone, Copy, Default)]
pub struct BrokenFirstFit;

impl MemoryPlanner for FirstFit {
    fn name(&self) -> &'static str {
        "first-fit"
    }

    fn workspace_words(&self, _count: usize) -> usize {
        0
    }

    fn plan(
        &self,
        requests: &[BufferRequest],
        workspace: &mut [u32],
        offsets: &mut [u32],
    ) -> Result<u32, PlanError> {
        check_requests(requests, workspace, 0, offsets)?;
        place_all(requests, offsets, BufferRequest::overlaps_in_time)
    }
}

impl MemoryPlanner for BrokenFirstFit {
    fn name(&self) -> &'static str {
        "broken-first-fit"
    }

    fn workspace_words(&self, _count: usize) -> usize {
        0
    }

    fn plan(
        &self,
        requests: &[BufferRequest],
        workspace: &mut [u32],
        offsets: &mut [u32],
    ) -> Result<u32, PlanError> {
        check_requests(requests, workspace, 0, offsets)?;
        place_all(requests, offsets, touching_is_disjoint)
    }
}

/// The bug: `<` where the lifetimes are inclusive and `<=` is needed.
fn touching_is_disjoint(a: &BufferRequest, b: &BufferRequest) -> bool {
    a.first_step < b.live_until() && b.first_step < a.live_until()
}

/// Bytes reserved for `r` (checked requests only: the padding fits).
fn padded(r: &BufferRequest) -> u64 {
    u64::from(r.padded_size().unwrap_or(u32::MAX))
}

/// Places every request in order; returns the head (the highest end).
fn place_all(
    requests: &[BufferRequest],
    offsets: &mut [u32],
    live_together: fn(&BufferRequest, &BufferRequest) -> bool,
) -> Result<u32, PlanError> {
    let mut head = 0u64;
    for i in 0..requests.len() {
        let offset = lowest_free(requests, offsets, i, live_together);
        let end = offset + padded(&requests[i]);
        let overflow = PlanError::SizeOverflow { request: i as u32 };
        if end > u64::from(u32::MAX) {
            return Err(overflow);
        }
        offsets[i] = offset as u32;
        head = head.max(end);
    }
    Ok(head as u32)
}

/// The lowest offset, on request `i`'s alignment, where it collides with
/// none of the requests placed before it that it is live with. Every
/// offset below a collider's end collides with it, so the search jumps
/// past that end and tries again; it only moves up, and ends.
fn lowest_free(
    requests: &[BufferRequest],
    offsets: &[u32],
    i: usize,
    live_together: fn(&BufferRequest, &BufferRequest) -> bool,
) -> u64 {
    let r = &requests[i];
    let (size, align) = (padded(r), u64::from(r.align));
    let mut candidate = 0u64;
    loop {
        let at = candidate.next_multiple_of(align);
        let collider = (0..i).find(|&j| {
            let (start, end) = (
                u64::from(offsets[j]),
                u64::from(offsets[j]) + padded(&requests[j]),
            );
            live_together(r, &requests[j]) && at < end && start < at + size
        });
        match collider {
            Some(j) => candidate = u64::from(offsets[j]) + padded(&requests[j]),
            None => return at,
        }
    }
}
