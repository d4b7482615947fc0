//! DEPTHWISE_CONV_2D over NHWC tensors, filter `[1, fh, fw, in_c · m]`:
//! output channel `c · m + j` filters input channel `c` (`m` is the depth
//! multiplier).
//!
//! Each output is TFLM's reference sum over the taps that land inside the
//! input (padded taps are skipped): `bias[o] + Σ w·(x + input_offset)`
//! requantised per channel for int8, `act(Σ w·x + bias[o])` for float32
//! with the sum in TFLM's (fy, fx) order, so float results match TFLM's bit
//! for bit.
//!
//! Invoke walks output pixels; for each it accumulates a block of channels
//! side by side, tap after tap, so the inner loop runs along contiguous
//! channels of input and weights (it vectorises, and adds nothing between
//! taps but one multiply-add per channel). Each input value is used once
//! per output channel, so the int8 input offset is not shared as it is in
//! CONV_2D: instead prepare folds `input_offset · Σ_taps w[o]` into a
//! per-channel bias ([`quantized::fold_bias`]) and windows wholly inside
//! the input accumulate plain `w·x`; border windows use the model's bias and
//! the unfolded formula. With `m = 1` (MobileNets) channel `o` reads input
//! channel `o`; other multipliers index the input at `o / m`.

use super::context::Stored;
use super::conv::{Geometry, Window};
use super::fixed_point::activation_range_float;
use super::fully_connected::activate;
use super::quantized::{self, ChannelParams, ChannelSetup, Requant, ScaleRule};
use super::tensor::{Dims, expect_type};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::TensorType;

/// The DEPTHWISE_CONV_2D kernel.
pub const REGISTRATION: Registration = Registration {
    name: "DEPTHWISE_CONV_2D",
    prepare,
    invoke,
};

const KIND_FLOAT: u32 = 0;
const KIND_INT8: u32 = 1;

/// Channels accumulated side by side, tap after tap (a stack array of this
/// many sums; 16 fills x86-64's SSE registers).
const BLOCK: usize = 16;

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct OpData {
    kind: u32,
    multiplier: u32,
    geometry: Geometry,
    float_min: f32,
    float_max: f32,
    /// int8 only: `bias[o] + input_offset · Σ_taps w[o]`.
    folded: Stored<i32>,
    /// int8 only.
    channels: ChannelParams,
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let filter = ctx.input(1)?;
    let bias = ctx.optional_input(2);
    let output = ctx.output(0)?;
    let options = ctx
        .op()
        .raw()
        .builtin_options_as_depthwise_conv_2_doptions()
        .ok_or(KernelError::MissingOptions)?;
    let activation = options.fused_activation_function();
    quantized::check_activation(activation)?;

    let filter_dims = Dims::of(&filter)?;
    if filter_dims.rank() != 4 || filter_dims.get(0) != 1 {
        return Err(KernelError::ShapeMismatch {
            tensor: filter.index,
        });
    }
    let geometry = Geometry::new(
        &input,
        &output,
        (filter_dims.get(1), filter_dims.get(2)),
        options.padding(),
        (options.stride_h(), options.stride_w()),
        (options.dilation_h_factor(), options.dilation_w_factor()),
    )?;
    let (in_c, out_c) = (geometry.in_c as usize, geometry.out_c as usize);
    // The multiplier follows from the shapes; a model whose option disagrees
    // would make TFLM's reference kernel read out of bounds.
    if filter_dims.get(3).max(0) as usize != out_c
        || in_c == 0
        || out_c % in_c != 0
        || options.depth_multiplier() as usize * in_c != out_c
    {
        return Err(KernelError::ShapeMismatch {
            tensor: filter.index,
        });
    }
    if input.dtype != output.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: output.index,
            dtype: output.dtype.0,
        });
    }
    let mut data = OpData {
        kind: KIND_FLOAT,
        multiplier: (out_c / in_c) as u32,
        geometry,
        float_min: 0.0,
        float_max: 0.0,
        folded: bytemuck::Zeroable::zeroed(),
        channels: bytemuck::Zeroable::zeroed(),
    };
    match input.dtype {
        TensorType::FLOAT32 => {
            expect_type(&filter, &[TensorType::FLOAT32])?;
            if let Some(bias) = &bias {
                expect_type(bias, &[TensorType::FLOAT32])?;
                if Dims::of(bias)?.elements() != out_c {
                    return Err(KernelError::ShapeMismatch { tensor: bias.index });
                }
            }
            (data.float_min, data.float_max) = activation_range_float(activation);
        }
        TensorType::INT8 => {
            expect_type(&filter, &[TensorType::INT8])?;
            let weights = filter.constant.ok_or(KernelError::UnsupportedParameter {
                what: "non-constant int8 weights",
            })?;
            let setup = ChannelSetup {
                input,
                filter,
                output,
                channels: out_c,
                channel_axis: 3,
                rule: ScaleRule::PerChannel,
                activation,
            };
            data.channels = quantized::prepare_channels(ctx, &setup)?;
            let weight_sum = |o: usize| {
                weights
                    .iter()
                    .skip(o)
                    .step_by(out_c)
                    .fold(0i32, |s, &v| s.wrapping_add(i32::from(v as i8)))
            };
            data.folded = quantized::fold_bias(
                ctx,
                bias.as_ref(),
                out_c,
                data.channels.input_offset,
                weight_sum,
            )?;
            data.kind = KIND_INT8;
        }
        _ => {
            return Err(KernelError::UnsupportedType {
                tensor: input.index,
                dtype: input.dtype.0,
            });
        }
    }
    ctx.store(&data)
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &OpData = ctx.op_data()?;
    let g = &data.geometry;
    let input = ctx.input(0)?;
    let filter = ctx.input(1)?;
    let bias = ctx.optional_input(2)?;
    let output = ctx.output(0)?;
    let out_c = g.out_c as usize;
    let filter_len = (g.y.filter * g.x.filter) as usize * out_c;
    match data.kind {
        KIND_FLOAT => {
            let bias = match &bias {
                Some(b) => Some(b.values::<f32>()?),
                None => None,
            };
            let (x, w, out) = (
                input.values::<f32>()?,
                filter.values::<f32>()?,
                output.values::<f32>()?,
            );
            if x.len() < g.input_len()
                || out.len() < g.output_len()
                || w.len() < filter_len
                || bias.is_some_and(|b| b.len() < out_c)
            {
                return Err(KernelError::Internal);
            }
            depthwise_f32(data, x, &w[..filter_len], bias.map(|b| &b[..out_c]), out);
            Ok(())
        }
        KIND_INT8 => {
            let p = &data.channels;
            let bias = match &bias {
                Some(b) => Some(b.values::<i32>()?),
                None => None,
            };
            let (x, w, out) = (
                input.values::<i8>()?,
                filter.values::<i8>()?,
                output.values::<i8>()?,
            );
            let folded = ctx.stored(data.folded)?;
            let requant = Requant::new(ctx.stored(p.multiplier)?, ctx.stored(p.shift)?, p.stage)?;
            if x.len() < g.input_len()
                || out.len() < g.output_len()
                || w.len() < filter_len
                || bias.is_some_and(|b| b.len() < out_c)
                || folded.len() < out_c
                || !requant.covers(out_c)
            {
                return Err(KernelError::Internal);
            }
            let biases = Biases {
                model: bias.map(|b| &b[..out_c]),
                folded: &folded[..out_c],
            };
            depthwise_i8(data, x, &w[..filter_len], &biases, &requant, out);
            Ok(())
        }
        _ => Err(KernelError::Internal),
    }
}

