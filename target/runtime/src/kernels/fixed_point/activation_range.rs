//! The clamp a fused activation puts on an operator's output, on the
//! quantised scale or in float (TFLM's `CalculateActivationRange*`).

/// Output range of a fused activation on a quantised output, as TFLM's
/// `CalculateActivationRangeQuantized`.
pub fn activation_range_quantized(
    activation: crate::schema::ActivationFunctionType,
    scale: f32,
    zero_point: i32,
    qmin: i32,
    qmax: i32,
) -> (i32, i32) {
    use crate::schema::ActivationFunctionType as A;
    // `v / scale` is an f32, and TFLM rounds it as one (`TfLiteRound` on a
    // float). Rounding it widened to f64, as this did before, gives the
    // same: an f32 rounded to an integer is an f32 again (from 2^23 on it
    // already is an integer), so the values and their saturating `as i32`
    // (NaN to 0) agree. In f32 no software double routine is linked.
    let quantize = |v: f32| zero_point + libm::roundf(v / scale) as i32;
    match activation {
        A::RELU => (qmin.max(quantize(0.0)), qmax),
        A::RELU6 => (qmin.max(quantize(0.0)), qmax.min(quantize(6.0))),
        A::RELU_N1_TO_1 => (qmin.max(quantize(-1.0)), qmax.min(quantize(1.0))),
        _ => (qmin, qmax),
    }
}

/// Output range of a fused activation on a float output, as TFLM's
/// `CalculateActivationRange`: unbounded sides are the finite float limits,
/// so an infinite result clamps to them.
pub fn activation_range_float(activation: crate::schema::ActivationFunctionType) -> (f32, f32) {
    use crate::schema::ActivationFunctionType as A;
    match activation {
        A::RELU => (0.0, f32::MAX),
        A::RELU6 => (0.0, 6.0),
        A::RELU_N1_TO_1 => (-1.0, 1.0),
        _ => (f32::MIN, f32::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::super::multiplier::round_half_away;
    use super::*;
    use crate::schema::ActivationFunctionType as A;

    /// TFLM's rounding of `v / scale`, in f64: the code before.
    fn rounded_in_f64(x: f32) -> i32 {
        round_half_away(f64::from(x)) as i32
    }

    /// [`activation_range_quantized`] as it was, rounding in f64.
    fn range_in_f64(
        activation: A,
        scale: f32,
        zero_point: i32,
        qmin: i32,
        qmax: i32,
    ) -> (i32, i32) {
        let quantize = |v: f32| zero_point + rounded_in_f64(v / scale);
        match activation {
            A::RELU => (qmin.max(quantize(0.0)), qmax),
            A::RELU6 => (qmin.max(quantize(0.0)), qmax.min(quantize(6.0))),
            A::RELU_N1_TO_1 => (qmin.max(quantize(-1.0)), qmax.min(quantize(1.0))),
            _ => (qmin, qmax),
        }
    }

    /// Every `step`-th f32 bit pattern, and the values either side of
    /// every half from 0.5 to 2^22 + 0.5 and of the `i32` limits.
    fn check_rounding(step: usize) {
        let check = |x: f32| {
            assert_eq!(
                libm::roundf(x) as i32,
                rounded_in_f64(x),
                "{x:e} ({:#x})",
                x.to_bits()
            );
        };
        for bits in (0..=u32::MAX).step_by(step) {
            check(f32::from_bits(bits));
        }
        for n in (0..1 << 22).step_by(step.min(97)) {
            let half = n as f32 + 0.5;
            for x in [half, half.next_up(), half.next_down()] {
                check(x);
                check(-x);
            }
        }
        for x in [
            2_147_483_520.0f32,
            2_147_483_648.0,
            f32::MAX,
            f32::INFINITY,
            f32::NAN,
        ] {
            check(x);
            check(-x);
        }
    }

    #[test]
    fn roundf_matches_f64_rounding_sampled() {
        check_rounding(1021);
    }

    /// All 2^32 values: `cargo test --release --lib roundf -- --ignored`.
    #[test]
    #[ignore = "about 20 s in a release build"]
    fn roundf_matches_f64_rounding_every_f32() {
        check_rounding(1);
    }

    #[test]
    fn activation_range_matches_f64_rounding() {
        let activations = [A::NONE, A::RELU, A::RELU6, A::RELU_N1_TO_1];
        // 6/4, 1/(2/3) and 6/12 are exact halves.
        let mut scales: Vec<f32> = vec![1.0, 0.5, 4.0, -4.0, 12.0, 2.0 / 3.0, 0.023_529_412];
        scales.extend((0..=u32::MAX).step_by(4093).map(f32::from_bits));
        for scale in scales {
            for activation in activations {
                let wide = (i32::MIN, i32::MAX);
                assert_eq!(
                    activation_range_quantized(activation, scale, 0, wide.0, wide.1),
                    range_in_f64(activation, scale, 0, wide.0, wide.1),
                    "{scale:e}"
                );
                // A zero point cannot overflow with these scales.
                if scale.abs() >= 1e-6 {
                    for zero_point in [-128, -3, 127] {
                        assert_eq!(
                            activation_range_quantized(activation, scale, zero_point, -128, 127),
                            range_in_f64(activation, scale, zero_point, -128, 127),
                            "{scale:e} {zero_point}"
                        );
                    }
                }
            }
        }
    }
}
