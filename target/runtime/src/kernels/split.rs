//! SPLIT and SPLIT_V: one tensor cut along an axis into several — int8,
//! int16, float32 and int32, bit-exact with TFLM (a copy).
//!
//! SPLIT takes the axis first (`[axis, input]`) and cuts into equal parts;
//! SPLIT_V takes `[input, size_splits, axis]` and cuts into the given sizes
//! (one may be -1: the rest). The axis is a constant int32 scalar, as TFLM
//! requires. The output shapes carry the sizes, so prepare checks them
//! against the input (and SPLIT's equal parts, SPLIT_V's constant sizes)
//! and invoke copies each output's slice of every outer index.

use super::concatenation::positive_axis;
use super::tensor::Dims;
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::model::TensorInfo;
use crate::schema::TensorType;

/// The SPLIT kernel.
pub const SPLIT: Registration = Registration {
    name: "SPLIT",
    prepare: prepare_split,
    invoke,
};

/// The SPLIT_V kernel.
pub const SPLIT_V: Registration = Registration {
    name: "SPLIT_V",
    prepare: prepare_split_v,
    invoke,
};

/// A constant int32 tensor's values (up to `N`).
fn constant_i32<const N: usize>(
    t: &TensorInfo<'_>,
    what: &'static str,
) -> Result<([i32; N], usize), KernelError> {
    if t.dtype != TensorType::INT32 {
        return Err(KernelError::UnsupportedType {
            tensor: t.index,
            dtype: t.dtype.0,
        });
    }
    let bytes = t
        .constant
        .ok_or(KernelError::UnsupportedParameter { what })?;
    if bytes.len() % 4 != 0 || bytes.len() / 4 > N || bytes.is_empty() {
        return Err(KernelError::ShapeMismatch { tensor: t.index });
    }
    let mut out = [0i32; N];
    for (v, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *v = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
    Ok((out, bytes.len() / 4))
}

/// Checks the outputs against `input` cut along `axis` and stores the plan;
/// returns each output's size along the axis (up to 64 outputs).
fn plan(
    ctx: &mut PrepareContext<'_, '_, '_>,
    input: &TensorInfo<'_>,
    axis: i32,
) -> Result<([i32; 64], usize), KernelError> {
    let dims = Dims::of(input)?;
    let rank = dims.rank();
    let axis = positive_axis(axis, rank).ok_or(KernelError::UnsupportedParameter {
        what: "SPLIT axis out of range",
    })?;
    let n = ctx.output_count();
    if n == 0 || n > 64 {
        return Err(KernelError::UnsupportedParameter {
            what: "SPLIT takes 1 to 64 outputs",
        });
    }
    let mut sizes = [0i32; 64];
    let mut sum = 0i64;
    for (i, size) in sizes.iter_mut().enumerate().take(n) {
        let output = ctx.output(i)?;
        if output.dtype != input.dtype {
            return Err(KernelError::UnsupportedType {
                tensor: output.index,
                dtype: output.dtype.0,
            });
        }
        let out = Dims::of(&output)?;
        let fits = out.rank() == rank && (0..rank).all(|d| d == axis || out.get(d) == dims.get(d));
        if !fits {
            return Err(KernelError::ShapeMismatch {
                tensor: output.index,
            });
        }
        *size = out.get(axis);
        sum += i64::from(*size);
    }
    if sum != i64::from(dims.get(axis)) {
        return Err(KernelError::ShapeMismatch {
            tensor: input.index,
        });
    }
    match input.dtype {
        TensorType::INT8 | TensorType::INT16 | TensorType::FLOAT32 | TensorType::INT32 => {}
        other => {
            return Err(KernelError::UnsupportedType {
                tensor: input.index,
                dtype: other.0,
            });
        }
    }
    let outer: usize = dims.as_slice()[..axis]
        .iter()
        .map(|&d| d as usize)
        .product();
    let outer = u32::try_from(outer).map_err(|_| KernelError::ShapeMismatch {
        tensor: input.index,
    })?;
    // The input position, outer slices and output count (invoke's context
    // has no count).
    let position = if ctx.input_count() == 2 { 1 } else { 0 };
    ctx.store(&[position, outer, n as u32])?;
    Ok((sizes, n))
}

fn prepare_split(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let (axis, _) = constant_i32::<1>(&ctx.input(0)?, "SPLIT axis must be a constant tensor")?;
    let input = ctx.input(1)?;
    let (sizes, n) = plan(ctx, &input, axis[0])?;
    if sizes[..n].iter().any(|&s| s != sizes[0]) {
        return Err(KernelError::UnsupportedParameter {
            what: "SPLIT outputs must be equal parts",
        });
    }
    Ok(())
}

fn prepare_split_v(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let splits = ctx.input(1)?;
    let (axis, _) = constant_i32::<1>(&ctx.input(2)?, "SPLIT_V axis must be a constant tensor")?;
    let (sizes, n) = plan(ctx, &input, axis[0])?;
    // Constant size_splits must agree with the outputs (-1: any).
    if splits.constant.is_some() {
        let (given, count) = constant_i32::<64>(&splits, "SPLIT_V size_splits")?;
        let agree = count == n
            && given[..n]
                .iter()
                .zip(&sizes[..n])
                .all(|(&g, &s)| g == -1 || g == s);
        if !agree {
            return Err(KernelError::ShapeMismatch {
                tensor: splits.index,
            });
        }
    }
    Ok(())
}

/// Copies the input's slices out to each output in turn (op data
/// `[input position, outer, outputs]`); UNPACK runs the same walk.
pub(crate) fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let &[position, outer, n] = ctx.op_data::<[u32; 3]>()?;
    let input = ctx.input(position as usize)?.data;
    let outer = outer as usize;
    if outer == 0 {
        return Ok(());
    }
    let slice = input.len() / outer;
    let mut offset = 0;
    for i in 0..n as usize {
        let output = ctx.output(i)?.data;
        let part = output.len() / outer;
        for (k, chunk) in output.chunks_exact_mut(part.max(1)).enumerate().take(outer) {
            let from = k * slice + offset;
            chunk.copy_from_slice(input.get(from..from + part).ok_or(KernelError::Internal)?);
        }
        offset += part;
    }
    if offset == slice {
        Ok(())
    } else {
        Err(KernelError::Internal)
    }
}
