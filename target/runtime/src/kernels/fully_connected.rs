//! FULLY_CONNECTED: `out[b, c] = act(bias[c] + Σ_d w[c, d] · in[b, d])`.
//!
//! - float32: TFLM's reference order (each sum from 0 in `d` order, then
//!   `+ bias`), so results match it bit for bit; four output channels are
//!   summed side by side for instruction-level parallelism, each in order.
//! - int8 (int8 weights, int32 bias): per-tensor weight quantisation with
//!   TFLM's filter offset, or per-channel (`scale` per output row,
//!   quantised dimension 0). Invoke is an int8 matrix-vector product per
//!   batch row ([`quant_math::matvec`]); nothing per channel is stored
//!   beyond per-channel multipliers.
//! - int16x8 (int16 activations with zero point 0, int8 weights, optional
//!   int64 bias): TFLM's reference int16 loops, a 64-bit accumulator per
//!   output requantised by [`multiply_by_quantized_multiplier_i64`]. A
//!   plain loop: no int16 model on a microcontroller is bound by it yet.
//!
//! `keep_num_dims` only shapes the output tensor, which the model already
//! states: batches are the output's leading dimensions, whatever their rank.

use super::fixed_point::{
    activation_range_float, activation_range_quantized, multiply_by_quantized_multiplier_i64,
    quantize_multiplier,
};
use super::quant_math::{self, ChannelParams, ChannelRequant, ChannelSetup, Requant, ScaleRule};
use super::tensor::{Dims, Tensor, TensorMut, expect_type, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration, types};
use crate::model::TensorInfo;
use crate::schema::{ActivationFunctionType, FullyConnectedOptionsWeightsFormat, TensorType};

/// The FULLY_CONNECTED kernel.
pub const REGISTRATION: Registration = typed::<{ types::ALL }>();

/// The FULLY_CONNECTED kernel with only the variants of the types in `T`
/// ([`types`]): what a firmware for one model registers.
pub(crate) const fn typed<const T: u8>() -> Registration {
    Registration {
        name: "FULLY_CONNECTED",
        prepare: prepare::<T>,
        invoke: invoke::<T>,
    }
}

const KIND_FLOAT: u8 = 0;
const KIND_INT8: u8 = 1;
const KIND_INT16: u8 = 2;

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct OpData {
    kind: u8,
    /// 1 when the int8 weights are per-tensor: invoke then requantises
    /// with `multiplier` and `shift` below rather than reading the stored
    /// arrays (a small layer's invoke is mostly such set-up).
    uniform: u8,
    /// The one channel's shift bytes (copies of `channels.shift[0]`).
    shift: [u8; 2],
    /// Its multiplier (`channels.multiplier[0]`). With the four bytes
    /// above, these fill what was padding: op data stays 64 bytes.
    multiplier: i32,
    batches: u32,
    accum_depth: u32,
    output_depth: u32,
    float_min: f32,
    float_max: f32,
    /// `-filter_zero_point` (per-tensor int8 only; zero otherwise).
    filter_offset: i32,
    /// int8 only.
    channels: ChannelParams,
}

