//! DIV: element-wise quotient with NumPy-style broadcasting — float32,
//! unquantised int32 and int8 — bit-exact with TFLM's reference kernel.
//!
//! int8 follows TFLM's `DivElementwise`: both inputs less their zero
//! points, the signs moved to the dividend so the divisor is positive, the
//! divisor's reciprocal from `GetReciprocal` (a Q0.31 scale and a shift),
//! the dividend shifted up by its redundant sign bits and multiplied by that
//! reciprocal, then scaled by `in1_scale / (in2_scale · out_scale)` and
//! clamped. The multiplier is computed once in prepare. A divisor equal to
//! its zero point (a real zero, where TFLM's reciprocal is undefined) and an
//! int32 division by zero fail the invoke with a typed error.
//!
//! The broadcast walk is ADD's [`Broadcast`] (TFLM's `BroadcastDivSlow`
//! visits the same elements in the same order).

use bytemuck::{Pod, Zeroable};

use super::add::{Binary, Broadcast};
use super::fixed_point::{
    activation_range_float, activation_range_quantized, count_leading_sign_bits, get_reciprocal,
    multiply_by_quantized_multiplier_greater_than_one, quantize_multiplier,
    saturating_rounding_doubling_high_mul,
};
use super::tensor::{quant, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::{ActivationFunctionType, TensorType};

/// The DIV kernel.
pub const REGISTRATION: Registration = Registration {
    name: "DIV",
    prepare,
    invoke,
};

/// int8 parameters: TFLM's `OpDataDiv`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct QuantizedDiv {
    pub(crate) input1_offset: i32,
    pub(crate) input2_offset: i32,
    pub(crate) output_offset: i32,
    pub(crate) output_multiplier: i32,
    pub(crate) output_shift: i32,
    pub(crate) activation_min: i32,
    pub(crate) activation_max: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct DivData {
    dtype: i32,
    /// float32 activation range.
    min_f32: f32,
    max_f32: f32,
    /// int32 activation range.
    min_i32: i32,
    max_i32: i32,
    quantized: QuantizedDiv,
    walk: Broadcast,
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let Binary {
        input1,
        input2,
        output,
        walk,
    } = Binary::prepare(ctx)?;
    let activation = ctx
        .op()
        .raw()
        .builtin_options_as_div_options()
        .map_or(ActivationFunctionType::NONE, |o| {
            o.fused_activation_function()
        });
    let mut data = DivData {
        dtype: i32::from(output.dtype.0),
        min_f32: 0.0,
        max_f32: 0.0,
        min_i32: 0,
        max_i32: 0,
        quantized: QuantizedDiv::default(),
        walk,
    };
    match output.dtype {
        TensorType::FLOAT32 => (data.min_f32, data.max_f32) = activation_range_float(activation),
        TensorType::INT32 => {
            for t in [&input1, &input2] {
                if quant(t).is_some() {
                    return Err(KernelError::UnsupportedParameter {
                        what: "DIV int32 inputs must not be quantised",
                    });
                }
            }
            (data.min_i32, data.max_i32) = activation_range_i32(activation);
        }
        TensorType::INT8 => {
            let (q1, q2, qo) = (
                require_quant(&input1)?,
                require_quant(&input2)?,
                require_quant(&output)?,
            );
            // The scale ratio in double precision, as the TFLM build the
            // conformance outputs come from computes it (in float, ties
            // such as 42 / 48 at a ratio of 100 round the other way).
            let real = f64::from(q1.scale) / (f64::from(q2.scale) * f64::from(qo.scale));
            let (output_multiplier, output_shift) = quantize_multiplier(real);
            // Past 2^22 the final shift could turn left, which TFLM's
            // rounding shift does not define.
            if output_shift > 22 {
                return Err(KernelError::UnsupportedParameter {
                    what: "DIV int8 scale ratio above 2^22",
                });
            }
            let (activation_min, activation_max) =
                activation_range_quantized(activation, qo.scale, qo.zero_point, -128, 127);
            data.quantized = QuantizedDiv {
                input1_offset: -q1.zero_point,
                input2_offset: -q2.zero_point,
                output_offset: qo.zero_point,
                output_multiplier,
                output_shift,
                activation_min,
                activation_max,
            };
        }
        other => {
            return Err(KernelError::UnsupportedType {
                tensor: output.index,
                dtype: other.0,
            });
        }
    }
    ctx.store(&data)
}

/// TFLM's `CalculateActivationRange<int32_t>`.
fn activation_range_i32(activation: ActivationFunctionType) -> (i32, i32) {
    use ActivationFunctionType as A;
    match activation {
        A::RELU => (0, i32::MAX),
        A::RELU6 => (0, 6),
        A::RELU_N1_TO_1 => (-1, 1),
        _ => (i32::MIN, i32::MAX),
    }
}

/// gemmlowp's `RoundingDivideByPOT` for any non-negative exponent, as the
/// reference TFLM build (x86-64) computes it. Exponents past 31 occur for
/// small quotients (a dividend of 11 over a divisor of 114 at unit scales
/// shifts by 32); C leaves such shifts undefined, and there the rounding
/// mask truncates to all ones while the shift instruction uses the count
/// modulo 32, so the result is `(x >> (e mod 32)) + (x >= 0)` — not the
/// near-zero quotient. hilt reproduces it so its outputs stay TFLM's (the
/// tests pin both forms against TFLM's own outputs).
#[inline(always)]
fn rounding_shift_right_like_x86(x: i32, exponent: i32) -> i32 {
    if exponent > 31 {
        return (x >> (exponent & 31)).wrapping_add(i32::from(x >= 0));
    }
    super::fixed_point::rounding_divide_by_pot(x, exponent)
}

/// One quantised quotient, exactly TFLM's `DivElementwise` body. `y` must
/// not equal the divisor's zero point (checked by the caller).
#[inline(always)]
pub(crate) fn div_quantized(x: i32, y: i32, p: &QuantizedDiv) -> i32 {
    let mut dividend = p.input1_offset + x;
    let mut divisor = p.input2_offset + y;
    if divisor < 0 {
        dividend = -dividend;
        divisor = -divisor;
    }
    let (reciprocal, recip_shift) = get_reciprocal(divisor, 31);
    let headroom = count_leading_sign_bits(dividend);
    let unscaled =
        multiply_by_quantized_multiplier_greater_than_one(dividend, reciprocal, headroom);
    let total_shift = p.output_shift - recip_shift - headroom;
    let scaled = rounding_shift_right_like_x86(
        saturating_rounding_doubling_high_mul(unscaled, p.output_multiplier),
        -total_shift,
    );
    (p.output_offset + scaled).clamp(p.activation_min, p.activation_max)
}

const DIVIDE_BY_ZERO: KernelError = KernelError::UnsupportedParameter {
    what: "DIV by zero",
};

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &DivData = ctx.op_data()?;
    let (input1, input2, output) = (ctx.input(0)?, ctx.input(1)?, ctx.output(0)?);
    let w = &data.walk;
    match TensorType(data.dtype as i8) {
        TensorType::FLOAT32 => {
            let (lo, hi) = (data.min_f32, data.max_f32);
            w.run(
                input1.values::<f32>()?,
                input2.values::<f32>()?,
                output.values::<f32>()?,
                // TFLM: min(max(x / y, lo), hi).
                |x, y| {
                    let q = x / y;
                    let q = if q < lo { lo } else { q };
                    if hi < q { hi } else { q }
                },
            )
        }
        TensorType::INT32 => {
            let divisors = input2.values::<i32>()?;
            if divisors.contains(&0) {
                return Err(DIVIDE_BY_ZERO);
            }
            let (lo, hi) = (data.min_i32, data.max_i32);
            // C's truncating division; MIN / -1 wraps instead of trapping.
            w.run(
                input1.values::<i32>()?,
                divisors,
                output.values::<i32>()?,
                |x, y| x.wrapping_div(y).clamp(lo, hi),
            )
        }
        TensorType::INT8 => {
            let p = data.quantized;
            let divisors = input2.values::<i8>()?;
            if divisors
                .iter()
                .any(|&y| i32::from(y) + p.input2_offset == 0)
            {
                return Err(DIVIDE_BY_ZERO);
            }
            w.run(
                input1.values::<i8>()?,
                divisors,
                output.values::<i8>()?,
                |x, y| div_quantized(i32::from(x), i32::from(y), &p) as i8,
            )
        }
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(s1: f32, s2: f32, so: f32) -> QuantizedDiv {
        let (output_multiplier, output_shift) =
            quantize_multiplier(f64::from(s1) / (f64::from(s2) * f64::from(so)));
        QuantizedDiv {
            output_multiplier,
            output_shift,
            activation_min: -128,
            activation_max: 127,
            ..QuantizedDiv::default()
        }
    }

    #[test]
    fn unit_scales_divide_and_round() {
        let p = params(1.0, 1.0, 1.0);
        for (x, y, want) in [
            (10, 2, 5),
            (9, 4, 2),
            (-10, 3, -3),
            (10, -3, -3),
            (1, 3, 0),
            (127, 1, 127),
        ] {
            assert_eq!(div_quantized(x, y, &p), want, "{x} / {y}");
        }
    }

    #[test]
    fn scaled_quotients_follow_the_real_ratio() {
        // Dividend scale 0.5, divisor 0.25, output 0.1: q = (0.5x)/(0.25y)/0.1.
        let p = params(0.5, 0.25, 0.1);
        for (x, y) in [(3, 5), (-20, 7), (100, 100), (1, 127)] {
            let want = (f64::from(x) * 0.5 / (f64::from(y) * 0.25) / 0.1).round();
            let want = want.clamp(-128.0, 127.0) as i32;
            assert!((div_quantized(x, y, &p) - want).abs() <= 1, "{x} / {y}");
        }
    }

    #[test]
    fn sign_bits_count_like_tflm() {
        use crate::kernels::fixed_point::count_leading_sign_bits as clsb;
        assert_eq!(clsb(0), 31);
        assert_eq!(clsb(-1), 31);
        assert_eq!(clsb(1), 30);
        assert_eq!(clsb(-2), 30);
        assert_eq!(clsb(i32::MAX), 0);
        assert_eq!(clsb(i32::MIN), 0);
        assert_eq!(clsb(255), 23);
    }
}
