//! ELU: `x < 0 ? exp(x) - 1 : x` — int8 and float32, bit-exact with TFLM's
//! micro kernel.
//!
//! int8 is a 256-entry table built in prepare exactly as TFLM builds it
//! (dequantise in float, transform, multiply by the output's inverse scale,
//! `roundf`, add the zero point, clamp); TFLM keeps the same 256 bytes per
//! op. The table's `exp` is `libm`'s `expf`, the correctly rounded one the
//! C library also gives on the reference build. float32 calls `expm1f`, as
//! TFLM's reference `Elu` does.

use bytemuck::{Pod, Zeroable};

use super::context::Stored;
use super::tensor::{map_elements, require_quant, same_type_and_size};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The ELU kernel.
pub const REGISTRATION: Registration = Registration {
    name: "ELU",
    prepare,
    invoke,
};

#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct EluData {
    dtype: i32,
    _reserved: u32,
    /// int8: output for input byte `b` (as `u8`) at index `b`.
    table: Stored<i8>,
}

/// One entry of TFLM's int8 lookup table for `transform`.
pub(crate) fn lut_entry(
    value: i8,
    (input_scale, input_zero_point): (f32, i32),
    (output_scale, output_zero_point): (f32, i32),
    transform: fn(f32) -> f32,
) -> i8 {
    let inverse_scale = 1.0 / output_scale;
    let dequantized = input_scale * (i32::from(value) - input_zero_point) as f32;
    let rescaled = libm::roundf(transform(dequantized) * inverse_scale);
    let quantized = (rescaled + output_zero_point as f32) as i32;
    quantized.clamp(-128, 127) as i8
}

fn elu(x: f32) -> f32 {
    if x < 0.0 { libm::expf(x) - 1.0 } else { x }
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let (input, output) = (ctx.input(0)?, ctx.output(0)?);
    same_type_and_size(&input, &output, &[TensorType::FLOAT32, TensorType::INT8])?;
    let mut data = EluData {
        dtype: i32::from(output.dtype.0),
        _reserved: 0,
        table: Zeroable::zeroed(),
    };
    if input.dtype == TensorType::INT8 {
        let (qi, qo) = (require_quant(&input)?, require_quant(&output)?);
        let (i, o) = ((qi.scale, qi.zero_point), (qo.scale, qo.zero_point));
        data.table = ctx.store_from_fn(256, |b| lut_entry(b as u8 as i8, i, o, elu))?;
    }
    ctx.store(&data)
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &EluData = ctx.op_data()?;
    let (input, output) = (ctx.input(0)?, ctx.output(0)?);
    match TensorType(data.dtype as i8) {
        TensorType::FLOAT32 => {
            map_elements(
                &input,
                output,
                |x: f32| {
                    if x < 0.0 { libm::expm1f(x) } else { x }
                },
            )
        }
        TensorType::INT8 => {
            let table = ctx.stored(data.table)?;
            if table.len() != 256 {
                return Err(KernelError::Internal);
            }
            map_elements(&input, output, |x: i8| table[x as u8 as usize])
        }
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_entries_saturate_below_at_minus_one() {
        // Scale 0.1 in, 1/64 out: ELU(-12.8) ≈ -1 → -64; ELU(1) = 1 → 64.
        let (i, o) = ((0.1, 0), (1.0 / 64.0, 0));
        assert_eq!(lut_entry(-128, i, o, elu), -64);
        assert_eq!(lut_entry(10, i, o, elu), 64);
        assert_eq!(lut_entry(0, i, o, elu), 0);
        assert_eq!(lut_entry(127, i, o, elu), 127);
    }
}
