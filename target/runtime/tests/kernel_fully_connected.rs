//! FULLY_CONNECTED: hand-checked values, property tests against TFLM's
//! reference loops, and prepare's errors.

mod conv_family;

use conv_family::*;
use hilt_runtime::kernels::KernelError;
use hilt_runtime::kernels::fixed_point::activation_range_quantized;
use hilt_runtime::schema::{ActivationFunctionType as Act, BuiltinOperator as Op, TensorType as T};
use hilt_runtime::writer::{Options, f32_bytes};
use proptest::prelude::*;

fn options(act: Act) -> Options {
    Options::FullyConnected {
        activation: act,
        keep_num_dims: false,
    }
}

/// TFLM's `reference_integer_ops::FullyConnected` (per-tensor, with the
/// filter offset) or `FullyConnectedPerChannel` (no filter offset).
fn reference_i8(
    x: &[i8],
    w: &[i8],
    bias: Option<&[i32]>,
    batches: usize,
    depth: usize,
    filter_offset: i32,
    rq: &Requant,
) -> Vec<i8> {
    let k = w.len() / depth;
    let mut out = Vec::new();
    for b in 0..batches {
        for c in 0..depth {
            let mut acc = 0i32;
            for d in 0..k {
                let xv = i32::from(x[b * k + d]);
                let wv = i32::from(w[c * k + d]);
                acc += (wv + filter_offset) * (xv + rq.input_offset);
            }
            if let Some(bias) = bias {
                acc += bias[c];
            }
            out.push(rq.apply(c, acc));
        }
    }
    out
}

/// TFLM's float `reference_ops::FullyConnected`.
fn reference_f32(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    batches: usize,
    depth: usize,
    act: Act,
) -> Vec<f32> {
    let k = w.len() / depth;
    let range = float_range(act);
    let mut out = Vec::new();
    for b in 0..batches {
        for c in 0..depth {
            let mut total = 0.0f32;
            for d in 0..k {
                total += x[b * k + d] * w[c * k + d];
            }
            out.push(clamp_f32(total + bias.map_or(0.0, |b| b[c]), range));
        }
    }
    out
}

#[test]
fn float_hand_checked() {
    // [1, 2] · [[1, 1], [2, -1], [0.5, 0.5]]ᵀ + [0, 1, -3] with ReLU.
    let bytes = one_op(
        Op::FULLY_CONNECTED,
        options(Act::RELU),
        T::FLOAT32,
        &[1, 2],
        None,
        &[3, 2],
        Data::F32(vec![1.0, 1.0, 2.0, -1.0, 0.5, 0.5]),
        None,
        Some((Data::F32(vec![0.0, 1.0, -3.0]), None)),
        &[1, 3],
        None,
    );
    let out = as_f32(&run(&bytes, &f32_bytes(&[1.0, 2.0])).unwrap());
    assert_eq!(out, [3.0, 1.0, 0.0]);
}

#[test]
fn int8_per_tensor_filter_zero_point_is_applied() {
    // Filter zero point 1: weights 3, 1 mean 2, 0. Input zero point -2: x + 2.
    // acc = (3-1)(1+2) + (1-1)(4+2) + 10 = 16; × (0.5·0.25/0.5 = 0.25) = 4, + 1.
    let bytes = one_op(
        Op::FULLY_CONNECTED,
        options(Act::NONE),
        T::INT8,
        &[1, 2],
        Some(Q::tensor(0.5, -2)),
        &[1, 2],
        Data::I8(vec![3, 1]),
        Some(Q::tensor(0.25, 1)),
        Some((Data::I32(vec![10]), Some(Q::tensor(0.125, 0)))),
        &[1, 1],
        Some(Q::tensor(0.5, 1)),
    );
    let out = as_i8(&run(&bytes, &i8_bytes(&[1, 4])).unwrap());
    assert_eq!(out, vec![5]);
}

