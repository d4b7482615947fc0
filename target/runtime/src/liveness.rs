//! When each activation tensor holds data, and the request list that follows.
//!
//! Steps are operator indices in subgraph 0 (its execution order). The rules
//! are TFLM's, on a timeline that starts at operator 0:
//! - a model input lives from step 0, a model output until the last step;
//! - any other tensor lives from the step that first writes it (or reads it,
//!   if nothing writes it) to the last step that reads or writes it;
//! - constant tensors stay in the model bytes and variable tensors (SVDF/LSTM
//!   state) live in the persistent tail: neither is planned;
//! - a tensor no operator touches, and a zero-byte tensor, needs no memory.

use crate::model::Model;
use crate::request::BufferRequest;

/// The steps over which a tensor holds data, both ends inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Lifetime {
    /// First step.
    pub first_step: u32,
    /// Last step.
    pub last_step: u32,
}

impl Lifetime {
    fn widen(slot: &mut Option<Lifetime>, step: u32) {
        *slot = Some(match *slot {
            None => Lifetime {
                first_step: step,
                last_step: step,
            },
            Some(l) => Lifetime {
                first_step: l.first_step.min(step),
                last_step: l.last_step.max(step),
            },
        });
    }
}

/// Whether tensor `index` of `model` gets a buffer in the planned head.
pub fn is_planned(model: &Model<'_>, index: u32) -> bool {
    model
        .tensor(index)
        .is_some_and(|t| t.constant.is_none() && !t.is_variable && t.bytes > 0)
}

/// The lifetime of tensor `index`, or `None` if it is not planned (constant,
/// variable, zero bytes, or touched by no operator).
///
/// Costs one pass over the operators and needs no memory, so it is usable
/// before any arena exists.
pub fn tensor_lifetime(model: &Model<'_>, index: u32) -> Option<Lifetime> {
    if !is_planned(model, index) {
        return None;
    }
    let mut life: Option<Lifetime> = None;
    if model.inputs().any(|i| i == index) {
        Lifetime::widen(&mut life, 0);
    }
    for op in model.operators() {
        if op
            .inputs()
            .chain(op.outputs())
            .flatten()
            .any(|t| t == index)
        {
            Lifetime::widen(&mut life, op.index);
        }
    }
    if model.outputs().any(|o| o == index) {
        Lifetime::widen(&mut life, model.operator_count().saturating_sub(1));
    }
    life
}

/// The first planned tensor (by index) that an operator reads before any
/// operator writes it and that is not a model input, with that operator:
/// its bytes would be whatever the arena last held. TFLM runs such a model
/// and reads stale memory; hilt refuses it at allocate. `None` for a model
/// without one.
pub fn first_read_before_write(model: &Model<'_>) -> Option<(u32, u32)> {
    for tensor in model.tensors() {
        let index = tensor.index;
        if !is_planned(model, index) || model.inputs().any(|i| i == index) {
            continue;
        }
        let reads = |op: &crate::model::OperatorInfo<'_>| op.inputs().flatten().any(|t| t == index);
        let writes =
            |op: &crate::model::OperatorInfo<'_>| op.outputs().flatten().any(|t| t == index);
        let Some(first_read) = model.operators().find(|op| reads(op)).map(|op| op.index) else {
            continue;
        };
        let first_write = model.operators().find(|op| writes(op)).map(|op| op.index);
        if first_write.is_none_or(|w| w > first_read) {
            return Some((index, first_read));
        }
    }
    None
}

/// The tensor requests of `model` (default alignment), in tensor index
/// order: the order TFLM adds them to its planner. Under a lean schedule,
/// `crate::schedule::scheduled_request_iter`.
pub fn tensor_request_iter<'m>(model: &'m Model<'_>) -> impl Iterator<Item = BufferRequest> + 'm {
    model.tensors().filter_map(move |tensor| {
        let l = tensor_lifetime(model, tensor.index)?;
        Some(BufferRequest::tensor(
            tensor.index,
            tensor.bytes,
            l.first_step,
            l.last_step,
        ))
    })
}
