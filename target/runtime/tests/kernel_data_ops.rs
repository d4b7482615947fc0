//! SUB, LEAKY_RELU, PAD/PADV2 and STRIDED_SLICE as one-op models: property
//! tests against plain reference loops written the way TFLM's reference
//! kernels are (one output element at a time, indices from scratch), and
//! the typed errors for bad shapes, types and quantisation.

mod one_op;

use hilt_runtime::interpreter::InterpreterError;
use hilt_runtime::kernels::fixed_point::{
    multiply_by_quantized_multiplier, multiply_by_quantized_multiplier_smaller_than_one,
    quantize_multiplier, quantize_multiplier_smaller_than_one_exp,
};
use hilt_runtime::kernels::{KernelError, QuantProblem};
use hilt_runtime::schema::{ActivationFunctionType as Act, BuiltinOperator as Op, TensorType as T};
use hilt_runtime::writer::{ModelWriter, Options, f32_bytes, i32_bytes};
use one_op::*;
use proptest::prelude::*;

/// TFLM's quantised SUB, element by element (`bits` 8 or 16).
#[allow(clippy::too_many_arguments)]
fn reference_sub(
    a: &[i32],
    b: &[i32],
    shapes: &(Vec<i32>, Vec<i32>, Vec<i32>),
    qa: (f32, i32),
    qb: (f32, i32),
    qo: (f32, i32),
    act: Act,
    bits: u32,
) -> Vec<i32> {
    let left_shift = if bits == 8 { 20 } else { 15 };
    let twice_max = 2.0 * f64::from(qa.0.max(qb.0));
    let (m1, s1) = quantize_multiplier_smaller_than_one_exp(f64::from(qa.0) / twice_max).unwrap();
    let (m2, s2) = quantize_multiplier_smaller_than_one_exp(f64::from(qb.0) / twice_max).unwrap();
    let (mo, so) = quantize_multiplier_smaller_than_one_exp(
        twice_max / (f64::from(1 << left_shift) * f64::from(qo.0)),
    )
    .unwrap();
    let (tmin, tmax) = if bits == 8 {
        (-128, 127)
    } else {
        (-32768, 32767)
    };
    let (lo, hi) = act_range_q(act, qo.0, qo.1, tmin, tmax);
    let mut out = Vec::new();
    for_each_index(&shapes.2, |idx| {
        let x = a[broadcast_index(&shapes.0, &shapes.2, idx)];
        let y = b[broadcast_index(&shapes.1, &shapes.2, idx)];
        let sx = multiply_by_quantized_multiplier_smaller_than_one(
            (x - qa.1) * (1 << left_shift),
            m1,
            s1,
        );
        let sy = multiply_by_quantized_multiplier_smaller_than_one(
            (y - qb.1) * (1 << left_shift),
            m2,
            s2,
        );
        let r = multiply_by_quantized_multiplier_smaller_than_one(sx - sy, mo, so) + qo.1;
        out.push(r.clamp(lo, hi));
    });
    out
}

/// TFLM's quantised LEAKY_RELU, element by element.
fn reference_leaky_relu(
    x: &[i32],
    alpha: f32,
    qi: (f32, i32),
    qo: (f32, i32),
    bits: u32,
) -> Vec<i32> {
    let (ma, sa) = quantize_multiplier(f64::from(qi.0 * alpha / qo.0));
    let (mi, si) = quantize_multiplier(f64::from(qi.0 / qo.0));
    let (lo, hi) = if bits == 8 {
        (-128, 127)
    } else {
        (-32768, 32767)
    };
    x.iter()
        .map(|&v| {
            let d = v - qi.1;
            let r = if d >= 0 {
                multiply_by_quantized_multiplier(d, mi, si)
            } else if ma < 0 {
                -multiply_by_quantized_multiplier(d, -ma, sa)
            } else {
                multiply_by_quantized_multiplier(d, ma, sa)
            };
            (qo.1 + r).clamp(lo, hi)
        })
        .collect()
}

/// Padded output: the input element where the output index less the left
/// padding lies inside the input, else `fill`.
fn reference_pad<V: Copy>(input: &[V], shape: &[i32], pads: &[(i32, i32)], fill: V) -> Vec<V> {
    let out: Vec<i32> = shape
        .iter()
        .zip(pads)
        .map(|(&d, &(l, r))| d + l + r)
        .collect();
    let mut result = Vec::new();
    for_each_index(&out, |idx| {
        let mut flat = 0usize;
        let mut inside = true;
        for (d, &i) in idx.iter().enumerate() {
            let j = i as i32 - pads[d].0;
            inside &= (0..shape[d]).contains(&j);
            flat = flat * shape[d] as usize + j.max(0) as usize;
        }
        result.push(if inside { input[flat] } else { fill });
    });
    result
}

/// The indices a strided slice takes along one axis (TFLM's start/stop
/// rules, then every stride-th index).
fn axis_indices(
    size: i32,
    begin: i32,
    end: i32,
    stride: i32,
    masks: (bool, bool, bool),
) -> Vec<i32> {
    let (begin_mask, end_mask, shrink) = masks;
    let fix = |v: i32| {
        let v = if v < 0 { v + size } else { v };
        if stride > 0 {
            v.clamp(0, size)
        } else {
            v.clamp(-1, size - 1)
        }
    };
    let mut start = fix(begin);
    if begin_mask {
        start = if stride > 0 { 0 } else { size - 1 };
    }
    let stop = if shrink {
        if start >= size { start } else { start + 1 }
    } else if end_mask {
        if stride > 0 { size } else { -1 }
    } else {
        fix(end)
    };
    let mut v = Vec::new();
    let mut i = start;
    while (stride > 0 && i < stop) || (stride < 0 && i > stop) {
        v.push(i);
        i += stride;
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn sub_int8_matches_reference(
        shapes in broadcast_shapes_in(1..=6, 1..=3),
        sa in 0.001f32..0.5, sb in 0.001f32..0.5, so in 0.002f32..0.5,
        za in -128i32..=127, zb in -128i32..=127, zo in -128i32..=127,
        act in activation(),
        seed in any::<u64>(),
    ) {
        let mut rng = Rng(seed);
        let a = rng.tensor(T::INT8, elements(&shapes.0), 0.0, 0.0);
        let b = rng.tensor(T::INT8, elements(&shapes.1), 0.0, 0.0);
        let model = single_op(
            Op::SUB,
            &[(i8q(sa, za.into()), &shapes.0), (i8q(sb, zb.into()), &shapes.1)],
            (i8q(so, zo.into()), &shapes.2),
            Options::Sub { activation: act },
        );
        let got = run(&model, &[&a, &b]).unwrap();
        let wide = |v: &[u8]| i8s(v).into_iter().map(i32::from).collect::<Vec<_>>();
        let want = reference_sub(&wide(&a), &wide(&b), &shapes, (sa, za), (sb, zb), (so, zo), act, 8);
        prop_assert_eq!(wide(&got[0]), want);
    }

    #[test]
    fn sub_int16_matches_reference(
        shapes in broadcast_shapes(),
        sa in 0.0001f32..0.01, sb in 0.0001f32..0.01, so in 0.0002f32..0.01,
        act in activation(),
        seed in any::<u64>(),
    ) {
        let mut rng = Rng(seed);
        let a = rng.tensor(T::INT16, elements(&shapes.0), 0.0, 0.0);
        let b = rng.tensor(T::INT16, elements(&shapes.1), 0.0, 0.0);
        let model = single_op(
            Op::SUB,
            &[(i16q(sa, 0), &shapes.0), (i16q(sb, 0), &shapes.1)],
            (i16q(so, 0), &shapes.2),
            Options::Sub { activation: act },
        );
        let got = run(&model, &[&a, &b]).unwrap();
        let wide = |v: &[u8]| i16s(v).into_iter().map(i32::from).collect::<Vec<_>>();
        let want = reference_sub(&wide(&a), &wide(&b), &shapes, (sa, 0), (sb, 0), (so, 0), act, 16);
        prop_assert_eq!(wide(&got[0]), want);
    }

    #[test]
    fn sub_float_matches_reference(shapes in broadcast_shapes(), seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let a = rng.tensor(T::FLOAT32, elements(&shapes.0), -4.0, 4.0);
        let b = rng.tensor(T::FLOAT32, elements(&shapes.1), -4.0, 4.0);
        let model = single_op(
            Op::SUB,
            &[(F32, &shapes.0), (F32, &shapes.1)],
            (F32, &shapes.2),
            Options::Sub { activation: Act::RELU6 },
        );
        let got = f32s(&run(&model, &[&a, &b]).unwrap()[0]);
        let (fa, fb) = (f32s(&a), f32s(&b));
        let mut want = Vec::new();
        for_each_index(&shapes.2, |idx| {
            let d = fa[broadcast_index(&shapes.0, &shapes.2, idx)]
                - fb[broadcast_index(&shapes.1, &shapes.2, idx)];
            want.push(d.clamp(0.0, 6.0));
        });
        prop_assert_eq!(got, want);
    }

    #[test]
    fn leaky_relu_quantized_matches_reference(
        n in 1usize..300,
        alpha in -2.0f32..2.0,
        si in 0.0005f32..0.5, so in 0.0005f32..0.5,
        zi in -128i32..=127, zo in -128i32..=127,
        int16 in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mut rng = Rng(seed);
        let shape = [1, n as i32];
        let (dtype, bits, zi, zo) = if int16 { (T::INT16, 16, 0, 0) } else { (T::INT8, 8, zi, zo) };
        let x = rng.tensor(dtype, n, 0.0, 0.0);
        let model = single_op(
            Op::LEAKY_RELU,
            &[(q(dtype, si, zi.into()), &shape)],
            (q(dtype, so, zo.into()), &shape),
            Options::LeakyRelu { alpha },
        );
        let got = run(&model, &[&x]).unwrap();
        let wide = |v: &[u8]| -> Vec<i32> {
            if int16 { i16s(v).into_iter().map(i32::from).collect() } else { i8s(v).into_iter().map(i32::from).collect() }
        };
        prop_assert_eq!(wide(&got[0]), reference_leaky_relu(&wide(&x), alpha, (si, zi), (so, zo), bits));
    }

    #[test]
    fn pad_matches_reference(
        shape in proptest::collection::vec(1i32..=4, 1..=5),
        pads in proptest::collection::vec((0i32..=2, 0i32..=2), 5),
        zp in -128i32..=127,
        v2 in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let pads = &pads[..shape.len()];
        let out_shape: Vec<i32> = shape.iter().zip(pads).map(|(&d, &(l, r))| d + l + r).collect();
        let flat: Vec<i32> = pads.iter().flat_map(|&(l, r)| [l, r]).collect();
        let pad_shape = [shape.len() as i32, 2];
        let mut constants = vec![(T::INT32, &pad_shape[..], i32_bytes(&flat))];
        // PADV2 fills with its constant (quantised like the output); PAD
        // with the output zero point.
        let fill = if v2 { 7i8 } else { zp as i8 };
        if v2 {
            constants.push((T::INT8, &[][..], vec![fill as u8]));
        }
        let x = Rng(seed).tensor(T::INT8, elements(&shape), 0.0, 0.0);
        let ty = i8q(0.05, zp.into());
        let mut model = op_with_constants(
            if v2 { Op::PADV2 } else { Op::PAD },
            &[(ty, &shape)],
            &constants,
            (ty, &out_shape),
            Options::None,
        );
        if v2 {
            // The constant needs the output's quantisation: rebuild with it.
            let mut w = ModelWriter::new();
            let input = w.input("input", T::INT8, &shape);
            w.quantize(input, 0.05, zp.into());
            let paddings = w.constant("paddings", T::INT32, &[shape.len() as i32, 2], &i32_bytes(&flat));
            let value = w.constant("value", T::INT8, &[], &[fill as u8]);
            w.quantize(value, 0.05, zp.into());
            let out = w.output("output", T::INT8, &out_shape);
            w.quantize(out, 0.05, zp.into());
            w.op(Op::PADV2, &[Some(input), Some(paddings), Some(value)], &[out], Options::None);
            model = w.finish();
        }
        let got = i8s(&run(&model, &[&x]).unwrap()[0]);
        prop_assert_eq!(got, reference_pad(&i8s(&x), &shape, pads, fill));
    }

    #[test]
    fn pad_float_matches_reference(
        shape in proptest::collection::vec(1i32..=4, 1..=4),
        pads in proptest::collection::vec((0i32..=3, 0i32..=3), 4),
        seed in any::<u64>(),
    ) {
        let pads = &pads[..shape.len()];
        let out_shape: Vec<i32> = shape.iter().zip(pads).map(|(&d, &(l, r))| d + l + r).collect();
        let flat: Vec<i32> = pads.iter().flat_map(|&(l, r)| [l, r]).collect();
        let x = Rng(seed).tensor(T::FLOAT32, elements(&shape), -3.0, 3.0);
        let model = op_with_constants(
            Op::PAD,
            &[(F32, &shape)],
            &[(T::INT32, &[shape.len() as i32, 2], i32_bytes(&flat))],
            (F32, &out_shape),
            Options::None,
        );
        let got = f32s(&run(&model, &[&x]).unwrap()[0]);
        prop_assert_eq!(got, reference_pad(&f32s(&x), &shape, pads, 0.0));
    }

    #[test]
    fn strided_slice_matches_reference(
        shape in proptest::collection::vec(1i32..=5, 1..=4),
        spec in proptest::collection::vec((-7i32..7, -7i32..7, prop_oneof![-3i32..=-1, 1i32..=3]), 4),
        begin_mask in 0i32..16, end_mask in 0i32..16, shrink in 0i32..16,
        int16 in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let n = shape.len();
        let spec = &spec[..n];
        let bit = |m: i32, d: usize| m & (1 << d) != 0;
        let per_axis: Vec<Vec<i32>> = (0..n)
            .map(|d| axis_indices(shape[d], spec[d].0, spec[d].1, spec[d].2,
                (bit(begin_mask, d), bit(end_mask, d), bit(shrink, d))))
            .collect();
        // A shrunk axis with no element has no valid output shape.
        prop_assume!((0..n).all(|d| !bit(shrink, d) || per_axis[d].len() == 1));
        // Empty outputs are left out: the interpreter has no zero-byte tensors.
        prop_assume!(per_axis.iter().all(|v| !v.is_empty()));
        let out_shape: Vec<i32> = (0..n)
            .filter(|&d| !bit(shrink, d))
            .map(|d| per_axis[d].len() as i32)
            .collect();
        let (dtype, ty) = if int16 { (T::INT16, i16q(0.01, 0)) } else { (T::INT8, i8q(0.1, -3)) };
        let x = Rng(seed).tensor(dtype, elements(&shape), 0.0, 0.0);
        let vector = |f: fn(&(i32, i32, i32)) -> i32| i32_bytes(&spec.iter().map(f).collect::<Vec<_>>());
        let len = [n as i32];
        let model = op_with_constants(
            Op::STRIDED_SLICE,
            &[(ty, &shape)],
            &[
                (T::INT32, &len, vector(|s| s.0)),
                (T::INT32, &len, vector(|s| s.1)),
                (T::INT32, &len, vector(|s| s.2)),
            ],
            (ty, &out_shape),
            Options::StridedSlice {
                begin_mask, end_mask, shrink_axis_mask: shrink, ellipsis_mask: 0, new_axis_mask: 0,
            },
        );
        let got = run(&model, &[&x]).unwrap();
        let e = if int16 { 2 } else { 1 };
        let counts: Vec<i32> = per_axis.iter().map(|v| v.len() as i32).collect();
        let mut want = Vec::new();
        for_each_index(&counts, |idx| {
            let flat = (0..n).fold(0usize, |acc, d| acc * shape[d] as usize + per_axis[d][idx[d]] as usize);
            want.extend_from_slice(&x[flat * e..flat * e + e]);
        });
        prop_assert_eq!(&got[0], &want);
    }
}

#[test]
fn sub_refuses_mixed_types_and_bad_quantisation() {
    let s = [2, 2];
    let model = single_op(
        Op::SUB,
        &[(i8q(0.1, 0), &s), (i16q(0.1, 0), &s)],
        (i8q(0.1, 0), &s),
        Options::Sub {
            activation: Act::NONE,
        },
    );
    assert!(matches!(
        kernel_error(&model, &[&[0; 4], &[0; 8]]),
        KernelError::UnsupportedType { tensor: 1, .. }
    ));
    // A negative output scale names the output (tensor 2).
    let model = single_op(
        Op::SUB,
        &[(i8q(0.1, 0), &s), (i8q(0.1, 0), &s)],
        (i8q(-0.1, 0), &s),
        Options::Sub {
            activation: Act::NONE,
        },
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 4], &[0; 4]]),
        KernelError::BadQuantization {
            tensor: 2,
            problem: QuantProblem::Scale {
                channel: 0,
                bits: (-0.1f32).to_bits()
            }
        }
    );
    // Shapes that do not broadcast to the output.
    let model = single_op(
        Op::SUB,
        &[(F32, &[2, 3]), (F32, &[3, 3])],
        (F32, &[2, 3]),
        Options::Sub {
            activation: Act::NONE,
        },
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 24], &[0; 36]]),
        KernelError::ShapeMismatch { tensor: 2 }
    );
}

