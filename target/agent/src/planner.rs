//! Which memory planner places the arena's buffers.

use hilt_runtime::model::Model;
use hilt_runtime::planner::{Greedy, Linear, MemoryPlanner, Offline, Optimal, PlanError};
use hilt_runtime::request::BufferRequest;

/// One of the runtime's planners, by name: the runtime's own choice type
/// (the one the host's CLI and the firmware build script use too).
/// `Offline` needs the model (its `OfflineMemoryAllocation` metadata), so
/// the choice is a value the agent resolves once the model is read; a model
/// without a valid plan is an error the agent reports in its Hello. A
/// planner of your own goes to `Agent::custom_planner` instead.
pub use hilt_runtime::planner::PlannerKind;

/// The planner a session uses: one of the runtime's, or the firmware's own.
#[derive(Debug, Clone, Copy)]
pub(crate) enum PlannerChoice<C> {
    Builtin(PlannerKind),
    Custom(C),
}

impl<C: MemoryPlanner> PlannerChoice<C> {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            PlannerChoice::Builtin(p) => p.name(),
            PlannerChoice::Custom(c) => c.name(),
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
            PlannerChoice::Builtin(PlannerKind::Linear) => Some(f(&Linear)),
            PlannerChoice::Builtin(PlannerKind::Greedy) => Some(f(&Greedy)),
            PlannerChoice::Builtin(PlannerKind::Optimal) => Some(f(&Optimal::default())),
            PlannerChoice::Builtin(PlannerKind::Offline) => {
                Offline::from_model(model).ok().map(|o| f(&o))
            }
            PlannerChoice::Custom(c) => Some(f(c)),
        }
    }
}

/// The custom planner type of a session that uses one of the runtime's
/// planners: it has no values, so it is never asked to plan.
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
