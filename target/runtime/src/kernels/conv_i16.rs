//! CONV_2D's int16x8 arithmetic: int16 activations (zero point 0), int8
//! weights, int64 bias, 64-bit sums requantised per channel with the
//! 64-bit `MultiplyByQuantizedMultiplier` — TFLM's int16
//! `reference_integer_ops::ConvPerChannel`. The portable loops only (the
//! DSP fast paths stay int8), but not TFLM's per-product int64 adds: an
//! integer sum does not depend on its order or on the width it is summed
//! in while it cannot overflow, so padded taps are skipped and products are
//! summed in int32 runs short enough never to overflow
//! ([`EXACT_I32_TERMS`]), then widened. Int32 sums are what the host
//! vectorises and what an ARMv6-M core adds without a 64-bit library call.

use super::KernelError;
use super::conv_geometry::Geometry;
use super::fixed_point::{multiply_by_quantized_multiplier_i64, quantize_multiplier};
use super::quant_math::{ChannelParams, ChannelSetup, OutputStage, shift_fields, shift_parts};
use super::tensor::{channel_scales, expect_type, require_quant};
use super::{PrepareContext, fixed_point::activation_range_quantized};
use crate::model::TensorInfo;
use crate::schema::{ActivationFunctionType, TensorType};

/// The int16x8 path's prepare, for CONV_2D and DEPTHWISE_CONV_2D alike: the
/// filter checked to be int8 and the bias a constant int64 per channel,
/// then the requantisation ([`prepare_wide`]).
pub(crate) fn prepare_int16(
    ctx: &mut PrepareContext<'_, '_, '_>,
    setup: &ChannelSetup<'_>,
    bias: Option<&TensorInfo<'_>>,
) -> Result<ChannelParams, KernelError> {
    let out_c = setup.channels;
    expect_type(&setup.filter, &[TensorType::INT8])?;
    if let Some(bias) = bias {
        expect_type(bias, &[TensorType::INT64])?;
        if bias.constant.map(<[u8]>::len) != Some(out_c * 8) {
            return Err(KernelError::ShapeMismatch { tensor: bias.index });
        }
    }
    let (input, filter, output) = (&setup.input, &setup.filter, &setup.output);
    prepare_wide(ctx, input, filter, output, out_c, setup.activation)
}

/// Per-channel multipliers `input_scale · filter_scale[c] / output_scale`
/// (in `f64`, as TFLM's `PopulateConvolutionQuantizationParams`) and the
/// activation's int16 range. Zero points must be 0, as TFLM requires.
fn prepare_wide(
    ctx: &mut PrepareContext<'_, '_, '_>,
    input: &TensorInfo<'_>,
    filter: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
    channels: usize,
    activation: ActivationFunctionType,
) -> Result<ChannelParams, KernelError> {
    let (qi, qo) = (require_quant(input)?, require_quant(output)?);
    require_quant(filter)?;
    if qi.zero_point != 0 || qo.zero_point != 0 {
        return Err(KernelError::UnsupportedParameter {
            what: "int16 convolution needs activation zero points of 0",
        });
    }
    let scales = channel_scales(filter).ok_or(KernelError::MissingQuantization {
        tensor: filter.index,
    })?;
    if scales.len() != 1 && scales.len() != channels {
        return Err(KernelError::ShapeMismatch {
            tensor: filter.index,
        });
    }
    let of = |c: usize| {
        let fs = scales.get(if scales.len() == 1 { 0 } else { c });
        quantize_multiplier(f64::from(qi.scale) * f64::from(fs) / f64::from(qo.scale))
    };
    let (min, max) = activation_range_quantized(
        activation,
        qo.scale,
        0,
        i32::from(i16::MIN),
        i32::from(i16::MAX),
    );
    // In the int8 paths' own record (no field of its own in the op data,
    // so the tail does not grow): shifts as `shift_parts` pairs, the clamp
    // in the output stage, no input offset.
    Ok(ChannelParams {
        multiplier: ctx.store_from_fn(channels, |c| of(c).0)?,
        shift: ctx.store_from_fn(channels, |c| shift_parts(of(c).1))?,
        input_offset: 0,
        stage: OutputStage {
            offset: 0,
            min,
            max,
        },
    })
}

