//! What the planner is asked to place: one [`BufferRequest`] per activation
//! tensor and per kernel scratch buffer.
//!
//! A request is plain data (`#[repr(C)]`, `Pod`) so that the allocator can keep
//! the request list in the arena's temp section instead of on a heap.

use bytemuck::{Pod, Zeroable};

use crate::reach::Reach;

/// The default alignment of every planned buffer, as in TFLM (16 bytes: the
/// widest SIMD load and the usual DMA burst).
pub const DEFAULT_ALIGN: u32 = 16;

/// The largest alignment a request may ask for (1 MiB: MPU regions, NPU pages).
pub const MAX_ALIGN: u32 = 1 << 20;

/// Marks a scratch request in [`BufferRequest::tensor`].
const NO_TENSOR: u32 = u32::MAX;

/// Who a buffer belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BufferOwner {
    /// An activation tensor of subgraph 0, by index.
    Tensor(u32),
    /// Scratch memory a kernel asked for while preparing.
    Scratch {
        /// The operator (execution step) that requested it.
        op: u32,
        /// The kernel's n-th scratch request.
        index: u32,
    },
}

/// One buffer to place in the arena's head.
///
/// `size` is what the owner asked for; the planner reserves
/// [`padded_size`](Self::padded_size) bytes (rounded up to `align`) so that a
/// neighbour never shares an alignment unit (a cache line, a DMA burst).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BufferRequest {
    /// Bytes requested.
    pub size: u32,
    /// Required alignment of the offset: a power of two, at most [`MAX_ALIGN`].
    pub align: u32,
    /// First step (operator index) at which the buffer holds data.
    pub first_step: u32,
    /// Last step at which the data is read.
    pub last_step: u32,
    /// The buffer may not be reused before this step ends: an asynchronous
    /// engine still reading or writing it. Equal to `last_step` when unused.
    pub hold_until: u32,
    /// Tensor index, or `u32::MAX` for scratch.
    pub(crate) tensor: u32,
    /// For scratch: the requesting operator.
    pub(crate) op: u32,
    /// For scratch: the kernel's n-th request (kernels ask for a few).
    pub(crate) scratch_index: u16,
    /// Who besides the CPU must reach the buffer ([`Reach`] bits): an
    /// engine's job buffers may only go into pools that engine reaches.
    pub(crate) reach: u16,
}

impl BufferRequest {
    /// An activation tensor live over `[first_step, last_step]`.
    pub const fn tensor(index: u32, size: u32, first_step: u32, last_step: u32) -> Self {
        BufferRequest {
            size,
            align: DEFAULT_ALIGN,
            first_step,
            last_step,
            hold_until: last_step,
            tensor: index,
            op: u32::MAX,
            scratch_index: 0,
            reach: Reach::CPU.bits(),
        }
    }

    /// Scratch memory for operator `op`, live only during that step.
    pub const fn scratch(op: u32, index: u32, size: u32) -> Self {
        BufferRequest {
            size,
            align: DEFAULT_ALIGN,
            first_step: op,
            last_step: op,
            hold_until: op,
            tensor: NO_TENSOR,
            op,
            scratch_index: if index > u16::MAX as u32 {
                u16::MAX
            } else {
                index as u16
            },
            reach: Reach::CPU.bits(),
        }
    }

    /// The same request with another alignment.
    #[must_use]
    pub const fn with_align(mut self, align: u32) -> Self {
        self.align = align;
        self
    }

    /// The same request, kept alive until `step` (never shortened).
    #[must_use]
    pub const fn held_until(mut self, step: u32) -> Self {
        if step > self.hold_until {
            self.hold_until = step;
        }
        self
    }

    /// The same request, also reached by `reach` (never narrowed).
    #[must_use]
    pub const fn reached_by(mut self, reach: Reach) -> Self {
        self.reach |= reach.bits();
        self
    }

    /// Who must reach the buffer: a pool may hold it only if it reaches
    /// all of them.
    pub const fn reach(&self) -> Reach {
        Reach::from_bits(self.reach)
    }

    /// Who the buffer belongs to.
    pub const fn owner(&self) -> BufferOwner {
        if self.tensor == NO_TENSOR {
            BufferOwner::Scratch {
                op: self.op,
                index: self.scratch_index as u32,
            }
        } else {
            BufferOwner::Tensor(self.tensor)
        }
    }

    /// The tensor index, for tensor requests.
    pub const fn tensor_index(&self) -> Option<u32> {
        if self.tensor == NO_TENSOR {
            None
        } else {
            Some(self.tensor)
        }
    }

    /// The last step the bytes must stay untouched (lifetime plus any hold).
    pub const fn live_until(&self) -> u32 {
        if self.hold_until > self.last_step {
            self.hold_until
        } else {
            self.last_step
        }
    }

    /// Whether the two requests need their bytes at a common step.
    pub const fn overlaps_in_time(&self, other: &BufferRequest) -> bool {
        self.first_step <= other.live_until() && other.first_step <= self.live_until()
    }

    /// Bytes reserved: `size` rounded up to `align`. `None` if the alignment
    /// is invalid or the rounding overflows.
    pub const fn padded_size(&self) -> Option<u32> {
        if !self.align.is_power_of_two() || self.align > MAX_ALIGN {
            return None;
        }
        match self.size.checked_add(self.align - 1) {
            Some(v) => Some(v & !(self.align - 1)),
            None => None,
        }
    }
}

/// Rounds `value` up to a multiple of the power of two `align`.
pub(crate) const fn align_up(value: u64, align: u64) -> u64 {
    (value + align - 1) & !(align - 1)
}
