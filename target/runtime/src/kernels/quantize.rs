//! QUANTIZE: float32 → int8/int16 (affine), and integer requantisation
//! between int8, int16 and int32 with the pairs TFLM's reference kernel
//! accepts (int16 → int8 and int16 → int32 in the keyword model, int8 → int8
//! when only scale or zero point change). Bit-exact with TFLM.
//!
//! Requantisation is TFLM's `Requantize`: `(x - in_zp) · (in_scale /
//! out_scale) + out_zp` with the multiplier quantised once in prepare and
//! applied with `MultiplyByQuantizedMultiplier`, then clamped to the output
//! type.

use bytemuck::{Pod, Zeroable};

use super::fixed_point::{multiply_by_quantized_multiplier, quantize_multiplier};
use super::float_math::round_to_i32_like_x86;
use super::tensor::{Dims, channel_scales, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The QUANTIZE kernel.
pub const REGISTRATION: Registration = Registration {
    name: "QUANTIZE",
    prepare,
    invoke,
};

#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct QuantizeData {
    input_type: i32,
    output_type: i32,
    /// Output scale (float inputs).
    scale: f32,
    output_zero_point: i32,
    input_zero_point: i32,
    multiplier: i32,
    shift: i32,
}

/// An integer element type a quantised tensor holds.
pub(crate) trait QuantizedInt: Copy + Pod {
    const MIN: i32;
    const MAX: i32;
    fn to_i32(self) -> i32;
    /// `v` already clamped to `MIN..=MAX`.
    fn from_i32(v: i32) -> Self;
}

macro_rules! quantized_int {
    ($t:ty) => {
        impl QuantizedInt for $t {
            const MIN: i32 = <$t>::MIN as i32;
            const MAX: i32 = <$t>::MAX as i32;
            #[inline(always)]
            fn to_i32(self) -> i32 {
                self as i32
            }
            #[inline(always)]
            fn from_i32(v: i32) -> Self {
                v as $t
            }
        }
    };
}
quantized_int!(i8);
quantized_int!(i16);
quantized_int!(i32);

