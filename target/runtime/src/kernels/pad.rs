//! PAD and PADV2: surround a tensor (up to five dimensions) with a constant,
//! bit-exact with TFLM's reference `Pad`.
//!
//! The paddings are a constant `[rank, 2]` int32 tensor read in prepare
//! (TFLM requires it constant too). PAD fills with zero (float32, int32) or
//! the output zero point (int8, int16: the quantised zero); PADV2 fills with
//! its scalar third input, which for quantised types must share the
//! output's scale and zero point, as TFLM checks. Padding never requantises,
//! so input and output quantisation must agree.
//!
//! Invoke copies runs: the innermost dimension's input row goes in with one
//! slice copy, and the padding around it is filled by `fill`.

use bytemuck::{Pod, Zeroable};

use super::tensor::{Dims, quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::model::TensorInfo;
use crate::schema::TensorType;

/// The PAD kernel.
pub const PAD: Registration = Registration {
    name: "PAD",
    prepare,
    invoke,
};

/// The PADV2 kernel (PAD with an explicit constant).
pub const PADV2: Registration = Registration {
    name: "PADV2",
    prepare,
    invoke,
};

/// TFLM's `PadKernelMaxDimensionCount`.
pub(crate) const MAX_PAD_RANK: usize = 5;

/// What prepare computes: shapes extended to five dimensions.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct PadPlan {
    /// Bytes per element.
    pub(crate) element: u32,
    pub(crate) input: [u32; MAX_PAD_RANK],
    pub(crate) left: [u32; MAX_PAD_RANK],
    pub(crate) output: [u32; MAX_PAD_RANK],
    /// The fill value's bytes (little-endian, `element` of them used).
    pub(crate) fill: [u8; 4],
}

impl PadPlan {
    /// The plan for `input` padded by `paddings` (`(left, right)` per
    /// dimension, outermost first), or `None` for a negative padding, more
    /// than five dimensions or an overflowing size.
    pub(crate) fn new(input: &[i32], paddings: &[(i32, i32)], element: u32) -> Option<Self> {
        if input.len() != paddings.len() || input.len() > MAX_PAD_RANK {
            return None;
        }
        let mut plan = PadPlan {
            element,
            input: [1; MAX_PAD_RANK],
            output: [1; MAX_PAD_RANK],
            ..PadPlan::default()
        };
        let skip = MAX_PAD_RANK - input.len();
        for (d, (&size, &(l, r))) in input.iter().zip(paddings).enumerate() {
            let (size, l, r) = (
                u32::try_from(size).ok()?,
                u32::try_from(l).ok()?,
                u32::try_from(r).ok()?,
            );
            plan.input[skip + d] = size;
            plan.left[skip + d] = l;
            plan.output[skip + d] = size.checked_add(l)?.checked_add(r)?;
        }
        plan.output
            .iter()
            .try_fold(u64::from(element), |acc, &d| {
                let n = acc * u64::from(d);
                (n <= u64::from(u32::MAX)).then_some(n)
            })
            .map(|_| plan)
    }

    /// Output bytes.
    pub(crate) fn output_bytes(&self) -> usize {
        self.output.iter().map(|&d| d as usize).product::<usize>() * self.element as usize
    }

    /// Input bytes.
    pub(crate) fn input_bytes(&self) -> usize {
        self.input.iter().map(|&d| d as usize).product::<usize>() * self.element as usize
    }

    /// Writes the padded `input` bytes into `output`.
    pub(crate) fn run(&self, input: &[u8], output: &mut [u8]) -> Result<(), KernelError> {
        if input.len() != self.input_bytes() || output.len() != self.output_bytes() {
            return Err(KernelError::Internal);
        }
        let e = self.element as usize;
        let fill = &self.fill[..e];
        if fill.iter().all(|&b| b == fill[0]) {
            output.fill(fill[0]);
        } else {
            for chunk in output.chunks_exact_mut(e) {
                chunk.copy_from_slice(fill);
            }
        }
        if input.is_empty() {
            return Ok(());
        }
        // Dimensions inside the innermost padded one are copied whole: each
        // index over the dimensions outside it is one contiguous run, the
        // padded dimension's input extent times everything inside it.
        let k = (0..MAX_PAD_RANK)
            .rev()
            .find(|&d| self.output[d] != self.input[d])
            .unwrap_or(0);
        let inner: usize = self.input[k + 1..].iter().map(|&d| d as usize).product();
        let run = self.input[k] as usize * inner * e;
        let mut index = [0usize; MAX_PAD_RANK];
        let mut at = 0;
        loop {
            let outer = (0..k).fold(0usize, |acc, d| {
                acc * self.output[d] as usize + index[d] + self.left[d] as usize
            });
            let start = (outer * self.output[k] as usize + self.left[k] as usize) * inner * e;
            output[start..start + run].copy_from_slice(&input[at..at + run]);
            at += run;
            // Next index over dimensions 0..k (odometer, innermost fastest).
            let mut d = k;
            loop {
                if d == 0 {
                    return Ok(());
                }
                d -= 1;
                index[d] += 1;
                if index[d] < self.input[d] as usize {
                    break;
                }
                index[d] = 0;
            }
        }
    }
}

fn element_bytes(t: &TensorInfo<'_>) -> Result<u32, KernelError> {
    match t.dtype {
        TensorType::INT8 => Ok(1),
        TensorType::INT16 => Ok(2),
        TensorType::FLOAT32 | TensorType::INT32 => Ok(4),
        other => Err(KernelError::UnsupportedType {
            tensor: t.index,
            dtype: other.0,
        }),
    }
}

