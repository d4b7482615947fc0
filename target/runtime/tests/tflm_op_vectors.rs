//! One-operator models run by TFLM itself (the tflite-micro Python package,
//! the same build that produced the conformance set) and by hilt: every
//! output must match TFLM's byte for byte (float softmax and logistic within
//! the conformance tolerance, since they call `expf`).
//!
//! The vectors live in `tests/data/tflm_ops/`: `NAME.tflite`,
//! `NAME.inK.bin`, TFLM's `NAME.outK.bin` (every output), and `cases.txt`. To add cases,
//! edit `cases()` below, then
//!
//! ```sh
//! cargo test -p hilt-runtime --test tflm_op_vectors -- --ignored write_vectors
//! python3 target/runtime/tests/data/tflm_ops/run_tflm.py   # needs `pip install tflite-micro`
//! ```

#[path = "tflm_vectors_elem/mod.rs"]
mod elem;
mod one_op;

use std::path::{Path, PathBuf};

use hilt_runtime::schema::{
    ActivationFunctionType as Act, BuiltinOperator as Op, Padding, TensorType as T,
};
use hilt_runtime::writer::{ModelWriter, Options, i32_bytes};
use one_op::*;

/// How outputs are compared.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Compare {
    /// Byte for byte.
    Exact,
    /// float32 within `1e-5 + 1e-4·|tflm|` (the conformance rule).
    Float,
}

struct Case {
    name: String,
    model: Vec<u8>,
    inputs: Vec<Vec<u8>>,
    compare: Compare,
}

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tflm_ops")
}

/// Random inputs for `tys`/`shapes`, floats in [lo, hi).
fn inputs(rng: &mut Rng, specs: &[(Ty, &[i32])], lo: f32, hi: f32) -> Vec<Vec<u8>> {
    specs
        .iter()
        .map(|(ty, shape)| rng.tensor(ty.dtype, elements(shape), lo, hi))
        .collect()
}

fn unary(
    name: &str,
    op: Op,
    input: (Ty, &[i32]),
    output: (Ty, &[i32]),
    options: Options,
    data: Vec<u8>,
    compare: Compare,
) -> Case {
    Case {
        name: name.into(),
        model: single_op(op, &[input], output, options),
        inputs: vec![data],
        compare,
    }
}

fn add_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    type Spec<'a> = (&'a str, Ty, &'a [i32], Ty, &'a [i32], Ty, &'a [i32], Act);
    #[rustfmt::skip]
    let specs: &[Spec<'_>] = &[
        ("add_i8_same", i8q(0.05, -3), &[1, 4, 4, 8], i8q(0.1, 7), &[1, 4, 4, 8], i8q(0.12, -10), &[1, 4, 4, 8], Act::NONE),
        ("add_i8_relu6", i8q(0.03, 0), &[2, 3, 5], i8q(0.03, 0), &[2, 3, 5], i8q(0.025, -128), &[2, 3, 5], Act::RELU6),
        ("add_i8_relu", i8q(0.2, 10), &[40], i8q(0.07, -20), &[40], i8q(0.15, 5), &[40], Act::RELU),
        ("add_i8_ratio", i8q(0.001, 1), &[64], i8q(0.1, -1), &[64], i8q(0.1, 0), &[64], Act::NONE),
        ("add_i8_scalar", i8q(0.04, 2), &[1, 3, 5, 4], i8q(0.08, -9), &[1], i8q(0.09, 3), &[1, 3, 5, 4], Act::NONE),
        ("add_i8_scalar_first", i8q(0.04, 2), &[1, 1, 1, 1], i8q(0.08, -9), &[2, 3, 4], i8q(0.09, 3), &[1, 2, 3, 4], Act::NONE),
        ("add_i8_channel", i8q(0.05, 0), &[2, 3, 4, 6], i8q(0.02, 4), &[6], i8q(0.06, -1), &[2, 3, 4, 6], Act::NONE),
        ("add_i8_both", i8q(0.05, -5), &[2, 1, 5, 3], i8q(0.05, 5), &[1, 4, 1, 3], i8q(0.1, 0), &[2, 4, 5, 3], Act::NONE),
        ("add_i8_rank5", i8q(0.05, -5), &[1, 2, 3, 4, 5], i8q(0.03, 5), &[1, 1, 3, 1, 5], i8q(0.07, 2), &[1, 2, 3, 4, 5], Act::NONE),
        ("add_f32_same", F32, &[2, 3, 7], F32, &[2, 3, 7], F32, &[2, 3, 7], Act::NONE),
        ("add_f32_relu6", F32, &[4, 1, 6], F32, &[1, 5, 6], F32, &[4, 5, 6], Act::RELU6),
        ("add_f32_relu_n1", F32, &[30], F32, &[1], F32, &[30], Act::RELU_N1_TO_1),
        ("add_f32_relu", F32, &[3, 10], F32, &[3, 1], F32, &[3, 10], Act::RELU),
        // Large enough for invoke's lookup tables.
        ("add_i8_large", i8q(0.06, 9), &[1, 32, 32, 3], i8q(0.045, -17), &[1, 32, 32, 3], i8q(0.08, -2), &[1, 32, 32, 3], Act::NONE),
        ("add_i8_large_bcast", i8q(0.02, -100), &[1, 16, 16, 8], i8q(0.3, 50), &[8], i8q(0.31, 0), &[1, 16, 16, 8], Act::RELU),
        ("add_i16", i16q(1e-3, 0), &[2, 30], i16q(3e-3, 0), &[2, 30], i16q(2.5e-3, 0), &[2, 30], Act::NONE),
        ("add_i16_zp_relu", i16q(1e-3, 17), &[4, 5], i16q(4e-4, -300), &[5], i16q(1e-3, -5), &[4, 5], Act::RELU),
        ("add_i32", q(T::INT32, 0.0, 0), &[3, 7], q(T::INT32, 0.0, 0), &[3, 7], q(T::INT32, 0.0, 0), &[3, 7], Act::NONE),
        ("add_i32_bcast_relu", q(T::INT32, 0.0, 0), &[3, 7], q(T::INT32, 0.0, 0), &[1], q(T::INT32, 0.0, 0), &[3, 7], Act::RELU),
    ];
    for &(name, a, sa, b, sb, o, so, act) in specs {
        let data = inputs(rng, &[(a, sa), (b, sb)], -4.0, 4.0);
        out.push(Case {
            name: name.into(),
            model: single_op(Op::ADD, &[(a, sa), (b, sb)], (o, so), add_options(act)),
            inputs: data,
            compare: Compare::Exact,
        });
    }
}