/// An int64 bias read from little-endian bytes (constant data in a model
/// buffer is only as aligned as the flatbuffer placed it).
pub(crate) fn bias_at(bytes: &[u8], c: usize) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[c * 8..c * 8 + 8]);
    i64::from_le_bytes(b)
}

/// How many int16 × int8 products an int32 sum holds exactly: each is at
/// most 2^22 in magnitude (-32768 · -128), and 511 · 2^22 < 2^31.
pub(crate) const EXACT_I32_TERMS: usize = 511;

/// `Σ x[i] · w[i]`, exact: int32 sums of at most [`EXACT_I32_TERMS`]
/// products, added in int64.
fn dot_i16_i8(x: &[i16], w: &[i8]) -> i64 {
    let run = |xs: &[i16], ws: &[i8]| -> i32 {
        xs.iter()
            .zip(ws)
            .map(|(&a, &b)| i32::from(a) * i32::from(b))
            .sum()
    };
    if x.len() <= EXACT_I32_TERMS {
        return i64::from(run(x, w));
    }
    x.chunks(EXACT_I32_TERMS)
        .zip(w.chunks(EXACT_I32_TERMS))
        .map(|(xs, ws)| i64::from(run(xs, ws)))
        .sum()
}

/// Channels a depthwise pixel sums at once in int32 (a stack block).
const DEPTHWISE_BLOCK: usize = 64;

/// Requantisation of one int16x8 output.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wide<'a> {
    pub(crate) multiplier: &'a [i32],
    pub(crate) shift: &'a [[u8; 2]],
    pub(crate) min: i32,
    pub(crate) max: i32,
}

impl<'a> Wide<'a> {
    /// The requantisation `prepare_wide` stored, read back at invoke.
    pub(crate) fn stored(
        ctx: &crate::kernels::InvokeContext<'a, '_>,
        p: &ChannelParams,
    ) -> Result<Self, KernelError> {
        Ok(Wide {
            multiplier: ctx.stored(p.multiplier)?,
            shift: ctx.stored(p.shift)?,
            min: p.stage.min,
            max: p.stage.max,
        })
    }

    /// Channel `c`'s TFLM shift (`shift_parts` undone).
    fn shift(&self, c: usize) -> i32 {
        let (left, right1, _) = shift_fields(self.shift[c]);
        left as i32 - (right1 as i32 - 1)
    }
}

/// The convolution: `groups` filter groups, filter `[out_c, fh, fw,
/// in_c / groups]`, `bias` the int64 bias bytes.
pub(crate) fn conv_i16(
    g: &Geometry,
    groups: usize,
    x: &[i16],
    w: &[i8],
    bias: Option<&[u8]>,
    q: &Wide<'_>,
    out: &mut [i16],
) -> Result<(), KernelError> {
    let (in_c, out_c) = (g.in_c as usize, g.out_c as usize);
    let filter_c = in_c / groups.max(1);
    let (fh, fw) = (g.y.filter as usize, g.x.filter as usize);
    let filter_len = fh * fw * filter_c;
    if groups == 0
        || x.len() < g.input_len()
        || out.len() < g.output_len()
        || w.len() < out_c * filter_len
        || bias.is_some_and(|b| b.len() < out_c * 8)
        || q.multiplier.len() < out_c
        || q.shift.len() < out_c
    {
        return Err(KernelError::Internal);
    }
    let per_group = out_c / groups;
    // One group, undilated columns: a filter row's taps are adjacent in the
    // input as in the filter.
    let rows_are_runs = groups == 1 && g.x.dilation == 1;
    g.for_each_pixel(|win, o| {
        for c in 0..out_c {
            let base = (c / per_group) * filter_c;
            let wc = &w[c * filter_len..][..filter_len];
            let mut acc = 0i64;
            for fy in win.rows.clone() {
                if rows_are_runs {
                    // The row's in-image taps, all their channels: one run
                    // in the input and one in the filter.
                    let fx = win.cols.start;
                    let len = win.cols.len() * filter_c;
                    let xi = win.input_at(g, fy, fx);
                    let wi = (fy as usize * fw + fx as usize) * filter_c;
                    acc += dot_i16_i8(&x[xi..][..len], &wc[wi..][..len]);
                    continue;
                }
                for fx in win.cols.clone() {
                    let xi = win.input_at(g, fy, fx) + base;
                    let wi = (fy as usize * fw + fx as usize) * filter_c;
                    acc += dot_i16_i8(&x[xi..][..filter_c], &wc[wi..][..filter_c]);
                }
            }
            acc = acc.wrapping_add(bias.map_or(0, |b| bias_at(b, c)));
            let v = multiply_by_quantized_multiplier_i64(acc, q.multiplier[c], q.shift(c));
            out[o + c] = v.clamp(q.min, q.max) as i16;
        }
    });
    Ok(())
}

