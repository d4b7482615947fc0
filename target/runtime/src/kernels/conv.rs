//! CONV_2D over NHWC tensors, filter `[out_c, fh, fw, in_c / groups]`.
//!
//! Each output is TFLM's reference sum over the filter taps that land
//! inside the input (padded taps are skipped, not read as zeros):
//! `bias[c] + Σ w·(x + input_offset)` requantised per channel for int8,
//! `act(Σ w·x + bias[c])` for float32 with the sum in TFLM's (fy, fx, ic)
//! order, so float results match TFLM's bit for bit.
//!
//! The fast paths:
//! - **1×1, one group** (pointwise; never padded): each output pixel is one
//!   row of a matrix product with the weights, the same as
//!   FULLY_CONNECTED ([`quant_math::matvec`], `matvec_f32`).
//! - **everything else**: per output pixel, the valid tap ranges are worked
//!   out once ([`Axis::taps`](super::window_axis::Axis::taps)); with
//!   dilation 1 the taps of one filter row are one contiguous run of input
//!   and of weights, so each filter row is one dot product, four output
//!   channels at a time sharing every input load and its offset
//!   ([`quant_math::dot4`]). Windows inside the input and on its border take
//!   the same path with different ranges, so the inner loops have no bounds
//!   tests.
//!
//! On cores with the DSP extension (`arm-dsp`), one-group int8 convolutions
//! take the register-blocked kernels of `conv_dsp` and `conv_widened`
//! instead, against weights widened to 16 bits once per channel pair: 1×1
//! layers and short-row filters (int8 patches on the stack) a column of
//! pixel pairs at a time, other filters their rows in place; results are
//! the same bits. The 16-bit im2col patch is what they leave to the
//! portable path.
//!
//! Nothing is stored per channel beyond the requantisation multipliers
//! (5 bytes a channel, against TFLM's 8); the only scratch is the im2col
//! patch of short-row convolutions.

use super::conv_geometry::{Geometry, Window};
use super::conv_i16::{Wide, conv_i16, prepare_int16};
use super::fixed_point::activation_range_float;
use super::fully_connected::{ROWS, accumulate_f32, accumulate_rows_f32, activate, matvec_f32};
use super::in_place;
use super::quant_math::{self, ChannelParams, ChannelSetup, Requant, ScaleRule};
use super::tensor::{Dims, expect_float_weights, expect_type};
use super::{InvokeContext, KernelError, PrepareContext, Registration, types};
use crate::model::TensorInfo;
use crate::schema::{Conv2DOptions, TensorType};

/// The CONV_2D kernel.
pub const REGISTRATION: Registration = typed::<{ types::ALL }>();

/// The CONV_2D kernel with only the variants of the types in `T`
/// ([`types`]): what a firmware for one model registers.
pub(crate) const fn typed<const T: u8>() -> Registration {
    Registration {
        name: "CONV_2D",
        prepare: prepare::<T>,
        invoke: invoke::<T>,
    }
}

const KIND_FLOAT: u32 = 0;
pub(super) const KIND_INT8: u32 = 1;
const KIND_INT16: u32 = 2;

/// Filter rows (`filter_w · in_c` int8 values) shorter than this are
/// gathered into an im2col patch (2 bytes a tap-channel of scratch).
const IM2COL_ROW: usize = 32;