/// The `(left, right)` pairs of the constant paddings tensor.
fn read_paddings(
    paddings: &TensorInfo<'_>,
    rank: usize,
) -> Result<[(i32, i32); MAX_PAD_RANK], KernelError> {
    if paddings.dtype != TensorType::INT32 {
        return Err(KernelError::UnsupportedType {
            tensor: paddings.index,
            dtype: paddings.dtype.0,
        });
    }
    let shape = Dims::of(paddings)?;
    let bytes = paddings.constant.ok_or(KernelError::UnsupportedParameter {
        what: "PAD paddings must be a constant tensor",
    })?;
    if shape.as_slice() != [rank as i32, 2] || bytes.len() != rank * 8 {
        return Err(KernelError::ShapeMismatch {
            tensor: paddings.index,
        });
    }
    let mut out = [(0, 0); MAX_PAD_RANK];
    for (pair, b) in out.iter_mut().zip(bytes.chunks_exact(8)) {
        let v = |i: usize| i32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        *pair = (v(0), v(4));
    }
    Ok(out)
}

/// The fill value: PADV2's constant, else zero (the zero point when quantised).
fn fill_value(
    ctx: &PrepareContext<'_, '_, '_>,
    output: &TensorInfo<'_>,
    element: u32,
) -> Result<[u8; 4], KernelError> {
    let output_quant = quant(output);
    let Some(constant) = ctx.optional_input(2) else {
        let zero = match output.dtype {
            TensorType::INT8 | TensorType::INT16 => {
                output_quant
                    .ok_or(KernelError::MissingQuantization {
                        tensor: output.index,
                    })?
                    .zero_point
            }
            _ => 0,
        };
        return Ok(zero.to_le_bytes());
    };
    if constant.dtype != output.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: constant.index,
            dtype: constant.dtype.0,
        });
    }
    if output_quant.is_some() && quant(&constant) != output_quant {
        return Err(KernelError::UnsupportedParameter {
            what: "PADV2 constant must share the output's scale and zero point",
        });
    }
    let bytes = constant.constant.ok_or(KernelError::UnsupportedParameter {
        what: "PADV2 constant value must be a constant tensor",
    })?;
    if bytes.len() != element as usize {
        return Err(KernelError::ShapeMismatch {
            tensor: constant.index,
        });
    }
    let mut fill = [0u8; 4];
    fill[..bytes.len()].copy_from_slice(bytes);
    Ok(fill)
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let paddings = ctx.input(1)?;
    let output = ctx.output(0)?;
    if input.dtype != output.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: output.index,
            dtype: output.dtype.0,
        });
    }
    let element = element_bytes(&output)?;
    if matches!(output.dtype, TensorType::INT8 | TensorType::INT16) {
        let (qi, qo) = (quant(&input), quant(&output));
        let valid = |q: Option<super::tensor::Quant>| q.is_some_and(|q| q.scale > 0.0);
        if !valid(qo) {
            return Err(KernelError::MissingQuantization {
                tensor: output.index,
            });
        }
        if qi != qo {
            return Err(KernelError::UnsupportedParameter {
                what: "PAD input and output quantisation must match",
            });
        }
    }
    let in_dims = Dims::of(&input)?;
    let rank = in_dims.rank();
    if rank > MAX_PAD_RANK {
        return Err(KernelError::UnsupportedRank {
            tensor: input.index,
            rank: rank as u32,
        });
    }
    let pairs = read_paddings(&paddings, rank)?;
    let mut plan = PadPlan::new(in_dims.as_slice(), &pairs[..rank], element).ok_or(
        KernelError::UnsupportedParameter {
            what: "PAD paddings must be non-negative",
        },
    )?;
    let out_dims = Dims::of(&output)?;
    let skip = MAX_PAD_RANK - rank;
    let same = out_dims.rank() == rank
        && (0..rank).all(|d| i64::from(out_dims.get(d)) == i64::from(plan.output[skip + d]));
    if !same {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    plan.fill = fill_value(ctx, &output, element)?;
    ctx.store(&plan)
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let plan: &PadPlan = ctx.op_data()?;
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    plan.run(input.data, output.data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pads_a_2d_tensor_like_tflm_test() {
        // TFLM's pad_test: 2x2 input [1,2,3,4], paddings [[1,1],[2,1]] → 4x5.
        let mut plan = PadPlan::new(&[2, 2], &[(1, 1), (2, 1)], 4).unwrap();
        plan.fill = 0i32.to_le_bytes();
        let input: Vec<u8> = [1i32, 2, 3, 4]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut out = vec![0u8; plan.output_bytes()];
        plan.run(&input, &mut out).unwrap();
        let got: Vec<i32> = out
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        #[rustfmt::skip]
        let want = [
            0, 0, 0, 0, 0,
            0, 0, 1, 2, 0,
            0, 0, 3, 4, 0,
            0, 0, 0, 0, 0,
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn fills_with_the_given_value() {
        let mut plan = PadPlan::new(&[1, 1, 2], &[(0, 0), (1, 0), (0, 1)], 1).unwrap();
        plan.fill = [(-5i8) as u8, 0, 0, 0];
        let mut out = vec![0u8; plan.output_bytes()];
        plan.run(&[7, 8], &mut out).unwrap();
        let got: Vec<i8> = out.iter().map(|&b| b as i8).collect();
        assert_eq!(got, [-5, -5, -5, 7, 8, -5]);
    }

    #[test]
    fn bad_paddings_are_refused() {
        assert!(PadPlan::new(&[2], &[(-1, 0)], 1).is_none());
        assert!(PadPlan::new(&[1; 6], &[(0, 0); 6], 1).is_none());
        assert!(PadPlan::new(&[2, 2], &[(0, 0)], 1).is_none());
    }
}
