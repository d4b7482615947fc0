//! PRELU: `x` for `x ≥ 0`, `alpha · x` otherwise with a learned `alpha`
//! tensor broadcast against the input — float32, int8 (int8 alpha) and
//! int16 (int8 alpha), bit-exact with TFLM's reference kernel.
//!
//! The quantised form is TFLM's `BroadcastPrelu4DSlow`: the input less its
//! zero point is scaled by `in_scale / out_scale` when non-negative, else
//! multiplied by the alpha less its zero point and scaled by `in_scale ·
//! alpha_scale / out_scale`; then offset by the output zero point and
//! clamped to the type. The broadcast walk is ADD's [`Broadcast`].

use bytemuck::{Pod, Zeroable};

use super::add::Broadcast;
use super::fixed_point::{multiply_by_quantized_multiplier, quantize_multiplier};
use super::quantize::QuantizedInt;
use super::tensor::{Dims, check_zero_point, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::model::TensorInfo;
use crate::schema::TensorType;

/// The PRELU kernel.
pub const REGISTRATION: Registration = Registration {
    name: "PRELU",
    prepare,
    invoke,
};

/// TFLM's `PreluParams`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct QuantizedPrelu {
    pub(crate) input_offset: i32,
    pub(crate) alpha_offset: i32,
    pub(crate) output_offset: i32,
    pub(crate) multiplier_1: i32,
    pub(crate) shift_1: i32,
    pub(crate) multiplier_2: i32,
    pub(crate) shift_2: i32,
}

impl QuantizedPrelu {
    /// One element, exactly TFLM's loop body.
    #[inline(always)]
    pub(crate) fn apply<T: QuantizedInt>(&self, x: T, alpha: i8) -> T {
        let value = self.input_offset + x.to_i32();
        let scaled = if value >= 0 {
            multiply_by_quantized_multiplier(value, self.multiplier_1, self.shift_1)
        } else {
            let a = self.alpha_offset + i32::from(alpha);
            multiply_by_quantized_multiplier(value * a, self.multiplier_2, self.shift_2)
        };
        T::from_i32((scaled + self.output_offset).clamp(T::MIN, T::MAX))
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct PreluData {
    dtype: i32,
    quantized: QuantizedPrelu,
    walk: Broadcast,
}

fn quantized_params(
    input: &TensorInfo<'_>,
    alpha: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
) -> Result<QuantizedPrelu, KernelError> {
    if alpha.dtype != TensorType::INT8 {
        return Err(KernelError::UnsupportedType {
            tensor: alpha.index,
            dtype: alpha.dtype.0,
        });
    }
    let (qi, qa, qo) = (
        require_quant(input)?,
        require_quant(alpha)?,
        require_quant(output)?,
    );
    let (lo, hi) = if output.dtype == TensorType::INT8 {
        (-128, 127)
    } else {
        (-32768, 32767)
    };
    for (t, q, (lo, hi)) in [
        (input, qi, (lo, hi)),
        (alpha, qa, (-128, 127)),
        (output, qo, (lo, hi)),
    ] {
        check_zero_point(t.index, q, lo..=hi)?;
    }
    let (multiplier_1, shift_1) = quantize_multiplier(f64::from(qi.scale) / f64::from(qo.scale));
    let (multiplier_2, shift_2) =
        quantize_multiplier(f64::from(qi.scale) * f64::from(qa.scale) / f64::from(qo.scale));
    Ok(QuantizedPrelu {
        input_offset: -qi.zero_point,
        alpha_offset: -qa.zero_point,
        output_offset: qo.zero_point,
        multiplier_1,
        shift_1,
        multiplier_2,
        shift_2,
    })
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let alpha = ctx.input(1)?;
    let output = ctx.output(0)?;
    if input.dtype != output.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: output.index,
            dtype: output.dtype.0,
        });
    }
    let walk = Broadcast::new(&Dims::of(&input)?, &Dims::of(&alpha)?, &Dims::of(&output)?).ok_or(
        KernelError::ShapeMismatch {
            tensor: output.index,
        },
    )?;
    let quantized = match output.dtype {
        TensorType::FLOAT32 => {
            if alpha.dtype != TensorType::FLOAT32 {
                return Err(KernelError::UnsupportedType {
                    tensor: alpha.index,
                    dtype: alpha.dtype.0,
                });
            }
            QuantizedPrelu::default()
        }
        TensorType::INT8 | TensorType::INT16 => quantized_params(&input, &alpha, &output)?,
        other => {
            return Err(KernelError::UnsupportedType {
                tensor: output.index,
                dtype: other.0,
            });
        }
    };
    ctx.store(&PreluData {
        dtype: i32::from(output.dtype.0),
        quantized,
        walk,
    })
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &PreluData = ctx.op_data()?;
    let input = ctx.input(0)?;
    let alpha = ctx.input(1)?;
    let output = ctx.output(0)?;
    let p = data.quantized;
    match TensorType(data.dtype as i8) {
        TensorType::FLOAT32 => data.walk.run(
            input.values::<f32>()?,
            alpha.values::<f32>()?,
            output.values::<f32>()?,
            |x, a| if x >= 0.0 { x } else { x * a },
        ),
        TensorType::INT8 => data.walk.run(
            input.values::<i8>()?,
            alpha.values::<i8>()?,
            output.values::<i8>()?,
            |x, a| p.apply(x, a),
        ),
        TensorType::INT16 => data.walk.run(
            input.values::<i16>()?,
            alpha.values::<i8>()?,
            output.values::<i16>()?,
            |x, a| p.apply(x, a),
        ),
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_inputs_take_the_alpha() {
        // Input and output scale 1, alpha scale 0.25 (zero point 0): -8 with
        // alpha 2 (0.5 real) → -4; 8 → 8.
        let (multiplier_1, shift_1) = quantize_multiplier(1.0);
        let (multiplier_2, shift_2) = quantize_multiplier(0.25);
        let p = QuantizedPrelu {
            input_offset: 0,
            alpha_offset: 0,
            output_offset: 0,
            multiplier_1,
            shift_1,
            multiplier_2,
            shift_2,
        };
        assert_eq!(p.apply(-8i8, 2), -4);
        assert_eq!(p.apply(8i8, 2), 8);
        assert_eq!(p.apply(-128i8, -128), 127);
        assert_eq!(p.apply(-30000i16, 127), -32768);
    }
}
