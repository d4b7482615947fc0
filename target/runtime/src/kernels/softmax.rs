//! SOFTMAX over the last dimension: float32, int8 → int8, int8 → int16 and
//! int16 → int16 (in [`softmax_i16`]), bit-exact with TFLM's reference
//! kernels.
//!
//! The int8 paths are TFLM's `reference_ops::Softmax`, which uses no lookup
//! table (TFLM's LUTs serve int16 inputs only): each input's difference from
//! its row's maximum is scaled by `beta · input_scale` into Q5.26
//! (`input_multiplier`, `input_left_shift`), gemmlowp's
//! `exp_on_negative_values` gives Q0.31, the exps are summed in Q12.19, and
//! each output is `exp · (1/sum)` shifted to 8 or 16 bits. Differences below
//! `diff_min` contribute nothing and output the type's minimum.
//!
//! Every int8 difference lies in [-255, 0], so `exp` is a function of 256
//! values. When a tensor is big enough that invoke would compute more exps
//! than that, prepare tabulates them once in the arena's tail (1 KiB) and
//! invoke only looks them up; small classifier heads keep the arena small,
//! compute each exp once and keep it on the stack for the second pass
//! (TFLM computes it twice). All paths give identical bits.

use bytemuck::{Pod, Zeroable};

use super::context::Stored;
use super::fixed_point::quantize_multiplier;
use super::fixed_point::{
    calculate_input_radius, exp_on_negative_values, get_reciprocal,
    multiply_by_quantized_multiplier_greater_than_one, preprocess_softmax_scaling,
    rounding_divide_by_pot, saturating_rounding_doubling_high_mul,
};
use super::float_math::expf;
use super::softmax_i16;
use super::tensor::{Dims, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration, types};
use crate::schema::TensorType;

/// The SOFTMAX kernel.
pub const REGISTRATION: Registration = typed::<{ types::ALL }>();

/// The SOFTMAX kernel with only the variants of the input types in `T`
/// ([`types`]): what a firmware for one model registers.
pub(crate) const fn typed<const T: u8>() -> Registration {
    Registration {
        name: "SOFTMAX",
        prepare: prepare::<T>,
        invoke: invoke::<T>,
    }
}

const KIND_FLOAT32: u32 = 0;
const KIND_INT8_INT8: u32 = 1;
const KIND_INT8_INT16: u32 = 2;
const KIND_INT16_INT16: u32 = 3;

/// Integer bits of the scaled differences fed to `exp` (TFLM's
/// `kScaledDiffIntegerBits`).
const SCALED_DIFF_INTEGER_BITS: i32 = 5;
/// Integer bits of the sum of exps (`kAccumulationIntegerBits`).
const ACCUMULATION_INTEGER_BITS: i32 = 12;
/// Elements from which tabulating the 256 possible exps pays for itself.
const TABLE_MIN_ELEMENTS: usize = 128;

#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct SoftmaxData {
    kind: u32,
    outer: u32,
    depth: u32,
    beta: f32,
    input_multiplier: i32,
    input_left_shift: i32,
    diff_min: i32,
    has_table: u32,
    /// int8: `exp` of the scaled difference `-d` at index `d` (d = 0..=255).
    /// int16 → int16: TFLM's exp table then its `1 / (1 + x)` table, the
    /// int16 entries two to a word (one field for both paths: the op data,
    /// and so the arena's tail, stays the int8 kernel's size).
    table: Stored<i32>,
}

/// `exp(beta · scale · diff)` in Q0.31 for an int8 difference `diff ≤ 0`.
#[inline(always)]
fn exp_of_diff(diff: i32, multiplier: i32, left_shift: i32) -> i32 {
    let scaled = multiply_by_quantized_multiplier_greater_than_one(diff, multiplier, left_shift);
    exp_on_negative_values(scaled, SCALED_DIFF_INTEGER_BITS)
}