fn prepare<const T: u8>(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let filter = ctx.input(1)?;
    let bias = ctx.optional_input(2);
    let output = ctx.output(0)?;
    let activation = fused_activation(ctx)?;
    let (batches, accum_depth, output_depth) = checked_sizes(&input, &filter, &output)?;
    if input.dtype != output.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: output.index,
            dtype: output.dtype.0,
        });
    }
    let mut data = OpData {
        kind: KIND_FLOAT,
        uniform: 0,
        shift: [0; 2],
        multiplier: 0,
        batches: batches as u32,
        accum_depth: accum_depth as u32,
        output_depth: output_depth as u32,
        float_min: 0.0,
        float_max: 0.0,
        filter_offset: 0,
        channels: bytemuck::Zeroable::zeroed(),
    };
    // The requantisation's inputs, for the integer paths.
    let setup = |rule| ChannelSetup {
        input,
        filter,
        output,
        channels: output_depth,
        channel_axis: 0,
        rule,
        activation,
    };
    match input.dtype {
        TensorType::FLOAT32 => {
            types::need::<T>(types::FLOAT32, &input)?;
            (data.float_min, data.float_max) =
                float_range(&filter, bias.as_ref(), output_depth, activation)?;
        }
        TensorType::INT8 => {
            types::need::<T>(types::INT8, &input)?;
            let rule = if quantized_per_channel(&filter) {
                ScaleRule::PerChannel
            } else {
                ScaleRule::PerTensorProduct
            };
            prepare_int8(ctx, &mut data, &setup(rule), bias.as_ref())?;
        }
        TensorType::INT16 => {
            types::need::<T>(types::INT16, &input)?;
            let setup = setup(ScaleRule::PerChannel);
            (data.channels, data.filter_offset) = prepare_int16(ctx, &setup, accum_depth)?;
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

/// The options' fused activation (none without options), refusing what
/// the kernel does not implement: shuffled weights, other activations.
fn fused_activation(
    ctx: &PrepareContext<'_, '_, '_>,
) -> Result<ActivationFunctionType, KernelError> {
    let (activation, format) = ctx
        .op()
        .raw()
        .builtin_options_as_fully_connected_options()
        .map_or(
            (
                ActivationFunctionType::NONE,
                FullyConnectedOptionsWeightsFormat::DEFAULT,
            ),
            |o| (o.fused_activation_function(), o.weights_format()),
        );
    if format != FullyConnectedOptionsWeightsFormat::DEFAULT {
        return Err(KernelError::UnsupportedParameter {
            what: "shuffled weights format",
        });
    }
    quant_math::check_activation(activation)?;
    Ok(activation)
}

/// `(batches, accum_depth, output_depth)`: the output's leading dimensions,
/// the filter's row length and the rows used, checked against the tensors.
fn checked_sizes(
    input: &TensorInfo<'_>,
    filter: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
) -> Result<(usize, usize, usize), KernelError> {
    let filter_dims = Dims::of(filter)?;
    let output_dims = Dims::of(output)?;
    let rank = filter_dims.rank();
    if rank < 2 || output_dims.rank() < 1 {
        return Err(KernelError::ShapeMismatch {
            tensor: filter.index,
        });
    }
    let rows = filter_dims.get(rank - 2).max(0) as usize;
    let accum_depth = filter_dims.last();
    let output_depth = output_dims.last();
    let batches = output_dims.outer();
    // TFLM reads the first `output_depth` weight rows and the first
    // `batches · accum_depth` inputs.
    if output_depth > rows || filter_dims.elements() != rows * accum_depth {
        return Err(KernelError::ShapeMismatch {
            tensor: filter.index,
        });
    }
    if Dims::of(input)?.elements() < batches * accum_depth {
        return Err(KernelError::ShapeMismatch {
            tensor: input.index,
        });
    }
    Ok((batches, accum_depth, output_depth))
}

/// The float path's activation range, the filter and bias checked to be
/// float32 (and the bias to hold at least `channels` values).
fn float_range(
    filter: &TensorInfo<'_>,
    bias: Option<&TensorInfo<'_>>,
    channels: usize,
    activation: ActivationFunctionType,
) -> Result<(f32, f32), KernelError> {
    expect_type(filter, &[TensorType::FLOAT32])?;
    if let Some(bias) = bias {
        expect_type(bias, &[TensorType::FLOAT32])?;
        if Dims::of(bias)?.elements() < channels {
            return Err(KernelError::ShapeMismatch { tensor: bias.index });
        }
    }
    Ok(activation_range_float(activation))
}

/// The int8 path: the requantisation (`setup.rule` says whether the
/// weights are per channel), and for per-tensor weights the filter offset
/// and the one multiplier and shift copied into the op data.
fn prepare_int8(
    ctx: &mut PrepareContext<'_, '_, '_>,
    data: &mut OpData,
    setup: &ChannelSetup<'_>,
    bias: Option<&TensorInfo<'_>>,
) -> Result<(), KernelError> {
    expect_type(&setup.filter, &[TensorType::INT8])?;
    let per_channel = setup.rule == ScaleRule::PerChannel;
    // Per-channel weights are symmetric: TFLM ignores their zero point.
    let filter_offset = if per_channel {
        0
    } else {
        -require_quant(&setup.filter)?.zero_point
    };
    if let Some(bias) = bias {
        let _checked = quant_math::bias_values(bias, setup.channels)?;
    }
    data.channels = quant_math::prepare_channels(ctx, setup)?;
    if !per_channel {
        let multiplier = ctx.stored_values(data.channels.multiplier)?;
        let shift = ctx.stored_values(data.channels.shift)?;
        let (Some(&multiplier), Some(&shift)) = (multiplier.first(), shift.first()) else {
            return Err(KernelError::Internal);
        };
        (data.uniform, data.multiplier, data.shift) = (1, multiplier, shift);
    }
    data.filter_offset = filter_offset;
    data.kind = KIND_INT8;
    Ok(())
}

/// Whether `filter` carries more than one scale (TFLM's `is_per_channel`).
fn quantized_per_channel(filter: &TensorInfo<'_>) -> bool {
    super::tensor::channel_scales(filter).is_some_and(|s| s.len() > 1)
}

fn invoke<const T: u8>(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &OpData = ctx.op_data()?;
    let input = ctx.input(0)?;
    let filter = ctx.input(1)?;
    let bias = ctx.optional_input(2)?;
    let output = ctx.output(0)?;
    let batches = data.batches as usize;
    let k = data.accum_depth as usize;
    let n = data.output_depth as usize;
    match data.kind {
        KIND_FLOAT => {
            types::linked::<T>(types::FLOAT32)?;
            let x = input.values::<f32>()?;
            let w = filter.values::<f32>()?;
            let bias = match &bias {
                Some(b) => Some(b.values::<f32>()?),
                None => None,
            };
            let out = output.values::<f32>()?;
            if x.len() < batches * k
                || out.len() < batches * n
                || w.len() < n * k
                || bias.is_some_and(|b| b.len() < n)
            {
                return Err(KernelError::Internal);
            }
            let (weights, bias) = (&w[..n * k], bias.map(|b| &b[..n]));
            for b in 0..batches {
                let range = (data.float_min, data.float_max);
                matvec_f32(
                    &x[b * k..][..k],
                    weights,
                    bias,
                    range,
                    &mut out[b * n..][..n],
                );
            }
            Ok(())
        }
        KIND_INT8 => {
            types::linked::<T>(types::INT8)?;
            invoke_int8(data, input, filter, bias, output, ctx)
        }
        KIND_INT16 => {
            types::linked::<T>(types::INT16)?;
            invoke_int16(data, input, filter, bias, output, ctx)
        }
        _ => Err(KernelError::Internal),
    }
}

/// The int8 product, batch row after batch row. Prepare checked every
/// shape; the one length check here is what keeps the slicing below from
/// panicking on a corrupted arena.
fn invoke_int8(
    data: &OpData,
    input: Tensor<'_, '_>,
    filter: Tensor<'_, '_>,
    bias: Option<Tensor<'_, '_>>,
    output: TensorMut<'_, '_>,
    ctx: &InvokeContext<'_, '_>,
) -> Result<(), KernelError> {
    let (batches, k, n) = (
        data.batches as usize,
        data.accum_depth as usize,
        data.output_depth as usize,
    );
    let p = &data.channels;
    let x: &[i8] = bytemuck::cast_slice(input.data);
    let w: &[i8] = bytemuck::cast_slice(filter.data);
    let bias = match &bias {
        Some(b) => Some(b.values::<i32>()?),
        None => None,
    };
    let out: &mut [i8] = bytemuck::cast_slice_mut(output.data);
    if x.len() < batches * k
        || out.len() < batches * n
        || w.len() < n * k
        || bias.is_some_and(|b| b.len() < n)
    {
        return Err(KernelError::Internal);
    }
    let (weights, bias) = (&w[..n * k], bias.map(|b| &b[..n]));
    let x_offset = p.input_offset;
    // Per-tensor weights with a zero point: Σ (w + fo)(x + xo)
    // = Σ w·(x + xo) + fo·Σ (x + xo).
    let row_offset = |xb: &[i8]| {
        if data.filter_offset == 0 {
            0
        } else {
            let shifted = quant_math::sum(xb).wrapping_add((k as i32).wrapping_mul(x_offset));
            data.filter_offset.wrapping_mul(shifted)
        }
    };
    if data.uniform != 0 {
        let one = ChannelRequant::new(data.multiplier, data.shift, p.stage);
        // One batch row (the usual case): no per-row slicing.
        if batches == 1 {
            let (xb, ob) = (&x[..k], &mut out[..n]);
            let offset = row_offset(xb);
            quant_math::matvec_uniform(xb, x_offset, weights, bias, offset, &one, ob);
            return Ok(());
        }
        for b in 0..batches {
            let (xb, ob) = (&x[b * k..][..k], &mut out[b * n..][..n]);
            let offset = row_offset(xb);
            quant_math::matvec_uniform(xb, x_offset, weights, bias, offset, &one, ob);
        }
    } else {
        let requant = Requant::new(ctx.stored(p.multiplier)?, ctx.stored(p.shift)?, p.stage)?;
        if !requant.covers(n) {
            return Err(KernelError::Internal);
        }
        for b in 0..batches {
            let (xb, ob) = (&x[b * k..][..k], &mut out[b * n..][..n]);
            let offset = row_offset(xb);
            quant_math::matvec(xb, x_offset, weights, bias, offset, &requant, ob);
        }
    }
    Ok(())
}

/// Checks an int16x8 FULLY_CONNECTED and stores its multipliers (one per
/// channel for per-channel weights, else one) with TFLM's shift bytes
/// (never the narrow flag) and the int16 output clamp; returns them with
/// the filter offset (`-filter_zero_point` for per-tensor weights).
///
/// Prepare also bounds what invoke computes, so that the 64-bit
/// requantisation can neither overflow nor shift by a negative amount:
/// `accum_depth < 2^22`, `|bias| < 2^46` and a shift below 15.
fn prepare_int16(
    ctx: &mut PrepareContext<'_, '_, '_>,
    setup: &ChannelSetup<'_>,
    accum_depth: usize,
) -> Result<(ChannelParams, i32), KernelError> {
    expect_type(&setup.filter, &[TensorType::INT8])?;
    let input_q = require_quant(&setup.input)?;
    let output_q = require_quant(&setup.output)?;
    let filter_q = require_quant(&setup.filter)?;
    if input_q.zero_point != 0 || output_q.zero_point != 0 {
        return Err(KernelError::UnsupportedParameter {
            what: "int16 zero point other than 0",
        });
    }
    if accum_depth >= 1 << 22 {
        return Err(KernelError::ShapeMismatch {
            tensor: setup.filter.index,
        });
    }
    let n = setup.channels;
    if let Some(bias) = ctx.optional_input(2) {
        let value = bias_values_i64(&bias, n)?;
        if (0..n).any(|c| value(c).unsigned_abs() >= 1 << 46) {
            return Err(KernelError::UnsupportedParameter {
                what: "int16 bias beyond 2^46",
            });
        }
    }
    let per_channel = quantized_per_channel(&setup.filter);
    let scales =
        super::tensor::channel_scales(&setup.filter).ok_or(KernelError::MissingQuantization {
            tensor: setup.filter.index,
        })?;
    let axis = setup
        .filter
        .raw()
        .quantization()
        .map_or(0, |q| q.quantized_dimension());
    if per_channel && (scales.len() != n || axis != setup.channel_axis) {
        return Err(KernelError::ShapeMismatch {
            tensor: setup.filter.index,
        });
    }
    // TFLM: PopulateConvolutionQuantizationParams per channel (double
    // product), GetQuantizedConvolutionMultipler per tensor (float product).
    let (in_scale, out_scale) = (input_q.scale, output_q.scale);
    let multiplier_of = |c: usize| {
        let real = if per_channel {
            f64::from(in_scale) * f64::from(scales.get(c)) / f64::from(out_scale)
        } else {
            f64::from(in_scale * filter_q.scale) / f64::from(out_scale)
        };
        quantize_multiplier(real)
    };
    let count = if per_channel { n } else { 1 };
    if (0..count).any(|c| multiplier_of(c).1 >= 15) {
        return Err(KernelError::UnsupportedParameter {
            what: "int16 output multiplier of 2^14 or more",
        });
    }
    let multiplier = ctx.store_from_fn(count, |c| multiplier_of(c).0)?;
    let shift = ctx.store_from_fn(count, |c| quant_math::shift_parts(multiplier_of(c).1))?;
    quant_math::check_activation(setup.activation)?;
    let (min, max) = activation_range_quantized(
        setup.activation,
        out_scale,
        0,
        i32::from(i16::MIN),
        i32::from(i16::MAX),
    );
    let stage = quant_math::OutputStage {
        offset: 0,
        min,
        max,
    };
    let params = ChannelParams {
        multiplier,
        shift,
        input_offset: 0,
        stage,
    };
    let filter_offset = if per_channel { 0 } else { -filter_q.zero_point };
    Ok((params, filter_offset))
}

/// A constant int64 bias's values (any alignment), checked to hold `channels`.
fn bias_values_i64<'m>(
    bias: &TensorInfo<'m>,
    channels: usize,
) -> Result<impl Fn(usize) -> i64 + use<'m>, KernelError> {
    expect_type(bias, &[TensorType::INT64])?;
    let data = bias.constant.ok_or(KernelError::UnsupportedParameter {
        what: "non-constant bias",
    })?;
    if data.len() != channels * 8 {
        return Err(KernelError::ShapeMismatch { tensor: bias.index });
    }
    Ok(move |c: usize| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&data[8 * c..][..8]);
        i64::from_le_bytes(bytes)
    })
}

