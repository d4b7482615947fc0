//! Holds: with offload, a buffer an engine job reads or writes must stay
//! untouched until the CPU has waited that job, so the planner keeps it past
//! its last use by an op. A plan entry whose last step is later than its
//! tensor's natural last use is such a hold; the gate snapshots and
//! `hilt layout --accelerator vnpu` name it, with the job that causes it,
//! because a hold is where offload costs arena memory.
//!
//! ```text
//! tensor 7 conv1: steps 2..6, ..., held to step 6 (job of op 3)
//! ```

use std::fmt;

use hilt_runtime::model::Model;
use serde::Serialize;

/// A buffer kept past its last use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Hold {
    /// The last step it stays planned.
    pub to_step: u32,
    /// The offloaded op whose job holds it (None: no offloaded op of the
    /// buffer is known, e.g. the placement was not reported).
    pub job_of_op: Option<u32>,
}

impl fmt::Display for Hold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "held to step {}", self.to_step)?;
        if let Some(op) = self.job_of_op {
            write!(f, " (job of op {op})")?;
        }
        Ok(())
    }
}

/// Every tensor's natural lifetime end and the ops that read or write it,
/// from the model alone (no offload): what a hold is measured against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Liveness {
    /// Per tensor: the last step an op uses it, as the runtime's planner
    /// computes it without offload (None: not planned, e.g. a constant).
    pub last_step: Vec<Option<u32>>,
    /// Per tensor: the ops that read or write it, in execution order.
    pub users: Vec<Vec<u32>>,
}

impl Liveness {
    /// The users of every tensor of `model`; `last_step` is filled by the
    /// caller from a plan without offload.
    pub fn users_of(model: &Model<'_>) -> Vec<Vec<u32>> {
        let mut users = vec![Vec::new(); model.tensor_count() as usize];
        for op in model.operators() {
            for tensor in op.inputs().chain(op.outputs()).flatten() {
                if let Some(list) = users.get_mut(tensor as usize)
                    && list.last() != Some(&op.index)
                {
                    list.push(op.index);
                }
            }
        }
        users
    }

    /// The hold of a tensor planned until `last_step`, given which ops ran
    /// on the engine (`on_npu[op]`); None when it is not held.
    pub fn tensor_hold(&self, tensor: u32, last_step: u32, on_npu: &[bool]) -> Option<Hold> {
        let natural = self.last_step.get(tensor as usize).copied().flatten()?;
        let users = self
            .users
            .get(tensor as usize)
            .map_or(&[][..], Vec::as_slice);
        tensor_hold(natural, users, last_step, on_npu)
    }
}

/// The hold of a tensor whose natural last use is `natural`, used by
/// `users`, planned until `last_step`: the job is the latest offloaded op
/// that uses it (its wait is the one the hold reaches).
pub fn tensor_hold(natural: u32, users: &[u32], last_step: u32, on_npu: &[bool]) -> Option<Hold> {
    if last_step <= natural {
        return None;
    }
    let job_of_op = users
        .iter()
        .rev()
        .copied()
        .find(|&op| op <= last_step && on_npu.get(op as usize).copied().unwrap_or(false));
    Some(Hold {
        to_step: last_step,
        job_of_op,
    })
}

/// The hold of op `op`'s scratch buffer planned until `last_step`: scratch
/// lives only during its op, so any later step is that op's job's hold.
pub fn scratch_hold(op: u32, last_step: u32) -> Option<Hold> {
    (last_step > op).then_some(Hold {
        to_step: last_step,
        job_of_op: Some(op),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tensor_past_its_last_use_is_held_by_the_latest_offloaded_user() {
        let on_npu = [false, true, false, true, false];
        // Used by ops 1 and 3 (both offloaded), naturally dead after 3.
        let hold = tensor_hold(3, &[1, 3], 4, &on_npu).unwrap();
        assert_eq!(hold.to_string(), "held to step 4 (job of op 3)");
        assert_eq!(tensor_hold(3, &[1, 3], 3, &on_npu), None);
        // No offloaded user known: the hold is still shown.
        assert_eq!(
            tensor_hold(2, &[2], 4, &[]).unwrap().to_string(),
            "held to step 4"
        );
    }

    #[test]
    fn scratch_past_its_op_is_that_ops_job() {
        assert_eq!(
            scratch_hold(5, 7).unwrap().to_string(),
            "held to step 7 (job of op 5)"
        );
        assert_eq!(scratch_hold(5, 5), None);
    }
}