fn requantizable(input: TensorType, output: TensorType) -> bool {
    use TensorType as T;
    matches!(
        (input, output),
        (T::INT16, T::INT8)
            | (T::INT8, T::INT8)
            | (T::INT8, T::INT16)
            | (T::INT8, T::INT32)
            | (T::INT16, T::INT16)
            | (T::INT16, T::INT32)
            | (T::INT32, T::INT8)
            | (T::INT32, T::INT16)
    )
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    if ctx.input_count() != 1 || ctx.output_count() != 1 {
        return Err(KernelError::UnsupportedParameter {
            what: "QUANTIZE takes one input and one output",
        });
    }
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    if Dims::of(&input)?.elements() != Dims::of(&output)?.elements() {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    let qo = require_quant(&output)?;
    if channel_scales(&output).map_or(0, |s| s.len()) != 1 {
        return Err(KernelError::UnsupportedParameter {
            what: "QUANTIZE output must be quantised per tensor",
        });
    }
    let mut data = QuantizeData {
        input_type: i32::from(input.dtype.0),
        output_type: i32::from(output.dtype.0),
        scale: qo.scale,
        output_zero_point: qo.zero_point,
        input_zero_point: 0,
        multiplier: 0,
        shift: 0,
    };
    match input.dtype {
        TensorType::FLOAT32 => {
            if !matches!(output.dtype, TensorType::INT8 | TensorType::INT16) {
                return Err(KernelError::UnsupportedType {
                    tensor: output.index,
                    dtype: output.dtype.0,
                });
            }
        }
        TensorType::INT8 | TensorType::INT16 | TensorType::INT32 => {
            if !requantizable(input.dtype, output.dtype) {
                return Err(KernelError::UnsupportedType {
                    tensor: output.index,
                    dtype: output.dtype.0,
                });
            }
            let qi = require_quant(&input)?;
            let (multiplier, shift) =
                quantize_multiplier(f64::from(qi.scale) / f64::from(qo.scale));
            data.input_zero_point = qi.zero_point;
            data.multiplier = multiplier;
            data.shift = shift;
        }
        other => {
            return Err(KernelError::UnsupportedType {
                tensor: input.index,
                dtype: other.0,
            });
        }
    }
    ctx.store(&data)
}

/// TFLM's `AffineQuantize`: `round(x / scale) + zero_point`, clamped.
#[inline(always)]
fn affine_quantize<O: QuantizedInt>(input: &[f32], output: &mut [O], scale: f32, zero_point: i32) {
    for (o, &x) in output.iter_mut().zip(input) {
        // Out-of-range values become i32::MIN as on the reference platform,
        // so a huge positive input quantises to the minimum, as in TFLM.
        let q = round_to_i32_like_x86(x / scale).wrapping_add(zero_point);
        *o = O::from_i32(q.clamp(O::MIN, O::MAX));
    }
}

/// TFLM's `Requantize`.
#[inline(always)]
pub(crate) fn requantize<I: QuantizedInt, O: QuantizedInt>(
    input: &[I],
    output: &mut [O],
    multiplier: i32,
    shift: i32,
    input_zero_point: i32,
    output_zero_point: i32,
) {
    for (o, &x) in output.iter_mut().zip(input) {
        let v = multiply_by_quantized_multiplier(
            x.to_i32().wrapping_sub(input_zero_point),
            multiplier,
            shift,
        )
        .wrapping_add(output_zero_point);
        *o = O::from_i32(v.clamp(O::MIN, O::MAX));
    }
}

fn run_requantize<I: QuantizedInt, O: QuantizedInt>(
    ctx: &InvokeContext<'_, '_>,
    d: &QuantizeData,
) -> Result<(), KernelError> {
    let input = ctx.input(0)?.values::<I>()?;
    let output = ctx.output(0)?.values::<O>()?;
    if input.len() != output.len() {
        return Err(KernelError::Internal);
    }
    requantize(
        input,
        output,
        d.multiplier,
        d.shift,
        d.input_zero_point,
        d.output_zero_point,
    );
    Ok(())
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let d: &QuantizeData = ctx.op_data()?;
    const F32: i32 = TensorType::FLOAT32.0 as i32;
    const I8: i32 = TensorType::INT8.0 as i32;
    const I16: i32 = TensorType::INT16.0 as i32;
    const I32: i32 = TensorType::INT32.0 as i32;
    match (d.input_type, d.output_type) {
        (F32, I8 | I16) => {
            let input = ctx.input(0)?.values::<f32>()?;
            let output = ctx.output(0)?;
            if d.output_type == I8 {
                let output = output.values::<i8>()?;
                if input.len() != output.len() {
                    return Err(KernelError::Internal);
                }
                affine_quantize(input, output, d.scale, d.output_zero_point);
            } else {
                let output = output.values::<i16>()?;
                if input.len() != output.len() {
                    return Err(KernelError::Internal);
                }
                affine_quantize(input, output, d.scale, d.output_zero_point);
            }
            Ok(())
        }
        (I8, I8) => run_requantize::<i8, i8>(ctx, d),
        (I8, I16) => run_requantize::<i8, i16>(ctx, d),
        (I8, I32) => run_requantize::<i8, i32>(ctx, d),
        (I16, I8) => run_requantize::<i16, i8>(ctx, d),
        (I16, I16) => run_requantize::<i16, i16>(ctx, d),
        (I16, I32) => run_requantize::<i16, i32>(ctx, d),
        (I32, I8) => run_requantize::<i32, i8>(ctx, d),
        (I32, I16) => run_requantize::<i32, i16>(ctx, d),
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affine_rounds_half_away_and_clamps() {
        let mut out = [0i8; 6];
        affine_quantize(&[0.25, -0.25, 0.75, 100.0, -100.0, 0.0], &mut out, 0.5, 3);
        assert_eq!(out, [4, 2, 5, 127, -128, 3]);
        // Beyond i32, TFLM's x86 conversion gives i32::MIN before the zero
        // point is added (wrapping).
        affine_quantize(&[3e9, -3e9, f32::NAN, 0.0, 0.0, 0.0], &mut out, 1.0, 0);
        assert_eq!(out[..3], [-128, -128, -128]);
        affine_quantize(&[3e9, -3e9, f32::NAN, 0.0, 0.0, 0.0], &mut out, 1.0, -3);
        assert_eq!(out[..3], [127, 127, 127]);
    }

    #[test]
    fn requantize_hand_values() {
        // Scale ratio 0.5: (x - 10) / 2 + (-5).
        let (m, s) = quantize_multiplier(0.5);
        let mut out = [0i8; 4];
        requantize(&[10i16, 13, 7, 1000], &mut out, m, s, 10, -5);
        // Ties: SaturatingRoundingDoublingHighMul rounds -1.5 up to -1.
        assert_eq!(out, [-5, -3, -6, 127]);
        // Ratio 4 into int32.
        let (m, s) = quantize_multiplier(4.0);
        let mut out = [0i32; 2];
        requantize(&[-3i16, 32767], &mut out, m, s, 0, 1);
        assert_eq!(out, [-11, 131_069]);
    }
}