/// Name, op, type, input and output shapes, padding, stride, filter, activation.
type PoolSpec<'a> = (
    &'a str,
    Op,
    Ty,
    &'a [i32],
    &'a [i32],
    Padding,
    (i32, i32),
    (i32, i32),
    Act,
);

fn pool_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    #[rustfmt::skip]
    let specs: &[PoolSpec<'_>] = &[
        ("avg_i8_valid", Op::AVERAGE_POOL_2D, i8q(0.1, -3), &[1, 8, 8, 16], &[1, 4, 4, 16], Padding::VALID, (2, 2), (2, 2), Act::NONE),
        ("avg_i8_same", Op::AVERAGE_POOL_2D, i8q(0.1, 4), &[2, 7, 9, 5], &[2, 4, 5, 5], Padding::SAME, (2, 2), (3, 3), Act::NONE),
        ("avg_i8_global", Op::AVERAGE_POOL_2D, i8q(0.05, -128), &[1, 25, 5, 70], &[1, 1, 1, 70], Padding::VALID, (5, 25), (5, 25), Act::NONE),
        ("avg_i8_same_relu", Op::AVERAGE_POOL_2D, i8q(0.02, 20), &[1, 6, 6, 3], &[1, 6, 6, 3], Padding::SAME, (1, 1), (3, 3), Act::RELU),
        ("avg_i8_rect", Op::AVERAGE_POOL_2D, i8q(0.02, 0), &[1, 10, 7, 4], &[1, 4, 3, 4], Padding::SAME, (3, 3), (2, 4), Act::RELU6),
        ("avg_i16_same", Op::AVERAGE_POOL_2D, i16q(0.001, 0), &[1, 5, 5, 3], &[1, 3, 3, 3], Padding::SAME, (2, 2), (3, 3), Act::NONE),
        ("avg_f32_valid", Op::AVERAGE_POOL_2D, F32, &[1, 9, 9, 6], &[1, 3, 3, 6], Padding::VALID, (3, 3), (3, 3), Act::NONE),
        ("avg_f32_same_relu6", Op::AVERAGE_POOL_2D, F32, &[2, 5, 6, 4], &[2, 3, 3, 4], Padding::SAME, (2, 2), (3, 3), Act::RELU6),
        ("avg_f32_global", Op::AVERAGE_POOL_2D, F32, &[1, 8, 8, 100], &[1, 1, 1, 100], Padding::VALID, (8, 8), (8, 8), Act::NONE),
        ("max_i8_valid", Op::MAX_POOL_2D, i8q(0.1, -3), &[1, 8, 8, 16], &[1, 4, 4, 16], Padding::VALID, (2, 2), (2, 2), Act::NONE),
        ("max_i8_same_relu", Op::MAX_POOL_2D, i8q(0.1, 10), &[2, 7, 9, 5], &[2, 4, 5, 5], Padding::SAME, (2, 2), (3, 3), Act::RELU),
        ("max_i8_overlap", Op::MAX_POOL_2D, i8q(0.1, 0), &[1, 6, 6, 66], &[1, 6, 6, 66], Padding::SAME, (1, 1), (3, 3), Act::RELU6),
        ("max_i16_valid", Op::MAX_POOL_2D, i16q(0.001, 0), &[1, 6, 4, 3], &[1, 3, 2, 3], Padding::VALID, (2, 2), (2, 2), Act::NONE),
        ("max_f32_same", Op::MAX_POOL_2D, F32, &[1, 7, 7, 3], &[1, 7, 7, 3], Padding::SAME, (1, 1), (3, 3), Act::NONE),
        ("max_f32_valid_relu_n1", Op::MAX_POOL_2D, F32, &[2, 6, 6, 2], &[2, 2, 2, 2], Padding::VALID, (3, 3), (3, 3), Act::RELU_N1_TO_1),
    ];
    for &(name, op, ty, si, so, padding, stride, filter, act) in specs {
        let data = rng.tensor(ty.dtype, elements(si), -3.0, 3.0);
        out.push(unary(
            name,
            op,
            (ty, si),
            (ty, so),
            pool_options(padding, stride, filter, act),
            data,
            Compare::Exact,
        ));
    }
}

fn softmax_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    let sm8 = i8q(1.0 / 256.0, -128);
    let sm16 = i16q(1.0 / 65536.0, -32768);
    type Spec<'a> = (&'a str, Ty, Ty, &'a [i32], f32);
    #[rustfmt::skip]
    let specs: &[Spec<'_>] = &[
        ("sm_i8_small", i8q(0.1, 5), sm8, &[1, 10], 1.0),
        ("sm_i8_table", i8q(0.0625, -3), sm8, &[3, 100], 1.0),
        ("sm_i8_beta2", i8q(0.3, 0), sm8, &[4, 50], 2.0),
        ("sm_i8_four", i8q(0.5, -20), sm8, &[1, 4], 1.0),
        ("sm_i8_fine", i8q(0.001, 0), sm8, &[2, 9], 1.0),
        ("sm_i8_rank4", i8q(0.2, 1), sm8, &[1, 2, 3, 7], 0.7),
        ("sm_i8_i16_small", i8q(0.15, 12), sm16, &[1, 12], 1.0),
        ("sm_i8_i16_table", i8q(0.08, -2), sm16, &[4, 64], 1.0),
        ("sm_f32", F32, F32, &[4, 10], 1.0),
        ("sm_f32_beta", F32, F32, &[2, 37], 0.5),
    ];
    for &(name, ti, to, shape, beta) in specs {
        let data = rng.tensor(ti.dtype, elements(shape), -6.0, 6.0);
        let compare = if ti.dtype == T::FLOAT32 {
            Compare::Float
        } else {
            Compare::Exact
        };
        out.push(unary(
            name,
            Op::SOFTMAX,
            (ti, shape),
            (to, shape),
            Options::Softmax { beta },
            data,
            compare,
        ));
    }
}

fn logistic_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    let every_byte: Vec<u8> = (0..=255u8).collect();
    for (name, scale, zp) in [
        ("lg_i8_a", 0.1f32, 3i64),
        ("lg_i8_b", 0.02, -128),
        ("lg_i8_c", 1.0, 0),
        ("lg_i8_d", 0.0625, -10),
    ] {
        out.push(unary(
            name,
            Op::LOGISTIC,
            (i8q(scale, zp), &[1, 256]),
            (i8q(1.0 / 256.0, -128), &[1, 256]),
            Options::None,
            every_byte.clone(),
            Compare::Exact,
        ));
    }
    let data = rng.tensor(T::FLOAT32, 200, -20.0, 20.0);
    out.push(unary(
        "lg_f32",
        Op::LOGISTIC,
        (F32, &[200]),
        (F32, &[200]),
        Options::None,
        data,
        Compare::Float,
    ));
}

