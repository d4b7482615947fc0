//! CUMSUM: running sums along one axis (inclusive or exclusive, forward or
//! reversed) — float32 and int8, bit-exact with TFLM's `cumsum.cc`.
//!
//! The axis is a one-element int32 tensor read at invoke, as TFLM reads it.
//! Floats add in the axis' order from 0. int8 follows TFLM's quantised form
//! (that of its ADD): each input less its zero point is shifted up by 20
//! bits and scaled by `1/2`, the running sum is scaled by `2·in_scale /
//! (2^20·out_scale)` and offset by the output zero point. As in TFLM, the
//! running sum starts from the scaled *negative input zero point*, not from
//! zero, and it is a 32-bit sum that wraps on long axes where TFLM's
//! overflows.

use bytemuck::{Pod, Zeroable};

use super::concatenation::positive_axis;
use super::fixed_point::{
    multiply_by_quantized_multiplier_smaller_than_one, quantize_multiplier_smaller_than_one_exp,
};
use super::tensor::{
    Dims, MAX_RANK, check_zero_point, expect_scalar_axis, expect_type, require_quant,
};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The CUMSUM kernel.
pub const REGISTRATION: Registration = Registration {
    name: "CUMSUM",
    prepare,
    invoke,
};

/// TFLM's `kCumSumIntegerShift`.
const LEFT_SHIFT: i32 = 20;

