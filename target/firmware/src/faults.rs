//! Fault injection for the host's failure tests (cargo features `fault-*`,
//! never in a release build): each fault must be caught and reported as the
//! right fault.

#[cfg(feature = "fault-misplan")]
pub(crate) use misplan::Misplan;

#[cfg(feature = "fault-misplan")]
mod misplan {
    use hilt_runtime::planner::{Greedy, MemoryPlanner, PlanError};
    use hilt_runtime::request::BufferRequest;

    /// Greedy, then one buffer moved onto a neighbour that is live at the
    /// same time: the allocator's plan check must refuse it.
    pub(crate) struct Misplan;

    impl MemoryPlanner for Misplan {
        fn name(&self) -> &'static str {
            "misplan"
        }

        fn workspace_words(&self, count: usize) -> usize {
            Greedy.workspace_words(count)
        }

        fn plan(
            &self,
            requests: &[BufferRequest],
            workspace: &mut [u32],
            offsets: &mut [u32],
        ) -> Result<u32, PlanError> {
            let head = Greedy.plan(requests, workspace, offsets)?;
            for i in 0..requests.len() {
                for j in i + 1..requests.len() {
                    if requests[i].overlaps_in_time(&requests[j]) && offsets[i] != offsets[j] {
                        offsets[j] = offsets[i];
                        return Ok(head);
                    }
                }
            }
            Ok(head)
        }
    }
}

/// Recurses until the stack reaches the arena, then lets the deepest
/// frame spill 8 bytes into the arena's last bytes, as a stack overflow
/// would (deeper spills would also wreck the tail's records, and the point
/// here is to see the guard catch the first bytes).
#[cfg(feature = "fault-stack-overflow")]
pub(crate) fn grow_stack_into_arena() {
    unsafe extern "C" {
        static __hilt_arena_end: u8;
    }
    let arena_end = (&raw const __hilt_arena_end) as usize;
    core::hint::black_box(dig(arena_end));
}

#[cfg(feature = "fault-stack-overflow")]
#[inline(never)]
fn dig(arena_end: usize) -> u32 {
    let mut frame = [0x5Au8; 64];
    core::hint::black_box(&mut frame);
    let here = frame.as_ptr() as usize;
    if here > arena_end + 128 {
        dig(arena_end).wrapping_add(u32::from(frame[1]))
    } else {
        // SAFETY: the injected fault: 8 bytes just below the arena's end.
        unsafe { core::ptr::write_volatile((arena_end - 8) as *mut u64, 0x5A5A_5A5A_5A5A_5A5A) };
        u32::from(frame[0])
    }
}