/// The two starting points of an int8 accumulator.
struct Biases<'a> {
    /// The model's bias (border windows).
    model: Option<&'a [i32]>,
    /// The folded bias (interior windows).
    folded: &'a [i32],
}

/// Whether every tap of `win` lies inside the input.
#[inline(always)]
fn is_interior(g: &Geometry, win: &Window) -> bool {
    win.rows.len() == g.y.filter as usize && win.cols.len() == g.x.filter as usize
}

/// `w · (x + offset)` for int8 `w`, `x` and an offset in `-128..=128`: the
/// product fits 16 bits (|−128 · 255| < 2^15), so it is computed in 16-bit
/// lanes (SSE2 and Cortex-M DSP have no cheap 32-bit lane multiply).
#[inline(always)]
fn product<const OFFSET: bool>(w: i8, x: i8, offset: i16) -> i32 {
    let x = if OFFSET {
        i16::from(x) + offset
    } else {
        i16::from(x)
    };
    i32::from(i16::from(w) * x)
}

/// What the int8 inner loops read: input, weights, input offset.
#[derive(Clone, Copy)]
struct Operands<'a> {
    x: &'a [i8],
    w: &'a [i8],
    /// `-input_zero_point`, in `-127..=128` (prepare checks the zero point).
    x_offset: i16,
}

/// One block of `N` channels of one pixel with multiplier 1: a fixed
/// length, so the sums stay in registers across the taps. Interior windows
/// (`OFFSET` false) start from the folded bias and add plain `w·x`.
#[inline(always)]
fn block_m1<const N: usize, const OFFSET: bool>(
    g: &Geometry,
    win: &Window,
    ops: Operands<'_>,
    c0: usize,
    acc: &mut [i32; N],
) {
    let (fw, out_c) = (g.x.filter as usize, g.out_c as usize);
    for fy in win.rows.clone() {
        for fx in win.cols.clone() {
            let xs = ops.x[win.input_at(g, fy, fx) + c0..].first_chunk::<N>();
            let ws = ops.w[(fy as usize * fw + fx as usize) * out_c + c0..].first_chunk::<N>();
            if let (Some(xs), Some(ws)) = (xs, ws) {
                for i in 0..N {
                    acc[i] = acc[i].wrapping_add(product::<OFFSET>(ws[i], xs[i], ops.x_offset));
                }
            }
        }
    }
}

