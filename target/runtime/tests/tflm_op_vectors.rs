//! One-operator models run by TFLM itself (the tflite-micro Python package,
//! the same build that produced the conformance set) and by hilt: every
//! output must match TFLM's byte for byte (float softmax and logistic within
//! the conformance tolerance, since they call `expf`).
//!
//! The vectors live in `tests/data/tflm_ops/`: `NAME.tflite`,
//! `NAME.inK.bin`, TFLM's `NAME.out0.bin`, and `cases.txt`. To add cases,
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
use hilt_runtime::writer::Options;
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

fn pool_cases(rng: &mut Rng, out: &mut Vec<Case>) {
    type Spec<'a> = (
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
    #[rustfmt::skip]
    let specs: &[Spec<'_>] = &[
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
    elem::cases(&mut out);
    out
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
