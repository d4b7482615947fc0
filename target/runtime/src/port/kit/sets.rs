//! The request sets the kit plans: TFLM's planner vectors, adversarial
//! corners, seeded random sets and a model's own requests.
//!
//! Every set is plain data a user can also build ([`RequestSet::new`]) from
//! their own product's requests.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::liveness;
use crate::model::{Model, ModelError};
use crate::request::{BufferRequest, DEFAULT_ALIGN, MAX_ALIGN};

/// Buffer requests to plan, with what the plan must keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestSet {
    /// Shown in failures and figures.
    pub name: String,
    /// The requests, in the order the planner gets them.
    pub requests: Vec<BufferRequest>,
    /// `(request position, offset)` pairs the plan must keep (an offline
    /// plan's fixed buffers).
    pub fixed: Vec<(u32, u32)>,
    /// Whether the head may not fit in 32 bits, so that
    /// `PlanError::SizeOverflow` is a right answer (it always is when the
    /// padded sizes add up past 32 bits: a planner need not reuse memory).
    pub may_overflow: bool,
}

impl RequestSet {
    /// A set with no fixed offsets whose head fits in 32 bits.
    pub fn new(name: impl Into<String>, requests: Vec<BufferRequest>) -> Self {
        RequestSet {
            name: name.into(),
            requests,
            fixed: Vec::new(),
            may_overflow: false,
        }
    }
}

/// The `AddBuffer(size, first_use, last_use)` calls of TFLM's
/// `greedy_memory_planner_test.cc`, as `(size, first, last)`.
pub mod tflm {
    /// `TestGreedyBasics`.
    pub const BASICS: &[(u32, u32, u32)] = &[(10, 0, 1), (20, 2, 3)];
    /// `TestGreedyMedium`.
    pub const MEDIUM: &[(u32, u32, u32)] =
        &[(10, 0, 1), (20, 1, 2), (30, 2, 3), (40, 3, 4), (50, 0, 1)];
    /// `TestOverlapCase`.
    pub const OVERLAP: &[(u32, u32, u32)] = &[(100, 0, 1), (50, 2, 3), (20, 1, 2)];
    /// `TestPersonDetectionModel`: the person detection model's tensors.
    pub const PERSON_DETECTION: &[(u32, u32, u32)] = &[
        (9216, 0, 29),
        (3, 28, 29),
        (256, 27, 28),
        (2304, 26, 27),
        (2304, 25, 26),
        (2304, 24, 25),
        (1152, 23, 24),
        (4608, 22, 23),
        (4608, 21, 22),
        (4608, 20, 21),
        (4608, 19, 20),
        (4608, 18, 19),
        (4608, 17, 18),
        (4608, 16, 17),
        (4608, 15, 16),
        (4608, 14, 15),
        (4608, 13, 14),
        (4608, 12, 13),
        (2304, 11, 12),
        (9216, 10, 11),
        (9216, 9, 10),
        (9216, 8, 9),
        (4608, 7, 8),
        (18432, 6, 7),
        (18432, 5, 6),
        (18432, 4, 5),
        (9216, 3, 4),
        (36864, 2, 3),
        (18432, 1, 2),
        (18432, 0, 1),
    ];
}

/// `(size, first, last)` calls as tensor requests with alignment 1 (TFLM's
/// planner tests use raw sizes).
pub fn from_adds(adds: &[(u32, u32, u32)]) -> Vec<BufferRequest> {
    adds.iter()
        .enumerate()
        .map(|(i, &(size, first, last))| {
            BufferRequest::tensor(i as u32, size, first, last).with_align(1)
        })
        .collect()
}

/// TFLM's planner vectors.
pub fn tflm_vectors() -> Vec<RequestSet> {
    [
        ("tflm basics", tflm::BASICS),
        ("tflm medium", tflm::MEDIUM),
        ("tflm overlap", tflm::OVERLAP),
        ("tflm person detection", tflm::PERSON_DETECTION),
    ]
    .into_iter()
    .map(|(name, adds)| RequestSet::new(name, from_adds(adds)))
    .collect()
}

/// Tensor `i` of a set, 16-byte aligned.
const fn t(i: u32, size: u32, first: u32, last: u32) -> BufferRequest {
    BufferRequest::tensor(i, size, first, last)
}

