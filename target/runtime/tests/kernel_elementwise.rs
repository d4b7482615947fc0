//! DIV, the unary maths ops, the RELU family, comparisons, SELECT_V2 and
//! CAST as one-op models: property tests against plain reference loops
//! (one output element at a time, broadcast indices from scratch) and the
//! typed errors for bad types, shapes and quantisation. Bit-exactness with
//! TFLM itself is `tflm_op_vectors`' job.

mod one_op;

use hilt_runtime::kernels::KernelError;
use hilt_runtime::kernels::fixed_point::{
    activation_range_float, activation_range_quantized, count_leading_sign_bits,
    quantize_multiplier,
};
use hilt_runtime::schema::{ActivationFunctionType as Act, BuiltinOperator as Op, TensorType as T};
use hilt_runtime::writer::Options;
use one_op::*;
use proptest::prelude::*;

/// For each output element of a broadcast binary op, the flat indices of
/// its two operands.
fn operand_indices(shapes: &(Vec<i32>, Vec<i32>, Vec<i32>)) -> Vec<(usize, usize)> {
    let (a, b, out) = shapes;
    let mut indices = Vec::new();
    for_each_index(out, |idx| {
        indices.push((broadcast_index(a, out, idx), broadcast_index(b, out, idx)));
    });
    indices
}

