//! LEAKY_RELU: `x` for `x > 0`, `alpha · x` otherwise — float32, int8 and
//! int16, bit-exact with TFLM's reference kernel.
//!
//! The quantised form is TFLM's `QuantizeLeakyRelu`: the input less its zero
//! point is scaled by one of two multipliers (identity, `in_scale /
//! out_scale`, for non-negative values; `in_scale · alpha / out_scale` for
//! negative ones), offset by the output zero point and clamped to the type.
//! A negative alpha is applied as a positive multiplier and a negation, as
//! TFLM does. Both multipliers are quantised once in prepare.

use bytemuck::{Pod, Zeroable};

use super::fixed_point::{multiply_by_quantized_multiplier, quantize_multiplier};
use super::quantize::QuantizedInt;
use super::tensor::{Dims, Quant, check_zero_point, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The LEAKY_RELU kernel.
pub const REGISTRATION: Registration = Registration {
    name: "LEAKY_RELU",
    prepare,
    invoke,
};

/// What prepare computes (TFLM's `LeakyReluOpData` plus the float alpha).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
pub(crate) struct LeakyRelu {
    /// The output type's `TensorType` code.
    pub(crate) dtype: i32,
    pub(crate) alpha: f32,
    pub(crate) input_offset: i32,
    pub(crate) output_offset: i32,
    pub(crate) multiplier_alpha: i32,
    pub(crate) shift_alpha: i32,
    pub(crate) multiplier_identity: i32,
    pub(crate) shift_identity: i32,
}

impl LeakyRelu {
    /// The quantised parameters for `input` and `output` quantisation, or
    /// `None` for a scale that is zero, negative or not finite.
    pub(crate) fn quantized(alpha: f32, input: Quant, output: Quant) -> Option<Self> {
        let valid = |s: f32| s.is_finite() && s > 0.0;
        if !valid(input.scale) || !valid(output.scale) || !alpha.is_finite() {
            return None;
        }
        // TFLM computes both ratios in float, then widens them.
        let (multiplier_alpha, shift_alpha) =
            quantize_multiplier(f64::from(input.scale * alpha / output.scale));
        let (multiplier_identity, shift_identity) =
            quantize_multiplier(f64::from(input.scale / output.scale));
        Some(LeakyRelu {
            dtype: 0,
            alpha,
            input_offset: input.zero_point,
            output_offset: output.zero_point,
            multiplier_alpha,
            shift_alpha,
            multiplier_identity,
            shift_identity,
        })
    }

    /// One quantised element, exactly TFLM's loop body.
    #[inline]
    pub(crate) fn apply<T: QuantizedInt>(&self, x: T) -> T {
        let value = x.to_i32() - self.input_offset;
        let scaled = if value >= 0 {
            multiply_by_quantized_multiplier(value, self.multiplier_identity, self.shift_identity)
        } else {
            let scaled = multiply_by_quantized_multiplier(
                value,
                self.multiplier_alpha.wrapping_abs(),
                self.shift_alpha,
            );
            if self.multiplier_alpha < 0 {
                -scaled
            } else {
                scaled
            }
        };
        T::from_i32(
            self.output_offset
                .saturating_add(scaled)
                .clamp(T::MIN, T::MAX),
        )
    }
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    let alpha = ctx
        .op()
        .raw()
        .builtin_options_as_leaky_relu_options()
        .ok_or(KernelError::MissingOptions)?
        .alpha();
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
    let mut data = match output.dtype {
        TensorType::FLOAT32 => LeakyRelu {
            alpha,
            ..LeakyRelu::default()
        },
        TensorType::INT8 | TensorType::INT16 => {
            let (qi, qo) = (require_quant(&input)?, require_quant(&output)?);
            let (lo, hi) = if output.dtype == TensorType::INT8 {
                (-128, 127)
            } else {
                (-32768, 32767)
            };
            for (t, q) in [(&input, qi), (&output, qo)] {
                check_zero_point(t.index, q, lo..=hi)?;
            }
            LeakyRelu::quantized(alpha, qi, qo).ok_or(KernelError::UnsupportedParameter {
                what: "LEAKY_RELU alpha must be finite",
            })?
        }
        other => {
            return Err(KernelError::UnsupportedType {
                tensor: output.index,
                dtype: other.0,
            });
        }
    };
    data.dtype = i32::from(output.dtype.0);
    ctx.store(&data)
}

fn run<T: QuantizedInt>(data: &LeakyRelu, input: &[T], output: &mut [T]) {
    for (o, &x) in output.iter_mut().zip(input) {
        *o = data.apply(x);
    }
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &LeakyRelu = ctx.op_data()?;
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    match TensorType(data.dtype as i8) {
        TensorType::FLOAT32 => {
            let alpha = data.alpha;
            for (o, &x) in output
                .values::<f32>()?
                .iter_mut()
                .zip(input.values::<f32>()?)
            {
                *o = if x > 0.0 { x } else { x * alpha };
            }
        }
        TensorType::INT8 => run(data, input.values::<i8>()?, output.values::<i8>()?),
        TensorType::INT16 => run(data, input.values::<i16>()?, output.values::<i16>()?),
        _ => return Err(KernelError::Internal),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(scale: f32, zero_point: i32) -> Quant {
        Quant { scale, zero_point }
    }

    #[test]
    fn same_scales_keep_positives_and_scale_negatives() {
        // Scale 1, zero point 0, alpha 0.5: -10 → -5, 7 → 7, -3 → -1.5 → -1:
        // the multiplier is 2^30 with shift 0, and gemmlowp's doubling high
        // multiply rounds -1.5 toward +∞ (its nudge is 1 - 2^30 for negative
        // products, then C division truncates).
        let p = LeakyRelu::quantized(0.5, q(1.0, 0), q(1.0, 0)).unwrap();
        let got: Vec<i8> = [-10i8, 7, -3, 0, 127, -128]
            .iter()
            .map(|&x| p.apply(x))
            .collect();
        assert_eq!(got, [-5, 7, -1, 0, 127, -64]);
    }

    #[test]
    fn negative_alpha_flips_the_sign() {
        let p = LeakyRelu::quantized(-2.0, q(0.5, 0), q(0.5, 0)).unwrap();
        assert_eq!(p.apply(-10i16), 20);
        assert_eq!(p.apply(-20000i16), 32767);
        assert_eq!(p.apply(5i16), 5);
    }

    #[test]
    fn zero_points_offset_both_sides() {
        // in zp 10: x = 4 is -6 real units (scale 1) → alpha 0.25 → -1.5 → -2;
        // out zp -5 → -7.
        let p = LeakyRelu::quantized(0.25, q(1.0, 10), q(1.0, -5)).unwrap();
        assert_eq!(p.apply(4i8), -7);
        assert_eq!(p.apply(20i8), 5);
    }

    #[test]
    fn bad_scales_are_refused() {
        assert!(LeakyRelu::quantized(0.2, q(0.0, 0), q(1.0, 0)).is_none());
        assert!(LeakyRelu::quantized(0.2, q(1.0, 0), q(-1.0, 0)).is_none());
        assert!(LeakyRelu::quantized(f32::NAN, q(1.0, 0), q(1.0, 0)).is_none());
    }
}
