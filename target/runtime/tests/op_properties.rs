//! Property tests: ADD, pooling, SOFTMAX, LOGISTIC, QUANTIZE and DEQUANTIZE
//! on random shapes and parameters against plain reference loops written the
//! way TFLM's reference kernels are (one output element at a time, indices
//! computed from scratch), so hilt's restructured loops (folded broadcasts,
//! hoisted pooling windows, channel blocks, lookup tables) must agree with
//! them exactly.

mod one_op;

use hilt_runtime::kernels::fixed_point::{
    calculate_input_radius, exp_on_negative_values, get_reciprocal, logistic,
    multiply_by_quantized_multiplier, multiply_by_quantized_multiplier_greater_than_one,
    multiply_by_quantized_multiplier_smaller_than_one, preprocess_softmax_scaling,
    quantize_multiplier, quantize_multiplier_smaller_than_one_exp, rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
};
use hilt_runtime::schema::{
    ActivationFunctionType as Act, BuiltinOperator as Op, Padding, TensorType as T,
};
use hilt_runtime::writer::Options;
use one_op::*;
use proptest::prelude::*;

fn act_range_f(act: Act) -> (f32, f32) {
    match act {
        Act::RELU => (0.0, f32::MAX),
        Act::RELU6 => (0.0, 6.0),
        Act::RELU_N1_TO_1 => (-1.0, 1.0),
        _ => (f32::MIN, f32::MAX),
    }
}

fn reference_add_i8(
    a: &[i8],
    b: &[i8],
    shapes: &(Vec<i32>, Vec<i32>, Vec<i32>),
    qa: (f32, i32),
    qb: (f32, i32),
    qo: (f32, i32),
    act: Act,
) -> Vec<i8> {
    let twice_max = 2.0 * f64::from(qa.0.max(qb.0));
    let (m1, s1) = quantize_multiplier_smaller_than_one_exp(f64::from(qa.0) / twice_max).unwrap();
    let (m2, s2) = quantize_multiplier_smaller_than_one_exp(f64::from(qb.0) / twice_max).unwrap();
    let (mo, so) = quantize_multiplier_smaller_than_one_exp(
        twice_max / (f64::from(1 << 20) * f64::from(qo.0)),
    )
    .unwrap();
    let (lo, hi) = act_range_q(act, qo.0, qo.1, -128, 127);
    let mut out = Vec::new();
    for_each_index(&shapes.2, |idx| {
        let x = i32::from(a[broadcast_index(&shapes.0, &shapes.2, idx)]);
        let y = i32::from(b[broadcast_index(&shapes.1, &shapes.2, idx)]);
        let sx = multiply_by_quantized_multiplier_smaller_than_one((x - qa.1) * (1 << 20), m1, s1);
        let sy = multiply_by_quantized_multiplier_smaller_than_one((y - qb.1) * (1 << 20), m2, s2);
        let r = multiply_by_quantized_multiplier_smaller_than_one(sx + sy, mo, so) + qo.1;
        out.push(r.clamp(lo, hi) as i8);
    });
    out
}

/// TFLM's reference pooling loop, for any element type.
#[allow(clippy::too_many_arguments)]
fn reference_pool<T: Copy, A: Copy>(
    input: &[T],
    in_shape: &[i32],
    out_shape: &[i32],
    stride: (i32, i32),
    filter: (i32, i32),
    pad: (i32, i32),
    init: A,
    fold: impl Fn(A, T) -> A,
    finish: impl Fn(A, i32) -> T,
) -> Vec<T> {
    let (batches, in_h, in_w, depth) = (in_shape[0], in_shape[1], in_shape[2], in_shape[3]);
    let (out_h, out_w) = (out_shape[1], out_shape[2]);
    let mut out = Vec::new();
    for b in 0..batches {
        for oy in 0..out_h {
            for ox in 0..out_w {
                for c in 0..depth {
                    let x0 = ox * stride.0 - pad.0;
                    let y0 = oy * stride.1 - pad.1;
                    let mut acc = init;
                    let mut count = 0;
                    for fy in 0.max(-y0)..filter.1.min(in_h - y0) {
                        for fx in 0.max(-x0)..filter.0.min(in_w - x0) {
                            let i = ((b * in_h + y0 + fy) * in_w + x0 + fx) * depth + c;
                            acc = fold(acc, input[i as usize]);
                            count += 1;
                        }
                    }
                    out.push(finish(acc, count));
                }
            }
        }
    }
    out
}