fn prepare<const T: u8>(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    if ctx.input_count() != 1 || ctx.output_count() != 1 {
        return Err(KernelError::UnsupportedParameter {
            what: "SOFTMAX takes one input and one output",
        });
    }
    let input = ctx.input(0)?;
    if T != types::ALL && !types::covers(T, input.dtype) {
        return Err(KernelError::UnsupportedType {
            tensor: input.index,
            dtype: input.dtype.0,
        });
    }
    let output = ctx.output(0)?;
    let in_dims = Dims::of(&input)?;
    let out_dims = Dims::of(&output)?;
    if in_dims.rank() == 0 {
        return Err(KernelError::UnsupportedRank {
            tensor: input.index,
            rank: 0,
        });
    }
    if in_dims.elements() != out_dims.elements() || in_dims.last() != out_dims.last() {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    let beta = ctx
        .op()
        .raw()
        .builtin_options_as_softmax_options()
        .map_or(0.0, |o| o.beta());
    let mut data = SoftmaxData {
        kind: KIND_FLOAT32,
        outer: in_dims.outer() as u32,
        depth: in_dims.last() as u32,
        beta,
        input_multiplier: 0,
        input_left_shift: 0,
        diff_min: 0,
        has_table: 0,
        table: Zeroable::zeroed(),
    };
    let unsupported = |t: &crate::model::TensorInfo<'_>| KernelError::UnsupportedType {
        tensor: t.index,
        dtype: t.dtype.0,
    };
    match (input.dtype, output.dtype) {
        (TensorType::FLOAT32, TensorType::FLOAT32) => {
            types::need::<T>(types::FLOAT32, &input)?;
        }
        (TensorType::INT8, TensorType::INT8 | TensorType::INT16) => {
            types::need::<T>(types::INT8, &input)?;
            let qi = require_quant(&input)?;
            let qo = require_quant(&output)?;
            let bad = |what| KernelError::UnsupportedParameter { what };
            if output.dtype == TensorType::INT8 {
                data.kind = KIND_INT8_INT8;
                if qo.zero_point != -128 || qo.scale != 1.0 / 256.0 {
                    return Err(bad(
                        "SOFTMAX int8 output must be scale 1/256, zero point -128",
                    ));
                }
            } else {
                data.kind = KIND_INT8_INT16;
                let want = 1.0f32 / 65536.0;
                if qo.zero_point != -32768 || (qo.scale - want).abs() > 0.001 * want {
                    return Err(bad(
                        "SOFTMAX int16 output must be scale 1/65536, zero point -32768",
                    ));
                }
            }
            let (multiplier, left_shift) = preprocess_softmax_scaling(
                f64::from(beta),
                f64::from(qi.scale),
                SCALED_DIFF_INTEGER_BITS,
            )
            .ok_or(bad("SOFTMAX beta × input scale"))?;
            data.input_multiplier = multiplier;
            data.input_left_shift = left_shift;
            data.diff_min = -calculate_input_radius(SCALED_DIFF_INTEGER_BITS, left_shift, 31);
            if in_dims.elements() >= TABLE_MIN_ELEMENTS {
                data.table =
                    ctx.store_from_fn(256, |d| exp_of_diff(-(d as i32), multiplier, left_shift))?;
                data.has_table = 1;
            }
        }
        (TensorType::INT16, TensorType::INT16) => {
            types::need::<T>(types::INT16, &input)?;
            prepare_int16(ctx, &mut data, &input, &output)?
        }
        (TensorType::FLOAT32 | TensorType::INT8 | TensorType::INT16, _) => {
            return Err(unsupported(&output));
        }
        _ => return Err(unsupported(&input)),
    }
    ctx.store(&data)
}

/// int16 → int16 (TFLM's `SoftmaxInt16`): output Q0.15, the input scaled so
/// that differences of [-65535, 0] mean [-10, 0], and the two tables.
fn prepare_int16(
    ctx: &mut PrepareContext<'_, '_, '_>,
    data: &mut SoftmaxData,
    input: &crate::model::TensorInfo<'_>,
    output: &crate::model::TensorInfo<'_>,
) -> Result<(), KernelError> {
    let (qi, qo) = (require_quant(input)?, require_quant(output)?);
    let want = 1.0f32 / 32768.0;
    if qo.zero_point != 0 || (qo.scale - want).abs() > 0.001 * want {
        return Err(KernelError::UnsupportedParameter {
            what: "SOFTMAX int16 output must be scale 1/32768, zero point 0",
        });
    }
    // The Q16.15 sum of a row's exps must fit 32 bits.
    if data.depth > 65536 {
        return Err(KernelError::ShapeMismatch {
            tensor: input.index,
        });
    }
    let real = f64::from(qi.scale) * f64::from(data.beta) / (10.0 / 65535.0);
    (data.input_multiplier, data.input_left_shift) = quantize_multiplier(real);
    // Entry k of the two tables end to end; word w holds entries 2w, 2w+1
    // in memory order (read back as int16 by `run_int16`).
    let entry = |k: usize| match k.checked_sub(softmax_i16::LUT_LEN) {
        None => softmax_i16::exp_entry(k),
        Some(k) => softmax_i16::reciprocal_entry(k),
    };
    data.table = ctx.store_from_fn(softmax_i16::LUT_LEN, |w| {
        bytemuck::cast::<[i16; 2], i32>([entry(2 * w), entry(2 * w + 1)])
    })?;
    data.kind = KIND_INT16_INT16;
    Ok(())
}

