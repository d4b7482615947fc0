//! TRANSPOSE_CONV: the gradient of a convolution — every input pixel
//! scatters `input × filter` into a window of the (larger) output — int8
//! per-channel (int32 bias), int16x8 (int16 activations, int8 weights,
//! int64 bias) and float32, bit-exact with TFLM's reference kernels.
//!
//! TFLM scatters into a zeroed accumulator buffer (int32 for int8, int64
//! for int16) and requantises it afterwards; hilt asks for that buffer as
//! scratch in prepare, so it shows in the memory plan as TFLM's does. The
//! output-shape input (input 0) is not read: as in TFLM the output
//! tensor's own shape is the shape, and the input may even be a graph input.

use bytemuck::{Pod, Zeroable};

use super::context::Stored;
use super::fixed_point::{
    activation_range_float, activation_range_quantized, multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_i64, quantize_multiplier,
};
use super::tensor::{Dims, channel_scales, expect_type, require_quant};
use super::window_axis::Axis;
use super::{InvokeContext, KernelError, PrepareContext, Registration, quant_math};
use crate::model::TensorInfo;
use crate::schema::TensorType;

/// The TRANSPOSE_CONV kernel.
pub const REGISTRATION: Registration = Registration {
    name: "TRANSPOSE_CONV",
    prepare,
    invoke,
};

/// Extents of the scatter, NHWC input and output, OHWI filter.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Shape {
    /// Batches.
    pub batches: u32,
    /// Input height, width and channels.
    pub in_h: u32,
    /// Input width.
    pub in_w: u32,
    /// Input channels.
    pub in_c: u32,
    /// Output height.
    pub out_h: u32,
    /// Output width.
    pub out_w: u32,
    /// Output channels.
    pub out_c: u32,
    /// Filter height.
    pub filter_h: u32,
    /// Filter width.
    pub filter_w: u32,
    /// Stride along height.
    pub stride_h: u32,
    /// Stride along width.
    pub stride_w: u32,
    /// Padding before the first output row.
    pub pad_h: u32,
    /// Padding before the first output column.
    pub pad_w: u32,
}

impl Shape {
    fn input_len(&self) -> usize {
        (self.batches * self.in_h * self.in_w * self.in_c) as usize
    }

    fn output_len(&self) -> usize {
        (self.batches * self.out_h * self.out_w * self.out_c) as usize
    }

    fn filter_len(&self) -> usize {
        (self.out_c * self.filter_h * self.filter_w * self.in_c) as usize
    }

    /// Calls `f(input index, filter index, output index)` for every product
    /// in TFLM's order (batch, input row, column, channel, filter row,
    /// column, output channel), skipping output positions off the edge.
    fn scatter(&self, mut f: impl FnMut(usize, usize, usize)) {
        let (ic, oc) = (self.in_c as usize, self.out_c as usize);
        let (fh, fw) = (self.filter_h as i64, self.filter_w as i64);
        let (oh, ow) = (i64::from(self.out_h), i64::from(self.out_w));
        let mut xi = 0;
        for b in 0..self.batches as i64 {
            for iy in 0..i64::from(self.in_h) {
                for ix in 0..i64::from(self.in_w) {
                    let oy0 = iy * i64::from(self.stride_h) - i64::from(self.pad_h);
                    let ox0 = ix * i64::from(self.stride_w) - i64::from(self.pad_w);
                    for c in 0..ic {
                        for ky in 0..fh {
                            let oy = oy0 + ky;
                            if oy < 0 || oy >= oh {
                                continue;
                            }
                            for kx in 0..fw {
                                let ox = ox0 + kx;
                                if ox < 0 || ox >= ow {
                                    continue;
                                }
                                let o = (((b * oh + oy) * ow + ox) as usize) * oc;
                                let w = ((ky * fw + kx) as usize) * ic + c;
                                let w_pitch = (fh * fw) as usize * ic;
                                for k in 0..oc {
                                    f(xi, k * w_pitch + w, o + k);
                                }
                            }
                        }
                        xi += 1;
                    }
                }
            }
        }
    }

    /// Whether slices of these lengths fit the shape (checked before any
    /// indexing, so the loops cannot run off a buffer).
    fn fits(&self, x: usize, w: usize, acc: usize, out: usize, bias: Option<usize>) -> bool {
        x >= self.input_len()
            && w >= self.filter_len()
            && acc >= self.output_len()
            && out >= self.output_len()
            && bias.is_none_or(|b| b >= self.out_c as usize)
    }
}

