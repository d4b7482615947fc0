//! ARG_MAX, ARG_MIN and CUMSUM against plain reference loops over random
//! shapes and axes, and the inputs they refuse. (TFLM's own outputs for
//! them are in `tflm_op_vectors`.)

mod one_op;

use hilt_runtime::kernels::KernelError;
use hilt_runtime::schema::{BuiltinOperator as Op, TensorType as T};
use hilt_runtime::writer::{Options, i32_bytes};
use one_op::*;
use proptest::prelude::*;

/// A shape of rank 1..=4 with dims 1..=5, and an axis in its range written
/// either way (`axis - rank` when `negative`).
fn shape_and_axis() -> impl Strategy<Value = (Vec<i32>, i32)> {
    (
        proptest::collection::vec(1i32..=5, 1..=4),
        0usize..4,
        any::<bool>(),
    )
        .prop_map(|(shape, pick, negative)| {
            let axis = (pick % shape.len()) as i32;
            let axis = if negative {
                axis - shape.len() as i32
            } else {
                axis
            };
            (shape, axis)
        })
}

fn positive(axis: i32, rank: usize) -> usize {
    if axis < 0 {
        (axis + rank as i32) as usize
    } else {
        axis as usize
    }
}

/// The flat index of `idx` in `shape`.
fn flat(shape: &[i32], idx: &[usize]) -> usize {
    idx.iter()
        .zip(shape)
        .fold(0, |acc, (&i, &d)| acc * d as usize + i)
}

/// Per output position (the input's index with `axis` removed): the first
/// position along `axis` whose value is `better` than all before it.
fn reference_arg(x: &[f32], shape: &[i32], axis: usize, better: fn(f32, f32) -> bool) -> Vec<i32> {
    let mut kept = shape.to_vec();
    kept[axis] = 1;
    let mut out = vec![0i32; elements(&kept)];
    for_each_index(&kept, |idx| {
        let mut at = idx.to_vec();
        let (mut best, mut index) = (x[flat(shape, &at)], 0);
        for k in 1..shape[axis] as usize {
            at[axis] = k;
            if better(x[flat(shape, &at)], best) {
                best = x[flat(shape, &at)];
                index = k as i32;
            }
        }
        out[flat(&kept, idx)] = index;
    });
    out
}

/// Running float sums along `axis`, each position by its own index walk.
fn reference_cumsum(
    x: &[f32],
    shape: &[i32],
    axis: usize,
    exclusive: bool,
    reverse: bool,
) -> Vec<f32> {
    let mut out = vec![0f32; x.len()];
    for_each_index(shape, |idx| {
        let n = shape[axis] as usize;
        let me = idx[axis];
        let order: Vec<usize> = if reverse {
            (0..n).rev().collect()
        } else {
            (0..n).collect()
        };
        let mut sum = 0f32;
        let mut at = idx.to_vec();
        for &k in &order {
            if k == me && exclusive {
                break;
            }
            at[axis] = k;
            sum += x[flat(shape, &at)];
            if k == me {
                break;
            }
        }
        out[flat(shape, idx)] = sum;
    });
    out
}

