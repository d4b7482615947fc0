//! ABS, NEG, SQRT, EXP and LOG: one input, one output of the same type and
//! size, one function per element — bit-exact with TFLM's micro kernels.
//!
//! TFLM's micro kernels take float32 for all five; ABS also takes int8 and
//! int16. Quantised ABS is TFLM's `AbsEvalQuantized`: `|x - in_zp|`, scaled
//! by `in_scale / out_scale` only when the scales differ (the ratio in
//! double, one `MultiplyByQuantizedMultiplier`), plus the output zero
//! point, clamped. int16 needs zero points of 0, or no quantisation at all
//! (then a plain absolute value, where `-32768` stays `-32768` as in C).
//!
//! The float functions are `libm`'s, which host and target share: `fabsf`,
//! negation and `sqrtf` are exact, so they match TFLM bit for bit; EXP
//! uses the runtime's [`expf`](super::float_math::expf) and LOG `logf`,
//! within a few ulp of the C library TFLM calls.

use bytemuck::{Pod, Zeroable};

use super::fixed_point::{multiply_by_quantized_multiplier, quantize_multiplier};
use super::tensor::{check_zero_point, map_elements, quant, require_quant, same_type_and_size};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The ABS kernel.
pub const ABS: Registration = Registration {
    name: "ABS",
    prepare: prepare_abs,
    invoke: invoke_abs,
};

/// The NEG kernel.
pub const NEG: Registration = Registration {
    name: "NEG",
    prepare: prepare_float,
    invoke: |ctx| map_f32(ctx, |x| -x),
};

/// The SQRT kernel.
pub const SQRT: Registration = Registration {
    name: "SQRT",
    prepare: prepare_float,
    invoke: |ctx| map_f32(ctx, libm::sqrtf),
};

/// The EXP kernel.
pub const EXP: Registration = Registration {
    name: "EXP",
    prepare: prepare_float,
    invoke: |ctx| map_f32(ctx, super::float_math::expf),
};

/// The LOG kernel.
pub const LOG: Registration = Registration {
    name: "LOG",
    prepare: prepare_float,
    invoke: |ctx| map_f32(ctx, libm::logf),
};

/// Float32 in, float32 out, of one size; no op data.
fn prepare_float(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let (input, output) = (ctx.input(0)?, ctx.output(0)?);
    same_type_and_size(&input, &output, &[TensorType::FLOAT32])
}

fn map_f32(ctx: &InvokeContext<'_, '_>, f: fn(f32) -> f32) -> Result<(), KernelError> {
    map_elements(&ctx.input(0)?, ctx.output(0)?, f)
}

/// ABS's op data: TFLM's `OpDataAbsRsqrt` less what hilt reads from the
/// tensors at invoke.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
struct AbsData {
    dtype: i32,
    /// 0: float32 or unquantised int16 (a plain absolute value); 1:
    /// quantised, same scales; 2: quantised, rescaled.
    mode: u32,
    input_zero_point: i32,
    output_zero_point: i32,
    multiplier: i32,
    shift: i32,
}

const PLAIN: u32 = 0;
const OFFSET_ONLY: u32 = 1;
const RESCALED: u32 = 2;

fn prepare_abs(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let (input, output) = (ctx.input(0)?, ctx.output(0)?);
    same_type_and_size(
        &input,
        &output,
        &[TensorType::FLOAT32, TensorType::INT8, TensorType::INT16],
    )?;
    let mut data = AbsData {
        dtype: i32::from(output.dtype.0),
        ..AbsData::default()
    };
    let quantised = input.dtype == TensorType::INT8
        || (input.dtype == TensorType::INT16 && quant(&input).is_some());
    if quantised {
        let (qi, qo) = (require_quant(&input)?, require_quant(&output)?);
        if input.dtype == TensorType::INT16 {
            check_zero_point(input.index, qi, 0..=0)?;
            check_zero_point(output.index, qo, 0..=0)?;
        }
        data.input_zero_point = qi.zero_point;
        data.output_zero_point = qo.zero_point;
        data.mode = OFFSET_ONLY;
        if qi.scale != qo.scale {
            data.mode = RESCALED;
            (data.multiplier, data.shift) =
                quantize_multiplier(f64::from(qi.scale) / f64::from(qo.scale));
        }
    }
    ctx.store(&data)
}

/// One quantised absolute value, TFLM's `AbsEvalQuantized`, clamped to
/// `lo..=hi` (the type's range).
#[inline(always)]
fn abs_quantized(x: i32, d: &AbsData, (lo, hi): (i32, i32)) -> i32 {
    let value = (x - d.input_zero_point).abs();
    let scaled = if d.mode == RESCALED {
        multiply_by_quantized_multiplier(value, d.multiplier, d.shift)
    } else {
        value
    };
    (scaled + d.output_zero_point).clamp(lo, hi)
}

fn invoke_abs(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &AbsData = ctx.op_data()?;
    if TensorType(data.dtype as i8) == TensorType::FLOAT32 {
        return map_f32(ctx, libm::fabsf);
    }
    let (input, output) = (ctx.input(0)?, ctx.output(0)?);
    match (TensorType(data.dtype as i8), data.mode) {
        (TensorType::INT8, _) => map_elements(&input, output, |x: i8| {
            abs_quantized(i32::from(x), data, (-128, 127)) as i8
        }),
        (TensorType::INT16, PLAIN) => map_elements(&input, output, i16::wrapping_abs),
        (TensorType::INT16, _) => map_elements(&input, output, |x: i16| {
            abs_quantized(i32::from(x), data, (-32768, 32767)) as i16
        }),
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantised_abs_offsets_then_scales() {
        let same = AbsData {
            mode: OFFSET_ONLY,
            input_zero_point: -3,
            output_zero_point: -3,
            ..AbsData::default()
        };
        assert_eq!(abs_quantized(-13, &same, (-128, 127)), 7);
        assert_eq!(abs_quantized(7, &same, (-128, 127)), 7);
        assert_eq!(abs_quantized(-128, &same, (-128, 127)), 122);
        let (multiplier, shift) = quantize_multiplier(0.5);
        let halved = AbsData {
            mode: RESCALED,
            multiplier,
            shift,
            ..AbsData::default()
        };
        assert_eq!(abs_quantized(-5, &halved, (-128, 127)), 3);
        assert_eq!(abs_quantized(-128, &halved, (-128, 127)), 64);
    }
}