/// Per-channel requantisation and the output range of a quantised scatter.
#[derive(Debug, Clone, Copy)]
pub struct Requantize<'a> {
    /// Q0.31 multiplier per output channel.
    pub multiplier: &'a [i32],
    /// Power-of-two exponent per output channel.
    pub shift: &'a [i32],
    /// Added to the input values (minus the input zero point; int8 only).
    pub input_offset: i32,
    /// Added after requantisation (the output zero point; int8 only).
    pub output_offset: i32,
    /// Clamp, fused activation applied.
    pub min: i32,
    /// Clamp, fused activation applied.
    pub max: i32,
}

/// int8: 32-bit sums of `(x + input_offset) · w`, bias, requantised per
/// channel (TFLM's `reference_integer_ops::TransposeConv`).
pub fn transpose_conv_i8(
    s: &Shape,
    x: &[i8],
    w: &[i8],
    bias: Option<&[i32]>,
    q: &Requantize<'_>,
    acc: &mut [i32],
    out: &mut [i8],
) -> Result<(), KernelError> {
    let oc = s.out_c as usize;
    if !s.fits(
        x.len(),
        w.len(),
        acc.len(),
        out.len(),
        bias.map(<[i32]>::len),
    ) || q.multiplier.len() < oc
        || q.shift.len() < oc
    {
        return Err(KernelError::Internal);
    }
    let acc = &mut acc[..s.output_len()];
    acc.fill(0);
    s.scatter(|xi, wi, o| {
        let v = (i32::from(x[xi]) + q.input_offset) * i32::from(w[wi]);
        acc[o] = acc[o].wrapping_add(v);
    });
    for (i, (&a, y)) in acc.iter().zip(out.iter_mut()).enumerate() {
        let c = i % oc;
        let a = a.wrapping_add(bias.map_or(0, |b| b[c]));
        let v = multiply_by_quantized_multiplier(a, q.multiplier[c], q.shift[c]) + q.output_offset;
        *y = v.clamp(q.min, q.max) as i8;
    }
    Ok(())
}

/// An int64 bias read from its little-endian bytes: constant data in a
/// model buffer is only as aligned as the flatbuffer placed it, often 4.
#[derive(Debug, Clone, Copy)]
pub struct Bias64<'a>(pub &'a [u8]);

impl Bias64<'_> {
    fn len(&self) -> usize {
        self.0.len() / 8
    }

    fn get(&self, c: usize) -> i64 {
        super::conv_i16::bias_at(self.0, c)
    }
}

/// int16x8: 64-bit sums of `x · w`, int64 bias, requantised per channel
/// with the 64-bit multiply (TFLM's int16 `TransposeConv`; zero points 0).
pub fn transpose_conv_i16(
    s: &Shape,
    x: &[i16],
    w: &[i8],
    bias: Option<Bias64<'_>>,
    q: &Requantize<'_>,
    acc: &mut [i64],
    out: &mut [i16],
) -> Result<(), KernelError> {
    let oc = s.out_c as usize;
    if !s.fits(
        x.len(),
        w.len(),
        acc.len(),
        out.len(),
        bias.map(|b| b.len()),
    ) || q.multiplier.len() < oc
        || q.shift.len() < oc
    {
        return Err(KernelError::Internal);
    }
    let acc = &mut acc[..s.output_len()];
    acc.fill(0);
    s.scatter(|xi, wi, o| {
        acc[o] = acc[o].wrapping_add(i64::from(x[xi]) * i64::from(w[wi]));
    });
    for (i, (&a, y)) in acc.iter().zip(out.iter_mut()).enumerate() {
        let c = i % oc;
        let a = a.wrapping_add(bias.map_or(0, |b| b.get(c)));
        let v = multiply_by_quantized_multiplier_i64(a, q.multiplier[c], q.shift[c]);
        *y = v.clamp(q.min, q.max) as i16;
    }
    Ok(())
}