/// Output channels `c0..c0 + N` of one pixel with multiplier 1, summed from
/// `start` and requantised into `out`.
#[inline(always)]
fn channels_m1<const N: usize>(
    g: &Geometry,
    win: &Window,
    ops: Operands<'_>,
    c0: usize,
    start: &[i32],
    requant: &Requant<'_>,
    out: &mut [i8],
) {
    let mut acc = [0i32; N];
    acc.copy_from_slice(&start[..N]);
    if is_interior(g, win) {
        block_m1::<N, false>(g, win, ops, c0, &mut acc);
    } else {
        block_m1::<N, true>(g, win, ops, c0, &mut acc);
    }
    for (i, &a) in acc.iter().enumerate() {
        out[c0 + i] = requant.apply(c0 + i, a);
    }
}

fn depthwise_i8(
    data: &OpData,
    x: &[i8],
    w: &[i8],
    biases: &Biases<'_>,
    requant: &Requant<'_>,
    out: &mut [i8],
) {
    let g = &data.geometry;
    let (in_c, out_c) = (g.in_c as usize, g.out_c as usize);
    let m = data.multiplier as usize;
    let fw = g.x.filter as usize;
    let ops = Operands {
        x,
        w,
        x_offset: data.channels.input_offset as i16,
    };
    let x_offset = ops.x_offset;
    let zeros = [0i32; BLOCK];
    g.for_each_pixel(|win, o| {
        let out = &mut out[o..][..out_c];
        let interior = is_interior(g, win);
        // Where each channel's sum starts: folded bias inside, model bias on borders.
        let start = |c0: usize, n: usize| -> &[i32] {
            match (interior, biases.model) {
                (true, _) => &biases.folded[c0..c0 + n],
                (false, Some(b)) => &b[c0..c0 + n],
                (false, None) => &zeros[..n],
            }
        };
        let mut c0 = 0;
        if m == 1 {
            while c0 + BLOCK <= out_c {
                let s = start(c0, BLOCK);
                channels_m1::<BLOCK>(g, win, ops, c0, s, requant, out);
                c0 += BLOCK;
            }
            while c0 + BLOCK / 2 <= out_c {
                let s = start(c0, BLOCK / 2);
                channels_m1::<{ BLOCK / 2 }>(g, win, ops, c0, s, requant, out);
                c0 += BLOCK / 2;
            }
        }
        // The remainder, and every multiplier above one: input channel `c`
        // feeds the `m` contiguous outputs `c·m..c·m + m`.
        let offset = if interior { 0 } else { x_offset };
        while c0 < out_c {
            let n = BLOCK.min(out_c - c0);
            let mut acc = [0i32; BLOCK];
            let acc = &mut acc[..n];
            acc.copy_from_slice(start(c0, n));
            for fy in win.rows.clone() {
                for fx in win.cols.clone() {
                    let pixel = &x[win.input_at(g, fy, fx)..][..in_c];
                    let ws = &w[(fy as usize * fw + fx as usize) * out_c + c0..][..n];
                    let mut i = 0;
                    while i < n {
                        let o = c0 + i;
                        // Outputs of this input channel left in the block.
                        let run = (m - o % m).min(n - i);
                        let v = i16::from(pixel[o / m]) + offset;
                        for (a, &wv) in acc[i..i + run].iter_mut().zip(&ws[i..i + run]) {
                            *a = a.wrapping_add(i32::from(i16::from(wv) * v));
                        }
                        i += run;
                    }
                }
            }
            for (i, &a) in acc.iter().enumerate() {
                out[c0 + i] = requant.apply(c0 + i, a);
            }
            c0 += n;
        }
    });
}

fn depthwise_f32(data: &OpData, x: &[f32], w: &[f32], bias: Option<&[f32]>, out: &mut [f32]) {
    let g = &data.geometry;
    let (in_c, out_c) = (g.in_c as usize, g.out_c as usize);
    let m = data.multiplier as usize;
    let fw = g.x.filter as usize;
    let range = (data.float_min, data.float_max);
    g.for_each_pixel(|win, o| {
        let out = &mut out[o..][..out_c];
        let mut c0 = 0;
        while c0 < out_c {
            let n = BLOCK.min(out_c - c0);
            // TFLM sums the taps from zero, then adds the bias.
            let mut acc = [0.0f32; BLOCK];
            let acc = &mut acc[..n];
            for fy in win.rows.clone() {
                for fx in win.cols.clone() {
                    let px = win.input_at(g, fy, fx);
                    let ws = &w[(fy as usize * fw + fx as usize) * out_c + c0..][..n];
                    if m == 1 {
                        let xs = &x[px + c0..][..n];
                        for ((a, &wv), &xv) in acc.iter_mut().zip(ws).zip(xs) {
                            *a += xv * wv;
                        }
                    } else {
                        let pixel = &x[px..][..in_c];
                        let (mut c, mut j) = (c0 / m, c0 % m);
                        for (a, &wv) in acc.iter_mut().zip(ws) {
                            *a += pixel[c] * wv;
                            j += 1;
                            if j == m {
                                j = 0;
                                c += 1;
                            }
                        }
                    }
                }
            }
            for (i, &a) in acc.iter().enumerate() {
                let b = bias.map_or(0.0, |b| b[c0 + i]);
                out[c0 + i] = activate(a + b, range);
            }
            c0 += n;
        }
    });
}