#[test]
fn leaky_relu_refuses_bad_zero_points_and_missing_options() {
    let s = [4];
    let model = single_op(
        Op::LEAKY_RELU,
        &[(i8q(0.1, 300), &s)],
        (i8q(0.1, 0), &s),
        Options::LeakyRelu { alpha: 0.2 },
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 4]]),
        KernelError::BadQuantization {
            tensor: 0,
            problem: QuantProblem::ZeroPoint {
                channel: 0,
                zero_point: 300,
                dtype: 9
            }
        }
    );
    let model = single_op(Op::LEAKY_RELU, &[(F32, &s)], (F32, &s), Options::None);
    assert_eq!(
        kernel_error(&model, &[&[0; 16]]),
        KernelError::MissingOptions
    );
}

#[test]
fn leaky_relu_float_is_tflms() {
    let s = [5];
    let model = single_op(
        Op::LEAKY_RELU,
        &[(F32, &s)],
        (F32, &s),
        Options::LeakyRelu { alpha: 0.5 },
    );
    let x = hilt_runtime::writer::f32_bytes(&[-2.0, -0.5, 0.0, 1.5, 3.0]);
    assert_eq!(
        f32s(&run(&model, &[&x]).unwrap()[0]),
        [-1.0, -0.25, 0.0, 1.5, 3.0]
    );
}

#[test]
fn pad_refuses_bad_paddings() {
    let pad = |pads: &[i32], out: &[i32]| {
        op_with_constants(
            Op::PAD,
            &[(F32, &[2, 2])],
            &[(T::INT32, &[2, 2], i32_bytes(pads))],
            (F32, out),
            Options::None,
        )
    };
    assert!(matches!(
        kernel_error(&pad(&[-1, 0, 0, 0], &[1, 2]), &[&[0; 16]]),
        KernelError::UnsupportedParameter { .. }
    ));
    // Paddings that do not give the output's shape.
    assert_eq!(
        kernel_error(&pad(&[1, 0, 0, 0], &[2, 2]), &[&[0; 16]]),
        KernelError::ShapeMismatch { tensor: 2 }
    );
    // Paddings that are a graph input, not a constant.
    let model = single_op(
        Op::PAD,
        &[
            (F32, &[2, 2]),
            (
                Ty {
                    dtype: T::INT32,
                    quant: None,
                },
                &[2, 2],
            ),
        ],
        (F32, &[2, 2]),
        Options::None,
    );
    assert!(matches!(
        kernel_error(&model, &[&[0; 16], &[0; 16]]),
        KernelError::UnsupportedParameter { .. }
    ));
    // Input and output quantisation must agree (PAD never requantises).
    let model = op_with_constants(
        Op::PAD,
        &[(i8q(0.1, 0), &[2])],
        &[(T::INT32, &[1, 2], i32_bytes(&[1, 1]))],
        (i8q(0.2, 0), &[4]),
        Options::None,
    );
    assert!(matches!(
        kernel_error(&model, &[&[0; 2]]),
        KernelError::UnsupportedParameter { .. }
    ));
}

#[test]
fn strided_slice_refuses_bad_parameters() {
    let slice = |strides: i32, out: &[i32], ellipsis: i32| {
        op_with_constants(
            Op::STRIDED_SLICE,
            &[(F32, &[4])],
            &[
                (T::INT32, &[1], i32_bytes(&[0])),
                (T::INT32, &[1], i32_bytes(&[4])),
                (T::INT32, &[1], i32_bytes(&[strides])),
            ],
            (F32, out),
            Options::StridedSlice {
                begin_mask: 0,
                end_mask: 0,
                shrink_axis_mask: 0,
                ellipsis_mask: ellipsis,
                new_axis_mask: 0,
            },
        )
    };
    assert!(matches!(
        kernel_error(&slice(0, &[4], 0), &[&[0; 16]]),
        KernelError::UnsupportedParameter { .. }
    ));
    assert_eq!(
        kernel_error(&slice(2, &[3], 0), &[&[0; 16]]),
        KernelError::ShapeMismatch { tensor: 4 }
    );
    assert!(matches!(
        kernel_error(&slice(1, &[4], 1), &[&[0; 16]]),
        KernelError::UnsupportedParameter { .. }
    ));
    assert_eq!(
        kernel_error(
            &single_op(
                Op::STRIDED_SLICE,
                &[(F32, &[4])],
                (F32, &[4]),
                Options::None
            ),
            &[&[0; 16]]
        ),
        KernelError::MissingOptions
    );
}

/// TFLM's quantised MUL, element by element (`bits` 8 or 16).
fn reference_mul(
    a: &[i32],
    b: &[i32],
    shapes: &(Vec<i32>, Vec<i32>, Vec<i32>),
    quants: [(f32, i32); 3],
    act: Act,
    bits: u32,
) -> Vec<i32> {
    let [qa, qb, qo] = quants;
    let (m, s) = quantize_multiplier(f64::from(qa.0) * f64::from(qb.0) / f64::from(qo.0));
    let (tmin, tmax) = if bits == 8 {
        (-128, 127)
    } else {
        (-32768, 32767)
    };
    let (lo, hi) = act_range_q(act, qo.0, qo.1, tmin, tmax);
    let mut out = Vec::new();
    for_each_index(&shapes.2, |idx| {
        let x = a[broadcast_index(&shapes.0, &shapes.2, idx)] - qa.1;
        let y = b[broadcast_index(&shapes.1, &shapes.2, idx)] - qb.1;
        let r = qo.1 + multiply_by_quantized_multiplier(x * y, m, s);
        out.push(r.clamp(lo, hi));
    });
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn mul_quantized_matches_reference(
        shapes in broadcast_shapes_in(1..=6, 1..=3),
        sa in 0.001f32..0.5, sb in 0.001f32..0.5, so in 0.0005f32..0.5,
        za in -128i32..=127, zb in -128i32..=127, zo in -128i32..=127,
        act in activation(),
        int16 in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mut rng = Rng(seed);
        let (dtype, bits, za, zb, zo) =
            if int16 { (T::INT16, 16, 0, 0, 0) } else { (T::INT8, 8, za, zb, zo) };
        let a = rng.tensor(dtype, elements(&shapes.0), 0.0, 0.0);
        let b = rng.tensor(dtype, elements(&shapes.1), 0.0, 0.0);
        let model = single_op(
            Op::MUL,
            &[(q(dtype, sa, za.into()), &shapes.0), (q(dtype, sb, zb.into()), &shapes.1)],
            (q(dtype, so, zo.into()), &shapes.2),
            Options::Mul { activation: act },
        );
        let got = run(&model, &[&a, &b]).unwrap();
        let wide = |v: &[u8]| -> Vec<i32> {
            if int16 { i16s(v).into_iter().map(i32::from).collect() } else { i8s(v).into_iter().map(i32::from).collect() }
        };
        let want = reference_mul(&wide(&a), &wide(&b), &shapes, [(sa, za), (sb, zb), (so, zo)], act, bits);
        prop_assert_eq!(wide(&got[0]), want);
    }

    #[test]
    fn mul_float_matches_reference(shapes in broadcast_shapes(), seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let a = rng.tensor(T::FLOAT32, elements(&shapes.0), -4.0, 4.0);
        let b = rng.tensor(T::FLOAT32, elements(&shapes.1), -4.0, 4.0);
        let model = single_op(
            Op::MUL,
            &[(F32, &shapes.0), (F32, &shapes.1)],
            (F32, &shapes.2),
            Options::Mul { activation: Act::NONE },
        );
        let got = f32s(&run(&model, &[&a, &b]).unwrap()[0]);
        let (fa, fb) = (f32s(&a), f32s(&b));
        let mut want = Vec::new();
        for_each_index(&shapes.2, |idx| {
            want.push(fa[broadcast_index(&shapes.0, &shapes.2, idx)]
                * fb[broadcast_index(&shapes.1, &shapes.2, idx)]);
        });
        prop_assert_eq!(got, want);
    }
}