/// The int16x8 product: TFLM's reference `FullyConnected` (per-tensor,
/// with the filter offset) and `FullyConnectedPerChannel` int16 loops.
/// The bias is read byte-wise: int64 data in a model need not be 8-aligned.
fn invoke_int16(
    data: &OpData,
    input: Tensor<'_, '_>,
    filter: Tensor<'_, '_>,
    bias: Option<Tensor<'_, '_>>,
    output: TensorMut<'_, '_>,
    ctx: &InvokeContext<'_, '_>,
) -> Result<(), KernelError> {
    let (batches, k, n) = (
        data.batches as usize,
        data.accum_depth as usize,
        data.output_depth as usize,
    );
    let p = &data.channels;
    let x = input.values::<i16>()?;
    let w: &[i8] = bytemuck::cast_slice(filter.data);
    let bias = bias.map(|b| b.data);
    let out = output.values::<i16>()?;
    let multiplier = ctx.stored(p.multiplier)?;
    let shift = ctx.stored(p.shift)?;
    let count = multiplier.len();
    if x.len() < batches * k
        || out.len() < batches * n
        || w.len() < n * k
        || bias.is_some_and(|b| b.len() < 8 * n)
        || count == 0
        || shift.len() != count
        || (count != 1 && count < n)
    {
        return Err(KernelError::Internal);
    }
    let bias_of = |c: usize| {
        bias.map_or(0, |b| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&b[8 * c..][..8]);
            i64::from_le_bytes(bytes)
        })
    };
    let filter_offset = i64::from(data.filter_offset);
    for c in 0..n {
        let q = if count == 1 { 0 } else { c };
        let [left, right1] = shift[q];
        let exponent = i32::from(left & 31) - (i32::from(right1) - 1);
        let row = &w[c * k..][..k];
        let bias = bias_of(c);
        for b in 0..batches {
            let xb = &x[b * k..][..k];
            let acc = row.iter().zip(xb).fold(0i64, |acc, (&wv, &xv)| {
                acc + (i64::from(wv) + filter_offset) * i64::from(xv)
            });
            let scaled = multiply_by_quantized_multiplier_i64(acc + bias, multiplier[q], exponent);
            out[b * n + c] = scaled.clamp(p.stage.min, p.stage.max) as i16;
        }
    }
    Ok(())
}

