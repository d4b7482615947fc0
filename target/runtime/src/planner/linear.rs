//! The planner that reuses nothing.

use super::{MemoryPlanner, PlanError, check_requests, head_size};
use crate::request::{BufferRequest, align_up};

/// Places every buffer after the previous one, in request order, so no two
/// buffers ever share a byte: every intermediate result survives the whole
/// invocation and can be read back for debugging. The head is the sum of the
/// padded sizes plus alignment gaps, an upper bound for every other planner.
#[derive(Debug, Clone, Copy, Default)]
pub struct Linear;

impl MemoryPlanner for Linear {
    fn name(&self) -> &'static str {
        "linear"
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
        let mut next = 0u64;
        for (i, r) in requests.iter().enumerate() {
            let offset = align_up(next, u64::from(r.align));
            offsets[i] =
                u32::try_from(offset).map_err(|_| PlanError::SizeOverflow { request: i as u32 })?;
            next = offset + u64::from(r.padded_size().unwrap_or(0));
        }
        head_size(requests, offsets)
    }
}
