//! MAXIMUM and MINIMUM: the element-wise larger or smaller of two broadcast
//! inputs — int8, int16, float32 and int32, bit-exact with TFLM.
//!
//! TFLM compares the stored values as they are (no requantisation; the
//! converter gives both inputs and the output one quantisation), so hilt
//! requires the three tensors to share it rather than silently compare
//! values on different scales. The broadcast walk is ADD's [`Broadcast`].

use bytemuck::{Pod, Zeroable};

use super::add::Broadcast;
use super::tensor::{Dims, quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The MAXIMUM kernel.
pub const MAXIMUM: Registration = Registration {
    name: "MAXIMUM",
    prepare,
    invoke: invoke_maximum,
};

/// The MINIMUM kernel.
pub const MINIMUM: Registration = Registration {
    name: "MINIMUM",
    prepare,
    invoke: invoke_minimum,
};

#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct Data {
    dtype: i32,
    walk: Broadcast,
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input1 = ctx.input(0)?;
    let input2 = ctx.input(1)?;
    let output = ctx.output(0)?;
    for t in [&input1, &input2] {
        if t.dtype != output.dtype {
            return Err(KernelError::UnsupportedType {
                tensor: t.index,
                dtype: t.dtype.0,
            });
        }
        if quant(t) != quant(&output) {
            return Err(KernelError::UnsupportedParameter {
                what: "MAXIMUM/MINIMUM inputs must share the output's quantisation",
            });
        }
    }
    match output.dtype {
        TensorType::INT8 | TensorType::INT16 | TensorType::FLOAT32 | TensorType::INT32 => {}
        other => {
            return Err(KernelError::UnsupportedType {
                tensor: output.index,
                dtype: other.0,
            });
        }
    }
    let walk = Broadcast::new(
        &Dims::of(&input1)?,
        &Dims::of(&input2)?,
        &Dims::of(&output)?,
    )
    .ok_or(KernelError::ShapeMismatch {
        tensor: output.index,
    })?;
    ctx.store(&Data {
        dtype: i32::from(output.dtype.0),
        walk,
    })
}

/// Runs `pick` over the broadcast inputs, whatever the element type.
fn run(
    ctx: &InvokeContext<'_, '_>,
    pick_f32: fn(f32, f32) -> f32,
    pick_i32: fn(i32, i32) -> i32,
) -> Result<(), KernelError> {
    let data: &Data = ctx.op_data()?;
    let (a, b, out) = (ctx.input(0)?, ctx.input(1)?, ctx.output(0)?);
    let w = &data.walk;
    match TensorType(data.dtype as i8) {
        TensorType::FLOAT32 => w.run(
            a.values::<f32>()?,
            b.values::<f32>()?,
            out.values::<f32>()?,
            pick_f32,
        ),
        TensorType::INT8 => w.run(
            a.values::<i8>()?,
            b.values::<i8>()?,
            out.values::<i8>()?,
            |x, y| pick_i32(i32::from(x), i32::from(y)) as i8,
        ),
        TensorType::INT16 => w.run(
            a.values::<i16>()?,
            b.values::<i16>()?,
            out.values::<i16>()?,
            |x, y| pick_i32(i32::from(x), i32::from(y)) as i16,
        ),
        TensorType::INT32 => w.run(
            a.values::<i32>()?,
            b.values::<i32>()?,
            out.values::<i32>()?,
            pick_i32,
        ),
        _ => Err(KernelError::Internal),
    }
}

/// TFLM's `MaximumOp`: `a > b ? a : b` (so a NaN in `b` wins over `a`).
fn max_f32(a: f32, b: f32) -> f32 {
    if a > b { a } else { b }
}

/// TFLM's `MinimumOp`: `a < b ? a : b`.
fn min_f32(a: f32, b: f32) -> f32 {
    if a < b { a } else { b }
}

fn invoke_maximum(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    run(ctx, max_f32, |a, b| a.max(b))
}

fn invoke_minimum(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    run(ctx, min_f32, |a, b| a.min(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_picks_follow_tflm_comparisons() {
        assert_eq!(max_f32(1.0, 2.0), 2.0);
        assert_eq!(min_f32(1.0, 2.0), 1.0);
        assert!(max_f32(1.0, f32::NAN).is_nan());
        assert_eq!(max_f32(f32::NAN, 1.0), 1.0);
        assert_eq!(min_f32(-0.0, 0.0), 0.0);
    }
}
