//! TFLM's greedy-by-size planner, reproduced decision for decision.

use core::cmp::Reverse;

use super::{MemoryPlanner, PlanError, check_requests, head_size};
use crate::request::{BufferRequest, align_up};

/// End of the offset-ordered list of placed buffers.
const END: u32 = u32::MAX;

/// Greedy-by-size first fit, as TFLM's `GreedyMemoryPlanner` does it:
///
/// 1. Buffers with fixed (offline) offsets go first, in request order.
/// 2. The rest are taken largest first; among equal sizes the *later*
///    request goes first (TFLM fills its order array back to front and then
///    bubble-sorts it stably).
/// 3. Each buffer goes at the lowest offset where it fits: walking the placed
///    buffers that are live at the same time in offset order, it takes the
///    first gap of at least its size, else the end of the highest of them.
///
/// hilt adds one thing TFLM does not need: mixed alignments. Larger alignment
/// classes are placed first (TFLM has only one class, so its order is
/// unchanged), and a candidate offset is rounded up to the buffer's alignment.
/// Because every buffer placed before one of smaller alignment ends on a
/// multiple of that alignment, no padding appears and the head never exceeds
/// the sum of padded sizes, so greedy is never worse than [`super::Linear`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Greedy;

impl MemoryPlanner for Greedy {
    fn name(&self) -> &'static str {
        "greedy"
    }

    fn workspace_words(&self, count: usize) -> usize {
        2 * count
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
        place(requests, |_| None, workspace, offsets)?;
        head_size(requests, offsets)
    }
}

/// The greedy placement, with `fixed(i)` giving offsets decided beforehand
/// (already validated by the caller). Requests must have passed
/// `check_requests`; `workspace` holds at least `2 * requests.len()` words.
pub(super) fn place(
    requests: &[BufferRequest],
    fixed: impl Fn(usize) -> Option<u32>,
    workspace: &mut [u32],
    offsets: &mut [u32],
) -> Result<(), PlanError> {
    let n = requests.len();
    let (order, rest) = workspace.split_at_mut(n);
    let next = &mut rest[..n];
    let padded = |i: usize| requests[i].padded_size().unwrap_or(0);

    let mut fixed_count = 0;
    for i in 0..n {
        if fixed(i).is_some() {
            order[fixed_count] = i as u32;
            fixed_count += 1;
        }
    }
    let mut k = fixed_count;
    for i in 0..n {
        if fixed(i).is_none() {
            order[k] = i as u32;
            k += 1;
        }
    }
    // The key is unique (it ends with the index), so any sort gives this
    // order; an insertion sort is a few dozen bytes of flash where
    // `sort_unstable_by_key` links about 5 KB of quicksort and heapsort,
    // and a plan sorts a few hundred requests once, before the first invoke.
    insertion_sort_by_key(&mut order[fixed_count..], |&i| {
        let r = &requests[i as usize];
        (Reverse(r.align), Reverse(padded(i as usize)), Reverse(i))
    });

    let mut list_head = END;
    for &b in order.iter() {
        let b = b as usize;
        let request = &requests[b];
        let offset = match fixed(b) {
            Some(offset) => offset,
            None => {
                let size = u64::from(padded(b));
                let align = u64::from(request.align);
                let mut candidate = 0u64;
                let mut cursor = list_head;
                while cursor != END {
                    let c = cursor as usize;
                    if requests[c].overlaps_in_time(request) {
                        let start = u64::from(offsets[c]);
                        if start >= candidate + size {
                            break;
                        }
                        let end = start + u64::from(padded(c));
                        candidate = candidate.max(align_up(end, align));
                    }
                    cursor = next[c];
                }
                u32::try_from(candidate)
                    .map_err(|_| PlanError::SizeOverflow { request: b as u32 })?
            }
        };
        offsets[b] = offset;
        // Insert after every placed buffer with an offset <= this one.
        if list_head == END || offsets[list_head as usize] > offset {
            next[b] = list_head;
            list_head = b as u32;
        } else {
            let mut prev = list_head as usize;
            while next[prev] != END && offsets[next[prev] as usize] <= offset {
                prev = next[prev] as usize;
            }
            next[b] = next[prev];
            next[prev] = b as u32;
        }
    }
    Ok(())
}

/// Sorts `items` by `key`, ascending: an insertion sort (see its caller).
fn insertion_sort_by_key<T: Copy, K: Ord>(items: &mut [T], key: impl Fn(&T) -> K) {
    for i in 1..items.len() {
        let item = items[i];
        let item_key = key(&item);
        let mut j = i;
        while j > 0 && key(&items[j - 1]) > item_key {
            items[j] = items[j - 1];
            j -= 1;
        }
        items[j] = item;
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::insertion_sort_by_key;

    #[test]
    fn the_insertion_sort_orders_as_the_standard_sort_does() {
        // A fixed pseudo-random sequence with many ties in the first key.
        let mut state = 0x2545_f491_u32;
        for len in [0usize, 1, 2, 3, 17, 200] {
            let items: Vec<(u32, u32)> = (0..len as u32)
                .map(|i| {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    (state % 7, i)
                })
                .collect();
            let mut ours = items.clone();
            insertion_sort_by_key(&mut ours, |&(size, i)| (core::cmp::Reverse(size), i));
            let mut theirs = items;
            theirs.sort_unstable_by_key(|&(size, i)| (core::cmp::Reverse(size), i));
            assert_eq!(ours, theirs, "{len} items");
        }
    }
}
