//! SHAPE: the input's dimensions as an int32 vector.
//!
//! The shape is static (hilt plans every tensor from the model), so prepare
//! reads it once into the op data and invoke only writes it out. TFLM's
//! micro kernel writes int32 only and fails on an int64 output; hilt refuses
//! that in prepare instead of at the first invoke.

use super::tensor::{Dims, MAX_RANK, expect_type};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The SHAPE kernel.
pub const REGISTRATION: Registration = Registration {
    name: "SHAPE",
    prepare,
    invoke,
};

/// Op data: the rank, then the dimensions (28 bytes).
type ShapeData = [i32; MAX_RANK + 1];
const _: () = assert!(size_of::<ShapeData>() == 28);

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    expect_type(&output, &[TensorType::INT32])?;
    let dims = Dims::of(&input)?;
    if Dims::of(&output)?.as_slice() != [dims.rank() as i32] {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    let mut data: ShapeData = [0; MAX_RANK + 1];
    data[0] = dims.rank() as i32;
    data[1..=dims.rank()].copy_from_slice(dims.as_slice());
    ctx.store(&data)
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &ShapeData = ctx.op_data()?;
    let rank = usize::try_from(data[0]).map_err(|_| KernelError::Internal)?;
    let dims = data.get(1..=rank).ok_or(KernelError::Internal)?;
    let out = ctx.output(0)?.values::<i32>()?;
    if out.len() != rank {
        return Err(KernelError::Internal);
    }
    out.copy_from_slice(dims);
    Ok(())
}
