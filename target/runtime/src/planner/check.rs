//! What a plan did wrong, said in full: which buffers, whose, when and where.
//!
//! The one check of a finished plan: [`check_plan`] names the buffers at
//! fault (owners, lifetimes, offsets and the bytes two live buffers share),
//! which is what a port author needs to find a bug;
//! [`verify_plan`](super::verify_plan) and
//! [`find_conflict`](super::find_conflict) answer the same question with
//! request positions. The checks need no heap, so the firmware runs them
//! too, on every plan it commits.

use core::fmt;

use crate::request::{BufferOwner, BufferRequest};

/// One buffer of a plan: its request, its position in the request list and
/// the offset the planner gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PlacedBuffer {
    /// Position in the request list.
    pub index: u32,
    /// What was asked for.
    pub request: BufferRequest,
    /// Offset from the head's start.
    pub offset: u32,
}

impl PlacedBuffer {
    /// The buffer at position `index` of a plan.
    pub fn of(requests: &[BufferRequest], offsets: &[u32], index: usize) -> Self {
        PlacedBuffer {
            index: index as u32,
            request: requests[index],
            offset: offsets[index],
        }
    }

    /// First byte reserved.
    pub const fn start(&self) -> u64 {
        self.offset as u64
    }

    /// One past the last byte reserved (offset plus padded size); 64 bits,
    /// so a wild offset cannot wrap.
    pub const fn end(&self) -> u64 {
        let padded = match self.request.padded_size() {
            Some(p) => p,
            None => self.request.size,
        };
        self.offset as u64 + padded as u64
    }
}

impl fmt::Display for PlacedBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.request;
        write!(f, "{} (", self.index)?;
        match r.owner() {
            BufferOwner::Tensor(t) => write!(f, "tensor {t}")?,
            BufferOwner::Scratch { op, index } => write!(f, "scratch {index} of op {op}")?,
        }
        write!(f, ", steps {}..{}", r.first_step, r.last_step)?;
        if r.hold_until > r.last_step {
            write!(f, " held to {}", r.hold_until)?;
        }
        write!(f, ", [{},{}))", self.start(), self.end())
    }
}

/// A rule a plan breaks, with the buffers at fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum PlanFailure {
    /// Fewer offsets than requests.
    MissingOffsets {
        /// Offsets given.
        given: u32,
        /// Requests.
        needed: u32,
    },
    /// A request whose alignment is not a power of two up to 1 MiB, or whose
    /// padded size overflows: the request list itself is invalid.
    InvalidRequest {
        /// Position in the request list.
        index: u32,
        /// Its alignment.
        align: u32,
    },
    /// An offset that is not a multiple of the buffer's alignment.
    Misaligned {
        /// The buffer.
        buffer: PlacedBuffer,
    },
    /// A buffer that ends past the head the planner returned: committing
    /// that head would leave the buffer's end outside the memory reserved.
    OutsideHead {
        /// The buffer.
        buffer: PlacedBuffer,
        /// The head returned.
        head: u32,
    },
    /// Two buffers live at a common step share bytes (the step and the
    /// bytes follow from the two: [`PlanFailure::overlap`]).
    Overlap {
        /// The buffer earlier in the request list.
        first: PlacedBuffer,
        /// The later one.
        second: PlacedBuffer,
    },
    /// A buffer with a fixed (offline) offset was moved.
    FixedMoved {
        /// The buffer, at the offset the planner gave it.
        buffer: PlacedBuffer,
        /// The offset it was given ahead of time.
        fixed: u32,
    },
}

impl PlanFailure {
    /// For an overlap: the first step both buffers are live at, and the
    /// bytes `[start, end)` they share.
    pub fn overlap(&self) -> Option<(u32, u64, u64)> {
        match self {
            PlanFailure::Overlap { first, second } => Some(shared(first, second)),
            _ => None,
        }
    }

    /// The rule broken, in one word ("Overlap", "Misaligned", ...).
    pub const fn kind(&self) -> &'static str {
        match self {
            PlanFailure::MissingOffsets { .. } => "MissingOffsets",
            PlanFailure::InvalidRequest { .. } => "InvalidRequest",
            PlanFailure::Misaligned { .. } => "Misaligned",
            PlanFailure::OutsideHead { .. } => "OutsideHead",
            PlanFailure::Overlap { .. } => "Overlap",
            PlanFailure::FixedMoved { .. } => "FixedMoved",
        }
    }
}

