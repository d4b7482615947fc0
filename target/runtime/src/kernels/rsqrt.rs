//! RSQRT: `1 / sqrt(x)` — float32, int8 and int16, bit-exact with TFLM's
//! kernel.
//!
//! int8 is TFLM's `RsqrtEvalQuantized`: the input less its zero point goes
//! through `GetInvSqrtQuantizedMultiplierExp` (a five-step Newton-Raphson
//! in Q3.28 fixed point), which is applied to 1 with 20 bits of headroom
//! and then scaled by `1 / (sqrt(in_scale) · out_scale)` (the square root
//! and product in float, the reciprocal in double, as TFLM). A zero input
//! gives the type's maximum. The output depends only on the input byte, so
//! prepare tabulates all 256; an input below the zero point (a negative
//! real value) fails the invoke with a typed error, as it fails TFLM's.
//! int16 is the same formula per element, clamped to int16.

use bytemuck::{Pod, Zeroable};

use super::context::Stored;
use super::fixed_point::{
    multiply_by_quantized_multiplier, quantize_multiplier, rescale, rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
};
use super::tensor::{Dims, check_zero_point, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The RSQRT kernel.
pub const REGISTRATION: Registration = Registration {
    name: "RSQRT",
    prepare,
    invoke,
};

#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct RsqrtData {
    dtype: i32,
    input_zero_point: i32,
    /// int16: the output scaling and zero point.
    multiplier: i32,
    shift: i32,
    output_zero_point: i32,
    _reserved: u32,
    /// int8: output for input byte `b` (as `u8`) at index `b`.
    table: Stored<i8>,
}

/// gemmlowp's `GetInvSqrtQuantizedMultiplierExp(input, kReverseShift)`:
/// `1/sqrt(input)` as a Q0.31 multiplier and a (left) shift.
pub fn inv_sqrt_quantized_multiplier_exp(mut input: i32) -> (i32, i32) {
    if input <= 1 {
        return (i32::MAX, 0);
    }
    let mut shift = 11;
    while input >= 1 << 29 {
        input /= 4;
        shift += 1;
    }
    let max_left_shift_bits = (input as u32).leading_zeros() as i32 - 1;
    let left_shift_bit_pairs = max_left_shift_bits / 2 - 1;
    shift -= left_shift_bit_pairs;
    input <<= 2 * left_shift_bit_pairs;
    // Q3.28 arithmetic: a product of two Q3 values is Q6, of three Q9.
    let mul = saturating_rounding_doubling_high_mul;
    let fixed_input = input >> 1;
    let half_input = rounding_divide_by_pot(fixed_input, 1);
    let half_three = (1 << 28) + (1 << 27);
    let mut x: i32 = 1 << 28;
    for _ in 0..5 {
        let x3 = rescale(mul(mul(x, x), x), 9, 3);
        x = rescale(mul(half_three, x).wrapping_sub(mul(half_input, x3)), 6, 3);
    }
    // Times sqrt(2)/2 in Q0.
    let mut inv_sqrt = mul(x, 1_518_500_250);
    if shift < 0 {
        inv_sqrt <<= -shift;
        shift = 0;
    }
    (inv_sqrt, -shift)
}

/// One element of TFLM's quantised RSQRT (`value` already less the input
/// zero point, non-negative), clamped to `lo..=hi` (a zero gives `hi`).
pub(crate) fn rsqrt_quantized(
    value: i32,
    multiplier: i32,
    shift: i32,
    output_zero_point: i32,
    (lo, hi): (i32, i32),
) -> i32 {
    const HEADROOM: i32 = 20;
    if value == 0 {
        return hi;
    }
    let (inv_m, inv_s) = inv_sqrt_quantized_multiplier_exp(value);
    let data = multiply_by_quantized_multiplier(1, inv_m, inv_s + HEADROOM);
    let out =
        multiply_by_quantized_multiplier(data, multiplier, shift - HEADROOM) + output_zero_point;
    out.clamp(lo, hi)
}

