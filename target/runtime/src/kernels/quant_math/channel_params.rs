//! Prepare's half of the requantisation: checks the quantisation of an
//! int8 conv-like operator and stores its per-channel multipliers and
//! shifts and its output stage in the arena's tail (what `requant` reads at
//! invoke), and reads and folds the constant int32 bias. Nothing here runs
//! at invoke.

use super::super::KernelError;
use super::super::context::{PrepareContext, Stored};
use super::super::fixed_point::{activation_range_quantized, quantize_scale_ratio};
use super::super::tensor::{Quant, channel_scales, require_quant};
use super::requant::{NARROW, OutputStage, shift_parts};
use crate::model::TensorInfo;
use crate::schema::{ActivationFunctionType, TensorType};

/// Per-output-channel requantisation constants in the arena's tail.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ChannelParams {
    /// Q31 multipliers: one per channel, or one for all.
    pub multiplier: Stored<i32>,
    /// Their power-of-two exponents (TFLM's `shift`) as `[left, right + 1]`
    /// with `left = max(shift, 0)`, `right = max(-shift, 0)`: same length.
    pub shift: Stored<[u8; 2]>,
    /// `-input_zero_point`, in `-127..=128`.
    pub input_offset: i32,
    /// Output zero point and activation clamp.
    pub stage: OutputStage,
}

/// How the real multiplier `input_scale · filter_scale / output_scale` is
/// rounded: TFLM computes it two ways, and the last bit of the Q31 value
/// depends on which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleRule {
    /// `(f64(input) · f64(filter[c])) / f64(output)`, per channel (scale
    /// arrays of length one broadcast): CONV_2D, DEPTHWISE_CONV_2D and
    /// per-channel FULLY_CONNECTED (`PopulateConvolutionQuantizationParams`).
    PerChannel,
    /// `f64(f32(input · filter)) / f64(output)`, one multiplier: per-tensor
    /// FULLY_CONNECTED (`GetQuantizedConvolutionMultipler`).
    PerTensorProduct,
}

/// What [`prepare_channels`] needs to know about the operator.
#[derive(Debug, Clone, Copy)]
pub struct ChannelSetup<'m> {
    /// The activation input.
    pub input: TensorInfo<'m>,
    /// The (constant) int8 weights.
    pub filter: TensorInfo<'m>,
    /// The output.
    pub output: TensorInfo<'m>,
    /// Output channels.
    pub channels: usize,
    /// The filter axis that holds the output channels (per-channel scales run along it).
    pub channel_axis: i32,
    /// How multipliers are computed.
    pub rule: ScaleRule,
    /// The fused activation.
    pub activation: ActivationFunctionType,
}

/// Checks the quantisation of an int8 conv-like operator and stores its
/// multipliers: one per channel for per-channel weights, else one.
pub fn prepare_channels(
    ctx: &mut PrepareContext<'_, '_, '_>,
    setup: &ChannelSetup<'_>,
) -> Result<ChannelParams, KernelError> {
    let input_q = require_quant(&setup.input)?;
    let output_q = require_quant(&setup.output)?;
    let filter_q = require_quant(&setup.filter)?;
    let scales = channel_scales(&setup.filter).ok_or(KernelError::MissingQuantization {
        tensor: setup.filter.index,
    })?;
    let per_channel = scales.len() > 1;
    if per_channel {
        let axis = setup
            .filter
            .raw()
            .quantization()
            .map_or(0, |q| q.quantized_dimension());
        if scales.len() != setup.channels
            || axis != setup.channel_axis
            || setup.rule == ScaleRule::PerTensorProduct
        {
            return Err(KernelError::ShapeMismatch {
                tensor: setup.filter.index,
            });
        }
    }
    // Kernels add the offset to int8 values in 16-bit lanes.
    if !(-128..=127).contains(&input_q.zero_point) {
        return Err(KernelError::UnsupportedParameter {
            what: "int8 zero point outside -128..=127",
        });
    }
    let count = if per_channel { setup.channels } else { 1 };
    // Integer arithmetic equal bit for bit to TFLM's `double` arithmetic,
    // so that a firmware links no software double routine for it.
    let multiplier_of = |c: usize| -> (i32, i32) {
        match setup.rule {
            ScaleRule::PerChannel => {
                quantize_scale_ratio(input_q.scale, scales.get(c), output_q.scale)
            }
            ScaleRule::PerTensorProduct => {
                quantize_scale_ratio(input_q.scale * filter_q.scale, 1.0, output_q.scale)
            }
        }
    };
    // Every op with per-channel requantisation keeps its bias at input 2.
    let bias = ctx.optional_input(2);
    let magnitudes = channel_magnitudes(setup, bias.as_ref(), filter_q.zero_point);
    // A channel's flag needs its own bound; a shared multiplier needs all.
    let narrow = |c: usize, left: u32| {
        magnitudes.as_ref().is_some_and(|f| {
            let within = |c| {
                let (start, weights) = f(c);
                narrow_bound(start, weights, left)
            };
            if per_channel {
                within(c)
            } else {
                (0..setup.channels).all(within)
            }
        })
    };
    let multiplier = ctx.store_from_fn(count, |c| multiplier_of(c).0)?;
    let shift = ctx.store_from_fn(count, |c| {
        let [left, right1] = shift_parts(multiplier_of(c).1);
        let flag = if right1 <= 31 && narrow(c, u32::from(left)) {
            NARROW
        } else {
            0
        };
        [left | flag, right1]
    })?;
    Ok(ChannelParams {
        multiplier,
        shift,
        input_offset: -input_q.zero_point,
        stage: output_stage(setup.activation, &output_q)?,
    })
}