fn axis_model(
    op: Op,
    input: (Ty, &[i32]),
    axis: i32,
    output: (Ty, &[i32]),
    options: Options,
) -> Vec<u8> {
    op_with_constants(
        op,
        &[input],
        &[(T::INT32, &[1], i32_bytes(&[axis]))],
        output,
        options,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn arg_min_max_match_reference(
        (shape, axis) in shape_and_axis(),
        is_max in any::<bool>(),
        int8 in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let a = positive(axis, shape.len());
        let mut out_shape = shape.clone();
        out_shape.remove(a);
        let (ty, dtype) = if int8 { (i8q(0.1, 0), T::INT8) } else { (F32, T::FLOAT32) };
        let x = Rng(seed).tensor(dtype, elements(&shape), -2.0, 2.0);
        let (op, options, better): (Op, Options, fn(f32, f32) -> bool) = if is_max {
            (Op::ARG_MAX, Options::ArgMax { output_type: T::INT32 }, |a, b| a > b)
        } else {
            (Op::ARG_MIN, Options::ArgMin { output_type: T::INT32 }, |a, b| a < b)
        };
        let model = axis_model(op, (ty, &shape), axis, (q(T::INT32, 0.0, 0), &out_shape), options);
        let got = run(&model, &[&x]).unwrap();
        let values: Vec<f32> = if int8 { i8s(&x).into_iter().map(f32::from).collect() } else { f32s(&x) };
        prop_assert_eq!(i32s(&got[0]), reference_arg(&values, &shape, a, better));
    }

    #[test]
    fn float_cumsum_matches_reference(
        (shape, axis) in shape_and_axis(),
        exclusive in any::<bool>(),
        reverse in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let x = Rng(seed).tensor(T::FLOAT32, elements(&shape), -2.0, 2.0);
        let model = axis_model(Op::CUMSUM, (F32, &shape), axis, (F32, &shape), Options::Cumsum { exclusive, reverse });
        let got = run(&model, &[&x]).unwrap();
        let want = reference_cumsum(&f32s(&x), &shape, positive(axis, shape.len()), exclusive, reverse);
        // Same additions in the same order: equal to the bit.
        prop_assert_eq!(f32s(&got[0]), want);
    }
}

#[test]
fn arg_min_max_refuse_what_tflm_refuses() {
    let argmax = || Options::ArgMax {
        output_type: T::INT32,
    };
    // int16 input, int64 output, an axis with two values, an axis out of range.
    let model = axis_model(
        Op::ARG_MAX,
        (i16q(0.1, 0), &[2, 3]),
        1,
        (q(T::INT32, 0.0, 0), &[2]),
        argmax(),
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 12]]),
        KernelError::UnsupportedType {
            tensor: 0,
            dtype: T::INT16.0
        }
    );
    let model = axis_model(
        Op::ARG_MAX,
        (F32, &[2, 3]),
        1,
        (q(T::INT64, 0.0, 0), &[2]),
        argmax(),
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 24]]),
        KernelError::UnsupportedType {
            tensor: 2,
            dtype: T::INT64.0
        }
    );
    let model = op_with_constants(
        Op::ARG_MAX,
        &[(F32, &[2, 3])],
        &[(T::INT32, &[2], i32_bytes(&[0, 1]))],
        (q(T::INT32, 0.0, 0), &[2]),
        argmax(),
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 24]]),
        KernelError::ShapeMismatch { tensor: 1 }
    );
    let model = axis_model(
        Op::ARG_MIN,
        (F32, &[2, 3]),
        2,
        (q(T::INT32, 0.0, 0), &[2]),
        Options::ArgMin {
            output_type: T::INT32,
        },
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 24]]),
        KernelError::ShapeMismatch { tensor: 2 }
    );
}

#[test]
fn cumsum_refuses_what_tflm_refuses() {
    let options = Options::Cumsum {
        exclusive: false,
        reverse: false,
    };
    let model = axis_model(
        Op::CUMSUM,
        (i16q(0.1, 0), &[4]),
        0,
        (i16q(0.1, 0), &[4]),
        options.clone(),
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 8]]),
        KernelError::UnsupportedType {
            tensor: 0,
            dtype: T::INT16.0
        }
    );
    // Output shape other than the input's.
    let model = axis_model(
        Op::CUMSUM,
        (F32, &[2, 3]),
        0,
        (F32, &[3, 2]),
        options.clone(),
    );
    assert_eq!(
        kernel_error(&model, &[&[0; 24]]),
        KernelError::ShapeMismatch { tensor: 2 }
    );
    // An axis out of range: refused when invoke reads it.
    let model = axis_model(Op::CUMSUM, (F32, &[2, 3]), 5, (F32, &[2, 3]), options);
    assert!(matches!(
        kernel_error(&model, &[&[0; 24]]),
        KernelError::UnsupportedParameter { .. }
    ));
}
