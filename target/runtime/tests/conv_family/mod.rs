//! Shared by the FULLY_CONNECTED, CONV_2D and DEPTHWISE_CONV_2D tests:
//! one-op models, a runner, and plain reference loops written straight
//! from TFLM's reference kernels (`reference/conv.h`,
//! `reference/depthwiseconv_float.h`, `reference/integer_ops/*.h`,
//! `reference/fully_connected.h`), with none of the kernels' tricks.
#![allow(dead_code, unreachable_pub)]

use hilt_runtime::allocation::AllocOptions;
use hilt_runtime::interpreter::{Interpreter, InterpreterError};
use hilt_runtime::kernels::all_builtins;
use hilt_runtime::kernels::fixed_point::{
    activation_range_quantized, multiply_by_quantized_multiplier, quantize_multiplier,
};
use hilt_runtime::model::Model;
use hilt_runtime::planner::Greedy;
use hilt_runtime::schema::{ActivationFunctionType as Act, Padding, TensorType as T};
use hilt_runtime::writer::{ModelWriter, Options, TensorId, f32_bytes, i32_bytes};

/// Runs a one-input, one-output model on `input` bytes.
pub fn run(bytes: &[u8], input: &[u8]) -> Result<Vec<u8>, InterpreterError> {
    // Constant data is viewed in place as i32/f32: keep the model 16-aligned.
    let mut words = vec![0u128; bytes.len().div_ceil(16)];
    let aligned: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
    aligned[..bytes.len()].copy_from_slice(bytes);
    let model = Model::from_bytes(&aligned[..bytes.len()]).expect("valid model");
    let resolver = all_builtins();
    let mut arena = vec![0u128; 1 << 16];
    let mut interpreter = Interpreter::new(model, &resolver, bytemuck::cast_slice_mut(&mut arena));
    interpreter.allocate(&Greedy, &AllocOptions::default())?;
    interpreter.input_mut(0)?.copy_from_slice(input);
    interpreter.invoke()?;
    Ok(interpreter.output(0)?.to_vec())
}

/// The operator error of a model that must fail to prepare or run.
pub fn kernel_error(bytes: &[u8], input: &[u8]) -> hilt_runtime::kernels::KernelError {
    match run(bytes, input) {
        Err(InterpreterError::Kernel { error, .. }) => error,
        other => panic!("expected a kernel error, got {other:?}"),
    }
}

/// A deterministic byte stream for test data.
#[derive(Debug, Clone)]
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as u32
    }
    pub fn i8s(&mut self, n: usize) -> Vec<i8> {
        (0..n).map(|_| self.next() as u8 as i8).collect()
    }
    pub fn f32s(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (self.next() % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    }
    pub fn i32_in(&mut self, lo: i32, hi: i32) -> i32 {
        lo + (self.next() % (hi - lo + 1) as u32) as i32
    }
}

pub fn i8_bytes(v: &[i8]) -> Vec<u8> {
    v.iter().map(|&x| x as u8).collect()
}

pub fn as_i8(v: &[u8]) -> Vec<i8> {
    v.iter().map(|&x| x as i8).collect()
}

