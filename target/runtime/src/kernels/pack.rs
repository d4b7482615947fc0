//! PACK and UNPACK: stack tensors of one shape along a new axis, and split
//! a tensor into the slices along one of its axes — bit-exact with TFLM
//! (copies; PACK takes TFLM's float32, int8, int16, int32 and int64, UNPACK
//! its float32, int8, int16 and int32).
//!
//! Both are CONCATENATION and SPLIT with an axis of size one added or
//! removed: `outer` (the product of the dimensions before the axis) slices
//! of each tensor, interleaved. So they keep those kernels' op data and
//! invoke, and only prepare here checks the shapes.

use super::concatenation::positive_axis;
use super::tensor::{Dims, element_size, same_type_and_quant};
use super::{KernelError, PrepareContext, Registration, concatenation, split};
use crate::model::TensorInfo;
use crate::schema::TensorType;

/// The PACK kernel.
pub const PACK: Registration = Registration {
    name: "PACK",
    prepare: prepare_pack,
    invoke: concatenation::invoke,
};

/// The UNPACK kernel.
pub const UNPACK: Registration = Registration {
    name: "UNPACK",
    prepare: prepare_unpack,
    invoke: split::invoke,
};

/// Checks that `whole` is `part` with an axis of `count` inserted at
/// `axis`, and returns the product of the dimensions before it.
fn stacked(
    part: &TensorInfo<'_>,
    whole: &TensorInfo<'_>,
    axis: usize,
    count: usize,
) -> Result<u32, KernelError> {
    let (p, w) = (Dims::of(part)?, Dims::of(whole)?);
    let fits = w.rank() == p.rank() + 1
        && w.get(axis) as usize == count
        && (0..p.rank()).all(|d| p.get(d) == w.get(if d < axis { d } else { d + 1 }));
    if !fits {
        return Err(KernelError::ShapeMismatch { tensor: part.index });
    }
    w.as_slice()[..axis]
        .iter()
        .try_fold(1u32, |acc, &d| acc.checked_mul(u32::try_from(d).ok()?))
        .ok_or(KernelError::ShapeMismatch {
            tensor: whole.index,
        })
}

fn prepare_pack(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let options = ctx
        .op()
        .raw()
        .builtin_options_as_pack_options()
        .ok_or(KernelError::MissingOptions)?;
    let output = ctx.output(0)?;
    element_size(
        &output,
        &[
            TensorType::FLOAT32,
            TensorType::INT8,
            TensorType::INT16,
            TensorType::INT32,
            TensorType::INT64,
        ],
    )?;
    let n = ctx.input_count();
    if n == 0 || usize::try_from(options.values_count()) != Ok(n) {
        return Err(KernelError::UnsupportedParameter {
            what: "PACK values_count must be the number of inputs",
        });
    }
    let rank = Dims::of(&output)?.rank();
    let axis = positive_axis(options.axis(), rank).ok_or(KernelError::UnsupportedParameter {
        what: "PACK axis out of range",
    })?;
    let mut outer = 0;
    for i in 0..n {
        let input = ctx.input(i)?;
        same_type_and_quant(
            &input,
            &output,
            "PACK inputs and output quantisation must match",
        )?;
        outer = stacked(&input, &output, axis, n)?;
    }
    ctx.store(&[outer, n as u32])
}

fn prepare_unpack(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let options = ctx
        .op()
        .raw()
        .builtin_options_as_unpack_options()
        .ok_or(KernelError::MissingOptions)?;
    let input = ctx.input(0)?;
    element_size(
        &input,
        &[
            TensorType::FLOAT32,
            TensorType::INT8,
            TensorType::INT16,
            TensorType::INT32,
        ],
    )?;
    let n = ctx.output_count();
    if n == 0 || n > 32 || usize::try_from(options.num()) != Ok(n) {
        return Err(KernelError::UnsupportedParameter {
            what: "UNPACK num must be the number of outputs (1 to 32)",
        });
    }
    let rank = Dims::of(&input)?.rank();
    let axis = positive_axis(options.axis(), rank).ok_or(KernelError::UnsupportedParameter {
        what: "UNPACK axis out of range",
    })?;
    let mut outer = 0;
    for i in 0..n {
        let output = ctx.output(i)?;
        same_type_and_quant(
            &input,
            &output,
            "UNPACK input and outputs quantisation must match",
        )?;
        outer = stacked(&output, &input, axis, n)?;
    }
    ctx.store(&[0, outer, n as u32])
}
