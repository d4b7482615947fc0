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

/// Channels accumulated side by side (a stack array of this many sums).
const BLOCK: usize = 32;

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

/// `acc[i] += w[i] · (x[i] + offset)`; the compiler drops the add when
/// `OFFSET` is false.
#[inline(always)]
fn mac_i8<const OFFSET: bool>(acc: &mut [i32], w: &[i8], x: &[i8], offset: i32) {
    for ((a, &wv), &xv) in acc.iter_mut().zip(w).zip(x) {
        let xv = if OFFSET {
            i32::from(xv) + offset
        } else {
            i32::from(xv)
        };
        *a = a.wrapping_add(i32::from(wv) * xv);
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
    let x_offset = data.channels.input_offset;
    g.for_each_pixel(|win, o| {
        let out = &mut out[o..][..out_c];
        let interior = is_interior(g, win);
        let mut c0 = 0;
        while c0 < out_c {
            let n = BLOCK.min(out_c - c0);
            let mut acc = [0i32; BLOCK];
            let acc = &mut acc[..n];
            match (interior, biases.model) {
                (true, _) => acc.copy_from_slice(&biases.folded[c0..c0 + n]),
                (false, Some(b)) => acc.copy_from_slice(&b[c0..c0 + n]),
                (false, None) => {}
            }
            for fy in win.rows.clone() {
                for fx in win.cols.clone() {
                    let px = win.input_at(g, fy, fx);
                    let ws = &w[(fy as usize * fw + fx as usize) * out_c + c0..][..n];
                    if m == 1 {
                        let xs = &x[px + c0..][..n];
                        if interior {
                            mac_i8::<false>(acc, ws, xs, 0);
                        } else {
                            mac_i8::<true>(acc, ws, xs, x_offset);
                        }
                    } else {
                        let pixel = &x[px..][..in_c];
                        let offset = if interior { 0 } else { x_offset };
                        for (i, (a, &wv)) in acc.iter_mut().zip(ws).enumerate() {
                            let xv = i32::from(pixel[(c0 + i) / m]) + offset;
                            *a = a.wrapping_add(i32::from(wv) * xv);
                        }
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
                        for (i, (a, &wv)) in acc.iter_mut().zip(ws).enumerate() {
                            *a += pixel[(c0 + i) / m] * wv;
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
