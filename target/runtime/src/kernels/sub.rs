//! SUB: element-wise difference with NumPy-style broadcasting (up to six
//! dimensions) — float32, int8, int16 and unquantised int32 — bit-exact
//! with TFLM's reference kernels.
//!
//! The quantised form is ADD's (TFLM computes the same `OpDataSub` as
//! `OpDataAdd`): both inputs offset, shifted left (20 bits for int8, 15 for
//! int16) and scaled by their multipliers, then the second subtracted from
//! the first and the difference requantised and clamped. The broadcast walk
//! is ADD's [`Broadcast`].

use bytemuck::{Pod, Zeroable};

use super::add::{Binary, Broadcast, QuantizedAdd, finish, quantized_params, scale_input};
use super::fixed_point::activation_range_float;
use super::tensor::quant;
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::{ActivationFunctionType, TensorType};

/// The SUB kernel.
pub const REGISTRATION: Registration = Registration {
    name: "SUB",
    prepare,
    invoke,
};

#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct SubData {
    dtype: i32,
    activation_min_f32: f32,
    activation_max_f32: f32,
    quantized: QuantizedAdd,
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
        .builtin_options_as_sub_options()
        .map_or(ActivationFunctionType::NONE, |o| {
            o.fused_activation_function()
        });
    let mut data = SubData {
        dtype: i32::from(output.dtype.0),
        activation_min_f32: 0.0,
        activation_max_f32: 0.0,
        quantized: QuantizedAdd::default(),
        walk,
    };
    match output.dtype {
        TensorType::FLOAT32 => {
            (data.activation_min_f32, data.activation_max_f32) = activation_range_float(activation);
        }
        TensorType::INT8 | TensorType::INT16 => {
            data.quantized = quantized_params(&input1, &input2, &output, activation, "SUB")?.1;
        }
        TensorType::INT32 => {
            for t in [&input1, &input2] {
                if quant(t).is_some() {
                    return Err(KernelError::UnsupportedParameter {
                        what: "SUB int32 inputs must not be quantised",
                    });
                }
            }
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

/// One quantised difference, exactly TFLM's `SubFunc`.
#[inline(always)]
pub(crate) fn sub_quantized(x: i32, y: i32, p: &QuantizedAdd) -> i32 {
    let scaled1 = scale_input(
        x,
        p.input1_offset,
        p.left_shift,
        p.input1_multiplier,
        p.input1_shift,
    );
    let scaled2 = scale_input(
        y,
        p.input2_offset,
        p.left_shift,
        p.input2_multiplier,
        p.input2_shift,
    );
    finish(scaled1 - scaled2, p)
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &SubData = ctx.op_data()?;
    let input1 = ctx.input(0)?;
    let input2 = ctx.input(1)?;
    let output = ctx.output(0)?;
    let p = data.quantized;
    match TensorType(data.dtype as i8) {
        TensorType::FLOAT32 => {
            let (lo, hi) = (data.activation_min_f32, data.activation_max_f32);
            data.walk.run(
                input1.values::<f32>()?,
                input2.values::<f32>()?,
                output.values::<f32>()?,
                // TFLM: min(max(x - y, lo), hi).
                |x, y| {
                    let d = x - y;
                    let d = if d < lo { lo } else { d };
                    if hi < d { hi } else { d }
                },
            )
        }
        TensorType::INT8 => data.walk.run(
            input1.values::<i8>()?,
            input2.values::<i8>()?,
            output.values::<i8>()?,
            |x, y| sub_quantized(i32::from(x), i32::from(y), &p) as i8,
        ),
        TensorType::INT16 => data.walk.run(
            input1.values::<i16>()?,
            input2.values::<i16>()?,
            output.values::<i16>()?,
            |x, y| sub_quantized(i32::from(x), i32::from(y), &p) as i16,
        ),
        TensorType::INT32 => data.walk.run(
            input1.values::<i32>()?,
            input2.values::<i32>()?,
            output.values::<i32>()?,
            i32::wrapping_sub,
        ),
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fixed_point::quantize_multiplier_smaller_than_one_exp;

    /// Parameters as prepare makes them for equal input scales `s` and
    /// output scale `so`, zero points 0 (int8).
    fn params(s: f32, so: f32) -> QuantizedAdd {
        let twice = 2.0 * f64::from(s);
        let (m1, s1) = quantize_multiplier_smaller_than_one_exp(f64::from(s) / twice).unwrap();
        let (mo, sh) =
            quantize_multiplier_smaller_than_one_exp(twice / (f64::from(1 << 20) * f64::from(so)))
                .unwrap();
        QuantizedAdd {
            input1_offset: 0,
            input2_offset: 0,
            output_offset: 0,
            left_shift: 20,
            input1_multiplier: m1,
            input1_shift: s1,
            input2_multiplier: m1,
            input2_shift: s1,
            output_multiplier: mo,
            output_shift: sh,
            activation_min: -128,
            activation_max: 127,
        }
    }

    #[test]
    fn same_scales_subtract_exactly() {
        let p = params(0.1, 0.1);
        for (x, y, want) in [
            (10, 3, 7),
            (-5, 5, -10),
            (100, -100, 127),
            (-100, 100, -128),
        ] {
            assert_eq!(sub_quantized(x, y, &p), want, "{x} - {y}");
        }
    }

    #[test]
    fn a_coarser_output_halves_the_difference() {
        // Output scale twice the inputs': 7 - 2 = 5 real steps → 2.5 → 3
        // (rounding half away from zero); -5 → -3.
        let p = params(0.5, 1.0);
        assert_eq!(sub_quantized(7, 2, &p), 3);
        assert_eq!(sub_quantized(2, 7, &p), -3);
    }
}