fn quantize_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    type Spec<'a> = (&'a str, Op, Ty, Ty);
    #[rustfmt::skip]
    let specs: &[Spec<'_>] = &[
        ("q_f32_i8", Op::QUANTIZE, F32, i8q(0.05, -3)),
        ("q_f32_i16", Op::QUANTIZE, F32, i16q(1.0 / 3000.0, 0)),
        ("q_i16_i8", Op::QUANTIZE, i16q(1.0 / 2048.0, 0), i8q(0.02, -4)),
        ("q_i16_i32", Op::QUANTIZE, i16q(3e-4, 0), q(T::INT32, 1e-5, 0)),
        ("q_i8_i8", Op::QUANTIZE, i8q(0.1, 3), i8q(0.07, -2)),
        ("q_i8_i16", Op::QUANTIZE, i8q(0.1, 3), i16q(0.001, 0)),
        ("q_i8_i32", Op::QUANTIZE, i8q(0.1, 3), q(T::INT32, 0.003, 1)),
        ("q_i16_i16", Op::QUANTIZE, i16q(0.002, 0), i16q(0.0013, 0)),
        ("q_i32_i8", Op::QUANTIZE, q(T::INT32, 1e-4, 0), i8q(0.05, 1)),
        ("q_i32_i16", Op::QUANTIZE, q(T::INT32, 1e-5, 0), i16q(0.003, 0)),
        ("dq_i8", Op::DEQUANTIZE, i8q(0.1, -5), F32),
        ("dq_i16", Op::DEQUANTIZE, i16q(1e-4, 0), F32),
        ("dq_i8_odd", Op::DEQUANTIZE, i8q(0.013_7, 77), F32),
    ];
    let shape: &[i32] = &[3, 70];
    for &(name, op, ti, to) in specs {
        let mut data = rng.tensor(ti.dtype, elements(shape), -10.0, 10.0);
        if ti.dtype == T::FLOAT32 {
            // Exact ties and out-of-range values too.
            let scale = to.quant.unwrap().0;
            let specials = [0.5 * scale, -0.5 * scale, 2.5 * scale, -1e9, 1e9, 0.0];
            for (i, v) in specials.iter().enumerate() {
                data[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
        out.push(unary(
            name,
            op,
            (ti, shape),
            (to, shape),
            Options::None,
            data,
            Compare::Exact,
        ));
    }
}

fn cases() -> Vec<Case> {
    let mut rng = Rng(0x5eed_0ff5);
    let mut out = Vec::new();
    add_cases(&mut rng, &mut out);
    pool_cases(&mut rng, &mut out);
    softmax_cases(&mut rng, &mut out);
    logistic_cases(&mut rng, &mut out);
    quantize_cases(&mut rng, &mut out);
    int16_table_cases(&mut rng, &mut out);
    resize_cases(&mut rng, &mut out);
    shape_op_cases(&mut rng, &mut out);
    slice_pad_pack_cases(&mut rng, &mut out);
    gather_cases(&mut rng, &mut out);
    block_cases(&mut rng, &mut out);
    batch_space_cases(&mut rng, &mut out);
    bilinear_cases(&mut rng, &mut out);
    l2_pool_cases(&mut rng, &mut out);
    reduce_cases(&mut out);
    arg_and_cumsum_cases(&mut out);
    elem::cases(&mut out);
    out
}

/// ARG_MAX, ARG_MIN and CUMSUM along a constant axis.
fn arg_and_cumsum_cases(out: &mut Vec<Case>) {
    let mut rng = Rng(0x5eed_a2c5);
    type Spec<'a> = (&'a str, Op, Ty, &'a [i32], i32, Ty, &'a [i32], Options);
    let argmax = Options::ArgMax {
        output_type: T::INT32,
    };
    let argmin = Options::ArgMin {
        output_type: T::INT32,
    };
    let cumsum = |exclusive, reverse| Options::Cumsum { exclusive, reverse };
    let i32t = q(T::INT32, 0.0, 0);
    #[rustfmt::skip]
    let specs: Vec<Spec<'_>> = vec![
        ("argmax_f32", Op::ARG_MAX, F32, &[3, 5], 1, i32t, &[3], argmax.clone()),
        ("argmax_i8_last", Op::ARG_MAX, i8q(0.1, 3), &[1, 4, 4, 6], -1, i32t, &[1, 4, 4], argmax.clone()),
        ("argmax_i8_middle", Op::ARG_MAX, i8q(0.1, 3), &[2, 7, 3], 1, i32t, &[2, 3], argmax),
        ("argmin_f32_first", Op::ARG_MIN, F32, &[6, 4], 0, i32t, &[4], argmin.clone()),
        ("argmin_i8", Op::ARG_MIN, i8q(0.05, -20), &[2, 3, 9], 2, i32t, &[2, 3], argmin),
        ("cumsum_f32", Op::CUMSUM, F32, &[2, 6], 1, F32, &[2, 6], cumsum(false, false)),
        ("cumsum_f32_excl", Op::CUMSUM, F32, &[3, 4, 2], 1, F32, &[3, 4, 2], cumsum(true, false)),
        ("cumsum_f32_rev", Op::CUMSUM, F32, &[5, 3], 0, F32, &[5, 3], cumsum(false, true)),
        ("cumsum_f32_excl_rev", Op::CUMSUM, F32, &[2, 3, 4], -1, F32, &[2, 3, 4], cumsum(true, true)),
        ("cumsum_i8", Op::CUMSUM, i8q(0.05, -3), &[2, 6], 1, i8q(0.2, 4), &[2, 6], cumsum(false, false)),
        ("cumsum_i8_excl_rev", Op::CUMSUM, i8q(0.02, 10), &[3, 5, 2], 1, i8q(0.1, -6), &[3, 5, 2], cumsum(true, true)),
        ("cumsum_i8_same", Op::CUMSUM, i8q(0.1, 0), &[8], 0, i8q(0.1, 0), &[8], cumsum(false, true)),
    ];
    for (name, op, ty, shape, axis, oty, oshape, options) in specs {
        let mut w = ModelWriter::new();
        let x = w.input("x", ty.dtype, shape);
        let a = w.constant("axis", T::INT32, &[1], &i32_bytes(&[axis]));
        let y = w.output("y", oty.dtype, oshape);
        if let Some((si, zi)) = ty.quant {
            w.quantize(x, si, zi);
        }
        if let Some((so, zo)) = oty.quant.filter(|&(s, _)| s != 0.0) {
            w.quantize(y, so, zo);
        }
        w.op(op, &[Some(x), Some(a)], &[y], options);
        out.push(Case {
            name: name.into(),
            model: w.finish(),
            inputs: vec![rng.tensor(ty.dtype, elements(shape), -3.0, 3.0)],
            compare: Compare::Exact,
        });
    }
}

