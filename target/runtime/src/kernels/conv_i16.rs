//! CONV_2D's int16x8 arithmetic: int16 activations (zero point 0), int8
//! weights, int64 bias, 64-bit sums requantised per channel with the
//! 64-bit `MultiplyByQuantizedMultiplier` — TFLM's int16
//! `reference_integer_ops::ConvPerChannel`. The portable loop only: an
//! integer sum does not depend on its order, so padded taps are skipped
//! and the rest summed plainly; the DSP fast paths stay int8.

use super::KernelError;
use super::conv::Geometry;
use super::fixed_point::{multiply_by_quantized_multiplier_i64, quantize_multiplier};
use super::quantized::{ChannelParams, OutputStage, shift_fields, shift_parts};
use super::tensor::{channel_scales, require_quant};
use super::{PrepareContext, fixed_point::activation_range_quantized};
use crate::model::TensorInfo;
use crate::schema::ActivationFunctionType;

/// Per-channel multipliers `input_scale · filter_scale[c] / output_scale`
/// (in `f64`, as TFLM's `PopulateConvolutionQuantizationParams`) and the
/// activation's int16 range. Zero points must be 0, as TFLM requires.
pub(crate) fn prepare_wide(
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
    g.for_each_pixel(|win, o| {
        for c in 0..out_c {
            let base = (c / per_group) * filter_c;
            let wc = &w[c * filter_len..][..filter_len];
            let mut acc = 0i64;
            for fy in win.rows.clone() {
                for fx in win.cols.clone() {
                    let xi = win.input_at(g, fy, fx) + base;
                    let wi = (fy as usize * fw + fx as usize) * filter_c;
                    for (&xv, &wv) in x[xi..][..filter_c].iter().zip(&wc[wi..][..filter_c]) {
                        acc += i64::from(xv) * i64::from(wv);
                    }
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
            acc = acc.wrapping_add(bias.map_or(0, |b| bias_at(b, c)));
            let v = multiply_by_quantized_multiplier_i64(acc, q.multiplier[c], q.shift(c));
            out[o + c] = v.clamp(q.min, q.max) as i16;
        }
    });
    Ok(())
}
