#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod board;
mod error;
pub mod offload;
pub mod pools;
pub mod scenario;
mod shortfall;
pub mod suggest;

pub use error::ConfigError;
/// The one CRC-32 of the project (the model hash the firmware reports and
/// the host checks): re-exported so a build script needs no second copy.
pub use hilt_proto::crc::crc32;
/// The guard-band mode a scenario asks for: the runtime's type.
pub use hilt_runtime::canary::CanaryMode;
/// The memory planner a scenario (or `hilt layout`) asks for: the
/// runtime's one planner choice type, shared by the CLI, the agent and the
/// firmware build script.
pub use hilt_runtime::planner::PlannerKind;
