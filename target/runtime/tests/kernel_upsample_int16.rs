//! RESIZE_NEAREST_NEIGHBOR, TRANSPOSE_CONV, int16x8 CONV_2D and
//! DEPTHWISE_CONV_2D, and int16 LOGISTIC as one-op models: property tests against plain reference loops written the way
//! TFLM's reference kernels read (one output element at a time — for
//! TRANSPOSE_CONV the reference *gathers* what the kernel scatters, so the
//! two share no indexing), and the typed errors for bad models.

mod one_op;

use hilt_runtime::interpreter::InterpreterError;
use hilt_runtime::kernels::KernelError;
use hilt_runtime::kernels::fixed_point::{
    multiply_by_quantized_multiplier, multiply_by_quantized_multiplier_i64, quantize_multiplier,
};
use hilt_runtime::schema::{
    ActivationFunctionType as Act, BuiltinOperator as Op, Padding, TensorType as T,
};
use hilt_runtime::writer::{ModelWriter, Options, i32_bytes};
use one_op::*;
use proptest::prelude::*;

fn kernel_error(model: &[u8], inputs: &[&[u8]]) -> KernelError {
    match run(model, inputs) {
        Err(InterpreterError::Kernel { error, .. }) => error,
        other => panic!("expected a kernel error, got {other:?}"),
    }
}

fn wide(dtype: T, bytes: &[u8]) -> Vec<i64> {
    match dtype {
        T::INT8 => i8s(bytes).into_iter().map(i64::from).collect(),
        T::INT16 => i16s(bytes).into_iter().map(i64::from).collect(),
        _ => f32s(bytes)
            .into_iter()
            .map(|v| v.to_bits().into())
            .collect(),
    }
}

// ---------------------------------------------------------------- resize

fn resize_model(dtype: T, input: &[i32], size: &[i32], output: &[i32], opts: Options) -> Vec<u8> {
    let ty = if dtype == T::FLOAT32 {
        F32
    } else {
        q(dtype, 0.05, 0)
    };
    let mut w = ModelWriter::new();
    let x = w.input("x", ty.dtype, input);
    let s = w.constant("size", T::INT32, &[size.len() as i32], &i32_bytes(size));
    let y = w.output("y", ty.dtype, output);
    if let Some((sc, z)) = ty.quant {
        w.quantize(x, sc, z);
        w.quantize(y, sc, z);
    }
    w.op(Op::RESIZE_NEAREST_NEIGHBOR, &[Some(x), Some(s)], &[y], opts);
    w.finish()
}

/// TFLM's `GetNearestNeighbor`, with std's `round` and `floor`.
fn reference_nearest(at: usize, input: i32, output: i32, align: bool, half: bool) -> usize {
    let scale = if align && output > 1 {
        (input - 1) as f32 / (output - 1) as f32
    } else {
        input as f32 / output as f32
    };
    let offset = if half { 0.5 } else { 0.0 };
    let v = (at as f32 + offset) * scale;
    let v = if align { v.round() } else { v.floor() } as i32;
    let v = v.min(input - 1);
    (if half { v.max(0) } else { v }) as usize
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    #[test]
    fn resize_matches_reference(
        (n, ih, iw, c) in (1i32..=2, 1i32..=6, 1i32..=6, 1i32..=3),
        (oh, ow) in (1i32..=13, 1i32..=13),
        align in any::<bool>(), half in any::<bool>(),
        dtype in prop_oneof![Just(T::INT8), Just(T::INT16), Just(T::FLOAT32)],
        seed in any::<u64>(),
    ) {
        let (input, output) = ([n, ih, iw, c], [n, oh, ow, c]);
        let opts = Options::ResizeNearestNeighbor { align_corners: align, half_pixel_centers: half };
        let model = resize_model(dtype, &input, &[oh, ow], &output, opts);
        let x = Rng(seed).tensor(dtype, elements(&input), -10.0, 10.0);
        let got = run(&model, &[&x]).unwrap();
        let xs = wide(dtype, &x);
        let mut want = Vec::new();
        for_each_index(&output, |i| {
            let sy = reference_nearest(i[1], ih, oh, align, half);
            let sx = reference_nearest(i[2], iw, ow, align, half);
            let at = ((i[0] * ih as usize + sy) * iw as usize + sx) * c as usize + i[3];
            want.push(xs[at]);
        });
        prop_assert_eq!(wide(dtype, &got[0]), want);
    }
}

