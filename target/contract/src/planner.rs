//! The memory planner a scenario (or `hilt layout`) asks for, by the name
//! the files and the firmware build use.

use std::fmt;

/// Which memory planner lays out the arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PlannerKind {
    /// No reuse ("preserve all tensors").
    Linear,
    /// TFLM's greedy-by-size planner.
    Greedy,
    /// The model's `OfflineMemoryAllocation` metadata.
    Offline,
}

impl PlannerKind {
    /// Every planner, in the order help texts list them.
    pub const ALL: [PlannerKind; 3] = [
        PlannerKind::Linear,
        PlannerKind::Greedy,
        PlannerKind::Offline,
    ];

    /// One line for people (help texts).
    pub fn summary(self) -> &'static str {
        match self {
            PlannerKind::Linear => "No reuse (\"preserve all tensors\")",
            PlannerKind::Greedy => "TFLM's greedy-by-size planner",
            PlannerKind::Offline => "The model's `OfflineMemoryAllocation` metadata",
        }
    }

    /// The name files, flags and `HILT_PLANNER` use.
    pub fn name(self) -> &'static str {
        match self {
            PlannerKind::Linear => "linear",
            PlannerKind::Greedy => "greedy",
            PlannerKind::Offline => "offline",
        }
    }
}

impl fmt::Display for PlannerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for PlannerKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        PlannerKind::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("{s:?}: use linear, greedy or offline"))
    }
}