fn pool_geometry() -> impl Strategy<Value = (Vec<i32>, Padding, (i32, i32), (i32, i32))> {
    (
        1i32..=2,
        1i32..=9,
        1i32..=9,
        1i32..=70,
        prop_oneof![Just(Padding::SAME), Just(Padding::VALID)],
        (1i32..=3, 1i32..=3),
        (1i32..=4, 1i32..=4),
    )
        .prop_filter_map(
            "VALID window larger than input",
            |(n, h, w, c, pad, stride, filter)| {
                if pad == Padding::VALID && (filter.0 > w || filter.1 > h) {
                    return None;
                }
                Some((vec![n, h, w, c], pad, stride, filter))
            },
        )
}

fn pool_out_and_pad(
    shape: &[i32],
    padding: Padding,
    stride: (i32, i32),
    filter: (i32, i32),
) -> (Vec<i32>, (i32, i32)) {
    let out = |image: i32, f: i32, s: i32| match padding {
        Padding::SAME => (image + s - 1) / s,
        _ => (image + s - f) / s,
    };
    let (oh, ow) = (
        out(shape[1], filter.1, stride.1),
        out(shape[2], filter.0, stride.0),
    );
    let pad = |o: i32, s: i32, f: i32, image: i32| (((o - 1) * s + f - image).max(0)) / 2;
    (
        vec![shape[0], oh, ow, shape[3]],
        (
            pad(ow, stride.0, filter.0, shape[2]),
            pad(oh, stride.1, filter.1, shape[1]),
        ),
    )
}

fn rounded_average(acc: i32, n: i32) -> i32 {
    if acc > 0 {
        (acc + n / 2) / n
    } else {
        (acc - n / 2) / n
    }
}