#[test]
fn resize_refuses_bad_models() {
    let none = Options::ResizeNearestNeighbor {
        align_corners: false,
        half_pixel_centers: false,
    };
    let x = vec![0u8; 4];
    // A size that is not the output's height and width.
    let model = resize_model(T::INT8, &[1, 2, 2, 1], &[3, 4], &[1, 3, 3, 1], none.clone());
    assert_eq!(
        kernel_error(&model, &[&x]),
        KernelError::ShapeMismatch { tensor: 1 }
    );
    // Channels changed by the "resize".
    let model = resize_model(T::INT8, &[1, 2, 2, 1], &[3, 3], &[1, 3, 3, 2], none.clone());
    assert_eq!(
        kernel_error(&model, &[&x]),
        KernelError::ShapeMismatch { tensor: 2 }
    );
    // Rank 3.
    let model = resize_model(T::INT8, &[2, 2, 1], &[3, 3], &[3, 3, 1], none.clone());
    assert_eq!(
        kernel_error(&model, &[&x]),
        KernelError::UnsupportedRank { tensor: 0, rank: 3 }
    );
    // No options.
    let model = resize_model(
        T::INT8,
        &[1, 2, 2, 1],
        &[3, 3],
        &[1, 3, 3, 1],
        Options::None,
    );
    assert_eq!(kernel_error(&model, &[&x]), KernelError::MissingOptions);
    // A size that is a model input (TFLM cannot resize at run time either).
    let mut w = ModelWriter::new();
    let xi = w.input("x", T::FLOAT32, &[1, 2, 2, 1]);
    let si = w.input("size", T::INT32, &[2]);
    let y = w.output("y", T::FLOAT32, &[1, 3, 3, 1]);
    w.op(
        Op::RESIZE_NEAREST_NEIGHBOR,
        &[Some(xi), Some(si)],
        &[y],
        none,
    );
    let model = w.finish();
    assert_eq!(
        kernel_error(&model, &[&[0u8; 16], &i32_bytes(&[3, 3])]),
        KernelError::UnsupportedParameter {
            what: "RESIZE_NEAREST_NEIGHBOR size must be a constant tensor"
        }
    );
}

// -------------------------------------------------------- transpose conv

/// One TRANSPOSE_CONV case: NHWC input, OHWI filter, output extents.
#[derive(Debug, Clone)]
struct Tc {
    dtype: T,
    batches: i32,
    out_hw: (i32, i32),
    in_c: i32,
    out_c: i32,
    filter: (i32, i32),
    stride: (i32, i32),
    padding: Padding,
    activation: Act,
    in_q: (f32, i32),
    out_q: (f32, i32),
    filter_scales: Vec<f32>,
    bias: bool,
}

/// TFLM's convolution output size of an axis `n` long (the transpose
/// conv's input size) and the padding before it.
fn conv_axis(padding: Padding, n: i32, f: i32, s: i32) -> (i32, i32) {
    let out = if padding == Padding::SAME {
        (n + s - 1) / s
    } else {
        (n + s - f) / s
    };
    (out, ((out - 1) * s + f - n).max(0) / 2)
}

impl Tc {
    fn input_shape(&self) -> [i32; 4] {
        let (ih, _) = conv_axis(self.padding, self.out_hw.0, self.filter.0, self.stride.0);
        let (iw, _) = conv_axis(self.padding, self.out_hw.1, self.filter.1, self.stride.1);
        [self.batches, ih, iw, self.in_c]
    }

    fn output_shape(&self) -> [i32; 4] {
        [self.batches, self.out_hw.0, self.out_hw.1, self.out_c]
    }

    fn filter_shape(&self) -> [i32; 4] {
        [self.out_c, self.filter.0, self.filter.1, self.in_c]
    }

    fn bias_type(&self) -> T {
        match self.dtype {
            T::INT8 => T::INT32,
            T::INT16 => T::INT64,
            _ => T::FLOAT32,
        }
    }

    fn model(&self, filter: &[u8], bias: &[u8]) -> Vec<u8> {
        let mut w = ModelWriter::new();
        let shape = w.constant("shape", T::INT32, &[4], &i32_bytes(&self.output_shape()));
        let f_type = if self.dtype == T::FLOAT32 {
            T::FLOAT32
        } else {
            T::INT8
        };
        let f = w.constant("filter", f_type, &self.filter_shape(), filter);
        let x = w.input("x", self.dtype, &self.input_shape());
        let b = self
            .bias
            .then(|| w.constant("bias", self.bias_type(), &[self.out_c], bias));
        let y = w.output("y", self.dtype, &self.output_shape());
        if self.dtype != T::FLOAT32 {
            w.quantize(x, self.in_q.0, self.in_q.1.into());
            w.quantize(y, self.out_q.0, self.out_q.1.into());
            let zeros = vec![0i64; self.filter_scales.len()];
            w.quantize_per_channel(f, &self.filter_scales, &zeros, 0);
        }
        let opts = Options::TransposeConv {
            padding: self.padding,
            stride: (self.stride.1, self.stride.0),
            activation: self.activation,
        };
        w.op(
            Op::TRANSPOSE_CONV,
            &[Some(shape), Some(f), Some(x), b],
            &[y],
            opts,
        );
        w.finish()
    }

