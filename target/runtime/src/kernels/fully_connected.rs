//! FULLY_CONNECTED: `out[b, c] = act(bias[c] + Σ_d w[c, d] · in[b, d])`.
//!
//! - float32: TFLM's reference order (each sum from 0 in `d` order, then
//!   `+ bias`), so results match it bit for bit; four output channels are
//!   summed side by side for instruction-level parallelism, each in order.
//! - int8 (int8 weights, int32 bias): per-tensor weight quantisation with
//!   TFLM's filter offset, or per-channel (`scale` per output row,
//!   quantised dimension 0). Invoke is an int8 matrix-vector product per
//!   batch row ([`quantized::matvec`]); nothing per channel is stored
//!   beyond per-channel multipliers.
//!
//! `keep_num_dims` only shapes the output tensor, which the model already
//! states: batches are the output's leading dimensions, whatever their rank.

use super::fixed_point::activation_range_float;
use super::quantized::{self, ChannelParams, ChannelRequant, ChannelSetup, Requant, ScaleRule};
use super::tensor::{Dims, Tensor, TensorMut, expect_type, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::schema::{ActivationFunctionType, FullyConnectedOptionsWeightsFormat, TensorType};

/// The FULLY_CONNECTED kernel.
pub const REGISTRATION: Registration = Registration {
    name: "FULLY_CONNECTED",
    prepare,
    invoke,
};

const KIND_FLOAT: u8 = 0;
const KIND_INT8: u8 = 1;

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

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let filter = ctx.input(1)?;
    let bias = ctx.optional_input(2);
    let output = ctx.output(0)?;
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
    quantized::check_activation(activation)?;

    let filter_dims = Dims::of(&filter)?;
    let output_dims = Dims::of(&output)?;
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
    if Dims::of(&input)?.elements() < batches * accum_depth {
        return Err(KernelError::ShapeMismatch {
            tensor: input.index,
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
    match input.dtype {
        TensorType::FLOAT32 => {
            expect_type(&filter, &[TensorType::FLOAT32])?;
            if let Some(bias) = &bias {
                expect_type(bias, &[TensorType::FLOAT32])?;
                if Dims::of(bias)?.elements() < output_depth {
                    return Err(KernelError::ShapeMismatch { tensor: bias.index });
                }
            }
            (data.float_min, data.float_max) = activation_range_float(activation);
        }
        TensorType::INT8 => {
            expect_type(&filter, &[TensorType::INT8])?;
            let per_channel = quantized_per_channel(&filter);
            // Per-channel weights are symmetric: TFLM ignores their zero point.
            let filter_offset = if per_channel {
                0
            } else {
                -require_quant(&filter)?.zero_point
            };
            if let Some(bias) = &bias {
                let _checked = quantized::bias_values(bias, output_depth)?;
            }
            let setup = ChannelSetup {
                input,
                filter,
                output,
                channels: output_depth,
                channel_axis: 0,
                rule: if per_channel {
                    ScaleRule::PerChannel
                } else {
                    ScaleRule::PerTensorProduct
                },
                activation,
            };
            data.channels = quantized::prepare_channels(ctx, &setup)?;
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

/// Whether `filter` carries more than one scale (TFLM's `is_per_channel`).
fn quantized_per_channel(filter: &crate::model::TensorInfo<'_>) -> bool {
    super::tensor::channel_scales(filter).is_some_and(|s| s.len() > 1)
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
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
        KIND_INT8 => invoke_int8(data, input, filter, bias, output, ctx),
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
            let shifted = quantized::sum(xb).wrapping_add((k as i32).wrapping_mul(x_offset));
            data.filter_offset.wrapping_mul(shifted)
        }
    };
    if data.uniform != 0 {
        let one = ChannelRequant::new(data.multiplier, data.shift, p.stage);
        // One batch row (the usual case): no per-row slicing.
        if batches == 1 {
            let (xb, ob) = (&x[..k], &mut out[..n]);
            let offset = row_offset(xb);
            quantized::matvec_uniform(xb, x_offset, weights, bias, offset, &one, ob);
            return Ok(());
        }
        for b in 0..batches {
            let (xb, ob) = (&x[b * k..][..k], &mut out[b * n..][..n]);
            let offset = row_offset(xb);
            quantized::matvec_uniform(xb, x_offset, weights, bias, offset, &one, ob);
        }
    } else {
        let requant = Requant::new(ctx.stored(p.multiplier)?, ctx.stored(p.shift)?, p.stage)?;
        if !requant.covers(n) {
            return Err(KernelError::Internal);
        }
        for b in 0..batches {
            let (xb, ob) = (&x[b * k..][..k], &mut out[b * n..][..n]);
            let offset = row_offset(xb);
            quantized::matvec(xb, x_offset, weights, bias, offset, &requant, ob);
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
