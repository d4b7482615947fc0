//! Memory planners: where in the arena's head each buffer goes.
//!
//! A planner sees only [`BufferRequest`]s (size, alignment, lifetime) and
//! writes one offset per request. Two requests whose lifetimes overlap must
//! not share a byte; requests that are never live at the same step may.
//! Planners get their working memory from the caller (the arena's temp
//! section), so none of them needs a heap.
//!
//! - [`Linear`]: no reuse at all. Every buffer keeps its bytes for the whole
//!   run, which is what a debugger wants ("preserve all tensors").
//! - [`Greedy`]: TFLM's `GreedyMemoryPlanner`, decision for decision, so the
//!   same requests get the same offsets as in TFLM.
//! - [`Offline`]: offsets computed ahead of time and stored in the model's
//!   `OfflineMemoryAllocation` metadata, checked before they are trusted;
//!   buffers it leaves open are placed greedily around the fixed ones.
//! - [`Optimal`]: a bounded branch and bound for the smallest head, seeded
//!   with the greedy plan; it reaches the liveness lower bound where it can.
//!
//! [`PlannerKind`] names them (`"linear"`, `"greedy"`, `"offline"`,
//! `"optimal"`) for
//! builds, scenarios and the CLI, and makes the chosen one.
//!
//! ```
//! use hilt_runtime::planner::{Greedy, MemoryPlanner};
//! use hilt_runtime::request::BufferRequest;
//!
//! let requests = [BufferRequest::tensor(0, 100, 0, 1), BufferRequest::tensor(1, 20, 1, 2)];
//! let mut workspace = [0u32; 4];
//! let mut offsets = [0u32; 2];
//! let head = Greedy.plan(&requests, &mut workspace, &mut offsets).unwrap();
//! // 100 bytes round up to 112; the second buffer is live with the first.
//! assert_eq!((offsets, head), ([0, 112], 144));
//! ```

use core::fmt;

use crate::request::BufferRequest;

pub(crate) mod check;
mod greedy;
mod kind;
mod linear;
mod offline;
mod optimal;

pub use greedy::Greedy;
pub use kind::{AnyPlanner, PlannerKind};
pub use linear::Linear;
pub use offline::{OFFLINE_PLAN_METADATA, Offline, OfflinePlanError};
pub use optimal::Optimal;

/// A planner failure; each variant names the request (by position) at fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum PlanError {
    /// Alignment not a power of two or above [`crate::request::MAX_ALIGN`].
    InvalidAlignment {
        /// Request position.
        request: u32,
        /// Its alignment.
        align: u32,
    },
    /// A size, rounded up to its alignment, or the head does not fit in 32 bits.
    SizeOverflow {
        /// Request position.
        request: u32,
    },
    /// The workspace given is smaller than [`MemoryPlanner::workspace_words`].
    WorkspaceTooSmall {
        /// Words needed.
        needed: u32,
        /// Words given.
        given: u32,
    },
    /// The offsets slice is shorter than the request list.
    OffsetsTooShort {
        /// Entries needed.
        needed: u32,
        /// Entries given.
        given: u32,
    },
    /// A request's first step lies after its last step.
    InvertedLifetime {
        /// Request position.
        request: u32,
    },
    /// The offline plan is invalid.
    Offline(OfflinePlanError),
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PlanError::InvalidAlignment { request, align } => write!(
                f,
                "buffer request {request}: alignment {align} is not a power of two up to 1 MiB"
            ),
            PlanError::SizeOverflow { request } => {
                write!(f, "buffer request {request}: size overflows 32 bits")
            }
            PlanError::WorkspaceTooSmall { needed, given } => {
                write!(
                    f,
                    "planner workspace too small: needs {needed} words, got {given}"
                )
            }
            PlanError::OffsetsTooShort { needed, given } => {
                write!(f, "offsets slice holds {given} entries, {needed} needed")
            }
            PlanError::InvertedLifetime { request } => {
                write!(f, "buffer request {request}: first step is after last step")
            }
            PlanError::Offline(e) => write!(f, "offline plan: {e}"),
        }
    }
}

impl core::error::Error for PlanError {}

impl From<OfflinePlanError> for PlanError {
    fn from(e: OfflinePlanError) -> Self {
        PlanError::Offline(e)
    }
}

/// Places buffer requests in the arena's head.
pub trait MemoryPlanner {
    /// Short name for reports ("greedy", ...).
    fn name(&self) -> &'static str;

    /// `u32` words of working memory [`plan`](Self::plan) needs for `count` requests.
    fn workspace_words(&self, count: usize) -> usize;

    /// A cheaper planner whose plan this one only improves on (its head is
    /// never above the seed's), which set-up runs first: the workspace is
    /// temp memory in the head's place, so a planner with a larger one can
    /// raise the arena's peak above the seed's whole plan even with a
    /// smaller head. Set-up then keeps the seed's plan, whose total is the
    /// smaller ([`Optimal`]'s seed is [`Greedy`]). `None`: no seed.
    fn seed(&self) -> Option<&dyn MemoryPlanner> {
        None
    }