fn run_int16(ctx: &InvokeContext<'_, '_>, data: &SoftmaxData) -> Result<(), KernelError> {
    let both: &[i16] = bytemuck::cast_slice(ctx.stored(data.table)?);
    let (exp, reciprocal) = both.split_at(both.len().min(softmax_i16::LUT_LEN));
    let softmax = softmax_i16::Int16Softmax {
        multiplier: data.input_multiplier,
        shift: data.input_left_shift,
        exp: exp.try_into().map_err(|_| KernelError::Internal)?,
        reciprocal: reciprocal.try_into().map_err(|_| KernelError::Internal)?,
    };
    let input = ctx.input(0)?.values::<i16>()?;
    let output = ctx.output(0)?.values::<i16>()?;
    let depth = data.depth as usize;
    if input.len() != output.len() {
        return Err(KernelError::Internal);
    }
    if depth == 0 {
        return Ok(());
    }
    for (i, o) in input
        .chunks_exact(depth)
        .zip(output.chunks_exact_mut(depth))
    {
        softmax.row(i, o);
    }
    Ok(())
}

/// One row of TFLM's float softmax. The exps are summed in TFLM's order;
/// computing them in a loop of their own lets it vectorise.
#[inline(always)]
fn softmax_row_f32(input: &[f32], output: &mut [f32], beta: f32) {
    let max = input
        .iter()
        .fold(f32::MIN, |m, &v| if m < v { v } else { m });
    for (o, &v) in output.iter_mut().zip(input) {
        *o = expf((v - max) * beta);
    }
    let sum: f32 = output.iter().fold(0.0, |s, &e| s + e);
    for o in output.iter_mut() {
        *o /= sum;
    }
}

/// An int8 output element type.
trait QuantizedOutput: Copy {
    const BITS: i32;
    const MIN: i32;
    const MAX: i32;
    fn from_i32(v: i32) -> Self;
}

impl QuantizedOutput for i8 {
    const BITS: i32 = 8;
    const MIN: i32 = i8::MIN as i32;
    const MAX: i32 = i8::MAX as i32;
    fn from_i32(v: i32) -> Self {
        v as i8
    }
}

impl QuantizedOutput for i16 {
    const BITS: i32 = 16;
    const MIN: i32 = i16::MIN as i32;
    const MAX: i32 = i16::MAX as i32;
    fn from_i32(v: i32) -> Self {
        v as i16
    }
}

/// One row of TFLM's quantised softmax; `exp(d)` gives Q0.31 `exp` of the
/// (non-positive) difference `d`. When `memo` holds the whole row, each exp
/// is computed once and reused for the output (TFLM computes it twice).
#[inline(always)]
fn softmax_row_int8<O: QuantizedOutput>(
    input: &[i8],
    output: &mut [O],
    diff_min: i32,
    exp: impl Fn(i32) -> i32,
    memo: &mut [i32],
) -> Result<(), KernelError> {
    let max = i32::from(input.iter().copied().max().unwrap_or(i8::MIN));
    let memoise = memo.len() >= input.len();
    let mut sum_of_exps = 0i32; // Q12.19
    for (i, &v) in input.iter().enumerate() {
        let diff = i32::from(v) - max;
        if diff >= diff_min {
            let e = exp(diff);
            if memoise {
                memo[i] = e;
            }
            sum_of_exps =
                sum_of_exps.wrapping_add(rounding_divide_by_pot(e, ACCUMULATION_INTEGER_BITS));
        }
    }
    let (shifted_scale, num_bits_over_unit) =
        get_reciprocal(sum_of_exps, ACCUMULATION_INTEGER_BITS);
    let exponent = num_bits_over_unit + 31 - O::BITS;
    if !(0..=31).contains(&exponent) {
        // TFLM aborts here (TFLITE_CHECK).
        return Err(KernelError::Internal);
    }
    for (i, (o, &v)) in output.iter_mut().zip(input).enumerate() {
        let diff = i32::from(v) - max;
        *o = if diff >= diff_min {
            let e = if memoise { memo[i] } else { exp(diff) };
            let unsat = rounding_divide_by_pot(
                saturating_rounding_doubling_high_mul(shifted_scale, e),
                exponent,
            );
            O::from_i32((unsat + O::MIN).clamp(O::MIN, O::MAX))
        } else {
            O::from_i32(O::MIN)
        };
    }
    Ok(())
}

