//! GATHER: slices of `params` picked along one axis by an index tensor —
//! int8 and float32 params with int32 indices (what TFLM's micro kernel
//! takes: it refuses int16 and int32 params and int64 indices, so hilt
//! does too), `batch_dims` leading dimensions shared by both, bit-exact
//! with TFLM.
//!
//! The indices are data: they may come from another op, so each is checked
//! at invoke, and one outside `0..axis size` is an
//! [`KernelError::IndexOutOfRange`] naming the index tensor (TFLM returns
//! an error there too), never a read outside `params`. The output is
//! `params[..axis] ++ indices[batch_dims..] ++ params[axis + 1..]`, which
//! prepare checks against the model's output shape.

use bytemuck::{Pod, Zeroable};

use super::concatenation::positive_axis;
use super::tensor::{Dims, element_size, expect_type, index_at, same_type_and_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The GATHER kernel.
pub const REGISTRATION: Registration = Registration {
    name: "GATHER",
    prepare,
    invoke,
};

/// Op data (28 bytes): the walk's sizes, in elements.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
struct GatherPlan {
    /// Product of the `batch_dims` leading dimensions.
    batches: u32,
    /// Product of the params dimensions between the batch ones and the axis.
    outer: u32,
    /// Indices per batch.
    coords: u32,
    /// Bytes of one slice (the params dimensions after the axis).
    inner_bytes: u32,
    axis_size: u32,
    /// `TensorType` code of the indices.
    index_type: u32,
    /// Index tensor, for errors.
    index_tensor: u32,
}

// The op data's size, as its documentation gives it.
const _: () = assert!(size_of::<GatherPlan>() == 28);

fn product(dims: &[i32]) -> Option<u32> {
    dims.iter()
        .try_fold(1u32, |acc, &d| acc.checked_mul(u32::try_from(d).ok()?))
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let params = ctx.input(0)?;
    let indices = ctx.input(1)?;
    let output = ctx.output(0)?;
    let options = ctx
        .op()
        .raw()
        .builtin_options_as_gather_options()
        .ok_or(KernelError::MissingOptions)?;
    let element = element_size(&params, &[TensorType::INT8, TensorType::FLOAT32])?;
    same_type_and_quant(
        &params,
        &output,
        "GATHER params and output quantisation must match",
    )?;
    expect_type(&indices, &[TensorType::INT32])?;
    let (p, i) = (Dims::of(&params)?, Dims::of(&indices)?);
    let bad = |what| KernelError::UnsupportedParameter { what };
    let axis = positive_axis(options.axis(), p.rank()).ok_or(bad("GATHER axis out of range"))?;
    let batch_dims = options.batch_dims();
    let batch_dims = if batch_dims < 0 {
        batch_dims + i.rank() as i32
    } else {
        batch_dims
    };
    let batch_dims = usize::try_from(batch_dims)
        .ok()
        .filter(|&b| b <= axis && b <= i.rank() && b < p.rank())
        .ok_or(bad(
            "GATHER batch_dims must be at most the axis and the indices' rank",
        ))?;
    if p.as_slice()[..batch_dims] != i.as_slice()[..batch_dims] {
        return Err(KernelError::ShapeMismatch {
            tensor: indices.index,
        });
    }
    let want = p.as_slice()[..axis]
        .iter()
        .chain(&i.as_slice()[batch_dims..])
        .chain(&p.as_slice()[axis + 1..]);
    if !want
        .copied()
        .eq(Dims::of(&output)?.as_slice().iter().copied())
    {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    let too_big = KernelError::ShapeMismatch {
        tensor: params.index,
    };
    let plan = GatherPlan {
        batches: product(&p.as_slice()[..batch_dims]).ok_or(too_big)?,
        outer: product(&p.as_slice()[batch_dims..axis]).ok_or(too_big)?,
        coords: product(&i.as_slice()[batch_dims..]).ok_or(too_big)?,
        inner_bytes: product(&p.as_slice()[axis + 1..])
            .and_then(|n| n.checked_mul(element))
            .ok_or(too_big)?,
        axis_size: p.get(axis) as u32,
        index_type: indices.dtype.0 as u32,
        index_tensor: indices.index,
    };
    ctx.store(&plan)
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let plan: &GatherPlan = ctx.op_data()?;
    let params = ctx.input(0)?.data;
    let indices = ctx.input(1)?.data;
    let output = ctx.output(0)?.data;
    let dtype = TensorType(plan.index_type as i8);
    let (outer, coords, inner) = (
        plan.outer as usize,
        plan.coords as usize,
        plan.inner_bytes as usize,
    );
    let axis = plan.axis_size as usize;
    let mut chunks = output.chunks_exact_mut(inner.max(1));
    for batch in 0..plan.batches as usize {
        for o in 0..outer {
            let base = (batch * outer + o) * axis;
            for c in 0..coords {
                let index =
                    index_at(dtype, indices, batch * coords + c).ok_or(KernelError::Internal)?;
                let at = usize::try_from(index).ok().filter(|&k| k < axis).ok_or(
                    KernelError::IndexOutOfRange {
                        tensor: plan.index_tensor,
                        index,
                        size: plan.axis_size,
                    },
                )?;
                let from = (base + at) * inner;
                let src = params
                    .get(from..from + inner)
                    .ok_or(KernelError::Internal)?;
                if inner > 0 {
                    chunks
                        .next()
                        .ok_or(KernelError::Internal)?
                        .copy_from_slice(src);
                }
            }
        }
    }
    Ok(())
}
