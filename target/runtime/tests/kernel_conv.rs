//! CONV_2D: hand-checked values, property tests against TFLM's reference
//! loop (`conv_family::conv_sums`), and the errors prepare reports.

mod conv_family;

use conv_family::*;
use hilt_runtime::kernels::KernelError;
use hilt_runtime::schema::{
    ActivationFunctionType as Act, BuiltinOperator as Op, Padding, TensorType as T,
};
use hilt_runtime::writer::Options;
use proptest::prelude::*;

fn options(window: &Window, act: Act) -> Options {
    Options::Conv2D {
        padding: window.padding,
        stride: (window.stride.1 as i32, window.stride.0 as i32),
        dilation: (window.dilation.1 as i32, window.dilation.0 as i32),
        activation: act,
    }
}

const SAME: Window = Window {
    padding: Padding::SAME,
    stride: (1, 1),
    dilation: (1, 1),
};

#[test]
fn float_3x3_same_sums_the_taps_inside() {
    // 3×3 input 1..9, all-ones 3×3 filter, bias 0.5: each output is the sum
    // of its neighbourhood, padded taps skipped.
    let input: Vec<f32> = (1..=9).map(|v| v as f32).collect();
    let bytes = one_op(
        Op::CONV_2D,
        options(&SAME, Act::NONE),
        T::FLOAT32,
        &[1, 3, 3, 1],
        None,
        &[1, 3, 3, 1],
        Data::F32(vec![1.0; 9]),
        None,
        Some((Data::F32(vec![0.5]), None)),
        &[1, 3, 3, 1],
        None,
    );
    let out = as_f32(&run(&bytes, &hilt_runtime::writer::f32_bytes(&input)).unwrap());
    let want = [12.0, 21.0, 16.0, 27.0, 45.0, 33.0, 24.0, 39.0, 28.0].map(|v: f32| v + 0.5);
    assert_eq!(out, want);
}

#[test]
fn int8_hand_checked_with_offsets_and_per_channel_scales() {
    // A 1×2×2×2 input under a 2×2 VALID filter: one output pixel, every tap
    // inside. Input zero point -1, so x + 1 is what multiplies.
    let input: Vec<i8> = vec![1, 2, 3, 4, 5, 6, 7, 8];
    // Channel 0 weights all 1, channel 1 alternate 1, -1.
    let filter: Vec<i8> = vec![1, 1, 1, 1, 1, 1, 1, 1, 1, -1, 1, -1, 1, -1, 1, -1];
    let window = Window {
        padding: Padding::VALID,
        ..SAME
    };
    let bytes = one_op(
        Op::CONV_2D,
        options(&window, Act::NONE),
        T::INT8,
        &[1, 2, 2, 2],
        Some(Q::tensor(0.5, -1)),
        &[2, 2, 2, 2],
        Data::I8(filter),
        Some(Q::channels(vec![1.0, 0.25], 0)),
        Some((
            Data::I32(vec![10, -3]),
            Some(Q::channels(vec![0.5, 0.125], 0)),
        )),
        &[1, 1, 1, 2],
        Some(Q::tensor(1.0, 3)),
    );
    // Σ (x+1) = 2+…+9 = 44; acc0 = 54, × 0.5·1.0/1.0 = 27, + 3 = 30.
    // Σ ±(x+1) = (2-3)+(4-5)+(6-7)+(8-9) = -4; acc1 = -7, × 0.125 = -0.875 → -1, + 3 = 2.
    let out = as_i8(&run(&bytes, &i8_bytes(&input)).unwrap());
    assert_eq!(out, vec![30, 2]);
}

#[test]
fn int8_relu6_clamps_to_the_quantised_range() {
    // scale 0.1, zero point -128: relu6 → [-128, -68].
    let bytes = one_op(
        Op::CONV_2D,
        options(&SAME, Act::RELU6),
        T::INT8,
        &[1, 1, 3, 1],
        Some(Q::tensor(1.0, 0)),
        &[1, 1, 1, 1],
        Data::I8(vec![1]),
        Some(Q::tensor(1.0, 0)),
        None,
        &[1, 1, 3, 1],
        Some(Q::tensor(0.1, -128)),
    );
    // Inputs -5, 3, 100 → real -5, 3, 100 → q -178, -98, 872 → clamp.
    let out = as_i8(&run(&bytes, &i8_bytes(&[-5, 3, 100])).unwrap());
    assert_eq!(out, vec![-128, -98, -68]);
}

