//! The element-wise, activation and comparison cases of `tflm_op_vectors`
//! (DIV, the unary maths, RELU family, comparisons, SELECT_V2, CAST), with
//! their own random stream so that cases added elsewhere leave these
//! inputs unchanged.

use hilt_runtime::schema::{ActivationFunctionType as Act, BuiltinOperator as Op, TensorType as T};
use hilt_runtime::writer::Options;

use super::one_op::*;
use super::{Case, Compare};

/// Name, op, input and output types, the float input range, the comparison.
type UnarySpec<'a> = (&'a str, Op, Ty, Ty, (f32, f32), Compare);
/// Name, type, and the shapes of the condition, x, y and the output.
type SelectSpec<'a> = (&'a str, Ty, &'a [i32], &'a [i32], &'a [i32], &'a [i32]);
/// Name, the two input types, their shapes and the output's.
type ComparisonSpec<'a> = (&'a str, Ty, Ty, &'a [i32], &'a [i32], &'a [i32]);

/// Every case of this module, in a fixed order.
pub(crate) fn cases(out: &mut Vec<Case>) {
    let mut rng = Rng(0xe1e3_0d17);
    div_cases(&mut rng, out);
    unary_math_cases(&mut rng, out);
    relu_cases(&mut rng, out);
    hard_swish_cases(&mut rng, out);
    elu_cases(&mut rng, out);
    log_softmax_cases(&mut rng, out);
    comparison_cases(&mut rng, out);
    select_cases(&mut rng, out);
    cast_cases(&mut rng, out);
    cast_edges(out);
    l2_norm_cases(&mut rng, out);
}

fn div_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    type Spec<'a> = (&'a str, Ty, &'a [i32], Ty, &'a [i32], Ty, &'a [i32], Act);
    let i32t = q(T::INT32, 0.0, 0);
    #[rustfmt::skip]
    let specs: &[Spec<'_>] = &[
        ("div_f32_same", F32, &[2, 3, 7], F32, &[2, 3, 7], F32, &[2, 3, 7], Act::NONE),
        ("div_f32_bcast_relu6", F32, &[4, 1, 6], F32, &[1, 5, 6], F32, &[4, 5, 6], Act::RELU6),
        ("div_f32_scalar_relu", F32, &[30], F32, &[1], F32, &[30], Act::RELU),
        ("div_i32_same", i32t, &[3, 7], i32t, &[3, 7], i32t, &[3, 7], Act::NONE),
        ("div_i32_bcast_relu", i32t, &[2, 3, 4], i32t, &[4], i32t, &[2, 3, 4], Act::RELU),
        ("div_i8_same", i8q(0.05, -3), &[4, 64], i8q(0.1, 7), &[4, 64], i8q(0.12, -10), &[4, 64], Act::NONE),
        ("div_i8_unit", i8q(1.0, 0), &[2, 50], i8q(1.0, 0), &[2, 50], i8q(1.0, 0), &[2, 50], Act::NONE),
        ("div_i8_fine_out", i8q(0.1, 0), &[128], i8q(0.1, 0), &[128], i8q(0.01, 5), &[128], Act::NONE),
        ("div_i8_coarse_out", i8q(0.02, 4), &[1, 3, 40], i8q(0.5, -2), &[1, 3, 40], i8q(0.3, 0), &[1, 3, 40], Act::NONE),
        ("div_i8_bcast_relu", i8q(0.05, 2), &[2, 3, 8], i8q(0.04, -9), &[8], i8q(0.2, -20), &[2, 3, 8], Act::RELU),
        ("div_i8_scalar_relu6", i8q(0.04, 0), &[1, 5, 5, 4], i8q(0.02, -128), &[1], i8q(0.05, -100), &[1, 5, 5, 4], Act::RELU6),
    ];
    for &(name, a, sa, b, sb, o, so, act) in specs {
        let first = rng.tensor(a.dtype, elements(sa), -4.0, 4.0);
        let mut second = rng.tensor(b.dtype, elements(sb), -4.0, 4.0);
        // No divisor of zero (TFLM's reference leaves it undefined).
        match b.dtype {
            T::INT8 => {
                let zp = b.quant.unwrap().1 as i8;
                for v in &mut second {
                    if *v as i8 == zp {
                        *v = zp.wrapping_add(1) as u8;
                    }
                }
            }
            T::INT32 => {
                for c in second.chunks_exact_mut(4) {
                    let v = i32::from_le_bytes(c.try_into().unwrap());
                    // Small divisors too, so quotients are not all 0.
                    let v = if v % 3 == 0 { (v % 17) | 1 } else { v };
                    c.copy_from_slice(&v.to_le_bytes());
                }
            }
            _ => {}
        }
        out.push(Case {
            name: name.into(),
            model: single_op(
                Op::DIV,
                &[(a, sa), (b, sb)],
                (o, so),
                Options::Div { activation: act },
            ),
            inputs: vec![first, second],
            // IEEE division is exact in both; so is every integer path.
            compare: Compare::Exact,
        });
    }
}

