//! HARD_SWISH: `x · relu6(x + 3) / 6` — int8 and float32, bit-exact with
//! TFLM's reference kernel.
//!
//! int8 is TFLM's 16-bit fixed-point form: the input (less its zero point)
//! is moved to a "hi-res" scale 128 times finer, then (1) rescaled to the
//! output scale before its final shift and (2) rescaled so that the real
//! value 3 is 32768, which maps [-3, 3] onto a "relu-ish" factor in [0, 1];
//! the product of the two, shifted and offset, is the output. Both
//! multipliers are Q0.15 (TFLM's `DownScaleInt32ToInt16Multiplier`) and
//! computed once in prepare; every step is 16-bit arithmetic as in TFLM,
//! including the truncating `SaturatingDoublingHighMul` that cancels the
//! rounding bias of the others.

use bytemuck::{Pod, Zeroable};

use super::fixed_point::quantize_multiplier;
use super::tensor::{map_elements, require_quant, same_type_and_size};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The HARD_SWISH kernel.
pub const REGISTRATION: Registration = Registration {
    name: "HARD_SWISH",
    prepare,
    invoke,
};

/// TFLM's `HardSwishParams`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
struct HardSwishData {
    dtype: i32,
    input_zero_point: i32,
    output_zero_point: i32,
    output_multiplier: i32,
    output_exponent: i32,
    reluish_multiplier: i32,
    reluish_exponent: i32,
}

/// A Q0.31 multiplier rounded to Q0.15 (TFLM's
/// `DownScaleInt32ToInt16Multiplier`, saturating at the top).
fn downscale_to_q15(multiplier: i32) -> i32 {
    const ROUNDING: i32 = 1 << 15;
    if multiplier >= i32::MAX - ROUNDING {
        return i32::from(i16::MAX);
    }
    (multiplier + ROUNDING) >> 16
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let (input, output) = (ctx.input(0)?, ctx.output(0)?);
    same_type_and_size(&input, &output, &[TensorType::FLOAT32, TensorType::INT8])?;
    let mut data = HardSwishData {
        dtype: i32::from(output.dtype.0),
        ..HardSwishData::default()
    };
    if input.dtype == TensorType::INT8 {
        let (qi, qo) = (require_quant(&input)?, require_quant(&output)?);
        // TFLM's float steps, then widened.
        let hires_input_scale = (1.0f32 / 128.0) * qi.scale;
        let reluish_scale = 3.0f32 / 32768.0;
        let (m, output_exponent) = quantize_multiplier(f64::from(hires_input_scale / qo.scale));
        if output_exponent > 0 {
            return Err(KernelError::UnsupportedParameter {
                what: "HARD_SWISH input scale above 128 times the output's",
            });
        }
        let (r, reluish_exponent) =
            quantize_multiplier(f64::from(hires_input_scale / reluish_scale));
        // A left shift past 30 bits would overflow TFLM's `1 << amount`.
        if reluish_exponent > 30 {
            return Err(KernelError::UnsupportedParameter {
                what: "HARD_SWISH input scale too large",
            });
        }
        data.input_zero_point = qi.zero_point;
        data.output_zero_point = qo.zero_point;
        data.output_multiplier = downscale_to_q15(m);
        data.output_exponent = output_exponent;
        data.reluish_multiplier = downscale_to_q15(r);
        data.reluish_exponent = reluish_exponent;
    }
    ctx.store(&data)
}

/// gemmlowp's 16-bit `SaturatingRoundingDoublingHighMul`.
fn srdhm16(a: i16, b: i16) -> i16 {
    if a == i16::MIN && b == i16::MIN {
        return i16::MAX;
    }
    let ab = i32::from(a) * i32::from(b);
    let nudge = if ab >= 0 { 1 << 14 } else { 1 - (1 << 14) };
    ((ab + nudge) / (1 << 15)) as i16
}

/// TFLM's `SaturatingDoublingHighMul`: as [`srdhm16`] but truncating.
fn sdhm16(a: i16, b: i16) -> i16 {
    if a == i16::MIN && b == i16::MIN {
        return i16::MAX;
    }
    ((i32::from(a) * i32::from(b)) / (1 << 15)) as i16
}

