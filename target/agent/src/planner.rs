//! Which memory planner places the arena's buffers, and the place kept for
//! an accelerator.

use core::fmt;

use hilt_runtime::model::Model;
use hilt_runtime::planner::{Greedy, Linear, MemoryPlanner, Offline, PlanError};
use hilt_runtime::request::BufferRequest;

/// The planner the agent commits the arena with, chosen by the firmware.
/// `Offline` needs the model (its `OfflineMemoryAllocation` metadata), so
/// the choice is a value resolved once the model is read, not a planner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Planner<C = NoCustomPlanner> {
    /// Every buffer after the previous one: no reuse, the upper bound.
    Linear,
    /// TensorFlow Lite Micro's greedy planner, offset for offset.
    Greedy,
    /// The model's own offline plan (validated); a model without one is an
    /// error the agent reports in its Hello.
    Offline,
    /// Your own planner (an allocator port, a test planner).
    Custom(C),
}

impl Planner {
    /// The planner named `linear`, `greedy` or `offline` (the names the
    /// host and the build scripts use).
    pub fn from_name(name: &str) -> Result<Self, UnknownPlanner> {
        match name {
            "linear" => Ok(Planner::Linear),
            "greedy" => Ok(Planner::Greedy),
            "offline" => Ok(Planner::Offline),
            _ => Err(UnknownPlanner),
        }
    }
}

impl<C: MemoryPlanner> Planner<C> {
    /// Its name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Planner::Linear => "linear",
            Planner::Greedy => "greedy",
            Planner::Offline => "offline",
            Planner::Custom(c) => c.name(),
        }
    }

    /// Calls `f` with the planner to use for `model`; `None` when the
    /// model has no valid offline plan for `Offline`.
    pub(crate) fn with<R>(
        &self,
        model: &Model<'_>,
        f: impl FnOnce(&dyn MemoryPlanner) -> R,
    ) -> Option<R> {
        match self {
            Planner::Linear => Some(f(&Linear)),
            Planner::Greedy => Some(f(&Greedy)),
            Planner::Offline => Offline::from_model(model).ok().map(|o| f(&o)),
            Planner::Custom(c) => Some(f(c)),
        }
    }
}

/// A planner name that is not `linear`, `greedy` or `offline`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UnknownPlanner;

impl fmt::Display for UnknownPlanner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unknown planner: use linear, greedy or offline")
    }
}

impl core::error::Error for UnknownPlanner {}

/// The type of `Planner::Custom` when a firmware has no planner of its
/// own: it has no values, so that variant cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoCustomPlanner {}

impl MemoryPlanner for NoCustomPlanner {
    fn name(&self) -> &'static str {
        match *self {}
    }

    fn workspace_words(&self, _count: usize) -> usize {
        match *self {}
    }

    fn plan(
        &self,
        _requests: &[BufferRequest],
        _workspace: &mut [u32],
        _offsets: &mut [u32],
    ) -> Result<u32, PlanError> {
        match *self {}
    }
}

/// An accelerator that takes operators over from the CPU (an NPU, a DMA
/// engine). This is the place kept for it: the interpreter does not offer
/// operators to a backend yet, so the agent only holds one. A later issue
/// adds the rest of the contract (capabilities, submit / poll / wait,
/// cache maintenance; `DESIGN.md`, "Accelerators"), and with it the arena
/// holds that a backend's jobs need.
pub trait Accelerator {
    /// Its name, for logs and reports.
    fn name(&self) -> &'static str;
}

/// No accelerator: every operator runs on the CPU.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoAccelerator;

impl Accelerator for NoAccelerator {
    fn name(&self) -> &'static str {
        "none"
    }
}