fn unary_math_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    let i16raw = q(T::INT16, 0.0, 0);
    #[rustfmt::skip]
    let specs: &[UnarySpec<'_>] = &[
        ("abs_f32", Op::ABS, F32, F32, (-10.0, 10.0), Compare::Exact),
        ("abs_i8_same", Op::ABS, i8q(0.05, -3), i8q(0.05, -3), (0.0, 0.0), Compare::Exact),
        ("abs_i8_rescale", Op::ABS, i8q(0.05, 10), i8q(0.03, -128), (0.0, 0.0), Compare::Exact),
        ("abs_i8_coarse", Op::ABS, i8q(0.02, -128), i8q(0.1, 5), (0.0, 0.0), Compare::Exact),
        ("abs_i16_same", Op::ABS, i16q(0.001, 0), i16q(0.001, 0), (0.0, 0.0), Compare::Exact),
        ("abs_i16_rescale", Op::ABS, i16q(0.001, 0), i16q(0.0007, 0), (0.0, 0.0), Compare::Exact),
        ("abs_i16_raw", Op::ABS, i16raw, i16raw, (0.0, 0.0), Compare::Exact),
        ("neg_f32", Op::NEG, F32, F32, (-10.0, 10.0), Compare::Exact),
        ("sqrt_f32", Op::SQRT, F32, F32, (0.0, 100.0), Compare::Exact),
        ("exp_f32", Op::EXP, F32, F32, (-20.0, 20.0), Compare::Float),
        ("log_f32", Op::LOG, F32, F32, (0.001, 1000.0), Compare::Float),
    ];
    unary_specs(rng, specs, out);
}

fn relu_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    #[rustfmt::skip]
    let specs: &[UnarySpec<'_>] = &[
        ("relu_f32", Op::RELU, F32, F32, (-5.0, 5.0), Compare::Exact),
        ("relu_i8_same", Op::RELU, i8q(0.05, -3), i8q(0.05, -3), (0.0, 0.0), Compare::Exact),
        ("relu_i8_rescale", Op::RELU, i8q(0.05, 10), i8q(0.03, -128), (0.0, 0.0), Compare::Exact),
        ("relu_i8_coarse", Op::RELU, i8q(0.02, -100), i8q(0.07, 20), (0.0, 0.0), Compare::Exact),
        ("relu_i16", Op::RELU, i16q(0.001, 0), i16q(0.0013, 0), (0.0, 0.0), Compare::Exact),
        ("relu6_f32", Op::RELU6, F32, F32, (-10.0, 10.0), Compare::Exact),
        ("relu6_i8", Op::RELU6, i8q(0.05, -3), i8q(0.05, -3), (0.0, 0.0), Compare::Exact),
        ("relu6_i8_wide", Op::RELU6, i8q(0.1, 60), i8q(0.1, 60), (0.0, 0.0), Compare::Exact),
        ("relu6_i16", Op::RELU6, i16q(0.0005, 0), i16q(0.0005, 0), (0.0, 0.0), Compare::Exact),
    ];
    unary_specs(rng, specs, out);
}

fn hard_swish_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    #[rustfmt::skip]
    let specs: &[UnarySpec<'_>] = &[
        ("hswish_f32", Op::HARD_SWISH, F32, F32, (-8.0, 8.0), Compare::Exact),
        ("hswish_i8_a", Op::HARD_SWISH, i8q(0.05, -3), i8q(0.04, -20), (0.0, 0.0), Compare::Exact),
        ("hswish_i8_b", Op::HARD_SWISH, i8q(0.1, 10), i8q(0.05, -128), (0.0, 0.0), Compare::Exact),
        ("hswish_i8_fine", Op::HARD_SWISH, i8q(0.01, 0), i8q(0.01, 0), (0.0, 0.0), Compare::Exact),
        ("hswish_i8_coarse", Op::HARD_SWISH, i8q(0.3, -50), i8q(0.2, -90), (0.0, 0.0), Compare::Exact),
        ("hswish_i8_tiny_out", Op::HARD_SWISH, i8q(0.05, 5), i8q(0.002, 0), (0.0, 0.0), Compare::Exact),
    ];
    unary_specs(rng, specs, out);
}

