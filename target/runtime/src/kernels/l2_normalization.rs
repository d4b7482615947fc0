//! L2_NORMALIZATION over the last dimension: `x / max(|row|₂, 1e-6)` —
//! int8 and float32, up to four dimensions, bit-exact with TFLM.
//!
//! int8 is TFLM's `reference_integer_ops::L2Normalization`: the row's sum
//! of squared differences from the zero point goes through
//! `GetInvSqrtQuantizedMultiplierExp` (RSQRT's Newton–Raphson, shared with
//! [`super::rsqrt`]) and each difference is multiplied by that inverse
//! norm, on an output scale of 1/128 with zero point 0 — the quantisation
//! TFLM's kernel writes, which hilt therefore requires of the output. No
//! fused activation is taken, as in TFLM.

use bytemuck::{Pod, Zeroable};

use super::fixed_point::multiply_by_quantized_multiplier;
use super::rsqrt::inv_sqrt_quantized_multiplier_exp;
use super::tensor::{Dims, map_rows, require_quant, same_type_and_size};
use super::{InvokeContext, KernelError, PrepareContext, QuantProblem, Registration};
use crate::schema::{ActivationFunctionType, TensorType};

/// The L2_NORMALIZATION kernel.
pub const REGISTRATION: Registration = Registration {
    name: "L2_NORMALIZATION",
    prepare,
    invoke,
};

/// Bits of the output scale (1/128).
const OUTPUT_SCALE_BITS: i32 = 7;
/// TFLM's float epsilon.
const EPSILON: f32 = 1e-6;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
struct L2NormData {
    dtype: i32,
    input_zero_point: i32,
    depth: u32,
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let (input, output) = (ctx.input(0)?, ctx.output(0)?);
    same_type_and_size(&input, &output, &[TensorType::FLOAT32, TensorType::INT8])?;
    let dims = Dims::of(&input)?;
    if dims.rank() > 4 {
        return Err(KernelError::UnsupportedRank {
            tensor: input.index,
            rank: dims.rank() as u32,
        });
    }
    if dims.rank() == 0 || Dims::of(&output)? != dims {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    let activation = ctx
        .op()
        .raw()
        .builtin_options_as_l2_norm_options()
        .map_or(ActivationFunctionType::NONE, |o| {
            o.fused_activation_function()
        });
    if activation != ActivationFunctionType::NONE {
        return Err(KernelError::UnsupportedParameter {
            what: "L2_NORMALIZATION with a fused activation",
        });
    }
    let mut data = L2NormData {
        dtype: i32::from(output.dtype.0),
        input_zero_point: 0,
        depth: dims.last() as u32,
    };
    if input.dtype == TensorType::INT8 {
        let (qi, qo) = (require_quant(&input)?, require_quant(&output)?);
        if qo.scale != 1.0 / 128.0 {
            return Err(KernelError::UnsupportedParameter {
                what: "L2_NORMALIZATION int8 output scale must be 1/128",
            });
        }
        if qo.zero_point != 0 {
            return Err(KernelError::BadQuantization {
                tensor: output.index,
                problem: QuantProblem::ZeroPointForKernel {
                    zero_point: qo.zero_point,
                    min: 0,
                    max: 0,
                },
            });
        }
        data.input_zero_point = qi.zero_point;
    }
    ctx.store(&data)
}

/// One int8 row.
fn normalize_row(x: &[i8], out: &mut [i8], zero_point: i32) {
    let diff = |v: i8| i32::from(v) - zero_point;
    let sum_of_squares = x
        .iter()
        .fold(0i32, |acc, &v| acc.wrapping_add(diff(v) * diff(v)));
    let (multiplier, shift) = inv_sqrt_quantized_multiplier_exp(sum_of_squares);
    for (o, &v) in out.iter_mut().zip(x) {
        let q = multiply_by_quantized_multiplier(diff(v), multiplier, shift + OUTPUT_SCALE_BITS);
        *o = q.clamp(-128, 127) as i8;
    }
}

/// One float32 row in TFLM's order.
fn normalize_row_f32(x: &[f32], out: &mut [f32]) {
    let squared: f32 = x.iter().fold(0.0, |acc, &v| acc + v * v);
    let norm = libm::sqrtf(squared);
    let norm = if norm < EPSILON { EPSILON } else { norm };
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v / norm;
    }
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &L2NormData = ctx.op_data()?;
    let (input, output) = (ctx.input(0)?, ctx.output(0)?);
    let depth = data.depth as usize;
    match TensorType(data.dtype as i8) {
        TensorType::FLOAT32 => map_rows(&input, output, depth, normalize_row_f32),
        TensorType::INT8 => map_rows(&input, output, depth, |row, o| {
            normalize_row(row, o, data.input_zero_point)
        }),
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_three_four_row_becomes_three_fifths_and_four_fifths() {
        let mut out = [0i8; 2];
        normalize_row(&[3, 4], &mut out, 0);
        // 0.6 · 128 = 76.8, 0.8 · 128 = 102.4.
        assert_eq!(out, [77, 102]);
        normalize_row(&[0, 0], &mut out, 0);
        assert_eq!(out, [0, 0]);
        let mut f = [0f32; 2];
        normalize_row_f32(&[3.0, 4.0], &mut f);
        assert_eq!(f, [0.6, 0.8]);
    }
}