#[test]
fn per_tensor_multiplier_rounds_the_float_product() {
    // TFLM rounds input_scale · filter_scale to float before dividing in
    // double; for these scales that changes the Q31 multiplier's last bit.
    let (input, filter, output) = (0.1f32, 0.3f32, 0.7f32);
    let float_product = Requant::fc_per_tensor((input, 0), filter, (output, 0), Act::NONE);
    let double_product = Requant::per_channel((input, 0), &[filter], (output, 0), 1, Act::NONE);
    assert_ne!(float_product.multiplier, double_product.multiplier);
    // One Q31 bit rarely moves an int8 output; the kernel follows the
    // float-product rule across a sweep of accumulators.
    let bytes = |bias: i32| {
        one_op(
            Op::FULLY_CONNECTED,
            options(Act::NONE),
            T::INT8,
            &[1, 1],
            Some(Q::tensor(input, 0)),
            &[1, 1],
            Data::I8(vec![0]),
            Some(Q::tensor(filter, 0)),
            Some((Data::I32(vec![bias]), None)),
            &[1, 1],
            Some(Q::tensor(output, 0)),
        )
    };
    for acc in (-3000..3000).step_by(37) {
        let got = as_i8(&run(&bytes(acc), &[0]).unwrap())[0];
        assert_eq!(got, float_product.apply(0, acc), "acc {acc}");
    }
}

#[derive(Debug, Clone)]
struct Case {
    batches: usize,
    depth: usize,
    accum: usize,
    act: Act,
    bias: bool,
    per_channel: bool,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        1usize..=4,
        1usize..=40,
        1usize..=70,
        0usize..4,
        any::<bool>(),
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(
            |(batches, depth, accum, act, bias, per_channel, seed)| Case {
                batches,
                depth,
                accum,
                act: ACTIVATIONS[act],
                bias,
                per_channel,
                seed,
            },
        )
}

fn check_int8(c: &Case) {
    let mut lcg = Lcg(c.seed);
    let x = lcg.i8s(c.batches * c.accum);
    let w = lcg.i8s(c.depth * c.accum);
    let bias: Vec<i32> = (0..c.depth).map(|_| lcg.i32_in(-20_000, 20_000)).collect();
    let in_zp = lcg.i32_in(-128, 127);
    let out_zp = lcg.i32_in(-128, 127);
    let in_scale = 0.01 + (lcg.next() % 100) as f32 / 1000.0;
    let out_scale = 0.02 + (lcg.next() % 100) as f32 / 200.0;
    // Per-tensor weights may carry a zero point; per-channel ones never do.
    let (filter_q, rq, filter_offset) = if c.per_channel && c.depth > 1 {
        let scales: Vec<f32> = (0..c.depth)
            .map(|_| 0.001 + (lcg.next() % 100) as f32 / 5000.0)
            .collect();
        let rq = Requant::per_channel(
            (in_scale, in_zp),
            &scales,
            (out_scale, out_zp),
            c.depth,
            c.act,
        );
        (Q::channels(scales, 0), rq, 0)
    } else {
        let zp = if c.seed.is_multiple_of(3) {
            lcg.i32_in(-5, 5)
        } else {
            0
        };
        let rq = Requant::fc_per_tensor((in_scale, in_zp), 0.004, (out_scale, out_zp), c.act);
        (Q::tensor(0.004, zp.into()), rq, -zp)
    };
    let bytes = one_op(
        Op::FULLY_CONNECTED,
        options(c.act),
        T::INT8,
        &[c.batches as i32, c.accum as i32],
        Some(Q::tensor(in_scale, in_zp.into())),
        &[c.depth as i32, c.accum as i32],
        Data::I8(w.clone()),
        Some(filter_q),
        c.bias.then(|| (Data::I32(bias.clone()), None)),
        &[c.batches as i32, c.depth as i32],
        Some(Q::tensor(out_scale, out_zp.into())),
    );
    let got = as_i8(&run(&bytes, &i8_bytes(&x)).unwrap());
    let want = reference_i8(
        &x,
        &w,
        c.bias.then_some(&bias[..]),
        c.batches,
        c.depth,
        filter_offset,
        &rq,
    );
    assert_eq!(got, want, "{c:?}");
}

