//! LOGISTIC (sigmoid): float32, int8 and int16, bit-exact with TFLM's
//! reference kernels.
//!
//! int16 is TFLM's sigmoid-table form: the input (zero point 0) is scaled
//! to the table's 1/(3·4096) steps — by a shift when its scale is exactly
//! 2^-12, else by a multiplier found by doubling — and interpolated in
//! `SIGMOID_TABLE_Q16`; the output is Q0.15 (scale 2^-15, zero point 0).
//!
//! int8 is TFLM's `reference_integer_ops::Logistic`: inputs beyond the
//! representable radius saturate, the rest are scaled into Q4.27, go through
//! gemmlowp's fixed-point `logistic` and are rounded to Q0.8 with zero point
//! -128. Its output depends only on the input byte, so prepare evaluates it
//! for all 256 inputs into a table in the arena's tail (256 bytes) and
//! invoke is one lookup per element.

use bytemuck::{Pod, Zeroable};

use super::context::Stored;
use super::fixed_point::{
    calculate_input_radius, frexp, int16_lut_input_scale, logistic, logistic_int16,
    multiply_by_quantized_multiplier, rounding_divide_by_pot,
};
use super::float_math::expf;
use super::tensor::{Dims, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The LOGISTIC kernel.
pub const REGISTRATION: Registration = Registration {
    name: "LOGISTIC",
    prepare,
    invoke,
};

const KIND_FLOAT32: u32 = 0;
const KIND_INT8: u32 = 1;
const KIND_INT16: u32 = 2;

/// Integer bits of the scaled input (TFLM's `kInputIntegerBits`).
const INPUT_INTEGER_BITS: i32 = 4;

#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct LogisticData {
    kind: u32,
    _reserved: u32,
    /// int8: output for input byte `b` (as `u8`) at index `b`.
    table: Stored<i8>,
    /// int16: the table's input scaling, as [`int16_lut_input_scale`] takes it.
    multiplier: i32,
    left_shift: i32,
}

/// TFLM's int16 LOGISTIC input scaling `(multiplier, left_shift)`;
/// multiplier 0 marks the power-of-two case (input scale 2^-12 exactly).
fn int16_input_scaling(scale: f32) -> (i32, i32) {
    let (pot, log2) = super::tanh::checked_log2(scale);
    let left_shift = (15 - 3) + log2;
    if pot && left_shift == 0 {
        return (0, 0);
    }
    let mut multiplier = f64::from(scale) * 4096.0 * 3.0;
    let mut left_shift = 0;
    while multiplier <= 32767.0 / 2.0 && left_shift <= 30 {
        left_shift += 1;
        multiplier *= 2.0;
    }
    (multiplier as i32, left_shift)
}

/// The int16 scaling, once the output is checked to be Q0.15.
fn int16_params(
    input: &crate::model::TensorInfo<'_>,
    output: &crate::model::TensorInfo<'_>,
) -> Result<(i32, i32), KernelError> {
    let (qi, qo) = (require_quant(input)?, require_quant(output)?);
    if qi.zero_point != 0 {
        return Err(KernelError::UnsupportedParameter {
            what: "LOGISTIC int16 input zero point must be 0",
        });
    }
    let (pot, log2) = super::tanh::checked_log2(qo.scale);
    if qo.zero_point != 0 || !pot || log2 != -15 {
        return Err(KernelError::UnsupportedParameter {
            what: "LOGISTIC int16 output must be scaled 2^-15 with zero point 0",
        });
    }
    let (multiplier, left_shift) = int16_input_scaling(qi.scale);
    if multiplier > 32767 {
        return Err(KernelError::UnsupportedParameter {
            what: "LOGISTIC int16 input scale too large",
        });
    }
    Ok((multiplier, left_shift))
}

/// TFLM's int8 parameters (`OpDataLogistic`).
#[derive(Debug, Clone, Copy)]
struct Int8Params {
    input_zero_point: i32,
    input_range_radius: i32,
    input_multiplier: i32,
    input_left_shift: i32,
}

impl Int8Params {
    fn new(input_scale: f32, input_zero_point: i32) -> Option<Self> {
        let real = f64::from(input_scale) * f64::from(1i32 << (31 - INPUT_INTEGER_BITS));
        let (q, left_shift) = frexp(real);
        if !(0..=31).contains(&left_shift) {
            return None;
        }
        Some(Int8Params {
            input_zero_point,
            input_range_radius: calculate_input_radius(INPUT_INTEGER_BITS, left_shift, 31),
            // TFLM rounds without renormalising (no QuantizeMultiplier here).
            input_multiplier: libm::round(q * f64::from(1u32 << 31)) as i32,
            input_left_shift: left_shift,
        })
    }