/// Longest row whose exps are kept on the stack between the two passes.
const MEMO_LEN: usize = 64;

fn run_int8<O: QuantizedOutput + bytemuck::Pod>(
    ctx: &InvokeContext<'_, '_>,
    data: &SoftmaxData,
) -> Result<(), KernelError> {
    let input = ctx.input(0)?.values::<i8>()?;
    let output = ctx.output(0)?.values::<O>()?;
    let depth = data.depth as usize;
    if input.len() != output.len() || input.len() != data.outer as usize * depth {
        return Err(KernelError::Internal);
    }
    if input.is_empty() {
        return Ok(());
    }
    let rows = input
        .chunks_exact(depth)
        .zip(output.chunks_exact_mut(depth));
    if data.has_table != 0 {
        let table: &[i32; 256] = ctx
            .stored(data.table)?
            .try_into()
            .map_err(|_| KernelError::Internal)?;
        for (i, o) in rows {
            softmax_row_int8(i, o, data.diff_min, |d| table[(-d) as u8 as usize], &mut [])?;
        }
    } else {
        let (m, s) = (data.input_multiplier, data.input_left_shift);
        let mut memo = [0i32; MEMO_LEN];
        for (i, o) in rows {
            softmax_row_int8(i, o, data.diff_min, |d| exp_of_diff(d, m, s), &mut memo)?;
        }
    }
    Ok(())
}

fn invoke<const T: u8>(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &SoftmaxData = ctx.op_data()?;
    match data.kind {
        KIND_FLOAT32 => {
            types::linked::<T>(types::FLOAT32)?;
            let input = ctx.input(0)?.values::<f32>()?;
            let output = ctx.output(0)?.values::<f32>()?;
            let depth = data.depth as usize;
            if input.len() != output.len() {
                return Err(KernelError::Internal);
            }
            if depth == 0 {
                return Ok(());
            }
            for (i, o) in input
                .chunks_exact(depth)
                .zip(output.chunks_exact_mut(depth))
            {
                softmax_row_f32(i, o, data.beta);
            }
            Ok(())
        }
        KIND_INT8_INT8 => {
            types::linked::<T>(types::INT8)?;
            run_int8::<i8>(ctx, data)
        }
        KIND_INT8_INT16 => {
            types::linked::<T>(types::INT8)?;
            run_int8::<i16>(ctx, data)
        }
        KIND_INT16_INT16 => {
            types::linked::<T>(types::INT16)?;
            run_int16(ctx, data)
        }
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_row_splits_evenly() {
        // beta 1, scale 1/16: four equal inputs → 1/4 each = 64/256 → -64.
        let (m, s) = preprocess_softmax_scaling(1.0, 1.0 / 16.0, 5).unwrap();
        let diff_min = -calculate_input_radius(5, s, 31);
        let mut out = [0i8; 4];
        softmax_row_int8(
            &[3, 3, 3, 3],
            &mut out,
            diff_min,
            |d| exp_of_diff(d, m, s),
            &mut [],
        )
        .unwrap();
        assert_eq!(out, [-64; 4]);
        let mut out16 = [0i16; 4];
        let exp = |d| exp_of_diff(d, m, s);
        softmax_row_int8(&[3, 3, 3, 3], &mut out16, diff_min, exp, &mut [0; 4]).unwrap();
        assert_eq!(out16, [-32768 + 16384; 4]);
    }

    #[test]
    fn dominant_input_saturates() {
        let (m, s) = preprocess_softmax_scaling(1.0, 0.5, 5).unwrap();
        let diff_min = -calculate_input_radius(5, s, 31);
        let mut out = [0i8; 3];
        let exp = |d| exp_of_diff(d, m, s);
        softmax_row_int8(&[127, -128, -128], &mut out, diff_min, exp, &mut []).unwrap();
        assert_eq!(out, [127, -128, -128]);
    }
}