pub fn as_f32(v: &[u8]) -> Vec<f32> {
    v.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Quantisation of a test tensor.
#[derive(Debug, Clone)]
pub struct Q {
    pub scales: Vec<f32>,
    pub zero_points: Vec<i64>,
    pub axis: i32,
}

impl Q {
    pub fn tensor(scale: f32, zero_point: i64) -> Self {
        Q {
            scales: vec![scale],
            zero_points: vec![zero_point],
            axis: 0,
        }
    }
    pub fn channels(scales: Vec<f32>, axis: i32) -> Self {
        let zero_points = vec![0; scales.len()];
        Q {
            scales,
            zero_points,
            axis,
        }
    }
}

/// Constant data of a weight or bias tensor.
#[derive(Debug, Clone)]
pub enum Data {
    I8(Vec<i8>),
    I32(Vec<i32>),
    /// int64 biases of int16x8 operators.
    I64(Vec<i64>),
    F32(Vec<f32>),
}

impl Data {
    fn dtype(&self) -> T {
        match self {
            Data::I8(_) => T::INT8,
            Data::I32(_) => T::INT32,
            Data::I64(_) => T::INT64,
            Data::F32(_) => T::FLOAT32,
        }
    }
    fn bytes(&self) -> Vec<u8> {
        match self {
            Data::I8(v) => i8_bytes(v),
            Data::I32(v) => i32_bytes(v),
            Data::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::F32(v) => f32_bytes(v),
        }
    }
}

/// A one-op model: `op(input, filter, bias?) → output`, quantised when the
/// `Q`s are given.
#[allow(clippy::too_many_arguments)]
pub fn one_op(
    op: hilt_runtime::schema::BuiltinOperator,
    options: Options,
    dtype: T,
    input_shape: &[i32],
    input_q: Option<Q>,
    filter_shape: &[i32],
    filter: Data,
    filter_q: Option<Q>,
    bias: Option<(Data, Option<Q>)>,
    output_shape: &[i32],
    output_q: Option<Q>,
) -> Vec<u8> {
    let mut w = ModelWriter::new();
    let quantize = |w: &mut ModelWriter, t: TensorId, q: &Option<Q>| {
        if let Some(q) = q {
            w.quantize_per_channel(t, &q.scales, &q.zero_points, q.axis);
        }
    };
    let x = w.input("input", dtype, input_shape);
    quantize(&mut w, x, &input_q);
    let f = w.constant("filter", filter.dtype(), filter_shape, &filter.bytes());
    quantize(&mut w, f, &filter_q);
    let b = bias.map(|(data, q)| {
        let len = match &data {
            Data::I8(v) => v.len(),
            Data::I32(v) => v.len(),
            Data::I64(v) => v.len(),
            Data::F32(v) => v.len(),
        };
        let b = w.constant("bias", data.dtype(), &[len as i32], &data.bytes());
        quantize(&mut w, b, &q);
        b
    });
    let y = w.output("output", dtype, output_shape);
    quantize(&mut w, y, &output_q);
    w.op(op, &[Some(x), Some(f), b], &[y], options);
    w.finish()
}

/// TFLM's `ComputePaddingHeightWidth` for one axis: (output size, padding before).
pub fn tflm_padding(
    padding: Padding,
    in_size: usize,
    filter: usize,
    stride: usize,
    dilation: usize,
) -> (usize, usize) {
    let effective = (filter - 1) * dilation + 1;
    let out = if padding == Padding::SAME {
        in_size.div_ceil(stride)
    } else {
        (in_size + stride).saturating_sub(effective) / stride
    };
    let total = ((out as i64 - 1) * stride as i64 + effective as i64 - in_size as i64).max(0);
    (out, (total / 2) as usize)
}

/// Window options shared by the conv references.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub padding: Padding,
    pub stride: (usize, usize),
    pub dilation: (usize, usize),
}

/// Output shape `[b, oh, ow]` of `window` over `[b, h, w, _]` with a `fh × fw` filter.
pub fn out_hw(window: &Window, input: [usize; 4], fh: usize, fw: usize) -> (usize, usize) {
    let (oh, _) = tflm_padding(
        window.padding,
        input[1],
        fh,
        window.stride.0,
        window.dilation.0,
    );
    let (ow, _) = tflm_padding(
        window.padding,
        input[2],
        fw,
        window.stride.1,
        window.dilation.1,
    );
    (oh, ow)
}

/// int8 requantisation constants, as TFLM's prepare computes them.
#[derive(Debug, Clone)]
pub struct Requant {
    pub input_offset: i32,
    pub output_offset: i32,
    pub multiplier: Vec<i32>,
    pub shift: Vec<i32>,
    pub min: i32,
    pub max: i32,
}

