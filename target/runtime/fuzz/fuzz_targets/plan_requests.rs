//! The planners on their own: arbitrary request lists (sizes, alignments up
//! to 1 MiB, lifetimes, holds) through `MemoryPlanner::plan`.
//!
//! Input: 8 bytes per request, at most 64 requests, then optionally 4 bytes
//! (little-endian) of offline-plan limit.
//! `[align, first, len, flags, size × 4]`: `align = 1 << (byte % 21)`,
//! `first = byte % 32`, `last = first + len % 32`; flags: bit 7 hold the
//! buffer `flags & 31` steps past its last step, bit 6 scratch instead of tensor, bit 5
//! keep the full 32-bit size (otherwise only its low 16 bits), bit 4 swap
//! first and last (an invalid request); the last 4 bytes, as a little-endian
//! i32, give tensor `i`'s offset in an offline plan (odd: -1, run time;
//! otherwise `(v >> 1) % 64` times the alignment; bit 31 set: raw value).

#![no_main]

use hilt_runtime::planner::{
    Greedy, Linear, MemoryPlanner, Offline, PlanError, find_conflict, lower_bound,
};
use hilt_runtime::request::BufferRequest;
use libfuzzer_sys::fuzz_target;

const MAX_REQUESTS: usize = 64;
const BYTES_PER_REQUEST: usize = 8;

fuzz_target!(|data: &[u8]| {
    let mut requests = Vec::new();
    let mut plan_words = Vec::new();
    for (i, c) in data
        .chunks_exact(BYTES_PER_REQUEST)
        .take(MAX_REQUESTS)
        .enumerate()
    {
        let align = 1u32 << (c[0] % 21);
        let (mut first, mut last) = (u32::from(c[1] % 32), u32::from(c[1] % 32 + c[2] % 32));
        let flags = c[3];
        if flags & 0x10 != 0 {
            (first, last) = (last, first);
        }
        let raw = u32::from_le_bytes([c[4], c[5], c[6], c[7]]);
        let size = if flags & 0x20 != 0 { raw } else { raw & 0xffff };
        let mut r = if flags & 0x40 != 0 {
            BufferRequest::scratch(first, i as u32, size)
        } else {
            BufferRequest::tensor(i as u32, size, first, last)
        };
        if flags & 0x80 != 0 {
            r = r.held_until(r.last_step + u32::from(flags & 31));
        }
        requests.push(r.with_align(align));
        let offset = if raw & 0x8000_0000 != 0 {
            raw as i32
        } else if raw & 1 != 0 {
            -1
        } else {
            (u64::from((raw >> 1) % 64) * u64::from(align)).min(i32::MAX as u64) as i32
        };
        plan_words.push(offset);
    }
    let n = requests.len();

    let linear = plan(&Linear, &requests);
    let greedy = plan(&Greedy, &requests);
    match (&linear, &greedy) {
        (Ok((_, l)), Ok((_, g))) => assert!(g <= l, "greedy head {g} > linear head {l}"),
        (Ok(_), Err(e)) => panic!("linear planned but greedy failed: {e:?}"),
        (Err(l), Err(g)) => {
            // Both check the requests first, so validation errors agree.
            if !matches!(g, PlanError::SizeOverflow { .. }) {
                assert_eq!(l, g);
            }
        }
        (Err(_), Ok(_)) => {} // Greedy reuses memory where Linear overflows.
    }

    // Too little workspace or too few offsets is an error, never a panic.
    if n > 0 {
        let mut workspace = vec![0u32; Greedy.workspace_words(n) - 1];
        let mut offsets = vec![0u32; n];
        assert!(
            Greedy
                .plan(&requests, &mut workspace, &mut offsets)
                .is_err()
        );
        let mut workspace = vec![0u32; Greedy.workspace_words(n)];
        let mut offsets = vec![0u32; n - 1];
        assert!(
            Greedy
                .plan(&requests, &mut workspace, &mut offsets)
                .is_err()
        );
        assert!(Linear.plan(&requests, &mut [], &mut offsets).is_err());
    }

    // An offline plan for the tensor requests, placed around its fixed offsets.
    let mut metadata = Vec::with_capacity(4 * (3 + n));
    for w in [1, 1, n as i32]
        .into_iter()
        .chain(plan_words.iter().copied())
    {
        metadata.extend_from_slice(&w.to_le_bytes());
    }
    let offline = Offline::from_metadata(&metadata, n as u32, n as u32)
        .expect("well-formed offline metadata refused");
    // Trailing bytes (4 or more) set a limit on the fixed buffers' end.
    let rest = data.chunks_exact(BYTES_PER_REQUEST).remainder();
    let limit = match rest {
        [a, b, c, d, ..] => u32::from_le_bytes([*a, *b, *c, *d]),
        _ => i32::MAX as u32,
    };
    for offline in [offline, offline.with_limit(limit)] {
        if let Ok((offsets, _)) = plan(&offline, &requests) {
            for (i, r) in requests.iter().enumerate() {
                let Some(t) = r.tensor_index() else { continue };
                if let Some(fixed) = offline.offset_of(t).and_then(|o| u32::try_from(o).ok()) {
                    assert_eq!(
                        offsets[i], fixed,
                        "offline: tensor {t} moved from its fixed offset"
                    );
                }
            }
        }
    }
});

/// Plans `requests`, checks the invariants on success, returns offsets and head.
fn plan(
    planner: &dyn MemoryPlanner,
    requests: &[BufferRequest],
) -> Result<(Vec<u32>, u32), PlanError> {
    let mut workspace = vec![0u32; planner.workspace_words(requests.len())];
    let mut offsets = vec![0u32; requests.len()];
    let head = planner.plan(requests, &mut workspace, &mut offsets)?;
    let name = planner.name();
    assert_eq!(
        find_conflict(requests, &offsets),
        None,
        "{name}: two live buffers share bytes"
    );
    for (i, (r, &offset)) in requests.iter().zip(&offsets).enumerate() {
        assert!(
            offset.is_multiple_of(r.align),
            "{name}: request {i} misaligned"
        );
        let padded = r
            .padded_size()
            .expect("planned request without a padded size");
        assert!(
            u64::from(offset) + u64::from(padded) <= u64::from(head),
            "{name}: request {i} ends past the head {head}"
        );
    }
    let bound = lower_bound(requests);
    assert!(
        u64::from(head) >= bound,
        "{name}: head {head} below the lower bound {bound}"
    );
    Ok((offsets, head))
}
