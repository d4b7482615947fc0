//! The one error type of the board and scenario files: both are read,
//! parsed and validated the same way, so a caller handles one enum whatever
//! file it loaded.

use std::path::{Path, PathBuf};

/// What is wrong with a board or scenario file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file (or folder) could not be read.
    #[error("{path}: {source}")]
    Read {
        /// File.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// TOML syntax or a field of the wrong type/unknown field.
    #[error("{path}: {message}")]
    Parse {
        /// File.
        path: PathBuf,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A field with a value that cannot work.
    #[error("{path}: field `{field}`: {problem}")]
    Invalid {
        /// File.
        path: PathBuf,
        /// Field.
        field: &'static str,
        /// Why.
        problem: String,
    },
    /// A file a scenario points at (its model, an input) that cannot
    /// work with the rest: named by where it sits in the scenario
    /// (`model m.tflite`, `steps[0].inputs[1] (in.bin)`), since the field
    /// alone would not say which of several files is at fault.
    #[error("{path}: {part}: {problem}")]
    Content {
        /// The scenario file.
        path: PathBuf,
        /// The file at fault, by its place in the scenario.
        part: String,
        /// Why.
        problem: String,
    },
    /// A scenario's arena or model cannot fit a board it names: refused
    /// before the firmware is built.
    #[error("scenario {scenario} on board {board}: {shortfall} ({remedy})")]
    Budget {
        /// The scenario.
        scenario: String,
        /// The board.
        board: String,
        /// What does not fit, by how much.
        shortfall: crate::board::MemoryShortfall,
        /// What to change.
        remedy: &'static str,
    },
    /// No board of that name.
    #[error("unknown board {name:?}; defined boards: {known}")]
    Unknown {
        /// Name asked for.
        name: String,
        /// The defined ones.
        known: String,
    },
}

impl ConfigError {
    /// A field of `path` whose value cannot work.
    pub fn invalid(path: &Path, field: &'static str, problem: impl Into<String>) -> Self {
        ConfigError::Invalid {
            path: path.to_path_buf(),
            field,
            problem: problem.into(),
        }
    }
}

/// Reads `path` and parses it as TOML into `T`, the parser's message kept on
/// one line.
pub(crate) fn read_toml<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.into(),
        source,
    })?;
    toml::from_str(&text).map_err(|e| ConfigError::Parse {
        path: path.into(),
        message: e.to_string().lines().collect::<Vec<_>>().join(" "),
    })
}