fn check_float(c: &Case) {
    let mut lcg = Lcg(c.seed);
    let x = lcg.f32s(c.batches * c.accum);
    let w = lcg.f32s(c.depth * c.accum);
    let bias = lcg.f32s(c.depth);
    let bytes = one_op(
        Op::FULLY_CONNECTED,
        options(c.act),
        T::FLOAT32,
        &[c.batches as i32, c.accum as i32],
        None,
        &[c.depth as i32, c.accum as i32],
        Data::F32(w.clone()),
        None,
        c.bias.then(|| (Data::F32(bias.clone()), None)),
        &[c.batches as i32, c.depth as i32],
        None,
    );
    let got = as_f32(&run(&bytes, &f32_bytes(&x)).unwrap());
    let want = reference_f32(
        &x,
        &w,
        c.bias.then_some(&bias[..]),
        c.batches,
        c.depth,
        c.act,
    );
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

/// One- to three-input rows (hello_world's first layer has one) take their
/// own paths in the int8 matrix-vector product: every one of them, with and
/// without bias, per-tensor and per-channel, over seeds enough to reach
/// each form of the per-tensor scaling.
#[test]
fn int8_short_rows_match_tflm_reference() {
    for accum in 1..=3 {
        for depth in [1, 3, 4, 16, 17] {
            for seed in 0..24u64 {
                check_int8(&Case {
                    batches: 1 + (seed % 2) as usize,
                    depth,
                    accum,
                    act: ACTIVATIONS[(seed % 4) as usize],
                    bias: seed % 3 != 0,
                    per_channel: seed % 5 == 0,
                    seed: seed * 7919 + accum as u64,
                });
            }
        }
    }
}

#[test]
fn keep_num_dims_batches_over_leading_dimensions() {
    // A [2, 3, 4] input with keep_num_dims: output [2, 3, 5], six batch rows.
    let mut lcg = Lcg(9);
    let x = lcg.f32s(24);
    let w = lcg.f32s(20);
    let bytes = one_op(
        Op::FULLY_CONNECTED,
        Options::FullyConnected {
            activation: Act::NONE,
            keep_num_dims: true,
        },
        T::FLOAT32,
        &[2, 3, 4],
        None,
        &[5, 4],
        Data::F32(w.clone()),
        None,
        None,
        &[2, 3, 5],
        None,
    );
    let got = as_f32(&run(&bytes, &f32_bytes(&x)).unwrap());
    assert_f32_exact(&got, &reference_f32(&x, &w, None, 6, 5, Act::NONE));
}

#[test]
fn prepare_refuses_what_it_cannot_compute() {
    let model = |filter: Data, filter_q: Option<Q>, out_shape: &[i32], act: Act| {
        one_op(
            Op::FULLY_CONNECTED,
            options(act),
            T::INT8,
            &[1, 4],
            Some(Q::tensor(0.5, 0)),
            &[2, 4],
            filter,
            filter_q,
            None,
            out_shape,
            Some(Q::tensor(1.0, 0)),
        )
    };
    let input = [0u8; 4];
    // More outputs than weight rows.
    let bytes = model(
        Data::I8(vec![1; 8]),
        Some(Q::tensor(1.0, 0)),
        &[1, 3],
        Act::NONE,
    );
    assert!(matches!(
        kernel_error(&bytes, &input),
        KernelError::ShapeMismatch { .. }
    ));
    // Hybrid: float weights under int8 activations.
    let bytes = model(Data::F32(vec![1.0; 8]), None, &[1, 2], Act::NONE);
    assert!(matches!(
        kernel_error(&bytes, &input),
        KernelError::UnsupportedType { .. }
    ));
    // Per-channel scales that do not match the rows.
    let bytes = model(
        Data::I8(vec![1; 8]),
        Some(Q::channels(vec![1.0; 3], 0)),
        &[1, 2],
        Act::NONE,
    );
    assert!(matches!(
        kernel_error(&bytes, &input),
        KernelError::ShapeMismatch { .. }
    ));
    // A fused activation these kernels do not implement.
    let bytes = model(
        Data::I8(vec![1; 8]),
        Some(Q::tensor(1.0, 0)),
        &[1, 2],
        Act::TANH,
    );
    assert!(matches!(
        kernel_error(&bytes, &input),
        KernelError::UnsupportedParameter { .. }
    ));
    // A bias of the wrong length.
    let bytes = one_op(
        Op::FULLY_CONNECTED,
        options(Act::NONE),
        T::INT8,
        &[1, 4],
        Some(Q::tensor(0.5, 0)),
        &[2, 4],
        Data::I8(vec![1; 8]),
        Some(Q::tensor(1.0, 0)),
        Some((Data::I32(vec![1, 2, 3]), None)),
        &[1, 2],
        Some(Q::tensor(1.0, 0)),
    );
    assert!(matches!(
        kernel_error(&bytes, &input),
        KernelError::ShapeMismatch { .. }
    ));
}

/// TFLM's 64-bit `MultiplyByQuantizedMultiplier` (the int16 kernels'),
/// written out here from the reference so that the test does not share the
/// kernel's helper.
fn tflm_requant_i64(acc: i64, multiplier: i32, shift: i32) -> i32 {
    let reduced = if multiplier < 0x7FFF_0000 {
        (multiplier + (1 << 15)) >> 16
    } else {
        0x7FFF
    };
    let total_shift = 15 - shift;
    ((acc * i64::from(reduced) + (1i64 << (total_shift - 1))) >> total_shift) as i32
}

/// TFLM's int16 `reference_integer_ops::FullyConnected` (per-tensor, filter
/// offset) or `FullyConnectedPerChannel`: 64-bit sums, no input or output
/// offset, the int16 clamp.
fn reference_i16(
    x: &[i16],
    w: &[i8],
    bias: Option<&[i64]>,
    (batches, depth, filter_offset): (usize, usize, i32),
    rq: &Requant,
    (min, max): (i32, i32),
) -> Vec<i16> {
    let k = w.len() / depth;
    let mut out = Vec::new();
    for b in 0..batches {
        for c in 0..depth {
            let mut acc = 0i64;
            for d in 0..k {
                let xv = i64::from(x[b * k + d]);
                let wv = i64::from(w[c * k + d]);
                acc += (wv + i64::from(filter_offset)) * xv;
            }
            if let Some(bias) = bias {
                acc += bias[c];
            }
            let i = if rq.multiplier.len() > 1 { c } else { 0 };
            let v = tflm_requant_i64(acc, rq.multiplier[i], rq.shift[i]);
            out.push(v.clamp(min, max) as i16);
        }
    }
    out
}

fn i16_bytes(v: &[i16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn as_i16(v: &[u8]) -> Vec<i16> {
    v.chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect()
}

/// An int16x8 one-op model: `[batches, k]` int16 input, `[depth, k]` weights.
fn int16_model(
    act: Act,
    (batches, depth, k): (usize, usize, usize),
    (in_scale, out_scale): (f32, f32),
    filter: Data,
    filter_q: Q,
    bias: Option<Data>,
) -> Vec<u8> {
    one_op(
        Op::FULLY_CONNECTED,
        options(act),
        T::INT16,
        &[batches as i32, k as i32],
        Some(Q::tensor(in_scale, 0)),
        &[depth as i32, k as i32],
        filter,
        Some(filter_q),
        bias.map(|b| (b, None)),
        &[batches as i32, depth as i32],
        Some(Q::tensor(out_scale, 0)),
    )
}

#[test]
fn int16_hand_checked() {
    // Multiplier 0.5 · 0.25 / 0.5 = 0.25 (Q31 2^30, shift -1: reduced to
    // 2^14, total shift 16). x = [1000, -2000]:
    //   row [3, 1]:     3000 - 2000 + 10    =    1010 → 252.5    → 253
    //   row [-2, 5]:   -2000 - 10000 - 3    =  -12003 → -3000.75 → -3001
    //   row [-127, 127]: -127000 - 254000   = -381000 → -95250   → -32768 (int16 clamp)
    let bytes = |act| {
        int16_model(
            act,
            (1, 3, 2),
            (0.5, 0.5),
            Data::I8(vec![3, 1, -2, 5, -127, 127]),
            Q::tensor(0.25, 0),
            Some(Data::I64(vec![10, -3, 0])),
        )
    };
    let input = i16_bytes(&[1000, -2000]);
    let out = as_i16(&run(&bytes(Act::NONE), &input).unwrap());
    assert_eq!(out, [253, -3001, -32768]);
    let out = as_i16(&run(&bytes(Act::RELU), &input).unwrap());
    assert_eq!(out, [253, 0, 0]);
}

#[test]
fn int16_per_tensor_filter_zero_point_is_applied() {
    // Weights 3, 1 with zero point 1 mean 2, 0: acc = 2 · 100 + 0 · 7 = 200;
    // × (1 · 0.5 / 0.25 = 2) = 400. No bias.
    let bytes = int16_model(
        Act::NONE,
        (1, 1, 2),
        (1.0, 0.25),
        Data::I8(vec![3, 1]),
        Q::tensor(0.5, 1),
        None,
    );
    let out = as_i16(&run(&bytes, &i16_bytes(&[100, 7])).unwrap());
    assert_eq!(out, [400]);
}

fn check_int16(c: &Case) {
    let mut lcg = Lcg(c.seed);
    let x: Vec<i16> = (0..c.batches * c.accum)
        .map(|_| lcg.i32_in(-32768, 32767) as i16)
        .collect();
    let w = lcg.i8s(c.depth * c.accum);
    let bias: Vec<i64> = (0..c.depth)
        .map(|_| i64::from(lcg.i32_in(-1 << 29, 1 << 29)) * i64::from(lcg.i32_in(-64, 64)))
        .collect();
    let in_scale = 0.0001 + (lcg.next() % 100) as f32 / 100_000.0;
    let out_scale = 0.0002 + (lcg.next() % 100) as f32 / 20_000.0;
    let (filter_q, rq, filter_offset) = if c.per_channel && c.depth > 1 {
        let scales: Vec<f32> = (0..c.depth)
            .map(|_| 0.001 + (lcg.next() % 100) as f32 / 5000.0)
            .collect();
        let rq = Requant::per_channel((in_scale, 0), &scales, (out_scale, 0), c.depth, c.act);
        (Q::channels(scales, 0), rq, 0)
    } else {
        let zp = if c.seed.is_multiple_of(3) {
            lcg.i32_in(-5, 5)
        } else {
            0
        };
        let rq = Requant::fc_per_tensor((in_scale, 0), 0.004, (out_scale, 0), c.act);
        (Q::tensor(0.004, zp.into()), rq, -zp)
    };
    let bytes = int16_model(
        c.act,
        (c.batches, c.depth, c.accum),
        (in_scale, out_scale),
        Data::I8(w.clone()),
        filter_q,
        c.bias.then(|| Data::I64(bias.clone())),
    );
    let got = as_i16(&run(&bytes, &i16_bytes(&x)).unwrap());
    let range = activation_range_quantized(c.act, out_scale, 0, -32768, 32767);
    let want = reference_i16(
        &x,
        &w,
        c.bias.then_some(&bias[..]),
        (c.batches, c.depth, filter_offset),
        &rq,
        range,
    );
    assert_eq!(got, want, "{c:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn int16_matches_tflm_reference(c in case()) {
        check_int16(&c);
    }
}

#[test]
fn int16_prepare_refuses_what_it_cannot_compute() {
    let input = [0u8; 4];
    let error = |filter: Data, filter_q: Q, bias: Option<Data>| {
        let bytes = int16_model(Act::NONE, (1, 1, 2), (0.5, 0.5), filter, filter_q, bias);
        kernel_error(&bytes, &input)
    };
    let int8_weights = || Data::I8(vec![1, 2]);
    // int16 weights (16x16) are not an int16x8 layer.
    assert!(matches!(
        error(Data::I32(vec![1, 2]), Q::tensor(1.0, 0), None),
        KernelError::UnsupportedType { .. }
    ));
    // An int32 bias where TFLM's int16 path reads int64.
    assert!(matches!(
        error(int8_weights(), Q::tensor(1.0, 0), Some(Data::I32(vec![1]))),
        KernelError::UnsupportedType { .. }
    ));
    // A bias of the wrong length.
    assert!(matches!(
        error(
            int8_weights(),
            Q::tensor(1.0, 0),
            Some(Data::I64(vec![1, 2]))
        ),
        KernelError::ShapeMismatch { .. }
    ));
    // A bias the 64-bit requantisation could overflow on.
    assert!(matches!(
        error(
            int8_weights(),
            Q::tensor(1.0, 0),
            Some(Data::I64(vec![1 << 50]))
        ),
        KernelError::UnsupportedParameter { .. }
    ));
    // A multiplier of 2^16 (0.5 · 65536 / 0.5) leaves no right shift.
    assert!(matches!(
        error(int8_weights(), Q::tensor(65536.0, 0), None),
        KernelError::UnsupportedParameter { .. }
    ));
    // An int16 activation with a zero point.
    let bytes = one_op(
        Op::FULLY_CONNECTED,
        options(Act::NONE),
        T::INT16,
        &[1, 2],
        Some(Q::tensor(0.5, 3)),
        &[1, 2],
        int8_weights(),
        Some(Q::tensor(1.0, 0)),
        None,
        &[1, 1],
        Some(Q::tensor(0.5, 0)),
    );
    assert!(matches!(
        kernel_error(&bytes, &input),
        KernelError::UnsupportedParameter { .. }
    ));
}
