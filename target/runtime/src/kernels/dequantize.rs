//! DEQUANTIZE: int8 or int16 → float32, `scale · (q - zero_point)`, exactly
//! as TFLM computes it.
//!
//! TFLM multiplies in double and rounds to float once. For int8 and int16
//! inputs (and zero points below 2^23) `q - zero_point` is exact in `f32` and
//! the double product is exact, so a single `f32` multiply — correctly
//! rounded by IEEE 754 — yields the same bits without double arithmetic,
//! which Cortex-M4F and M33 cores do not have in hardware.

use bytemuck::{Pod, Zeroable};

use super::quantize::QuantizedInt;
use super::tensor::{Dims, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The DEQUANTIZE kernel.
pub const REGISTRATION: Registration = Registration {
    name: "DEQUANTIZE",
    prepare,
    invoke,
};

#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct DequantizeData {
    input_type: i32,
    zero_point: i32,
    scale: f32,
    /// Whether `q - zero_point` always fits `f32` exactly.
    single_precision: u32,
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    if ctx.input_count() != 1 || ctx.output_count() != 1 {
        return Err(KernelError::UnsupportedParameter {
            what: "DEQUANTIZE takes one input and one output",
        });
    }
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    if !matches!(input.dtype, TensorType::INT8 | TensorType::INT16) {
        return Err(KernelError::UnsupportedType {
            tensor: input.index,
            dtype: input.dtype.0,
        });
    }
    if output.dtype != TensorType::FLOAT32 {
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
    let q = require_quant(&input)?;
    ctx.store(&DequantizeData {
        input_type: i32::from(input.dtype.0),
        zero_point: q.zero_point,
        scale: q.scale,
        single_precision: u32::from(q.zero_point.unsigned_abs() < 1 << 23),
    })
}

#[inline(always)]
fn dequantize<I: QuantizedInt>(input: &[I], output: &mut [f32], d: &DequantizeData) {
    if d.single_precision != 0 {
        for (o, &q) in output.iter_mut().zip(input) {
            *o = d.scale * (q.to_i32() - d.zero_point) as f32;
        }
    } else {
        let scale = f64::from(d.scale);
        for (o, &q) in output.iter_mut().zip(input) {
            *o = (scale * (i64::from(q.to_i32()) - i64::from(d.zero_point)) as f64) as f32;
        }
    }
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let d: &DequantizeData = ctx.op_data()?;
    let input = ctx.input(0)?;
    let output = ctx.output(0)?.values::<f32>()?;
    if input.data.len() / size_of_type(d.input_type) != output.len() {
        return Err(KernelError::Internal);
    }
    if d.input_type == i32::from(TensorType::INT8.0) {
        dequantize(input.values::<i8>()?, output, d);
    } else {
        dequantize(input.values::<i16>()?, output, d);
    }
    Ok(())
}

fn size_of_type(input_type: i32) -> usize {
    if input_type == i32::from(TensorType::INT8.0) {
        1
    } else {
        2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_precision_equals_tflm_double_path() {
        // Every int16 value against a handful of awkward scales.
        for &scale in &[0.1f32, 1.0 / 3.0, 3.3e-5, 7.77, 1e-30, 12345.678] {
            for &zp in &[0, -128, 127, 5000, -32768] {
                let d = DequantizeData {
                    input_type: i32::from(TensorType::INT16.0),
                    zero_point: zp,
                    scale,
                    single_precision: 1,
                };
                let input: Vec<i16> = (i16::MIN..=i16::MAX).collect();
                let mut fast = vec![0f32; input.len()];
                dequantize(&input, &mut fast, &d);
                for (&q, &f) in input.iter().zip(&fast) {
                    let tflm = (f64::from(scale) * f64::from(i32::from(q) - zp)) as f32;
                    assert_eq!(f.to_bits(), tflm.to_bits(), "{q} {scale} {zp}");
                }
            }
        }
    }
}
