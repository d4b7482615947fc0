//! Which memory planner places the arena's buffers.
//!
//! The choice is a type, not only a value: a session is generic over its
//! [`PlannerSource`], so a firmware that names one planner at build time
//! (`hilt::PLANNER`, a [`Greedy`] or an [`OfflineFromModel`]) links that
//! planner alone. [`PlannerKind`] picks at run time and so links every
//! planner (the optimal search, the offline plan's reader and their sorts:
//! about 13 KB of flash on a Cortex-M4).

use hilt_runtime::model::Model;
use hilt_runtime::planner::{Greedy, Linear, MemoryPlanner, Offline, OfflinePlanError, Optimal};

/// One of the runtime's planners, by name: the runtime's own choice type
/// (the one the host's CLI and the firmware build script use too). As a
/// [`PlannerSource`] it links every planner; `Offline` needs the model (its
/// `OfflineMemoryAllocation` metadata), so a model without a valid plan is
/// an error the agent reports in its Hello.
pub use hilt_runtime::planner::PlannerKind;

/// Where a session's planner comes from: the planner itself, or how to
/// make one from the model. `Agent::planner` takes any of them.
pub trait PlannerSource {
    /// The planner's name, for the Hello and the logs.
    fn name(&self) -> &'static str;

    /// Calls `f` with the planner to use for `model`; an error when the
    /// model cannot be planned this way (no valid offline plan).
    fn with<R>(
        &self,
        model: &Model<'_>,
        f: impl FnOnce(&dyn MemoryPlanner) -> R,
    ) -> Result<R, OfflinePlanError>;
}

impl PlannerSource for PlannerKind {
    fn name(&self) -> &'static str {
        PlannerKind::name(*self)
    }

    fn with<R>(
        &self,
        model: &Model<'_>,
        f: impl FnOnce(&dyn MemoryPlanner) -> R,
    ) -> Result<R, OfflinePlanError> {
        Ok(f(&self.planner(model)?))
    }
}

/// The runtime's planners that need nothing from the model.
macro_rules! planner_itself {
    ($($planner:ty),*) => {$(
        impl PlannerSource for $planner {
            fn name(&self) -> &'static str {
                MemoryPlanner::name(self)
            }

            fn with<R>(
                &self,
                _model: &Model<'_>,
                f: impl FnOnce(&dyn MemoryPlanner) -> R,
            ) -> Result<R, OfflinePlanError> {
                Ok(f(self))
            }
        }
    )*};
}

planner_itself!(Linear, Greedy, Optimal);

/// The plan the model carries (its `OfflineMemoryAllocation` metadata),
/// read when the model is: the runtime's [`Offline`] planner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OfflineFromModel;

impl PlannerSource for OfflineFromModel {
    fn name(&self) -> &'static str {
        PlannerKind::Offline.name()
    }

    fn with<R>(
        &self,
        model: &Model<'_>,
        f: impl FnOnce(&dyn MemoryPlanner) -> R,
    ) -> Result<R, OfflinePlanError> {
        Ok(f(&Offline::from_model(model)?))
    }
}

/// A planner of the firmware's own (an allocator port, a test planner),
/// as `Agent::custom_planner` holds it.
#[derive(Debug, Clone, Copy)]
pub struct Custom<P>(pub P);

impl<P: MemoryPlanner> PlannerSource for Custom<P> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn with<R>(
        &self,
        _model: &Model<'_>,
        f: impl FnOnce(&dyn MemoryPlanner) -> R,
    ) -> Result<R, OfflinePlanError> {
        Ok(f(&self.0))
    }
}
