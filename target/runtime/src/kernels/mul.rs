//! MUL: element-wise product with NumPy-style broadcasting (up to six
//! dimensions) — float32, int8, int16 and int32 — bit-exact with TFLM's
//! reference kernels.
//!
//! The quantised form is TFLM's `MulElementwise`: both inputs less their
//! zero points are multiplied in 32 bits, the product scaled by one
//! multiplier (`s1 · s2 / s_out`, quantised once in prepare), offset by the
//! output zero point and clamped to the fused activation's range. TFLM
//! requires zero points of 0 for int16, and so does hilt. The broadcast walk
//! is ADD's [`Broadcast`].

use bytemuck::{Pod, Zeroable};

use super::add::{Binary, Broadcast};
use super::fixed_point::{
    activation_range_float, activation_range_quantized, multiply_by_quantized_multiplier,
    quantize_multiplier,
};
use super::tensor::{quant, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::model::TensorInfo;
use crate::schema::{ActivationFunctionType, TensorType};

/// The MUL kernel.
pub const REGISTRATION: Registration = Registration {
    name: "MUL",
    prepare,
    invoke,
};

/// TFLM's `OpDataMul` (quantised part).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct QuantizedMul {
    pub(crate) input1_offset: i32,
    pub(crate) input2_offset: i32,
    pub(crate) output_offset: i32,
    pub(crate) multiplier: i32,
    pub(crate) shift: i32,
    pub(crate) activation_min: i32,
    pub(crate) activation_max: i32,
}

impl QuantizedMul {
    /// One quantised product, exactly TFLM's loop body.
    #[inline(always)]
    pub(crate) fn apply(&self, x: i32, y: i32) -> i32 {
        let product = (x + self.input1_offset).wrapping_mul(y + self.input2_offset);
        let raw = self.output_offset
            + multiply_by_quantized_multiplier(product, self.multiplier, self.shift);
        raw.max(self.activation_min).min(self.activation_max)
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct MulData {
    dtype: i32,
    activation_min_f32: f32,
    activation_max_f32: f32,
    quantized: QuantizedMul,
    walk: Broadcast,
}

/// The int8/int16 parameters (TFLM's `CalculateOpDataMul`).
fn quantized_params(
    input1: &TensorInfo<'_>,
    input2: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
    activation: ActivationFunctionType,
) -> Result<QuantizedMul, KernelError> {
    let (q1, q2, qo) = (
        require_quant(input1)?,
        require_quant(input2)?,
        require_quant(output)?,
    );
    let (lo, hi) = if output.dtype == TensorType::INT8 {
        (-128, 127)
    } else {
        (-32768, 32767)
    };
    for (t, q) in [(input1, q1), (input2, q2), (output, qo)] {
        let zero_points = if output.dtype == TensorType::INT16 {
            0..=0
        } else {
            lo..=hi
        };
        super::tensor::check_zero_point(t.index, q, zero_points)?;
    }
    let real = f64::from(q1.scale) * f64::from(q2.scale) / f64::from(qo.scale);
    let (multiplier, shift) = quantize_multiplier(real);
    let (activation_min, activation_max) =
        activation_range_quantized(activation, qo.scale, qo.zero_point, lo, hi);
    Ok(QuantizedMul {
        input1_offset: -q1.zero_point,
        input2_offset: -q2.zero_point,
        output_offset: qo.zero_point,
        multiplier,
        shift,
        activation_min,
        activation_max,
    })
}

/// TFLM's `CalculateActivationRange` for int32 outputs.
fn activation_range_i32(activation: ActivationFunctionType) -> (i32, i32) {
    match activation {
        ActivationFunctionType::RELU => (0, i32::MAX),
        ActivationFunctionType::RELU6 => (0, 6),
        ActivationFunctionType::RELU_N1_TO_1 => (-1, 1),
        _ => (i32::MIN, i32::MAX),
    }
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
        .builtin_options_as_mul_options()
        .map_or(ActivationFunctionType::NONE, |o| {
            o.fused_activation_function()
        });
    let mut data = MulData {
        dtype: i32::from(output.dtype.0),
        activation_min_f32: 0.0,
        activation_max_f32: 0.0,
        quantized: QuantizedMul::default(),
        walk,
    };
    match output.dtype {
        TensorType::FLOAT32 => {
            (data.activation_min_f32, data.activation_max_f32) = activation_range_float(activation);
        }
        TensorType::INT8 | TensorType::INT16 => {
            data.quantized = quantized_params(&input1, &input2, &output, activation)?;
        }
        TensorType::INT32 => {
            if [&input1, &input2, &output]
                .iter()
                .any(|t| quant(t).is_some())
            {
                return Err(KernelError::UnsupportedParameter {
                    what: "MUL int32 tensors must not be quantised",
                });
            }
            let (lo, hi) = activation_range_i32(activation);
            data.quantized.activation_min = lo;
            data.quantized.activation_max = hi;
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
    let data: &MulData = ctx.op_data()?;
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
                // TFLM: min(max(x · y, lo), hi).
                |x, y| {
                    let v = x * y;
                    let v = if v < lo { lo } else { v };
                    if hi < v { hi } else { v }
                },
            )
        }
        TensorType::INT8 => data.walk.run(
            input1.values::<i8>()?,
            input2.values::<i8>()?,
            output.values::<i8>()?,
            |x, y| p.apply(i32::from(x), i32::from(y)) as i8,
        ),
        TensorType::INT16 => data.walk.run(
            input1.values::<i16>()?,
            input2.values::<i16>()?,
            output.values::<i16>()?,
            |x, y| p.apply(i32::from(x), i32::from(y)) as i16,
        ),
        TensorType::INT32 => data.walk.run(
            input1.values::<i32>()?,
            input2.values::<i32>()?,
            output.values::<i32>()?,
            |x, y| {
                x.wrapping_mul(y)
                    .max(p.activation_min)
                    .min(p.activation_max)
            },
        ),
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_are_scaled_and_offset() {
        // Scales 0.5 · 0.5 / 0.25 = 1: the product of the offset inputs.
        let (multiplier, shift) = quantize_multiplier(1.0);
        let p = QuantizedMul {
            input1_offset: -1,
            input2_offset: 2,
            output_offset: 3,
            multiplier,
            shift,
            activation_min: -128,
            activation_max: 127,
        };
        // (5 - 1) · (-4 + 2) + 3 = -5.
        assert_eq!(p.apply(5, -4), -5);
        // Saturates at the range: (127 - 1) · (127 + 2) + 3.
        assert_eq!(p.apply(127, 127), 127);
        // Scale 1/3: 3 · 5 / 3 = 5; 4 · 5 / 3 = 6.67 → 7.
        let (multiplier, shift) = quantize_multiplier(1.0 / 3.0);
        let p = QuantizedMul {
            input1_offset: 0,
            input2_offset: 0,
            output_offset: 0,
            multiplier,
            shift,
            activation_min: -128,
            activation_max: 127,
        };
        assert_eq!(p.apply(3, 5), 5);
        assert_eq!(p.apply(4, 5), 7);
        assert_eq!(p.apply(-4, 5), -7);
    }
}
