//! TRANSPOSE: the input's axes reordered by a constant permutation (up to
//! six dimensions) — int8, int16, float32 and int32, bit-exact with TFLM
//! (a copy: output index `(i_0, …, i_n)` reads input index with axis
//! `perm[k]` at `i_k`).

use bytemuck::{Pod, Zeroable};

use super::tensor::{Dims, MAX_RANK, quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The TRANSPOSE kernel.
pub const REGISTRATION: Registration = Registration {
    name: "TRANSPOSE",
    prepare,
    invoke,
};

/// The walk: output extents and, per output axis, the input stride.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct TransposePlan {
    pub(crate) element: u32,
    pub(crate) rank: u32,
    pub(crate) extent: [u32; MAX_RANK],
    pub(crate) stride: [u32; MAX_RANK],
}

impl TransposePlan {
    /// The plan for `input` permuted by `perm`, or `None` when `perm` is not
    /// a permutation of the axes.
    pub(crate) fn new(input: &[i32], perm: &[i32], element: u32) -> Option<Self> {
        let rank = input.len();
        if perm.len() != rank || rank > MAX_RANK {
            return None;
        }
        let mut pitch = [0u32; MAX_RANK];
        let mut acc = 1u64;
        for d in (0..rank).rev() {
            pitch[d] = u32::try_from(acc).ok()?;
            acc *= u64::try_from(input[d]).ok()?;
        }
        let mut seen = [false; MAX_RANK];
        let mut plan = TransposePlan {
            element,
            rank: rank as u32,
            ..TransposePlan::default()
        };
        for (k, &p) in perm.iter().enumerate() {
            let p = usize::try_from(p).ok().filter(|&p| p < rank && !seen[p])?;
            seen[p] = true;
            plan.extent[k] = input[p] as u32;
            plan.stride[k] = pitch[p];
        }
        Some(plan)
    }

    /// Writes the transposed `input` into `output`.
    pub(crate) fn run(&self, input: &[u8], output: &mut [u8]) -> Result<(), KernelError> {
        let e = self.element as usize;
        let rank = self.rank as usize;
        if input.len() != output.len() || output.is_empty() {
            return if input.len() == output.len() {
                Ok(())
            } else {
                Err(KernelError::Internal)
            };
        }
        let mut index = [0u32; MAX_RANK];
        let mut from = 0usize;
        for chunk in output.chunks_exact_mut(e) {
            let at = from * e;
            chunk.copy_from_slice(input.get(at..at + e).ok_or(KernelError::Internal)?);
            for d in (0..rank).rev() {
                index[d] += 1;
                from += self.stride[d] as usize;
                if index[d] < self.extent[d] {
                    break;
                }
                from -= (self.stride[d] * self.extent[d]) as usize;
                index[d] = 0;
            }
        }
        Ok(())
    }
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let perm = ctx.input(1)?;
    let output = ctx.output(0)?;
    if input.dtype != output.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: output.index,
            dtype: output.dtype.0,
        });
    }
    if quant(&input) != quant(&output) {
        return Err(KernelError::UnsupportedParameter {
            what: "TRANSPOSE input and output quantisation must match",
        });
    }
    let element = match output.dtype {
        TensorType::INT8 => 1,
        TensorType::INT16 => 2,
        TensorType::FLOAT32 | TensorType::INT32 => 4,
        other => {
            return Err(KernelError::UnsupportedType {
                tensor: output.index,
                dtype: other.0,
            });
        }
    };
    if perm.dtype != TensorType::INT32 {
        return Err(KernelError::UnsupportedType {
            tensor: perm.index,
            dtype: perm.dtype.0,
        });
    }
    let bytes = perm.constant.ok_or(KernelError::UnsupportedParameter {
        what: "TRANSPOSE permutation must be a constant tensor",
    })?;
    let mut axes = [0i32; MAX_RANK];
    let n = bytes.len() / 4;
    if bytes.len() % 4 != 0 || n > MAX_RANK {
        return Err(KernelError::ShapeMismatch { tensor: perm.index });
    }
    for (a, b) in axes.iter_mut().zip(bytes.chunks_exact(4)) {
        *a = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
    let dims = Dims::of(&input)?;
    let plan = TransposePlan::new(dims.as_slice(), &axes[..n], element).ok_or(
        KernelError::UnsupportedParameter {
            what: "TRANSPOSE permutation is not one of the input's axes",
        },
    )?;
    let out = Dims::of(&output)?;
    let rank = plan.rank as usize;
    if out.rank() != rank || (0..rank).any(|k| out.get(k) as u32 != plan.extent[k]) {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    ctx.store(&plan)
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let plan: &TransposePlan = ctx.op_data()?;
    plan.run(ctx.input(0)?.data, ctx.output(0)?.data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposes_a_matrix_and_a_3d_tensor() {
        // [[1,2,3],[4,5,6]]ᵀ = [[1,4],[2,5],[3,6]].
        let plan = TransposePlan::new(&[2, 3], &[1, 0], 1).unwrap();
        let mut out = [0u8; 6];
        plan.run(&[1, 2, 3, 4, 5, 6], &mut out).unwrap();
        assert_eq!(out, [1, 4, 2, 5, 3, 6]);
        // [2,1,2] with perm [2,0,1] → [2,2,1].
        let plan = TransposePlan::new(&[2, 1, 2], &[2, 0, 1], 1).unwrap();
        let mut out = [0u8; 4];
        plan.run(&[1, 2, 3, 4], &mut out).unwrap();
        assert_eq!(out, [1, 3, 2, 4]);
    }

    #[test]
    fn bad_permutations_are_refused() {
        assert!(TransposePlan::new(&[2, 3], &[0, 0], 1).is_none());
        assert!(TransposePlan::new(&[2, 3], &[0, 2], 1).is_none());
        assert!(TransposePlan::new(&[2, 3], &[0], 1).is_none());
    }
}