impl Geometry {
    /// Calls `f(input, output)` with the offsets of every output pixel of
    /// a 1×1 window (never padded) and of the input pixel it reads.
    #[inline(always)]
    fn for_each_pointwise_pixel(&self, mut f: impl FnMut(usize, usize)) {
        let (ih, iw, ic) = (
            self.y.in_size as usize,
            self.x.in_size as usize,
            self.in_c as usize,
        );
        let (sy, sx) = (self.y.stride as usize, self.x.stride as usize);
        let oc = self.out_c as usize;
        let mut out = 0;
        for b in 0..self.batches as usize {
            for oy in 0..self.y.out_size as usize {
                let row = (b * ih + oy * sy) * iw * ic;
                for ox in 0..self.x.out_size as usize {
                    f(row + ox * sx * ic, out);
                    out += oc;
                }
            }
        }
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub(super) struct OpData {
    pub(super) kind: u32,
    pub(super) groups: u32,
    /// int8 with short filter rows: 1 when each window is gathered into
    /// the scratch buffer `patch` first (im2col), else 0.
    im2col: u32,
    patch: u32,
    pub(super) geometry: Geometry,
    float_min: f32,
    float_max: f32,
    /// int8 only.
    pub(super) channels: ChannelParams,
}

fn prepare<const T: u8>(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let filter = ctx.input(1)?;
    let bias = ctx.optional_input(2);
    let output = ctx.output(0)?;
    let options = ctx
        .op()
        .raw()
        .builtin_options_as_conv_2_doptions()
        .ok_or(KernelError::MissingOptions)?;
    let activation = options.fused_activation_function();
    quant_math::check_activation(activation)?;
    let (geometry, groups) = checked_geometry(&input, &filter, &output, &options)?;
    let out_c = geometry.out_c as usize;
    if input.dtype != output.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: output.index,
            dtype: output.dtype.0,
        });
    }
    let mut data = OpData {
        kind: KIND_FLOAT,
        groups: groups as u32,
        im2col: 0,
        patch: 0,
        geometry,
        float_min: 0.0,
        float_max: 0.0,
        channels: bytemuck::Zeroable::zeroed(),
    };
    // The requantisation's inputs, for the integer paths.
    let setup = ChannelSetup {
        input,
        filter,
        output,
        channels: out_c,
        channel_axis: 0,
        rule: ScaleRule::PerChannel,
        activation,
    };
    match input.dtype {
        TensorType::FLOAT32 => {
            types::need::<T>(types::FLOAT32, &input)?;
            expect_float_weights(&filter, bias.as_ref(), out_c)?;
            (data.float_min, data.float_max) = activation_range_float(activation);
        }
        TensorType::INT8 => {
            types::need::<T>(types::INT8, &input)?;
            prepare_int8(ctx, &mut data, &setup, bias.as_ref())?
        }
        TensorType::INT16 => {
            types::need::<T>(types::INT16, &input)?;
            data.channels = prepare_int16(ctx, &setup, bias.as_ref())?;
            data.kind = KIND_INT16;
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

/// The convolution's geometry and its number of groups (input channels
/// over the filter's), the filter's shape checked against them.
fn checked_geometry(
    input: &TensorInfo<'_>,
    filter: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
    options: &Conv2DOptions<'_>,
) -> Result<(Geometry, usize), KernelError> {
    let filter_dims = Dims::of(filter)?;
    if filter_dims.rank() != 4 {
        return Err(KernelError::ShapeMismatch {
            tensor: filter.index,
        });
    }
    let geometry = Geometry::new(
        input,
        output,
        (filter_dims.get(1), filter_dims.get(2)),
        options.padding(),
        (options.stride_h(), options.stride_w()),
        (options.dilation_h_factor(), options.dilation_w_factor()),
    )?;
    let (in_c, out_c) = (geometry.in_c as usize, geometry.out_c as usize);
    let filter_c = filter_dims.get(3).max(0) as usize;
    if filter_dims.get(0).max(0) as usize != out_c || filter_c == 0 || in_c % filter_c != 0 {
        return Err(KernelError::ShapeMismatch {
            tensor: filter.index,
        });
    }
    // No input channels means no groups: refused, not divided by.
    let groups = in_c / filter_c;
    if groups == 0 || out_c % groups != 0 {
        return Err(KernelError::ShapeMismatch {
            tensor: filter.index,
        });
    }
    Ok((geometry, groups))
}

/// The int8 path: the per-channel requantisation, and for short filter
/// rows the im2col patch's scratch buffer.
fn prepare_int8(
    ctx: &mut PrepareContext<'_, '_, '_>,
    data: &mut OpData,
    setup: &ChannelSetup<'_>,
    bias: Option<&TensorInfo<'_>>,
) -> Result<(), KernelError> {
    expect_type(&setup.filter, &[TensorType::INT8])?;
    if let Some(bias) = bias {
        let _checked = quant_math::bias_values(bias, setup.channels)?;
    }
    data.channels = quant_math::prepare_channels(ctx, setup)?;
    data.kind = KIND_INT8;
    // Filter rows shorter than a few SIMD chunks: gather each window
    // (16-bit, offset applied, padded taps 0) into a scratch patch and
    // take one long dot product instead of many short ones.
    let (geometry, groups) = (&data.geometry, data.groups as usize);
    let filter_c = geometry.in_c as usize / groups;
    let row = geometry.x.filter as usize * filter_c;
    if groups == 1 && !is_pointwise(geometry, groups) && row < IM2COL_ROW {
        let k = geometry.y.filter as usize * row;
        let patch = PATCH_PIXELS * patch_stride(k) * 2;
        data.patch = ctx.request_scratch(patch as u32, 16)?;
        data.im2col = 1;
    }
    if ctx.runs_in_place() {
        // The lean schedule checked the shape (1×1, one batch, forward
        // when strided): a band of output pixels at a time goes through
        // this temporary, one output row at most when strided.
        let out_c = geometry.out_c as usize;
        let pixels = (geometry.y.out_size * geometry.x.out_size).max(0) as usize;
        let mut band = in_place::pixel_band(out_c, pixels);
        if geometry.x.stride != 1 || geometry.y.stride != 1 {
            band = band.min(geometry.x.out_size.max(1) as usize);
        }
        data.patch = ctx.request_scratch((band * out_c) as u32, 16)?;
    }
    Ok(())
}

/// A pointwise int8 convolution over its own input's buffer (the lean
/// schedule): bands of pixels through the temporary, each an ordinary
/// [`conv_i8`] call over a one-row geometry of that many pixels.
fn conv_i8_in_place(
    ctx: &InvokeContext<'_, '_>,
    data: &OpData,
    shared: &mut [u8],
) -> Result<(), KernelError> {
    let g = &data.geometry;
    let (in_c, out_c) = (g.in_c as usize, g.out_c as usize);
    let filter = ctx.input(1)?;
    let bias = ctx.optional_input(2)?;
    let bias = match &bias {
        Some(b) => Some(b.values::<i32>()?),
        None => None,
    };
    let w = filter.values::<i8>()?;
    let p = &data.channels;
    let requant = Requant::new(ctx.stored(p.multiplier)?, ctx.stored(p.shift)?, p.stage)?;
    if !is_pointwise(g, data.groups as usize)
        || g.batches != 1
        || w.len() < out_c * in_c
        || bias.is_some_and(|b| b.len() < out_c)
        || !requant.covers(out_c)
    {
        return Err(KernelError::Internal);
    }
    let (bias, w) = (bias.map(|b| &b[..out_c]), &w[..out_c * in_c]);
    let temp = ctx.scratch(data.patch)?;
    if g.x.stride != 1 || g.y.stride != 1 {
        let (sy, sx) = (g.y.stride as usize, g.x.stride as usize);
        let rows = (g.y.out_size.max(0) as usize, g.x.out_size.max(0) as usize);
        let steps = (sy * g.x.in_size.max(0) as usize * in_c, sx * in_c);
        return in_place::strided_pixels(shared, temp, rows, steps, (in_c, out_c), |n, x, out| {
            let band = OpData {
                geometry: Geometry {
                    y: unit_axis(&g.y, 1),
                    x: strided_axis(&g.x, n as i32),
                    ..*g
                },
                ..*data
            };
            conv_i8(&band, x, w, bias, &requant, out);
            Ok(())
        });
    }
    let pixels = (g.y.out_size * g.x.out_size) as usize;
    in_place::pixels(shared, temp, (pixels, in_c, out_c), |run, x, out| {
        let band = OpData {
            geometry: Geometry {
                y: unit_axis(&g.y, 1),
                x: unit_axis(&g.x, run.len() as i32),
                ..*g
            },
            ..*data
        };
        conv_i8(&band, x, w, bias, &requant, out);
        Ok(())
    })
}

/// A 1×1, stride-1 axis `n` long, otherwise `a`: a band of pointwise
/// pixels as one row.
fn unit_axis(a: &crate::kernels::window_axis::Axis, n: i32) -> crate::kernels::window_axis::Axis {
    crate::kernels::window_axis::Axis {
        in_size: n,
        out_size: n,
        interior_lo: 0,
        interior_hi: n,
        ..*a
    }
}

/// A 1×1 axis of `n` outputs `a.stride` apart, no padding: a run of a
/// strided pointwise row, its input from the run's first pixel.
fn strided_axis(
    a: &crate::kernels::window_axis::Axis,
    n: i32,
) -> crate::kernels::window_axis::Axis {
    crate::kernels::window_axis::Axis {
        in_size: (n - 1) * a.stride + 1,
        out_size: n,
        pad: 0,
        interior_lo: 0,
        interior_hi: n,
        ..*a
    }
}

fn invoke<const T: u8>(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &OpData = ctx.op_data()?;
    // Before any view of input 0 or output 0: in place, they are one.
    if data.kind == KIND_INT8
        && let Some(shared) = ctx.shared_io()?
    {
        types::linked::<T>(types::INT8)?;
        return conv_i8_in_place(ctx, data, shared);
    }
    let g = &data.geometry;
    let input = ctx.input(0)?;
    let filter = ctx.input(1)?;
    let bias = ctx.optional_input(2)?;
    let output = ctx.output(0)?;
    let out_c = g.out_c as usize;
    let filter_len = (g.y.filter * g.x.filter) as usize * (g.in_c / data.groups) as usize;
    match data.kind {
        KIND_FLOAT => {
            types::linked::<T>(types::FLOAT32)?;
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
                || w.len() < out_c * filter_len
                || bias.is_some_and(|b| b.len() < out_c)
            {
                return Err(KernelError::Internal);
            }
            let bias = bias.map(|b| &b[..out_c]);
            conv_f32(data, x, &w[..out_c * filter_len], bias, out);
            Ok(())
        }
        KIND_INT8 => {
            types::linked::<T>(types::INT8)?;
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
            let requant = Requant::new(ctx.stored(p.multiplier)?, ctx.stored(p.shift)?, p.stage)?;
            if x.len() < g.input_len()
                || out.len() < g.output_len()
                || w.len() < out_c * filter_len
                || bias.is_some_and(|b| b.len() < out_c)
                || !requant.covers(out_c)
            {
                return Err(KernelError::Internal);
            }
            let bias = bias.map(|b| &b[..out_c]);
            let w = &w[..out_c * filter_len];
            if data.im2col != 0 && !dsp_takes(g, filter_len) {
                let patch = ctx.scratch(data.patch)?;
                let patch: &mut [i16] =
                    bytemuck::try_cast_slice_mut(patch).map_err(|_| KernelError::Internal)?;
                let slots = PATCH_PIXELS * patch_stride(filter_len);
                let patches = patch.get_mut(..slots).ok_or(KernelError::Internal)?;
                conv_i8_im2col(data, x, w, bias, &requant, patches, filter_len, out);
            } else {
                conv_i8(data, x, w, bias, &requant, out);
            }
            Ok(())
        }
        KIND_INT16 => {
            types::linked::<T>(types::INT16)?;
            let q = Wide::stored(ctx, &data.channels)?;
            let (x, w) = (input.values::<i16>()?, filter.values::<i8>()?);
            let bias = bias.map(|b| b.data);
            let groups = data.groups as usize;
            conv_i16(g, groups, x, w, bias, &q, output.values::<i16>()?)
        }
        _ => Err(KernelError::Internal),
    }
}

/// Runs of input and weights that one window's taps read, in TFLM's order.
///
/// With one group and dilation 1 along x, a filter row's valid taps read
/// one contiguous run of `cols.len() · in_c` inputs; otherwise every tap
/// is its own run of `in_c / groups` inputs.
#[inline(always)]
fn for_each_run(
    g: &Geometry,
    groups: usize,
    window: &Window,
    group: usize,
    mut f: impl FnMut(usize, usize, usize),
) {
    let fw = g.x.filter as usize;
    let filter_c = g.in_c as usize / groups;
    if groups == 1 && g.x.dilation == 1 {
        let len = window.cols.len() * filter_c;
        for fy in window.rows.clone() {
            let x = window.input_at(g, fy, window.cols.start);
            let w = (fy as usize * fw + window.cols.start as usize) * filter_c;
            f(x, w, len);
        }
    } else {
        for fy in window.rows.clone() {
            for fx in window.cols.clone() {
                let x = window.input_at(g, fy, fx) + group * filter_c;
                let w = (fy as usize * fw + fx as usize) * filter_c;
                f(x, w, filter_c);
            }
        }
    }
}

/// Whether a DSP core's kernels take a convolution that prepare gave a
/// 16-bit im2col patch: short-row filters that fit [`conv_widened`]'s
/// stack patches gather int8 windows there instead (VWW's first 3×3×3
/// layer: 3.25 M -> 2.30 M instructions; KWS's 10×4×1: 1.38 M -> 0.85 M),
/// and once a filter row holds two words the in-place kernels beat
/// widening every tap into the patch.
///
/// [`conv_widened`]: super::conv_widened
fn dsp_takes(g: &Geometry, filter_len: usize) -> bool {
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    if super::conv_widened::takes(filter_len, g.x.filter as usize * g.in_c as usize) {
        return true;
    }
    let _ = filter_len;
    cfg!(all(target_arch = "arm", feature = "arm-dsp"))
        && g.x.dilation == 1
        && g.x.filter as usize * g.in_c as usize >= 8
}

fn is_pointwise(g: &Geometry, groups: usize) -> bool {
    g.y.filter == 1 && g.x.filter == 1 && groups == 1
}

pub(super) fn conv_i8(
    data: &OpData,
    x: &[i8],
    w: &[i8],
    bias: Option<&[i32]>,
    requant: &Requant<'_>,
    out: &mut [i8],
) {
    let g = &data.geometry;
    let groups = data.groups as usize;
    let out_c = g.out_c as usize;
    let filter_len = w.len() / out_c.max(1);
    let x_offset = data.channels.input_offset;
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    let row = g.x.filter as usize * g.in_c as usize;
    // Each DSP path is out of line, so that the stack holds only the
    // buffers (widened weights, patches) of the one that runs.
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    if groups == 1 && (g.x.dilation == 1 || super::conv_widened::takes(filter_len, row)) {
        let ops = super::conv_dsp::Operands {
            geometry: g,
            input: x,
            input_offset: x_offset,
            weights: w,
            bias,
            requant,
        };
        if is_pointwise(g, groups) && super::conv_widened::takes_pointwise(g) {
            super::conv_widened::pointwise(&ops, out);
        } else if is_pointwise(g, groups) {
            super::conv_dsp::pointwise(&ops, out);
        } else if super::conv_widened::takes(filter_len, row) {
            super::conv_widened::im2col(&ops, out);
        } else if super::conv_quads::takes(g) {
            super::conv_quads::rows(&ops, out);
        } else {
            super::conv_dsp::rows_in_place(&ops, out);
        }
        return;
    }
    if is_pointwise(g, groups) {
        let in_c = g.in_c as usize;
        g.for_each_pointwise_pixel(|px, o| {
            let px = &x[px..][..in_c];
            quant_math::matvec(px, x_offset, w, bias, 0, requant, &mut out[o..][..out_c]);
        });
        return;
    }
    let bias_of = |c: usize| bias.map_or(0, |b| b[c]);
    g.for_each_pixel(|win, o| {
        let out = &mut out[o..][..out_c];
        let mut c = 0;
        if groups == 1 {
            while c + 4 <= out_c {
                let ws: [&[i8]; 4] =
                    core::array::from_fn(|i| &w[(c + i) * filter_len..][..filter_len]);
                let mut acc: [i32; 4] = core::array::from_fn(|i| bias_of(c + i));
                for_each_run(g, groups, win, 0, |xo, wo, len| {
                    let xs = &x[xo..][..len];
                    let d = quant_math::dot4(
                        xs,
                        x_offset,
                        [
                            &ws[0][wo..][..len],
                            &ws[1][wo..][..len],
                            &ws[2][wo..][..len],
                            &ws[3][wo..][..len],
                        ],
                    );
                    for i in 0..4 {
                        acc[i] = acc[i].wrapping_add(d[i]);
                    }
                });
                for i in 0..4 {
                    out[c + i] = requant.apply(c + i, acc[i]);
                }
                c += 4;
            }
        }
        let per_group = out_c / groups;
        while c < out_c {
            let wc = &w[c * filter_len..][..filter_len];
            let mut acc = bias_of(c);
            for_each_run(g, groups, win, c / per_group, |xo, wo, len| {
                acc = acc.wrapping_add(quant_math::dot_offset(
                    &wc[wo..][..len],
                    &x[xo..][..len],
                    x_offset,
                ));
            });
            out[c] = requant.apply(c, acc);
            c += 1;
        }
    });
}

/// Pixels gathered before their products are taken on DSP cores. One: a
/// patch per pixel is the scratch the portable path has always requested,
/// and a larger one raises the arena of models whose first layer is at
/// their memory peak (`branches_pools`, `branches_vnpu`).
const PATCH_PIXELS: usize = 1;

/// Patch slot length for `k` taps (slots after the first start
/// word-aligned).
fn patch_stride(k: usize) -> usize {
    if PATCH_PIXELS == 1 {
        k
    } else {
        k.div_ceil(4) * 4
    }
}

/// Int8 convolution through im2col patches (one group, `k` = filter taps
/// × channels; `patches` holds [`PATCH_PIXELS`] slots of [`patch_stride`]).
#[allow(clippy::too_many_arguments)]
fn conv_i8_im2col(
    data: &OpData,
    x: &[i8],
    w: &[i8],
    bias: Option<&[i32]>,
    requant: &Requant<'_>,
    patches: &mut [i16],
    k: usize,
    out: &mut [i8],
) {
    let g = &data.geometry;
    let out_c = g.out_c as usize;
    // -128..=128 (prepare checks the zero point).
    let x_offset = data.channels.input_offset as i16;
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    g.for_each_pixel(|win, o| {
        let patch = &mut patches[..k];
        gather(g, x, x_offset, win, patch);
        patch_products(patch, w, bias, requant, &mut out[o..][..out_c]);
    });
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    {
        let stride = patch_stride(k);
        let mut pending = [0usize; PATCH_PIXELS];
        let mut count = 0;
        g.for_each_pixel(|win, o| {
            let patch = &mut patches[count * stride..][..k];
            gather(g, x, x_offset, win, patch);
            super::gemm::permute_pairs(patch);
            pending[count] = o;
            count += 1;
            if count == PATCH_PIXELS {
                paired_products(patches, k, out_c, &pending, w, bias, requant, out);
                count = 0;
            }
        });
        paired_products(patches, k, out_c, &pending[..count], w, bias, requant, out);
    }
}

/// One window's 16-bit patch: `x + x_offset` at its valid taps, 0 at
/// padded ones (TFLM skips them, and 0 · w adds nothing).
#[inline(always)]
fn gather(g: &Geometry, x: &[i8], x_offset: i16, win: &Window, patch: &mut [i16]) {
    let in_c = g.in_c as usize;
    let row_len = g.x.filter as usize * in_c;
    // Only border windows have padded taps, so only they clear first.
    if win.rows != (0..g.y.filter) || win.cols != (0..g.x.filter) {
        patch.fill(0);
    }
    for fy in win.rows.clone() {
        let row = &mut patch[fy as usize * row_len..][..row_len];
        let (c0, c1) = (win.cols.start as usize * in_c, win.cols.end as usize * in_c);
        if g.x.dilation == 1 {
            let src = &x[win.input_at(g, fy, win.cols.start)..][..c1 - c0];
            for (d, &v) in row[c0..c1].iter_mut().zip(src) {
                *d = i16::from(v) + x_offset;
            }
        } else {
            for fx in win.cols.clone() {
                let src = &x[win.input_at(g, fy, fx)..][..in_c];
                let dst = &mut row[fx as usize * in_c..][..in_c];
                for (d, &v) in dst.iter_mut().zip(src) {
                    *d = i16::from(v) + x_offset;
                }
            }
        }
    }
}

/// The outputs of the pixels whose patches fill the first `pending.len()`
/// slots (reordered by `permute_pairs`; `pending` holds their output
/// offsets), two channels at a time with each pair's constants hoisted.
#[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
#[allow(clippy::too_many_arguments)]
fn paired_products(
    patches: &[i16],
    k: usize,
    out_c: usize,
    pending: &[usize],
    w: &[i8],
    bias: Option<&[i32]>,
    requant: &Requant<'_>,
    out: &mut [i8],
) {
    use super::gemm;
    let stride = patch_stride(k);
    let slots: [(&[[u32; 2]], &[i16]); PATCH_PIXELS] = core::array::from_fn(|j| {
        let slot = patches.get(j * stride..).unwrap_or(&[]);
        gemm::pair_words(slot.get(..k).unwrap_or(&[]))
    });
    let pending = &pending[..pending.len().min(PATCH_PIXELS)];
    let mut c = 0;
    while c < out_c {
        // A last odd channel repeats its row; its copy is not stored.
        let ch = [c, (c + 1).min(out_c - 1)];
        let rows = ch.map(|c| &w[c * k..][..k]);
        let start = ch.map(|c| bias.map_or(0, |b| b[c]));
        for (&(words, tail), &o) in slots.iter().zip(pending) {
            let acc = gemm::pairs_1x2(words, tail, rows);
            out[o + c] = requant.apply(c, start[0].wrapping_add(acc[0]));
            if ch[1] != c {
                out[o + c + 1] = requant.apply(c + 1, start[1].wrapping_add(acc[1]));
            }
        }
        c += 2;
    }
}

/// One pixel's outputs from its im2col patch: `out[c] = requant(bias[c] +
/// Σ w[c]·patch)`, `w` holding `out.len()` rows of `patch.len()` weights.
#[cfg_attr(all(target_arch = "arm", feature = "arm-dsp"), allow(dead_code))]
fn patch_products(
    patch: &[i16],
    w: &[i8],
    bias: Option<&[i32]>,
    requant: &Requant<'_>,
    out: &mut [i8],
) {
    let (k, out_c) = (patch.len(), out.len());
    let bias_of = |c: usize| bias.map_or(0, |b| b[c]);
    let mut c = 0;
    while c + 4 <= out_c {
        let rows: [&[i8]; 4] = core::array::from_fn(|i| &w[(c + i) * k..][..k]);
        let acc = quant_math::dot4_i16(patch, rows);
        for i in 0..4 {
            out[c + i] = requant.apply(c + i, bias_of(c + i).wrapping_add(acc[i]));
        }
        c += 4;
    }
    while c < out_c {
        let acc = quant_math::dot_i16(patch, &w[c * k..][..k]);
        out[c] = requant.apply(c, bias_of(c).wrapping_add(acc));
        c += 1;
    }
}

fn conv_f32(data: &OpData, x: &[f32], w: &[f32], bias: Option<&[f32]>, out: &mut [f32]) {
    let g = &data.geometry;
    let groups = data.groups as usize;
    let out_c = g.out_c as usize;
    let range = (data.float_min, data.float_max);
    #[cfg(not(target_arch = "arm"))]
    if groups == 1 && w.len() / out_c.max(1) <= super::conv_f32_tiles::MAX_PATCH {
        return conv_f32_tiled(data, x, w, bias, out);
    }
    if is_pointwise(g, groups) {
        let in_c = g.in_c as usize;
        g.for_each_pointwise_pixel(|px, o| {
            matvec_f32(&x[px..][..in_c], w, bias, range, &mut out[o..][..out_c]);
        });
        return;
    }
    g.for_each_pixel(|win, o| pixel_f32(data, x, w, bias, win, &mut out[o..][..out_c]));
}

/// One output pixel of a float convolution, its channels eight at a time.
fn pixel_f32(
    data: &OpData,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    win: &Window,
    out: &mut [f32],
) {
    let g = &data.geometry;
    let groups = data.groups as usize;
    let out_c = g.out_c as usize;
    let filter_len = w.len() / out_c.max(1);
    let range = (data.float_min, data.float_max);
    let bias_of = |c: usize| bias.map_or(0.0, |b| b[c]);
    let mut c = 0;
    if groups == 1 {
        while c + ROWS <= out_c {
            let ws: [&[f32]; ROWS] =
                core::array::from_fn(|i| &w[(c + i) * filter_len..][..filter_len]);
            let mut t = [0.0f32; ROWS];
            for_each_run(g, groups, win, 0, |xo, wo, len| {
                accumulate_rows_f32(&mut t, &x[xo..][..len], ws.map(|r| &r[wo..][..len]));
            });
            for (i, &v) in t.iter().enumerate() {
                out[c + i] = activate(v + bias_of(c + i), range);
            }
            c += ROWS;
        }
    }
    let per_group = out_c / groups;
    while c < out_c {
        let wc = &w[c * filter_len..][..filter_len];
        let mut t = 0.0f32;
        for_each_run(g, groups, win, c / per_group, |xo, wo, len| {
            t = accumulate_f32(t, &x[xo..][..len], &wc[wo..][..len]);
        });
        out[c] = activate(t + bias_of(c), range);
        c += 1;
    }
}

/// [`conv_f32`] on the host: whole windows four at a time
/// ([`super::conv_f32_tiles`]), the clipped ones pixel by pixel.
#[cfg(not(target_arch = "arm"))]
fn conv_f32_tiled(data: &OpData, x: &[f32], w: &[f32], bias: Option<&[f32]>, out: &mut [f32]) {
    use super::conv_f32_tiles::{self as tiles, PIXELS, Pending};
    let g = &data.geometry;
    let out_c = g.out_c as usize;
    let range = (data.float_min, data.float_max);
    let mut patch = [[0.0f32; PIXELS]; tiles::MAX_PATCH];
    let mut tile = Pending::new();
    let pointwise = is_pointwise(g, 1);
    let in_c = g.in_c as usize;
    let mut flush = |tile: &mut Pending, out: &mut [f32]| {
        let len = if pointwise {
            tiles::pack_pixels(x, tile, in_c, &mut patch)
        } else {
            tiles::pack_windows(g, x, tile, &mut patch)
        };
        tiles::tile_outputs(&patch[..len], w, bias, range, tile, out_c, out);
    };
    if pointwise {
        g.for_each_pointwise_pixel(|px, o| {
            if tile.push(px, o) {
                flush(&mut tile, out);
            }
        });
    } else {
        g.for_each_pixel(|win, o| {
            if !tiles::is_whole(g, win) {
                pixel_f32(data, x, w, bias, win, &mut out[o..][..out_c]);
            } else if tile.push(win.input_at(g, 0, 0), o) {
                flush(&mut tile, out);
            }
        });
    }
    if !tile.is_empty() {
        flush(&mut tile, out);
    }
}

#[cfg(test)]
mod tests {
    use super::quant_math::{OutputStage, shift_parts};
    use super::*;

    #[test]
    fn paired_patch_products_match_plain() {
        let stage = OutputStage {
            offset: 3,
            min: -128,
            max: 127,
        };
        for (k, out_c) in [(40, 64), (27, 16), (9, 5), (3, 1), (0, 2), (12, 7)] {
            let patch: Vec<i16> = (0..k).map(|i| ((i * 73 + 11) % 511) as i16 - 255).collect();
            let w: Vec<i8> = (0..k * out_c)
                .map(|i| ((i * 91 + 5) % 256) as u8 as i8)
                .collect();
            let bias: Vec<i32> = (0..out_c as i32).map(|c| 1000 * c - 4000).collect();
            let multiplier: Vec<i32> = (0..out_c as i32).map(|c| (1 << 30) + c * 99_991).collect();
            let shift: Vec<[u8; 2]> = (0..out_c as i32).map(|c| shift_parts(-8 + c % 2)).collect();
            let requant = Requant::new(&multiplier, &shift, stage).unwrap();
            let mut want = vec![0i8; out_c];
            patch_products(&patch, &w, Some(&bias), &requant, &mut want);
            // Every slot holds a pixel; the last one holds `patch`.
            let (stride, last) = (patch_stride(k), PATCH_PIXELS - 1);
            let mut slots = vec![0i16; PATCH_PIXELS * stride];
            for j in 0..PATCH_PIXELS {
                let slot = &mut slots[j * stride..][..k];
                for (i, v) in slot.iter_mut().enumerate() {
                    *v = if j == last {
                        patch[i]
                    } else {
                        (i as i16 * 5 + j as i16) % 200
                    };
                }
                crate::kernels::gemm::permute_pairs(slot);
            }
            let mut got = vec![0i8; PATCH_PIXELS * out_c];
            let pending: Vec<usize> = (0..PATCH_PIXELS).map(|j| j * out_c).collect();
            paired_products(
                &slots,
                k,
                out_c,
                &pending,
                &w,
                Some(&bias),
                &requant,
                &mut got,
            );
            assert_eq!(&got[last * out_c..], &want[..], "k {k} out_c {out_c}");
            assert!(want.iter().any(|&v| v != want[0]) || out_c < 3, "k {k}");
        }
    }
}