/// DEPTHWISE_CONV_2D's int16x8 form (TFLM's int16
/// `reference_integer_ops::DepthwiseConvPerChannel`): filter `[1, fh, fw,
/// out_c]`, output channel `o` filters input channel `o / multiplier`.
pub(crate) fn depthwise_i16(
    g: &Geometry,
    multiplier: usize,
    x: &[i16],
    w: &[i8],
    bias: Option<&[u8]>,
    q: &Wide<'_>,
    out: &mut [i16],
) -> Result<(), KernelError> {
    let (in_c, out_c) = (g.in_c as usize, g.out_c as usize);
    let fw = g.x.filter as usize;
    if multiplier == 0
        || in_c * multiplier != out_c
        || x.len() < g.input_len()
        || out.len() < g.output_len()
        || w.len() < g.y.filter as usize * fw * out_c
        || bias.is_some_and(|b| b.len() < out_c * 8)
        || q.multiplier.len() < out_c
        || q.shift.len() < out_c
    {
        return Err(KernelError::Internal);
    }
    let finish = |acc: i64, c: usize| {
        let acc = acc.wrapping_add(bias.map_or(0, |b| bias_at(b, c)));
        let v = multiply_by_quantized_multiplier_i64(acc, q.multiplier[c], q.shift(c));
        v.clamp(q.min, q.max) as i16
    };
    // A pixel's taps summed in int32 per channel when they cannot overflow
    // it (any filter up to 511 taps): taps outer, a block of channels inner,
    // so the inner loop walks input and filter contiguously.
    let taps = g.y.filter as usize * fw;
    if taps <= EXACT_I32_TERMS {
        g.for_each_pixel(|win, o| {
            for first in (0..out_c).step_by(DEPTHWISE_BLOCK) {
                let n = DEPTHWISE_BLOCK.min(out_c - first);
                let mut acc = [0i32; DEPTHWISE_BLOCK];
                for fy in win.rows.clone() {
                    for fx in win.cols.clone() {
                        let xi = win.input_at(g, fy, fx);
                        let wi = (fy as usize * fw + fx as usize) * out_c + first;
                        let ws = &w[wi..][..n];
                        if multiplier == 1 {
                            let xs = &x[xi + first..][..n];
                            for ((a, &xv), &wv) in acc.iter_mut().zip(xs).zip(ws) {
                                *a += i32::from(xv) * i32::from(wv);
                            }
                        } else {
                            for (k, (a, &wv)) in acc.iter_mut().zip(ws).enumerate() {
                                let xv = x[xi + (first + k) / multiplier];
                                *a += i32::from(xv) * i32::from(wv);
                            }
                        }
                    }
                }
                for (k, &a) in acc[..n].iter().enumerate() {
                    out[o + first + k] = finish(i64::from(a), first + k);
                }
            }
        });
        return Ok(());
    }
    g.for_each_pixel(|win, o| {
        for c in 0..out_c {
            let mut acc = 0i64;
            for fy in win.rows.clone() {
                for fx in win.cols.clone() {
                    let xv = x[win.input_at(g, fy, fx) + c / multiplier];
                    let wv = w[(fy as usize * fw + fx as usize) * out_c + c];
                    acc += i64::from(xv) * i64::from(wv);
                }
            }
            out[o + c] = finish(acc, c);
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int32_runs_sum_the_extreme_products_exactly() {
        // Every product at its largest magnitude, over more terms than one
        // int32 run holds: the int64 sum of the products, exactly.
        for n in [
            1,
            EXACT_I32_TERMS,
            EXACT_I32_TERMS + 1,
            3 * EXACT_I32_TERMS + 7,
        ] {
            let x = vec![i16::MIN; n];
            let w = vec![i8::MIN; n];
            assert_eq!(dot_i16_i8(&x, &w), n as i64 * 32768 * 128, "{n} terms");
            let w = vec![i8::MAX; n];
            assert_eq!(dot_i16_i8(&x, &w), -(n as i64) * 32768 * 127, "{n} terms");
        }
    }
}