    /// Sum of products landing on output (b, oy, ox, c), gathered: the
    /// input pixels whose window covers it.
    fn gather(&self, x: &[i64], w: &[i64], at: &[usize], mut each: impl FnMut(i64, i64)) {
        let [_, ih, iw, ic] = self.input_shape().map(|v| v as i64);
        let (_, ph) = conv_axis(self.padding, self.out_hw.0, self.filter.0, self.stride.0);
        let (_, pw) = conv_axis(self.padding, self.out_hw.1, self.filter.1, self.stride.1);
        let (fh, fw) = (i64::from(self.filter.0), i64::from(self.filter.1));
        let (sh, sw) = (i64::from(self.stride.0), i64::from(self.stride.1));
        let (b, oy, ox, c) = (at[0] as i64, at[1] as i64, at[2] as i64, at[3] as i64);
        for ky in 0..fh {
            let t = oy + i64::from(ph) - ky;
            if t < 0 || t % sh != 0 || t / sh >= ih {
                continue;
            }
            for kx in 0..fw {
                let u = ox + i64::from(pw) - kx;
                if u < 0 || u % sw != 0 || u / sw >= iw {
                    continue;
                }
                for i in 0..ic {
                    let xi = ((b * ih + t / sh) * iw + u / sw) * ic + i;
                    let wi = ((c * fh + ky) * fw + kx) * ic + i;
                    each(x[xi as usize], w[wi as usize]);
                }
            }
        }
    }
}

fn act_range(act: Act, scale: f32, zp: i32, lo: i32, hi: i32) -> (i32, i32) {
    let qz = |v: f32| zp + (f64::from(v / scale)).round() as i32;
    match act {
        Act::RELU => (lo.max(qz(0.0)), hi),
        Act::RELU6 => (lo.max(qz(0.0)), hi.min(qz(6.0))),
        Act::RELU_N1_TO_1 => (lo.max(qz(-1.0)), hi.min(qz(1.0))),
        _ => (lo, hi),
    }
}