/// TFLM's quantised softmax for one row, written out in full.
fn reference_softmax_row(row: &[i8], m: i32, s: i32, diff_min: i32, out_bits: i32) -> Vec<i32> {
    let max = i32::from(*row.iter().max().unwrap());
    let exp = |d: i32| {
        exp_on_negative_values(
            multiply_by_quantized_multiplier_greater_than_one(d, m, s),
            5,
        )
    };
    let mut sum = 0i32;
    for &v in row {
        let d = i32::from(v) - max;
        if d >= diff_min {
            sum += rounding_divide_by_pot(exp(d), 12);
        }
    }
    let (scale, bits) = get_reciprocal(sum, 12);
    let exponent = bits + 31 - out_bits;
    let min = -(1 << (out_bits - 1));
    let max_out = (1 << (out_bits - 1)) - 1;
    row.iter()
        .map(|&v| {
            let d = i32::from(v) - max;
            if d >= diff_min {
                let u = rounding_divide_by_pot(
                    saturating_rounding_doubling_high_mul(scale, exp(d)),
                    exponent,
                );
                (u + min).clamp(min, max_out)
            } else {
                min
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn add_int8_matches_reference(
        shapes in broadcast_shapes(),
        sa in 0.001f32..0.5, sb in 0.001f32..0.5, so in 0.002f32..0.5,
        za in -128i32..=127, zb in -128i32..=127, zo in -128i32..=127,
        act in activation(),
        seed in any::<u64>(),
    ) {
        let mut rng = Rng(seed);
        let a = rng.tensor(T::INT8, elements(&shapes.0), 0.0, 0.0);
        let b = rng.tensor(T::INT8, elements(&shapes.1), 0.0, 0.0);
        let model = single_op(
            Op::ADD,
            &[(i8q(sa, za.into()), &shapes.0), (i8q(sb, zb.into()), &shapes.1)],
            (i8q(so, zo.into()), &shapes.2),
            add_options(act),
        );
        let got = run(&model, &[&a, &b]).unwrap();
        let want = reference_add_i8(&i8s(&a), &i8s(&b), &shapes, (sa, za), (sb, zb), (so, zo), act);
        prop_assert_eq!(i8s(&got[0]), want);
    }

    #[test]
    fn add_int8_large_matches_reference(
        shapes in broadcast_shapes_in(3..=3, 9..=16),
        sa in 0.001f32..0.5, sb in 0.001f32..0.5, so in 0.002f32..0.5,
        za in -128i32..=127, zb in -128i32..=127, zo in -128i32..=127,
        act in activation(),
        seed in any::<u64>(),
    ) {
        // Big enough outputs take invoke's lookup-table path.
        prop_assume!(elements(&shapes.2) >= 1024);
        let mut rng = Rng(seed);
        let a = rng.tensor(T::INT8, elements(&shapes.0), 0.0, 0.0);
        let b = rng.tensor(T::INT8, elements(&shapes.1), 0.0, 0.0);
        let model = single_op(
            Op::ADD,
            &[(i8q(sa, za.into()), &shapes.0), (i8q(sb, zb.into()), &shapes.1)],
            (i8q(so, zo.into()), &shapes.2),
            add_options(act),
        );
        let got = run(&model, &[&a, &b]).unwrap();
        let want = reference_add_i8(&i8s(&a), &i8s(&b), &shapes, (sa, za), (sb, zb), (so, zo), act);
        prop_assert_eq!(i8s(&got[0]), want);
    }

    #[test]
    fn add_float_matches_reference(shapes in broadcast_shapes(), act in activation(), seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let a = rng.tensor(T::FLOAT32, elements(&shapes.0), -8.0, 8.0);
        let b = rng.tensor(T::FLOAT32, elements(&shapes.1), -8.0, 8.0);
        let model = single_op(Op::ADD, &[(F32, &shapes.0), (F32, &shapes.1)], (F32, &shapes.2), add_options(act));
        let got = f32s(&run(&model, &[&a, &b]).unwrap()[0]);
        let (fa, fb) = (f32s(&a), f32s(&b));
        let (lo, hi) = act_range_f(act);
        let mut want = Vec::new();
        for_each_index(&shapes.2, |idx| {
            let s = fa[broadcast_index(&shapes.0, &shapes.2, idx)] + fb[broadcast_index(&shapes.1, &shapes.2, idx)];
            want.push(s.max(lo).min(hi));
        });
        prop_assert_eq!(got, want);
    }

    #[test]
    fn pooling_int8_matches_reference(
        (shape, padding, stride, filter) in pool_geometry(),
        max in any::<bool>(),
        scale in 0.01f32..0.2, zp in -128i32..=127,
        act in activation(),
        seed in any::<u64>(),
    ) {
        let (out_shape, pad) = pool_out_and_pad(&shape, padding, stride, filter);
        prop_assume!(out_shape.iter().all(|&d| d > 0));
        let ty = i8q(scale, zp.into());
        let op = if max { Op::MAX_POOL_2D } else { Op::AVERAGE_POOL_2D };
        let model = single_op(op, &[(ty, &shape)], (ty, &out_shape), pool_options(padding, stride, filter, act));
        let input = Rng(seed).tensor(T::INT8, elements(&shape), 0.0, 0.0);
        let got = match run(&model, &[&input]) {
            Ok(o) => i8s(&o[0]),
            // Windows entirely in the padding: TFLM fails too.
            Err(_) => return Ok(()),
        };
        let (lo, hi) = act_range_q(act, scale, zp, -128, 127);
        let x = i8s(&input);
        let want = if max {
            reference_pool(&x, &shape, &out_shape, stride, filter, pad, i8::MIN, |m, v| m.max(v), |m, _| i32::from(m).clamp(lo, hi) as i8)
        } else {
            reference_pool(&x, &shape, &out_shape, stride, filter, pad, 0i32, |s, v| s + i32::from(v), |s, n| rounded_average(s, n).clamp(lo, hi) as i8)
        };
        prop_assert_eq!(got, want);
    }

    #[test]
    fn pooling_float_matches_reference(
        (shape, padding, stride, filter) in pool_geometry(),
        max in any::<bool>(),
        act in activation(),
        seed in any::<u64>(),
    ) {
        let (out_shape, pad) = pool_out_and_pad(&shape, padding, stride, filter);
        prop_assume!(out_shape.iter().all(|&d| d > 0));
        let op = if max { Op::MAX_POOL_2D } else { Op::AVERAGE_POOL_2D };
        let model = single_op(op, &[(F32, &shape)], (F32, &out_shape), pool_options(padding, stride, filter, act));
        let input = Rng(seed).tensor(T::FLOAT32, elements(&shape), -10.0, 10.0);
        let got = match run(&model, &[&input]) {
            Ok(o) => f32s(&o[0]),
            Err(_) => return Ok(()),
        };
        let (lo, hi) = act_range_f(act);
        let x = f32s(&input);
        let want = if max {
            reference_pool(&x, &shape, &out_shape, stride, filter, pad, f32::MIN, |m, v| m.max(v), |m, _| m.max(lo).min(hi))
        } else {
            reference_pool(&x, &shape, &out_shape, stride, filter, pad, 0.0f32, |s, v| s + v, |s, n| (s / n as f32).max(lo).min(hi))
        };
        // Bit for bit: the same additions in the same order.
        prop_assert_eq!(got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    }

    #[test]
    fn softmax_int8_matches_reference(
        outer in 1i32..=6, depth in 1i32..=80,
        scale in 0.001f32..1.0, zp in -128i32..=127, beta in 0.1f32..3.0,
        int16_out in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let shape = [outer, depth];
        let out_ty = if int16_out { i16q(1.0 / 65536.0, -32768) } else { i8q(1.0 / 256.0, -128) };
        let model = single_op(Op::SOFTMAX, &[(i8q(scale, zp.into()), &shape)], (out_ty, &shape), Options::Softmax { beta });
        let input = Rng(seed).tensor(T::INT8, elements(&shape), 0.0, 0.0);
        let got: Vec<i32> = {
            let out = &run(&model, &[&input]).unwrap()[0];
            if int16_out { i16s(out).into_iter().map(i32::from).collect() } else { i8s(out).into_iter().map(i32::from).collect() }
        };
        let (m, s) = preprocess_softmax_scaling(f64::from(beta), f64::from(scale), 5).unwrap();
        let diff_min = -calculate_input_radius(5, s, 31);
        let x = i8s(&input);
        let want: Vec<i32> = x
            .chunks(depth as usize)
            .flat_map(|row| reference_softmax_row(row, m, s, diff_min, if int16_out { 16 } else { 8 }))
            .collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn logistic_int8_matches_reference(scale in 0.001f32..2.0, zp in -128i32..=127, seed in any::<u64>()) {
        let n = 300;
        let model = single_op(Op::LOGISTIC, &[(i8q(scale, zp.into()), &[n])], (i8q(1.0 / 256.0, -128), &[n]), Options::None);
        let input = Rng(seed).tensor(T::INT8, n as usize, 0.0, 0.0);
        let got = i8s(&run(&model, &[&input]).unwrap()[0]);
        let real = f64::from(scale) * f64::from(1 << 27);
        let shift = libm::ilogb(real) + 1;
        let multiplier = libm::round(libm::scalbn(real, -shift) * f64::from(1u32 << 31)) as i32;
        let radius = calculate_input_radius(4, shift, 31);
        let want: Vec<i8> = i8s(&input)
            .iter()
            .map(|&v| {
                let x = i32::from(v) - zp;
                if x <= -radius {
                    -128
                } else if x >= radius {
                    127
                } else {
                    let q4 = multiply_by_quantized_multiplier(x, multiplier, shift);
                    (rounding_divide_by_pot(logistic(q4, 4), 23) - 128).clamp(-128, 127) as i8
                }
            })
            .collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn quantize_and_dequantize_match_formulas(scale in 1e-4f32..1.0, zp in -100i32..=100, seed in any::<u64>()) {
        let n = 64usize;
        let mut rng = Rng(seed);
        let floats = rng.tensor(T::FLOAT32, n, -200.0, 200.0);
        let model = single_op(Op::QUANTIZE, &[(F32, &[n as i32])], (i8q(scale, zp.into()), &[n as i32]), Options::None);
        let q = i8s(&run(&model, &[&floats]).unwrap()[0]);
        let want: Vec<i8> = f32s(&floats).iter().map(|&v| quantize_f(v, scale, zp).clamp(-128, 127) as i8).collect();
        prop_assert_eq!(&q, &want);

        let ints = rng.tensor(T::INT16, n, 0.0, 0.0);
        let model = single_op(Op::DEQUANTIZE, &[(i16q(scale, zp.into()), &[n as i32])], (F32, &[n as i32]), Options::None);
        let f = f32s(&run(&model, &[&ints]).unwrap()[0]);
        let want: Vec<f32> = i16s(&ints).iter().map(|&v| (f64::from(scale) * f64::from(i32::from(v) - zp)) as f32).collect();
        prop_assert_eq!(f, want);

        // int16 → int8 requantisation.
        let out_scale = scale * 300.0;
        let model = single_op(Op::QUANTIZE, &[(i16q(scale, 0), &[n as i32])], (i8q(out_scale, zp.into()), &[n as i32]), Options::None);
        let r = i8s(&run(&model, &[&ints]).unwrap()[0]);
        let (m, s) = quantize_multiplier(f64::from(scale) / f64::from(out_scale));
        let want: Vec<i8> = i16s(&ints).iter().map(|&v| (multiply_by_quantized_multiplier(i32::from(v), m, s) + zp).clamp(-128, 127) as i8).collect();
        prop_assert_eq!(r, want);
    }
}

#[test]
fn hand_checked_values() {
    // ADD int8, equal scales 0.5, zero points 0: 3 + 4 = 3.5 → 7 / 0.5.
    let ty = i8q(0.5, 0);
    let model = single_op(
        Op::ADD,
        &[(ty, &[4]), (ty, &[4])],
        (i8q(0.5, 0), &[4]),
        add_options(Act::NONE),
    );
    let out = run(&model, &[&[6u8, 250, 100, 1], &[8u8, 4, 100, 255]]).unwrap();
    // 6+8=14; -6+4=-2; 100+100 saturates; 1-1=0.
    assert_eq!(i8s(&out[0]), [14, -2, 127, 0]);

    // AVERAGE_POOL_2D int8 2×2 VALID: (1+2+3+4)/4 = 2.5 → 3; (-1-2-3-4)/4 → -3.
    let ty = i8q(1.0, 0);
    let model = single_op(
        Op::AVERAGE_POOL_2D,
        &[(ty, &[1, 2, 2, 2])],
        (ty, &[1, 1, 1, 2]),
        pool_options(Padding::VALID, (2, 2), (2, 2), Act::NONE),
    );
    let input: Vec<u8> = [1i8, -1, 2, -2, 3, -3, 4, -4]
        .iter()
        .map(|&v| v as u8)
        .collect();
    assert_eq!(i8s(&run(&model, &[&input]).unwrap()[0]), [3, -3]);

    // MAX_POOL_2D float SAME 3×3 stride 1 on a 1×3×3×1 ramp.
    let model = single_op(
        Op::MAX_POOL_2D,
        &[(F32, &[1, 3, 3, 1])],
        (F32, &[1, 3, 3, 1]),
        pool_options(Padding::SAME, (1, 1), (3, 3), Act::NONE),
    );
    let ramp: Vec<f32> = (0..9).map(|v| v as f32).collect();
    let bytes: Vec<u8> = ramp.iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(
        f32s(&run(&model, &[&bytes]).unwrap()[0]),
        [4.0, 5.0, 5.0, 7.0, 8.0, 8.0, 7.0, 8.0, 8.0]
    );

    // SOFTMAX float: equal logits → 1/n.
    let model = single_op(
        Op::SOFTMAX,
        &[(F32, &[1, 4])],
        (F32, &[1, 4]),
        Options::Softmax { beta: 1.0 },
    );
    let bytes: Vec<u8> = [2.0f32; 4].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(f32s(&run(&model, &[&bytes]).unwrap()[0]), [0.25; 4]);

    // QUANTIZE float → int8, scale 0.5, zero point 1: 1.25 → 2.5 → 3 (+1).
    let model = single_op(
        Op::QUANTIZE,
        &[(F32, &[3])],
        (i8q(0.5, 1), &[3]),
        Options::None,
    );
    let bytes: Vec<u8> = [1.25f32, -1.25, 0.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(i8s(&run(&model, &[&bytes]).unwrap()[0]), [4, -2, 1]);

    // DEQUANTIZE int8 → float.
    let model = single_op(
        Op::DEQUANTIZE,
        &[(i8q(0.25, -2), &[2])],
        (F32, &[2]),
        Options::None,
    );
    assert_eq!(f32s(&run(&model, &[&[2u8, 254]]).unwrap()[0]), [1.0, 0.0]);
}

#[test]
fn refused_models() {
    // Incompatible broadcast.
    let model = single_op(
        Op::ADD,
        &[(F32, &[2, 3]), (F32, &[3, 3])],
        (F32, &[2, 3]),
        add_options(Act::NONE),
    );
    assert!(run(&model, &[&[0; 24], &[0; 36]]).is_err());
    // int8 softmax with a wrong output scale.
    let model = single_op(
        Op::SOFTMAX,
        &[(i8q(0.1, 0), &[1, 4])],
        (i8q(0.1, -128), &[1, 4]),
        Options::Softmax { beta: 1.0 },
    );
    assert!(run(&model, &[&[0; 4]]).is_err());
    // Pooling with different input and output quantisation.
    let model = single_op(
        Op::MAX_POOL_2D,
        &[(i8q(0.1, 0), &[1, 2, 2, 1])],
        (i8q(0.2, 0), &[1, 1, 1, 1]),
        pool_options(Padding::VALID, (2, 2), (2, 2), Act::NONE),
    );
    assert!(run(&model, &[&[0; 4]]).is_err());
    // LOGISTIC int8 output zero point must be -128.
    let model = single_op(
        Op::LOGISTIC,
        &[(i8q(0.1, 0), &[4])],
        (i8q(1.0 / 256.0, 0), &[4]),
        Options::None,
    );
    assert!(run(&model, &[&[0; 4]]).is_err());
    // DEQUANTIZE to int8 is not a thing.
    let model = single_op(
        Op::DEQUANTIZE,
        &[(i8q(0.1, 0), &[4])],
        (i8q(0.1, 0), &[4]),
        Options::None,
    );
    assert!(run(&model, &[&[0; 4]]).is_err());
}
