//! FILL and ZEROS_LIKE: an output of one repeated value.
//!
//! FILL repeats its scalar `value` input (float32, int32 or int8, as TFLM's
//! micro kernel) over the output; ZEROS_LIKE writes zero bits (float32,
//! int64, int32, int8; for int8 the integer 0, not the zero point, as
//! TFLM). The output shape is the model's: FILL's `dims` input must be a
//! constant equal to it, as TFLM requires (a shape computed at run time
//! could not change a statically planned output).
//! Neither op stores op data: the element size is the value's length.

use super::tensor::{Dims, expect_type, index_at};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The FILL kernel.
pub const FILL: Registration = Registration {
    name: "FILL",
    prepare: prepare_fill,
    invoke: invoke_fill,
};

/// The ZEROS_LIKE kernel.
pub const ZEROS_LIKE: Registration = Registration {
    name: "ZEROS_LIKE",
    prepare: prepare_zeros_like,
    invoke: invoke_zeros_like,
};

fn prepare_fill(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let dims = ctx.input(0)?;
    let value = ctx.input(1)?;
    let output = ctx.output(0)?;
    expect_type(
        &output,
        &[TensorType::FLOAT32, TensorType::INT32, TensorType::INT8],
    )?;
    if value.dtype != output.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: value.index,
            dtype: value.dtype.0,
        });
    }
    if value.shape().len() != 0 {
        return Err(KernelError::ShapeMismatch {
            tensor: value.index,
        });
    }
    expect_type(&dims, &[TensorType::INT32, TensorType::INT64])?;
    let out = Dims::of(&output)?;
    let bytes = dims.constant.ok_or(KernelError::UnsupportedParameter {
        what: "FILL dims must be constant",
    })?;
    let agree = dims.shape().len() == 1
        && Dims::of(&dims)?.get(0) as usize == out.rank()
        && (0..out.rank()).all(|d| index_at(dims.dtype, bytes, d) == Some(i64::from(out.get(d))));
    if !agree {
        return Err(KernelError::ShapeMismatch { tensor: dims.index });
    }
    Ok(())
}

fn invoke_fill(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let value = ctx.input(1)?.data;
    let output = ctx.output(0)?.data;
    if value.is_empty() || output.len() % value.len() != 0 {
        return Err(KernelError::Internal);
    }
    for chunk in output.chunks_exact_mut(value.len()) {
        chunk.copy_from_slice(value);
    }
    Ok(())
}

fn prepare_zeros_like(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    expect_type(
        &input,
        &[
            TensorType::FLOAT32,
            TensorType::INT64,
            TensorType::INT32,
            TensorType::INT8,
        ],
    )?;
    if input.dtype != output.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: output.index,
            dtype: output.dtype.0,
        });
    }
    if Dims::of(&input)?.as_slice() != Dims::of(&output)?.as_slice() {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    Ok(())
}

fn invoke_zeros_like(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    ctx.output(0)?.data.fill(0);
    Ok(())
}