fn elu_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    let every_byte: Vec<u8> = (0..=255u8).collect();
    for (name, input, output) in [
        ("elu_i8_a", i8q(0.05, 0), i8q(0.05, 0)),
        ("elu_i8_b", i8q(0.1, 20), i8q(1.0 / 64.0, -60)),
        ("elu_i8_c", i8q(0.02, -128), i8q(0.03, -100)),
        ("elu_i8_d", i8q(0.25, 64), i8q(0.2, -122)),
    ] {
        out.push(Case {
            name: name.into(),
            model: single_op(
                Op::ELU,
                &[(input, &[1, 256])],
                (output, &[1, 256]),
                Options::None,
            ),
            inputs: vec![every_byte.clone()],
            compare: Compare::Exact,
        });
    }
    let specs = [("elu_f32", Op::ELU, F32, F32, (-8.0, 4.0), Compare::Float)];
    unary_specs(rng, &specs, out);
}

fn log_softmax_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    let lsm = i8q(16.0 / 256.0, 127);
    #[rustfmt::skip]
    let specs: &[(&str, Ty, Ty, &[i32])] = &[
        ("lsm_i8_small", i8q(0.1, 5), lsm, &[1, 10]),
        ("lsm_i8_wide", i8q(0.0625, -3), lsm, &[3, 100]),
        ("lsm_i8_coarse", i8q(0.3, 0), lsm, &[4, 50]),
        ("lsm_i8_fine", i8q(0.005, 0), lsm, &[2, 9]),
        ("lsm_i8_rank4", i8q(0.2, 1), lsm, &[1, 2, 3, 7]),
        ("lsm_i8_one", i8q(0.2, 1), lsm, &[5, 1]),
        ("lsm_f32", F32, F32, &[4, 10]),
        ("lsm_f32_wide", F32, F32, &[2, 37]),
    ];
    for &(name, ti, to, shape) in specs {
        let compare = if ti.dtype == T::FLOAT32 {
            Compare::Float
        } else {
            Compare::Exact
        };
        out.push(Case {
            name: name.into(),
            model: single_op(Op::LOG_SOFTMAX, &[(ti, shape)], (to, shape), Options::None),
            inputs: vec![rng.tensor(ti.dtype, elements(shape), -8.0, 8.0)],
            compare,
        });
    }
}

/// Bytes of `n` elements of `ty` drawn from a few small values, so that
/// equal pairs occur across the two inputs of a comparison.
fn few_values(rng: &mut Rng, ty: T, n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|_| {
            let v = (rng.next_u64() % 7) as i64 - 3;
            match ty {
                T::FLOAT32 => (v as f32 * 0.5).to_le_bytes().to_vec(),
                T::INT32 => (v as i32).to_le_bytes().to_vec(),
                T::INT64 => (v * (1 << 40)).to_le_bytes().to_vec(),
                T::INT16 => (v as i16 * 100).to_le_bytes().to_vec(),
                T::BOOL => vec![u8::from(v > 0)],
                _ => vec![(v * 10) as i8 as u8],
            }
        })
        .collect()
}

