//! The static offload schedule, computed once at allocate time: which ops
//! the backend claims, and before which step each job is waited.
//!
//! A job for op `k` is waited before the first later op `j` that conflicts
//! with it: `j` reads or writes one of `k`'s outputs, writes one of `k`'s
//! inputs, or is itself a job (the engine runs one job at a time). Without
//! a conflict it is waited after the last op. The wait comes first in its
//! step, so the plan holds every buffer the job touches through the step
//! before (`j - 1`): nothing else is placed on it while the engine may
//! still read or write it, and the op that waits may reuse it.

use bytemuck::{Pod, Zeroable};

use super::{AccelError, Offload, OpKind, RegionRole};
use crate::allocation::ArenaPlan;
use crate::model::{Model, OpCode, OperatorInfo};
use crate::request::BufferOwner;

/// Per-op offload record in the arena's tail (only when offloading).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct JobRecord {
    /// 1 when the backend claimed the op.
    pub(crate) claimed: u32,
    /// The step before which the job is waited (`operator_count` = at the end).
    pub(crate) wait_before: u32,
    /// The descriptor (the op data its prepare stored), offset from the arena start.
    pub(crate) desc_offset: u32,
    /// Its length.
    pub(crate) desc_len: u32,
}

/// Whether the backend of `offload` claims `op`: the caller lists it and the
/// backend supports it for the types of all its activation tensors.
pub(crate) fn claims(offload: &Offload<'_>, model: &Model<'_>, op: &OperatorInfo<'_>) -> bool {
    if !offload.ops.contains(op.code) {
        return false;
    }
    let caps = offload.accelerator.capabilities();
    caps.ops.iter().any(|support| {
        support.op.matches(op.code)
            && op
                .inputs()
                .chain(op.outputs())
                .flatten()
                .filter_map(|t| model.tensor(t))
                .filter(|t| t.constant.is_none())
                .all(|t| support.types.contains(&t.dtype))
    })
}

/// The step before which the job of op `k` must be waited.
pub(crate) fn wait_before(model: &Model<'_>, k: u32, claimed: impl Fn(u32) -> bool) -> u32 {
    let n = model.operator_count();
    let Some(job) = model.operator(k) else {
        return n;
    };
    for j in k + 1..n {
        if claimed(j) {
            return j;
        }
        if model.operator(j).is_some_and(|op| conflicts(&job, &op)) {
            return j;
        }
    }
    n
}

/// Whether CPU op `op` may not run while `job`'s op is on the engine: it
/// reads or writes one of the job's outputs, or writes one of its inputs.
pub(crate) fn conflicts(job: &OperatorInfo<'_>, op: &OperatorInfo<'_>) -> bool {
    let touches_outputs = op
        .inputs()
        .chain(op.outputs())
        .flatten()
        .any(|t| job.outputs().flatten().any(|o| o == t));
    let writes_inputs = op
        .outputs()
        .flatten()
        .any(|t| job.inputs().flatten().any(|i| i == t));
    touches_outputs || writes_inputs
}

/// Multiply-accumulates of an op, for latency models: for ops with a
/// constant weight tensor (input 1), each output element costs one MAC per
/// weight of its output channel; other ops one per output element.
pub(crate) fn estimate_macs(model: &Model<'_>, op: &OperatorInfo<'_>) -> u64 {
    let outputs: u64 = op
        .outputs()
        .flatten()
        .filter_map(|t| model.tensor(t))
        .map(|t| t.shape().map(|d| d.max(1) as u64).product::<u64>())
        .sum();
    let weights = op
        .inputs()
        .nth(1)
        .flatten()
        .and_then(|t| model.tensor(t))
        .filter(|t| t.constant.is_some());
    let Some(weights) = weights else {
        return outputs;
    };
    let dims: [u64; 4] = {
        let mut d = [1u64; 4];
        for (slot, v) in d.iter_mut().zip(weights.shape()) {
            *slot = v.max(1) as u64;
        }
        d
    };
    let total: u64 = dims.iter().product();
    let channels = match op.code {
        // Depthwise filters are [1, h, w, channels].
        OpCode::Builtin(b) if OpKind::Builtin(b) == depthwise() => dims[3],
        _ => dims[0],
    };
    outputs * (total / channels.max(1))
}

fn depthwise() -> OpKind<'static> {
    OpKind::Builtin(crate::schema::BuiltinOperator::DEPTHWISE_CONV_2D)
}

/// Checks a plan against the schedule, recomputed from the model and the
/// backend (so it does not trust the request list it checks): every buffer
/// a claimed op touches is aligned to `buffer_align` (its absolute address,
/// the arena starting at `arena_base`), reserves whole lines, and (with `holds`) lives until the step
/// of the op's wait. The first fault names the op and the buffer.
pub(crate) fn check_plan(
    offload: &Offload<'_>,
    model: &Model<'_>,
    plan: &ArenaPlan<'_>,
    arena_base: usize,
    buffer_align: u32,
    holds: bool,
) -> Result<(), (u32, AccelError)> {
    let n = model.operator_count();
    let claimed = |j: u32| {
        model
            .operator(j)
            .is_some_and(|op| claims(offload, model, &op))
    };
    for op in model.operators().filter(|op| claimed(op.index)) {
        let k = op.index;
        let hold = wait_before(model, k, claimed)
            .saturating_sub(1)
            .min(n.saturating_sub(1));
        for (request, &offset) in plan.requests.iter().zip(plan.offsets) {
            let role = match request.owner() {
                BufferOwner::Tensor(t) if op.outputs().flatten().any(|o| o == t) => {
                    RegionRole::Output(t)
                }
                BufferOwner::Tensor(t) if op.inputs().flatten().any(|i| i == t) => {
                    RegionRole::Input(t)
                }
                BufferOwner::Scratch { op, index } if op == k => RegionRole::Scratch(index),
                _ => continue,
            };
            let start = arena_base as u64 + u64::from(plan.head_start) + u64::from(offset);
            let whole_lines = request
                .padded_size()
                .is_some_and(|p| p.is_multiple_of(buffer_align));
            if !start.is_multiple_of(u64::from(buffer_align))
                || request.align < buffer_align
                || !whole_lines
            {
                return Err((k, AccelError::NotWholeLines { role }));
            }
            if holds && request.live_until() < hold {
                return Err((k, AccelError::NotHeld { role }));
            }
        }
    }
    Ok(())
}
