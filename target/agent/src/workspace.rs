//! The agent's large buffers, kept out of the stack: on a 128 KiB part the
//! stack is what is left after the arena, and must stay small.

use hilt_proto::{MAX_FRAME, PlanEntry};
use hilt_runtime::accel::JobTrace;

/// Most operators a model may have for per-op cycle counts (later ops are
/// timed in the invoke's total but not reported one by one).
#[cfg(not(feature = "small-ram"))]
pub const MAX_OPS: usize = 256;
/// Most operators a model may have for per-op cycle counts (later ops are
/// timed in the invoke's total but not reported one by one); `small-ram`.
#[cfg(feature = "small-ram")]
pub const MAX_OPS: usize = 64;

/// Most plan entries kept for the host's `PlanRequest`.
#[cfg(not(feature = "small-ram"))]
pub const MAX_PLAN: usize = 384;
/// Most plan entries kept for the host's `PlanRequest`; `small-ram`.
#[cfg(feature = "small-ram")]
pub const MAX_PLAN: usize = 96;

/// Most offloaded jobs an invoke's trace keeps (20 bytes each; later jobs
/// still run and count, without their times).
#[cfg(not(feature = "small-ram"))]
pub const MAX_JOBS: usize = 48;
/// Most offloaded jobs an invoke's trace keeps; `small-ram`.
#[cfg(feature = "small-ram")]
pub const MAX_JOBS: usize = 8;

const EMPTY_ENTRY: PlanEntry = PlanEntry {
    kind: 0,
    index: 0,
    first_step: 0,
    last_step: 0,
    size: 0,
    align: 0,
    offset: 0,
};

/// Buffers a session works in: the committed arena plan, per-op cycle
/// counts, offloaded jobs' times, and one outgoing and one decoded frame
/// (about 13 KiB; under the `small-ram` feature, for parts with 64 KiB of
/// RAM, about 4.6 KiB). Place it
/// in a `static` (`Workspace::new` is `const`), so it lands in `.bss`.
#[derive(Debug)]
pub struct Workspace {
    pub(crate) plan: [PlanEntry; MAX_PLAN],
    pub(crate) per_op: [u64; MAX_OPS],
    pub(crate) jobs: [JobTrace; MAX_JOBS],
    pub(crate) frame: [u8; MAX_FRAME],
    pub(crate) scratch: [u8; MAX_FRAME],
}

impl Workspace {
    /// Zeroed buffers.
    pub const fn new() -> Self {
        Workspace {
            plan: [EMPTY_ENTRY; MAX_PLAN],
            per_op: [0; MAX_OPS],
            jobs: [JobTrace {
                op: 0,
                submitted: 0,
                completed: 0,
                wait_started: 0,
                retired: 0,
            }; MAX_JOBS],
            frame: [0; MAX_FRAME],
            scratch: [0; MAX_FRAME],
        }
    }
}

impl Default for Workspace {
    fn default() -> Self {
        Self::new()
    }
}

/// The memory a session runs in, all borrowed for its whole life: the model
/// bytes (flash), the arena, and the workspace.
#[derive(Debug)]
pub struct Parts<'s> {
    /// The `.tflite` bytes, 16-byte aligned (kernels read constants in place).
    pub model: &'s [u8],
    /// The model's constant image, checked and read in place by every
    /// kernel's prepare instead of building those constants in the arena's
    /// tail (`hilt_runtime::constants`); empty for none.
    pub constants: &'s [u8],
    /// The tensor arena.
    pub arena: &'s mut [u8],
    /// The session's buffers.
    pub workspace: &'s mut Workspace,
}