/// SUM, REDUCE_MAX and MEAN over constant axes (an RNG of their own, so that
/// cases added elsewhere leave their inputs alone).
fn reduce_cases(out: &mut Vec<Case>) {
    let mut rng = Rng(0x5eed_0ed5);
    type Spec<'a> = (&'a str, Op, Ty, &'a [i32], &'a [i32], Ty, &'a [i32], bool);
    #[rustfmt::skip]
    let specs: &[Spec<'_>] = &[
        ("sum_f32_hw", Op::SUM, F32, &[1, 4, 5, 3], &[1, 2], F32, &[1, 1, 1, 3], true),
        ("sum_f32_last", Op::SUM, F32, &[3, 7], &[-1], F32, &[3], false),
        ("sum_i8_requant", Op::SUM, i8q(0.05, -3), &[2, 6, 4], &[1], i8q(0.2, 5), &[2, 4], false),
        ("sum_i8_same", Op::SUM, i8q(0.1, 2), &[4, 3], &[0], i8q(0.1, 2), &[1, 3], true),
        ("sum_i8_all", Op::SUM, i8q(0.02, 10), &[2, 3, 4], &[0, 1, 2], i8q(0.5, -20), &[1, 1, 1], true),
        ("sum_i16", Op::SUM, i16q(0.001, 0), &[3, 5, 2], &[0, 2], i16q(0.004, 0), &[5], false),
        ("rmax_f32", Op::REDUCE_MAX, F32, &[2, 3, 4], &[1], F32, &[2, 4], false),
        ("rmax_f32_dup_axes", Op::REDUCE_MAX, F32, &[2, 3, 4], &[0, -3, 2], F32, &[1, 3, 1], true),
        ("rmax_i8", Op::REDUCE_MAX, i8q(0.05, -7), &[1, 5, 5, 6], &[1, 2], i8q(0.05, -7), &[1, 6], false),
        // MEAN int8 over height and width: TFLM has a path of its own for a
        // 4-D input with axes {1, 2} and keep_dims, whatever the two
        // quantisations (the first is a held-out model's global pool).
        ("mean_i8_hw_same_keep", Op::MEAN, i8q(0.0705, -9), &[1, 7, 7, 1280], &[1, 2], i8q(0.0705, -9), &[1, 1, 1, 1280], true),
        ("mean_i8_hw_same_nokeep", Op::MEAN, i8q(0.0705, -9), &[1, 7, 7, 64], &[1, 2], i8q(0.0705, -9), &[1, 64], false),
        ("mean_i8_wh_same_keep", Op::MEAN, i8q(0.05, 3), &[2, 5, 3, 16], &[2, 1], i8q(0.05, 3), &[2, 1, 1, 16], true),
        ("mean_i8_hw_requant_keep", Op::MEAN, i8q(0.05, -3), &[1, 6, 6, 32], &[1, 2], i8q(0.02, 4), &[1, 1, 1, 32], true),
        ("mean_i8_w_same", Op::MEAN, i8q(0.0705, -9), &[1, 4, 7, 8], &[2], i8q(0.0705, -9), &[1, 4, 1, 8], true),
        ("mean_i16_hw_same_keep", Op::MEAN, i16q(0.001, 0), &[1, 5, 5, 24], &[1, 2], i16q(0.001, 0), &[1, 1, 1, 24], true),
    ];
    for &(name, op, ty, shape, axes, oty, oshape, keep_dims) in specs {
        let mut w = ModelWriter::new();
        let x = w.input("x", ty.dtype, shape);
        let a = w.constant("axes", T::INT32, &[axes.len() as i32], &i32_bytes(axes));
        let y = w.output("y", oty.dtype, oshape);
        if let (Some((si, zi)), Some((so, zo))) = (ty.quant, oty.quant) {
            w.quantize(x, si, zi).quantize(y, so, zo);
        }
        w.op(
            op,
            &[Some(x), Some(a)],
            &[y],
            Options::Reducer { keep_dims },
        );
        // Floats too: hilt adds in TFLM's order.
        out.push(Case {
            name: name.into(),
            model: w.finish(),
            inputs: vec![rng.tensor(ty.dtype, elements(shape), -3.0, 3.0)],
            compare: Compare::Exact,
        });
    }
}

/// int16 SOFTMAX and LOGISTIC: TFLM's table forms (after the older cases,
/// so that their inputs stay the same).
fn int16_table_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    let q015 = i16q(1.0 / 32768.0, 0);
    #[rustfmt::skip]
    let softmax: &[(&str, f32, &[i32], f32)] = &[
        ("sm_i16_small", 0.0005, &[1, 10], 1.0),
        ("sm_i16_wide", 0.0002, &[3, 100], 1.0),
        ("sm_i16_beta", 0.001, &[2, 33], 0.6),
        ("sm_i16_coarse", 0.01, &[4, 8], 1.0),
    ];
    for &(name, scale, shape, beta) in softmax {
        let data = rng.tensor(T::INT16, elements(shape), 0.0, 0.0);
        let (input, output) = ((i16q(scale, 0), shape), (q015, shape));
        let options = Options::Softmax { beta };
        out.push(unary(
            name,
            Op::SOFTMAX,
            input,
            output,
            options,
            data,
            Compare::Exact,
        ));
    }
    for (name, scale) in [
        ("lg_i16_pot", 1.0f32 / 4096.0),
        ("lg_i16_fine", 0.0001),
        ("lg_i16_coarse", 0.0011),
    ] {
        let data = rng.tensor(T::INT16, 512, 0.0, 0.0);
        let (input, output) = ((i16q(scale, 0), &[2, 256][..]), (q015, &[2, 256][..]));
        out.push(unary(
            name,
            Op::LOGISTIC,
            input,
            output,
            Options::None,
            data,
            Compare::Exact,
        ));
    }
}

