//! One model file, read and verified once: what a run, a layout, a
//! firmware build and a report all take from the model (its bytes kept
//! aligned as in flash, a [`Model`] view, its CRC-32, its names) comes
//! from one [`ModelFile`], opened where the path is first known and passed
//! on, so a file that changes mid-run cannot make two parts disagree.

use std::path::{Path, PathBuf};

use hilt_runtime::model::{Model, ModelError};

use crate::aligned::AlignedBytes;

/// A model file that could not be opened: each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ModelFileError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The bytes are not a model the runtime accepts.
    #[error("{path}: {source}")]
    NotAModel {
        /// The file.
        path: PathBuf,
        /// The runtime's verifier's finding.
        source: ModelError,
    },
}

/// A verified model file, read once.
pub struct ModelFile {
    path: PathBuf,
    bytes: AlignedBytes,
    crc32: u32,
    ops: Vec<String>,
    tensors: Vec<String>,
}

impl std::fmt::Debug for ModelFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelFile")
            .field("path", &self.path)
            .field("len", &self.len())
            .field("crc32", &format_args!("{:#010x}", self.crc32))
            .finish_non_exhaustive()
    }
}

impl ModelFile {
    /// Reads and verifies the model at `path`.
    pub fn open(path: &Path) -> Result<Self, ModelFileError> {
        let bytes = std::fs::read(path).map_err(|source| ModelFileError::Unreadable {
            path: path.into(),
            source,
        })?;
        Self::from_bytes(path, &bytes)
    }

    /// Verifies `bytes` as the model file `path` (already read).
    pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<Self, ModelFileError> {
        // Kernels view constant data in place, as in flash: keep it 16-aligned.
        let bytes = AlignedBytes::new(bytes);
        let model =
            Model::from_bytes(bytes.as_slice()).map_err(|source| ModelFileError::NotAModel {
                path: path.into(),
                source,
            })?;
        let ops = model.operators().map(|op| op.code.to_string()).collect();
        let tensors = model.tensors().map(|t| t.name.to_string()).collect();
        let crc32 = hilt_proto::crc::crc32(bytes.as_slice());
        Ok(ModelFile {
            path: path.into(),
            bytes,
            crc32,
            ops,
            tensors,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's bytes, 16-aligned.
    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    /// The bytes' CRC-32 (what the firmware reports of its model slot).
    pub fn crc32(&self) -> u32 {
        self.crc32
    }

    /// The model (verified when the file was opened).
    pub fn model(&self) -> Model<'_> {
        Model::from_bytes(self.bytes.as_slice()).expect("verified when opened")
    }

    /// Operator names by index (execution order): `CONV_2D`, …
    pub fn op_names(&self) -> &[String] {
        &self.ops
    }

    /// The name of operator `index`, `?` when there is none.
    pub fn op_name(&self, index: usize) -> &str {
        self.ops.get(index).map_or("?", String::as_str)
    }

    /// Tensor names by index.
    pub fn tensor_names(&self) -> &[String] {
        &self.tensors
    }

    /// The file's length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.as_slice().len()
    }

    /// Whether the file is empty (never, for a verified model).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_file() {
        let missing = ModelFile::open(Path::new("/nonexistent/m.tflite")).unwrap_err();
        assert!(
            missing
                .to_string()
                .starts_with("cannot read /nonexistent/m.tflite: "),
            "{missing}"
        );
        let junk = ModelFile::from_bytes(Path::new("junk.tflite"), b"not a model").unwrap_err();
        assert!(junk.to_string().starts_with("junk.tflite: "), "{junk}");
    }
}
