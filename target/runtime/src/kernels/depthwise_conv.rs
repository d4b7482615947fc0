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
//! per-channel bias ([`quant_math::fold_bias`]) and windows wholly inside
//! the input accumulate plain `w·x`; border windows use the model's bias and
//! the unfolded formula. With `m = 1` (MobileNets) channel `o` reads input
//! channel `o`; other multipliers index the input at `o / m`.

use super::context::Stored;
use super::conv_geometry::{Geometry, Window};
use super::conv_i16::{Wide, depthwise_i16, prepare_int16};
#[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
use super::depthwise_packed;
#[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
use super::depthwise_rows;
use super::fixed_point::activation_range_float;
use super::fully_connected::activate;
use super::in_place;
use super::quant_math::{self, ChannelParams, ChannelSetup, Requant, ScaleRule};
use super::tensor::{Dims, expect_float_weights, expect_type};
use super::{InvokeContext, KernelError, PrepareContext, Registration, types};
use crate::model::TensorInfo;
use crate::schema::{DepthwiseConv2DOptions, TensorType};

/// The DEPTHWISE_CONV_2D kernel.
pub const REGISTRATION: Registration = typed::<{ types::ALL }>();

/// The DEPTHWISE_CONV_2D kernel with only the variants of the types in `T`
/// ([`types`]): what a firmware for one model registers.
pub(crate) const fn typed<const T: u8>() -> Registration {
    Registration {
        name: "DEPTHWISE_CONV_2D",
        prepare: prepare::<T>,
        invoke: invoke::<T>,
    }
}

const KIND_FLOAT: u32 = 0;
const KIND_INT8: u32 = 1;
/// int8 whose accumulators all stay within `±2^29`
/// ([`small_accumulators`]): the packed path may requantise in 32 bits.
const KIND_INT8_NARROW: u32 = 2;
/// int16x8 (int16 activations, int8 weights, int64 bias): portable.
const KIND_INT16: u32 = 3;

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