/// [`rsqrt_quantized`] for int8.
pub(crate) fn rsqrt_int8(value: i32, multiplier: i32, shift: i32, output_zero_point: i32) -> i8 {
    rsqrt_quantized(value, multiplier, shift, output_zero_point, (-128, 127)) as i8
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
    let mut data = RsqrtData {
        dtype: i32::from(output.dtype.0),
        input_zero_point: 0,
        multiplier: 0,
        shift: 0,
        output_zero_point: 0,
        _reserved: 0,
        table: Zeroable::zeroed(),
    };
    match output.dtype {
        TensorType::FLOAT32 => {}
        TensorType::INT16 => {
            let (qi, qo) = (require_quant(&input)?, require_quant(&output)?);
            for (t, q) in [(&input, qi), (&output, qo)] {
                check_zero_point(t.index, q, -32768..=32767)?;
            }
            let scale = 1.0 / f64::from(libm::sqrtf(qi.scale) * qo.scale);
            (data.multiplier, data.shift) = quantize_multiplier(scale);
            data.input_zero_point = qi.zero_point;
            data.output_zero_point = qo.zero_point;
        }
        TensorType::INT8 => {
            let (qi, qo) = (require_quant(&input)?, require_quant(&output)?);
            for (t, q) in [(&input, qi), (&output, qo)] {
                check_zero_point(t.index, q, -128..=127)?;
            }
            let scale = 1.0 / f64::from(libm::sqrtf(qi.scale) * qo.scale);
            let (multiplier, shift) = quantize_multiplier(scale);
            data.input_zero_point = qi.zero_point;
            data.table = ctx.store_from_fn(256, |b| {
                let value = i32::from(b as u8 as i8) - qi.zero_point;
                // Entries below the zero point are never read (invoke refuses them).
                if value < 0 {
                    0
                } else {
                    rsqrt_int8(value, multiplier, shift, qo.zero_point)
                }
            })?;
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

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &RsqrtData = ctx.op_data()?;
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    match TensorType(data.dtype as i8) {
        TensorType::FLOAT32 => {
            for (o, &x) in output
                .values::<f32>()?
                .iter_mut()
                .zip(input.values::<f32>()?)
            {
                *o = 1.0 / libm::sqrtf(x);
            }
        }
        TensorType::INT8 => {
            let table = ctx.stored(data.table)?;
            let (x, out) = (input.values::<i8>()?, output.values::<i8>()?);
            if x.iter().any(|&v| i32::from(v) < data.input_zero_point) {
                return Err(KernelError::UnsupportedParameter {
                    what: "RSQRT of a negative value",
                });
            }
            for (o, &v) in out.iter_mut().zip(x) {
                *o = table[v as u8 as usize];
            }
        }
        TensorType::INT16 => {
            let (x, out) = (input.values::<i16>()?, output.values::<i16>()?);
            for (o, &v) in out.iter_mut().zip(x) {
                let value = i32::from(v) - data.input_zero_point;
                if value < 0 {
                    return Err(KernelError::UnsupportedParameter {
                        what: "RSQRT of a negative value",
                    });
                }
                let range = (-32768, 32767);
                *o = rsqrt_quantized(
                    value,
                    data.multiplier,
                    data.shift,
                    data.output_zero_point,
                    range,
                ) as i16;
            }
        }
        _ => return Err(KernelError::Internal),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_square_roots_are_close_to_exact() {
        // Five Newton steps from 1 in Q3.28 leave about 1e-6 of error.
        for v in [2, 3, 4, 10, 100, 255, 1000, 1 << 20, 1 << 30] {
            let (m, s) = inv_sqrt_quantized_multiplier_exp(v);
            let got = f64::from(m) / f64::from(1u32 << 31) * 2f64.powi(s);
            let want = 1.0 / f64::from(v).sqrt();
            assert!((got - want).abs() <= want * 1e-5, "{v}: {got} vs {want}");
        }
        assert_eq!(inv_sqrt_quantized_multiplier_exp(1), (i32::MAX, 0));
    }

    #[test]
    fn int8_rsqrt_of_four_is_a_half() {
        // Input scale 1, output scale 1/64: rsqrt(4) = 0.5 → 32.
        let (m, s) = quantize_multiplier(1.0 / f64::from(1.0f32 * (1.0 / 64.0)));
        assert_eq!(rsqrt_int8(4, m, s, 0), 32);
        assert_eq!(rsqrt_int8(0, m, s, 0), 127);
        assert_eq!(rsqrt_int8(1, m, s, 0), 64);
    }
}
