//! RESHAPE, SQUEEZE and EXPAND_DIMS: the same bytes under another shape.
//!
//! The three differ only in what prepare checks: RESHAPE that the element
//! counts agree, SQUEEZE that the output is the input without the size-1
//! axes named (or all of them), EXPAND_DIMS that the output is the input
//! with a size-1 axis inserted where its constant axis input says. Each
//! copies the bytes across at invoke, as TFLM does: input and output are two
//! planned buffers, so there is no in-place aliasing to reason about.

use super::concatenation::positive_axis;
use super::tensor::{Dims, MAX_RANK, expect_type};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::model::TensorInfo;
use crate::schema::TensorType;

/// The RESHAPE kernel.
pub const REGISTRATION: Registration = Registration {
    name: "RESHAPE",
    prepare,
    invoke,
};

/// The SQUEEZE kernel.
pub const SQUEEZE: Registration = Registration {
    name: "SQUEEZE",
    prepare: prepare_squeeze,
    invoke,
};

/// The EXPAND_DIMS kernel.
pub const EXPAND_DIMS: Registration = Registration {
    name: "EXPAND_DIMS",
    prepare: prepare_expand_dims,
    invoke,
};

/// Refuses an output that does not hold exactly the input's bytes in the
/// input's type.
fn same_bytes(input: &TensorInfo<'_>, output: &TensorInfo<'_>) -> Result<(), KernelError> {
    if input.dtype != output.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: output.index,
            dtype: output.dtype.0,
        });
    }
    if Dims::of(input)?.elements() != Dims::of(output)?.elements() || input.bytes != output.bytes {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    Ok(())
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    // The output shape is the model's; the new_shape input or option only
    // has to agree with it, which the element counts check.
    same_bytes(&ctx.input(0)?, &ctx.output(0)?)
}

fn prepare_squeeze(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    same_bytes(&input, &output)?;
    let dims = Dims::of(&input)?;
    let rank = dims.rank();
    // No options, or an empty list, squeezes every size-1 axis (TFLM).
    let named = ctx
        .op()
        .raw()
        .builtin_options_as_squeeze_options()
        .and_then(|o| o.squeeze_dims())
        .filter(|d| !d.is_empty());
    let mut squeeze = [false; MAX_RANK];
    match named {
        None => (0..rank).for_each(|d| squeeze[d] = dims.get(d) == 1),
        Some(list) => {
            for axis in list {
                let d = positive_axis(axis, rank)
                    .filter(|&d| dims.get(d) == 1)
                    .ok_or(KernelError::UnsupportedParameter {
                        what: "SQUEEZE squeeze_dims must name size-1 axes of the input",
                    })?;
                squeeze[d] = true;
            }
        }
    }
    let kept = (0..rank).filter(|&d| !squeeze[d]).map(|d| dims.get(d));
    if !kept.eq(Dims::of(&output)?.as_slice().iter().copied()) {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    Ok(())
}

fn prepare_expand_dims(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    expect_type(
        &input,
        &[TensorType::FLOAT32, TensorType::INT16, TensorType::INT8],
    )?;
    same_bytes(&input, &output)?;
    let axis_tensor = ctx.input(1)?;
    expect_type(&axis_tensor, &[TensorType::INT32])?;
    let bytes = axis_tensor
        .constant
        .ok_or(KernelError::UnsupportedParameter {
            what: "EXPAND_DIMS axis must be constant",
        })?;
    let axis = match (bytes, axis_tensor.shape().len()) {
        (&[a, b, c, d], 0 | 1) => i32::from_le_bytes([a, b, c, d]),
        _ => {
            return Err(KernelError::ShapeMismatch {
                tensor: axis_tensor.index,
            });
        }
    };
    let dims = Dims::of(&input)?;
    let axis = positive_axis(axis, dims.rank() + 1).ok_or(KernelError::UnsupportedParameter {
        what: "EXPAND_DIMS axis out of range",
    })?;
    let out = Dims::of(&output)?;
    let fits = out.rank() == dims.rank() + 1
        && (0..out.rank()).all(|d| match d.cmp(&axis) {
            core::cmp::Ordering::Less => out.get(d) == dims.get(d),
            core::cmp::Ordering::Equal => out.get(d) == 1,
            core::cmp::Ordering::Greater => out.get(d) == dims.get(d - 1),
        });
    if !fits {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    Ok(())
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    output.data.copy_from_slice(input.data);
    Ok(())
}
