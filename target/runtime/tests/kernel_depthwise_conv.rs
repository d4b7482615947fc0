//! DEPTHWISE_CONV_2D: hand-checked values, property tests against TFLM's
//! reference loop (`conv_family::depthwise_sums`), and prepare's errors.

mod conv_family;

use conv_family::*;
use hilt_runtime::kernels::KernelError;
use hilt_runtime::schema::{
    ActivationFunctionType as Act, BuiltinOperator as Op, Padding, TensorType as T,
};
use hilt_runtime::writer::{Options, f32_bytes};
use proptest::prelude::*;

fn options(window: &Window, multiplier: usize, act: Act) -> Options {
    Options::DepthwiseConv2D {
        padding: window.padding,
        stride: (window.stride.1 as i32, window.stride.0 as i32),
        dilation: (window.dilation.1 as i32, window.dilation.0 as i32),
        depth_multiplier: multiplier as i32,
        activation: act,
    }
}

const SAME: Window = Window {
    padding: Padding::SAME,
    stride: (1, 1),
    dilation: (1, 1),
};

#[test]
fn float_channels_are_filtered_separately() {
    // 2×2 input, two channels: channel 0 = 1, 2, 3, 4; channel 1 = 10, 20, 30, 40.
    // A 2×2 SAME filter (pads one row and column after): channel 0 weights
    // all 1, channel 1 weights 1, 0, 0, 0 (the top-left tap only).
    let input = [1.0, 10.0, 2.0, 20.0, 3.0, 30.0, 4.0, 40.0];
    let filter = [1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0];
    let bytes = one_op(
        Op::DEPTHWISE_CONV_2D,
        options(&SAME, 1, Act::NONE),
        T::FLOAT32,
        &[1, 2, 2, 2],
        None,
        &[1, 2, 2, 2],
        Data::F32(filter.to_vec()),
        None,
        Some((Data::F32(vec![0.0, 0.5]), None)),
        &[1, 2, 2, 2],
        None,
    );
    let out = as_f32(&run(&bytes, &f32_bytes(&input)).unwrap());
    assert_eq!(out, [10.0, 10.5, 6.0, 20.5, 7.0, 30.5, 4.0, 40.5]);
}

#[test]
fn int8_depth_multiplier_two_with_border_and_interior() {
    // One input channel, multiplier 2, 3-wide row, 3-tap SAME filter:
    // output 0 and 2 hang over the border, output 1 is interior.
    // Input zero point 2, so x - 2 multiplies; weights [1,1,1] and [0,1,0]
    // interleaved per tap as [tap][channel].
    let bytes = one_op(
        Op::DEPTHWISE_CONV_2D,
        options(&SAME, 2, Act::NONE),
        T::INT8,
        &[1, 1, 3, 1],
        Some(Q::tensor(1.0, 2)),
        &[1, 1, 3, 2],
        Data::I8(vec![1, 0, 1, 1, 1, 0]),
        Some(Q::channels(vec![1.0, 0.5], 3)),
        Some((Data::I32(vec![1, -1]), None)),
        &[1, 1, 3, 2],
        Some(Q::tensor(1.0, -5)),
    );
    // x - 2 = 3, 5, 7.
    // channel 0: [3+5, 3+5+7, 5+7] + 1 = 9, 16, 13 → -5 → 4, 11, 8.
    // channel 1: [3, 5, 7] - 1 = 2, 4, 6 → × 0.5 → 1, 2, 3 → -5 → -4, -3, -2.
    let out = as_i8(&run(&bytes, &i8_bytes(&[5, 7, 9])).unwrap());
    assert_eq!(out, vec![4, -4, 11, -3, 8, -2]);
}

#[derive(Debug, Clone)]
struct Case {
    input: [usize; 4],
    fh: usize,
    fw: usize,
    multiplier: usize,
    window: Window,
    act: Act,
    bias: bool,
    per_channel: bool,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        (1usize..=2, 1usize..=9, 1usize..=9, 1usize..=40),
        (
            1usize..=4,
            1usize..=4,
            prop_oneof![3 => Just(1usize), 1 => 2usize..=4],
        ),
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
            |((b, h, w, c), (fh, fw, m), (same, sh, sw, dh, dw), (act, bias, pc, seed))| Case {
                input: [b, h, w, if m > 1 { c.min(9) } else { c }],
                fh,
                fw,
                multiplier: m,
                window: Window {
                    padding: if same { Padding::SAME } else { Padding::VALID },
                    stride: (sh, sw),
                    dilation: (dh, dw),
                },
                act: ACTIVATIONS[act],
                bias,
                per_channel: pc,
                seed,
            },
        )
        .prop_filter("empty output", |c| {
            let (oh, ow) = out_hw(&c.window, c.input, c.fh, c.fw);
            oh > 0 && ow > 0
        })
}