#[test]
fn mul_refuses_int16_zero_points_and_bad_scales() {
    let s = [3];
    let model = single_op(
        Op::MUL,
        &[(i16q(0.1, 1), &s), (i16q(0.1, 0), &s)],
        (i16q(0.1, 0), &s),
        Options::Mul {
            activation: Act::NONE,
        },
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 6], &[0; 6]]),
        KernelError::BadQuantization {
            tensor: 0,
            problem: QuantProblem::ZeroPointForKernel {
                zero_point: 1,
                min: 0,
                max: 0
            }
        }
    );
    let model = single_op(
        Op::MUL,
        &[(i8q(0.1, 0), &s), (i8q(f32::INFINITY, 0), &s)],
        (i8q(0.1, 0), &s),
        Options::Mul {
            activation: Act::NONE,
        },
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 3], &[0; 3]]),
        KernelError::BadQuantization {
            tensor: 1,
            problem: QuantProblem::Scale {
                channel: 0,
                bits: f32::INFINITY.to_bits()
            }
        }
    );
}

/// TFLM's integer MEAN, SUM or REDUCE_MAX (`op`) of `x` (shape `shape`)
/// over the axes flagged in `reduced`: per output (kept axes row-major), the
/// raw sum then the requantising formula (SUM: without the count folded
/// in), or the largest value.
fn reference_reduce(
    op: Op,
    x: &[i32],
    shape: &[i32],
    reduced: &[bool],
    qi: (f32, i32),
    qo: (f32, i32),
    bits: u32,
) -> Vec<i32> {
    let kept: Vec<i32> = shape
        .iter()
        .zip(reduced)
        .map(|(&d, &r)| if r { 1 } else { d })
        .collect();
    let n: i64 = shape
        .iter()
        .zip(reduced)
        .filter(|(_, r)| **r)
        .map(|(&d, _)| i64::from(d))
        .product();
    let mut sums = vec![0i32; elements(&kept)];
    let mut maxima = vec![i32::MIN; elements(&kept)];
    for_each_index(shape, |idx| {
        let mut flat_in = 0usize;
        let mut flat_out = 0usize;
        for d in 0..shape.len() {
            flat_in = flat_in * shape[d] as usize + idx[d];
            flat_out = flat_out * kept[d] as usize + if reduced[d] { 0 } else { idx[d] };
        }
        sums[flat_out] += x[flat_in];
        maxima[flat_out] = maxima[flat_out].max(x[flat_in]);
    });
    if op == Op::REDUCE_MAX {
        return maxima;
    }
    let (lo, hi) = if bits == 8 {
        (-128, 127)
    } else {
        (-32768, 32767)
    };
    let (m, shift) = quantize_multiplier(f64::from(qi.0) / f64::from(qo.0));
    sums.iter()
        .map(|&s| {
            let shifted = (i64::from(s) - i64::from(qi.1) * n) as i32;
            if op == Op::SUM {
                return (multiply_by_quantized_multiplier(shifted, m, shift) + qo.1).clamp(lo, hi);
            }
            // MEAN requantises whatever the two quantisations (TFLM's
            // build does; the one-op vectors `mean_*_same_*` hold it).
            let log2 = 63 - (n as u64).leading_zeros() as i32;
            let up = log2.min(32).min(31 + shift);
            let m = ((i64::from(m) << up) / n) as i32;
            (multiply_by_quantized_multiplier(shifted, m, shift - up) + qo.1).clamp(lo, hi)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn quantized_reductions_match_reference(
        op in prop_oneof![Just(Op::MEAN), Just(Op::SUM), Just(Op::REDUCE_MAX)],
        shape in proptest::collection::vec(1i32..=5, 1..=4),
        mask in 1u32..16,
        keep_dims in any::<bool>(),
        same in any::<bool>(),
        si in 0.001f32..0.5, so in 0.001f32..0.5,
        zi in -128i32..=127, zo in -128i32..=127,
        int16 in any::<bool>(),
        seed in any::<u64>(),
    ) {
        // TFLM's REDUCE_MAX is int8 only, with the input's quantisation.
        let (int16, same) = if op == Op::REDUCE_MAX { (false, true) } else { (int16, same) };
        let rank = shape.len();
        let reduced: Vec<bool> = (0..rank).map(|d| mask & (1 << d) != 0).collect();
        prop_assume!(reduced.iter().any(|&r| r));
        let axes: Vec<i32> = (0..rank as i32).filter(|&d| reduced[d as usize]).collect();
        let out_shape: Vec<i32> = if keep_dims {
            shape.iter().zip(&reduced).map(|(&d, &r)| if r { 1 } else { d }).collect()
        } else {
            shape.iter().zip(&reduced).filter(|(_, r)| !**r).map(|(&d, _)| d).collect()
        };
        let (dtype, bits, zi, zo) = if int16 { (T::INT16, 16, 0, 0) } else { (T::INT8, 8, zi, zo) };
        let (so, zo) = if same { (si, zi) } else { (so, zo) };
        let x = Rng(seed).tensor(dtype, elements(&shape), 0.0, 0.0);
        let model = op_with_constants(
            op,
            &[(q(dtype, si, zi.into()), &shape)],
            &[(T::INT32, &[axes.len() as i32], i32_bytes(&axes))],
            (q(dtype, so, zo.into()), &out_shape),
            Options::Reducer { keep_dims },
        );
        let got = run(&model, &[&x]).unwrap();
        let wide = |v: &[u8]| -> Vec<i32> {
            if int16 { i16s(v).into_iter().map(i32::from).collect() } else { i8s(v).into_iter().map(i32::from).collect() }
        };
        prop_assert_eq!(wide(&got[0]), reference_reduce(op, &wide(&x), &shape, &reduced, (si, zi), (so, zo), bits));
    }

    #[test]
    fn concatenation_matches_reference(
        base in proptest::collection::vec(1i32..=4, 1..=4),
        axis_pick in 0usize..4,
        sizes in proptest::collection::vec(1i32..=3, 1..=4),
        negative in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let rank = base.len();
        let axis = axis_pick % rank;
        let mut rng = Rng(seed);
        let shapes: Vec<Vec<i32>> = sizes.iter().map(|&s| {
            let mut sh = base.clone();
            sh[axis] = s;
            sh
        }).collect();
        let mut out_shape = base.clone();
        out_shape[axis] = sizes.iter().sum();
        let inputs: Vec<Vec<u8>> = shapes.iter().map(|s| rng.tensor(T::INT16, elements(s), 0.0, 0.0)).collect();
        let ty = i16q(0.01, 0);
        let specs: Vec<(Ty, &[i32])> = shapes.iter().map(|s| (ty, &s[..])).collect();
        let model = single_op(
            Op::CONCATENATION,
            &specs,
            (ty, &out_shape),
            Options::Concatenation {
                axis: if negative { axis as i32 - rank as i32 } else { axis as i32 },
                activation: Act::NONE,
            },
        );
        let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        let got = i16s(&run(&model, &refs).unwrap()[0]);
        // Output element by element: find the input its axis index falls in.
        let mut want = Vec::new();
        for_each_index(&out_shape, |idx| {
            let (mut k, mut j) = (0, idx[axis] as i32);
            while j >= sizes[k] {
                j -= sizes[k];
                k += 1;
            }
            let flat = (0..rank).fold(0usize, |acc, d| {
                let i = if d == axis { j as usize } else { idx[d] };
                acc * shapes[k][d] as usize + i
            });
            want.push(i16s(&inputs[k])[flat]);
        });
        prop_assert_eq!(got, want);
    }

    #[test]
    fn split_matches_reference(
        base in proptest::collection::vec(1i32..=4, 1..=4),
        axis_pick in 0usize..4,
        parts in 1i32..=3,
        seed in any::<u64>(),
    ) {
        let rank = base.len();
        let axis = axis_pick % rank;
        let mut shape = base.clone();
        shape[axis] *= parts;
        let mut part_shape = base.clone();
        part_shape[axis] = base[axis];
        let x = Rng(seed).tensor(T::FLOAT32, elements(&shape), -2.0, 2.0);
        let mut w = ModelWriter::new();
        let axis_t = w.constant("axis", T::INT32, &[], &i32_bytes(&[axis as i32]));
        let input = w.input("input", T::FLOAT32, &shape);
        let outs: Vec<_> = (0..parts).map(|i| w.output(&format!("out{i}"), T::FLOAT32, &part_shape)).collect();
        w.op(Op::SPLIT, &[Some(axis_t), Some(input)], &outs, Options::None);
        let got = run(&w.finish(), &[&x]).unwrap();
        let fx = f32s(&x);
        for (p, out) in got.iter().enumerate() {
            let mut want = Vec::new();
            for_each_index(&part_shape, |idx| {
                let flat = (0..rank).fold(0usize, |acc, d| {
                    let i = if d == axis { idx[d] + (p as i32 * base[axis]) as usize } else { idx[d] };
                    acc * shape[d] as usize + i
                });
                want.push(fx[flat]);
            });
            prop_assert_eq!(f32s(out), want);
        }
    }

    #[test]
    fn prelu_matches_reference(
        shapes in broadcast_shapes_in(1..=4, 1..=4),
        si in 0.001f32..0.5, sa in 0.001f32..0.1, so in 0.001f32..0.5,
        zi in -128i32..=127, za in -128i32..=127, zo in -128i32..=127,
        int16 in any::<bool>(),
        seed in any::<u64>(),
    ) {
        // The alpha broadcasts into the input's shape (the output's).
        let (in_shape, alpha_shape) = (shapes.2.clone(), shapes.1.clone());
        let mut rng = Rng(seed);
        let (dtype, bits, zi, zo) = if int16 { (T::INT16, 16, 0, 0) } else { (T::INT8, 8, zi, zo) };
        let x = rng.tensor(dtype, elements(&in_shape), 0.0, 0.0);
        let alpha = rng.tensor(T::INT8, elements(&alpha_shape), 0.0, 0.0);
        let model = single_op(
            Op::PRELU,
            &[(q(dtype, si, zi.into()), &in_shape), (i8q(sa, za.into()), &alpha_shape)],
            (q(dtype, so, zo.into()), &in_shape),
            Options::None,
        );
        let got = run(&model, &[&x, &alpha]).unwrap();
        let wide = |v: &[u8]| -> Vec<i32> {
            if int16 { i16s(v).into_iter().map(i32::from).collect() } else { i8s(v).into_iter().map(i32::from).collect() }
        };
        let (xs, alphas) = (wide(&x), i8s(&alpha));
        let (m1, s1) = quantize_multiplier(f64::from(si) / f64::from(so));
        let (m2, s2) = quantize_multiplier(f64::from(si) * f64::from(sa) / f64::from(so));
        let (lo, hi) = if bits == 8 { (-128, 127) } else { (-32768, 32767) };
        let mut want = Vec::new();
        for_each_index(&in_shape, |idx| {
            let v = xs[broadcast_index(&in_shape, &in_shape, idx)] - zi;
            let a = i32::from(alphas[broadcast_index(&alpha_shape, &in_shape, idx)]) - za;
            let r = if v >= 0 {
                multiply_by_quantized_multiplier(v, m1, s1)
            } else {
                multiply_by_quantized_multiplier(v * a, m2, s2)
            };
            want.push((r + zo).clamp(lo, hi));
        });
        prop_assert_eq!(wide(&got[0]), want);
    }
}

#[test]
fn reductions_refuse_what_tflm_refuses() {
    let axes = [(T::INT32, &[1][..], i32_bytes(&[0]))];
    // REDUCE_MAX int8 requantising, and REDUCE_MAX int16: TFLM takes neither.
    let model = op_with_constants(
        Op::REDUCE_MAX,
        &[(i8q(0.1, 0), &[4, 2])],
        &axes,
        (i8q(0.2, 0), &[2]),
        Options::Reducer { keep_dims: false },
    );
    assert!(matches!(
        kernel_error(&model, &[&[0; 8]]),
        KernelError::UnsupportedParameter { .. }
    ));
    let model = op_with_constants(
        Op::REDUCE_MAX,
        &[(i16q(0.1, 0), &[4, 2])],
        &axes,
        (i16q(0.1, 0), &[2]),
        Options::Reducer { keep_dims: false },
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 16]]),
        KernelError::UnsupportedType {
            tensor: 2,
            dtype: T::INT16.0
        }
    );
    // SUM int32: not a TFLM type for it.
    let model = op_with_constants(
        Op::SUM,
        &[(q(T::INT32, 0.0, 0), &[4, 2])],
        &axes,
        (q(T::INT32, 0.0, 0), &[2]),
        Options::Reducer { keep_dims: false },
    );
    assert!(matches!(
        kernel_error(&model, &[&[0; 32]]),
        KernelError::UnsupportedType { .. }
    ));
}

