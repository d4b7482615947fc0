//! Two memory-planner ports to copy, and to run the conformance kit on.
//!
//! - [`FirstFit`]: buffers in request order, each at the lowest offset (on
//!   its alignment) that collides with no already placed buffer it is live
//!   with. Simple, correct, no workspace: a template for your own port.
//! - [`BrokenFirstFit`]: the same with an off-by-one that real ports have
//!   made: it takes the lifetimes `[a, b]` and `[b, c]` as disjoint, so an
//!   op's input and output (both live at step `b`) may share bytes. Its
//!   plans look fine on most sets; the kit names the pair that proves them
//!   wrong (see `tests/kit.rs`).
//!
//! The custom firmware (`target/examples/custom-firmware`) plans with one
//! of them under its features `port-first-fit` / `port-broken`.
//!
//! ```
//! use hilt_allocator_ports::FirstFit;
//! use hilt_runtime::planner::MemoryPlanner;
//! use hilt_runtime::request::BufferRequest;
//!
//! let requests = [BufferRequest::tensor(0, 64, 0, 1), BufferRequest::tensor(1, 32, 1, 2)];
//! let mut offsets = [0u32; 2];
//! let head = FirstFit.plan(&requests, &mut [], &mut offsets).unwrap();
//! assert_eq!((offsets, head), ([0, 64], 96));
//! ```

#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]

mod first_fit;

pub use first_fit::{BrokenFirstFit, FirstFit};
