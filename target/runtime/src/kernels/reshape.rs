//! RESHAPE: the same bytes under another shape.

use super::tensor::Dims;
use super::{InvokeContext, KernelError, PrepareContext, Registration};

/// The RESHAPE kernel.
pub const REGISTRATION: Registration = Registration {
    name: "RESHAPE",
    prepare,
    invoke,
};

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    // The output shape is the model's; the new_shape input or option only
    // has to agree with it, which the element counts check.
    if input.dtype != output.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: output.index,
            dtype: output.dtype.0,
        });
    }
    if Dims::of(&input)?.elements() != Dims::of(&output)?.elements() || input.bytes != output.bytes
    {
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