#[test]
fn float_reduce_max_starts_from_the_lowest_finite_value() {
    // As TFLM: -inf rows give -FLT_MAX, NaN is passed over.
    let model = op_with_constants(
        Op::REDUCE_MAX,
        &[(F32, &[2, 2])],
        &[(T::INT32, &[1], i32_bytes(&[1]))],
        (F32, &[2]),
        Options::Reducer { keep_dims: false },
    );
    let x = f32_bytes(&[f32::NEG_INFINITY, f32::NEG_INFINITY, f32::NAN, 1.5]);
    let got = run(&model, &[&x]).unwrap();
    assert_eq!(f32s(&got[0]), vec![f32::MIN, 1.5]);
}

#[test]
fn shape_ops_refuse_bad_inputs() {
    // MEAN over an axis the input lacks.
    let model = op_with_constants(
        Op::MEAN,
        &[(F32, &[2, 3])],
        &[(T::INT32, &[1], i32_bytes(&[2]))],
        (F32, &[2]),
        Options::Reducer { keep_dims: false },
    );
    assert!(matches!(
        kernel_error(&model, &[&[0; 24]]),
        KernelError::UnsupportedParameter { .. }
    ));
    // CONCATENATION of shapes that differ off the axis.
    let model = single_op(
        Op::CONCATENATION,
        &[(F32, &[2, 3]), (F32, &[3, 3])],
        (F32, &[2, 6]),
        Options::Concatenation {
            axis: 1,
            activation: Act::NONE,
        },
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 24], &[0; 36]]),
        KernelError::ShapeMismatch { tensor: 1 }
    );
    // CONCATENATION with a fused activation (TFLM refuses it too).
    let model = single_op(
        Op::CONCATENATION,
        &[(F32, &[2]), (F32, &[2])],
        (F32, &[4]),
        Options::Concatenation {
            axis: 0,
            activation: Act::RELU,
        },
    );
    assert!(matches!(
        kernel_error(&model, &[&[0; 8], &[0; 8]]),
        KernelError::UnsupportedParameter { .. }
    ));
    // PRELU int16 with an int16 alpha (TFLM wants int8).
    let model = single_op(
        Op::PRELU,
        &[(i16q(0.1, 0), &[2]), (i16q(0.1, 0), &[2])],
        (i16q(0.1, 0), &[2]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 4], &[0; 4]]),
        KernelError::UnsupportedType {
            tensor: 1,
            dtype: T::INT16.0
        }
    );
    // SPLIT into unequal parts.
    let mut w = ModelWriter::new();
    let axis = w.constant("axis", T::INT32, &[], &i32_bytes(&[0]));
    let input = w.input("input", T::FLOAT32, &[3]);
    let a = w.output("a", T::FLOAT32, &[1]);
    let b = w.output("b", T::FLOAT32, &[2]);
    w.op(
        Op::SPLIT,
        &[Some(axis), Some(input)],
        &[a, b],
        Options::None,
    );
    assert!(matches!(
        kernel_error(&w.finish(), &[&[0; 12]]),
        KernelError::UnsupportedParameter { .. }
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    #[test]
    fn maximum_minimum_match_reference(
        shapes in broadcast_shapes(),
        maximum in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mut rng = Rng(seed);
        let a = rng.tensor(T::INT8, elements(&shapes.0), 0.0, 0.0);
        let b = rng.tensor(T::INT8, elements(&shapes.1), 0.0, 0.0);
        let ty = i8q(0.1, 3);
        let model = single_op(
            if maximum { Op::MAXIMUM } else { Op::MINIMUM },
            &[(ty, &shapes.0), (ty, &shapes.1)],
            (ty, &shapes.2),
            Options::None,
        );
        let got = i8s(&run(&model, &[&a, &b]).unwrap()[0]);
        let (xa, xb) = (i8s(&a), i8s(&b));
        let mut want = Vec::new();
        for_each_index(&shapes.2, |idx| {
            let (x, y) = (xa[broadcast_index(&shapes.0, &shapes.2, idx)], xb[broadcast_index(&shapes.1, &shapes.2, idx)]);
            want.push(if maximum { x.max(y) } else { x.min(y) });
        });
        prop_assert_eq!(got, want);
    }

    #[test]
    fn squared_difference_int8_matches_reference(
        shapes in broadcast_shapes(),
        sa in 0.001f32..0.5, sb in 0.001f32..0.5, so in 0.001f32..2.0,
        za in -128i32..=127, zb in -128i32..=127, zo in -128i32..=127,
        seed in any::<u64>(),
    ) {
        let mut rng = Rng(seed);
        let a = rng.tensor(T::INT8, elements(&shapes.0), 0.0, 0.0);
        let b = rng.tensor(T::INT8, elements(&shapes.1), 0.0, 0.0);
        let model = single_op(
            Op::SQUARED_DIFFERENCE,
            &[(i8q(sa, za.into()), &shapes.0), (i8q(sb, zb.into()), &shapes.1)],
            (i8q(so, zo.into()), &shapes.2),
            Options::None,
        );
        let got = i8s(&run(&model, &[&a, &b]).unwrap()[0]);
        let twice = 2.0 * f64::from(sa.max(sb));
        let (m1, s1) = quantize_multiplier_smaller_than_one_exp(f64::from(sa) / twice).unwrap();
        let (m2, s2) = quantize_multiplier_smaller_than_one_exp(f64::from(sb) / twice).unwrap();
        let (mo, s_o) = quantize_multiplier(twice * twice / (f64::from(1 << 14) * f64::from(so)));
        let (xa, xb) = (i8s(&a), i8s(&b));
        let mut want = Vec::new();
        for_each_index(&shapes.2, |idx| {
            let x = i32::from(xa[broadcast_index(&shapes.0, &shapes.2, idx)]) - za;
            let y = i32::from(xb[broadcast_index(&shapes.1, &shapes.2, idx)]) - zb;
            let d = multiply_by_quantized_multiplier_smaller_than_one(x * 128, m1, s1)
                - multiply_by_quantized_multiplier_smaller_than_one(y * 128, m2, s2);
            let r = multiply_by_quantized_multiplier(d * d, mo, s_o) + zo;
            want.push(r.clamp(-128, 127) as i8);
        });
        prop_assert_eq!(got, want);
    }

    #[test]
    fn tanh_int8_matches_reference(si in 0.002f32..0.3, zi in -128i32..=127, seed in any::<u64>()) {
        let x = Rng(seed).tensor(T::INT8, 64, 0.0, 0.0);
        let model = single_op(Op::TANH, &[(i8q(si, zi.into()), &[64])], (i8q(1.0 / 128.0, 0), &[64]), Options::None);
        let got = i8s(&run(&model, &[&x]).unwrap()[0]);
        // TFLM's loop, with the parameters derived from scratch.
        let real = f64::from(si) * f64::from(1 << 27);
        let shift = real.log2().floor() as i32 + 1;
        let m = libm::round(real / 2f64.powi(shift) * f64::from(1u32 << 31)) as i32;
        let radius = hilt_runtime::kernels::fixed_point::calculate_input_radius(4, shift, 31);
        let want: Vec<i8> = i8s(&x).iter().map(|&v| {
            let d = i32::from(v) - zi;
            if d <= -radius { -128 } else if d >= radius { 127 } else {
                let q4 = multiply_by_quantized_multiplier(d, m, shift);
                let q0 = hilt_runtime::kernels::fixed_point::tanh(q4, 4);
                hilt_runtime::kernels::fixed_point::rounding_divide_by_pot(q0, 24).clamp(-128, 127) as i8
            }
        }).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn transpose_matches_reference(
        shape in proptest::collection::vec(1i32..=4, 1..=6),
        seed in any::<u64>(),
    ) {
        let rank = shape.len();
        // A permutation from the seed (Fisher-Yates).
        let mut rng = Rng(seed);
        let mut perm: Vec<i32> = (0..rank as i32).collect();
        for i in (1..rank).rev() {
            perm.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
        }
        let out_shape: Vec<i32> = perm.iter().map(|&p| shape[p as usize]).collect();
        let x = rng.tensor(T::INT16, elements(&shape), 0.0, 0.0);
        let ty = i16q(0.01, 0);
        let model = op_with_constants(
            Op::TRANSPOSE,
            &[(ty, &shape)],
            &[(T::INT32, &[rank as i32], i32_bytes(&perm))],
            (ty, &out_shape),
            Options::None,
        );
        let got = i16s(&run(&model, &[&x]).unwrap()[0]);
        let xs = i16s(&x);
        let mut want = Vec::new();
        for_each_index(&out_shape, |idx| {
            let mut input_index = vec![0usize; rank];
            for (k, &p) in perm.iter().enumerate() {
                input_index[p as usize] = idx[k];
            }
            let flat = (0..rank).fold(0usize, |acc, d| acc * shape[d] as usize + input_index[d]);
            want.push(xs[flat]);
        });
        prop_assert_eq!(got, want);
    }
}

#[test]
fn elementwise_ops_refuse_bad_quantisation() {
    // MAXIMUM on inputs quantised differently from the output.
    let model = single_op(
        Op::MAXIMUM,
        &[(i8q(0.1, 0), &[2]), (i8q(0.2, 0), &[2])],
        (i8q(0.1, 0), &[2]),
        Options::None,
    );
    assert!(matches!(
        kernel_error(&model, &[&[0; 2], &[0; 2]]),
        KernelError::UnsupportedParameter { .. }
    ));
    // SQUARED_DIFFERENCE int16 with a zero point.
    let model = single_op(
        Op::SQUARED_DIFFERENCE,
        &[(i16q(0.1, 0), &[2]), (i16q(0.1, 4), &[2])],
        (i16q(0.1, 0), &[2]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 4], &[0; 4]]),
        KernelError::BadQuantization {
            tensor: 1,
            problem: QuantProblem::ZeroPointForKernel {
                zero_point: 4,
                min: 0,
                max: 0
            }
        }
    );
    // TANH int8 output not scaled 1/128.
    let model = single_op(
        Op::TANH,
        &[(i8q(0.1, 0), &[2])],
        (i8q(0.01, 0), &[2]),
        Options::None,
    );
    assert!(matches!(
        kernel_error(&model, &[&[0; 2]]),
        KernelError::UnsupportedParameter { .. }
    ));
    // TRANSPOSE with a repeated axis.
    let model = op_with_constants(
        Op::TRANSPOSE,
        &[(F32, &[2, 2])],
        &[(T::INT32, &[2], i32_bytes(&[0, 0]))],
        (F32, &[2, 2]),
        Options::None,
    );
    assert!(matches!(
        kernel_error(&model, &[&[0; 16]]),
        KernelError::UnsupportedParameter { .. }
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    #[test]
    fn rsqrt_int8_is_close_to_the_real_value(si in 0.01f32..0.5, so in 0.005f32..0.1, zi in -128i32..=0, zo in -128i32..=0, seed in any::<u64>()) {
        // Inputs at or above the zero point (non-negative reals).
        let mut rng = Rng(seed);
        let x: Vec<u8> = (0..64).map(|_| {
            let span = (127 - zi + 1) as u64;
            (zi + (rng.next_u64() % span) as i32) as i8 as u8
        }).collect();
        let model = single_op(Op::RSQRT, &[(i8q(si, zi.into()), &[64])], (i8q(so, zo.into()), &[64]), Options::None);
        let got = i8s(&run(&model, &[&x]).unwrap()[0]);
        for (&g, &v) in got.iter().zip(&i8s(&x)) {
            let real = f64::from(i32::from(v) - zi) * f64::from(si);
            let want = if real == 0.0 { 127 } else {
                (libm::round(1.0 / real.sqrt() / f64::from(so)) as i64 + i64::from(zo)).clamp(-128, 127) as i32
            };
            prop_assert!((i32::from(g) - want).abs() <= 1, "x={} got {} want {}", v, g, want);
        }
    }

    #[test]
    fn rsqrt_float_is_one_over_sqrt(seed in any::<u64>()) {
        let x = Rng(seed).tensor(T::FLOAT32, 32, 0.001, 100.0);
        let model = single_op(Op::RSQRT, &[(F32, &[32])], (F32, &[32]), Options::None);
        let got = f32s(&run(&model, &[&x]).unwrap()[0]);
        let want: Vec<f32> = f32s(&x).iter().map(|v| 1.0 / v.sqrt()).collect();
        prop_assert_eq!(got, want);
    }
}

#[test]
fn rsqrt_refuses_negative_inputs() {
    let model = single_op(
        Op::RSQRT,
        &[(i8q(0.1, 0), &[2])],
        (i8q(0.1, 0), &[2]),
        Options::None,
    );
    assert!(matches!(
        kernel_error(&model, &[&[4, (-1i8) as u8]]),
        KernelError::UnsupportedParameter { .. }
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    #[test]
    fn batch_matmul_matches_reference(
        batch in proptest::collection::vec((1i32..=3, 0u8..3), 0..=3),
        (m, k, n) in (1i32..=5, 1i32..=6, 1i32..=5),
        adj_x in any::<bool>(), adj_y in any::<bool>(),
        sl in 0.001f32..0.1, sr in 0.001f32..0.1, so in 0.001f32..0.5,
        zl in -128i32..=127, zr in -128i32..=127, zo in -128i32..=127,
        int16 in any::<bool>(),
        seed in any::<u64>(),
    ) {
        // Batch axes: both full, or one side broadcast (1).
        let lb: Vec<i32> = batch.iter().map(|&(d, mode)| if mode == 1 { 1 } else { d }).collect();
        let rb: Vec<i32> = batch.iter().map(|&(d, mode)| if mode == 2 { 1 } else { d }).collect();
        let ob: Vec<i32> = batch.iter().map(|&(d, _)| d).collect();
        let with = |b: &[i32], x: i32, y: i32| [b, &[x, y]].concat();
        let lhs_shape = if adj_x { with(&lb, k, m) } else { with(&lb, m, k) };
        let rhs_shape = if adj_y { with(&rb, n, k) } else { with(&rb, k, n) };
        let out_shape = with(&ob, m, n);
        let (dtype, zl, zr, zo) = if int16 { (T::INT16, 0, 0, 0) } else { (T::INT8, zl, zr, zo) };
        let mut rng = Rng(seed);
        let a = rng.tensor(dtype, elements(&lhs_shape), 0.0, 0.0);
        let b = rng.tensor(dtype, elements(&rhs_shape), 0.0, 0.0);
        let model = single_op(
            Op::BATCH_MATMUL,
            &[(q(dtype, sl, zl.into()), &lhs_shape), (q(dtype, sr, zr.into()), &rhs_shape)],
            (q(dtype, so, zo.into()), &out_shape),
            Options::BatchMatMul { adj_x, adj_y },
        );
        let got = run(&model, &[&a, &b]).unwrap();
        let wide = |v: &[u8]| -> Vec<i64> {
            if int16 { i16s(v).into_iter().map(i64::from).collect() } else { i8s(v).into_iter().map(i64::from).collect() }
        };
        let (xa, xb) = (wide(&a), wide(&b));
        let (mult, shift) = quantize_multiplier(f64::from(sl) * f64::from(sr) / f64::from(so));
        let (lo, hi) = if int16 { (-32768, 32767) } else { (-128, 127) };
        let mut want = Vec::new();
        for_each_index(&out_shape, |idx| {
            let nb = ob.len();
            let (i, j) = (idx[nb], idx[nb + 1]);
            let mut total = 0i64;
            for d in 0..k as usize {
                let mut li = idx[..nb].to_vec();
                li.extend(if adj_x { [d, i] } else { [i, d] });
                let mut ri = idx[..nb].to_vec();
                ri.extend(if adj_y { [j, d] } else { [d, j] });
                let x = xa[broadcast_index(&lhs_shape, &out_shape, &li)] - i64::from(zl);
                let y = xb[broadcast_index(&rhs_shape, &out_shape, &ri)] - i64::from(zr);
                total += x * y;
            }
            let v = if int16 {
                hilt_runtime::kernels::fixed_point::multiply_by_quantized_multiplier_i64(total, mult, shift)
            } else {
                multiply_by_quantized_multiplier(total as i32, mult, shift)
            };
            want.push(i64::from((v + zo).clamp(lo, hi)));
        });
        prop_assert_eq!(wide(&got[0]), want);
    }
}

#[test]
fn batch_matmul_refuses_mismatched_depths() {
    let model = single_op(
        Op::BATCH_MATMUL,
        &[(F32, &[2, 3]), (F32, &[4, 2])],
        (F32, &[2, 2]),
        Options::BatchMatMul {
            adj_x: false,
            adj_y: false,
        },
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 24], &[0; 32]]),
        KernelError::ShapeMismatch { tensor: 1 }
    );
    let model = single_op(
        Op::BATCH_MATMUL,
        &[(F32, &[2, 3]), (F32, &[3, 2])],
        (F32, &[2, 2]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 24], &[0; 24]]),
        KernelError::MissingOptions
    );
}

