//! AVERAGE_POOL_2D and MAX_POOL_2D over NHWC tensors (float32, int8 and
//! int16) and L2_POOL_2D (float32, TFLM's only type: the square root of
//! the mean of the squares), bit-exact with TFLM's reference kernels.
//!
//! Prepare computes TFLM's padding and checks every window overlaps the
//! input (TFLM fails at invoke otherwise). Invoke clamps each window to the
//! input once per output pixel, then sweeps it sixteen channels at a time
//! with the accumulators in registers: every channel still sees its values
//! in TFLM's order (row by row, left to right), so float sums round exactly
//! as TFLM's do.

use bytemuck::{Pod, Zeroable};

use super::fixed_point::activation_range_float;
use super::fixed_point::activation_range_quantized;
use super::tensor::{Dims, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration, types};
use crate::model::TensorInfo;
use crate::schema::{Padding, Pool2DOptions, TensorType};

/// The AVERAGE_POOL_2D kernel.
pub const AVERAGE_POOL_2D: Registration = Registration {
    name: "AVERAGE_POOL_2D",
    prepare: prepare_average::<{ types::ALL }>,
    invoke: invoke::<{ types::ALL }, EITHER_MODE>,
};

/// The MAX_POOL_2D kernel.
pub const MAX_POOL_2D: Registration = Registration {
    name: "MAX_POOL_2D",
    prepare: prepare_max::<{ types::ALL }>,
    invoke: invoke::<{ types::ALL }, EITHER_MODE>,
};

/// AVERAGE_POOL_2D with only the variants of the types in `T` ([`types`])
/// and no max pooling: what a firmware for one model registers.
pub(crate) const fn average_typed<const T: u8>() -> Registration {
    Registration {
        name: "AVERAGE_POOL_2D",
        prepare: prepare_average::<T>,
        invoke: invoke::<T, AVERAGE_ONLY>,
    }
}

/// MAX_POOL_2D with only the variants of the types in `T` ([`types`]) and
/// no average pooling.
pub(crate) const fn max_typed<const T: u8>() -> Registration {
    Registration {
        name: "MAX_POOL_2D",
        prepare: prepare_max::<T>,
        invoke: invoke::<T, MAX_ONLY>,
    }
}

/// Which windows an invoke reduces: the shared kernel of both operators
/// reads it from the op data, a typed one knows it.
const EITHER_MODE: u8 = 0;
const AVERAGE_ONLY: u8 = 1;
const MAX_ONLY: u8 = 2;

/// The L2_POOL_2D kernel (an invoke of its own, so that the average and
/// max pools' code stays as it was without it).
pub const L2_POOL_2D: Registration = Registration {
    name: "L2_POOL_2D",
    prepare: prepare_l2,
    invoke: invoke_l2,
};

/// What a window reduces to.
const MODE_AVERAGE: u32 = 0;
const MODE_MAX: u32 = 1;
const MODE_L2: u32 = 2;

const KIND_FLOAT32: u32 = 0;
const KIND_INT8: u32 = 1;
const KIND_INT16: u32 = 2;

/// Channels accumulated together, in registers (no scratch memory).
const LANES: usize = 16;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
struct PoolData {
    kind: u32,
    /// `MODE_AVERAGE`, `MODE_MAX` or `MODE_L2`.
    mode: u32,
    batches: u32,
    input_height: u32,
    input_width: u32,
    depth: u32,
    output_height: u32,
    output_width: u32,
    stride_height: i32,
    stride_width: i32,
    filter_height: i32,
    filter_width: i32,
    padding_height: i32,
    padding_width: i32,
    activation_min: i32,
    activation_max: i32,
    activation_min_f32: f32,
    activation_max_f32: f32,
}

/// TFLM's `ComputeOutSize`.
fn out_size(padding: Padding, image: i32, filter: i32, stride: i32) -> i32 {
    if stride == 0 {
        return 0;
    }
    match padding {
        Padding::SAME => (image + stride - 1) / stride,
        Padding::VALID => (image + stride - filter) / stride,
        _ => 0,
    }
}

/// TFLM's `ComputePaddingWithOffset` (the leading side; the odd pixel, if
/// any, goes to the trailing side).
fn padding_before(stride: i32, image: i32, filter: i32, out: i32) -> i32 {
    let total = ((out - 1) * stride + filter - image).max(0);
    total / 2
}

/// Clamped window `[start, end)` along one axis for output position `o`.
#[inline(always)]
fn window(o: i32, stride: i32, padding: i32, filter: i32, image: i32) -> (i32, i32, i32) {
    let origin = o * stride - padding;
    let start = (-origin).max(0);
    let end = filter.min(image - origin);
    (origin, start, end)
}