/// RESIZE_NEAREST_NEIGHBOR with each corner and centre rule.
fn resize_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    /// Name, type, input shape, output height and width, align_corners, half_pixel_centers.
    type Spec<'a> = (&'a str, Ty, [i32; 4], [i32; 2], bool, bool);
    #[rustfmt::skip]
    let specs: &[Spec<'_>] = &[
        ("rnn_i8_up", i8q(0.1, 3), [1, 3, 5, 2], [7, 9], false, false),
        ("rnn_i8_align", i8q(0.1, 3), [1, 3, 5, 2], [7, 9], true, false),
        ("rnn_i8_half", i8q(0.1, 3), [2, 4, 3, 3], [9, 5], false, true),
        ("rnn_i8_both", i8q(0.1, 3), [1, 5, 4, 1], [3, 11], true, true),
        ("rnn_i16_down", i16q(0.001, 0), [1, 8, 9, 2], [3, 4], false, true),
        ("rnn_f32_up", F32, [1, 2, 3, 4], [6, 7], true, true),
    ];
    for &(name, ty, input, size, align_corners, half_pixel_centers) in specs {
        let output = [input[0], size[0], size[1], input[3]];
        let mut w = hilt_runtime::writer::ModelWriter::new();
        let x = w.input("x", ty.dtype, &input);
        let s = w.constant(
            "size",
            T::INT32,
            &[2],
            &hilt_runtime::writer::i32_bytes(&size),
        );
        let y = w.output("y", ty.dtype, &output);
        if let Some((scale, zp)) = ty.quant {
            w.quantize(x, scale, zp).quantize(y, scale, zp);
        }
        let options = Options::ResizeNearestNeighbor {
            align_corners,
            half_pixel_centers,
        };
        w.op(
            Op::RESIZE_NEAREST_NEIGHBOR,
            &[Some(x), Some(s)],
            &[y],
            options,
        );
        out.push(Case {
            name: name.into(),
            model: w.finish(),
            inputs: vec![rng.tensor(ty.dtype, elements(&input), -3.0, 3.0)],
            compare: Compare::Exact,
        });
    }
}

#[test]
#[ignore = "rewrites tests/data/tflm_ops; run run_tflm.py afterwards"]
fn write_vectors() {
    let dir = dir();
    std::fs::create_dir_all(&dir).unwrap();
    let mut list = String::new();
    for case in cases() {
        std::fs::write(dir.join(format!("{}.tflite", case.name)), &case.model).unwrap();
        for (i, data) in case.inputs.iter().enumerate() {
            std::fs::write(dir.join(format!("{}.in{i}.bin", case.name)), data).unwrap();
        }
        let compare = match case.compare {
            Compare::Exact => "exact",
            Compare::Float => "float",
        };
        list.push_str(&format!("{} {} {compare}\n", case.name, case.inputs.len()));
    }
    std::fs::write(dir.join("cases.txt"), list).unwrap();
}

fn compare(name: &str, rule: &str, got: &[u8], want: &[u8]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{name}: {} bytes, TFLM {}", got.len(), want.len()));
    }
    match rule {
        "exact" => match got.iter().zip(want).position(|(a, b)| a != b) {
            None => Ok(()),
            Some(i) => Err(format!(
                "{name}: first difference at byte {i} ({} vs TFLM {}); {} bytes differ",
                got[i],
                want[i],
                got.iter().zip(want).filter(|(a, b)| a != b).count()
            )),
        },
        "float" => {
            for (i, (a, b)) in f32s(got).iter().zip(f32s(want)).enumerate() {
                // Equal infinities and two NaNs agree too.
                let within =
                    *a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-5 + 1e-4 * b.abs();
                if !within {
                    return Err(format!("{name}: element {i}: {a} vs TFLM {b}"));
                }
            }
            Ok(())
        }
        other => Err(format!("{name}: unknown rule {other}")),
    }
}