/// float32: products summed into the zeroed output, then bias and the
/// fused activation (TFLM's float `TransposeConv`).
pub fn transpose_conv_f32(
    s: &Shape,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    range: (f32, f32),
    out: &mut [f32],
) -> Result<(), KernelError> {
    let oc = s.out_c as usize;
    if !s.fits(
        x.len(),
        w.len(),
        out.len(),
        out.len(),
        bias.map(<[f32]>::len),
    ) {
        return Err(KernelError::Internal);
    }
    let out = &mut out[..s.output_len()];
    out.fill(0.0);
    s.scatter(|xi, wi, o| out[o] += x[xi] * w[wi]);
    for (i, y) in out.iter_mut().enumerate() {
        let v = *y + bias.map_or(0.0, |b| b[i % oc]);
        *y = v.max(range.0).min(range.1);
    }
    Ok(())
}

const KIND_FLOAT: u32 = 0;
const KIND_INT8: u32 = 1;
const KIND_INT16: u32 = 2;

#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct OpData {
    kind: u32,
    /// Scratch index of the accumulators (quantised kinds).
    scratch: u32,
    shape: Shape,
    multiplier: Stored<i32>,
    shift: Stored<i32>,
    input_offset: i32,
    output_offset: i32,
    min: i32,
    max: i32,
    float_min: f32,
    float_max: f32,
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let shape_in = ctx.input(0)?;
    let filter = ctx.input(1)?;
    let input = ctx.input(2)?;
    let bias = ctx.optional_input(3);
    let output = ctx.output(0)?;
    let options = ctx
        .op()
        .raw()
        .builtin_options_as_transpose_conv_options()
        .ok_or(KernelError::MissingOptions)?;
    expect_type(&shape_in, &[TensorType::INT32])?;
    let activation = options.fused_activation_function();
    quant_math::check_activation(activation)?;
    let shape = geometry(&input, &filter, &output, &options)?;
    if input.dtype != output.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: output.index,
            dtype: output.dtype.0,
        });
    }
    let mut data = OpData {
        kind: KIND_FLOAT,
        scratch: 0,
        shape,
        multiplier: Zeroable::zeroed(),
        shift: Zeroable::zeroed(),
        input_offset: 0,
        output_offset: 0,
        min: 0,
        max: 0,
        float_min: 0.0,
        float_max: 0.0,
    };
    let (bias_type, acc_bytes) = match input.dtype {
        TensorType::FLOAT32 => {
            expect_type(&filter, &[TensorType::FLOAT32])?;
            (data.float_min, data.float_max) = activation_range_float(activation);
            (TensorType::FLOAT32, 0)
        }
        TensorType::INT8 => {
            data.kind = KIND_INT8;
            (TensorType::INT32, 4)
        }
        TensorType::INT16 => {
            data.kind = KIND_INT16;
            (TensorType::INT64, 8)
        }
        other => {
            return Err(KernelError::UnsupportedType {
                tensor: input.index,
                dtype: other.0,
            });
        }
    };
    if let Some(bias) = &bias {
        expect_type(bias, &[bias_type])?;
        if Dims::of(bias)?.elements() != shape.out_c as usize {
            return Err(KernelError::ShapeMismatch { tensor: bias.index });
        }
    }
    if data.kind != KIND_FLOAT {
        expect_type(&filter, &[TensorType::INT8])?;
        quantised(ctx, &mut data, &input, &filter, &output, activation)?;
        let bytes = u32::try_from(shape.output_len() * acc_bytes).map_err(|_| {
            KernelError::ShapeMismatch {
                tensor: output.index,
            }
        })?;
        data.scratch = ctx.request_scratch(bytes, 8)?;
    }
    ctx.store(&data)
}

