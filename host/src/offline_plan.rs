//! `hilt layout MODEL --write-offline OUT.tflite`: a host plan stored in the
//! model, so that TFLM itself (and hilt's `offline` planner) runs the model
//! in the arena that plan needs.
//!
//! Which tensors get a fixed offset: exactly the ones the activations-only
//! plan places, which are the ones TFLM puts in its planned section
//! (subgraph 0's tensors that have no constant data, are not variables and
//! are not empty). Everything else is written as -1:
//! - constant tensors stay in the model in both runtimes;
//! - variable tensors must stay -1, because TFLM keeps them in its
//!   persistent section only while they have no offset;
//! - kernel scratch buffers are not tensors and have no entry at all:
//!   TFLM's greedy planner places them, like any -1 tensor, in the gaps
//!   around the fixed buffers (hilt's `offline` planner does the same).
//!
//! So the plan is only written from the activations-only layout with the
//! settings TFLM sees: 16-byte alignment (TFLM's buffer alignment), no guard
//! bands (they lengthen buffers TFLM knows nothing of), no board and no
//! offload (whose scratch and holds TFLM would not reproduce). Other options
//! are refused with [`OfflineWriteError::Option`].
//!
//! After writing, the new model is planned again with the `offline`
//! planner: its offsets and head must equal the plan written, or nothing is
//! written ([`OfflineWriteError::PlanInvalid`]).

use std::path::{Path, PathBuf};

use hilt_runtime::canary::CanaryMode;

use hilt_runtime::planner::PlannerKind;
use hilt_runtime::writer::offline_plan::{RewriteError, write_offline_plan};

use crate::layout::{
    Coverage, LayoutError, LayoutOptions, LayoutReport, layout_bytes, layout_model,
};
use crate::model_file::{ModelFile, ModelFileError};

/// TFLM's buffer alignment (`MicroArenaBufferAlignment`): offsets and sizes
/// in its planned section are multiples of it.
pub const TFLM_ALIGN: u32 = 16;

/// Why an offline plan was not written.
#[derive(Debug, thiserror::Error)]
pub enum OfflineWriteError {
    /// An option that makes the plan differ from what TFLM would plan.
    #[error("--write-offline {0}")]
    Option(&'static str),
    /// The model file cannot be read or is not a model.
    #[error(transparent)]
    Model(#[from] ModelFileError),
    /// Planning the model failed.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// The plan could not be stored in the model.
    #[error("{path}: cannot write the offline plan: {source}")]
    Rewrite {
        /// The model file.
        path: PathBuf,
        /// Why.
        source: RewriteError,
    },
    /// The rewritten model does not plan back to the plan written.
    #[error("{path}: the written offline plan is invalid: {reason}")]
    PlanInvalid {
        /// The model file.
        path: PathBuf,
        /// What differs.
        reason: String,
    },
    /// The output could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// What was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfflineWritten {
    /// The plan stored (its head is the planned section TFLM needs for
    /// the fixed tensors).
    pub report: LayoutReport,
    /// Tensors given a fixed offset.
    pub fixed: u32,
    /// Tensors left to the run-time planner (-1).
    pub online: u32,
    /// Whether the model already had an `OfflineMemoryAllocation` entry
    /// (now naming the new plan).
    pub replaced: bool,
    /// Bytes of the new model.
    pub bytes: usize,
}

/// Refuses options under which the plan is not the one TFLM would see.
/// `board` is whether `--board` was given.
pub fn check_options(options: &LayoutOptions, board: bool) -> Result<(), OfflineWriteError> {
    if board {
        return Err(OfflineWriteError::Option(
            "cannot be combined with --board: a board's plan holds kernel scratch and op data \
             that TFLM plans itself; the plan is written from the activations-only layout",
        ));
    }
    if options.offload.is_some() || options.covers != Coverage::Activations {
        return Err(OfflineWriteError::Option(
            "cannot be combined with --accelerator/--offload: TFLM does not keep an \
             offloaded job's buffers",
        ));
    }
    if options.canary != CanaryMode::Off {
        return Err(OfflineWriteError::Option(
            "needs --canary off: guard bands lengthen the buffers, which TFLM does not",
        ));
    }
    if options.align != TFLM_ALIGN {
        return Err(OfflineWriteError::Option(
            "needs --align 16: TFLM aligns every planned buffer to 16 bytes",
        ));
    }
    Ok(())
}

/// One offset per tensor of subgraph 0: the planned ones from `report`,
/// -1 for the rest.
pub fn tensor_offsets(tensor_count: u32, report: &LayoutReport) -> Vec<i32> {
    let mut offsets = vec![-1; tensor_count as usize];
    for row in &report.buffers {
        if let Some(slot) = row.tensor.and_then(|t| offsets.get_mut(t as usize)) {
            *slot = row.offset as i32;
        }
    }
    offsets
}

/// Plans the model at `path` with `options`, stores the plan in it and
/// writes the result to `out`, after checking it plans back the same.
pub fn write_offline(
    path: &Path,
    out: &Path,
    options: &LayoutOptions,
) -> Result<OfflineWritten, OfflineWriteError> {
    check_options(options, false)?;
    let file = ModelFile::open(path)?;
    let report = layout_model(&file, options)?;
    let offsets = tensor_offsets(file.model().tensor_count(), &report);
    let rewrite = write_offline_plan(file.bytes(), &offsets).map_err(|source| {
        OfflineWriteError::Rewrite {
            path: path.into(),
            source,
        }
    })?;
    check_read_back(path, &rewrite.bytes, options, &report)?;
    std::fs::write(out, &rewrite.bytes).map_err(|source| OfflineWriteError::Write {
        path: out.into(),
        source,
    })?;
    let fixed = offsets.iter().filter(|&&o| o >= 0).count() as u32;
    Ok(OfflineWritten {
        report,
        fixed,
        online: offsets.len() as u32 - fixed,
        replaced: rewrite.replaced > 0,
        bytes: rewrite.bytes.len(),
    })
}

/// The rewritten model under the `offline` planner must give every buffer
/// the offset it was written with, and the same head.
fn check_read_back(
    path: &Path,
    bytes: &[u8],
    options: &LayoutOptions,
    written: &LayoutReport,
) -> Result<(), OfflineWriteError> {
    let invalid = |reason: String| OfflineWriteError::PlanInvalid {
        path: path.into(),
        reason,
    };
    let offline = LayoutOptions {
        planner: PlannerKind::Offline,
        ..options.clone()
    };
    let back = layout_bytes(bytes, &offline).map_err(|e| invalid(e.with_path(path).to_string()))?;
    for (want, got) in written.buffers.iter().zip(&back.buffers) {
        if (want.tensor, want.offset) != (got.tensor, got.offset) {
            return Err(invalid(format!(
                "buffer {} ({}) planned at {} reads back at {}",
                want.tensor.map_or(-1, i64::from),
                want.name,
                want.offset,
                got.offset
            )));
        }
    }
    if (back.buffers.len(), back.head) != (written.buffers.len(), written.head) {
        return Err(invalid(format!(
            "{} buffers in a {}-byte head read back as {} in {} bytes",
            written.buffers.len(),
            written.head,
            back.buffers.len(),
            back.head
        )));
    }
    Ok(())
}
