#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod board;
mod error;
mod planner;
pub mod scenario;

pub use error::ConfigError;
/// The one CRC-32 of the project (the model hash the firmware reports and
/// the host checks): re-exported so a build script needs no second copy.
pub use hilt_proto::crc::crc32;
pub use planner::PlannerKind;