// --- SQUEEZE, EXPAND_DIMS, SHAPE, FILL, ZEROS_LIKE -------------------------

/// A shape of 1 to 5 dimensions, some of them 1.
fn shape_with_ones() -> impl Strategy<Value = Vec<i32>> {
    proptest::collection::vec(prop_oneof![Just(1), 1..5i32], 1..=5)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn squeeze_and_expand_dims_keep_the_bytes(shape in shape_with_ones(), at in 0usize..6, seed in any::<u64>()) {
        let data = Rng(seed).tensor(T::INT8, elements(&shape), 0.0, 0.0);
        let squeezed: Vec<i32> = shape.iter().copied().filter(|&d| d != 1).collect();
        let ty = i8q(0.1, 2);
        let model = single_op(Op::SQUEEZE, &[(ty, &shape)], (ty, &squeezed), Options::None);
        prop_assert_eq!(&run(&model, &[&data]).unwrap()[0], &data);
        let axis = (at % (shape.len() + 1)) as i32;
        let mut expanded = shape.clone();
        expanded.insert(axis as usize, 1);
        let model = op_with_constants(
            Op::EXPAND_DIMS,
            &[(ty, &shape)],
            &[(T::INT32, &[1], i32_bytes(&[axis - shape.len() as i32 - 1]))],
            (ty, &expanded),
            Options::None,
        );
        prop_assert_eq!(&run(&model, &[&data]).unwrap()[0], &data);
    }

    #[test]
    fn shape_and_fill_write_what_the_model_says(shape in shape_with_ones(), value in any::<i32>()) {
        let model = single_op(Op::SHAPE, &[(F32, &shape)], (q(T::INT32, 0.0, 0), &[shape.len() as i32]), Options::None);
        let data = vec![0u8; 4 * elements(&shape)];
        prop_assert_eq!(i32s(&run(&model, &[&data]).unwrap()[0]), shape.clone());
        let i32t = q(T::INT32, 0.0, 0);
        let model = op_with_constants(
            Op::FILL,
            &[],
            &[(T::INT32, &[shape.len() as i32], i32_bytes(&shape)), (T::INT32, &[], i32_bytes(&[value]))],
            (i32t, &shape),
            Options::None,
        );
        prop_assert_eq!(i32s(&run(&model, &[]).unwrap()[0]), vec![value; elements(&shape)]);
    }
}

#[test]
fn zeros_like_writes_zero_bits_whatever_the_zero_point() {
    let ty = i8q(0.1, 17);
    let model = single_op(
        Op::ZEROS_LIKE,
        &[(ty, &[2, 3])],
        (ty, &[2, 3]),
        Options::None,
    );
    assert_eq!(run(&model, &[&[5u8; 6]]).unwrap()[0], vec![0u8; 6]);
}

#[test]
fn shape_ops_refuse_what_tflm_refuses() {
    let i32t = q(T::INT32, 0.0, 0);
    let ty = i8q(0.1, 0);
    // SQUEEZE of an axis that is not 1.
    let squeeze = Options::Squeeze {
        squeeze_dims: vec![1],
    };
    let model = single_op(Op::SQUEEZE, &[(ty, &[1, 3])], (ty, &[1, 3]), squeeze);
    assert_eq!(
        kernel_error(&model, &[&[0; 3]]),
        KernelError::UnsupportedParameter {
            what: "SQUEEZE squeeze_dims must name size-1 axes of the input"
        }
    );
    // EXPAND_DIMS with an axis computed at run time, and with an int32 input.
    let model = single_op(
        Op::EXPAND_DIMS,
        &[(ty, &[3]), (i32t, &[1])],
        (ty, &[1, 3]),
        Options::None,
    );
    assert!(matches!(
        kernel_error(&model, &[&[0; 3], &[0; 4]]),
        KernelError::UnsupportedParameter { .. }
    ));
    let model = op_with_constants(
        Op::EXPAND_DIMS,
        &[(i32t, &[3])],
        &[(T::INT32, &[1], i32_bytes(&[0]))],
        (i32t, &[1, 3]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 12]]),
        KernelError::UnsupportedType {
            tensor: 0,
            dtype: T::INT32.0
        }
    );
    // SHAPE into int64 (TFLM's micro kernel writes int32 only).
    let i64t = q(T::INT64, 0.0, 0);
    let model = single_op(Op::SHAPE, &[(ty, &[2, 2])], (i64t, &[2]), Options::None);
    assert_eq!(
        kernel_error(&model, &[&[0; 4]]),
        KernelError::UnsupportedType {
            tensor: 1,
            dtype: T::INT64.0
        }
    );
    // FILL with dims that disagree with the output, and with run-time dims.
    let model = op_with_constants(
        Op::FILL,
        &[],
        &[
            (T::INT32, &[2], i32_bytes(&[2, 4])),
            (T::INT8, &[], vec![7]),
        ],
        (ty, &[2, 3]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&model, &[]),
        KernelError::ShapeMismatch { tensor: 0 }
    );
    let model = single_op(
        Op::FILL,
        &[(i32t, &[2]), (ty, &[])],
        (ty, &[2, 3]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 8], &[0]]),
        KernelError::UnsupportedParameter {
            what: "FILL dims must be constant"
        }
    );
    // ZEROS_LIKE of int16 (not in TFLM's list).
    let t16 = i16q(0.01, 0);
    let model = single_op(Op::ZEROS_LIKE, &[(t16, &[4])], (t16, &[4]), Options::None);
    assert_eq!(
        kernel_error(&model, &[&[0; 8]]),
        KernelError::UnsupportedType {
            tensor: 0,
            dtype: T::INT16.0
        }
    );
}