fn tc_case() -> impl Strategy<Value = Tc> {
    (
        (1i32..=2, 1i32..=9, 1i32..=9, 1i32..=3, 1i32..=4),
        (1i32..=4, 1i32..=4, 1i32..=3, 1i32..=3),
        prop_oneof![Just(Padding::SAME), Just(Padding::VALID)],
        prop_oneof![Just(T::INT8), Just(T::INT16), Just(T::FLOAT32)],
        prop_oneof![Just(Act::NONE), Just(Act::RELU), Just(Act::RELU6)],
        (0.001f32..0.1, -20i32..20, 0.01f32..0.5, -20i32..20),
        (
            proptest::collection::vec(0.001f32..0.05, 4),
            any::<bool>(),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(sizes, window, padding, dtype, activation, qs, (scales, per_channel, bias))| {
                let (n, oh, ow, ic, oc) = sizes;
                let (fh, fw, sh, sw) = window;
                let int16 = dtype == T::INT16;
                let count = if per_channel { oc as usize } else { 1 };
                Tc {
                    dtype,
                    batches: n,
                    // VALID needs the output at least one filter long.
                    out_hw: (oh.max(fh), ow.max(fw)),
                    in_c: ic,
                    out_c: oc,
                    filter: (fh, fw),
                    stride: (sh, sw),
                    padding,
                    activation,
                    in_q: (qs.0, if int16 { 0 } else { qs.1 }),
                    out_q: (qs.2, if int16 { 0 } else { qs.3 }),
                    filter_scales: scales[..count].to_vec(),
                    bias,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn transpose_conv_matches_reference(tc in tc_case(), seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let out_shape = tc.output_shape();
        let oc = tc.out_c as usize;
        // Floats are small integers, so every order of summing is exact.
        let ints = |rng: &mut one_op::Rng, n: usize| -> Vec<u8> {
            (0..n).flat_map(|_| ((rng.next_u64() % 9) as f32 - 4.0).to_le_bytes()).collect()
        };
        let (x, f, b) = if tc.dtype == T::FLOAT32 {
            (ints(&mut rng, elements(&tc.input_shape())), ints(&mut rng, elements(&tc.filter_shape())), ints(&mut rng, oc))
        } else {
            let x = rng.tensor(tc.dtype, elements(&tc.input_shape()), 0.0, 0.0);
            let f = rng.tensor(T::INT8, elements(&tc.filter_shape()), 0.0, 0.0);
            let b: Vec<u8> = if tc.dtype == T::INT8 {
                (0..oc).flat_map(|_| ((rng.next_u64() as i32) >> 12).to_le_bytes()).collect()
            } else {
                (0..oc).flat_map(|_| ((rng.next_u64() as i64) >> 42).to_le_bytes()).collect()
            };
            (x, f, b)
        };
        let got = run(&tc.model(&f, &b), &[&x]).unwrap();
        let mut want = Vec::new();
        if tc.dtype == T::FLOAT32 {
            let (xs, ws, bs) = (f32s(&x), f32s(&f), f32s(&b));
            let (xs, ws): (Vec<i64>, Vec<i64>) = (xs.iter().map(|&v| v as i64).collect(), ws.iter().map(|&v| v as i64).collect());
            let (lo, hi) = match tc.activation { Act::RELU => (0.0, f32::MAX), Act::RELU6 => (0.0, 6.0), _ => (f32::MIN, f32::MAX) };
            for_each_index(&out_shape, |i| {
                let mut acc = 0i64;
                tc.gather(&xs, &ws, i, |a, w| acc += a * w);
                let v = acc as f32 + if tc.bias { bs[i[3]] } else { 0.0 };
                want.push(i64::from(v.clamp(lo, hi).to_bits()));
            });
            prop_assert_eq!(wide(T::FLOAT32, &got[0]), want);
            return Ok(());
        }
        let (xs, ws) = (wide(tc.dtype, &x), wide(T::INT8, &f));
        let (lo, hi) = if tc.dtype == T::INT16 { (-32768, 32767) } else { (-128, 127) };
        let (lo, hi) = act_range(tc.activation, tc.out_q.0, tc.out_q.1, lo, hi);
        for_each_index(&out_shape, |i| {
            let c = i[3];
            let fs = tc.filter_scales[if tc.filter_scales.len() == 1 { 0 } else { c }];
            let (m, s) = quantize_multiplier(f64::from(tc.in_q.0) * f64::from(fs) / f64::from(tc.out_q.0));
            let mut acc = 0i64;
            tc.gather(&xs, &ws, i, |a, w| acc += (a - i64::from(tc.in_q.1)) * w);
            let v = if tc.dtype == T::INT8 {
                let bias = if tc.bias { i32s(&b)[c] } else { 0 };
                multiply_by_quantized_multiplier((acc as i32).wrapping_add(bias), m, s) + tc.out_q.1
            } else {
                let bias = if tc.bias { i64::from_le_bytes(b[c * 8..c * 8 + 8].try_into().unwrap()) } else { 0 };
                multiply_by_quantized_multiplier_i64(acc + bias, m, s)
            };
            want.push(i64::from(v.clamp(lo, hi)));
        });
        prop_assert_eq!(wide(tc.dtype, &got[0]), want);
    }
}

fn small_tc(dtype: T) -> Tc {
    Tc {
        dtype,
        batches: 1,
        out_hw: (4, 4),
        in_c: 2,
        out_c: 3,
        filter: (3, 3),
        stride: (2, 2),
        padding: Padding::SAME,
        activation: Act::NONE,
        in_q: (0.05, 0),
        out_q: (0.1, 0),
        filter_scales: vec![0.01],
        bias: true,
    }
}

#[test]
fn transpose_conv_hand_checked_int8() {
    // 1x1 input of 3 (zero point 1 → 2), 2x2 filter [1, 2, 3, 4], stride 1
    // VALID onto 2x2; bias 2; scales 0.5 · 1 / 1 → ((2·w + 2) · 0.5) + 5.
    let tc = Tc {
        dtype: T::INT8,
        batches: 1,
        out_hw: (2, 2),
        in_c: 1,
        out_c: 1,
        filter: (2, 2),
        stride: (1, 1),
        padding: Padding::VALID,
        activation: Act::NONE,
        in_q: (0.5, 1),
        out_q: (1.0, 5),
        filter_scales: vec![1.0],
        bias: true,
    };
    let got = run(&tc.model(&[1, 2, 3, 4], &i32_bytes(&[2])), &[&[3]]).unwrap();
    assert_eq!(i8s(&got[0]), [7, 8, 9, 10]);
}

#[test]
fn transpose_conv_refuses_bad_models() {
    let zeros = |n: usize| vec![0u8; n];
    let tc = small_tc(T::INT8);
    // int8 with an int64 bias.
    let mut bad = tc.clone();
    bad.dtype = T::INT16;
    let model = {
        let mut t = tc.clone();
        t.dtype = T::INT8;
        // Build an int8 model, then swap in the int16 bias type by hand.
        let mut w = ModelWriter::new();
        let shape = w.constant("shape", T::INT32, &[4], &i32_bytes(&t.output_shape()));
        let f = w.constant("filter", T::INT8, &t.filter_shape(), &zeros(54));
        let x = w.input("x", T::INT8, &t.input_shape());
        let b = w.constant("bias", T::INT64, &[3], &zeros(24));
        let y = w.output("y", T::INT8, &t.output_shape());
        w.quantize(x, 0.05, 0)
            .quantize(y, 0.1, 0)
            .quantize(f, 0.01, 0);
        let opts = Options::TransposeConv {
            padding: Padding::SAME,
            stride: (2, 2),
            activation: Act::NONE,
        };
        w.op(
            Op::TRANSPOSE_CONV,
            &[Some(shape), Some(f), Some(x), Some(b)],
            &[y],
            opts,
        );
        w.finish()
    };
    assert_eq!(
        kernel_error(&model, &[&zeros(8)]),
        KernelError::UnsupportedType {
            tensor: 3,
            dtype: T::INT64.0
        }
    );
    // int16 with a non-zero zero point.
    bad.in_q.1 = 3;
    assert_eq!(
        kernel_error(&bad.model(&zeros(54), &zeros(24)), &[&zeros(16)]),
        KernelError::UnsupportedParameter {
            what: "int16 TRANSPOSE_CONV needs zero points of 0"
        }
    );
    // A filter whose channels do not match the input's.
    let mut bad = small_tc(T::FLOAT32);
    bad.in_c = 1;
    let mut w = ModelWriter::new();
    let shape = w.constant("shape", T::INT32, &[4], &i32_bytes(&bad.output_shape()));
    let f = w.constant("filter", T::FLOAT32, &[3, 3, 3, 2], &zeros(216));
    let x = w.input("x", T::FLOAT32, &bad.input_shape());
    let y = w.output("y", T::FLOAT32, &bad.output_shape());
    let opts = Options::TransposeConv {
        padding: Padding::SAME,
        stride: (2, 2),
        activation: Act::NONE,
    };
    w.op(
        Op::TRANSPOSE_CONV,
        &[Some(shape), Some(f), Some(x)],
        &[y],
        opts.clone(),
    );
    assert_eq!(
        kernel_error(&w.finish(), &[&zeros(16)]),
        KernelError::ShapeMismatch { tensor: 1 }
    );
    // An input that is not what a convolution of the output would give.
    let mut bad = small_tc(T::FLOAT32);
    bad.out_hw = (7, 7); // 7 / 2 → 4, not the 2x2 input below
    let mut w = ModelWriter::new();
    let shape = w.constant("shape", T::INT32, &[4], &i32_bytes(&bad.output_shape()));
    let f = w.constant("filter", T::FLOAT32, &bad.filter_shape(), &zeros(216));
    let x = w.input("x", T::FLOAT32, &[1, 2, 2, 2]);
    let y = w.output("y", T::FLOAT32, &bad.output_shape());
    w.op(
        Op::TRANSPOSE_CONV,
        &[Some(shape), Some(f), Some(x)],
        &[y],
        opts,
    );
    assert_eq!(
        kernel_error(&w.finish(), &[&zeros(32)]),
        KernelError::ShapeMismatch { tensor: 2 }
    );
    // Missing options.
    let mut w = ModelWriter::new();
    let shape = w.constant("shape", T::INT32, &[4], &i32_bytes(&[1, 4, 4, 3]));
    let f = w.constant("filter", T::FLOAT32, &[3, 3, 3, 2], &zeros(216));
    let x = w.input("x", T::FLOAT32, &[1, 2, 2, 2]);
    let y = w.output("y", T::FLOAT32, &[1, 4, 4, 3]);
    w.op(
        Op::TRANSPOSE_CONV,
        &[Some(shape), Some(f), Some(x)],
        &[y],
        Options::None,
    );
    assert_eq!(
        kernel_error(&w.finish(), &[&zeros(32)]),
        KernelError::MissingOptions
    );
}

// ------------------------------------------------------ int16x8 CONV_2D

fn conv16_model(
    input: [i32; 4],
    filter: [i32; 4],
    output: [i32; 4],
    weights: &[u8],
    bias: Option<(T, Vec<u8>)>,
    scales: (f32, &[f32], f32, i64),
    opts: Options,
) -> Vec<u8> {
    let mut w = ModelWriter::new();
    let x = w.input("x", T::INT16, &input);
    let f = w.constant("filter", T::INT8, &filter, weights);
    let b = bias.map(|(t, bytes)| w.constant("bias", t, &[filter[0]], &bytes));
    let y = w.output("y", T::INT16, &output);
    w.quantize(x, scales.0, 0).quantize(y, scales.2, scales.3);
    w.quantize_per_channel(f, scales.1, &vec![0; scales.1.len()], 0);
    w.op(Op::CONV_2D, &[Some(x), Some(f), b], &[y], opts);
    w.finish()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    #[test]
    fn int16_conv_matches_reference(
        (n, ih, iw, ic, oc) in (1i32..=2, 1i32..=7, 1i32..=7, 1i32..=4, 1i32..=4),
        (fh, fw, sh, sw) in (1i32..=3, 1i32..=3, 1i32..=2, 1i32..=2),
        same in any::<bool>(),
        activation in prop_oneof![Just(Act::NONE), Just(Act::RELU), Just(Act::RELU6)],
        (si, so) in (0.0001f32..0.01, 0.0001f32..0.05),
        fscales in proptest::collection::vec(0.001f32..0.05, 4),
        per_channel in any::<bool>(), with_bias in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let padding = if same { Padding::SAME } else { Padding::VALID };
        let (ih, iw) = if same { (ih, iw) } else { (ih.max(fh), iw.max(fw)) };
        let (oh, ph) = conv_axis(padding, ih, fh, sh);
        let (ow, pw) = conv_axis(padding, iw, fw, sw);
        let (input, filter, output) = ([n, ih, iw, ic], [oc, fh, fw, ic], [n, oh, ow, oc]);
        let scales = &fscales[..if per_channel { oc as usize } else { 1 }];
        let mut rng = Rng(seed);
        let x = rng.tensor(T::INT16, elements(&input), 0.0, 0.0);
        let wts = rng.tensor(T::INT8, elements(&filter), 0.0, 0.0);
        let bias: Vec<i64> = (0..oc).map(|_| (rng.next_u64() as i64) >> 42).collect();
        let bias_bytes: Vec<u8> = bias.iter().flat_map(|v| v.to_le_bytes()).collect();
        let opts = Options::Conv2D { padding, stride: (sw, sh), dilation: (1, 1), activation };
        let model = conv16_model(input, filter, output, &wts,
            with_bias.then_some((T::INT64, bias_bytes)), (si, scales, so, 0), opts);
        let got = run(&model, &[&x]).unwrap();
        let (xs, ws) = (i16s(&x), i8s(&wts));
        let (lo, hi) = act_range(activation, so, 0, -32768, 32767);
        let mut want = Vec::new();
        for_each_index(&output, |i| {
            let (b, oy, ox, c) = (i[0] as i32, i[1] as i32, i[2] as i32, i[3] as i32);
            let mut acc = 0i64;
            for ky in 0..fh {
                for kx in 0..fw {
                    let (y, x) = (oy * sh - ph + ky, ox * sw - pw + kx);
                    if y < 0 || y >= ih || x < 0 || x >= iw {
                        continue;
                    }
                    for k in 0..ic {
                        let xi = ((b * ih + y) * iw + x) * ic + k;
                        let wi = ((c * fh + ky) * fw + kx) * ic + k;
                        acc += i64::from(xs[xi as usize]) * i64::from(ws[wi as usize]);
                    }
                }
            }
            if with_bias {
                acc += bias[c as usize];
            }
            let fs = scales[if scales.len() == 1 { 0 } else { c as usize }];
            let (m, s) = quantize_multiplier(f64::from(si) * f64::from(fs) / f64::from(so));
            want.push(multiply_by_quantized_multiplier_i64(acc, m, s).clamp(lo, hi) as i16);
        });
        prop_assert_eq!(i16s(&got[0]), want);
    }
}

#[test]
fn int16_conv_refuses_bad_models() {
    let opts = Options::Conv2D {
        padding: Padding::VALID,
        stride: (1, 1),
        dilation: (1, 1),
        activation: Act::NONE,
    };
    let shapes = ([1, 2, 2, 1], [1, 1, 1, 1], [1, 2, 2, 1]);
    let x = [0u8; 8];
    // int32 bias (hilt takes int16x8's int64 bias only).
    let model = conv16_model(
        shapes.0,
        shapes.1,
        shapes.2,
        &[1],
        Some((T::INT32, vec![0; 4])),
        (0.01, &[0.01], 0.01, 0),
        opts.clone(),
    );
    assert_eq!(
        kernel_error(&model, &[&x]),
        KernelError::UnsupportedType {
            tensor: 2,
            dtype: T::INT32.0
        }
    );
    // A non-zero output zero point.
    let model = conv16_model(
        shapes.0,
        shapes.1,
        shapes.2,
        &[1],
        None,
        (0.01, &[0.01], 0.01, 5),
        opts.clone(),
    );
    assert_eq!(
        kernel_error(&model, &[&x]),
        KernelError::UnsupportedParameter {
            what: "int16 convolution needs activation zero points of 0"
        }
    );
    // Per-channel scales that do not match the output channels.
    let model = conv16_model(
        shapes.0,
        shapes.1,
        shapes.2,
        &[1],
        None,
        (0.01, &[0.01, 0.02], 0.01, 0),
        opts,
    );
    assert_eq!(
        kernel_error(&model, &[&x]),
        KernelError::ShapeMismatch { tensor: 1 }
    );
}

// --------------------------------------------- int16x8 DEPTHWISE_CONV_2D

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    #[test]
    fn int16_depthwise_matches_reference(
        // Up to 120 output channels: past the kernel's 64-channel blocks,
        // with and without a channel multiplier.
        (n, ih, iw, ic, m) in (1i32..=2, 1i32..=7, 1i32..=7, prop_oneof![1i32..=4, 20i32..=40], 1i32..=3),
        (fh, fw, sh, sw) in (1i32..=3, 1i32..=3, 1i32..=2, 1i32..=2),
        same in any::<bool>(),
        activation in prop_oneof![Just(Act::NONE), Just(Act::RELU), Just(Act::RELU6)],
        (si, so) in (0.0001f32..0.01, 0.0001f32..0.05),
        fscales in proptest::collection::vec(0.001f32..0.05, 120),
        per_channel in any::<bool>(), with_bias in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let padding = if same { Padding::SAME } else { Padding::VALID };
        let (ih, iw) = if same { (ih, iw) } else { (ih.max(fh), iw.max(fw)) };
        let oc = ic * m;
        let (oh, ph) = conv_axis(padding, ih, fh, sh);
        let (ow, pw) = conv_axis(padding, iw, fw, sw);
        let (input, filter, output) = ([n, ih, iw, ic], [1, fh, fw, oc], [n, oh, ow, oc]);
        let scales = &fscales[..if per_channel { oc as usize } else { 1 }];
        let mut rng = Rng(seed);
        let x = rng.tensor(T::INT16, elements(&input), 0.0, 0.0);
        let wts = rng.tensor(T::INT8, elements(&filter), 0.0, 0.0);
        let bias: Vec<i64> = (0..oc).map(|_| (rng.next_u64() as i64) >> 42).collect();
        let bias_bytes: Vec<u8> = bias.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut w = ModelWriter::new();
        let xt = w.input("x", T::INT16, &input);
        let ft = w.constant("filter", T::INT8, &filter, &wts);
        let bt = with_bias.then(|| w.constant("bias", T::INT64, &[oc], &bias_bytes));
        let yt = w.output("y", T::INT16, &output);
        w.quantize(xt, si, 0).quantize(yt, so, 0);
        w.quantize_per_channel(ft, scales, &vec![0; scales.len()], 3);
        let opts = Options::DepthwiseConv2D {
            padding, stride: (sw, sh), dilation: (1, 1), depth_multiplier: m, activation,
        };
        w.op(Op::DEPTHWISE_CONV_2D, &[Some(xt), Some(ft), bt], &[yt], opts);
        let got = run(&w.finish(), &[&x]).unwrap();
        let (xs, ws) = (i16s(&x), i8s(&wts));
        let (lo, hi) = act_range(activation, so, 0, -32768, 32767);
        let mut want = Vec::new();
        for_each_index(&output, |i| {
            let (b, oy, ox, c) = (i[0] as i32, i[1] as i32, i[2] as i32, i[3] as i32);
            let mut acc = 0i64;
            for ky in 0..fh {
                for kx in 0..fw {
                    let (y, x) = (oy * sh - ph + ky, ox * sw - pw + kx);
                    if y < 0 || y >= ih || x < 0 || x >= iw {
                        continue;
                    }
                    let xi = ((b * ih + y) * iw + x) * ic + c / m;
                    let wi = (ky * fw + kx) * oc + c;
                    acc += i64::from(xs[xi as usize]) * i64::from(ws[wi as usize]);
                }
            }
            if with_bias {
                acc += bias[c as usize];
            }
            let fs = scales[if scales.len() == 1 { 0 } else { c as usize }];
            let (mu, s) = quantize_multiplier(f64::from(si) * f64::from(fs) / f64::from(so));
            want.push(multiply_by_quantized_multiplier_i64(acc, mu, s).clamp(lo, hi) as i16);
        });
        prop_assert_eq!(i16s(&got[0]), want);
    }
}

// ------------------------------------------------------- int16 LOGISTIC

fn logistic16_model(input_scale: f32, output: (f32, i64)) -> Vec<u8> {
    single_op(
        Op::LOGISTIC,
        &[(i16q(input_scale, 0), &[64])],
        (i16q(output.0, output.1), &[64]),
        Options::None,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// TFLM's table form is within a few Q0.15 steps of the true sigmoid
    /// (the table is Q16 and interpolated linearly over steps of 1/24).
    #[test]
    fn int16_logistic_is_close_to_sigmoid(
        scale in prop_oneof![Just(1.0f32 / 4096.0), 0.00005f32..0.002],
        seed in any::<u64>(),
    ) {
        let x = Rng(seed).tensor(T::INT16, 64, 0.0, 0.0);
        let got = i16s(&run(&logistic16_model(scale, (1.0 / 32768.0, 0)), &[&x]).unwrap()[0]);
        for (&v, &y) in i16s(&x).iter().zip(&got) {
            let real = 1.0 / (1.0 + (-(f64::from(v) * f64::from(scale))).exp());
            let want = (real * 32768.0).round().min(32767.0);
            prop_assert!((f64::from(y) - want).abs() <= 4.0, "x {v} scale {scale}: {y} vs {want}");
        }
    }
}

#[test]
fn int16_logistic_hand_checked_and_refusals() {
    // sigmoid(0) = 0.5 = 16384 in Q0.15; far out saturates to 32767 and, on
    // the negative side, to TFLM's `(2^25 − (0x7FFF << 10) + 2^9 − 1) >> 10 = 1`.
    let mut x = [0i16; 64];
    (x[1], x[2]) = (i16::MIN, i16::MAX);
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let got = i16s(
        &run(
            &logistic16_model(1.0 / 1024.0, (1.0 / 32768.0, 0)),
            &[&bytes],
        )
        .unwrap()[0],
    );
    assert_eq!(&got[..3], &[16384, 1, 32767]);
    // Output not Q0.15.
    assert_eq!(
        kernel_error(&logistic16_model(0.001, (1.0 / 16384.0, 0)), &[&bytes]),
        KernelError::UnsupportedParameter {
            what: "LOGISTIC int16 output must be scaled 2^-15 with zero point 0"
        }
    );
    // Input zero point not 0.
    let model = single_op(
        Op::LOGISTIC,
        &[(i16q(0.001, 4), &[64])],
        (i16q(1.0 / 32768.0, 0), &[64]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&model, &[&bytes]),
        KernelError::UnsupportedParameter {
            what: "LOGISTIC int16 input zero point must be 0"
        }
    );
}

// --------------------------------------------------- int16 SOFTMAX

fn softmax16_model(shape: &[i32], input_scale: f32, output: (f32, i64), beta: f32) -> Vec<u8> {
    single_op(
        Op::SOFTMAX,
        &[(i16q(input_scale, 0), shape)],
        (i16q(output.0, output.1), shape),
        Options::Softmax { beta },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// TFLM's table form is within a few Q0.15 steps of the true softmax
    /// (exp below e^-10 counts as 0; both tables are interpolated).
    #[test]
    fn int16_softmax_is_close_to_softmax(
        (rows, depth) in (1i32..=3, 1i32..=40),
        scale in 0.0001f32..0.001,
        beta in prop_oneof![Just(1.0f32), 0.5f32..2.0],
        seed in any::<u64>(),
    ) {
        let shape = [rows, depth];
        let x = Rng(seed).tensor(T::INT16, elements(&shape), 0.0, 0.0);
        let model = softmax16_model(&shape, scale, (1.0 / 32768.0, 0), beta);
        let got = i16s(&run(&model, &[&x]).unwrap()[0]);
        let xs = i16s(&x);
        for (row, out) in xs.chunks(depth as usize).zip(got.chunks(depth as usize)) {
            let max = *row.iter().max().unwrap();
            let e: Vec<f64> = row.iter()
                .map(|&v| (f64::from(i32::from(v) - i32::from(max)) * f64::from(scale * beta)).exp())
                .collect();
            let sum: f64 = e.iter().sum();
            for (&y, &ev) in out.iter().zip(&e) {
                let want = (ev / sum * 32768.0).min(32767.0);
                // Each exp is off by up to ~2 Q0.15 steps (and e^-10 is
                // dropped), so the row's sum — and with it every output,
                // relatively — by up to 2·depth steps; the reciprocal's
                // table adds its own few.
                let tolerance = 8.0 + want * (0.002 + 2.0 * f64::from(depth) / 32768.0);
                prop_assert!((f64::from(y) - want).abs() <= tolerance, "{y} vs {want}");
            }
        }
    }
}

#[test]
fn int16_softmax_hand_checked_and_refusals() {
    // Four equal inputs: a quarter each, 8192 in Q0.15.
    let x = [0u8; 8];
    let got = i16s(
        &run(
            &softmax16_model(&[1, 4], 0.001, (1.0 / 32768.0, 0), 1.0),
            &[&x],
        )
        .unwrap()[0],
    );
    assert_eq!(got, [8192; 4]);
    // One input: all of it.
    let got = i16s(
        &run(
            &softmax16_model(&[1, 1], 0.001, (1.0 / 32768.0, 0), 1.0),
            &[&[7, 1]],
        )
        .unwrap()[0],
    );
    assert_eq!(got, [32767]);
    assert_eq!(
        kernel_error(
            &softmax16_model(&[1, 4], 0.001, (1.0 / 65536.0, 0), 1.0),
            &[&x]
        ),
        KernelError::UnsupportedParameter {
            what: "SOFTMAX int16 output must be scale 1/32768, zero point 0"
        }
    );
}