fn i32_tensor(values: &[i32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Whether TFLM's int8 DIV keeps its final rounding shift within 0..=31
/// for dividend `n` and divisor `d` (both less their zero points, `d > 0`
/// after moving the sign): outside it the reference build's result is
/// not the quotient (see `div.rs`).
fn div_shift_in_range(n: i32, d: i32, output_shift: i32) -> bool {
    let recip_shift = 31 - d.leading_zeros() as i32;
    recip_shift + count_leading_sign_bits(n) - output_shift <= 31
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn div_int8_is_the_rounded_real_quotient(
        shapes in broadcast_shapes(),
        s in (0.01f32..0.5, 0.01f32..0.5, 0.01f32..0.5),
        z in (-20i64..20, -20i64..20, -20i64..20),
        act in activation(),
        seed in any::<u64>(),
    ) {
        let (a, b, out) = &shapes;
        let q = [(s.0, z.0 as i32), (s.1, z.1 as i32), (s.2, z.2 as i32)];
        let mut rng = Rng(seed);
        let x = rng.tensor(T::INT8, elements(a), 0.0, 0.0);
        let mut y = rng.tensor(T::INT8, elements(b), 0.0, 0.0);
        for v in &mut y {
            if i32::from(*v as i8) == q[1].1 {
                *v = (q[1].1 + 1) as i8 as u8;
            }
        }
        let model = single_op(
            Op::DIV,
            &[(i8q(s.0, z.0), a), (i8q(s.1, z.1), b)],
            (i8q(s.2, z.2), out),
            Options::Div { activation: act },
        );
        let got = i8s(&run(&model, &[&x, &y]).unwrap()[0]);
        let (_, output_shift) =
            quantize_multiplier(f64::from(s.0) / (f64::from(s.1) * f64::from(s.2)));
        let (lo, hi) = activation_range_quantized(act, s.2, q[2].1, -128, 127);
        for (o, (i, j)) in operand_indices(&shapes).into_iter().enumerate() {
            let (mut n, mut d) = (i32::from(x[i] as i8) - q[0].1, i32::from(y[j] as i8) - q[1].1);
            if d < 0 {
                (n, d) = (-n, -d);
            }
            if !div_shift_in_range(n, d, output_shift) {
                continue;
            }
            let real = f64::from(n) * f64::from(s.0) / (f64::from(d) * f64::from(s.1)) / f64::from(s.2);
            let want = (real.round() as i64 + i64::from(q[2].1)).clamp(lo.into(), hi.into()) as i32;
            prop_assert!((i32::from(got[o]) - want).abs() <= 1, "{n}/{d}: got {} want {want}", got[o]);
        }
    }

    #[test]
    fn div_float_and_int32_follow_the_broadcast(shapes in broadcast_shapes(), act in activation(), seed in any::<u64>()) {
        let (a, b, out) = &shapes;
        let mut rng = Rng(seed);
        let fx = f32s(&rng.tensor(T::FLOAT32, elements(a), -10.0, 10.0));
        let fy = f32s(&rng.tensor(T::FLOAT32, elements(b), -10.0, 10.0));
        let ix: Vec<i32> = (0..elements(a)).map(|_| rng.next_u64() as i32).collect();
        let iy: Vec<i32> = (0..elements(b)).map(|_| (rng.next_u64() as i32 >> 20) | 1).collect();
        let i32t = q(T::INT32, 0.0, 0);
        let fmodel = single_op(Op::DIV, &[(F32, a), (F32, b)], (F32, out), Options::Div { activation: act });
        let imodel = single_op(Op::DIV, &[(i32t, a), (i32t, b)], (i32t, out), Options::Div { activation: act });
        let fgot = f32s(&run(&fmodel, &[&f32_bytes(&fx), &f32_bytes(&fy)]).unwrap()[0]);
        let igot = i32s(&run(&imodel, &[&i32_tensor(&ix), &i32_tensor(&iy)]).unwrap()[0]);
        let (flo, fhi) = activation_range_float(act);
        let (ilo, ihi) = match act {
            Act::RELU => (0, i32::MAX),
            Act::RELU6 => (0, 6),
            Act::RELU_N1_TO_1 => (-1, 1),
            _ => (i32::MIN, i32::MAX),
        };
        for (o, (i, j)) in operand_indices(&shapes).into_iter().enumerate() {
            prop_assert_eq!(fgot[o], (fx[i] / fy[j]).max(flo).min(fhi));
            prop_assert_eq!(igot[o], ix[i].wrapping_div(iy[j]).clamp(ilo, ihi));
        }
    }
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[test]
fn div_refuses_zero_divisors_mixed_types_and_quantised_int32() {
    let none = Options::Div {
        activation: Act::NONE,
    };
    let i32t = q(T::INT32, 0.0, 0);
    let int32 = single_op(
        Op::DIV,
        &[(i32t, &[2]), (i32t, &[2])],
        (i32t, &[2]),
        none.clone(),
    );
    let zero = KernelError::UnsupportedParameter {
        what: "DIV by zero",
    };
    assert_eq!(
        kernel_error(&int32, &[&i32_tensor(&[4, 5]), &i32_tensor(&[2, 0])]),
        zero
    );
    let int8 = single_op(
        Op::DIV,
        &[(i8q(0.1, 0), &[2]), (i8q(0.1, 3), &[2])],
        (i8q(0.1, 0), &[2]),
        none.clone(),
    );
    assert_eq!(kernel_error(&int8, &[&[4, 4], &[5, 3]]), zero);
    let mixed = single_op(
        Op::DIV,
        &[(F32, &[2]), (i8q(0.1, 0), &[2])],
        (F32, &[2]),
        none.clone(),
    );
    assert_eq!(
        kernel_error(&mixed, &[&[0; 8], &[1, 1]]),
        KernelError::UnsupportedType {
            tensor: 1,
            dtype: T::INT8.0
        }
    );
    let quantised = single_op(
        Op::DIV,
        &[(q(T::INT32, 0.5, 0), &[2]), (i32t, &[2])],
        (i32t, &[2]),
        none.clone(),
    );
    assert!(matches!(
        kernel_error(&quantised, &[&[0; 8], &[1; 8]]),
        KernelError::UnsupportedParameter { .. }
    ));
    let int16 = single_op(
        Op::DIV,
        &[(i16q(0.1, 0), &[2]), (i16q(0.1, 0), &[2])],
        (i16q(0.1, 0), &[2]),
        none.clone(),
    );
    assert_eq!(
        kernel_error(&int16, &[&[0; 4], &[1; 4]]),
        KernelError::UnsupportedType {
            tensor: 2,
            dtype: T::INT16.0
        }
    );
    let shapes = single_op(Op::DIV, &[(F32, &[3]), (F32, &[2])], (F32, &[3]), none);
    assert_eq!(
        kernel_error(&shapes, &[&[0; 12], &[0; 8]]),
        KernelError::ShapeMismatch { tensor: 2 }
    );
}

#[test]
fn div_int8_small_quotients_reproduce_the_reference_shift() {
    // 11 / 114 at unit scales shifts right by 32: TFLM's x86 build gives
    // 127, not 0 (tests/data/tflm_ops/div_i8_unit pins the same bytes).
    let unit = i8q(1.0, 0);
    let model = single_op(
        Op::DIV,
        &[(unit, &[2]), (unit, &[2])],
        (unit, &[2]),
        Options::Div {
            activation: Act::NONE,
        },
    );
    let got = i8s(&run(&model, &[&[11, 100], &[114, 7]]).unwrap()[0]);
    assert_eq!(got, vec![127, 14]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn abs_int8_is_the_rescaled_magnitude(si in 0.005f32..0.5, so in 0.005f32..0.5, zi in -128i64..=127, zo in -128i64..=127, seed in any::<u64>()) {
        let x = Rng(seed).tensor(T::INT8, 64, 0.0, 0.0);
        let model = single_op(Op::ABS, &[(i8q(si, zi), &[64])], (i8q(so, zo), &[64]), Options::None);
        let got = i8s(&run(&model, &[&x]).unwrap()[0]);
        for (&g, &v) in got.iter().zip(&i8s(&x)) {
            let magnitude = (i64::from(v) - zi).abs() as f64;
            let want = ((magnitude * f64::from(si) / f64::from(so)).round() as i64 + zo).clamp(-128, 127);
            prop_assert!((i64::from(g) - want).abs() <= 1, "x={v}: got {g} want {want}");
        }
    }

    #[test]
    fn float_unary_ops_are_the_libm_functions(seed in any::<u64>()) {
        let x = Rng(seed).tensor(T::FLOAT32, 40, -50.0, 50.0);
        let xs = f32s(&x);
        let run_op = |op| {
            let model = single_op(op, &[(F32, &[40])], (F32, &[40]), Options::None);
            f32s(&run(&model, &[&x]).unwrap()[0])
        };
        let bits = |v: Vec<f32>| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits(run_op(Op::ABS)), bits(xs.iter().map(|v| v.abs()).collect()));
        prop_assert_eq!(bits(run_op(Op::NEG)), bits(xs.iter().map(|v| -v).collect()));
        prop_assert_eq!(bits(run_op(Op::SQRT)), bits(xs.iter().map(|v| v.sqrt()).collect()));
        for (got, v) in run_op(Op::EXP).iter().zip(&xs) {
            let want = f64::from(*v).exp();
            prop_assert!((f64::from(*got) - want).abs() <= want * 1e-6, "exp({v}) = {got}");
        }
        for (got, v) in run_op(Op::LOG).iter().zip(&xs) {
            if *v > 0.0 {
                let want = f64::from(*v).ln();
                prop_assert!((f64::from(*got) - want).abs() <= 1e-6 * want.abs().max(1.0), "log({v}) = {got}");
            } else if *v < 0.0 {
                prop_assert!(got.is_nan());
            }
        }
    }
}

#[test]
fn abs_int16_takes_zero_points_of_zero_or_no_quantisation() {
    let raw = q(T::INT16, 0.0, 0);
    let plain = single_op(Op::ABS, &[(raw, &[3])], (raw, &[3]), Options::None);
    let data: Vec<u8> = [i16::MIN, -7, 9]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(
        i16s(&run(&plain, &[&data]).unwrap()[0]),
        vec![i16::MIN, 7, 9]
    );
    let scaled = single_op(
        Op::ABS,
        &[(i16q(0.002, 0), &[3])],
        (i16q(0.001, 0), &[3]),
        Options::None,
    );
    assert_eq!(
        i16s(&run(&scaled, &[&data]).unwrap()[0]),
        vec![i16::MAX, 14, 18]
    );
    let offset = single_op(
        Op::ABS,
        &[(i16q(0.002, 4), &[3])],
        (i16q(0.001, 0), &[3]),
        Options::None,
    );
    assert!(matches!(
        kernel_error(&offset, &[&data]),
        KernelError::BadQuantization { tensor: 0, .. }
    ));
}

#[test]
fn unary_ops_refuse_types_tflm_does_not_take() {
    for op in [Op::NEG, Op::SQRT, Op::EXP, Op::LOG] {
        let model = single_op(
            op,
            &[(i8q(0.1, 0), &[4])],
            (i8q(0.1, 0), &[4]),
            Options::None,
        );
        assert_eq!(
            kernel_error(&model, &[&[0; 4]]),
            KernelError::UnsupportedType {
                tensor: 0,
                dtype: T::INT8.0
            },
            "{op:?}"
        );
    }
    let mixed = single_op(Op::EXP, &[(F32, &[4])], (i8q(0.1, 0), &[4]), Options::None);
    assert_eq!(
        kernel_error(&mixed, &[&[0; 16]]),
        KernelError::UnsupportedType {
            tensor: 1,
            dtype: T::INT8.0
        }
    );
    let sizes = single_op(Op::LOG, &[(F32, &[4])], (F32, &[5]), Options::None);
    assert_eq!(
        kernel_error(&sizes, &[&[0; 16]]),
        KernelError::ShapeMismatch { tensor: 1 }
    );
    let unquantised = single_op(
        Op::ABS,
        &[(q(T::INT8, 0.0, 0), &[4])],
        (i8q(0.1, 0), &[4]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&unquantised, &[&[0; 4]]),
        KernelError::MissingQuantization { tensor: 0 }
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn relu_int8_is_the_rescaled_positive_part(si in 0.005f32..0.5, so in 0.005f32..0.5, zi in -128i64..=127, zo in -128i64..=127, seed in any::<u64>()) {
        let x = Rng(seed).tensor(T::INT8, 64, 0.0, 0.0);
        let model = single_op(Op::RELU, &[(i8q(si, zi), &[64])], (i8q(so, zo), &[64]), Options::None);
        let got = i8s(&run(&model, &[&x]).unwrap()[0]);
        for (&g, &v) in got.iter().zip(&i8s(&x)) {
            let real = (i64::from(v) - zi) as f64 * f64::from(si);
            let want = ((real / f64::from(so)).round() as i64 + zo).clamp(zo.max(-128), 127);
            prop_assert!((i64::from(g) - want).abs() <= 1, "x={v}: got {g} want {want}");
        }
    }

    #[test]
    fn relu6_int8_clamps_between_quantised_zero_and_six(s in 0.005f32..0.5, z in -128i64..=127, seed in any::<u64>()) {
        let x = Rng(seed).tensor(T::INT8, 64, 0.0, 0.0);
        let model = single_op(Op::RELU6, &[(i8q(s, z), &[64])], (i8q(s, z), &[64]), Options::None);
        let got = i8s(&run(&model, &[&x]).unwrap()[0]);
        let six = ((6.0 / s).round() as i64 + z).clamp(-128, 127);
        for (&g, &v) in got.iter().zip(&i8s(&x)) {
            prop_assert_eq!(i64::from(g), i64::from(v).min(six).max(z));
        }
    }

    #[test]
    fn float_relus_clamp(seed in any::<u64>()) {
        let x = Rng(seed).tensor(T::FLOAT32, 40, -10.0, 10.0);
        let run_op = |op| {
            let model = single_op(op, &[(F32, &[40])], (F32, &[40]), Options::None);
            f32s(&run(&model, &[&x]).unwrap()[0])
        };
        let xs = f32s(&x);
        prop_assert_eq!(run_op(Op::RELU), xs.iter().map(|v| v.max(0.0)).collect::<Vec<_>>());
        prop_assert_eq!(run_op(Op::RELU6), xs.iter().map(|v| v.clamp(0.0, 6.0)).collect::<Vec<_>>());
    }
}

#[test]
fn relus_refuse_bad_quantisation() {
    let relu16 = single_op(
        Op::RELU,
        &[(i16q(0.01, 3), &[4])],
        (i16q(0.01, 0), &[4]),
        Options::None,
    );
    assert!(matches!(
        kernel_error(&relu16, &[&[0; 8]]),
        KernelError::BadQuantization { tensor: 0, .. }
    ));
    let rescaled = single_op(
        Op::RELU6,
        &[(i8q(0.01, 3), &[4])],
        (i8q(0.02, 3), &[4]),
        Options::None,
    );
    assert!(matches!(
        kernel_error(&rescaled, &[&[0; 4]]),
        KernelError::UnsupportedParameter { .. }
    ));
    let int32 = q(T::INT32, 0.0, 0);
    let wide = single_op(Op::RELU, &[(int32, &[4])], (int32, &[4]), Options::None);
    assert_eq!(
        kernel_error(&wide, &[&[0; 16]]),
        KernelError::UnsupportedType {
            tensor: 0,
            dtype: T::INT32.0
        }
    );
    let bare = single_op(
        Op::RELU6,
        &[(q(T::INT8, 0.0, 0), &[4])],
        (q(T::INT8, 0.0, 0), &[4]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&bare, &[&[0; 4]]),
        KernelError::MissingQuantization { tensor: 0 }
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn hard_swish_int8_is_close_to_the_real_function(si in 0.01f32..0.2, so in 0.01f32..0.2, zi in -100i64..100, zo in -100i64..100, seed in any::<u64>()) {
        let x = Rng(seed).tensor(T::INT8, 64, 0.0, 0.0);
        let model = single_op(Op::HARD_SWISH, &[(i8q(si, zi), &[64])], (i8q(so, zo), &[64]), Options::None);
        let got = i8s(&run(&model, &[&x]).unwrap()[0]);
        for (&g, &v) in got.iter().zip(&i8s(&x)) {
            let real = (i64::from(v) - zi) as f64 * f64::from(si);
            let swish = real * (real + 3.0).clamp(0.0, 6.0) / 6.0;
            let want = ((swish / f64::from(so)).round() as i64 + zo).clamp(-128, 127);
            // Q0.15 multipliers: a step of error either way.
            prop_assert!((i64::from(g) - want).abs() <= 1, "x={v}: got {g} want {want}");
        }
    }
}

#[test]
fn hard_swish_refuses_int16_and_large_scale_ratios() {
    let int16 = single_op(
        Op::HARD_SWISH,
        &[(i16q(0.01, 0), &[4])],
        (i16q(0.01, 0), &[4]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&int16, &[&[0; 8]]),
        KernelError::UnsupportedType {
            tensor: 0,
            dtype: T::INT16.0
        }
    );
    let ratio = single_op(
        Op::HARD_SWISH,
        &[(i8q(10.0, 0), &[4])],
        (i8q(0.01, 0), &[4]),
        Options::None,
    );
    assert!(matches!(
        kernel_error(&ratio, &[&[0; 4]]),
        KernelError::UnsupportedParameter { .. }
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn elu_int8_is_the_rounded_real_function(si in 0.005f32..0.3, so in 0.005f32..0.3, zi in -128i64..=127, zo in -128i64..=127) {
        let x: Vec<u8> = (0..=255u8).collect();
        let model = single_op(Op::ELU, &[(i8q(si, zi), &[256])], (i8q(so, zo), &[256]), Options::None);
        let got = i8s(&run(&model, &[&x]).unwrap()[0]);
        for (&g, &v) in got.iter().zip(&i8s(&x)) {
            let real = (i64::from(v) - zi) as f64 * f64::from(si);
            let elu = if real < 0.0 { real.exp_m1() } else { real };
            let want = ((elu / f64::from(so)).round() as i64 + zo).clamp(-128, 127);
            prop_assert!((i64::from(g) - want).abs() <= 1, "x={v}: got {g} want {want}");
        }
    }

    #[test]
    fn elu_float_is_expm1_below_zero(seed in any::<u64>()) {
        let x = Rng(seed).tensor(T::FLOAT32, 40, -10.0, 10.0);
        let model = single_op(Op::ELU, &[(F32, &[40])], (F32, &[40]), Options::None);
        let got = f32s(&run(&model, &[&x]).unwrap()[0]);
        for (&g, &v) in got.iter().zip(&f32s(&x)) {
            let want = if v < 0.0 { f64::from(v).exp_m1() } else { f64::from(v) };
            prop_assert!((f64::from(g) - want).abs() <= 1e-6 * want.abs().max(1e-3), "elu({v}) = {g}");
        }
    }
}

#[test]
fn elu_refuses_int16_and_mixed_types() {
    let int16 = single_op(
        Op::ELU,
        &[(i16q(0.01, 0), &[4])],
        (i16q(0.01, 0), &[4]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&int16, &[&[0; 8]]),
        KernelError::UnsupportedType {
            tensor: 0,
            dtype: T::INT16.0
        }
    );
    let mixed = single_op(Op::ELU, &[(i8q(0.01, 0), &[4])], (F32, &[4]), Options::None);
    assert_eq!(
        kernel_error(&mixed, &[&[0; 4]]),
        KernelError::UnsupportedType {
            tensor: 1,
            dtype: T::FLOAT32.0
        }
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn log_softmax_int8_is_close_to_the_real_function(s in 0.01f32..0.3, z in -50i64..50, rows in 1usize..4, depth in 1usize..40, seed in any::<u64>()) {
        let shape = [rows as i32, depth as i32];
        let x = Rng(seed).tensor(T::INT8, rows * depth, 0.0, 0.0);
        let lsm = i8q(16.0 / 256.0, 127);
        let model = single_op(Op::LOG_SOFTMAX, &[(i8q(s, z), &shape)], (lsm, &shape), Options::None);
        let got = i8s(&run(&model, &[&x]).unwrap()[0]);
        for (row, g) in i8s(&x).chunks(depth).zip(got.chunks(depth)) {
            let real: Vec<f64> = row.iter().map(|&v| (i64::from(v) - z) as f64 * f64::from(s)).collect();
            let max = real.iter().cloned().fold(f64::MIN, f64::max);
            let log_sum = real.iter().map(|r| (r - max).exp()).sum::<f64>().ln();
            for (&r, &o) in real.iter().zip(g) {
                let want = ((r - max - log_sum) * 16.0).round() as i64 + 127;
                let want = want.clamp(-128, 127);
                // Saturated entries may go to -128 a little early (TFLM's cut-off).
                if want > -120 {
                    prop_assert!((i64::from(o) - want).abs() <= 1, "{r}: got {o} want {want}");
                }
            }
        }
    }

    #[test]
    fn log_softmax_float_rows_are_log_probabilities(seed in any::<u64>()) {
        let x = Rng(seed).tensor(T::FLOAT32, 30, -10.0, 10.0);
        let model = single_op(Op::LOG_SOFTMAX, &[(F32, &[3, 10])], (F32, &[3, 10]), Options::None);
        let got = f32s(&run(&model, &[&x]).unwrap()[0]);
        for (row, g) in f32s(&x).chunks(10).zip(got.chunks(10)) {
            let max = row.iter().cloned().fold(f32::MIN, f32::max);
            let log_sum = row.iter().map(|&v| f64::from(v - max).exp()).sum::<f64>().ln();
            for (&v, &o) in row.iter().zip(g) {
                let want = f64::from(v - max) - log_sum;
                prop_assert!((f64::from(o) - want).abs() < 1e-5, "{v}: {o} vs {want}");
            }
        }
    }
}

#[test]
fn log_softmax_refuses_other_output_quantisations() {
    let bad_scale = single_op(
        Op::LOG_SOFTMAX,
        &[(i8q(0.1, 0), &[1, 4])],
        (i8q(0.1, 127), &[1, 4]),
        Options::None,
    );
    assert!(matches!(
        kernel_error(&bad_scale, &[&[0; 4]]),
        KernelError::UnsupportedParameter { .. }
    ));
    let bad_zero = single_op(
        Op::LOG_SOFTMAX,
        &[(i8q(0.1, 0), &[1, 4])],
        (i8q(16.0 / 256.0, 0), &[1, 4]),
        Options::None,
    );
    assert!(matches!(
        kernel_error(&bad_zero, &[&[0; 4]]),
        KernelError::BadQuantization { tensor: 1, .. }
    ));
    let int16 = single_op(
        Op::LOG_SOFTMAX,
        &[(i16q(0.1, 0), &[1, 4])],
        (i16q(0.1, 0), &[1, 4]),
        Options::None,
    );
    assert!(matches!(
        kernel_error(&int16, &[&[0; 8]]),
        KernelError::UnsupportedType { tensor: 0, .. }
    ));
    let reshaped = single_op(
        Op::LOG_SOFTMAX,
        &[(F32, &[2, 4])],
        (F32, &[4, 2]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&reshaped, &[&[0; 32]]),
        KernelError::ShapeMismatch { tensor: 1 }
    );
}

/// A comparison and its relation on real values.
type OpRelation = (Op, fn(f64, f64) -> bool);

/// Every comparison with its relation on real values.
fn relations() -> [OpRelation; 6] {
    [
        (Op::EQUAL, |a, b| a == b),
        (Op::NOT_EQUAL, |a, b| a != b),
        (Op::LESS, |a, b| a < b),
        (Op::LESS_EQUAL, |a, b| a <= b),
        (Op::GREATER, |a, b| a > b),
        (Op::GREATER_EQUAL, |a, b| a >= b),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn int8_comparisons_compare_real_values(shapes in broadcast_shapes(), seed in any::<u64>()) {
        // Scales 1/20 and 1/10 (exact ratios), so equal reals are equal after rescaling.
        let (a, b, out) = &shapes;
        let (qa, qb) = ((0.05f32, -4i64), (0.1f32, 3i64));
        let mut rng = Rng(seed);
        let x: Vec<u8> = (0..elements(a)).map(|_| ((rng.next_u64() % 41) as i64 - 20) as i8 as u8).collect();
        let y: Vec<u8> = (0..elements(b)).map(|_| ((rng.next_u64() % 21) as i64 - 10) as i8 as u8).collect();
        let boolean = q(T::BOOL, 0.0, 0);
        for (op, relation) in relations() {
            let model = single_op(op, &[(i8q(qa.0, qa.1), a), (i8q(qb.0, qb.1), b)], (boolean, out), Options::None);
            let got = run(&model, &[&x, &y]).unwrap().remove(0);
            for (o, (i, j)) in operand_indices(&shapes).into_iter().enumerate() {
                // Integer multiples of 1/20 compare exactly.
                let ra = (i64::from(x[i] as i8) - qa.1) as f64;
                let rb = 2.0 * (i64::from(y[j] as i8) - qb.1) as f64;
                prop_assert_eq!(got[o], u8::from(relation(ra, rb)), "{:?} {} {}", op, ra, rb);
            }
        }
    }

    #[test]
    fn float_and_int32_comparisons_follow_the_broadcast(shapes in broadcast_shapes(), seed in any::<u64>()) {
        let (a, b, out) = &shapes;
        let mut rng = Rng(seed);
        let small = |rng: &mut one_op::Rng, n| (0..n).map(|_| (rng.next_u64() % 5) as i32 - 2).collect::<Vec<i32>>();
        let (x, y) = (small(&mut rng, elements(a)), small(&mut rng, elements(b)));
        let fx: Vec<u8> = x.iter().flat_map(|&v| (v as f32).to_le_bytes()).collect();
        let fy: Vec<u8> = y.iter().flat_map(|&v| (v as f32).to_le_bytes()).collect();
        let boolean = q(T::BOOL, 0.0, 0);
        let i32t = q(T::INT32, 0.0, 0);
        for (op, relation) in relations() {
            let fmodel = single_op(op, &[(F32, a), (F32, b)], (boolean, out), Options::None);
            let imodel = single_op(op, &[(i32t, a), (i32t, b)], (boolean, out), Options::None);
            let fgot = run(&fmodel, &[&fx, &fy]).unwrap().remove(0);
            let igot = run(&imodel, &[&i32_tensor(&x), &i32_tensor(&y)]).unwrap().remove(0);
            for (o, (i, j)) in operand_indices(&shapes).into_iter().enumerate() {
                let want = u8::from(relation(f64::from(x[i]), f64::from(y[j])));
                prop_assert_eq!(fgot[o], want);
                prop_assert_eq!(igot[o], want);
            }
        }
    }
}

#[test]
fn comparisons_refuse_bad_types_and_quantisation() {
    let boolean = q(T::BOOL, 0.0, 0);
    let not_bool = single_op(
        Op::LESS,
        &[(F32, &[2]), (F32, &[2])],
        (F32, &[2]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&not_bool, &[&[0; 8], &[0; 8]]),
        KernelError::UnsupportedType {
            tensor: 2,
            dtype: T::FLOAT32.0
        }
    );
    let mixed = single_op(
        Op::EQUAL,
        &[(F32, &[2]), (q(T::INT32, 0.0, 0), &[2])],
        (boolean, &[2]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&mixed, &[&[0; 8], &[0; 8]]),
        KernelError::UnsupportedType {
            tensor: 1,
            dtype: T::INT32.0
        }
    );
    let ordered_bools = single_op(
        Op::LESS,
        &[(boolean, &[2]), (boolean, &[2])],
        (boolean, &[2]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&ordered_bools, &[&[0; 2], &[1; 2]]),
        KernelError::UnsupportedType {
            tensor: 0,
            dtype: T::BOOL.0
        }
    );
    let int16_less = single_op(
        Op::LESS,
        &[(i16q(0.1, 0), &[2]), (i16q(0.1, 0), &[2])],
        (boolean, &[2]),
        Options::None,
    );
    assert!(matches!(
        kernel_error(&int16_less, &[&[0; 4], &[0; 4]]),
        KernelError::UnsupportedType { tensor: 0, .. }
    ));
    let int16_scales = single_op(
        Op::GREATER,
        &[(i16q(0.1, 0), &[2]), (i16q(0.2, 0), &[2])],
        (boolean, &[2]),
        Options::None,
    );
    assert!(matches!(
        kernel_error(&int16_scales, &[&[0; 4], &[0; 4]]),
        KernelError::UnsupportedParameter { .. }
    ));
    let big_scale = single_op(
        Op::EQUAL,
        &[(i8q(2.0, 0), &[2]), (i8q(0.1, 0), &[2])],
        (boolean, &[2]),
        Options::None,
    );
    assert!(matches!(
        kernel_error(&big_scale, &[&[0; 2], &[0; 2]]),
        KernelError::UnsupportedParameter { .. }
    ));
    let shapes = single_op(
        Op::GREATER,
        &[(F32, &[3]), (F32, &[2])],
        (boolean, &[3]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&shapes, &[&[0; 12], &[0; 8]]),
        KernelError::ShapeMismatch { tensor: 2 }
    );
}

#[test]
fn bool_equality_reads_bytes_as_c_bools() {
    let boolean = q(T::BOOL, 0.0, 0);
    let model = single_op(
        Op::EQUAL,
        &[(boolean, &[4]), (boolean, &[4])],
        (boolean, &[4]),
        Options::None,
    );
    assert_eq!(
        run(&model, &[&[0, 1, 1, 0], &[0, 1, 0, 1]]).unwrap()[0],
        vec![1, 1, 0, 0]
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn select_picks_by_the_broadcast_condition(shapes in broadcast_shapes(), third in 0usize..3, seed in any::<u64>()) {
        // Condition, x and y take the pair's shapes in turn; the third
        // operand is one of them or a scalar.
        let (a, b, out) = &shapes;
        let scalar = vec![1];
        let [sc, sx, sy] = match third {
            0 => [a.clone(), b.clone(), scalar],
            1 => [scalar, a.clone(), b.clone()],
            _ => [b.clone(), scalar, a.clone()],
        };
        let mut rng = Rng(seed);
        let cond: Vec<u8> = (0..elements(&sc)).map(|_| (rng.next_u64() & 1) as u8).collect();
        let x = rng.tensor(T::INT8, elements(&sx), 0.0, 0.0);
        let y = rng.tensor(T::INT8, elements(&sy), 0.0, 0.0);
        let ty = i8q(0.1, 0);
        let model = single_op(Op::SELECT_V2, &[(q(T::BOOL, 0.0, 0), &sc), (ty, &sx), (ty, &sy)], (ty, out), Options::None);
        let got = run(&model, &[&cond, &x, &y]).unwrap().remove(0);
        let mut o = 0;
        for_each_index(out, |idx| {
            let pick = cond[broadcast_index(&sc, out, idx)] != 0;
            let want = if pick { x[broadcast_index(&sx, out, idx)] } else { y[broadcast_index(&sy, out, idx)] };
            assert_eq!(got[o], want, "at {idx:?}");
            o += 1;
        });
    }
}

#[test]
fn select_refuses_bad_types_shapes_and_mixed_quantisation() {
    let boolean = q(T::BOOL, 0.0, 0);
    let float_cond = single_op(
        Op::SELECT_V2,
        &[(F32, &[2]), (F32, &[2]), (F32, &[2])],
        (F32, &[2]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&float_cond, &[&[0; 8], &[0; 8], &[0; 8]]),
        KernelError::UnsupportedType {
            tensor: 0,
            dtype: T::FLOAT32.0
        }
    );
    let int32 = q(T::INT32, 0.0, 0);
    let wide = single_op(
        Op::SELECT_V2,
        &[(boolean, &[2]), (int32, &[2]), (int32, &[2])],
        (int32, &[2]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&wide, &[&[0; 2], &[0; 8], &[0; 8]]),
        KernelError::UnsupportedType {
            tensor: 1,
            dtype: T::INT32.0
        }
    );
    let mixed = single_op(
        Op::SELECT_V2,
        &[(boolean, &[2]), (i8q(0.1, 0), &[2]), (i8q(0.2, 0), &[2])],
        (i8q(0.1, 0), &[2]),
        Options::None,
    );
    assert!(matches!(
        kernel_error(&mixed, &[&[0; 2], &[0; 2], &[0; 2]]),
        KernelError::UnsupportedParameter { .. }
    ));
    let shapes = single_op(
        Op::SELECT_V2,
        &[(boolean, &[3]), (F32, &[2]), (F32, &[2])],
        (F32, &[2]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&shapes, &[&[0; 3], &[0; 8], &[0; 8]]),
        KernelError::ShapeMismatch { tensor: 3 }
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn cast_from_int32_wraps_rounds_and_tests_non_zero(values in proptest::collection::vec(any::<i32>(), 1..40)) {
        let n = values.len() as i32;
        let input = i32_tensor(&values);
        let run_to = |to: T| {
            let model = single_op(Op::CAST, &[(q(T::INT32, 0.0, 0), &[n])], (q(to, 0.0, 0), &[n]), Options::None);
            run(&model, &[&input]).unwrap().remove(0)
        };
        prop_assert_eq!(i8s(&run_to(T::INT8)), values.iter().map(|&v| v as i8).collect::<Vec<_>>());
        prop_assert_eq!(i16s(&run_to(T::INT16)), values.iter().map(|&v| v as i16).collect::<Vec<_>>());
        prop_assert_eq!(f32s(&run_to(T::FLOAT32)), values.iter().map(|&v| v as f32).collect::<Vec<_>>());
        prop_assert_eq!(run_to(T::BOOL), values.iter().map(|&v| u8::from(v != 0)).collect::<Vec<_>>());
    }

    #[test]
    fn cast_from_float_truncates_and_saturates(values in proptest::collection::vec(-1e5f32..1e5, 1..40)) {
        let n = values.len() as i32;
        let input: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let model = single_op(Op::CAST, &[(F32, &[n])], (q(T::INT8, 0.0, 0), &[n]), Options::None);
        let got = i8s(&run(&model, &[&input]).unwrap()[0]);
        let want: Vec<i8> = values.iter().map(|v| v.trunc().clamp(-128.0, 127.0) as i8).collect();
        prop_assert_eq!(got, want);
    }
}

#[test]
fn cast_refuses_types_tflm_does_not_convert() {
    for ty in [T::UINT8, T::INT64] {
        let model = single_op(
            Op::CAST,
            &[(q(ty, 0.0, 0), &[2])],
            (F32, &[2]),
            Options::None,
        );
        assert_eq!(
            kernel_error(&model, &[&vec![0; 2 * element_size(ty)]]),
            KernelError::UnsupportedType {
                tensor: 0,
                dtype: ty.0
            }
        );
        let model = single_op(
            Op::CAST,
            &[(F32, &[2])],
            (q(ty, 0.0, 0), &[2]),
            Options::None,
        );
        assert_eq!(
            kernel_error(&model, &[&[0; 8]]),
            KernelError::UnsupportedType {
                tensor: 1,
                dtype: ty.0
            }
        );
    }
    let sizes = single_op(
        Op::CAST,
        &[(F32, &[2])],
        (q(T::INT32, 0.0, 0), &[3]),
        Options::None,
    );
    assert_eq!(
        kernel_error(&sizes, &[&[0; 8]]),
        KernelError::ShapeMismatch { tensor: 1 }
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn l2_normalization_int8_is_the_unit_row(s in 0.01f32..0.5, z in -30i64..30, depth in 1usize..64, seed in any::<u64>()) {
        let x = Rng(seed).tensor(T::INT8, depth * 2, 0.0, 0.0);
        let shape = [2, depth as i32];
        let options = Options::L2Norm { activation: Act::NONE };
        let model = single_op(Op::L2_NORMALIZATION, &[(i8q(s, z), &shape)], (i8q(1.0 / 128.0, 0), &shape), options);
        let got = i8s(&run(&model, &[&x]).unwrap()[0]);
        for (row, g) in i8s(&x).chunks(depth).zip(got.chunks(depth)) {
            let diffs: Vec<f64> = row.iter().map(|&v| (i64::from(v) - z) as f64).collect();
            let norm = diffs.iter().map(|d| d * d).sum::<f64>().sqrt();
            for (&d, &o) in diffs.iter().zip(g) {
                let want = if norm == 0.0 { 0 } else { ((d / norm * 128.0).round() as i64).clamp(-128, 127) };
                prop_assert!((i64::from(o) - want).abs() <= 1, "{d}/{norm}: got {o} want {want}");
            }
        }
    }
}

#[test]
fn l2_normalization_refuses_activations_ranks_and_output_scales() {
    let none = Options::L2Norm {
        activation: Act::NONE,
    };
    let relu = single_op(
        Op::L2_NORMALIZATION,
        &[(F32, &[1, 4])],
        (F32, &[1, 4]),
        Options::L2Norm {
            activation: Act::RELU,
        },
    );
    assert!(matches!(
        kernel_error(&relu, &[&[0; 16]]),
        KernelError::UnsupportedParameter { .. }
    ));
    let rank5 = single_op(
        Op::L2_NORMALIZATION,
        &[(F32, &[1, 1, 1, 1, 4])],
        (F32, &[1, 1, 1, 1, 4]),
        none.clone(),
    );
    assert_eq!(
        kernel_error(&rank5, &[&[0; 16]]),
        KernelError::UnsupportedRank { tensor: 0, rank: 5 }
    );
    let scale = single_op(
        Op::L2_NORMALIZATION,
        &[(i8q(0.1, 0), &[1, 4])],
        (i8q(0.01, 0), &[1, 4]),
        none.clone(),
    );
    assert!(matches!(
        kernel_error(&scale, &[&[0; 4]]),
        KernelError::UnsupportedParameter { .. }
    ));
    let zero = single_op(
        Op::L2_NORMALIZATION,
        &[(i8q(0.1, 0), &[1, 4])],
        (i8q(1.0 / 128.0, 3), &[1, 4]),
        none,
    );
    assert!(matches!(
        kernel_error(&zero, &[&[0; 4]]),
        KernelError::BadQuantization { tensor: 1, .. }
    ));
}
