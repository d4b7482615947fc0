//! The planner chosen by name: one closed set, one match.
//!
//! A board build (`HILT_PLANNER`), a scenario (`planner = "…"`) and the
//! host CLI (`--planner`) all name one of the shipped planners. They used
//! to keep their own lists and their own `match`; now each parses a
//! [`PlannerKind`] and asks it for the planner, so a new planner is added
//! here once and every caller accepts it (or refuses an unknown name with
//! the same [`UnknownName`] error).
//!
//! ```
//! use hilt_runtime::planner::{MemoryPlanner, PlannerKind};
//! # use hilt_runtime::{model::Model, schema::{BuiltinOperator, TensorType}, writer::{ModelWriter, Options}};
//! # let mut w = ModelWriter::new();
//! # let x = w.input("x", TensorType::INT8, &[6]);
//! # let y = w.output("y", TensorType::INT8, &[6]);
//! # w.op(BuiltinOperator::RESHAPE, &[Some(x)], &[y], Options::None);
//! # let bytes = w.finish();
//! # let model = Model::from_bytes(&bytes).unwrap();
//! let kind: PlannerKind = "linear".parse().unwrap();
//! let planner = kind.planner(&model).unwrap();
//! assert_eq!(planner.name(), kind.name());
//! ```

use core::fmt;
use core::str::FromStr;

use super::{Greedy, Linear, MemoryPlanner, Offline, OfflinePlanError, Optimal, PlanError};
use crate::choice::UnknownName;
use crate::model::Model;
use crate::request::BufferRequest;

/// One of the shipped memory planners, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PlannerKind {
    /// [`Linear`]: no reuse ("preserve all tensors").
    Linear,
    /// [`Greedy`]: TFLM's greedy-by-size planner (the default everywhere,
    /// as in TFLM).
    #[default]
    Greedy,
    /// [`Offline`]: the model's `OfflineMemoryAllocation` metadata.
    Offline,
    /// [`Optimal`]: a bounded search for the smallest head, as a board
    /// runs it ([`Optimal::ON_TARGET`]).
    Optimal,
}

impl PlannerKind {
    /// Every planner, in the order their names are listed.
    pub const ALL: [PlannerKind; 4] = [
        PlannerKind::Linear,
        PlannerKind::Greedy,
        PlannerKind::Offline,
        PlannerKind::Optimal,
    ];

    /// Every accepted name, in [`ALL`](Self::ALL)'s order.
    pub const NAMES: &'static [&'static str] = &["linear", "greedy", "offline", "optimal"];

    /// The name a build, a scenario or the CLI uses, and the one the
    /// planner itself reports ([`MemoryPlanner::name`]).
    pub const fn name(self) -> &'static str {
        match self {
            PlannerKind::Linear => "linear",
            PlannerKind::Greedy => "greedy",
            PlannerKind::Offline => "offline",
            PlannerKind::Optimal => "optimal",
        }
    }

    /// The planner for `model`. Only [`PlannerKind::Offline`] can fail: it
    /// reads and checks the model's plan here, before any arena is touched.
    pub fn planner<'m>(self, model: &Model<'m>) -> Result<AnyPlanner<'m>, OfflinePlanError> {
        Ok(match self {
            PlannerKind::Linear => AnyPlanner::Linear(Linear),
            PlannerKind::Greedy => AnyPlanner::Greedy(Greedy),
            PlannerKind::Offline => AnyPlanner::Offline(Offline::from_model(model)?),
            PlannerKind::Optimal => AnyPlanner::Optimal(Optimal::ON_TARGET),
        })
    }
}

impl FromStr for PlannerKind {
    type Err = UnknownName;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        PlannerKind::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| UnknownName::new("planner", name, PlannerKind::NAMES))
    }
}

impl fmt::Display for PlannerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A shipped planner, held by value: what [`PlannerKind::planner`] returns,
/// so callers without a heap (the firmware) need no `Box` and no
/// per-planner `Option` to pick one at run time.
#[derive(Debug, Clone, Copy)]
pub enum AnyPlanner<'m> {
    /// See [`Linear`].
    Linear(Linear),
    /// See [`Greedy`].
    Greedy(Greedy),
    /// See [`Offline`].
    Offline(Offline<'m>),
    /// See [`Optimal`].
    Optimal(Optimal),
}

impl AnyPlanner<'_> {
    fn inner(&self) -> &dyn MemoryPlanner {
        match self {
            AnyPlanner::Linear(p) => p,
            AnyPlanner::Greedy(p) => p,
            AnyPlanner::Offline(p) => p,
            AnyPlanner::Optimal(p) => p,
        }
    }
}

impl MemoryPlanner for AnyPlanner<'_> {
    fn name(&self) -> &'static str {
        self.inner().name()
    }

    fn workspace_words(&self, count: usize) -> usize {
        self.inner().workspace_words(count)
    }

    fn seed(&self) -> Option<&dyn MemoryPlanner> {
        self.inner().seed()
    }

    fn plan(
        &self,
        requests: &[BufferRequest],
        workspace: &mut [u32],
        offsets: &mut [u32],
    ) -> Result<u32, PlanError> {
        self.inner().plan(requests, workspace, offsets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_the_planners() {
        for (kind, name) in PlannerKind::ALL.into_iter().zip(PlannerKind::NAMES) {
            assert_eq!(kind.name(), *name);
            assert_eq!(name.parse::<PlannerKind>(), Ok(kind));
        }
        assert_eq!(Linear.name(), PlannerKind::Linear.name());
        assert_eq!(Greedy.name(), PlannerKind::Greedy.name());
        assert_eq!(Optimal::default().name(), PlannerKind::Optimal.name());
    }

    #[test]
    fn an_unknown_name_is_named_with_the_accepted_ones() {
        let e = "Greedy".parse::<PlannerKind>().unwrap_err();
        assert_eq!(e.given(), "Greedy");
        assert_eq!(
            e.to_string(),
            "unknown planner \"Greedy\": use linear, greedy, offline or optimal"
        );
    }
}
