//! TANH: float32, int8 and int16, bit-exact with TFLM's reference kernels.
//!
//! - int8 is `reference_integer_ops::Tanh`: inputs beyond the representable
//!   radius saturate, the rest are scaled into Q4.27 (the multiplier from
//!   `frexp` of `scale · 2^27`, rounded without renormalising, as TFLM),
//!   go through gemmlowp's fixed-point `tanh` and are rounded to Q0.7. The
//!   output depends only on the input byte, so prepare tabulates all 256
//!   (in the arena's tail) and invoke is one lookup per element. TFLM
//!   assumes the output is scaled 1/128 with zero point 0; hilt checks it.
//! - int16 is TFLM's sigmoid-table form (`tanh(x) = 2·sigmoid(2x) − 1`):
//!   zero points 0, an output scale of 2^-15, and a power-of-two input scale
//!   taken as a shift or else a multiplier to `1/(3·4096)` found by doubling.
//! - float32 is `tanhf` as glibc computes it (what TFLM's `std::tanh` is on
//!   the x86 host the conformance outputs come from).

use bytemuck::{Pod, Zeroable};

use super::context::Stored;
use super::fixed_point::{
    calculate_input_radius, frexp, multiply_by_quantized_multiplier, rounding_divide_by_pot, tanh,
    tanh_int16,
};
use super::lstm::float::tanhf;
use super::tensor::{Dims, Quant, check_zero_point, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The TANH kernel.
pub const REGISTRATION: Registration = Registration {
    name: "TANH",
    prepare,
    invoke,
};

/// Integer bits of the scaled int8 input (TFLM's `kInputIntegerBits`).
const INPUT_INTEGER_BITS: i32 = 4;

#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct TanhData {
    dtype: i32,
    /// int16: the LUT input scaling.
    multiplier: i32,
    left_shift: i32,
    _reserved: u32,
    /// int8: output for input byte `b` (as `u8`) at index `b`.
    table: Stored<i8>,
}

/// TFLM's int8 parameters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Int8Tanh {
    zero_point: i32,
    radius: i32,
    multiplier: i32,
    left_shift: i32,
}

impl Int8Tanh {
    /// `None` for an input scale whose shift is outside `0..=31`.
    pub(crate) fn new(input: Quant) -> Option<Self> {
        let real = f64::from(input.scale) * f64::from(1i32 << (31 - INPUT_INTEGER_BITS));
        let (q, left_shift) = frexp(real);
        if !(0..=31).contains(&left_shift) {
            return None;
        }
        Some(Int8Tanh {
            zero_point: input.zero_point,
            radius: calculate_input_radius(INPUT_INTEGER_BITS, left_shift, 31),
            multiplier: libm::round(q * f64::from(1u32 << 31)) as i32,
            left_shift,
        })
    }

    /// One element, exactly TFLM's loop body.
    pub(crate) fn eval(&self, x: i8) -> i8 {
        let input = i32::from(x) - self.zero_point;
        if input <= -self.radius {
            i8::MIN
        } else if input >= self.radius {
            i8::MAX
        } else {
            let q4 = multiply_by_quantized_multiplier(input, self.multiplier, self.left_shift);
            let q0 = tanh(q4, INPUT_INTEGER_BITS);
            rounding_divide_by_pot(q0, 31 - 7).clamp(-128, 127) as i8
        }
    }
}

/// `round(log2(x))` if `x` is a power of two to within TFLM's tolerance
/// (`CheckedLog2`, in float as TFLM computes it).
pub(crate) fn checked_log2(x: f32) -> (bool, i32) {
    let log2 = libm::logf(x) * (1.0 / libm::logf(2.0));
    let rounded = libm::roundf(log2);
    ((log2 - rounded).abs() < 1e-3, rounded as i32)
}

/// TFLM's int16 input scaling `(multiplier, left_shift)`; multiplier 0
/// marks the power-of-two case.
pub(crate) fn int16_input_scaling(scale: f32) -> (i32, i32) {
    let (pot, log2) = checked_log2(scale);
    let left_shift = (15 - 3) + log2;
    if pot && (left_shift == 0 || left_shift == 1) {
        return (0, left_shift);
    }
    let mut multiplier = f64::from(scale) * 4096.0 * 3.0;
    let mut left_shift = 0;
    while multiplier <= 32767.0 / 2.0 && left_shift <= 30 {
        left_shift += 1;
        multiplier *= 2.0;
    }
    (multiplier as i32, left_shift)
}

