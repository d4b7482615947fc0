//! What planning RESHAPE, SQUEEZE and EXPAND_DIMS in place would save.
//!
//! Those three ops change only a tensor's shape: their output holds the
//! input's bytes unchanged, so output and input could share one buffer for
//! the union of their lifetimes (TFLM's kernels skip their copy when the two
//! pointers are equal, but its planner never makes them equal). hilt's
//! kernels copy. This module measures, on a real model, the head the greedy
//! planner gives with and without the sharing and the bytes the copies move
//! per invoke, so the choice is made on figures.

use hilt_runtime::model::{Model, OpCode};
use hilt_runtime::planner::{Greedy, MemoryPlanner, PlanError};
use hilt_runtime::request::BufferRequest;
use hilt_runtime::schema::BuiltinOperator;

/// The two plans of one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharingFigures {
    /// Greedy head as hilt plans today (every tensor its own buffer).
    pub head: u32,
    /// Greedy head with each shape-only op's output in its input's buffer.
    pub shared_head: u32,
    /// Shape-only ops whose output could share (input and output planned).
    pub shared_ops: u32,
    /// Bytes those ops copy per invoke today.
    pub copied_bytes: u64,
}

/// Whether `code` only reshapes (its output is its input's bytes).
fn shape_only(code: OpCode<'_>) -> bool {
    matches!(
        code,
        OpCode::Builtin(
            BuiltinOperator::RESHAPE | BuiltinOperator::SQUEEZE | BuiltinOperator::EXPAND_DIMS
        )
    )
}

/// The figures for `model`, planned at `align` (TFLM's is 16).
pub fn measure(model: &Model<'_>, align: u32) -> Result<SharingFigures, PlanError> {
    let schedule = Default::default();
    let mut requests = vec![
        BufferRequest::scratch(0, 0, 0);
        hilt_runtime::schedule::tensor_request_count(model, schedule)
    ];
    hilt_runtime::schedule::tensor_requests(model, schedule, align, &mut requests);
    let head = greedy_head(&requests)?;
    // Each request's group: a shape-only op's output joins its input's.
    let position = |tensor: u32| {
        requests
            .iter()
            .position(|r| r.tensor_index() == Some(tensor))
    };
    let mut group: Vec<usize> = (0..requests.len()).collect();
    let root = |group: &[usize], mut i: usize| {
        while group[i] != i {
            i = group[i];
        }
        i
    };
    let (mut shared_ops, mut copied_bytes) = (0, 0u64);
    for op in model.operators().filter(|op| shape_only(op.code)) {
        let (Some(Some(input)), Some(Some(output))) = (op.inputs().next(), op.outputs().next())
        else {
            continue;
        };
        if let (Some(i), Some(o)) = (position(input), position(output)) {
            let (ri, ro) = (root(&group, i), root(&group, o));
            group[ro] = ri;
            shared_ops += 1;
            copied_bytes += u64::from(requests[o].size);
        }
    }
    // One request per group: the largest size over the union of lifetimes.
    let mut merged: Vec<BufferRequest> = Vec::new();
    let mut slot_of = vec![usize::MAX; requests.len()];
    for (i, &request) in requests.iter().enumerate() {
        let r = root(&group, i);
        if slot_of[r] == usize::MAX {
            slot_of[r] = merged.len();
            merged.push(request);
        } else {
            let m = &mut merged[slot_of[r]];
            m.size = m.size.max(request.size);
            m.first_step = m.first_step.min(request.first_step);
            m.last_step = m.last_step.max(request.last_step);
            m.hold_until = m.hold_until.max(request.hold_until);
        }
    }
    Ok(SharingFigures {
        head,
        shared_head: greedy_head(&merged)?,
        shared_ops,
        copied_bytes,
    })
}

fn greedy_head(requests: &[BufferRequest]) -> Result<u32, PlanError> {
    let mut workspace = vec![0u32; Greedy.workspace_words(requests.len())];
    let mut offsets = vec![0u32; requests.len()];
    Greedy.plan(requests, &mut workspace, &mut offsets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hilt_runtime::schema::TensorType;
    use hilt_runtime::writer::{ModelWriter, Options, i32_bytes};

    /// x [64] → RESHAPE → y [8,8]; ADD(x, y) → z [8,8]: x and y are both
    /// live at the ADD.
    fn reshape_then_add() -> Vec<u8> {
        let mut w = ModelWriter::new();
        let x = w.input("x", TensorType::FLOAT32, &[64]);
        let s = w.constant("s", TensorType::INT32, &[2], &i32_bytes(&[8, 8]));
        let y = w.tensor("y", TensorType::FLOAT32, &[8, 8]);
        let z = w.output("z", TensorType::FLOAT32, &[8, 8]);
        w.op(
            BuiltinOperator::RESHAPE,
            &[Some(x), Some(s)],
            &[y],
            Options::None,
        );
        w.op(
            BuiltinOperator::ADD,
            &[Some(x), Some(y)],
            &[z],
            Options::Add {
                activation: hilt_runtime::schema::ActivationFunctionType::NONE,
            },
        );
        w.finish()
    }

    #[test]
    fn sharing_a_reshape_folds_its_buffer_into_its_input() {
        let bytes = reshape_then_add();
        let model = Model::from_bytes(&bytes).unwrap();
        let f = measure(&model, 16).unwrap();
        // Today x, y and z (256 B each) are all live at the ADD: 768.
        // Shared, x and y are one buffer: 512, and 256 bytes less copying.
        assert_eq!(f.head, 768);
        assert_eq!(f.shared_head, 512);
        assert_eq!((f.shared_ops, f.copied_bytes), (1, 256));
    }
}