fn comparison_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    let ops = [
        ("eq", Op::EQUAL),
        ("ne", Op::NOT_EQUAL),
        ("lt", Op::LESS),
        ("le", Op::LESS_EQUAL),
        ("gt", Op::GREATER),
        ("ge", Op::GREATER_EQUAL),
    ];
    let boolean = q(T::BOOL, 0.0, 0);
    #[rustfmt::skip]
    let specs: &[ComparisonSpec<'_>] = &[
        ("f32", F32, F32, &[2, 3, 5], &[2, 3, 5], &[2, 3, 5]),
        ("f32_bcast", F32, F32, &[4, 1, 6], &[1, 5, 6], &[4, 5, 6]),
        ("i32", q(T::INT32, 0.0, 0), q(T::INT32, 0.0, 0), &[40], &[1], &[40]),
        ("i64", q(T::INT64, 0.0, 0), q(T::INT64, 0.0, 0), &[3, 8], &[3, 8], &[3, 8]),
        ("i8_same", i8q(0.1, 0), i8q(0.1, 0), &[2, 30], &[2, 30], &[2, 30]),
        ("i8_rescale", i8q(0.05, -4), i8q(0.1, 3), &[3, 1, 7], &[5, 7], &[3, 5, 7]),
        ("i16", i16q(0.001, 0), i16q(0.001, 0), &[2, 30], &[2, 30], &[2, 30]),
    ];
    for (prefix, op) in ops {
        for &(suffix, a, b, sa, sb, so) in specs {
            // TFLM evaluates int16 for GREATER only (the others refuse it).
            if a.dtype == T::INT16 && op != Op::GREATER {
                continue;
            }
            let data = vec![
                few_values(rng, a.dtype, elements(sa)),
                few_values(rng, b.dtype, elements(sb)),
            ];
            out.push(Case {
                name: format!("{prefix}_{suffix}"),
                model: single_op(op, &[(a, sa), (b, sb)], (boolean, so), Options::None),
                inputs: data,
                compare: Compare::Exact,
            });
        }
        if matches!(op, Op::EQUAL | Op::NOT_EQUAL) {
            let data = vec![few_values(rng, T::BOOL, 24), few_values(rng, T::BOOL, 6)];
            out.push(Case {
                name: format!("{prefix}_bool"),
                model: single_op(
                    op,
                    &[(boolean, &[4, 6]), (boolean, &[6])],
                    (boolean, &[4, 6]),
                    Options::None,
                ),
                inputs: data,
                compare: Compare::Exact,
            });
        }
    }
}

fn select_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    let boolean = q(T::BOOL, 0.0, 0);
    #[rustfmt::skip]
    let specs: &[SelectSpec<'_>] = &[
        ("sel_f32_same", F32, &[2, 3, 4], &[2, 3, 4], &[2, 3, 4], &[2, 3, 4]),
        ("sel_f32_bcast", F32, &[3, 1], &[1, 4], &[3, 4], &[3, 4]),
        ("sel_i8_scalar_cond", i8q(0.1, 3), &[1], &[2, 5], &[2, 5], &[2, 5]),
        ("sel_i8_bcast", i8q(0.1, 3), &[2, 1, 6], &[1, 4, 6], &[6], &[2, 4, 6]),
        ("sel_i16_rank5", i16q(0.001, 0), &[1, 2, 1, 3, 1], &[2, 2, 2, 3, 2], &[1], &[2, 2, 2, 3, 2]),
    ];
    for &(name, ty, sc, sx, sy, so) in specs {
        let inputs = vec![
            few_values(rng, T::BOOL, elements(sc)),
            rng.tensor(ty.dtype, elements(sx), -5.0, 5.0),
            rng.tensor(ty.dtype, elements(sy), -5.0, 5.0),
        ];
        out.push(Case {
            name: name.into(),
            model: single_op(
                Op::SELECT_V2,
                &[(boolean, sc), (ty, sx), (ty, sy)],
                (ty, so),
                Options::None,
            ),
            inputs,
            compare: Compare::Exact,
        });
    }
}

/// CAST between the type pairs TFLM's micro kernel takes.
fn cast_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    // (TFLM refuses uint8 and int64 on either side.)
    let types = [
        ("bool", T::BOOL),
        ("i8", T::INT8),
        ("i16", T::INT16),
        ("i32", T::INT32),
        ("u32", T::UINT32),
        ("f32", T::FLOAT32),
    ];
    for (from_name, from) in types {
        for (to_name, to) in types {
            if from == to {
                continue;
            }
            let shape: &[i32] = &[4, 25];
            let data = cast_input(rng, from, elements(shape));
            out.push(Case {
                name: format!("cast_{from_name}_{to_name}"),
                model: single_op(
                    Op::CAST,
                    &[(q(from, 0.0, 0), shape)],
                    (q(to, 0.0, 0), shape),
                    Options::None,
                ),
                inputs: vec![data],
                compare: Compare::Exact,
            });
        }
    }
}