/// Applies a float activation range as TFLM's `ActivationFunctionWithMinMax`
/// (`std::min(std::max(x, min), max)`: NaN passes through).
#[inline(always)]
pub(crate) fn activate(x: f32, (min, max): (f32, f32)) -> f32 {
    let x = if x < min { min } else { x };
    if max < x { max } else { x }
}

/// `out[c] = act(Σ_d w[c, d] · x[d] + bias[c])`, each sum in TFLM's order.
#[inline]
pub(crate) fn matvec_f32(
    x: &[f32],
    weights: &[f32],
    bias: Option<&[f32]>,
    range: (f32, f32),
    out: &mut [f32],
) {
    let k = x.len();
    let bias_of = |c: usize| bias.map_or(0.0, |b| b[c]);
    let n = out.len();
    let mut c = 0;
    while c + ROWS <= n {
        let rows: [&[f32]; ROWS] = core::array::from_fn(|r| &weights[(c + r) * k..][..k]);
        let mut t = [0.0f32; ROWS];
        accumulate_rows_f32(&mut t, x, rows);
        for (r, &v) in t.iter().enumerate() {
            out[c + r] = activate(v + bias_of(c + r), range);
        }
        c += ROWS;
    }
    while c < n {
        let w = &weights[c * k..][..k];
        out[c] = activate(accumulate_f32(0.0, x, w) + bias_of(c), range);
        c += 1;
    }
}

/// Output channels summed side by side in the float kernels: independent
/// sums hide the latency of each addition (the order within a sum is
/// TFLM's, so results are bit-exact).
pub(crate) const ROWS: usize = 8;

/// `t[r] += Σ_d x[d] · w[r][d]` for `ROWS` rows, each in `d` order.
#[inline(always)]
pub(crate) fn accumulate_rows_f32(t: &mut [f32; ROWS], x: &[f32], w: [&[f32]; ROWS]) {
    let k = x.len();
    let w: [&[f32]; ROWS] = w.map(|r| &r[..k]);
    let mut s = *t;
    for d in 0..k {
        let v = x[d];
        for r in 0..ROWS {
            s[r] += v * w[r][d];
        }
    }
    *t = s;
}

/// `t + Σ_d x[d] · w[d]` in `d` order.
#[inline(always)]
pub(crate) fn accumulate_f32(t: f32, x: &[f32], w: &[f32]) -> f32 {
    x.iter().zip(w).fold(t, |t, (&v, &wv)| t + v * wv)
}