#[test]
fn kernels_match_tflm() {
    let dir = dir();
    let list = std::fs::read_to_string(dir.join("cases.txt")).expect("cases.txt");
    let mut failures = Vec::new();
    let mut checked = 0;
    for line in list.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (name, n, rule) = (f[0], f[1].parse::<usize>().unwrap(), f[2]);
        let read =
            |file: String| std::fs::read(dir.join(&file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let model = read(format!("{name}.tflite"));
        let inputs: Vec<Vec<u8>> = (0..n).map(|i| read(format!("{name}.in{i}.bin"))).collect();
        let want = read(format!("{name}.out0.bin"));
        let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        match run(&model, &refs) {
            Ok(outputs) => {
                if let Err(e) = compare(name, rule, &outputs[0], &want) {
                    failures.push(e);
                }
                // Further outputs (UNPACK's), where TFLM wrote them.
                for (k, got) in outputs.iter().enumerate().skip(1) {
                    let Ok(want) = std::fs::read(dir.join(format!("{name}.out{k}.bin"))) else {
                        failures.push(format!("{name}: no TFLM output {k}"));
                        continue;
                    };
                    if let Err(e) = compare(&format!("{name} output {k}"), rule, got, &want) {
                        failures.push(e);
                    }
                }
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
        checked += 1;
    }
    assert!(checked >= 50, "only {checked} cases");
    assert!(
        failures.is_empty(),
        "{} of {checked} cases differ from TFLM:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// One input of an operator in [`graph_case`]: a model input filled with
/// random data, or a constant.
enum Arg<'a> {
    Input(Ty, &'a [i32]),
    Const(T, Vec<i32>, Vec<u8>),
}

fn i64_bytes(values: &[i64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// A one-op case whose inputs are `args` in order and whose outputs are
/// model outputs (only the first is compared).
fn graph_case(
    rng: &mut Rng,
    name: &str,
    op: Op,
    args: &[Arg<'_>],
    outputs: &[(Ty, &[i32])],
    options: Options,
) -> Case {
    let mut w = hilt_runtime::writer::ModelWriter::new();
    let mut ids = Vec::new();
    let mut inputs = Vec::new();
    for (i, arg) in args.iter().enumerate() {
        let t = match arg {
            Arg::Input(ty, shape) => {
                let t = w.input(&format!("x{i}"), ty.dtype, shape);
                if let Some((scale, zp)) = ty.quant.filter(|&(s, _)| s != 0.0) {
                    w.quantize(t, scale, zp);
                }
                inputs.push(match ty.dtype {
                    T::INT64 => rng.tensor(T::INT32, 2 * elements(shape), 0.0, 0.0),
                    T::BOOL => (0..elements(shape))
                        .map(|_| rng.next_u64() as u8 & 1)
                        .collect(),
                    dtype => rng.tensor(dtype, elements(shape), -3.0, 3.0),
                });
                t
            }
            Arg::Const(dtype, shape, data) => w.constant(&format!("c{i}"), *dtype, shape, data),
        };
        ids.push(Some(t));
    }
    let mut outs = Vec::new();
    for (i, (ty, shape)) in outputs.iter().enumerate() {
        let t = w.output(&format!("y{i}"), ty.dtype, shape);
        if let Some((scale, zp)) = ty.quant.filter(|&(s, _)| s != 0.0) {
            w.quantize(t, scale, zp);
        }
        outs.push(t);
    }
    w.op(op, &ids, &outs, options);
    Case {
        name: name.into(),
        model: w.finish(),
        inputs,
        compare: Compare::Exact,
    }
}

/// SQUEEZE, EXPAND_DIMS, SHAPE, FILL and ZEROS_LIKE.
fn shape_op_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    use Arg::{Const, Input};
    let (i8t, i16t, i32t) = (i8q(0.1, -3), i16q(0.002, 0), q(T::INT32, 0.0, 0));
    let squeeze = |dims: &[i32]| Options::Squeeze {
        squeeze_dims: dims.to_vec(),
    };
    let axis = |a: i32| Const(T::INT32, vec![1], i32_bytes(&[a]));
    let i64t = q(T::INT64, 0.0, 0);
    #[rustfmt::skip]
    let cases = vec![
        graph_case(rng, "squeeze_i8_all", Op::SQUEEZE, &[Input(i8t, &[1, 3, 1, 4])], &[(i8t, &[3, 4])], squeeze(&[])),
        graph_case(rng, "squeeze_f32_last", Op::SQUEEZE, &[Input(F32, &[2, 1, 3, 1])], &[(F32, &[2, 1, 3])], squeeze(&[-1])),
        graph_case(rng, "squeeze_i16_first", Op::SQUEEZE, &[Input(i16t, &[1, 5, 1])], &[(i16t, &[5, 1])], squeeze(&[0])),
        graph_case(rng, "squeeze_i32_none", Op::SQUEEZE, &[Input(i32t, &[1, 1, 6])], &[(i32t, &[6])], Options::None),
        graph_case(rng, "expand_i8_mid", Op::EXPAND_DIMS, &[Input(i8t, &[3, 4]), axis(1)], &[(i8t, &[3, 1, 4])], Options::None),
        graph_case(rng, "expand_f32_neg", Op::EXPAND_DIMS, &[Input(F32, &[2, 3]), axis(-1)], &[(F32, &[2, 3, 1])], Options::None),
        graph_case(rng, "expand_i16_front", Op::EXPAND_DIMS, &[Input(i16t, &[5]), axis(0)], &[(i16t, &[1, 5])], Options::None),
        graph_case(rng, "shape_f32", Op::SHAPE, &[Input(F32, &[2, 3, 4])], &[(i32t, &[3])], Options::Shape { out_type: T::INT32 }),
        graph_case(rng, "shape_i8_rank5", Op::SHAPE, &[Input(i8t, &[1, 7, 1, 2, 3])], &[(i32t, &[5])], Options::Shape { out_type: T::INT32 }),
        graph_case(rng, "fill_f32", Op::FILL, &[Const(T::INT32, vec![3], i32_bytes(&[2, 3, 4])), Input(F32, &[])], &[(F32, &[2, 3, 4])], Options::None),
        graph_case(rng, "fill_i32_dims64", Op::FILL, &[Const(T::INT64, vec![2], i64_bytes(&[3, 5])), Input(i32t, &[])], &[(i32t, &[3, 5])], Options::None),
        graph_case(rng, "fill_i8", Op::FILL, &[Const(T::INT32, vec![2], i32_bytes(&[4, 4])), Input(i8t, &[])], &[(i8t, &[4, 4])], Options::None),
        graph_case(rng, "zeros_f32", Op::ZEROS_LIKE, &[Input(F32, &[3, 5])], &[(F32, &[3, 5])], Options::None),
        graph_case(rng, "zeros_i8_zp", Op::ZEROS_LIKE, &[Input(i8t, &[2, 2, 3])], &[(i8t, &[2, 2, 3])], Options::None),
        graph_case(rng, "zeros_i32", Op::ZEROS_LIKE, &[Input(i32t, &[7])], &[(i32t, &[7])], Options::None),
        graph_case(rng, "zeros_i64", Op::ZEROS_LIKE, &[Input(i64t, &[2, 3])], &[(i64t, &[2, 3])], Options::None),
    ];
    out.extend(cases);
}

/// SLICE, MIRROR_PAD, PACK and UNPACK.
fn slice_pad_pack_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    use Arg::{Const, Input};
    let (i8t, i16t, i32t) = (i8q(0.1, -3), i16q(0.002, 0), q(T::INT32, 0.0, 0));
    let (i64t, bool_t) = (q(T::INT64, 0.0, 0), q(T::BOOL, 0.0, 0));
    let v32 = |v: &[i32]| Const(T::INT32, vec![v.len() as i32], i32_bytes(v));
    let v64 = |v: &[i64]| Const(T::INT64, vec![v.len() as i32], i64_bytes(v));
    let pads = |v: &[i32]| Const(T::INT32, vec![v.len() as i32 / 2, 2], i32_bytes(v));
    let pads64 = |v: &[i64]| Const(T::INT64, vec![v.len() as i32 / 2, 2], i64_bytes(v));
    let reflect = Options::MirrorPad {
        mode: hilt_runtime::schema::MirrorPadMode::REFLECT,
    };
    let symmetric = Options::MirrorPad {
        mode: hilt_runtime::schema::MirrorPadMode::SYMMETRIC,
    };
    let pack = |n: i32, axis: i32| Options::Pack {
        values_count: n,
        axis,
    };
    let unpack = |n: i32, axis: i32| Options::Unpack { num: n, axis };
    #[rustfmt::skip]
    let cases = vec![
        graph_case(rng, "slice_i8_4d", Op::SLICE, &[Input(i8t, &[2, 5, 6, 3]), v32(&[1, 1, 2, 0]), v32(&[1, 3, -1, 2])], &[(i8t, &[1, 3, 4, 2])], Options::None),
        graph_case(rng, "slice_f32_5d_i64", Op::SLICE, &[Input(F32, &[2, 3, 2, 4, 3]), v64(&[0, 1, 1, 1, 0]), v64(&[2, 2, 1, -1, 2])], &[(F32, &[2, 2, 1, 3, 2])], Options::None),
        graph_case(rng, "slice_i16_1d", Op::SLICE, &[Input(i16t, &[17]), v32(&[5]), v32(&[9])], &[(i16t, &[9])], Options::None),
        graph_case(rng, "slice_i32_all", Op::SLICE, &[Input(i32t, &[3, 4]), v32(&[0, 0]), v32(&[-1, -1])], &[(i32t, &[3, 4])], Options::None),
        graph_case(rng, "slice_bool", Op::SLICE, &[Input(bool_t, &[4, 6]), v32(&[2, 1]), v32(&[2, 4])], &[(bool_t, &[2, 4])], Options::None),
        graph_case(rng, "mpad_i8_reflect", Op::MIRROR_PAD, &[Input(i8t, &[1, 4, 5, 3]), pads(&[0, 0, 2, 3, 4, 1, 0, 0])], &[(i8t, &[1, 9, 10, 3])], reflect.clone()),
        graph_case(rng, "mpad_i8_symmetric", Op::MIRROR_PAD, &[Input(i8t, &[2, 3, 4]), pads(&[1, 2, 3, 3, 0, 4])], &[(i8t, &[5, 9, 8])], symmetric.clone()),
        graph_case(rng, "mpad_f32_reflect_i64", Op::MIRROR_PAD, &[Input(F32, &[6, 7]), pads64(&[5, 0, 1, 6])], &[(F32, &[11, 14])], reflect),
        graph_case(rng, "mpad_f32_symmetric_1d", Op::MIRROR_PAD, &[Input(F32, &[5]), pads(&[5, 4])], &[(F32, &[14])], symmetric),
        graph_case(rng, "pack_i8_axis0", Op::PACK, &[Input(i8t, &[2, 3]), Input(i8t, &[2, 3]), Input(i8t, &[2, 3])], &[(i8t, &[3, 2, 3])], pack(3, 0)),
        graph_case(rng, "pack_f32_axis1", Op::PACK, &[Input(F32, &[4, 5]), Input(F32, &[4, 5])], &[(F32, &[4, 2, 5])], pack(2, 1)),
        graph_case(rng, "pack_i32_last", Op::PACK, &[Input(i32t, &[3, 2]), Input(i32t, &[3, 2]), Input(i32t, &[3, 2]), Input(i32t, &[3, 2])], &[(i32t, &[3, 2, 4])], pack(4, -1)),
        graph_case(rng, "pack_i64", Op::PACK, &[Input(i64t, &[3]), Input(i64t, &[3])], &[(i64t, &[2, 3])], pack(2, 0)),
        graph_case(rng, "pack_i16", Op::PACK, &[Input(i16t, &[2, 2]), Input(i16t, &[2, 2])], &[(i16t, &[2, 2, 2])], pack(2, 2)),
        graph_case(rng, "unpack_i8_axis0", Op::UNPACK, &[Input(i8t, &[3, 2, 4])], &[(i8t, &[2, 4]), (i8t, &[2, 4]), (i8t, &[2, 4])], unpack(3, 0)),
        graph_case(rng, "unpack_f32_axis1", Op::UNPACK, &[Input(F32, &[2, 4, 3])], &[(F32, &[2, 3]), (F32, &[2, 3]), (F32, &[2, 3]), (F32, &[2, 3])], unpack(4, 1)),
        graph_case(rng, "unpack_i16_last", Op::UNPACK, &[Input(i16t, &[3, 2])], &[(i16t, &[3]), (i16t, &[3])], unpack(2, -1)),
        graph_case(rng, "unpack_i32", Op::UNPACK, &[Input(i32t, &[2, 5])], &[(i32t, &[5]), (i32t, &[5])], unpack(2, 0)),
    ];
    out.extend(cases);
    // A size computed at run time (here a model input): TFLM reads it at
    // invoke, as hilt does when it is not constant.
    let mut dynamic = graph_case(
        rng,
        "slice_i8_dynamic_size",
        Op::SLICE,
        &[Input(i8t, &[4, 5]), v32(&[1, 2]), Input(i32t, &[2])],
        &[(i8t, &[2, 3])],
        Options::None,
    );
    dynamic.inputs[1] = i32_bytes(&[2, -1]);
    out.push(dynamic);
}

/// GATHER over TFLM's params types (int8, float32; it refuses int16,
/// int32 and int64 indices), axes and batch dimensions.
fn gather_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    use Arg::{Const, Input};
    let (i8t, i32t) = (i8q(0.1, -3), q(T::INT32, 0.0, 0));
    let gather = |axis: i32, batch_dims: i32| Options::Gather { axis, batch_dims };
    let idx32 = |shape: &[i32], v: &[i32]| Const(T::INT32, shape.to_vec(), i32_bytes(v));
    #[rustfmt::skip]
    let cases = vec![
        graph_case(rng, "gather_i8_axis0", Op::GATHER, &[Input(i8t, &[5, 3]), idx32(&[4], &[4, 0, 2, 2])], &[(i8t, &[4, 3])], gather(0, 0)),
        graph_case(rng, "gather_f32_axis1_2d_idx", Op::GATHER, &[Input(F32, &[2, 6, 3]), idx32(&[2, 2], &[5, 1, 0, 3])], &[(F32, &[2, 2, 2, 3])], gather(1, 0)),
        graph_case(rng, "gather_i8_batch", Op::GATHER, &[Input(i8t, &[2, 5, 4]), idx32(&[2, 3], &[0, 4, 2, 1, 1, 3])], &[(i8t, &[2, 3, 4])], gather(1, 1)),
        graph_case(rng, "gather_f32_batch_neg", Op::GATHER, &[Input(F32, &[3, 2, 4]), idx32(&[3, 2], &[1, 0, 3, 3, 2, 0])], &[(F32, &[3, 2, 2])], gather(2, -1)),
        graph_case(rng, "gather_i8_scalar_idx", Op::GATHER, &[Input(i8t, &[4, 6]), idx32(&[], &[2])], &[(i8t, &[6])], gather(0, 0)),
    ];
    out.extend(cases);
    // Indices from a model input, as when another op computes them.
    let mut dynamic = graph_case(
        rng,
        "gather_i8_input_indices",
        Op::GATHER,
        &[Input(i8t, &[6, 5]), Input(i32t, &[3])],
        &[(i8t, &[3, 5])],
        gather(0, 0),
    );
    dynamic.inputs[1] = i32_bytes(&[5, 0, 3]);
    out.push(dynamic);
}

/// SPACE_TO_DEPTH and DEPTH_TO_SPACE (TFLM takes int8 and float32 only).
fn block_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    use Arg::Input;
    let i8t = i8q(0.1, -3);
    let s2d = |block_size| Options::BlockSize {
        depth_to_space: false,
        block_size,
    };
    let d2s = |block_size| Options::BlockSize {
        depth_to_space: true,
        block_size,
    };
    #[rustfmt::skip]
    let cases = vec![
        graph_case(rng, "s2d_i8_2", Op::SPACE_TO_DEPTH, &[Input(i8t, &[1, 4, 6, 3])], &[(i8t, &[1, 2, 3, 12])], s2d(2)),
        graph_case(rng, "s2d_f32_3", Op::SPACE_TO_DEPTH, &[Input(F32, &[2, 6, 3, 2])], &[(F32, &[2, 2, 1, 18])], s2d(3)),
        graph_case(rng, "d2s_i8_2", Op::DEPTH_TO_SPACE, &[Input(i8t, &[1, 2, 3, 12])], &[(i8t, &[1, 4, 6, 3])], d2s(2)),
        graph_case(rng, "d2s_f32_4", Op::DEPTH_TO_SPACE, &[Input(F32, &[2, 1, 2, 32])], &[(F32, &[2, 4, 8, 2])], d2s(4)),
    ];
    out.extend(cases);
}

/// SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND (cropping), 3-D and 4-D.
/// SPACE_TO_BATCH_ND's cases have no padding: TFLM's micro kernel never
/// sets the pad value its reference loop reads (`output_offset` of an op
/// data it allocates but does not fill), so its padding bytes are whatever
/// the arena held (0x09 in this build); hilt pads with zero, the zero
/// point for int8, which `kernel_data_ops` checks.
fn batch_space_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    use Arg::{Const, Input};
    let i8t = i8q(0.1, -3);
    let v = |shape: &[i32], values: &[i32]| Const(T::INT32, shape.to_vec(), i32_bytes(values));
    #[rustfmt::skip]
    let cases = vec![
        graph_case(rng, "s2b_i8", Op::SPACE_TO_BATCH_ND, &[Input(i8t, &[1, 6, 4, 2]), v(&[2], &[2, 2]), v(&[2, 2], &[0, 0, 0, 0])], &[(i8t, &[4, 3, 2, 2])], Options::None),
        graph_case(rng, "s2b_f32_nopad", Op::SPACE_TO_BATCH_ND, &[Input(F32, &[2, 4, 6, 3]), v(&[2], &[2, 3]), v(&[2, 2], &[0, 0, 0, 0])], &[(F32, &[12, 2, 2, 3])], Options::None),
        graph_case(rng, "s2b_f32_3d", Op::SPACE_TO_BATCH_ND, &[Input(F32, &[2, 9, 4]), v(&[1], &[3]), v(&[1, 2], &[0, 0])], &[(F32, &[6, 3, 4])], Options::None),
        graph_case(rng, "b2s_i8_crop", Op::BATCH_TO_SPACE_ND, &[Input(i8t, &[4, 3, 2, 2]), v(&[2], &[2, 2]), v(&[2, 2], &[1, 0, 0, 1])], &[(i8t, &[1, 5, 3, 2])], Options::None),
        graph_case(rng, "b2s_f32", Op::BATCH_TO_SPACE_ND, &[Input(F32, &[12, 2, 2, 3]), v(&[2], &[2, 3]), v(&[2, 2], &[0, 0, 0, 0])], &[(F32, &[2, 4, 6, 3])], Options::None),
        graph_case(rng, "b2s_i8_3d", Op::BATCH_TO_SPACE_ND, &[Input(i8t, &[6, 3, 4]), v(&[1], &[3]), v(&[1, 2], &[2, 2])], &[(i8t, &[2, 5, 4])], Options::None),
    ];
    out.extend(cases);
    // Block shape and crops from model inputs: TFLM reads them at invoke,
    // and so does hilt when they are not constant.
    let i32t = q(T::INT32, 0.0, 0);
    let mut dynamic = graph_case(
        rng,
        "b2s_i8_input_block",
        Op::BATCH_TO_SPACE_ND,
        &[
            Input(i8t, &[6, 2, 3, 2]),
            Input(i32t, &[2]),
            Input(i32t, &[2, 2]),
        ],
        &[(i8t, &[1, 5, 6, 2])],
        Options::None,
    );
    dynamic.inputs[1] = i32_bytes(&[3, 2]);
    dynamic.inputs[2] = i32_bytes(&[0, 1, 0, 0]);
    out.push(dynamic);
}

/// RESIZE_BILINEAR: up and down, each corner and centre rule, TFLM's
/// integer path for int8 (TFLM fails on int16 at invoke).
fn bilinear_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    use Arg::{Const, Input};
    /// Name, type, input shape, output height and width, align_corners, half_pixel_centers.
    type Spec<'a> = (&'a str, Ty, [i32; 4], [i32; 2], bool, bool);
    #[rustfmt::skip]
    let specs: &[Spec<'_>] = &[
        ("rbl_i8_up", i8q(0.1, 3), [1, 3, 5, 2], [7, 9], false, false),
        ("rbl_i8_align", i8q(0.1, 3), [1, 3, 5, 2], [7, 9], true, false),
        ("rbl_i8_half", i8q(0.1, -128), [2, 4, 3, 3], [9, 5], false, true),
        ("rbl_i8_down_half", i8q(0.05, 20), [1, 8, 9, 4], [3, 4], false, true),
        ("rbl_i8_down", i8q(0.05, 0), [1, 7, 10, 1], [2, 3], false, false),
        ("rbl_i8_one", i8q(0.05, 0), [1, 4, 4, 2], [1, 1], true, false),
        ("rbl_f32_up", F32, [1, 2, 3, 4], [6, 7], false, false),
        ("rbl_f32_align", F32, [2, 3, 3, 2], [5, 8], true, false),
        ("rbl_f32_half", F32, [1, 5, 4, 3], [8, 3], false, true),
    ];
    for &(name, ty, input, size, align_corners, half_pixel_centers) in specs {
        let output = [input[0], size[0], size[1], input[3]];
        let options = Options::ResizeBilinear {
            align_corners,
            half_pixel_centers,
        };
        let size = Const(T::INT32, vec![2], i32_bytes(&size));
        out.push(graph_case(
            rng,
            name,
            Op::RESIZE_BILINEAR,
            &[Input(ty, &input), size],
            &[(ty, &output)],
            options,
        ));
    }
}

/// L2_POOL_2D (float32, TFLM's one type), each padding, with activations.
fn l2_pool_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    let l2 = Op::L2_POOL_2D;
    #[rustfmt::skip]
    let specs: &[PoolSpec<'_>] = &[
        ("l2_f32_valid", l2, F32, &[1, 8, 8, 5], &[1, 4, 4, 5], Padding::VALID, (2, 2), (2, 2), Act::NONE),
        ("l2_f32_same", l2, F32, &[2, 7, 9, 3], &[2, 4, 5, 3], Padding::SAME, (2, 2), (3, 3), Act::NONE),
        ("l2_f32_relu6", l2, F32, &[1, 6, 6, 17], &[1, 6, 6, 17], Padding::SAME, (1, 1), (3, 2), Act::RELU6),
        ("l2_f32_global", l2, F32, &[1, 5, 7, 4], &[1, 1, 1, 4], Padding::VALID, (7, 5), (7, 5), Act::RELU_N1_TO_1),
    ];
    for &(name, op, ty, si, so, padding, stride, filter, act) in specs {
        let data = rng.tensor(ty.dtype, elements(si), -3.0, 3.0);
        let options = pool_options(padding, stride, filter, act);
        out.push(unary(
            name,
            op,
            (ty, si),
            (ty, so),
            options,
            data,
            Compare::Exact,
        ));
    }
}