fn prepare_average<const T: u8>(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    prepare::<T>(ctx, MODE_AVERAGE)
}

fn prepare_max<const T: u8>(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    prepare::<T>(ctx, MODE_MAX)
}

fn prepare_l2(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    super::tensor::expect_type(&input, &[TensorType::FLOAT32])?;
    prepare::<{ types::ALL }>(ctx, MODE_L2)
}

fn prepare<const T: u8>(
    ctx: &mut PrepareContext<'_, '_, '_>,
    mode: u32,
) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    let options = ctx
        .op()
        .raw()
        .builtin_options_as_pool_2_doptions()
        .ok_or(KernelError::MissingOptions)?;
    if input.dtype != output.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: output.index,
            dtype: output.dtype.0,
        });
    }
    let (in_dims, out_dims) = checked_dims(&input, &output)?;
    let mut data = window_data(&options, &in_dims, &out_dims, output.index)?;
    data.mode = mode;
    let activation = options.fused_activation_function();
    match input.dtype {
        TensorType::FLOAT32 => {
            types::need::<T>(types::FLOAT32, &input)?;
            let (lo, hi) = activation_range_float(activation);
            data.activation_min_f32 = lo;
            data.activation_max_f32 = hi;
        }
        TensorType::INT8 | TensorType::INT16 => {
            if T != types::ALL && !types::covers(T, input.dtype) {
                return Err(KernelError::UnsupportedType {
                    tensor: input.index,
                    dtype: input.dtype.0,
                });
            }
            let qi = require_quant(&input)?;
            let qo = require_quant(&output)?;
            if (f64::from(qi.scale) - f64::from(qo.scale)).abs() > 1.0e-6
                || qi.zero_point != qo.zero_point
            {
                return Err(KernelError::UnsupportedParameter {
                    what: "pool input and output quantisation differ",
                });
            }
            let (qmin, qmax, kind) = if input.dtype == TensorType::INT8 {
                (-128, 127, KIND_INT8)
            } else {
                (-32768, 32767, KIND_INT16)
            };
            let (lo, hi) =
                activation_range_quantized(activation, qo.scale, qo.zero_point, qmin, qmax);
            data.kind = kind;
            data.activation_min = lo;
            data.activation_max = hi;
        }
        other => {
            return Err(KernelError::UnsupportedType {
                tensor: input.index,
                dtype: other.0,
            });
        }
    }
    ctx.store(&data)
}

