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
//! TFLM's kernels request scratch hilt's do not (SVDF, LSTM,
//! TRANSPOSE_CONV: [`crate::tflm_scratch`]), so the plan is made for TFLM's
//! buffers, tensors and that scratch together, and only the tensors'
//! offsets are written. Before writing, TFLM's placement of its scratch
//! around them is computed: a plan under which TFLM would need more than
//! its own greedy plan is not written ([`OfflineWriteError::NotBetter`]).
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

use hilt_runtime::planner::{MemoryPlanner, OfflinePlanError, PlannerKind};
use hilt_runtime::writer::offline_plan::{RewriteError, write_offline_plan};

use crate::layout::{Coverage, LayoutError, LayoutOptions, LayoutReport, layout_bytes};
use crate::model_file::{ModelFile, ModelFileError};
use crate::tflm_scratch::{TflmPlanError, tflm_head, tflm_requests};

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
    /// The planner cannot plan TFLM's buffers.
    #[error("{path}: cannot plan TFLM's buffers: {source}")]
    Plan {
        /// The model file.
        path: PathBuf,
        /// Why.
        source: TflmPlanError,
    },
    /// The planner could not be set up for the model.
    #[error("{path}: {source}")]
    OfflineInput {
        /// The model file.
        path: PathBuf,
        /// Why.
        source: OfflinePlanError,
    },
    /// Under the plan TFLM would need more than under its own greedy plan
    /// (its kernels' scratch would not fit in the gaps): nothing written.
    #[error(
        "{path}: not written: with this plan TFLM would need a {with}-byte head (its kernels' \
         scratch placed around the fixed tensors), its own plan needs {own}"
    )]
    NotBetter {
        /// The model file.
        path: PathBuf,
        /// TFLM's head under the plan.
        with: u32,
        /// TFLM's head under its own plan.
        own: u32,
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
    /// TFLM's planned head under the plan, its kernels' scratch included.
    pub tflm_head: u32,
    /// TFLM's planned head under its own greedy plan.
    pub tflm_own_head: u32,
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
    if options.planner == PlannerKind::Offline {
        return Err(OfflineWriteError::Option(
            "needs a planner that plans (--planner optimal, greedy or linear): the offline \
             planner only reads the model's own plan",
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

/// Plans TFLM's buffers of the model in `file` (its tensors and its kernels'
/// scratch) with `kind`: one offset per tensor of subgraph 0 (-1 for those
/// not planned), TFLM's head under them and under its own greedy plan.
fn plan_for_tflm(
    file: &ModelFile,
    kind: PlannerKind,
) -> Result<(Vec<i32>, u32, u32), OfflineWriteError> {
    let model = &file.model();
    let plan_error = |source| OfflineWriteError::Plan {
        path: file.path().into(),
        source,
    };
    let requests = tflm_requests(model);
    let planner = kind
        .planner(model)
        .map_err(|source| OfflineWriteError::OfflineInput {
            path: file.path().into(),
            source,
        })?;
    let mut workspace = vec![0u32; planner.workspace_words(requests.len())];
    let mut placed = vec![0u32; requests.len()];
    planner
        .plan(&requests, &mut workspace, &mut placed)
        .map_err(|e| plan_error(TflmPlanError::Plan(e)))?;
    let mut offsets = vec![-1; model.tensor_count() as usize];
    for (request, &offset) in requests.iter().zip(&placed) {
        if let Some(slot) = request
            .tensor_index()
            .and_then(|t| offsets.get_mut(t as usize))
        {
            *slot = offset as i32;
        }
    }
    let with = tflm_head(model, &requests, Some(&offsets)).map_err(plan_error)?;
    let own = tflm_head(model, &requests, None).map_err(plan_error)?;
    Ok((offsets, with, own))
}

/// Plans the model at `path` with `options` for TFLM (its tensors and its
/// kernels' scratch), stores the tensors' offsets in it and writes the
/// result to `out`, after checking that TFLM would need no more than under
/// its own plan and that the model plans back to the offsets written.
pub fn write_offline(
    path: &Path,
    out: &Path,
    options: &LayoutOptions,
) -> Result<OfflineWritten, OfflineWriteError> {
    check_options(options, false)?;
    let file = ModelFile::open(path)?;
    let (offsets, with, own) = plan_for_tflm(&file, options.planner)?;
    if with > own {
        return Err(OfflineWriteError::NotBetter {
            path: path.into(),
            with,
            own,
        });
    }
    let rewrite = write_offline_plan(file.bytes(), &offsets).map_err(|source| {
        OfflineWriteError::Rewrite {
            path: path.into(),
            source,
        }
    })?;
    let report = check_read_back(path, &rewrite.bytes, options, &offsets)?;
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
        tflm_head: with,
        tflm_own_head: own,
    })
}

/// The rewritten model under the `offline` planner must give every
/// tensor the offset it was written with: its layout (what `hilt layout`
/// then shows) is returned.
fn check_read_back(
    path: &Path,
    bytes: &[u8],
    options: &LayoutOptions,
    written: &[i32],
) -> Result<LayoutReport, OfflineWriteError> {
    let invalid = |reason: String| OfflineWriteError::PlanInvalid {
        path: path.into(),
        reason,
    };
    let offline = LayoutOptions {
        planner: PlannerKind::Offline,
        ..options.clone()
    };
    let back = layout_bytes(bytes, &offline).map_err(|e| invalid(e.with_path(path).to_string()))?;
    let read = tensor_offsets(written.len() as u32, &back);
    if let Some(t) = (0..written.len()).find(|&t| read[t] != written[t]) {
        return Err(invalid(format!(
            "tensor {t} written at {} reads back at {}",
            written[t], read[t]
        )));
    }
    Ok(back)
}