/// Corners where ports go wrong: zero sizes, 1 MiB alignment, everything
/// live at once, one-step and identical lifetimes, a chain whose
/// neighbours share exactly one step, holds, scratch, and sizes near
/// `u32::MAX` (one set of which cannot fit in 32 bits).
pub fn adversarial() -> Vec<RequestSet> {
    let huge = u32::MAX - 15;
    let mut sets = vec![
        RequestSet::new(
            "zero sizes",
            vec![
                t(0, 0, 0, 3),
                t(1, 48, 0, 3),
                t(2, 0, 1, 2),
                t(3, 32, 1, 2),
                t(4, 0, 2, 3),
            ],
        ),
        RequestSet::new(
            "max alignment 1 MiB",
            vec![
                t(0, 100, 0, 2).with_align(MAX_ALIGN),
                t(1, 16, 0, 2),
                t(2, 5, 1, 3).with_align(MAX_ALIGN),
                t(3, 1 << 20, 2, 3).with_align(MAX_ALIGN),
            ],
        ),
        RequestSet::new(
            "all overlapping",
            (0..12)
                .map(|i| t(i, 16 + 40 * i, 0, 5).with_align(1 << (i % 6)))
                .collect(),
        ),
        RequestSet::new(
            "single-step lifetimes",
            (0..16).map(|i| t(i, 64 + 16 * (i % 3), i, i)).collect(),
        ),
        RequestSet::new(
            "identical lifetimes",
            (0..8).map(|i| t(i, 100, 2, 4)).collect(),
        ),
        RequestSet::new(
            "chain sharing one step",
            (0..10)
                .map(|i| t(i, 256 - 16 * (i % 4), i, i + 1))
                .collect(),
        ),
        RequestSet::new(
            "holds",
            vec![
                t(0, 64, 0, 1).held_until(3),
                t(1, 64, 2, 3),
                t(2, 32, 1, 1).held_until(4),
                t(3, 128, 4, 5),
            ],
        ),
        RequestSet::new(
            "scratch",
            vec![
                t(0, 96, 0, 1),
                BufferRequest::scratch(0, 0, 200),
                BufferRequest::scratch(1, 0, 40),
                t(1, 64, 1, 2),
                BufferRequest::scratch(1, 1, 8),
            ],
        ),
        RequestSet::new("huge alone", vec![t(0, huge, 0, 0)]),
        RequestSet::new(
            "huge, disjoint in time",
            vec![t(0, huge, 0, 0), t(1, huge, 1, 1)],
        ),
    ];
    let mut overflow = RequestSet::new(
        "huge, live together",
        vec![t(0, huge, 0, 1), t(1, 64, 1, 1)],
    );
    overflow.may_overflow = true;
    sets.push(overflow);
    sets
}

/// xorshift64*: small, seeded and the same on every platform.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (`n > 0`).
    fn below(&mut self, n: u32) -> u32 {
        ((self.next() >> 32) % u64::from(n)) as u32
    }
}

/// `count` random requests from `seed` (reproducible): sizes up to 20,000
/// bytes (some 0), alignments mostly 16, some 1 to 128, rarely up to
/// 1 MiB; lifetimes over 24 steps, a fifth of them held, a third scratch.
pub fn random(seed: u64, count: u32) -> RequestSet {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let requests = (0..count)
        .map(|i| {
            let size = if rng.below(16) == 0 {
                0
            } else {
                rng.below(20_000)
            };
            let align = match rng.below(13) {
                0..=7 => DEFAULT_ALIGN,
                8..=11 => 1 << rng.below(8),
                _ => 1 << (8 + rng.below(13)),
            };
            let first = rng.below(24);
            let r = if rng.below(3) == 0 {
                BufferRequest::scratch(first, i, size)
            } else {
                BufferRequest::tensor(i, size, first, first + rng.below(8))
            };
            let r = r.with_align(align);
            if rng.below(5) == 0 {
                r.held_until(r.last_step + rng.below(6))
            } else {
                r
            }
        })
        .collect();
    RequestSet::new(format!("random seed {seed}"), requests)
}

/// The activation tensors' requests of a model (what the interpreter plans
/// before kernels add scratch), every tensor aligned to `align`.
pub fn model(name: &str, bytes: &[u8], align: u32) -> Result<RequestSet, ModelError> {
    let model = Model::from_bytes(bytes)?;
    let requests = liveness::tensor_request_iter(&model)
        .map(|r| r.with_align(align))
        .collect();
    Ok(RequestSet::new(name, requests))
}