/// The input's and output's shapes: both NHWC, with the same batches and
/// channels.
fn checked_dims(
    input: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
) -> Result<(Dims, Dims), KernelError> {
    let in_dims = Dims::of(input)?;
    let out_dims = Dims::of(output)?;
    for (t, d) in [(input, &in_dims), (output, &out_dims)] {
        if d.rank() != 4 || d.as_slice().iter().any(|&v| v < 0) {
            return Err(KernelError::UnsupportedRank {
                tensor: t.index,
                rank: d.rank() as u32,
            });
        }
    }
    if in_dims.get(0) != out_dims.get(0) || in_dims.get(3) != out_dims.get(3) {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    Ok((in_dims, out_dims))
}

/// The op data's sizes, strides, filter and TFLM's padding (a float
/// average pool until the caller says otherwise), checked so that window
/// arithmetic stays within i32 and every window overlaps the input.
fn window_data(
    options: &Pool2DOptions<'_>,
    in_dims: &Dims,
    out_dims: &Dims,
    output: u32,
) -> Result<PoolData, KernelError> {
    let (stride_h, stride_w) = (options.stride_h(), options.stride_w());
    let (filter_h, filter_w) = (options.filter_height(), options.filter_width());
    if stride_h <= 0 || stride_w <= 0 || filter_h <= 0 || filter_w <= 0 {
        return Err(KernelError::UnsupportedParameter {
            what: "pool stride or filter size",
        });
    }
    let (in_h, in_w) = (in_dims.get(1), in_dims.get(2));
    let (out_h, out_w) = (out_dims.get(1), out_dims.get(2));
    if !fits_i32(in_h, stride_h, filter_h, out_h) || !fits_i32(in_w, stride_w, filter_w, out_w) {
        return Err(KernelError::UnsupportedParameter {
            what: "pool geometry too large",
        });
    }
    let padding = options.padding();
    // TFLM pads for the output size the options imply, then walks the
    // output tensor's own shape.
    let padding_height = padding_before(
        stride_h,
        in_h,
        filter_h,
        out_size(padding, in_h, filter_h, stride_h),
    );
    let padding_width = padding_before(
        stride_w,
        in_w,
        filter_w,
        out_size(padding, in_w, filter_w, stride_w),
    );
    // Every window must overlap the input.
    if out_dims.elements() > 0
        && (any_empty_window(out_h, stride_h, padding_height, filter_h, in_h)
            || any_empty_window(out_w, stride_w, padding_width, filter_w, in_w))
    {
        return Err(KernelError::ShapeMismatch { tensor: output });
    }
    Ok(PoolData {
        kind: KIND_FLOAT32,
        mode: MODE_AVERAGE,
        batches: in_dims.get(0) as u32,
        input_height: in_h as u32,
        input_width: in_w as u32,
        depth: in_dims.get(3) as u32,
        output_height: out_h as u32,
        output_width: out_w as u32,
        stride_height: stride_h,
        stride_width: stride_w,
        filter_height: filter_h,
        filter_width: filter_w,
        padding_height,
        padding_width,
        ..PoolData::default()
    })
}

/// Whether window arithmetic along one axis (here and per pixel at invoke)
/// stays within i32.
fn fits_i32(image: i32, stride: i32, filter: i32, out: i32) -> bool {
    let (image, stride, filter, out) = (
        i64::from(image),
        i64::from(stride),
        i64::from(filter),
        i64::from(out),
    );
    (image + stride + filter).max(out * stride + filter + image) < i64::from(i32::MAX)
}

/// Whether any of `n` output positions' windows misses the input entirely.
fn any_empty_window(n: i32, stride: i32, pad: i32, filter: i32, image: i32) -> bool {
    (0..n).any(|o| {
        let (_, start, end) = window(o, stride, pad, filter, image);
        start >= end
    })
}

/// One output pixel's window, clamped to the input.
#[derive(Debug, Clone, Copy)]
struct Window {
    /// Index (in pixels, batch included) of the window's first input row start.
    first_row: usize,
    rows: usize,
    /// First input column.
    first_col: usize,
    cols: usize,
    /// Element index of the output pixel's first channel.
    out: usize,
}

/// Calls `f` for every output pixel's window, in output order.
#[inline(always)]
fn for_each_window(p: &PoolData, mut f: impl FnMut(&Window)) {
    let (in_h, in_w) = (p.input_height as i32, p.input_width as i32);
    let depth = p.depth as usize;
    let mut out = 0usize;
    for batch in 0..p.batches as usize {
        for out_y in 0..p.output_height as i32 {
            let (y_origin, y_start, y_end) = window(
                out_y,
                p.stride_height,
                p.padding_height,
                p.filter_height,
                in_h,
            );
            let first_row = batch * in_h as usize + (y_origin + y_start) as usize;
            for out_x in 0..p.output_width as i32 {
                let (x_origin, x_start, x_end) =
                    window(out_x, p.stride_width, p.padding_width, p.filter_width, in_w);
                f(&Window {
                    first_row,
                    rows: (y_end - y_start) as usize,
                    first_col: (x_origin + x_start) as usize,
                    cols: (x_end - x_start) as usize,
                    out,
                });
                out += depth;
            }
        }
    }
}

/// Folds every input value of each window into per-channel accumulators
/// (starting at `init`), then writes `finish(acc, count)`.
///
/// Channels go in groups of [`LANES`] whose accumulators are a fixed-size
/// array, so they stay in registers and each window pixel is one vector
/// operation; a last partial group takes the same path on a shorter slice.
#[inline(always)]
fn pool<T: Copy, A: Copy>(
    p: &PoolData,
    input: &[T],
    output: &mut [T],
    init: A,
    fold: impl Fn(A, T) -> A,
    finish: impl Fn(A, usize) -> T,
) -> Result<(), KernelError> {
    let depth = p.depth as usize;
    let in_w = p.input_width as usize;
    let in_len = p.batches as usize * p.input_height as usize * in_w * depth;
    let out_len = p.batches as usize * p.output_height as usize * p.output_width as usize * depth;
    if input.len() != in_len || output.len() != out_len {
        return Err(KernelError::Internal);
    }
    for_each_window(p, |w| {
        let count = w.rows * w.cols;
        let mut c0 = 0;
        while c0 < depth {
            let n = LANES.min(depth - c0);
            let mut acc = [init; LANES];
            for row in w.first_row..w.first_row + w.rows {
                let start = (row * in_w + w.first_col) * depth + c0;
                for col in 0..w.cols {
                    let base = start + col * depth;
                    if n == LANES {
                        let src = &input[base..base + LANES];
                        for k in 0..LANES {
                            acc[k] = fold(acc[k], src[k]);
                        }
                    } else {
                        for (a, &v) in acc.iter_mut().zip(&input[base..base + n]) {
                            *a = fold(*a, v);
                        }
                    }
                }
            }
            for (o, &a) in output[w.out + c0..w.out + c0 + n].iter_mut().zip(&acc) {
                *o = finish(a, count);
            }
            c0 += n;
        }
    });
    Ok(())
}

/// TFLM's integer average: round half away from zero.
#[inline(always)]
fn rounded_average(acc: i32, count: usize) -> i32 {
    let count = count as i32;
    if acc > 0 {
        (acc + count / 2) / count
    } else {
        (acc - count / 2) / count
    }
}

/// L2_POOL_2D (float32 only): the square root of each window's mean square.
fn invoke_l2(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let p: &PoolData = ctx.op_data()?;
    if p.kind != KIND_FLOAT32 || p.mode != MODE_L2 {
        return Err(KernelError::Internal);
    }
    let (input, output) = (ctx.input(0)?, ctx.output(0)?);
    let (lo, hi) = (p.activation_min_f32, p.activation_max_f32);
    let clamp = move |x: f32| {
        let x = if x < lo { lo } else { x };
        if hi < x { hi } else { x }
    };
    pool(
        p,
        input.values::<f32>()?,
        output.values::<f32>()?,
        0.0f32,
        |s, v| s + v * v,
        |s, n| clamp(libm::sqrtf(s / n as f32)),
    )
}

fn invoke<const T: u8, const MODES: u8>(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let p: &PoolData = ctx.op_data()?;
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    let (lo, hi) = (p.activation_min, p.activation_max);
    let max = match MODES {
        AVERAGE_ONLY => false,
        MAX_ONLY => true,
        _ => p.mode == MODE_MAX,
    };
    match p.kind {
        KIND_FLOAT32 => {
            types::linked::<T>(types::FLOAT32)?;
            let (lo, hi) = (p.activation_min_f32, p.activation_max_f32);
            // TFLM's ActivationFunctionWithMinMax: min(max(x, lo), hi).
            let clamp = move |x: f32| {
                let x = if x < lo { lo } else { x };
                if hi < x { hi } else { x }
            };
            let (i, o) = (input.values::<f32>()?, output.values::<f32>()?);
            if max {
                pool(
                    p,
                    i,
                    o,
                    f32::MIN,
                    |m, v| if m < v { v } else { m },
                    |m, _| clamp(m),
                )
            } else {
                pool(p, i, o, 0.0f32, |s, v| s + v, |s, n| clamp(s / n as f32))
            }
        }
        KIND_INT8 => {
            types::linked::<T>(types::INT8)?;
            let (i, o) = (input.values::<i8>()?, output.values::<i8>()?);
            if max {
                pool(
                    p,
                    i,
                    o,
                    i8::MIN,
                    |m, v| m.max(v),
                    |m, _| i32::from(m).clamp(lo, hi) as i8,
                )
            } else {
                pool(
                    p,
                    i,
                    o,
                    0i32,
                    |s, v| s + i32::from(v),
                    |s, n| rounded_average(s, n).clamp(lo, hi) as i8,
                )
            }
        }
        KIND_INT16 => {
            types::linked::<T>(types::INT16)?;
            let (i, o) = (input.values::<i16>()?, output.values::<i16>()?);
            if max {
                pool(
                    p,
                    i,
                    o,
                    i16::MIN,
                    |m, v| m.max(v),
                    |m, _| i32::from(m).clamp(lo, hi) as i16,
                )
            } else {
                pool(
                    p,
                    i,
                    o,
                    0i32,
                    |s, v| s + i32::from(v),
                    |s, n| rounded_average(s, n).clamp(lo, hi) as i16,
                )
            }
        }
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_matches_tflm() {
        // SAME, 5 wide, filter 3, stride 2: out 3, total pad 2 → 1 before.
        let out = out_size(Padding::SAME, 5, 3, 2);
        assert_eq!(out, 3);
        assert_eq!(padding_before(2, 5, 3, out), 1);
        // SAME, 4 wide, filter 2, stride 2: no padding.
        assert_eq!(padding_before(2, 4, 2, out_size(Padding::SAME, 4, 2, 2)), 0);
        // SAME, 6 wide, filter 3, stride 2: out 3, total pad 1 → 0 before.
        assert_eq!(padding_before(2, 6, 3, out_size(Padding::SAME, 6, 3, 2)), 0);
        assert_eq!(out_size(Padding::VALID, 7, 3, 2), 3);
    }

    #[test]
    fn rounding_is_half_away_from_zero() {
        assert_eq!(rounded_average(5, 2), 3);
        assert_eq!(rounded_average(-5, 2), -3);
        assert_eq!(rounded_average(4, 3), 1);
        assert_eq!(rounded_average(-4, 3), -1);
        assert_eq!(rounded_average(0, 9), 0);
    }
}