/// A random CONV_2D case.
#[derive(Debug, Clone)]
struct Case {
    input: [usize; 4],
    filter: [usize; 4],
    window: Window,
    act: Act,
    bias: bool,
    per_channel: bool,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        (1usize..=2, 1usize..=9, 1usize..=9),
        (1usize..=3, 1usize..=9, 1usize..=4, 1usize..=4),
        (
            any::<bool>(),
            1usize..=3,
            1usize..=3,
            1usize..=2,
            1usize..=2,
        ),
        (0usize..4, any::<bool>(), any::<bool>(), any::<u64>()),
    )
        .prop_map(
            |(
                (b, h, w),
                (groups, fpg_c, fh, fw),
                (same, sh, sw, dh, dw),
                (act, bias, pc, seed),
            )| {
                let mut lcg = Lcg(seed);
                // Up to 12 channels: filter rows both shorter and longer than
                // the im2col threshold (32 values).
                let filter_c = 1 + (lcg.next() % 12) as usize;
                let oc = groups * fpg_c;
                Case {
                    input: [b, h, w, filter_c * groups],
                    filter: [oc, fh, fw, filter_c],
                    window: Window {
                        padding: if same { Padding::SAME } else { Padding::VALID },
                        stride: (sh, sw),
                        dilation: (dh, dw),
                    },
                    act: ACTIVATIONS[act],
                    bias,
                    per_channel: pc,
                    seed,
                }
            },
        )
        .prop_filter("empty output", |c| {
            let (oh, ow) = out_hw(&c.window, c.input, c.filter[1], c.filter[2]);
            oh > 0 && ow > 0
        })
}

fn check_int8(c: &Case) {
    let mut lcg = Lcg(c.seed);
    let [b, _, _, _] = c.input;
    let oc = c.filter[0];
    let (oh, ow) = out_hw(&c.window, c.input, c.filter[1], c.filter[2]);
    let input = lcg.i8s(c.input.iter().product());
    let filter = lcg.i8s(c.filter.iter().product());
    let bias: Vec<i32> = (0..oc).map(|_| lcg.i32_in(-20_000, 20_000)).collect();
    let in_zp = lcg.i32_in(-128, 127);
    let out_zp = lcg.i32_in(-128, 127);
    let in_scale = 0.01 + (lcg.next() % 100) as f32 / 1000.0;
    let out_scale = 0.05 + (lcg.next() % 100) as f32 / 100.0;
    let scales: Vec<f32> = if c.per_channel {
        (0..oc)
            .map(|_| 0.001 + (lcg.next() % 100) as f32 / 5000.0)
            .collect()
    } else {
        vec![0.004]
    };
    let shape = |s: [usize; 4]| s.map(|v| v as i32);
    let bytes = one_op(
        Op::CONV_2D,
        options(&c.window, c.act),
        T::INT8,
        &shape(c.input),
        Some(Q::tensor(in_scale, in_zp.into())),
        &shape(c.filter),
        Data::I8(filter.clone()),
        Some(Q::channels(scales.clone(), 0)),
        c.bias.then(|| (Data::I32(bias.clone()), None)),
        &[b as i32, oh as i32, ow as i32, oc as i32],
        Some(Q::tensor(out_scale, out_zp.into())),
    );
    let got = as_i8(&run(&bytes, &i8_bytes(&input)).unwrap());
    let rq = Requant::per_channel((in_scale, in_zp), &scales, (out_scale, out_zp), oc, c.act);
    let sums = conv_sums(
        &input,
        c.input,
        &filter,
        c.filter,
        &c.window,
        rq.input_offset,
    );
    let want = finish_i8(&sums, c.bias.then_some(&bias[..]), &rq, oc);
    assert_eq!(got, want, "{c:?}");
}

fn check_float(c: &Case) {
    let mut lcg = Lcg(c.seed);
    let [b, _, _, _] = c.input;
    let oc = c.filter[0];
    let (oh, ow) = out_hw(&c.window, c.input, c.filter[1], c.filter[2]);
    let input = lcg.f32s(c.input.iter().product());
    let filter = lcg.f32s(c.filter.iter().product());
    let bias = lcg.f32s(oc);
    let shape = |s: [usize; 4]| s.map(|v| v as i32);
    let bytes = one_op(
        Op::CONV_2D,
        options(&c.window, c.act),
        T::FLOAT32,
        &shape(c.input),
        None,
        &shape(c.filter),
        Data::F32(filter.clone()),
        None,
        c.bias.then(|| (Data::F32(bias.clone()), None)),
        &[b as i32, oh as i32, ow as i32, oc as i32],
        None,
    );
    let got = as_f32(&run(&bytes, &hilt_runtime::writer::f32_bytes(&input)).unwrap());
    let sums = conv_sums(&input, c.input, &filter, c.filter, &c.window, 0);
    let want = finish_f32(&sums, c.bias.then_some(&bias[..]), c.act, oc);
    assert_f32_exact(&got, &want);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn int8_matches_tflm_reference(c in case()) {
        check_int8(&c);
    }

    #[test]
    fn float_matches_tflm_reference_bit_for_bit(c in case()) {
        check_float(&c);
    }
}