impl Requant {
    /// Per-channel (`PopulateConvolutionQuantizationParams`): one scale broadcasts.
    pub fn per_channel(
        input: (f32, i32),
        filter_scales: &[f32],
        output: (f32, i32),
        channels: usize,
        act: Act,
    ) -> Self {
        let (multiplier, shift) = (0..channels)
            .map(|c| {
                let s = if filter_scales.len() > 1 {
                    filter_scales[c]
                } else {
                    filter_scales[0]
                };
                quantize_multiplier(f64::from(input.0) * f64::from(s) / f64::from(output.0))
            })
            .unzip();
        Self::with(input, output, multiplier, shift, act)
    }

    /// Per-tensor FULLY_CONNECTED (`GetQuantizedConvolutionMultipler`):
    /// the scales are multiplied in float first.
    pub fn fc_per_tensor(
        input: (f32, i32),
        filter_scale: f32,
        output: (f32, i32),
        act: Act,
    ) -> Self {
        let (m, s) = quantize_multiplier(f64::from(input.0 * filter_scale) / f64::from(output.0));
        Self::with(input, output, vec![m], vec![s], act)
    }

    fn with(
        input: (f32, i32),
        output: (f32, i32),
        multiplier: Vec<i32>,
        shift: Vec<i32>,
        act: Act,
    ) -> Self {
        let (min, max) = activation_range_quantized(act, output.0, output.1, -128, 127);
        Requant {
            input_offset: -input.1,
            output_offset: output.1,
            multiplier,
            shift,
            min,
            max,
        }
    }

    /// TFLM's output stage for channel `c`.
    pub fn apply(&self, c: usize, acc: i32) -> i8 {
        let i = if self.multiplier.len() > 1 { c } else { 0 };
        let mut v = multiply_by_quantized_multiplier(acc, self.multiplier[i], self.shift[i]);
        v += self.output_offset;
        v = v.max(self.min);
        v = v.min(self.max);
        v as i8
    }
}

/// TFLM's float activation range (`CalculateActivationRange`).
pub fn float_range(act: Act) -> (f32, f32) {
    match act {
        Act::RELU => (0.0, f32::MAX),
        Act::RELU6 => (0.0, 6.0),
        Act::RELU_N1_TO_1 => (-1.0, 1.0),
        _ => (f32::MIN, f32::MAX),
    }
}

/// `ActivationFunctionWithMinMax`.
pub fn clamp_f32(x: f32, (lo, hi): (f32, f32)) -> f32 {
    let x = if x < lo { lo } else { x };
    if hi < x { hi } else { x }
}

/// Values of either type, for one reference loop per operator.
pub trait Elem: Copy {
    type Acc: Copy;
    fn zero() -> Self::Acc;
    fn mac(acc: Self::Acc, x: Self, w: Self, input_offset: i32) -> Self::Acc;
}

impl Elem for i8 {
    type Acc = i32;
    fn zero() -> i32 {
        0
    }
    fn mac(acc: i32, x: i8, w: i8, input_offset: i32) -> i32 {
        acc + i32::from(w) * (i32::from(x) + input_offset)
    }
}

impl Elem for f32 {
    type Acc = f32;
    fn zero() -> f32 {
        0.0
    }
    fn mac(acc: f32, x: f32, w: f32, _: i32) -> f32 {
        acc + x * w
    }
}

/// TFLM's reference CONV_2D sums (before bias and output stage), NHWC
/// input `[b, h, w, c]`, filter `[oc, fh, fw, c / groups]`.
pub fn conv_sums<E: Elem>(
    input: &[E],
    shape: [usize; 4],
    filter: &[E],
    filter_shape: [usize; 4],
    window: &Window,
    input_offset: i32,
) -> Vec<E::Acc> {
    let [batches, ih, iw, ic] = shape;
    let [oc, fh, fw, fc] = filter_shape;
    let groups = ic / fc;
    let per_group = oc / groups;
    let (oh, pad_h) = tflm_padding(window.padding, ih, fh, window.stride.0, window.dilation.0);
    let (ow, pad_w) = tflm_padding(window.padding, iw, fw, window.stride.1, window.dilation.1);
    let mut out = Vec::new();
    for b in 0..batches {
        for oy in 0..oh {
            for ox in 0..ow {
                for c in 0..oc {
                    let group = c / per_group;
                    let y0 = (oy * window.stride.0) as i64 - pad_h as i64;
                    let x0 = (ox * window.stride.1) as i64 - pad_w as i64;
                    let mut acc = E::zero();
                    for fy in 0..fh {
                        for fx in 0..fw {
                            let iy = y0 + (window.dilation.0 * fy) as i64;
                            let ix = x0 + (window.dilation.1 * fx) as i64;
                            if iy < 0 || ix < 0 || iy >= ih as i64 || ix >= iw as i64 {
                                continue;
                            }
                            for k in 0..fc {
                                let xi = ((b * ih + iy as usize) * iw + ix as usize) * ic
                                    + k
                                    + group * fc;
                                let wi = ((c * fh + fy) * fw + fx) * fc + k;
                                acc = E::mac(acc, input[xi], filter[wi], input_offset);
                            }
                        }
                    }
                    out.push(acc);
                }
            }
        }
    }
    out
}