fn prepare<const T: u8>(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
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
    quant_math::check_activation(activation)?;
    let geometry = checked_geometry(&input, &filter, &output, &options)?;
    let (in_c, out_c) = (geometry.in_c as usize, geometry.out_c as usize);
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
    // The requantisation's inputs, for the integer paths.
    let setup = ChannelSetup {
        input,
        filter,
        output,
        channels: out_c,
        channel_axis: 3,
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

/// The convolution's geometry, the filter's shape and the depth multiplier
/// checked against it.
fn checked_geometry(
    input: &TensorInfo<'_>,
    filter: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
    options: &DepthwiseConv2DOptions<'_>,
) -> Result<Geometry, KernelError> {
    let filter_dims = Dims::of(filter)?;
    if filter_dims.rank() != 4 || filter_dims.get(0) != 1 {
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
    Ok(geometry)
}

/// The int8 path: the per-channel requantisation, the folded bias, and
/// whether the accumulators are small enough for the packed path's 32-bit
/// requantisation.
fn prepare_int8(
    ctx: &mut PrepareContext<'_, '_, '_>,
    data: &mut OpData,
    setup: &ChannelSetup<'_>,
    bias: Option<&TensorInfo<'_>>,
) -> Result<(), KernelError> {
    let out_c = setup.channels;
    expect_type(&setup.filter, &[TensorType::INT8])?;
    let weights = setup
        .filter
        .constant
        .ok_or(KernelError::UnsupportedParameter {
            what: "non-constant int8 weights",
        })?;
    data.channels = quant_math::prepare_channels(ctx, setup)?;
    let weight_sum = |o: usize| {
        weights
            .iter()
            .skip(o)
            .step_by(out_c)
            .fold(0i32, |s, &v| s.wrapping_add(i32::from(v as i8)))
    };
    data.folded = quant_math::fold_bias(ctx, bias, out_c, data.channels.input_offset, weight_sum)?;
    let taps = (data.geometry.y.filter * data.geometry.x.filter).max(0) as usize;
    let offset = data.channels.input_offset;
    let narrow = small_accumulators(out_c, taps, offset, bias, &weight_sum)?;
    data.kind = if narrow { KIND_INT8_NARROW } else { KIND_INT8 };
    if ctx.runs_in_place() {
        // The lean schedule checked that output rows are no wider than
        // input rows: bands of rows go through this temporary (scratch 0).
        let (in_row, out_row) = row_bytes(&data.geometry);
        let bands = in_place::RowBands::of(&data.geometry.y, in_row, out_row);
        ctx.request_scratch(bands.temp_bytes(out_row) as u32, 16)?;
    }
    Ok(())
}

/// Bytes of one input row and one output row of `g`.
fn row_bytes(g: &Geometry) -> (usize, usize) {
    (
        g.x.in_size.max(0) as usize * g.in_c as usize,
        g.x.out_size.max(0) as usize * g.out_c as usize,
    )
}

/// An int8 depthwise convolution over its own input's buffer (the lean
/// schedule): bands of output rows through the temporary, each an ordinary
/// [`depthwise_i8`] call over the input rows the band reads.
fn depthwise_i8_in_place(
    ctx: &InvokeContext<'_, '_>,
    data: &OpData,
    shared: &mut [u8],
) -> Result<(), KernelError> {
    let g = &data.geometry;
    let out_c = g.out_c as usize;
    let filter_len = (g.y.filter * g.x.filter) as usize * out_c;
    let w = ctx.input(1)?.values::<i8>()?;
    let bias = ctx.optional_input(2)?;
    let bias = match &bias {
        Some(b) => Some(b.values::<i32>()?),
        None => None,
    };
    let folded = ctx.stored(data.folded)?;
    let p = &data.channels;
    let tables = Tables {
        multiplier: ctx.stored(p.multiplier)?,
        shift: ctx.stored(p.shift)?,
        narrow: data.kind == KIND_INT8_NARROW,
    };
    let requant = Requant::new(tables.multiplier, tables.shift, p.stage)?;
    if g.batches != 1
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
    let w = &w[..filter_len];
    // A layer the line ring takes, with its input's shape, runs over its
    // input as it is (the ring holds every line it still needs); the band
    // temporary stays unused there, so that every build plans alike.
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    if depthwise_rows::applies(g) && g.y.in_size == g.y.out_size && g.x.in_size == g.x.out_size {
        let ops = packed_operands(data, &[], w, &biases, &tables)?;
        return depthwise_rows::run_over_input(g, &ops, in_place::as_i8_mut(shared));
    }
    let (in_row, out_row) = row_bytes(g);
    let bands = in_place::RowBands::of(&g.y, in_row, out_row);
    let temp = ctx.scratch(0)?;
    in_place::rows(shared, temp, &g.y, (in_row, out_row), bands, |y, x, out| {
        let mut band = *data;
        band.geometry.y = *y;
        depthwise_i8(&band, x, w, &biases, &requant, &tables, out)
    })
}

fn invoke<const T: u8>(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &OpData = ctx.op_data()?;
    // Before any view of input 0 or output 0: in place, they are one.
    if matches!(data.kind, KIND_INT8 | KIND_INT8_NARROW)
        && let Some(shared) = ctx.shared_io()?
    {
        types::linked::<T>(types::INT8)?;
        return depthwise_i8_in_place(ctx, data, shared);
    }
    let g = &data.geometry;
    let input = ctx.input(0)?;
    let filter = ctx.input(1)?;
    let bias = ctx.optional_input(2)?;
    let output = ctx.output(0)?;
    let out_c = g.out_c as usize;
    let filter_len = (g.y.filter * g.x.filter) as usize * out_c;
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
                || w.len() < filter_len
                || bias.is_some_and(|b| b.len() < out_c)
            {
                return Err(KernelError::Internal);
            }
            depthwise_f32(data, x, &w[..filter_len], bias.map(|b| &b[..out_c]), out);
            Ok(())
        }
        KIND_INT8 | KIND_INT8_NARROW => {
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
            let folded = ctx.stored(data.folded)?;
            let tables = Tables {
                multiplier: ctx.stored(p.multiplier)?,
                shift: ctx.stored(p.shift)?,
                narrow: data.kind == KIND_INT8_NARROW,
            };
            let requant = Requant::new(tables.multiplier, tables.shift, p.stage)?;
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
            depthwise_i8(data, x, &w[..filter_len], &biases, &requant, &tables, out)
        }
        KIND_INT16 => {
            types::linked::<T>(types::INT16)?;
            let q = Wide::stored(ctx, &data.channels)?;
            let (x, w) = (input.values::<i16>()?, filter.values::<i8>()?);
            let (m, out) = (data.multiplier as usize, output.values::<i16>()?);
            depthwise_i16(g, m, x, w, bias.map(|b| b.data), &q, out)
        }
        _ => Err(KernelError::Internal),
    }
}

/// The requantisation tables an int8 invoke reads.
struct Tables<'a> {
    multiplier: &'a [i32],
    shift: &'a [[u8; 2]],
    /// The packed path may requantise in 32 bits.
    #[cfg_attr(
        not(any(test, all(target_arch = "arm", feature = "arm-dsp"))),
        allow(dead_code)
    )]
    narrow: bool,
}

/// Whether every channel's accumulators stay within `±2^29`, from either
/// start (model bias on borders, folded bias inside) plus every tap, so
/// that the packed path may requantise in 32 bits.
fn small_accumulators(
    channels: usize,
    taps: usize,
    input_offset: i32,
    bias: Option<&TensorInfo<'_>>,
    weight_sum: &impl Fn(usize) -> i32,
) -> Result<bool, KernelError> {
    let bias = bias
        .map(|b| quant_math::bias_values(b, channels))
        .transpose()?;
    Ok((0..channels).all(|c| {
        let model = i64::from(bias.as_ref().map_or(0, |f| f(c)));
        let folded = model + i64::from(input_offset) * i64::from(weight_sum(c));
        accumulators_within_narrow(model.abs().max(folded.abs()), taps)
    }))
}

