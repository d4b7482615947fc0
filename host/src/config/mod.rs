//! The files that say what to run where: boards ([`board`]) and scenarios
//! ([`scenario`]). Both are parsed into raw types and validated in
//! `hilt-contract`, and both fail with the one [`ConfigError`], which names
//! the file and the field at fault.

pub mod board;
pub mod scenario;

pub use hilt_contract::ConfigError;