fn int16_params(input: Quant, output: Quant, index: (u32, u32)) -> Result<(i32, i32), KernelError> {
    if input.zero_point != 0 || !(input.scale > 0.0 && input.scale.is_finite()) {
        return Err(KernelError::MissingQuantization { tensor: index.0 });
    }
    let (pot, log2) = checked_log2(output.scale);
    if output.zero_point != 0 || !pot || log2 != -15 {
        return Err(KernelError::UnsupportedParameter {
            what: "TANH int16 output must be scaled 2^-15 with zero point 0",
        });
    }
    let (multiplier, left_shift) = int16_input_scaling(input.scale);
    if multiplier > 32767 {
        return Err(KernelError::UnsupportedParameter {
            what: "TANH int16 input scale too large",
        });
    }
    Ok((multiplier, left_shift))
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
    let mut data = TanhData {
        dtype: i32::from(output.dtype.0),
        multiplier: 0,
        left_shift: 0,
        _reserved: 0,
        table: Zeroable::zeroed(),
    };
    match output.dtype {
        TensorType::FLOAT32 => {}
        TensorType::INT8 => {
            let (qi, qo) = (require_quant(&input)?, require_quant(&output)?);
            if qo.zero_point != 0 || qo.scale != 1.0 / 128.0 {
                return Err(KernelError::UnsupportedParameter {
                    what: "TANH int8 output must be scaled 1/128 with zero point 0",
                });
            }
            check_zero_point(input.index, qi, -128..=127)?;
            let params = Int8Tanh::new(qi).ok_or(KernelError::UnsupportedParameter {
                what: "TANH input scale",
            })?;
            data.table = ctx.store_from_fn(256, |b| params.eval(b as u8 as i8))?;
        }
        TensorType::INT16 => {
            let (qi, qo) = (require_quant(&input)?, require_quant(&output)?);
            (data.multiplier, data.left_shift) = int16_params(qi, qo, (input.index, output.index))?;
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
    let data: &TanhData = ctx.op_data()?;
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    match TensorType(data.dtype as i8) {
        TensorType::FLOAT32 => {
            for (o, &x) in output
                .values::<f32>()?
                .iter_mut()
                .zip(input.values::<f32>()?)
            {
                *o = tanhf(x);
            }
        }
        TensorType::INT8 => {
            let table = ctx.stored(data.table)?;
            for (o, &x) in output.values::<i8>()?.iter_mut().zip(input.values::<i8>()?) {
                *o = table[x as u8 as usize];
            }
        }
        TensorType::INT16 => {
            let (m, s) = if data.multiplier == 0 {
                (3i32.wrapping_shl(data.left_shift as u32), 0)
            } else {
                (data.multiplier, data.left_shift)
            };
            for (o, &x) in output
                .values::<i16>()?
                .iter_mut()
                .zip(input.values::<i16>()?)
            {
                *o = tanh_int16(x, m, s);
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
    fn int8_tanh_is_odd_and_saturates() {
        let t = Int8Tanh::new(Quant {
            scale: 0.05,
            zero_point: 0,
        })
        .unwrap();
        assert_eq!(t.eval(0), 0);
        // tanh(1.0) = 0.7616 → 97.5 in Q0.7.
        let v = t.eval(20);
        assert!((97..=98).contains(&v), "{v}");
        assert_eq!(t.eval(-20), -v);
        assert_eq!(t.eval(127), 127);
        assert_eq!(t.eval(-128), -128);
    }

    #[test]
    fn int16_scaling_takes_the_power_of_two_shortcut() {
        // Scale 2^-12 (Q3.12): shift 0, the shortcut.
        assert_eq!(int16_input_scaling(1.0 / 4096.0), (0, 0));
        assert_eq!(int16_input_scaling(1.0 / 2048.0), (0, 1));
        // 2^-15 is a power of two but outside the shortcut: 3·4096·2^-15 =
        // 0.375, doubled 16 times to 24576.
        assert_eq!(int16_input_scaling(1.0 / 32768.0), (24576, 16));
    }
}
