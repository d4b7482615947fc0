//! SQUARED_DIFFERENCE: `(a - b)²` element-wise with broadcasting — int8,
//! int16, float32 and int32, bit-exact with TFLM's kernel.
//!
//! The quantised form is TFLM's: both inputs less their zero points are
//! shifted left (7 bits for int8, none for int16, whose zero points must be
//! 0), scaled to a common scale (each input's scale over twice the larger),
//! subtracted, squared in 32 bits, and the square scaled by `(2·max_scale)² /
//! (2^(2·shift) · out_scale)`, offset and clamped to the type.

use bytemuck::{Pod, Zeroable};

use super::add::{Binary, Broadcast};
use super::fixed_point::{
    multiply_by_quantized_multiplier, multiply_by_quantized_multiplier_smaller_than_one,
    quantize_multiplier, quantize_multiplier_smaller_than_one_exp,
};
use super::tensor::{check_zero_point, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::model::TensorInfo;
use crate::schema::TensorType;

/// The SQUARED_DIFFERENCE kernel.
pub const REGISTRATION: Registration = Registration {
    name: "SQUARED_DIFFERENCE",
    prepare,
    invoke,
};

/// TFLM's `ArithmeticParams` as its squared difference uses them.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct QuantizedSquaredDifference {
    pub(crate) input1_offset: i32,
    pub(crate) input2_offset: i32,
    pub(crate) output_offset: i32,
    pub(crate) left_shift: i32,
    pub(crate) input1_multiplier: i32,
    pub(crate) input1_shift: i32,
    pub(crate) input2_multiplier: i32,
    pub(crate) input2_shift: i32,
    pub(crate) output_multiplier: i32,
    pub(crate) output_shift: i32,
    pub(crate) min: i32,
    pub(crate) max: i32,
}

impl QuantizedSquaredDifference {
    /// One element, exactly TFLM's `SquaredDifference(x, y, params)`.
    #[inline(always)]
    pub(crate) fn apply(&self, x: i32, y: i32) -> i32 {
        let scale = |v: i32, m: i32, s: i32| {
            multiply_by_quantized_multiplier_smaller_than_one(v * (1 << self.left_shift), m, s)
        };
        let a = scale(
            self.input1_offset + x,
            self.input1_multiplier,
            self.input1_shift,
        );
        let b = scale(
            self.input2_offset + y,
            self.input2_multiplier,
            self.input2_shift,
        );
        let d = a - b;
        let raw = multiply_by_quantized_multiplier(
            d.wrapping_mul(d),
            self.output_multiplier,
            self.output_shift,
        ) + self.output_offset;
        raw.max(self.min).min(self.max)
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct Data {
    dtype: i32,
    quantized: QuantizedSquaredDifference,
    walk: Broadcast,
}

fn quantized_params(
    input1: &TensorInfo<'_>,
    input2: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
) -> Result<QuantizedSquaredDifference, KernelError> {
    let (q1, q2, qo) = (
        require_quant(input1)?,
        require_quant(input2)?,
        require_quant(output)?,
    );
    let int8 = output.dtype == TensorType::INT8;
    let (min, max, left_shift) = if int8 {
        (-128, 127, 7)
    } else {
        (-32768, 32767, 0)
    };
    for (t, q) in [(input1, q1), (input2, q2), (output, qo)] {
        check_zero_point(t.index, q, if int8 { min..=max } else { 0..=0 })?;
    }
    let twice_max = 2.0 * f64::from(q1.scale.max(q2.scale));
    let bad = KernelError::UnsupportedParameter {
        what: "SQUARED_DIFFERENCE input scale",
    };
    let (input1_multiplier, input1_shift) =
        quantize_multiplier_smaller_than_one_exp(f64::from(q1.scale) / twice_max).ok_or(bad)?;
    let (input2_multiplier, input2_shift) =
        quantize_multiplier_smaller_than_one_exp(f64::from(q2.scale) / twice_max).ok_or(bad)?;
    let real_output =
        twice_max * twice_max / (f64::from(1 << (left_shift * 2)) * f64::from(qo.scale));
    let (output_multiplier, output_shift) = quantize_multiplier(real_output);
    Ok(QuantizedSquaredDifference {
        input1_offset: -q1.zero_point,
        input2_offset: -q2.zero_point,
        output_offset: qo.zero_point,
        left_shift,
        input1_multiplier,
        input1_shift,
        input2_multiplier,
        input2_shift,
        output_multiplier,
        output_shift,
        min,
        max,
    })
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let Binary {
        input1,
        input2,
        output,
        walk,
    } = Binary::prepare(ctx)?;
    let quantized = match output.dtype {
        TensorType::FLOAT32 | TensorType::INT32 => QuantizedSquaredDifference::default(),
        TensorType::INT8 | TensorType::INT16 => quantized_params(&input1, &input2, &output)?,
        other => {
            return Err(KernelError::UnsupportedType {
                tensor: output.index,
                dtype: other.0,
            });
        }
    };
    ctx.store(&Data {
        dtype: i32::from(output.dtype.0),
        quantized,
        walk,
    })
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &Data = ctx.op_data()?;
    let (a, b, out) = (ctx.input(0)?, ctx.input(1)?, ctx.output(0)?);
    let (w, p) = (&data.walk, data.quantized);
    match TensorType(data.dtype as i8) {
        TensorType::FLOAT32 => w.run(
            a.values::<f32>()?,
            b.values::<f32>()?,
            out.values::<f32>()?,
            |x, y| {
                let d = x - y;
                d * d
            },
        ),
        TensorType::INT32 => w.run(
            a.values::<i32>()?,
            b.values::<i32>()?,
            out.values::<i32>()?,
            |x, y| {
                let d = x.wrapping_sub(y);
                d.wrapping_mul(d)
            },
        ),
        TensorType::INT8 => w.run(
            a.values::<i8>()?,
            b.values::<i8>()?,
            out.values::<i8>()?,
            |x, y| p.apply(i32::from(x), i32::from(y)) as i8,
        ),
        TensorType::INT16 => w.run(
            a.values::<i16>()?,
            b.values::<i16>()?,
            out.values::<i16>()?,
            |x, y| p.apply(i32::from(x), i32::from(y)) as i16,
        ),
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squares_the_difference_of_equal_scales() {
        // Scales 1 in, 1 out (int8, zero points 0): (5 - 2)² = 9, (-4 - 4)² = 64,
        // (100 - -100)² saturates.
        let twice = 2.0f64;
        let (m, s) = quantize_multiplier_smaller_than_one_exp(1.0 / twice).unwrap();
        let (mo, so) = quantize_multiplier(twice * twice / f64::from(1 << 14));
        let p = QuantizedSquaredDifference {
            left_shift: 7,
            input1_multiplier: m,
            input1_shift: s,
            input2_multiplier: m,
            input2_shift: s,
            output_multiplier: mo,
            output_shift: so,
            min: -128,
            max: 127,
            ..QuantizedSquaredDifference::default()
        };
        assert_eq!(p.apply(5, 2), 9);
        assert_eq!(p.apply(-4, 4), 64);
        assert_eq!(p.apply(100, -100), 127);
    }
}