    /// Writes `offsets[i]` (bytes from the start of the head, a multiple of
    /// `requests[i].align`) for every request and returns the head size: the
    /// highest end of any buffer.
    fn plan(
        &self,
        requests: &[BufferRequest],
        workspace: &mut [u32],
        offsets: &mut [u32],
    ) -> Result<u32, PlanError>;
}

/// Checks what every planner relies on: valid alignments, sizes that round
/// without overflow, ordered lifetimes, and room for the outputs. Public so
/// that a port refuses bad input with the same typed errors as the
/// runtime's planners (the conformance kit checks that it does).
pub fn check_requests(
    requests: &[BufferRequest],
    workspace: &[u32],
    workspace_needed: usize,
    offsets: &[u32],
) -> Result<(), PlanError> {
    if offsets.len() < requests.len() {
        return Err(PlanError::OffsetsTooShort {
            needed: requests.len() as u32,
            given: offsets.len() as u32,
        });
    }
    if workspace.len() < workspace_needed {
        return Err(PlanError::WorkspaceTooSmall {
            needed: workspace_needed as u32,
            given: workspace.len() as u32,
        });
    }
    for (i, r) in requests.iter().enumerate() {
        let request = i as u32;
        if !r.align.is_power_of_two() || r.align > crate::request::MAX_ALIGN {
            return Err(PlanError::InvalidAlignment {
                request,
                align: r.align,
            });
        }
        if r.padded_size().is_none() {
            return Err(PlanError::SizeOverflow { request });
        }
        if r.first_step > r.last_step {
            return Err(PlanError::InvertedLifetime { request });
        }
    }
    Ok(())
}

/// The highest `offset + padded size` over all requests (checked requests only).
fn head_size(requests: &[BufferRequest], offsets: &[u32]) -> Result<u32, PlanError> {
    let mut head = 0u64;
    for (i, (r, &o)) in requests.iter().zip(offsets).enumerate() {
        let end = u64::from(o) + u64::from(r.padded_size().unwrap_or(u32::MAX));
        if end > u64::from(u32::MAX) {
            return Err(PlanError::SizeOverflow { request: i as u32 });
        }
        head = head.max(end);
    }
    Ok(head as u32)
}

/// The least head any planner can achieve: the largest sum of padded sizes
/// live at one step. The maximum is reached at some buffer's first step, so
/// checking those steps suffices; O(n²) time, no memory.
pub fn lower_bound(requests: &[BufferRequest]) -> u64 {
    requests
        .iter()
        .map(|at| {
            requests
                .iter()
                .filter(|r| r.first_step <= at.first_step && at.first_step <= r.live_until())
                .map(|r| u64::from(r.padded_size().unwrap_or(0)))
                .sum::<u64>()
        })
        .max()
        .unwrap_or(0)
}

/// A way in which a plan breaks the rules every planner must keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum PlanViolation {
    /// Fewer offsets than requests.
    MissingOffsets,
    /// Two buffers live at the same step share bytes.
    Overlap {
        /// One request's position.
        first: u32,
        /// The other's.
        second: u32,
    },
    /// An offset that is not a multiple of the request's alignment.
    Misaligned {
        /// Request position.
        request: u32,
    },
    /// A buffer that ends past the head.
    OutsideHead {
        /// Request position.
        request: u32,
    },
    /// A head smaller than the liveness lower bound (impossible for a
    /// plan without overlaps: the figures are inconsistent).
    BelowLowerBound,
}

/// Checks a finished plan: offsets aligned, every buffer inside the head,
/// no two simultaneously live buffers sharing a byte, and the head at least
/// the lower bound. The same rules as [`check::check_plan`], which names
/// the buffers in full; this one answers with request positions, for the
/// tests and the fuzzers.
pub fn verify_plan(
    requests: &[BufferRequest],
    offsets: &[u32],
    head: u32,
) -> Result<(), PlanViolation> {
    use check::PlanFailure;
    check::check_plan(requests, offsets, head).map_err(|failure| match failure {
        PlanFailure::MissingOffsets { .. } | PlanFailure::FixedMoved { .. } => {
            PlanViolation::MissingOffsets
        }
        PlanFailure::InvalidRequest { index, .. } => PlanViolation::Misaligned { request: index },
        PlanFailure::Misaligned { buffer } => PlanViolation::Misaligned {
            request: buffer.index,
        },
        PlanFailure::OutsideHead { buffer, .. } => PlanViolation::OutsideHead {
            request: buffer.index,
        },
        PlanFailure::Overlap { first, second } => PlanViolation::Overlap {
            first: first.index,
            second: second.index,
        },
    })?;
    if u64::from(head) < lower_bound(requests) {
        return Err(PlanViolation::BelowLowerBound);
    }
    Ok(())
}

/// Finds two requests that share bytes while both are live, if any.
pub fn find_conflict(requests: &[BufferRequest], offsets: &[u32]) -> Option<(usize, usize)> {
    match check::first_overlap(requests, offsets)? {
        check::PlanFailure::Overlap { first, second } => {
            Some((first.index as usize, second.index as usize))
        }
        _ => None,
    }
}