/// Whether sums from `±start` of `taps` products `w · (x + offset)` (each
/// at most `128 · 255`) stay within `±2^29`.
fn accumulators_within_narrow(start: i64, taps: usize) -> bool {
    start + taps as i64 * 128 * 255 < 1 << 29
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

/// Whether interior windows go through [`depthwise_packed`] (cores with
/// the DSP extension, in a build for speed); elsewhere every window takes
/// the plain loops (a size build: the same bytes out, 8 KB less code).
const PACKED: bool = cfg!(all(target_arch = "arm", feature = "arm-dsp")) && !super::COMPACT;

fn depthwise_i8(
    data: &OpData,
    x: &[i8],
    w: &[i8],
    biases: &Biases<'_>,
    requant: &Requant<'_>,
    tables: &Tables<'_>,
    out: &mut [i8],
) -> Result<(), KernelError> {
    depthwise_i8_with(data, x, w, biases, requant, tables, out, PACKED)
}

/// [`depthwise_i8`] with the interior path chosen by `packed` (the host
/// tests run both); `requant` is made of `tables`.
#[allow(clippy::too_many_arguments)]
fn depthwise_i8_with(
    data: &OpData,
    x: &[i8],
    w: &[i8],
    biases: &Biases<'_>,
    requant: &Requant<'_>,
    tables: &Tables<'_>,
    out: &mut [i8],
    packed: bool,
) -> Result<(), KernelError> {
    #[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
    {
        let rows = packed && depthwise_rows::applies(&data.geometry);
        if rows || (packed && depthwise_packed::applies(&data.geometry)) {
            let g = &data.geometry;
            let interior = packed_operands(data, x, w, biases, tables)?;
            if rows {
                return depthwise_rows::run(g, &interior, out);
            }
            return by_rows(g, &interior, out);
        }
    }
    let _ = (packed, tables);
    depthwise_plain(data, x, w, biases, requant, out);
    Ok(())
}

/// What the packed and line-ring kernels read.
#[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
fn packed_operands<'a>(
    data: &OpData,
    x: &'a [i8],
    w: &'a [i8],
    biases: &Biases<'a>,
    tables: &Tables<'a>,
) -> Result<depthwise_packed::Operands<'a>, KernelError> {
    Ok(depthwise_packed::Operands {
        x,
        w,
        folded: biases.folded,
        bias: biases.model,
        x_offset: data.channels.input_offset,
        scales: depthwise_packed::Scales::new(
            tables.multiplier,
            tables.shift,
            data.channels.stage,
            data.geometry.out_c as usize,
            tables.narrow,
        )?,
    })
}

/// Every output pixel, row by row: the interior stretch of each interior
/// row through [`depthwise_packed::run`], the windows over the padding one
/// at a time through [`depthwise_packed::edge`].
#[cfg(any(test, all(target_arch = "arm", feature = "arm-dsp")))]
fn by_rows(
    g: &Geometry,
    interior: &depthwise_packed::Operands<'_>,
    out: &mut [i8],
) -> Result<(), KernelError> {
    let (ih, iw, ic) = (g.y.in_size as usize, g.x.in_size as usize, g.in_c as usize);
    let (ow, oc) = (g.x.out_size, g.out_c as usize);
    let mut o = 0;
    for b in 0..g.batches as usize {
        let image = b * ih * iw * ic;
        for oy in 0..g.y.out_size {
            let y0 = g.y.origin(oy);
            let (lo, hi) = if g.y.is_interior(oy) {
                (g.x.interior_lo, g.x.interior_hi)
            } else {
                (ow, ow)
            };
            let edge = |ox: i32, out: &mut [i8]| {
                let win = Window {
                    image,
                    y0,
                    x0: g.x.origin(ox),
                    rows: g.y.taps(oy),
                    cols: g.x.taps(ox),
                };
                let at = o + ox as usize * oc;
                depthwise_packed::edge(g, interior, &win, &mut out[at..at + oc])
            };
            for ox in (0..lo).chain(hi..ow) {
                edge(ox, out)?;
            }
            if hi > lo {
                let x0 = image + (y0 as usize * iw + g.x.origin(lo) as usize) * ic;
                let count = (hi - lo) as usize;
                depthwise_packed::run(g, interior, x0, o + lo as usize * oc, count, out)?;
            }
            o += ow as usize * oc;
        }
    }
    Ok(())
}

/// The plain loops: every window, one pixel after the other.
fn depthwise_plain(
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

#[cfg(test)]
#[path = "depthwise_conv_tests.rs"]
mod tests;