/// The scatter's extents from the tensors, and the padding TFLM computes
/// for it (`ComputePaddingHeightWidth` on the *output* size, dilation 1).
fn geometry(
    input: &TensorInfo<'_>,
    filter: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
    options: &crate::schema::TransposeConvOptions<'_>,
) -> Result<Shape, KernelError> {
    let (id, fd, od) = (Dims::of(input)?, Dims::of(filter)?, Dims::of(output)?);
    for (d, index) in [(&id, input.index), (&fd, filter.index), (&od, output.index)] {
        if d.rank() != 4 || d.as_slice().iter().any(|&v| v <= 0) {
            return Err(KernelError::ShapeMismatch { tensor: index });
        }
    }
    if od.get(0) != id.get(0) || fd.get(0) != od.get(3) || fd.get(3) != id.get(3) {
        return Err(KernelError::ShapeMismatch {
            tensor: filter.index,
        });
    }
    let bad = KernelError::UnsupportedParameter {
        what: "TRANSPOSE_CONV stride or padding",
    };
    let (sh, sw) = (options.stride_h(), options.stride_w());
    let y = Axis::new(options.padding(), od.get(1), fd.get(1), sh, 1).map_err(|_| bad)?;
    let x = Axis::new(options.padding(), od.get(2), fd.get(2), sw, 1).map_err(|_| bad)?;
    // The input must be what a convolution of the output would give.
    if y.out_size != id.get(1) || x.out_size != id.get(2) {
        return Err(KernelError::ShapeMismatch {
            tensor: input.index,
        });
    }
    let u = |v: i32| v as u32;
    Ok(Shape {
        batches: u(id.get(0)),
        in_h: u(id.get(1)),
        in_w: u(id.get(2)),
        in_c: u(id.get(3)),
        out_h: u(od.get(1)),
        out_w: u(od.get(2)),
        out_c: u(od.get(3)),
        filter_h: u(fd.get(1)),
        filter_w: u(fd.get(2)),
        stride_h: u(sh),
        stride_w: u(sw),
        pad_h: u(y.pad),
        pad_w: u(x.pad),
    })
}