fn check_int8(c: &Case) {
    let mut lcg = Lcg(c.seed);
    let oc = c.input[3] * c.multiplier;
    let (oh, ow) = out_hw(&c.window, c.input, c.fh, c.fw);
    let input = lcg.i8s(c.input.iter().product());
    let filter = lcg.i8s(c.fh * c.fw * oc);
    let bias: Vec<i32> = (0..oc).map(|_| lcg.i32_in(-20_000, 20_000)).collect();
    let in_zp = lcg.i32_in(-128, 127);
    let out_zp = lcg.i32_in(-128, 127);
    let in_scale = 0.01 + (lcg.next() % 100) as f32 / 1000.0;
    let out_scale = 0.02 + (lcg.next() % 100) as f32 / 200.0;
    let scales: Vec<f32> = if c.per_channel {
        (0..oc)
            .map(|_| 0.001 + (lcg.next() % 100) as f32 / 5000.0)
            .collect()
    } else {
        vec![0.004]
    };
    let shape = c.input.map(|v| v as i32);
    let bytes = one_op(
        Op::DEPTHWISE_CONV_2D,
        options(&c.window, c.multiplier, c.act),
        T::INT8,
        &shape,
        Some(Q::tensor(in_scale, in_zp.into())),
        &[1, c.fh as i32, c.fw as i32, oc as i32],
        Data::I8(filter.clone()),
        Some(Q::channels(scales.clone(), 3)),
        c.bias.then(|| (Data::I32(bias.clone()), None)),
        &[shape[0], oh as i32, ow as i32, oc as i32],
        Some(Q::tensor(out_scale, out_zp.into())),
    );
    let got = as_i8(&run(&bytes, &i8_bytes(&input)).unwrap());
    let rq = Requant::per_channel((in_scale, in_zp), &scales, (out_scale, out_zp), oc, c.act);
    let sums = depthwise_sums(
        &input,
        c.input,
        &filter,
        c.fh,
        c.fw,
        c.multiplier,
        &c.window,
        rq.input_offset,
    );
    let want = finish_i8(&sums, c.bias.then_some(&bias[..]), &rq, oc);
    assert_eq!(got, want, "{c:?}");
}

fn check_float(c: &Case) {
    let mut lcg = Lcg(c.seed);
    let oc = c.input[3] * c.multiplier;
    let (oh, ow) = out_hw(&c.window, c.input, c.fh, c.fw);
    let input = lcg.f32s(c.input.iter().product());
    let filter = lcg.f32s(c.fh * c.fw * oc);
    let bias = lcg.f32s(oc);
    let shape = c.input.map(|v| v as i32);
    let bytes = one_op(
        Op::DEPTHWISE_CONV_2D,
        options(&c.window, c.multiplier, c.act),
        T::FLOAT32,
        &shape,
        None,
        &[1, c.fh as i32, c.fw as i32, oc as i32],
        Data::F32(filter.clone()),
        None,
        c.bias.then(|| (Data::F32(bias.clone()), None)),
        &[shape[0], oh as i32, ow as i32, oc as i32],
        None,
    );
    let got = as_f32(&run(&bytes, &f32_bytes(&input)).unwrap());
    let sums = depthwise_sums(
        &input,
        c.input,
        &filter,
        c.fh,
        c.fw,
        c.multiplier,
        &c.window,
        0,
    );
    let want = finish_f32(&sums, c.bias.then_some(&bias[..]), c.act, oc);
    assert_f32_exact(&got, &want);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

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
fn mobilenet_and_micro_speech_shapes_match_reference() {
    // Shapes of the conformance models: 3×3 stride 1 and 2 over many
    // channels (several 32-channel blocks plus a remainder), and
    // micro_speech's 10×8 filter with multiplier 8 over one channel.
    let cases = [
        ([1, 12, 12, 72], 3, 3, 1, (1, 1), Padding::SAME),
        ([1, 13, 11, 40], 3, 3, 1, (2, 2), Padding::SAME),
        ([1, 7, 7, 33], 3, 3, 1, (1, 1), Padding::VALID),
        ([1, 49, 40, 1], 10, 8, 8, (2, 2), Padding::SAME),
    ];
    for (i, (input, fh, fw, multiplier, stride, padding)) in cases.into_iter().enumerate() {
        let c = Case {
            input,
            fh,
            fw,
            multiplier,
            window: Window {
                padding,
                stride,
                dilation: (1, 1),
            },
            act: ACTIVATIONS[i % 4],
            bias: true,
            per_channel: true,
            seed: 5 + i as u64,
        };
        check_int8(&c);
        check_float(&c);
    }
}

#[test]
fn prepare_refuses_inconsistent_shapes() {
    let model = |filter_shape: &[i32], multiplier: usize, filter_q: Q| {
        let n = filter_shape.iter().product::<i32>() as usize;
        one_op(
            Op::DEPTHWISE_CONV_2D,
            options(&SAME, multiplier, Act::NONE),
            T::INT8,
            &[1, 3, 3, 2],
            Some(Q::tensor(0.5, 0)),
            filter_shape,
            Data::I8(vec![1; n]),
            Some(filter_q),
            None,
            &[1, 3, 3, 4],
            Some(Q::tensor(1.0, 0)),
        )
    };
    let input = [0u8; 18];
    // A filter whose first dimension is not 1.
    let bytes = model(&[2, 3, 3, 2], 2, Q::tensor(1.0, 0));
    assert!(matches!(
        kernel_error(&bytes, &input),
        KernelError::ShapeMismatch { .. }
    ));
    // A depth multiplier the shapes contradict.
    let bytes = model(&[1, 3, 3, 4], 1, Q::tensor(1.0, 0));
    assert!(matches!(
        kernel_error(&bytes, &input),
        KernelError::ShapeMismatch { .. }
    ));
    // Per-channel scales along the wrong axis.
    let bytes = model(&[1, 3, 3, 4], 2, Q::channels(vec![1.0; 4], 0));
    assert!(matches!(
        kernel_error(&bytes, &input),
        KernelError::ShapeMismatch { .. }
    ));
    // The same model with the scales on axis 3 runs.
    let bytes = model(&[1, 3, 3, 4], 2, Q::channels(vec![1.0; 4], 3));
    assert!(run(&bytes, &input).is_ok());
}