impl fmt::Display for PlanFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanFailure::MissingOffsets { given, needed } => {
                write!(f, "the plan has {given} offsets for {needed} buffers")
            }
            PlanFailure::InvalidRequest { index, align } => write!(
                f,
                "request {index}: alignment {align} is not a power of two up to 1 MiB, \
                 or its padded size overflows 32 bits"
            ),
            PlanFailure::Misaligned { buffer } => write!(
                f,
                "buffer {buffer} is not aligned to {} bytes",
                buffer.request.align
            ),
            PlanFailure::OutsideHead { buffer, head } => {
                write!(f, "buffer {buffer} ends past the head of {head} bytes")
            }
            PlanFailure::Overlap { first, second } => {
                let (step, start, end) = shared(first, second);
                write!(
                    f,
                    "buffers {first} and {second} are live together at step {step} \
                     but share bytes [{start},{end})"
                )
            }
            PlanFailure::FixedMoved { buffer, fixed } => {
                write!(f, "buffer {buffer} was fixed at offset {fixed} but moved")
            }
        }
    }
}

impl core::error::Error for PlanFailure {}

/// Checks a plan: one offset per request, every offset aligned, every
/// buffer (padded size) inside `head`, and no two buffers live at a common
/// step (holds count: [`BufferRequest::live_until`]) sharing a byte. The
/// first failure found is returned, in that order. O(n²) time, no memory.
pub fn check_plan(
    requests: &[BufferRequest],
    offsets: &[u32],
    head: u32,
) -> Result<(), PlanFailure> {
    if offsets.len() < requests.len() {
        return Err(PlanFailure::MissingOffsets {
            given: offsets.len() as u32,
            needed: requests.len() as u32,
        });
    }
    for index in 0..requests.len() {
        check_one(requests, offsets, index, head)?;
    }
    match first_overlap(requests, offsets) {
        Some(failure) => Err(failure),
        None => Ok(()),
    }
}

fn check_one(
    requests: &[BufferRequest],
    offsets: &[u32],
    index: usize,
    head: u32,
) -> Result<(), PlanFailure> {
    let buffer = PlacedBuffer::of(requests, offsets, index);
    let align = buffer.request.align;
    if buffer.request.padded_size().is_none() {
        return Err(PlanFailure::InvalidRequest {
            index: index as u32,
            align,
        });
    }
    if !buffer.offset.is_multiple_of(align) {
        return Err(PlanFailure::Misaligned { buffer });
    }
    if buffer.end() > u64::from(head) {
        return Err(PlanFailure::OutsideHead { buffer, head });
    }
    Ok(())
}

/// The first pair (in request order) of time-overlapping buffers that share
/// bytes. Zero-sized buffers reserve no bytes and so never conflict.
pub(super) fn first_overlap(requests: &[BufferRequest], offsets: &[u32]) -> Option<PlanFailure> {
    for i in 0..requests.len() {
        for j in i + 1..requests.len() {
            let (a, b) = (&requests[i], &requests[j]);
            if !a.overlaps_in_time(b) {
                continue;
            }
            let first = PlacedBuffer::of(requests, offsets, i);
            let second = PlacedBuffer::of(requests, offsets, j);
            let (_, start, end) = shared(&first, &second);
            if start < end {
                return Some(PlanFailure::Overlap { first, second });
            }
        }
    }
    None
}

/// The first common step of two buffers, and the bytes they share (empty
/// when `start >= end`).
fn shared(a: &PlacedBuffer, b: &PlacedBuffer) -> (u32, u64, u64) {
    let step = a.request.first_step.max(b.request.first_step);
    (step, a.start().max(b.start()), a.end().min(b.end()))
}

/// Checks that every `(request position, offset)` in `fixed` (offsets
/// given ahead of time, such as a model's offline plan) is where the
/// planner put that buffer. A position past the plan's end is reported as
/// missing offsets.
pub fn check_fixed(
    requests: &[BufferRequest],
    offsets: &[u32],
    fixed: &[(u32, u32)],
) -> Result<(), PlanFailure> {
    for &(index, offset) in fixed {
        let i = index as usize;
        if i >= requests.len() || i >= offsets.len() {
            return Err(PlanFailure::MissingOffsets {
                given: offsets.len().min(requests.len()) as u32,
                needed: index + 1,
            });
        }
        if offsets[i] != offset {
            return Err(PlanFailure::FixedMoved {
                buffer: PlacedBuffer::of(requests, offsets, i),
                fixed: offset,
            });
        }
    }
    Ok(())
}