/// Per-channel multipliers `input_scale · filter_scale[c] / output_scale`
/// (in `f64`, as TFLM's `PopulateConvolutionQuantizationParams`), offsets
/// and the activation range.
fn quantised(
    ctx: &mut PrepareContext<'_, '_, '_>,
    data: &mut OpData,
    input: &TensorInfo<'_>,
    filter: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
    activation: crate::schema::ActivationFunctionType,
) -> Result<(), KernelError> {
    let (qi, qo) = (require_quant(input)?, require_quant(output)?);
    require_quant(filter)?;
    let scales = channel_scales(filter).ok_or(KernelError::MissingQuantization {
        tensor: filter.index,
    })?;
    let oc = data.shape.out_c as usize;
    if scales.len() != 1 && scales.len() != oc {
        return Err(KernelError::ShapeMismatch {
            tensor: filter.index,
        });
    }
    let (qmin, qmax) = if data.kind == KIND_INT16 {
        if qi.zero_point != 0 || qo.zero_point != 0 {
            return Err(KernelError::UnsupportedParameter {
                what: "int16 TRANSPOSE_CONV needs zero points of 0",
            });
        }
        (i32::from(i16::MIN), i32::from(i16::MAX))
    } else {
        (i32::from(i8::MIN), i32::from(i8::MAX))
    };
    let effective = |c: usize| {
        let fs = scales.get(if scales.len() == 1 { 0 } else { c });
        quantize_multiplier(f64::from(qi.scale) * f64::from(fs) / f64::from(qo.scale))
    };
    data.multiplier = ctx.store_from_fn(oc, |c| effective(c).0)?;
    data.shift = ctx.store_from_fn(oc, |c| effective(c).1)?;
    data.input_offset = -qi.zero_point;
    data.output_offset = qo.zero_point;
    (data.min, data.max) =
        activation_range_quantized(activation, qo.scale, qo.zero_point, qmin, qmax);
    Ok(())
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &OpData = ctx.op_data()?;
    let s = &data.shape;
    let filter = ctx.input(1)?;
    let input = ctx.input(2)?;
    let bias = ctx.optional_input(3)?;
    let output = ctx.output(0)?;
    if data.kind == KIND_FLOAT {
        let bias = bias.map(|b| b.values::<f32>()).transpose()?;
        let range = (data.float_min, data.float_max);
        let (x, w) = (input.values::<f32>()?, filter.values::<f32>()?);
        return transpose_conv_f32(s, x, w, bias, range, output.values::<f32>()?);
    }
    let q = Requantize {
        multiplier: ctx.stored(data.multiplier)?,
        shift: ctx.stored(data.shift)?,
        input_offset: data.input_offset,
        output_offset: data.output_offset,
        min: data.min,
        max: data.max,
    };
    let scratch = ctx.scratch(data.scratch)?;
    let w = filter.values::<i8>()?;
    if data.kind == KIND_INT8 {
        let acc: &mut [i32] =
            bytemuck::try_cast_slice_mut(scratch).map_err(|_| KernelError::Internal)?;
        let bias = bias.map(|b| b.values::<i32>()).transpose()?;
        let (x, out) = (input.values::<i8>()?, output.values::<i8>()?);
        return transpose_conv_i8(s, x, w, bias, &q, acc, out);
    }
    let acc: &mut [i64] =
        bytemuck::try_cast_slice_mut(scratch).map_err(|_| KernelError::Internal)?;
    let bias = bias.map(|b| Bias64(b.data));
    let (x, out) = (input.values::<i16>()?, output.values::<i16>()?);
    transpose_conv_i16(s, x, w, bias, &q, acc, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(in_hw: u32, out_hw: u32, filter: u32, stride: u32, pad: u32) -> Shape {
        Shape {
            batches: 1,
            in_h: in_hw,
            in_w: in_hw,
            in_c: 1,
            out_h: out_hw,
            out_w: out_hw,
            out_c: 1,
            filter_h: filter,
            filter_w: filter,
            stride_h: stride,
            stride_w: stride,
            pad_h: pad,
            pad_w: pad,
        }
    }

    #[test]
    fn float_scatter_by_hand() {
        // 2x2 input, 2x2 filter of ones, stride 2, no padding: each input
        // pixel fills its own 2x2 block of the 4x4 output.
        let s = shape(2, 4, 2, 2, 0);
        let mut out = [9.0f32; 16];
        let (lo, hi) = activation_range_float(crate::schema::ActivationFunctionType::NONE);
        transpose_conv_f32(
            &s,
            &[1.0, 2.0, 3.0, 4.0],
            &[1.0; 4],
            None,
            (lo, hi),
            &mut out,
        )
        .unwrap();
        #[rustfmt::skip]
        let want = [1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0, 3.0, 3.0, 4.0, 4.0];
        assert_eq!(out, want);
        // Stride 1, 2x2 filter [1,2,3,4] over a 1x1 input of 2, bias 1.
        let s = shape(1, 2, 2, 1, 0);
        let mut out = [0.0f32; 4];
        transpose_conv_f32(
            &s,
            &[2.0],
            &[1.0, 2.0, 3.0, 4.0],
            Some(&[1.0]),
            (lo, hi),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [3.0, 5.0, 7.0, 9.0]);
    }

    #[test]
    fn overlapping_windows_sum_and_padding_crops() {
        // 1-D-like: 2 inputs, 3-tap filter, stride 1, pad 1 → output 2,
        // out[o] = sum over i of x[i] * w[o - i + 1].
        let mut s = shape(1, 1, 1, 1, 0);
        (s.in_w, s.out_w, s.filter_w, s.pad_w) = (2, 2, 3, 1);
        let mut out = [0.0f32; 2];
        transpose_conv_f32(
            &s,
            &[1.0, 10.0],
            &[1.0, 2.0, 3.0],
            None,
            (f32::MIN, f32::MAX),
            &mut out,
        )
        .unwrap();
        // out[0] = x0·w1 + x1·w0 = 2 + 10; out[1] = x0·w2 + x1·w1 = 3 + 20.
        assert_eq!(out, [12.0, 23.0]);
    }

    #[test]
    fn int8_requantises_with_offsets_and_clamps() {
        let s = shape(1, 2, 2, 1, 0);
        let (m, sh) = quantize_multiplier(0.5);
        let q = Requantize {
            multiplier: &[m],
            shift: &[sh],
            input_offset: 1,
            output_offset: -3,
            min: -128,
            max: 10,
        };
        let mut acc = [0i32; 4];
        let mut out = [0i8; 4];
        // (3 + 1) · [1, 2, 3, 8] + 2 = [6, 10, 14, 34]; · 0.5 − 3 = [0, 2, 4, 14→10].
        transpose_conv_i8(&s, &[3], &[1, 2, 3, 8], Some(&[2]), &q, &mut acc, &mut out).unwrap();
        assert_eq!(out, [0, 2, 4, 10]);
    }

    #[test]
    fn short_buffers_are_errors() {
        let s = shape(2, 4, 2, 2, 0);
        let mut out = [0.0f32; 15];
        assert_eq!(
            transpose_conv_f32(&s, &[0.0; 4], &[0.0; 4], None, (0.0, 1.0), &mut out),
            Err(KernelError::Internal)
        );
    }
}