/// A constant int32 bias's values (any alignment), checked to hold `channels`.
pub fn bias_values<'m>(
    bias: &TensorInfo<'m>,
    channels: usize,
) -> Result<impl Fn(usize) -> i32 + use<'m>, KernelError> {
    let data = bias.constant.ok_or(KernelError::UnsupportedParameter {
        what: "non-constant bias",
    })?;
    if bias.dtype != TensorType::INT32 {
        return Err(KernelError::UnsupportedType {
            tensor: bias.index,
            dtype: bias.dtype.0,
        });
    }
    if data.len() != channels * 4 {
        return Err(KernelError::ShapeMismatch { tensor: bias.index });
    }
    Ok(move |c: usize| {
        i32::from_le_bytes([
            data[4 * c],
            data[4 * c + 1],
            data[4 * c + 2],
            data[4 * c + 3],
        ])
    })
}

/// Stores `bias[c] + input_offset · weight_sum(c)` for every channel: the
/// accumulator's start for windows wholly inside the input.
pub fn fold_bias(
    ctx: &mut PrepareContext<'_, '_, '_>,
    bias: Option<&TensorInfo<'_>>,
    channels: usize,
    input_offset: i32,
    weight_sum: impl Fn(usize) -> i32,
) -> Result<Stored<i32>, KernelError> {
    let bias = bias.map(|b| bias_values(b, channels)).transpose()?;
    ctx.store_from_fn(channels, |c| {
        let b = bias.as_ref().map_or(0, |f| f(c));
        b.wrapping_add(input_offset.wrapping_mul(weight_sum(c)))
    })
}

/// The output stage of an int8 output with `quant` under `activation`.
pub fn output_stage(
    activation: ActivationFunctionType,
    quant: &Quant,
) -> Result<OutputStage, KernelError> {
    check_activation(activation)?;
    let (min, max) = activation_range_quantized(
        activation,
        quant.scale,
        quant.zero_point,
        i32::from(i8::MIN),
        i32::from(i8::MAX),
    );
    Ok(OutputStage {
        offset: quant.zero_point,
        min,
        max,
    })
}

/// Refuses fused activations the conv-like kernels do not implement (TFLM
/// silently ignores them; no converter emits them on these operators).
pub fn check_activation(activation: ActivationFunctionType) -> Result<(), KernelError> {
    use ActivationFunctionType as A;
    match activation {
        A::NONE | A::RELU | A::RELU6 | A::RELU_N1_TO_1 => Ok(()),
        _ => Err(KernelError::UnsupportedParameter {
            what: "fused activation",
        }),
    }
}

/// Whether every accumulator `bias[c] + Σ (w − filter_zp)·(x + offset)` of
/// a channel whose largest start is `start` and whose weights' magnitudes
/// sum to `weights` stays below `2^(29 − left)`: int8 inputs plus an
/// offset in `-127..=128` lie in `±255`.
fn narrow_bound(start: i64, weights: i64, left: u32) -> bool {
    (start + weights * 255) << left < 1 << 29
}

/// Per channel, `(|bias|, Σ max(|w|, |w − zp|))` of the filter along
/// `setup.channel_axis` (bias 0 without one), or `None` when the filter is
/// not constant or the bias not readable (then no channel is narrow). Each
/// call reads only that channel's weights: all channels cost one pass.
fn channel_magnitudes<'m>(
    setup: &ChannelSetup<'m>,
    bias: Option<&TensorInfo<'m>>,
    zero_point: i32,
) -> Option<impl Fn(usize) -> (i64, i64) + use<'m>> {
    let data = setup.filter.constant?;
    let dims = super::super::tensor::Dims::of(&setup.filter).ok()?;
    let axis = usize::try_from(setup.channel_axis).ok()?;
    let channels = setup.channels;
    if axis >= dims.rank() || dims.get(axis).max(0) as usize != channels || channels == 0 {
        return None;
    }
    let inner: usize = (axis + 1..dims.rank())
        .map(|i| dims.get(i).max(0) as usize)
        .product();
    if data.len() != dims.elements() || inner == 0 {
        return None;
    }
    let outer = data.len() / (inner * channels);
    let bias = match bias {
        Some(b) => Some(bias_values(b, channels).ok()?),
        None => None,
    };
    Some(move |c: usize| {
        let start = bias.as_ref().map_or(0, |f| i64::from(f(c)).abs());
        let mut sum = 0i64;
        for o in 0..outer {
            for &b in &data[(o * channels + c) * inner..][..inner] {
                let w = i64::from(b as i8);
                sum += w.abs().max((w - i64::from(zero_point)).abs());
            }
        }
        (start, sum)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_bound_is_strict() {
        // 2^29 − 1 is the largest magnitude the 32-bit form takes.
        assert!(narrow_bound((1 << 29) - 1, 0, 0));
        assert!(!narrow_bound(1 << 29, 0, 0));
        assert!(!narrow_bound(0, ((1 << 29) / 255) + 1, 0));
        assert!(narrow_bound(0, 1000, 10));
        assert!(!narrow_bound(0, 1 << 20, 2));
    }
}