/// What prepare keeps (TFLM's `OpData` for int8, plus the shape and options).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
struct CumsumPlan {
    dtype: i32,
    rank: u32,
    dims: [u32; MAX_RANK],
    exclusive: u32,
    reverse: u32,
    input_offset: i32,
    output_offset: i32,
    input_multiplier: i32,
    input_shift: i32,
    output_multiplier: i32,
    output_shift: i32,
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let options = ctx
        .op()
        .raw()
        .builtin_options_as_cumsum_options()
        .ok_or(KernelError::MissingOptions)?;
    let input = ctx.input(0)?;
    let axis = ctx.input(1)?;
    let output = ctx.output(0)?;
    expect_type(&input, &[TensorType::FLOAT32, TensorType::INT8])?;
    expect_type(&output, &[input.dtype])?;
    expect_scalar_axis(&axis)?;
    let dims = Dims::of(&input)?;
    if dims.rank() == 0 || dims.as_slice() != Dims::of(&output)?.as_slice() {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    let mut plan = CumsumPlan {
        dtype: i32::from(input.dtype.0),
        rank: dims.rank() as u32,
        exclusive: u32::from(options.exclusive()),
        reverse: u32::from(options.reverse()),
        ..CumsumPlan::default()
    };
    for (d, &size) in plan.dims.iter_mut().zip(dims.as_slice()) {
        *d = size as u32;
    }
    if input.dtype == TensorType::INT8 {
        let (qi, qo) = (require_quant(&input)?, require_quant(&output)?);
        check_zero_point(input.index, qi, -128..=127)?;
        check_zero_point(output.index, qo, -128..=127)?;
        let twice_input_scale = 2.0 * f64::from(qi.scale);
        let input_ratio = f64::from(qi.scale) / twice_input_scale;
        let output_ratio = twice_input_scale / (f64::from(1 << LEFT_SHIFT) * f64::from(qo.scale));
        let too_large = KernelError::UnsupportedParameter {
            what: "CUMSUM int8 output scale too small for TFLM's rescaling",
        };
        (plan.input_multiplier, plan.input_shift) =
            quantize_multiplier_smaller_than_one_exp(input_ratio).ok_or(too_large)?;
        (plan.output_multiplier, plan.output_shift) =
            quantize_multiplier_smaller_than_one_exp(output_ratio).ok_or(too_large)?;
        plan.input_offset = -qi.zero_point;
        plan.output_offset = qo.zero_point;
    }
    ctx.store(&plan)
}

/// `(before, axis size, after)`: the products of the dimensions before and
/// after `axis`.
fn split(plan: &CumsumPlan, axis: i32) -> Option<(usize, usize, usize)> {
    let rank = plan.rank as usize;
    let axis = positive_axis(axis, rank)?;
    let dims = &plan.dims[..rank];
    let before = dims[..axis].iter().map(|&d| d as usize).product();
    let after = dims[axis + 1..].iter().map(|&d| d as usize).product();
    Some((before, dims[axis] as usize, after))
}

/// Calls `step(index, first)` along every line of the axis, in TFLM's order
/// (each line from its start, or from its end when reversed; `first` is
/// true at each line's first element).
fn for_each_line(
    plan: &CumsumPlan,
    shape: (usize, usize, usize),
    mut step: impl FnMut(usize, bool),
) {
    let (before, depth, after) = shape;
    let flip = |i: usize, n: usize| if plan.reverse == 1 { n - 1 - i } else { i };
    for a in 0..after {
        let a = flip(a, after);
        for b in 0..before {
            let b = flip(b, before);
            for d in 0..depth {
                step(a + b * depth * after + flip(d, depth) * after, d == 0);
            }
        }
    }
}

fn cumsum_float(
    plan: &CumsumPlan,
    shape: (usize, usize, usize),
    input: &[f32],
    output: &mut [f32],
) {
    let mut sum = 0.0f32;
    for_each_line(plan, shape, |i, first| {
        if first {
            sum = 0.0;
        }
        if plan.exclusive == 1 {
            output[i] = sum;
            sum += input[i];
        } else {
            sum += input[i];
            output[i] = sum;
        }
    });
}

fn cumsum_int8(plan: &CumsumPlan, shape: (usize, usize, usize), input: &[i8], output: &mut [i8]) {
    let scale_in = |y: i32| {
        multiply_by_quantized_multiplier_smaller_than_one(
            y.wrapping_mul(1 << LEFT_SHIFT),
            plan.input_multiplier,
            plan.input_shift,
        )
    };
    let mut sum = 0i32;
    for_each_line(plan, shape, |i, first| {
        if first {
            sum = scale_in(plan.input_offset);
        }
        let y = scale_in(plan.input_offset + i32::from(input[i]));
        let scaled = if plan.exclusive == 1 {
            let before = sum;
            sum = sum.wrapping_add(y);
            before
        } else {
            sum = sum.wrapping_add(y);
            sum
        };
        let raw = multiply_by_quantized_multiplier_smaller_than_one(
            scaled,
            plan.output_multiplier,
            plan.output_shift,
        )
        .wrapping_add(plan.output_offset);
        output[i] = raw.clamp(-128, 127) as i8;
    });
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let plan: &CumsumPlan = ctx.op_data()?;
    let axis_tensor = ctx.input(1)?;
    let axis = *axis_tensor
        .values::<i32>()?
        .first()
        .ok_or(KernelError::ShapeMismatch {
            tensor: axis_tensor.index,
        })?;
    let shape = split(plan, axis).ok_or(KernelError::UnsupportedParameter {
        what: "CUMSUM axis out of range",
    })?;
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    match TensorType(plan.dtype as i8) {
        TensorType::FLOAT32 => cumsum_float(plan, shape, input.values()?, output.values()?),
        TensorType::INT8 => cumsum_int8(plan, shape, input.values()?, output.values()?),
        _ => return Err(KernelError::Internal),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(dims: &[u32], exclusive: bool, reverse: bool) -> CumsumPlan {
        let mut plan = CumsumPlan {
            rank: dims.len() as u32,
            exclusive: u32::from(exclusive),
            reverse: u32::from(reverse),
            ..CumsumPlan::default()
        };
        plan.dims[..dims.len()].copy_from_slice(dims);
        plan
    }

    #[test]
    fn float_running_sums_in_every_mode() {
        // TFLM's cumsum_test vectors: [2, 4] along axis 1.
        let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        let mut out = [0.0f32; 8];
        for (exclusive, reverse, want) in [
            (false, false, [1.0, 3.0, 6.0, 10.0, 5.0, 11.0, 18.0, 26.0]),
            (true, false, [0.0, 1.0, 3.0, 6.0, 0.0, 5.0, 11.0, 18.0]),
            (false, true, [10.0, 9.0, 7.0, 4.0, 26.0, 21.0, 15.0, 8.0]),
            (true, true, [9.0, 7.0, 4.0, 0.0, 21.0, 15.0, 8.0, 0.0]),
        ] {
            let p = plan(&[2, 4], exclusive, reverse);
            cumsum_float(&p, split(&p, 1).unwrap(), &x, &mut out);
            assert_eq!(out, want, "exclusive {exclusive}, reverse {reverse}");
        }
        // Along axis 0 (negative form): columns.
        let p = plan(&[2, 4], false, false);
        cumsum_float(&p, split(&p, -2).unwrap(), &x, &mut out);
        assert_eq!(out, [1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0, 12.0]);
    }

    #[test]
    fn axes_out_of_range_are_refused() {
        let p = plan(&[2, 4], false, false);
        assert!(split(&p, 2).is_none());
        assert!(split(&p, -3).is_none());
    }
}