// --- SLICE, MIRROR_PAD, PACK, UNPACK ------------------------------------------

/// The elements of `x` (shape `shape`, `e` bytes each) at the cross
/// product of one index list per axis, in row-major order.
fn pick_per_axis(x: &[u8], shape: &[i32], per_axis: &[Vec<i32>], e: usize) -> Vec<u8> {
    let counts: Vec<i32> = per_axis.iter().map(|v| v.len() as i32).collect();
    let mut out = Vec::new();
    for_each_index(&counts, |idx| {
        let flat = (0..shape.len()).fold(0usize, |acc, d| {
            acc * shape[d] as usize + per_axis[d][idx[d]] as usize
        });
        out.extend_from_slice(&x[flat * e..flat * e + e]);
    });
    out
}

/// A quantised type of 1 or 2 bytes and its element size.
fn small_type(int16: bool) -> (Ty, usize) {
    if int16 {
        (i16q(0.01, 0), 2)
    } else {
        (i8q(0.1, -3), 1)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn slice_matches_reference(
        shape in proptest::collection::vec(1i32..=5, 1..=5),
        picks in proptest::collection::vec((0u32..100, 0u32..100, any::<bool>()), 5),
        int16 in any::<bool>(),
        wide in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let n = shape.len();
        let (mut begin, mut size, mut per_axis) = (vec![], vec![], vec![]);
        for d in 0..n {
            let b = (picks[d].0 % shape[d] as u32) as i32;
            let s = 1 + (picks[d].1 % (shape[d] - b) as u32) as i32;
            begin.push(b);
            // -1: the rest of the axis.
            size.push(if picks[d].2 { -1 } else { s });
            per_axis.push((b..if picks[d].2 { shape[d] } else { b + s }).collect::<Vec<_>>());
        }
        let out_shape: Vec<i32> = per_axis.iter().map(|v| v.len() as i32).collect();
        let (ty, e) = small_type(int16);
        let x = Rng(seed).tensor(ty.dtype, elements(&shape), 0.0, 0.0);
        let len = [n as i32];
        let vector = |v: &[i32]| if wide {
            (T::INT64, v.iter().flat_map(|&x| i64::from(x).to_le_bytes()).collect())
        } else {
            (T::INT32, i32_bytes(v))
        };
        let ((tb, bb), (ts, sb)) = (vector(&begin), vector(&size));
        let model = op_with_constants(Op::SLICE, &[(ty, &shape)], &[(tb, &len, bb), (ts, &len, sb)], (ty, &out_shape), Options::None);
        prop_assert_eq!(&run(&model, &[&x]).unwrap()[0], &pick_per_axis(&x, &shape, &per_axis, e));
    }

    #[test]
    fn mirror_pad_matches_reference(
        shape in proptest::collection::vec(1i32..=5, 1..=4),
        pads in proptest::collection::vec((0i32..6, 0i32..6), 4),
        reflect in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let n = shape.len();
        let k = i32::from(reflect);
        let pads: Vec<(i32, i32)> = (0..n)
            .map(|d| (pads[d].0 % (shape[d] + 1 - k), pads[d].1 % (shape[d] + 1 - k)))
            .collect();
        // Mirror an index back inside 0..size (REFLECT skips the edge).
        let mirror = |i: i32, size: i32| if i < 0 { -i - 1 + k } else if i >= size { 2 * size - 1 - k - i } else { i };
        let per_axis: Vec<Vec<i32>> = (0..n)
            .map(|d| (-pads[d].0..shape[d] + pads[d].1).map(|i| mirror(i, shape[d])).collect())
            .collect();
        let out_shape: Vec<i32> = per_axis.iter().map(|v| v.len() as i32).collect();
        let ty = i8q(0.1, 4);
        let x = Rng(seed).tensor(T::INT8, elements(&shape), 0.0, 0.0);
        let flat: Vec<i32> = pads.iter().flat_map(|&(l, r)| [l, r]).collect();
        let mode = if reflect { hilt_runtime::schema::MirrorPadMode::REFLECT } else { hilt_runtime::schema::MirrorPadMode::SYMMETRIC };
        let model = op_with_constants(Op::MIRROR_PAD, &[(ty, &shape)], &[(T::INT32, &[n as i32, 2], i32_bytes(&flat))], (ty, &out_shape), Options::MirrorPad { mode });
        prop_assert_eq!(&run(&model, &[&x]).unwrap()[0], &pick_per_axis(&x, &shape, &per_axis, 1));
    }

    #[test]
    fn pack_and_unpack_match_reference(
        shape in proptest::collection::vec(1i32..=4, 0..=3),
        count in 1usize..5,
        at in 0usize..4,
        int16 in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let axis = at % (shape.len() + 1);
        let mut packed = shape.clone();
        packed.insert(axis, count as i32);
        let (ty, e) = small_type(int16);
        let mut rng = Rng(seed);
        let parts: Vec<Vec<u8>> = (0..count).map(|_| rng.tensor(ty.dtype, elements(&shape), 0.0, 0.0)).collect();
        // Reference: output (outer, i, inner) is part i's (outer, inner).
        let outer: usize = shape[..axis].iter().map(|&d| d as usize).product();
        let inner = elements(&shape) / outer.max(1) * e;
        let mut want = Vec::new();
        for o in 0..outer {
            for part in &parts {
                want.extend_from_slice(&part[o * inner..(o + 1) * inner]);
            }
        }
        let inputs: Vec<(Ty, &[i32])> = (0..count).map(|_| (ty, &shape[..])).collect();
        let model = single_op(Op::PACK, &inputs, (ty, &packed), Options::Pack { values_count: count as i32, axis: axis as i32 });
        let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        prop_assert_eq!(&run(&model, &refs).unwrap()[0], &want);
        // UNPACK along the same axis (counted from the end) gives the parts back.
        let mut w = ModelWriter::new();
        let x = w.input("x", ty.dtype, &packed);
        let q = ty.quant.unwrap();
        w.quantize(x, q.0, q.1);
        let outs: Vec<_> = (0..count).map(|i| {
            let t = w.output(&format!("y{i}"), ty.dtype, &shape);
            w.quantize(t, q.0, q.1);
            t
        }).collect();
        let negative = axis as i32 - packed.len() as i32;
        w.op(Op::UNPACK, &[Some(x)], &outs, Options::Unpack { num: count as i32, axis: negative });
        prop_assert_eq!(run(&w.finish(), &[&want]).unwrap(), parts);
    }
}

#[test]
fn slice_pad_and_pack_refuse_what_tflm_refuses() {
    let ty = i8q(0.1, 0);
    let i32t = q(T::INT32, 0.0, 0);
    let bad_box = KernelError::UnsupportedParameter {
        what: "SLICE begin and size must select a box inside the input as large as the output",
    };
    // A constant begin past the axis: refused in prepare.
    let model = op_with_constants(
        Op::SLICE,
        &[(ty, &[4])],
        &[
            (T::INT32, &[1], i32_bytes(&[5])),
            (T::INT32, &[1], i32_bytes(&[1])),
        ],
        (ty, &[1]),
        Options::None,
    );
    assert_eq!(kernel_error(&model, &[&[0; 4]]), bad_box);
    // A size read at run time that runs off the end: refused at invoke.
    let model = op_with_constants(
        Op::SLICE,
        &[(ty, &[4]), (i32t, &[1])],
        &[(T::INT32, &[1], i32_bytes(&[2]))],
        (ty, &[2]),
        Options::None,
    );
    // (op inputs: x, size, begin — a run-time begin, here.)
    assert_eq!(
        run(&model, &[&[1, 2, 3, 4], &i32_bytes(&[1])]).unwrap()[0],
        [2, 3]
    );
    assert_eq!(kernel_error(&model, &[&[0; 4], &i32_bytes(&[3])]), bad_box);
    // begin and size of different types.
    let model = op_with_constants(
        Op::SLICE,
        &[(ty, &[4])],
        &[
            (T::INT32, &[1], i32_bytes(&[0])),
            (T::INT64, &[1], 1i64.to_le_bytes().to_vec()),
        ],
        (ty, &[1]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 4]]),
        KernelError::UnsupportedType {
            tensor: 2,
            dtype: T::INT64.0
        }
    );
    // MIRROR_PAD: REFLECT by the whole axis, and int16 (not TFLM's).
    let reflect = Options::MirrorPad {
        mode: hilt_runtime::schema::MirrorPadMode::REFLECT,
    };
    let model = op_with_constants(
        Op::MIRROR_PAD,
        &[(ty, &[3])],
        &[(T::INT32, &[1, 2], i32_bytes(&[3, 0]))],
        (ty, &[6]),
        reflect.clone(),
    );
    assert!(matches!(
        kernel_error(&model, &[&[0; 3]]),
        KernelError::UnsupportedParameter { .. }
    ));
    let t16 = i16q(0.01, 0);
    let model = op_with_constants(
        Op::MIRROR_PAD,
        &[(t16, &[3])],
        &[(T::INT32, &[1, 2], i32_bytes(&[1, 1]))],
        (t16, &[5]),
        reflect,
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 6]]),
        KernelError::UnsupportedType {
            tensor: 0,
            dtype: T::INT16.0
        }
    );
    // PACK whose values_count disagrees; UNPACK into mis-shaped outputs.
    let pack = Options::Pack {
        values_count: 3,
        axis: 0,
    };
    let model = single_op(Op::PACK, &[(ty, &[2]), (ty, &[2])], (ty, &[2, 2]), pack);
    assert!(matches!(
        kernel_error(&model, &[&[0; 2], &[0; 2]]),
        KernelError::UnsupportedParameter { .. }
    ));
    let mut w = ModelWriter::new();
    let x = w.input("x", T::INT8, &[2, 3]);
    let a = w.output("a", T::INT8, &[3]);
    let b = w.output("b", T::INT8, &[2]);
    w.op(
        Op::UNPACK,
        &[Some(x)],
        &[a, b],
        Options::Unpack { num: 2, axis: 0 },
    );
    assert_eq!(
        kernel_error(&w.finish(), &[&[0; 6]]),
        KernelError::ShapeMismatch { tensor: 2 }
    );
}