/// TFLM's reference DEPTHWISE_CONV_2D sums, filter `[1, fh, fw, c · m]`.
#[allow(clippy::too_many_arguments)]
pub fn depthwise_sums<E: Elem>(
    input: &[E],
    shape: [usize; 4],
    filter: &[E],
    fh: usize,
    fw: usize,
    multiplier: usize,
    window: &Window,
    input_offset: i32,
) -> Vec<E::Acc> {
    let [batches, ih, iw, ic] = shape;
    let oc = ic * multiplier;
    let (oh, pad_h) = tflm_padding(window.padding, ih, fh, window.stride.0, window.dilation.0);
    let (ow, pad_w) = tflm_padding(window.padding, iw, fw, window.stride.1, window.dilation.1);
    let mut out = vec![E::zero(); batches * oh * ow * oc];
    for b in 0..batches {
        for oy in 0..oh {
            for ox in 0..ow {
                for c in 0..ic {
                    for m in 0..multiplier {
                        let o = m + c * multiplier;
                        let y0 = (oy * window.stride.0) as i64 - pad_h as i64;
                        let x0 = (ox * window.stride.1) as i64 - pad_w as i64;
                        let mut acc = E::zero();
                        for fy in 0..fh {
                            for fx in 0..fw {
                                let iy = y0 + (window.dilation.0 * fy) as i64;
                                let ix = x0 + (window.dilation.1 * fx) as i64;
                                if iy < 0 || ix < 0 || iy >= ih as i64 || ix >= iw as i64 {
                                    continue;
                                }
                                let xi = ((b * ih + iy as usize) * iw + ix as usize) * ic + c;
                                let wi = (fy * fw + fx) * oc + o;
                                acc = E::mac(acc, input[xi], filter[wi], input_offset);
                            }
                        }
                        out[((b * oh + oy) * ow + ox) * oc + o] = acc;
                    }
                }
            }
        }
    }
    out
}

/// int8 outputs from sums: `+ bias`, output stage, channel = index mod `channels`.
pub fn finish_i8(sums: &[i32], bias: Option<&[i32]>, rq: &Requant, channels: usize) -> Vec<i8> {
    sums.iter()
        .enumerate()
        .map(|(i, &s)| {
            let c = i % channels;
            rq.apply(c, s + bias.map_or(0, |b| b[c]))
        })
        .collect()
}

/// float outputs from sums: `act(sum + bias)`.
pub fn finish_f32(sums: &[f32], bias: Option<&[f32]>, act: Act, channels: usize) -> Vec<f32> {
    let range = float_range(act);
    sums.iter()
        .enumerate()
        .map(|(i, &s)| clamp_f32(s + bias.map_or(0.0, |b| b[i % channels]), range))
        .collect()
}

/// Bit-exact float comparison that treats equal NaNs as equal.
pub fn assert_f32_exact(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(g.to_bits() == w.to_bits(), "element {i}: {g} vs {w}");
    }
}

pub const ACTIVATIONS: [Act; 4] = [Act::NONE, Act::RELU, Act::RELU6, Act::RELU_N1_TO_1];
