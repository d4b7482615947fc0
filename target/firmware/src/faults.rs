//! Fault injection that belongs to this firmware rather than to the agent
//! (cargo features `fault-*`, never in a release build; the others are the
//! agent's own features): a planner of ours, handed to the agent as a
//! user's own planner would be.

#[cfg(feature = "fault-misplan")]
pub(crate) use misplan::Misplan;

#[cfg(feature = "fault-misplan")]
mod misplan {
    use hilt_agent::runtime::planner::{Greedy, MemoryPlanner, PlanError};
    use hilt_agent::runtime::request::BufferRequest;

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

/// An edit that touches no timed code: a CRC table built at start-up, its
/// code placed before everything else the firmware runs, so every later
/// address moves and the core executes a few thousand more instructions
/// before the first invoke. The gate's latency figures must not change.
#[cfg(feature = "edit-outside-timing")]
#[inline(never)]
pub(crate) fn edit_outside_timing() {
    let mut table = [0u32; 256];
    for (i, entry) in table.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
        *entry = c;
    }
    core::hint::black_box(&table);
}