/// Floats past every integer type's range, infinities and NaN.
fn cast_edges(out: &mut Vec<Case>) {
    let values: Vec<f32> = vec![
        300.0,
        -300.0,
        70_000.0,
        -70_000.0,
        3e9,
        -3e9,
        5e9,
        -5e9,
        1e20,
        -1e20,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -0.5,
        0.5,
        -1.0,
        127.9,
        -128.9,
        32_767.9,
        -32_768.9,
        2_147_483_520.0,
        -2_147_483_648.0,
        4_294_967_040.0,
        -0.0,
    ];
    let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let shape: &[i32] = &[values.len() as i32];
    for (name, to) in [
        ("i8", T::INT8),
        ("i16", T::INT16),
        ("i32", T::INT32),
        ("u32", T::UINT32),
        ("bool", T::BOOL),
    ] {
        out.push(Case {
            name: format!("cast_f32_{name}_edges"),
            model: single_op(
                Op::CAST,
                &[(F32, shape)],
                (q(to, 0.0, 0), shape),
                Options::None,
            ),
            inputs: vec![data.clone()],
            compare: Compare::Exact,
        });
    }
}

fn l2_norm_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    let unit = i8q(1.0 / 128.0, 0);
    #[rustfmt::skip]
    let specs: &[(&str, Ty, Ty, &[i32])] = &[
        ("l2_i8_a", i8q(0.05, 0), unit, &[4, 16]),
        ("l2_i8_zp", i8q(0.1, -20), unit, &[2, 3, 10]),
        ("l2_i8_long", i8q(0.02, 5), unit, &[1, 300]),
        ("l2_i8_short", i8q(0.3, 1), unit, &[1, 2, 2, 2]),
        ("l2_f32", F32, F32, &[3, 20]),
        ("l2_f32_rank4", F32, F32, &[1, 2, 3, 5]),
    ];
    for &(name, ti, to, shape) in specs {
        let compare = if ti.dtype == T::FLOAT32 {
            Compare::Float
        } else {
            Compare::Exact
        };
        out.push(Case {
            name: name.into(),
            model: single_op(
                Op::L2_NORMALIZATION,
                &[(ti, shape)],
                (to, shape),
                Options::L2Norm {
                    activation: Act::NONE,
                },
            ),
            inputs: vec![rng.tensor(ti.dtype, elements(shape), -3.0, 3.0)],
            compare,
        });
    }
}

/// Inputs for CAST: every width's edge values and random ones; floats
/// in range for every integer type, with fractions of both signs.
fn cast_input(rng: &mut Rng, ty: T, n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| {
            let r = rng.next_u64();
            match ty {
                T::BOOL => vec![u8::from(r & 1 == 1)],
                T::UINT8 | T::INT8 => vec![r as u8],
                T::INT16 => (r as i16).to_le_bytes().to_vec(),
                T::INT32 | T::UINT32 => {
                    let v = if i < 4 {
                        [0, -1, i32::MIN, i32::MAX][i]
                    } else {
                        (r as i32) >> (r >> 59)
                    };
                    v.to_le_bytes().to_vec()
                }
                T::INT64 => ((r as i64) >> (r >> 58)).to_le_bytes().to_vec(),
                _ => {
                    let v = (r >> 40) as f32 / (1u64 << 24) as f32 * 250.0 - 125.0;
                    v.to_le_bytes().to_vec()
                }
            }
        })
        .collect()
}

/// One case per spec: name, op, input and output types, the float input
/// range, the comparison; a [3, 100] tensor with special values first.
fn unary_specs(rng: &mut Rng, specs: &[UnarySpec<'_>], out: &mut Vec<Case>) {
    let shape: &[i32] = &[3, 100];
    for &(name, op, ti, to, (lo, hi), compare) in specs {
        let mut data = rng.tensor(ti.dtype, elements(shape), lo, hi);
        if ti.dtype == T::FLOAT32 {
            // Signed zeros, infinities and NaN at the front.
            let specials = [
                0.0f32,
                -0.0,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::NAN,
                1.0,
            ];
            for (i, v) in specials.iter().enumerate() {
                data[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
        if ti.dtype == T::INT16 {
            // Both ends of the range.
            data[0..2].copy_from_slice(&i16::MIN.to_le_bytes());
            data[2..4].copy_from_slice(&i16::MAX.to_le_bytes());
        }
        out.push(Case {
            name: name.into(),
            model: single_op(op, &[(ti, shape)], (to, shape), Options::None),
            inputs: vec![data],
            compare,
        });
    }
}