/// gemmlowp's 16-bit `RoundingDivideByPOT` (exponent 0..=31; past 15 the
/// mask truncates to all ones, as in C).
fn rounding_divide_by_pot16(x: i16, exponent: i32) -> i16 {
    let mask = i32::from(((1i64 << exponent) - 1) as i16);
    let x = i32::from(x);
    let threshold = (mask >> 1) + i32::from(x < 0);
    ((x >> exponent) + i32::from((x & mask) > threshold)) as i16
}

/// `value · 2^amount` saturated to 16 bits (TFLM's `SaturatingLeftShift`).
fn saturating_left_shift16(value: i16, amount: i32) -> i16 {
    (i64::from(value) << amount).clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i16
}

/// One int8 hard-swish, TFLM's quantised `HardSwish` body.
fn hard_swish_int8(x: i8, p: &HardSwishData) -> i8 {
    let input_value = (i32::from(x) - p.input_zero_point) as i16;
    let hires = input_value.wrapping_mul(1 << 7);
    let preshift_output = srdhm16(hires, p.output_multiplier as i16);
    let mut reluish = hires;
    if p.reluish_exponent > 0 {
        reluish = saturating_left_shift16(reluish, p.reluish_exponent - 1);
    }
    reluish = srdhm16(reluish, p.reluish_multiplier as i16);
    if p.reluish_exponent > 0 {
        reluish = saturating_left_shift16(reluish, 1);
    }
    if p.reluish_exponent < 0 {
        reluish = rounding_divide_by_pot16(reluish, -p.reluish_exponent);
    }
    // [-1, 1] in Q0.15 to [0, 1].
    let reluish = ((i32::from(reluish) + (1 << 15)) >> 1) as i16;
    let preshift = sdhm16(reluish, preshift_output);
    let output = rounding_divide_by_pot16(preshift, -p.output_exponent)
        .wrapping_add(p.output_zero_point as i16);
    output.clamp(i16::from(i8::MIN), i16::from(i8::MAX)) as i8
}

/// TFLM's float form, in its order: `x · min(6, max(0, x + 3)) / 6`.
fn hard_swish_f32(x: f32) -> f32 {
    let shifted = x + 3.0;
    let relu = if 0.0 < shifted { shifted } else { 0.0 };
    let relu6 = if relu < 6.0 { relu } else { 6.0 };
    x * relu6 / 6.0
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &HardSwishData = ctx.op_data()?;
    let (input, output) = (ctx.input(0)?, ctx.output(0)?);
    match TensorType(data.dtype as i8) {
        TensorType::FLOAT32 => map_elements(&input, output, hard_swish_f32),
        TensorType::INT8 => map_elements(&input, output, |x| hard_swish_int8(x, data)),
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_bit_helpers_round_like_gemmlowp() {
        assert_eq!(srdhm16(16384, 16384), 8192);
        assert_eq!(srdhm16(i16::MIN, i16::MIN), i16::MAX);
        assert_eq!(sdhm16(3, 16384), 1);
        assert_eq!(sdhm16(-3, 16384), -1);
        assert_eq!(rounding_divide_by_pot16(5, 1), 3);
        assert_eq!(rounding_divide_by_pot16(-5, 1), -3);
        assert_eq!(saturating_left_shift16(20000, 1), i16::MAX);
        assert_eq!(downscale_to_q15(1 << 30), 1 << 14);
        assert_eq!(downscale_to_q15(i32::MAX), i32::from(i16::MAX));
    }

    #[test]
    fn float_hard_swish_has_its_corners() {
        assert_eq!(hard_swish_f32(-4.0), -0.0);
        assert_eq!(hard_swish_f32(4.0), 4.0);
        assert_eq!(hard_swish_f32(0.0), 0.0);
        assert_eq!(hard_swish_f32(3.0), 3.0);
        assert!((hard_swish_f32(1.0) - 4.0 / 6.0).abs() < 1e-7);
    }
}
