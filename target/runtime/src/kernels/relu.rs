//! RELU and RELU6 as operators (not fused activations) — int8, int16 and
//! float32, bit-exact with TFLM's micro kernels.
//!
//! Quantised RELU requantises (TFLM's `ReluQuantized`): `x - in_zp` is
//! scaled by `in_scale / out_scale` (the ratio in double, one
//! `MultiplyByQuantizedMultiplier`), the output zero point added, and the
//! result clamped below at the output's zero (the zero point) and above at
//! the type's maximum. int16 takes zero points of 0 only, as TFLM.
//!
//! Quantised RELU6 clamps the stored values between the input's quantised 0
//! and 6 and does not requantise, so the output must share the input's
//! quantisation: hilt refuses an output that does not (TFLM would write
//! values on the input's scale into it).

use bytemuck::{Pod, Zeroable};

use super::fixed_point::{multiply_by_quantized_multiplier, quantize_multiplier, round_half_away};
use super::tensor::{check_zero_point, map_elements, quant, require_quant, same_type_and_size};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The RELU kernel.
pub const RELU: Registration = Registration {
    name: "RELU",
    prepare: prepare_relu,
    invoke: invoke_relu,
};

/// The RELU6 kernel.
pub const RELU6: Registration = Registration {
    name: "RELU6",
    prepare: prepare_relu6,
    invoke: invoke_relu6,
};

const TYPES: [TensorType; 3] = [TensorType::FLOAT32, TensorType::INT8, TensorType::INT16];

/// TFLM's `ReluParams` as RELU uses them.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
struct ReluData {
    dtype: i32,
    input_zero_point: i32,
    output_zero_point: i32,
    multiplier: i32,
    shift: i32,
    min: i32,
    max: i32,
}

/// The range of an integer tensor type.
fn type_range(dtype: TensorType) -> (i32, i32) {
    if dtype == TensorType::INT8 {
        (-128, 127)
    } else {
        (-32768, 32767)
    }
}

fn prepare_relu(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let (input, output) = (ctx.input(0)?, ctx.output(0)?);
    same_type_and_size(&input, &output, &TYPES)?;
    let mut data = ReluData {
        dtype: i32::from(output.dtype.0),
        ..ReluData::default()
    };
    if input.dtype != TensorType::FLOAT32 {
        let (qi, qo) = (require_quant(&input)?, require_quant(&output)?);
        if input.dtype == TensorType::INT16 {
            check_zero_point(input.index, qi, 0..=0)?;
            check_zero_point(output.index, qo, 0..=0)?;
        }
        let (lo, hi) = type_range(input.dtype);
        (data.multiplier, data.shift) =
            quantize_multiplier(f64::from(qi.scale) / f64::from(qo.scale));
        data.input_zero_point = qi.zero_point;
        data.output_zero_point = qo.zero_point;
        // TFLM: zero point plus roundf(0 / scale), which is the zero point.
        data.min = lo.max(qo.zero_point);
        data.max = hi;
    }
    ctx.store(&data)
}

/// One quantised RELU, TFLM's `ReluQuantized` body.
#[inline(always)]
fn relu_quantized(x: i32, d: &ReluData) -> i32 {
    let scaled = multiply_by_quantized_multiplier(x - d.input_zero_point, d.multiplier, d.shift);
    (d.output_zero_point + scaled).clamp(d.min, d.max)
}

fn invoke_relu(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &ReluData = ctx.op_data()?;
    let (input, output) = (ctx.input(0)?, ctx.output(0)?);
    match TensorType(data.dtype as i8) {
        // `x < 0 ? 0 : x`: NaN and -0.0 pass through, as in TFLM.
        TensorType::FLOAT32 => map_elements(&input, output, |x: f32| if x < 0.0 { 0.0 } else { x }),
        TensorType::INT8 => map_elements(&input, output, |x: i8| {
            relu_quantized(i32::from(x), data) as i8
        }),
        TensorType::INT16 => map_elements(&input, output, |x: i16| {
            relu_quantized(i32::from(x), data) as i16
        }),
        _ => Err(KernelError::Internal),
    }
}

/// RELU6's op data: TFLM's `Relu6OpData` (the input's quantised 0 and 6).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
struct Relu6Data {
    dtype: i32,
    zero: i32,
    six: i32,
}

fn prepare_relu6(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let (input, output) = (ctx.input(0)?, ctx.output(0)?);
    same_type_and_size(&input, &output, &TYPES)?;
    let mut data = Relu6Data {
        dtype: i32::from(output.dtype.0),
        ..Relu6Data::default()
    };
    if input.dtype != TensorType::FLOAT32 {
        let qi = require_quant(&input)?;
        if quant(&output) != Some(qi) {
            return Err(KernelError::UnsupportedParameter {
                what: "RELU6 output must share the input's quantisation",
            });
        }
        let (lo, hi) = type_range(input.dtype);
        // TFLM's FloatToQuantizedType: round(6 / scale) + zero point, clamped.
        let six = round_half_away(f64::from(6.0 / qi.scale)) as i64 + i64::from(qi.zero_point);
        data.zero = qi.zero_point;
        data.six = six.clamp(i64::from(lo), i64::from(hi)) as i32;
    }
    ctx.store(&data)
}

/// `x > six ? six : x < zero ? zero : x`, TFLM's order of comparisons.
#[inline(always)]
fn clamp_between<T: PartialOrd>(x: T, zero: T, six: T) -> T {
    if x > six {
        six
    } else if x < zero {
        zero
    } else {
        x
    }
}

fn invoke_relu6(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &Relu6Data = ctx.op_data()?;
    let (input, output) = (ctx.input(0)?, ctx.output(0)?);
    match TensorType(data.dtype as i8) {
        TensorType::FLOAT32 => map_elements(&input, output, |x: f32| clamp_between(x, 0.0, 6.0)),
        TensorType::INT8 => {
            let (zero, six) = (data.zero as i8, data.six as i8);
            map_elements(&input, output, |x: i8| clamp_between(x, zero, six))
        }
        TensorType::INT16 => {
            let (zero, six) = (data.zero as i16, data.six as i16);
            map_elements(&input, output, |x: i16| clamp_between(x, zero, six))
        }
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_relu6_keeps_tflms_comparison_order() {
        assert_eq!(clamp_between(7.0f32, 0.0, 6.0), 6.0);
        assert_eq!(clamp_between(-1.0f32, 0.0, 6.0), 0.0);
        assert!(clamp_between(f32::NAN, 0.0, 6.0).is_nan());
        assert!(clamp_between(-0.0f32, 0.0, 6.0).is_sign_negative());
    }

    #[test]
    fn quantised_relu_rescales_and_clamps_at_the_zero_point() {
        let (multiplier, shift) = quantize_multiplier(2.0);
        let d = ReluData {
            dtype: 9,
            input_zero_point: 10,
            output_zero_point: -5,
            multiplier,
            shift,
            min: -5,
            max: 127,
        };
        assert_eq!(relu_quantized(0, &d), -5);
        assert_eq!(relu_quantized(20, &d), 15);
        assert_eq!(relu_quantized(127, &d), 127);
    }
}
