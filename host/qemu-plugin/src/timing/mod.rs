//! The static cycle-cost model for Cortex-M Thumb/Thumb-2 code: the
//! observer decodes each translated instruction with [`decode`], asks
//! [`block_costs`] what a block costs on a [`Core`], and adds the dynamic
//! parts itself (taken conditional branches, flash wait states). The costs
//! come from the cores' published instruction timing tables; every rule in
//! `cores` names its source. `TIMING.md` says what the model leaves out.

pub mod block;
pub mod core;
pub mod cores;
pub mod decode;
pub mod insn;

pub use block::{Cost, block_costs, cost, pipelines_after};
pub use core::Core;
pub use cores::{BRANCH_REFILL_P, DIVIDE_ESTIMATE, M0PLUS_MULS, M3_LONG_MUL, M3_LONG_MUL_ACC};
pub use decode::decode;
pub use insn::{Class, Insn};