// --- GATHER ---------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn gather_matches_reference(
        shape in proptest::collection::vec(1i32..=4, 1..=4),
        index_shape in proptest::collection::vec(1i32..=3, 0..=2),
        at in 0usize..4,
        batch in 0usize..3,
        raw in proptest::collection::vec(any::<u32>(), 24),
        seed in any::<u64>(),
    ) {
        let axis = at % shape.len();
        let batch_dims = batch.min(axis).min(index_shape.len());
        // The indices' leading batch dimensions are the params'.
        let mut ishape = shape[..batch_dims].to_vec();
        ishape.extend_from_slice(&index_shape[batch_dims.min(index_shape.len())..]);
        let count = elements(&ishape);
        prop_assume!(count <= raw.len());
        let indices: Vec<i32> = raw[..count].iter().map(|&r| (r % shape[axis] as u32) as i32).collect();
        let mut out_shape = shape[..axis].to_vec();
        out_shape.extend_from_slice(&ishape[batch_dims..]);
        out_shape.extend_from_slice(&shape[axis + 1..]);
        let ty = i8q(0.1, 1);
        let x = Rng(seed).tensor(T::INT8, elements(&shape), 0.0, 0.0);
        // Reference: output (b.., o.., c.., i..) = params (b.., o.., indices[b.., c..], i..).
        let mut want = Vec::new();
        for_each_index(&out_shape, |idx| {
            let b = &idx[..batch_dims];
            let o = &idx[batch_dims..axis];
            let c = &idx[axis..axis + ishape.len() - batch_dims];
            let inner = &idx[axis + ishape.len() - batch_dims..];
            let flat_index = b.iter().chain(c).zip(&ishape).fold(0, |acc, (&i, &d)| acc * d as usize + i);
            let k = indices[flat_index] as usize;
            let coords: Vec<usize> = b.iter().chain(o).copied().chain([k]).chain(inner.iter().copied()).collect();
            let flat = coords.iter().zip(&shape).fold(0, |acc, (&i, &d)| acc * d as usize + i);
            want.push(x[flat]);
        });
        let model = op_with_constants(
            Op::GATHER,
            &[(ty, &shape)],
            &[(T::INT32, &ishape, i32_bytes(&indices))],
            (ty, &out_shape),
            Options::Gather { axis: axis as i32, batch_dims: batch_dims as i32 },
        );
        prop_assert_eq!(&run(&model, &[&x]).unwrap()[0], &want);
    }
}

#[test]
fn gather_refuses_out_of_range_indices_at_invoke() {
    let ty = i8q(0.1, 0);
    let i32t = q(T::INT32, 0.0, 0);
    let options = || Options::Gather {
        axis: 0,
        batch_dims: 0,
    };
    let model = single_op(
        Op::GATHER,
        &[(ty, &[3, 2]), (i32t, &[2])],
        (ty, &[2, 2]),
        options(),
    );
    let x = [1, 2, 3, 4, 5, 6];
    assert_eq!(
        run(&model, &[&x, &i32_bytes(&[2, 0])]).unwrap()[0],
        [5, 6, 1, 2]
    );
    for bad in [3, -1] {
        assert_eq!(
            kernel_error(&model, &[&x, &i32_bytes(&[0, bad])]),
            KernelError::IndexOutOfRange {
                tensor: 1,
                index: i64::from(bad),
                size: 3
            }
        );
    }
    // int16 params and int64 indices: TFLM's micro kernel takes neither.
    let t16 = i16q(0.01, 0);
    let model = single_op(
        Op::GATHER,
        &[(t16, &[3]), (i32t, &[1])],
        (t16, &[1]),
        options(),
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 6], &[0; 4]]),
        KernelError::UnsupportedType {
            tensor: 0,
            dtype: T::INT16.0
        }
    );
    let i64t = q(T::INT64, 0.0, 0);
    let model = single_op(
        Op::GATHER,
        &[(ty, &[3]), (i64t, &[1])],
        (ty, &[1]),
        options(),
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 3], &[0; 8]]),
        KernelError::UnsupportedType {
            tensor: 1,
            dtype: T::INT64.0
        }
    );
    // An output shape that is not params[..axis] ++ indices ++ params[axis + 1..].
    let model = single_op(
        Op::GATHER,
        &[(ty, &[3, 2]), (i32t, &[2])],
        (ty, &[2, 3]),
        options(),
    );
    assert_eq!(
        kernel_error(&model, &[&x, &[0; 8]]),
        KernelError::ShapeMismatch { tensor: 2 }
    );
}

// --- SPACE_TO_DEPTH, DEPTH_TO_SPACE ----------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn space_to_depth_matches_reference_and_depth_to_space_undoes_it(
        (n, h, w, c) in (1i32..=2, 1i32..=3, 1i32..=3, 1i32..=3),
        block in 1i32..=3,
        seed in any::<u64>(),
    ) {
        let (hh, ww) = (h * block, w * block);
        let space = [n, hh, ww, c];
        let depth = [n, h, w, c * block * block];
        let ty = i8q(0.05, 7);
        let x = Rng(seed).tensor(T::INT8, elements(&space), 0.0, 0.0);
        // Reference: depth (b, y, x, (dy * block + dx) * c + k) is space
        // (b, y * block + dy, x * block + dx, k).
        let mut want = Vec::new();
        for_each_index(&depth, |i| {
            let (tile, k) = (i[3] / c as usize, i[3] % c as usize);
            let (dy, dx) = (tile / block as usize, tile % block as usize);
            let (y, xx) = (i[1] * block as usize + dy, i[2] * block as usize + dx);
            want.push(x[((i[0] * hh as usize + y) * ww as usize + xx) * c as usize + k]);
        });
        let s2d = Options::BlockSize { depth_to_space: false, block_size: block };
        let got = run(&single_op(Op::SPACE_TO_DEPTH, &[(ty, &space)], (ty, &depth), s2d), &[&x]).unwrap();
        prop_assert_eq!(&got[0], &want);
        let d2s = Options::BlockSize { depth_to_space: true, block_size: block };
        let back = run(&single_op(Op::DEPTH_TO_SPACE, &[(ty, &depth)], (ty, &space), d2s), &[&want]).unwrap();
        prop_assert_eq!(&back[0], &x);
    }
}

#[test]
fn space_to_depth_refuses_bad_blocks_and_types() {
    let ty = i8q(0.1, 0);
    let s2d = |block_size| Options::BlockSize {
        depth_to_space: false,
        block_size,
    };
    // 5 is not a multiple of the block.
    let model = single_op(
        Op::SPACE_TO_DEPTH,
        &[(ty, &[1, 5, 4, 1])],
        (ty, &[1, 2, 2, 4]),
        s2d(2),
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 20]]),
        KernelError::ShapeMismatch { tensor: 1 }
    );
    let model = single_op(
        Op::SPACE_TO_DEPTH,
        &[(ty, &[1, 2, 2, 1])],
        (ty, &[1, 2, 2, 1]),
        s2d(0),
    );
    assert!(matches!(
        kernel_error(&model, &[&[0; 4]]),
        KernelError::UnsupportedParameter { .. }
    ));
    let t16 = i16q(0.01, 0);
    let model = single_op(
        Op::DEPTH_TO_SPACE,
        &[(t16, &[1, 1, 1, 4])],
        (t16, &[1, 2, 2, 1]),
        Options::BlockSize {
            depth_to_space: true,
            block_size: 2,
        },
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 8]]),
        KernelError::UnsupportedType {
            tensor: 0,
            dtype: T::INT16.0
        }
    );
}

// --- SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND -----------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn space_to_batch_matches_reference_and_batch_to_space_undoes_it(
        (n, h, w, c) in (1i32..=2, 1i32..=4, 1i32..=4, 1i32..=2),
        (bh, bw) in (1i32..=3, 1i32..=3),
        (top, left) in (0i32..3, 0i32..3),
        three_d in any::<bool>(),
        zp in -128i64..=127,
        seed in any::<u64>(),
    ) {
        let (w, bw, left) = if three_d { (1, 1, 0) } else { (w, bw, left) };
        // Bottom and right padding that make the padded size tile.
        let bottom = (bh - (h + top) % bh) % bh;
        let right = (bw - (w + left) % bw) % bw;
        let (ph, pw) = ((h + top + bottom) / bh, (w + left + right) / bw);
        let space4 = [n, h, w, c];
        let batch4 = [n * bh * bw, ph, pw, c];
        let drop_w = |s: [i32; 4]| if three_d { vec![s[0], s[1], s[3]] } else { s.to_vec() };
        let (space, batched) = (drop_w(space4), drop_w(batch4));
        let ty = i8q(0.1, zp);
        let x = Rng(seed).tensor(T::INT8, elements(&space), 0.0, 0.0);
        let mut want = Vec::new();
        for_each_index(&batch4, |i| {
            let (tile, b) = (i[0] / n as usize, i[0] % n as usize);
            let (dy, dx) = ((tile / bw as usize) as i32, (tile % bw as usize) as i32);
            let y = i[1] as i32 * bh + dy - top;
            let xx = i[2] as i32 * bw + dx - left;
            want.push(if (0..h).contains(&y) && (0..w).contains(&xx) {
                x[((b * h as usize + y as usize) * w as usize + xx as usize) * c as usize + i[3]]
            } else {
                zp as u8
            });
        });
        let (block, edges): (Vec<i32>, Vec<i32>) = if three_d {
            (vec![bh], vec![top, bottom])
        } else {
            (vec![bh, bw], vec![top, bottom, left, right])
        };
        let k = block.len() as i32;
        let constants = [
            (T::INT32, &[k][..], i32_bytes(&block)),
            (T::INT32, &[k, 2][..], i32_bytes(&edges)),
        ];
        let model = op_with_constants(Op::SPACE_TO_BATCH_ND, &[(ty, &space)], &constants, (ty, &batched), Options::None);
        prop_assert_eq!(&run(&model, &[&x]).unwrap()[0], &want);
        let model = op_with_constants(Op::BATCH_TO_SPACE_ND, &[(ty, &batched)], &constants, (ty, &space), Options::None);
        prop_assert_eq!(&run(&model, &[&want]).unwrap()[0], &x);
    }
}

#[test]
fn space_to_batch_checks_run_time_blocks_at_invoke_and_refuses_bad_shapes() {
    let ty = i8q(0.1, 0);
    let i32t = q(T::INT32, 0.0, 0);
    let bad = KernelError::UnsupportedParameter {
        what: "SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND need a positive block, paddings/crops of at least 0, and a padded space tensor that tiles into the batch tensor",
    };
    // A block shape computed at run time: read and checked at invoke.
    let model = op_with_constants(
        Op::SPACE_TO_BATCH_ND,
        &[(ty, &[1, 2, 2, 1]), (i32t, &[2])],
        &[(T::INT32, &[2, 2], i32_bytes(&[0; 4]))],
        (ty, &[4, 1, 1, 1]),
        Options::None,
    );
    assert_eq!(
        run(&model, &[&[1, 2, 3, 4], &i32_bytes(&[2, 2])]).unwrap()[0],
        [1, 2, 3, 4]
    );
    for block in [[1, 4], [0, 2], [-2, -2]] {
        assert_eq!(kernel_error(&model, &[&[0; 4], &i32_bytes(&block)]), bad);
    }
    // A batch that is not the block's multiple of the output's.
    let model = op_with_constants(
        Op::BATCH_TO_SPACE_ND,
        &[(ty, &[3, 2, 2, 1])],
        &[
            (T::INT32, &[2], i32_bytes(&[2, 2])),
            (T::INT32, &[2, 2], i32_bytes(&[0; 4])),
        ],
        (ty, &[1, 4, 4, 1]),
        Options::None,
    );
    assert_eq!(kernel_error(&model, &[&[0; 12]]), bad);
    // Negative crops.
    let model = op_with_constants(
        Op::BATCH_TO_SPACE_ND,
        &[(ty, &[4, 2, 2, 1])],
        &[
            (T::INT32, &[2], i32_bytes(&[2, 2])),
            (T::INT32, &[2, 2], i32_bytes(&[-1, 1, 0, 0])),
        ],
        (ty, &[1, 4, 4, 1]),
        Options::None,
    );
    assert_eq!(kernel_error(&model, &[&[0; 16]]), bad);
    let model = op_with_constants(
        Op::SPACE_TO_BATCH_ND,
        &[(ty, &[4, 1])],
        &[(T::INT32, &[0], vec![]), (T::INT32, &[0, 2], vec![])],
        (ty, &[4, 1]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 4]]),
        KernelError::UnsupportedRank { tensor: 0, rank: 2 }
    );
}

