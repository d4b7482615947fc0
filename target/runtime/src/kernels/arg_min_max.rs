//! ARG_MAX and ARG_MIN: the index of the largest (smallest) element along
//! one axis, bit-exact with TFLM's micro kernel (`arg_min_max.cc`).
//!
//! TFLM takes float32 and int8 inputs, an int32 axis tensor and an int32
//! output, and so does hilt. The axis is read at invoke as TFLM reads it, so
//! it need not be constant; negative values count from the end. Each output
//! starts from the axis' first element and moves only on a strictly greater
//! (smaller) one, so ties keep the first index and a NaN first element keeps
//! index 0, as TFLM's `GreaterFn` / `LessFn` do. Quantisation does not
//! matter: the order of int8 values is the order of the reals they stand
//! for.

use bytemuck::{Pod, Zeroable};

use super::concatenation::positive_axis;
use super::tensor::{Dims, MAX_RANK, expect_scalar_axis, expect_type};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The ARG_MAX kernel.
pub const ARG_MAX: Registration = Registration {
    name: "ARG_MAX",
    prepare: prepare_max,
    invoke,
};

/// The ARG_MIN kernel.
pub const ARG_MIN: Registration = Registration {
    name: "ARG_MIN",
    prepare: prepare_min,
    invoke,
};

/// What prepare keeps: the input's type and shape (the axis is resolved at
/// invoke) and which extreme is wanted.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
struct ArgPlan {
    dtype: i32,
    /// 1 for ARG_MAX, 0 for ARG_MIN.
    is_max: u32,
    rank: u32,
    dims: [u32; MAX_RANK],
    /// Output elements (checked against the resolved axis at invoke).
    outputs: u32,
}

fn prepare_max(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    prepare(ctx, true)
}

fn prepare_min(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    prepare(ctx, false)
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>, is_max: bool) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let axis = ctx.input(1)?;
    let output = ctx.output(0)?;
    expect_type(&input, &[TensorType::FLOAT32, TensorType::INT8])?;
    expect_scalar_axis(&axis)?;
    expect_type(&output, &[TensorType::INT32])?;
    let dims = Dims::of(&input)?;
    let mut plan = ArgPlan {
        dtype: i32::from(input.dtype.0),
        is_max: u32::from(is_max),
        rank: dims.rank() as u32,
        outputs: Dims::of(&output)?.elements() as u32,
        ..ArgPlan::default()
    };
    for (d, &size) in plan.dims.iter_mut().zip(dims.as_slice()) {
        *d = size as u32;
    }
    // A constant axis is checked now; another is checked at every invoke.
    if let Some(bytes) = axis.constant {
        let value = i32::from_le_bytes(bytes[..4].try_into().map_err(|_| KernelError::Internal)?);
        split(&plan, value).ok_or(KernelError::ShapeMismatch {
            tensor: output.index,
        })?;
    }
    ctx.store(&plan)
}

/// `(outer, axis size, inner)` for `axis`, or `None` when the axis is out of
/// range, empty, or the output does not hold one index per (outer, inner).
fn split(plan: &ArgPlan, axis: i32) -> Option<(usize, usize, usize)> {
    let rank = plan.rank as usize;
    let axis = positive_axis(axis, rank)?;
    let dims = &plan.dims[..rank];
    let outer: usize = dims[..axis].iter().map(|&d| d as usize).product();
    let inner: usize = dims[axis + 1..].iter().map(|&d| d as usize).product();
    let size = dims[axis] as usize;
    (size > 0 && outer * inner == plan.outputs as usize).then_some((outer, size, inner))
}

/// TFLM's `ArgMinMax` loop: for each (outer, inner), the first index whose
/// value `better` than every earlier one.
fn arg_of<T: Copy>(
    input: &[T],
    (outer, size, inner): (usize, usize, usize),
    better: impl Fn(T, T) -> bool,
    output: &mut [i32],
) {
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| input[(o * size + k) * inner + i];
            let mut best = at(0);
            let mut index = 0;
            for k in 1..size {
                let value = at(k);
                if better(value, best) {
                    best = value;
                    index = k as i32;
                }
            }
            output[o * inner + i] = index;
        }
    }
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let plan: &ArgPlan = ctx.op_data()?;
    let axis_tensor = ctx.input(1)?;
    let axis = *axis_tensor
        .values::<i32>()?
        .first()
        .ok_or(KernelError::ShapeMismatch {
            tensor: axis_tensor.index,
        })?;
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    let out_index = output.index;
    let shape = split(plan, axis).ok_or(KernelError::ShapeMismatch { tensor: out_index })?;
    let out = output.values::<i32>()?;
    let max = plan.is_max == 1;
    match TensorType(plan.dtype as i8) {
        TensorType::FLOAT32 if max => arg_of(input.values::<f32>()?, shape, |a, b| a > b, out),
        TensorType::FLOAT32 => arg_of(input.values::<f32>()?, shape, |a, b| a < b, out),
        TensorType::INT8 if max => arg_of(input.values::<i8>()?, shape, |a, b| a > b, out),
        TensorType::INT8 => arg_of(input.values::<i8>()?, shape, |a, b| a < b, out),
        _ => return Err(KernelError::Internal),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(dims: &[u32], outputs: u32) -> ArgPlan {
        let mut plan = ArgPlan {
            rank: dims.len() as u32,
            outputs,
            ..ArgPlan::default()
        };
        plan.dims[..dims.len()].copy_from_slice(dims);
        plan
    }

    #[test]
    fn ties_keep_the_first_index() {
        // [2, 3] along axis 1: rows [1, 5, 5] and [7, 7, 2].
        let p = plan(&[2, 3], 2);
        let mut out = [0i32; 2];
        arg_of(
            &[1i8, 5, 5, 7, 7, 2],
            split(&p, 1).unwrap(),
            |a, b| a > b,
            &mut out,
        );
        assert_eq!(out, [1, 0]);
        arg_of(
            &[1i8, 5, 5, 7, 7, 2],
            split(&p, -1).unwrap(),
            |a, b| a < b,
            &mut out,
        );
        assert_eq!(out, [0, 2]);
    }

    #[test]
    fn reduces_a_middle_axis() {
        // [2, 2, 2] along axis 1: out[o][i] compares x[o][0][i] and x[o][1][i].
        let p = plan(&[2, 2, 2], 4);
        let mut out = [9i32; 4];
        let x = [0.0f32, 3.0, 1.0, 2.0, -1.0, f32::NAN, -2.0, 4.0];
        arg_of(&x, split(&p, 1).unwrap(), |a, b| a > b, &mut out);
        // NaN first keeps index 0, as TFLM's comparison does.
        assert_eq!(out, [1, 0, 0, 0]);
    }

    #[test]
    fn bad_axes_and_shapes_are_refused() {
        let p = plan(&[2, 3], 2);
        assert!(split(&p, 2).is_none());
        assert!(split(&p, -3).is_none());
        // Axis 0 leaves three outputs, not two.
        assert!(split(&p, 0).is_none());
        assert!(split(&plan(&[2, 0], 2), 1).is_none());
    }
}
