//! TFLM's planned section as TFLM itself lays it out: the model's tensors
//! and the scratch buffers TFLM's reference kernels request in their
//! prepare, planned by its greedy planner (or around an offline plan's
//! fixed tensors).
//!
//! Why: `hilt layout --write-offline` fixes the tensors' offsets and TFLM
//! then places what it still plans, its kernels' scratch, in the gaps. hilt's
//! own kernels need less scratch than TFLM's (none for SVDF and LSTM), so a
//! plan of hilt's buffers alone can leave TFLM's scratch no room but above
//! it: `tflm_keyword_scrambled` went from TFLM's own 672 bytes to 800. With
//! TFLM's scratch known, the plan is made for TFLM's buffers, and TFLM's head
//! under it is computed before anything is written.
//!
//! The scratch each kernel asks for (TFLM's reference kernels, as the
//! tflite-micro package runs them):
//! - `SVDF`: int8, one int32 per filter and one per unit (times the batch);
//!   float, one float per filter;
//! - `UNIDIRECTIONAL_SEQUENCE_LSTM`: four buffers the size of the cell
//!   state (batch × cells × the cell state's element);
//! - `TRANSPOSE_CONV`: int8, an int32 per output element; int16, an int64.
//!
//! Every other builtin operator TFLM's reference kernels run requests none.
//! `host/tests/tflm_scratch.rs` holds this to TFLM's own planned head for
//! every model of both conformance sets.

use hilt_runtime::liveness::tensor_request_iter;
use hilt_runtime::model::{Model, OpCode, OperatorInfo};
use hilt_runtime::planner::{Greedy, MemoryPlanner, Offline, OfflinePlanError, PlanError};
use hilt_runtime::request::BufferRequest;
use hilt_runtime::schema::{BuiltinOperator, TensorType};
use hilt_runtime::writer::offline_plan::offline_plan_bytes;

/// Why TFLM's plan could not be computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TflmPlanError {
    /// Its greedy planner refused the buffers.
    #[error("TFLM's plan: {0}")]
    Plan(PlanError),
    /// The fixed offsets do not form an offline plan for the model.
    #[error("the offline plan: {0}")]
    Offline(OfflinePlanError),
}

/// One scratch buffer TFLM's kernel for an operator requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TflmScratch {
    /// The operator.
    pub op: u32,
    /// Its place among the operator's requests.
    pub index: u32,
    /// Bytes requested.
    pub bytes: u32,
}

/// The scratch TFLM's reference kernels request for `model`, operator by
/// operator, in request order.
pub fn tflm_scratch(model: &Model<'_>) -> Vec<TflmScratch> {
    let mut out = Vec::new();
    for op in model.operators() {
        for (index, bytes) in op_scratch(model, &op).into_iter().enumerate() {
            out.push(TflmScratch {
                op: op.index,
                index: index as u32,
                bytes,
            });
        }
    }
    out
}

/// The bytes of each scratch buffer TFLM's kernel for `op` requests.
fn op_scratch(model: &Model<'_>, op: &OperatorInfo<'_>) -> Vec<u32> {
    let OpCode::Builtin(code) = op.code else {
        return Vec::new();
    };
    let input = |i: usize| op.inputs().nth(i).flatten().and_then(|t| model.tensor(t));
    let output = op.outputs().next().flatten().and_then(|t| model.tensor(t));
    let elements = |t: &hilt_runtime::model::TensorInfo<'_>| {
        t.shape().map(|d| d.max(0) as u32).product::<u32>()
    };
    match code {
        BuiltinOperator::SVDF => {
            let (Some(x), Some(features)) = (input(0), input(1)) else {
                return Vec::new();
            };
            let batch = x.shape().next().unwrap_or(1).max(0) as u32;
            let filters = features.shape().next().unwrap_or(0).max(0) as u32;
            let rank = op
                .raw()
                .builtin_options_as_svdfoptions()
                .map_or(1, |o| o.rank().max(1) as u32);
            if x.dtype == TensorType::INT8 {
                vec![batch * filters * 4, batch * (filters / rank) * 4]
            } else {
                vec![batch * filters * 4]
            }
        }
        BuiltinOperator::UNIDIRECTIONAL_SEQUENCE_LSTM => {
            // Input 19 is the cell state (batch × cells).
            input(19).map_or_else(Vec::new, |cell| vec![cell.bytes; 4])
        }
        BuiltinOperator::TRANSPOSE_CONV => {
            // Input 2 is the data (0: output shape, 1: filter).
            let (Some(x), Some(y)) = (input(2), output) else {
                return Vec::new();
            };
            match x.dtype {
                TensorType::INT8 => vec![elements(&y) * 4],
                TensorType::INT16 => vec![elements(&y) * 8],
                _ => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}

/// The buffers TFLM plans for `model`: its tensors (in tensor order, as TFLM
/// adds them) and then its kernels' scratch.
pub fn tflm_requests(model: &Model<'_>) -> Vec<BufferRequest> {
    tensor_request_iter(model)
        .chain(
            tflm_scratch(model)
                .into_iter()
                .map(|s| BufferRequest::scratch(s.op, s.index, s.bytes)),
        )
        .collect()
}

/// TFLM's planned head for `requests` ([`tflm_requests`]): its greedy
/// planner, or, with `offsets` (one per tensor of the model, -1: planned at
/// run time), its planner around those fixed tensors.
pub fn tflm_head(
    model: &Model<'_>,
    requests: &[BufferRequest],
    offsets: Option<&[i32]>,
) -> Result<u32, TflmPlanError> {
    let mut placed = vec![0u32; requests.len()];
    let bytes;
    let offline;
    let planner: &dyn MemoryPlanner = match offsets {
        None => &Greedy,
        Some(offsets) => {
            bytes = offline_plan_bytes(model.subgraph_count(), offsets);
            offline =
                Offline::from_metadata(&bytes, model.total_tensor_count(), model.tensor_count())
                    .map_err(TflmPlanError::Offline)?;
            &offline
        }
    };
    let mut workspace = vec![0u32; planner.workspace_words(requests.len())];
    planner
        .plan(requests, &mut workspace, &mut placed)
        .map_err(TflmPlanError::Plan)
}