// --- RESIZE_BILINEAR, L2_POOL_2D -----------------------------------------------

fn bilinear(
    ty: Ty,
    input: [i32; 4],
    size: [i32; 2],
    align_corners: bool,
    half_pixel_centers: bool,
) -> Vec<u8> {
    op_with_constants(
        Op::RESIZE_BILINEAR,
        &[(ty, &input)],
        &[(T::INT32, &[2], i32_bytes(&size))],
        (ty, &[input[0], size[0], size[1], input[3]]),
        Options::ResizeBilinear {
            align_corners,
            half_pixel_centers,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn bilinear_keeps_flat_images_flat_and_same_size_images_whole(
        (n, h, w, c) in (1i32..=2, 1i32..=5, 1i32..=5, 1i32..=3),
        (oh, ow) in (1i32..=9, 1i32..=9),
        rule in 0u8..3,
        value in any::<i8>(),
        seed in any::<u64>(),
    ) {
        let (align, half) = (rule == 1, rule == 2);
        let ty = i8q(0.1, 5);
        // Weights sum to one: a flat image stays flat, whatever the sizes.
        let flat = vec![value as u8; (n * h * w * c) as usize];
        let got = run(&bilinear(ty, [n, h, w, c], [oh, ow], align, half), &[&flat]).unwrap();
        prop_assert!(got[0].iter().all(|&v| v == value as u8));
        let fl = vec![f32::from(value) * 0.25; (n * h * w * c) as usize];
        let bytes: Vec<u8> = fl.iter().flat_map(|v| v.to_le_bytes()).collect();
        let got = run(&bilinear(F32, [n, h, w, c], [oh, ow], align, half), &[&bytes]).unwrap();
        prop_assert!(f32s(&got[0]).iter().all(|&v| (v - f32::from(value) * 0.25).abs() <= 1e-4 * (1.0 + v.abs())));
        // Same size, scale one: every output pixel is its input pixel.
        let x = Rng(seed).tensor(T::INT8, (n * h * w * c) as usize, 0.0, 0.0);
        let got = run(&bilinear(ty, [n, h, w, c], [h, w], align, half), &[&x]).unwrap();
        prop_assert_eq!(&got[0], &x);
    }

    #[test]
    fn l2_pool_is_the_root_mean_square_of_each_window(
        (h, w, c) in (1i32..=6, 1i32..=6, 1i32..=4),
        (fh, fw) in (1i32..=3, 1i32..=3),
        seed in any::<u64>(),
    ) {
        prop_assume!(fh <= h && fw <= w);
        let (oh, ow) = (h - fh + 1, w - fw + 1);
        let x = f32s(&Rng(seed).tensor(T::FLOAT32, (h * w * c) as usize, -4.0, 4.0));
        let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        let options = pool_options(hilt_runtime::schema::Padding::VALID, (1, 1), (fw, fh), Act::NONE);
        let got = f32s(&run(&single_op(Op::L2_POOL_2D, &[(F32, &[1, h, w, c])], (F32, &[1, oh, ow, c]), options), &[&bytes]).unwrap()[0]);
        let mut want = Vec::new();
        for_each_index(&[oh, ow, c], |i| {
            let mut sum = 0.0f32;
            for dy in 0..fh as usize {
                for dx in 0..fw as usize {
                    let v = x[((i[0] + dy) * w as usize + i[1] + dx) * c as usize + i[2]];
                    sum += v * v;
                }
            }
            want.push((sum / (fh * fw) as f32).sqrt());
        });
        prop_assert_eq!(got, want);
    }
}

#[test]
fn bilinear_and_l2_pool_refuse_what_tflm_refuses() {
    let ty = i8q(0.1, 0);
    let model = bilinear(ty, [1, 2, 2, 1], [4, 4], true, true);
    assert!(matches!(
        kernel_error(&model, &[&[0; 4]]),
        KernelError::UnsupportedParameter { .. }
    ));
    let t16 = i16q(0.01, 0);
    let model = bilinear(t16, [1, 2, 2, 1], [4, 4], false, false);
    assert_eq!(
        kernel_error(&model, &[&[0; 8]]),
        KernelError::UnsupportedType {
            tensor: 0,
            dtype: T::INT16.0
        }
    );
    // A size that disagrees with the output.
    let model = op_with_constants(
        Op::RESIZE_BILINEAR,
        &[(ty, &[1, 2, 2, 1])],
        &[(T::INT32, &[2], i32_bytes(&[4, 5]))],
        (ty, &[1, 4, 4, 1]),
        Options::ResizeBilinear {
            align_corners: false,
            half_pixel_centers: false,
        },
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 4]]),
        KernelError::ShapeMismatch { tensor: 1 }
    );
    // L2_POOL_2D of int8: TFLM's kernel takes float32 only.
    let options = pool_options(
        hilt_runtime::schema::Padding::VALID,
        (1, 1),
        (1, 1),
        Act::NONE,
    );
    let model = single_op(
        Op::L2_POOL_2D,
        &[(ty, &[1, 2, 2, 1])],
        (ty, &[1, 2, 2, 1]),
        options,
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 4]]),
        KernelError::UnsupportedType {
            tensor: 0,
            dtype: T::INT8.0
        }
    );
}

// --- No panics on odd models -------------------------------------------------------

/// Loads, plans and runs `model` on random inputs of whatever size the
/// interpreter asks for. A typed error is an answer; a panic fails, and so
/// does `KernelError::Internal` (what a kernel reports when prepare let
/// through something invoke cannot run) — except in a model with a
/// zero-byte tensor, which the interpreter gives no buffer, so a kernel
/// that touches one gets `Internal` from the interpreter itself.
fn run_anything(model: &[u8], seed: u64) {
    use hilt_runtime::interpreter::Interpreter;
    let words = aligned(model);
    let bytes = &bytemuck::cast_slice::<u128, u8>(&words)[..model.len()];
    let Ok(model) = hilt_runtime::model::Model::from_bytes(bytes) else {
        return;
    };
    let resolver = hilt_runtime::kernels::all_builtins();
    let mut arena = vec![0u128; 1 << 13];
    let arena = bytemuck::cast_slice_mut::<u128, u8>(&mut arena);
    let has_empty = model.tensors().any(|t| t.bytes == 0);
    let mut interpreter = Interpreter::new(model, &resolver, arena);
    if interpreter
        .allocate(&hilt_runtime::planner::Greedy, &Default::default())
        .is_err()
    {
        return;
    }
    let mut rng = Rng(seed);
    for i in 0..interpreter.input_count() {
        let Ok(slot) = interpreter.input_mut(i) else {
            return;
        };
        slot.iter_mut().for_each(|b| *b = rng.next_u64() as u8);
    }
    let result = interpreter.invoke();
    let internal = matches!(
        result,
        Err(InterpreterError::Kernel {
            error: KernelError::Internal,
            ..
        })
    );
    assert!(!internal || has_empty, "{result:?}");
}

/// A small dimension, now and then an empty or a large one (the loader
/// refuses negative ones and shapes whose size overflows, so kernels never
/// see those).
fn odd_dim() -> impl Strategy<Value = i32> {
    prop_oneof![8 => 1i32..4, 1 => Just(0), 1 => Just(1 << 16)]
}

/// Three shapes, the later ones often copies of the first (so that more
/// models get past the shape checks to invoke).
fn odd_shapes() -> impl Strategy<Value = (Vec<i32>, Vec<i32>, Vec<i32>)> {
    let shape = || proptest::collection::vec(odd_dim(), 0..=5);
    (shape(), shape(), shape(), 0u8..3, 0u8..3).prop_map(|(a, b, c, kb, kc)| {
        let b = if kb == 0 { a.clone() } else { b };
        let c = match kc {
            0 => a.clone(),
            1 => b.clone(),
            _ => c,
        };
        (a, b, c)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Every op of this batch, on shapes, option values and constant
    /// inputs drawn with no regard for what fits: prepare or invoke may
    /// refuse, nothing may panic.
    #[test]
    fn shape_ops_never_panic(
        op in 0usize..16,
        (a, b, out) in odd_shapes(),
        values in proptest::collection::vec(prop_oneof![8 => -3i32..6, 1 => Just(i32::MAX), 1 => Just(i32::MIN)], 0..8),
        (x, y) in (-3i32..4, -3i32..4),
        flags in any::<(bool, bool)>(),
        int8 in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let ty = if int8 { i8q(0.1, 3) } else { F32 };
        let i32t = q(T::INT32, 0.0, 0);
        let ints = i32_bytes(&values);
        let n = [values.len() as i32];
        let half = [values.len() as i32 / 2, 2];
        let with = |op, constants: &[(T, &[i32], Vec<u8>)], options| {
            op_with_constants(op, &[(ty, &a)], constants, (ty, &out), options)
        };
        let model = match op {
            0 => single_op(Op::SQUEEZE, &[(ty, &a)], (ty, &out), Options::Squeeze { squeeze_dims: values.clone() }),
            1 => with(Op::EXPAND_DIMS, &[(T::INT32, &n, ints.clone())], Options::None),
            2 => single_op(Op::SHAPE, &[(ty, &a)], (i32t, &out), Options::None),
            3 => op_with_constants(Op::FILL, &[], &[(T::INT32, &n, ints.clone()), (ty.dtype, &b, vec![7; 4])], (ty, &out), Options::None),
            4 => single_op(Op::ZEROS_LIKE, &[(ty, &a)], (ty, &out), Options::None),
            5 => with(Op::SLICE, &[(T::INT32, &n, ints.clone()), (T::INT32, &n, ints.clone())], Options::None),
            6 => single_op(Op::SLICE, &[(ty, &a), (i32t, &b), (i32t, &b)], (ty, &out), Options::None),
            7 => with(Op::MIRROR_PAD, &[(T::INT32, &half, ints.clone())], Options::MirrorPad { mode: hilt_runtime::schema::MirrorPadMode(i8::from(flags.0)) }),
            8 => single_op(Op::PACK, &[(ty, &a), (ty, &b)], (ty, &out), Options::Pack { values_count: x, axis: y }),
            9 => {
                let mut w = ModelWriter::new();
                let t = w.input("x", ty.dtype, &a);
                let o1 = w.output("a", ty.dtype, &b);
                let o2 = w.output("b", ty.dtype, &out);
                w.op(Op::UNPACK, &[Some(t)], &[o1, o2], Options::Unpack { num: x, axis: y });
                w.finish()
            }
            10 => single_op(Op::GATHER, &[(ty, &a), (i32t, &b)], (ty, &out), Options::Gather { axis: x, batch_dims: y }),
            11 => single_op(Op::SPACE_TO_DEPTH, &[(ty, &a)], (ty, &out), Options::BlockSize { depth_to_space: flags.0, block_size: x }),
            12 => single_op(Op::DEPTH_TO_SPACE, &[(ty, &a)], (ty, &out), Options::BlockSize { depth_to_space: true, block_size: values.first().copied().unwrap_or(x) }),
            13 => with(if flags.0 { Op::SPACE_TO_BATCH_ND } else { Op::BATCH_TO_SPACE_ND }, &[(T::INT32, &b, ints.clone()), (T::INT32, &half, ints.clone())], Options::None),
            14 => with(Op::RESIZE_BILINEAR, &[(T::INT32, &n, ints.clone())], Options::ResizeBilinear { align_corners: flags.0, half_pixel_centers: flags.1 }),
            _ => single_op(Op::L2_POOL_2D, &[(ty, &a)], (ty, &out), pool_options(hilt_runtime::schema::Padding(i8::from(flags.0)), (x, y), (y, x), Act::NONE)),
        };
        run_anything(&model, seed);
    }
}