#[test]
fn pointwise_and_large_channel_counts_match_reference() {
    // Shapes the property test rarely reaches: 1×1 with strides, many
    // channels (several blocks of four plus a remainder), 16-lane runs.
    for (input, filter, stride) in [
        ([1, 6, 5, 37], [19, 1, 1, 37], (1, 1)),
        ([2, 7, 7, 16], [8, 1, 1, 16], (2, 2)),
        ([1, 8, 8, 20], [13, 3, 3, 20], (1, 1)),
        ([1, 9, 7, 3], [34, 3, 3, 3], (2, 2)),
        ([1, 5, 12, 33], [6, 2, 5, 33], (1, 3)),
    ] {
        for (i, act) in ACTIVATIONS.into_iter().enumerate() {
            let c = Case {
                input,
                filter,
                window: Window {
                    padding: if i % 2 == 0 {
                        Padding::SAME
                    } else {
                        Padding::VALID
                    },
                    stride,
                    dilation: (1, 1),
                },
                act,
                bias: i != 3,
                per_channel: i % 2 == 1,
                seed: 77 + i as u64,
            };
            check_int8(&c);
            check_float(&c);
        }
    }
}

fn int8_model(filter_q: Q, bias: Option<(Data, Option<Q>)>, out_shape: &[i32]) -> Vec<u8> {
    one_op(
        Op::CONV_2D,
        options(&SAME, Act::NONE),
        T::INT8,
        &[1, 3, 3, 2],
        Some(Q::tensor(0.5, 0)),
        &[2, 3, 3, 2],
        Data::I8(vec![1; 36]),
        Some(filter_q),
        bias,
        out_shape,
        Some(Q::tensor(1.0, 0)),
    )
}

#[test]
fn prepare_refuses_what_it_cannot_compute() {
    let input = [0u8; 18];
    // A wrong output height.
    let bytes = int8_model(Q::tensor(1.0, 0), None, &[1, 2, 3, 2]);
    assert!(matches!(
        kernel_error(&bytes, &input),
        KernelError::ShapeMismatch { .. }
    ));
    // Three scales for two channels.
    let bytes = int8_model(Q::channels(vec![1.0, 1.0, 1.0], 0), None, &[1, 3, 3, 2]);
    assert!(matches!(
        kernel_error(&bytes, &input),
        KernelError::ShapeMismatch { .. }
    ));
    // A float bias on an int8 convolution.
    let bytes = int8_model(
        Q::tensor(1.0, 0),
        Some((Data::F32(vec![0.0, 0.0]), None)),
        &[1, 3, 3, 2],
    );
    assert!(matches!(
        kernel_error(&bytes, &input),
        KernelError::UnsupportedType { .. }
    ));
    // No quantisation on the filter.
    let bytes = one_op(
        Op::CONV_2D,
        options(&SAME, Act::NONE),
        T::INT8,
        &[1, 3, 3, 2],
        Some(Q::tensor(0.5, 0)),
        &[2, 3, 3, 2],
        Data::I8(vec![1; 36]),
        None,
        None,
        &[1, 3, 3, 2],
        Some(Q::tensor(1.0, 0)),
    );
    assert!(matches!(
        kernel_error(&bytes, &input),
        KernelError::MissingQuantization { .. }
    ));
    // Float weights under an int8 input.
    let bytes = one_op(
        Op::CONV_2D,
        options(&SAME, Act::NONE),
        T::INT8,
        &[1, 3, 3, 2],
        Some(Q::tensor(0.5, 0)),
        &[2, 3, 3, 2],
        Data::F32(vec![1.0; 36]),
        None,
        None,
        &[1, 3, 3, 2],
        Some(Q::tensor(1.0, 0)),
    );
    assert!(matches!(
        kernel_error(&bytes, &input),
        KernelError::UnsupportedType { .. }
    ));
    // No options table.
    let bytes = one_op(
        Op::CONV_2D,
        Options::None,
        T::FLOAT32,
        &[1, 3, 3, 1],
        None,
        &[1, 3, 3, 1],
        Data::F32(vec![1.0; 9]),
        None,
        None,
        &[1, 3, 3, 1],
        None,
    );
    assert_eq!(
        kernel_error(&bytes, &[0u8; 36]),
        KernelError::MissingOptions
    );
    // A zero stride.
    let bytes = one_op(
        Op::CONV_2D,
        Options::Conv2D {
            padding: Padding::SAME,
            stride: (0, 1),
            dilation: (1, 1),
            activation: Act::NONE,
        },
        T::FLOAT32,
        &[1, 3, 3, 1],
        None,
        &[1, 3, 3, 1],
        Data::F32(vec![1.0; 9]),
        None,
        None,
        &[1, 3, 3, 1],
        None,
    );
    assert!(matches!(
        kernel_error(&bytes, &[0u8; 36]),
        KernelError::UnsupportedParameter { .. }
    ));
}
