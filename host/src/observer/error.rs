//! Why the plugin could not observe a run.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why the plugin could not observe a run.
#[derive(Debug, thiserror::Error)]
pub enum ObserverError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The plugin did not build.
    #[error("the QEMU plugin (host/qemu-plugin) did not build:\n{0}")]
    Build(String),
    /// The firmware lacks what the plugin needs.
    #[error("{path}: {problem}")]
    Firmware {
        /// The ELF.
        path: PathBuf,
        /// What is missing.
        problem: String,
    },
    /// The plugin did not report an invoke the board finished.
    #[error("hilt's QEMU plugin reported no counts for invoke {0} within {1:?} ({2})")]
    NoCounts(u64, Duration, String),
}

impl ObserverError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        ObserverError::Io {
            path: path.into(),
            source,
        }
    }
}