    /// One element, exactly as TFLM computes it.
    fn eval(&self, x: i8) -> i8 {
        let input = i32::from(x) - self.input_zero_point;
        if input <= -self.input_range_radius {
            i8::MIN
        } else if input >= self.input_range_radius {
            i8::MAX
        } else {
            let input_in_q4 = multiply_by_quantized_multiplier(
                input,
                self.input_multiplier,
                self.input_left_shift,
            );
            let output_in_q0 = logistic(input_in_q4, INPUT_INTEGER_BITS);
            let output_in_q23 = rounding_divide_by_pot(output_in_q0, 31 - 8);
            (output_in_q23 - 128).clamp(-128, 127) as i8
        }
    }
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    if input.dtype != output.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: output.index,
            dtype: output.dtype.0,
        });
    }
    if Dims::of(&input)?.elements() != Dims::of(&output)?.elements() {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    let data = match input.dtype {
        TensorType::FLOAT32 => LogisticData {
            kind: KIND_FLOAT32,
            _reserved: 0,
            table: Zeroable::zeroed(),
            multiplier: 0,
            left_shift: 0,
        },
        TensorType::INT16 => {
            let (multiplier, left_shift) = int16_params(&input, &output)?;
            LogisticData {
                kind: KIND_INT16,
                _reserved: 0,
                table: Zeroable::zeroed(),
                multiplier,
                left_shift,
            }
        }
        TensorType::INT8 => {
            let qi = require_quant(&input)?;
            let qo = require_quant(&output)?;
            if qo.zero_point != -128 {
                return Err(KernelError::UnsupportedParameter {
                    what: "LOGISTIC int8 output zero point must be -128",
                });
            }
            let params = Int8Params::new(qi.scale, qi.zero_point).ok_or(
                KernelError::UnsupportedParameter {
                    what: "LOGISTIC input scale",
                },
            )?;
            let table = ctx.store_from_fn(256, |b| params.eval(b as u8 as i8))?;
            LogisticData {
                kind: KIND_INT8,
                _reserved: 0,
                table,
                multiplier: 0,
                left_shift: 0,
            }
        }
        other => {
            return Err(KernelError::UnsupportedType {
                tensor: input.index,
                dtype: other.0,
            });
        }
    };
    ctx.store(&data)
}

/// TFLM's float logistic, with its cut-offs: `exp(x)` below -9, 1 above
/// 16.619…, `1 / (1 + exp(-x))` between. Written as selects (one `exp` per
/// element either way) so loops over it vectorise.
#[inline(always)]
pub(crate) fn logistic_f32(x: f32) -> f32 {
    #[allow(clippy::excessive_precision)]
    const CUTOFF_UPPER: f32 = 16.619_047_164_916_992_188;
    const CUTOFF_LOWER: f32 = -9.0;
    let below = x < CUTOFF_LOWER;
    let e = expf(if below { x } else { -x });
    let r = if below { e } else { 1.0 / (1.0 + e) };
    if x > CUTOFF_UPPER { 1.0 } else { r }
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &LogisticData = ctx.op_data()?;
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    match data.kind {
        KIND_FLOAT32 => {
            let (i, o) = (input.values::<f32>()?, output.values::<f32>()?);
            if i.len() != o.len() {
                return Err(KernelError::Internal);
            }
            for (o, &x) in o.iter_mut().zip(i) {
                *o = logistic_f32(x);
            }
            Ok(())
        }
        KIND_INT8 => {
            let table: &[i8; 256] = ctx
                .stored(data.table)?
                .try_into()
                .map_err(|_| KernelError::Internal)?;
            let (i, o) = (input.values::<i8>()?, output.values::<i8>()?);
            if i.len() != o.len() {
                return Err(KernelError::Internal);
            }
            for (o, &x) in o.iter_mut().zip(i) {
                *o = table[x as u8 as usize];
            }
            Ok(())
        }
        KIND_INT16 => {
            let (m, s) = int16_lut_input_scale(data.multiplier, data.left_shift);
            let (i, o) = (input.values::<i16>()?, output.values::<i16>()?);
            if i.len() != o.len() {
                return Err(KernelError::Internal);
            }
            for (o, &x) in o.iter_mut().zip(i) {
                *o = logistic_int16(x, m, s);
            }
            Ok(())
        }
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int8_logistic_is_centred_and_monotone() {
        // Scale 1/16, zero point 0: input 0 → 0.5 → 128/256 - 128 = 0.
        let p = Int8Params::new(1.0 / 16.0, 0).unwrap();
        assert_eq!(p.eval(0), 0);
        let mut last = i8::MIN;
        for x in i8::MIN..=i8::MAX {
            let y = p.eval(x);
            assert!(y >= last);
            last = y;
            let real = 1.0 / (1.0 + libm::exp(-f64::from(x) / 16.0));
            let want = (real * 256.0).round() - 128.0;
            assert!(
                (f64::from(y) - want.min(127.0)).abs() <= 1.0,
                "{x}: {y} vs {want}"
            );
        }
    }

    #[test]
    fn float_cutoffs() {
        assert_eq!(logistic_f32(20.0), 1.0);
        assert_eq!(logistic_f32(-10.0), expf(-10.0));
        assert!((logistic_f32(0.0) - 0.5).abs() < 1e-7);
    }
}
