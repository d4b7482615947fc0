//! Integer arithmetic exactly as TFLM's reference kernels do it (gemmlowp's
//! fixed-point rules, TFLM's "double rounding" default). Every quantised
//! kernel goes through these, so bit-exactness lives in one place.

/// Splits a real multiplier into a Q0.31 fixed-point value and a power-of-two
/// exponent, `m ≈ q / 2^31 · 2^shift`, as TFLM's `QuantizeMultiplier`.
pub fn quantize_multiplier(multiplier: f64) -> (i32, i32) {
    if multiplier == 0.0 {
        return (0, 0);
    }
    let (q, mut shift) = frexp(multiplier);
    let mut q_fixed = round_half_away(q * (1u64 << 31) as f64) as i64;
    if q_fixed == 1i64 << 31 {
        q_fixed /= 2;
        shift += 1;
    }
    if shift < -31 {
        shift = 0;
        q_fixed = 0;
    }
    (q_fixed as i32, shift)
}

/// `frexp`: `x = fraction · 2^exp` with `|fraction|` in [0.5, 1).
fn frexp(x: f64) -> (f64, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    if exp == 0 {
        // Subnormal: scale up first.
        let (f, e) = frexp(x * (1u64 << 54) as f64);
        return (f, e - 54);
    }
    let fraction = f64::from_bits((bits & !(0x7ffu64 << 52)) | (1022u64 << 52));
    (fraction, exp - 1022)
}

/// C's `round`: halves away from zero (TFLM's `TfLiteRound`).
pub fn round_half_away(x: f64) -> f64 {
    libm::round(x)
}

/// `(a · b · 2) >> 32` with rounding to nearest, saturating the one overflow
/// case (`i32::MIN · i32::MIN`): gemmlowp's `SaturatingRoundingDoublingHighMul`.
#[inline(always)]
pub fn saturating_rounding_doubling_high_mul(a: i32, b: i32) -> i32 {
    if a == i32::MIN && b == i32::MIN {
        return i32::MAX;
    }
    let ab = i64::from(a) * i64::from(b);
    let nudge = if ab >= 0 {
        1i64 << 30
    } else {
        1 - (1i64 << 30)
    };
    // Division truncating toward zero, as C++ does.
    ((ab + nudge) / (1i64 << 31)) as i32
}

/// Arithmetic right shift rounding to nearest, ties away from zero:
/// gemmlowp's `RoundingDivideByPOT`.
#[inline(always)]
pub fn rounding_divide_by_pot(x: i32, exponent: i32) -> i32 {
    let mask = (1i32 << exponent).wrapping_sub(1);
    let remainder = x & mask;
    let threshold = (mask >> 1) + i32::from(x < 0);
    (x >> exponent) + i32::from(remainder > threshold)
}

/// `x · multiplier · 2^shift` for a multiplier from [`quantize_multiplier`]:
/// TFLM's `MultiplyByQuantizedMultiplier` (double rounding).
#[inline(always)]
pub fn multiply_by_quantized_multiplier(x: i32, multiplier: i32, shift: i32) -> i32 {
    let left_shift = shift.max(0);
    let right_shift = (-shift).max(0);
    rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(x.wrapping_mul(1i32 << left_shift), multiplier),
        right_shift,
    )
}

/// The 64-bit-accumulator variant TFLM uses for 16-bit activations.
#[inline(always)]
pub fn multiply_by_quantized_multiplier_i64(x: i64, multiplier: i32, shift: i32) -> i32 {
    let reduced = if multiplier < 0x7FFF_0000 {
        (multiplier + (1 << 15)) >> 16
    } else {
        0x7FFF
    };
    let total_shift = 15 - shift;
    let x = x * i64::from(reduced) + (1i64 << (total_shift - 1));
    (x >> total_shift) as i32
}

/// `x · multiplier · 2^left_shift` for multipliers below one (`left_shift ≤ 0`).
#[inline(always)]
pub fn multiply_by_quantized_multiplier_smaller_than_one(
    x: i32,
    multiplier: i32,
    left_shift: i32,
) -> i32 {
    rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(x, multiplier),
        -left_shift,
    )
}

/// `x · multiplier · 2^left_shift` for multipliers above one (`left_shift ≥ 0`).
#[inline(always)]
pub fn multiply_by_quantized_multiplier_greater_than_one(
    x: i32,
    multiplier: i32,
    left_shift: i32,
) -> i32 {
    saturating_rounding_doubling_high_mul(x.wrapping_mul(1 << left_shift), multiplier)
}

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
    let quantize = |v: f32| zero_point + round_half_away(f64::from(v / scale)) as i32;
    match activation {
        A::RELU => (qmin.max(quantize(0.0)), qmax),
        A::RELU6 => (qmin.max(quantize(0.0)), qmax.min(quantize(6.0))),
        A::RELU_N1_TO_1 => (qmin.max(quantize(-1.0)), qmax.min(quantize(1.0))),
        _ => (qmin, qmax),
    }
}

/// Output range of a fused activation on a float output.
pub fn activation_range_float(activation: crate::schema::ActivationFunctionType) -> (f32, f32) {
    use crate::schema::ActivationFunctionType as A;
    match activation {
        A::RELU => (0.0, f32::INFINITY),
        A::RELU6 => (0.0, 6.0),
        A::RELU_N1_TO_1 => (-1.0, 1.0),
        _ => (f32::NEG_INFINITY, f32::INFINITY),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_multiplier_matches_hand_values() {
        assert_eq!(quantize_multiplier(0.0), (0, 0));
        assert_eq!(quantize_multiplier(0.5), (1 << 30, 0));
        assert_eq!(quantize_multiplier(1.0), (1 << 30, 1));
        assert_eq!(quantize_multiplier(0.25), (1 << 30, -1));
        // 0.75 = 0.75 · 2^0 → round(0.75 · 2^31)
        assert_eq!(quantize_multiplier(0.75), (1_610_612_736, 0));
        // Rounding up to 2^31 renormalises.
        assert_eq!(quantize_multiplier(0.999_999_999_9), (1 << 30, 1));
        // Too small: everything shifted out.
        assert_eq!(quantize_multiplier(1e-12), (0, 0));
    }

    #[test]
    fn srdhm_edges() {
        assert_eq!(
            saturating_rounding_doubling_high_mul(i32::MIN, i32::MIN),
            i32::MAX
        );
        assert_eq!(
            saturating_rounding_doubling_high_mul(1 << 30, 1 << 30),
            1 << 29
        );
        // Ties: 3 · 2^30 · 2 / 2^32 = 1.5 → 2; negative rounds away from zero too.
        assert_eq!(saturating_rounding_doubling_high_mul(3, 1 << 30), 2);
        assert_eq!(saturating_rounding_doubling_high_mul(-3, 1 << 30), -1);
        assert_eq!(
            saturating_rounding_doubling_high_mul(i32::MAX, i32::MAX),
            i32::MAX - 1
        );
    }

    #[test]
    fn rounding_divide_edges() {
        assert_eq!(rounding_divide_by_pot(5, 1), 3);
        assert_eq!(rounding_divide_by_pot(-5, 1), -3);
        assert_eq!(rounding_divide_by_pot(4, 1), 2);
        assert_eq!(rounding_divide_by_pot(-6, 2), -2);
        assert_eq!(rounding_divide_by_pot(7, 0), 7);
        assert_eq!(rounding_divide_by_pot(i32::MIN, 31), -1);
        assert_eq!(rounding_divide_by_pot(i32::MAX, 31), 1);
    }

    #[test]
    fn multiply_by_quantized_multiplier_matches_real_arithmetic() {
        for &m in &[0.000_123, 0.25, 0.4999, 0.75, 1.5, 3.9] {
            let (q, shift) = quantize_multiplier(m);
            for &x in &[-100_000, -1000, -7, 0, 1, 99, 12_345, 1_000_000] {
                let got = multiply_by_quantized_multiplier(x, q, shift);
                let want = (f64::from(x) * m).round();
                assert!(
                    (f64::from(got) - want).abs() <= 1.0,
                    "{x} * {m}: {got} vs {want}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// int16 sigmoid and tanh by table lookup (LSTM gates, int16 LOGISTIC/TANH).
//
// TFLM's `reference_integer_ops::Logistic` and `Tanh` on int16 both read one
// 256-entry table of sigmoid, using tanh(x) = 2·sigmoid(2x) − 1, and
// interpolate linearly between neighbouring entries. The input is first
// scaled by `multiplier / 2^shift`; the power-of-two case (`multiplier ==
// 0`) scales by 3 instead, so that a Q3.12 input spans the table's range of
// about ±10.7.
// ---------------------------------------------------------------------------

/// sigmoid(i / 24) in Q0.16 for i = 0..=255 (the last entry is clamped to
/// 65535), exactly as TFLM and CMSIS-NN ship it. It is not
/// `round(65536 · sigmoid(i / 24))` (44 entries differ by one), so it is
/// kept as data rather than computed.
pub const SIGMOID_TABLE_Q16: [u16; 256] = [
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794,
    41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443,
    48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169, 53581, 53983, 54374,
    54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544,
    58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279,
    61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990,
    63090, 63186, 63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030,
    64090, 64148, 64204, 64257, 64308, 64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652,
    64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019,
    65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234,
    65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360,
    65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476,
    65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498, 65500, 65501,
    65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516,
    65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529,
    65529, 65530, 65530, 65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532,
    65532, 65532, 65532, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65534, 65534,
    65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535,
];

/// The input scaling of TFLM's int16 Logistic/Tanh as `(multiplier,
/// shift)` with the power-of-two case resolved: `multiplier == 0` means
/// "×3, then shift left by `left_shift`", which is `(3 << left_shift, 0)`.
#[inline]
pub fn int16_lut_input_scale(input_multiplier: i32, input_left_shift: i32) -> (i32, i32) {
    if input_multiplier == 0 {
        (3i32.wrapping_shl(input_left_shift as u32), 0)
    } else {
        (input_multiplier, input_left_shift)
    }
}

/// `(x · multiplier + round) >> shift`, TFLM's pre-scaling of the LUT input.
#[inline(always)]
fn int16_lut_scale(x: i16, multiplier: i32, shift: i32) -> i32 {
    let round = if shift > 0 { 1i32 << (shift - 1) } else { 0 };
    i32::from(x).wrapping_mul(multiplier).wrapping_add(round) >> shift
}

/// Sigmoid of one int16 value, TFLM's `reference_integer_ops::Logistic`
/// (int16): `(multiplier, shift)` from [`int16_lut_input_scale`]; the output
/// is Q0.15 (0..=32767).
#[inline(always)]
pub fn logistic_int16(x: i16, multiplier: i32, shift: i32) -> i16 {
    let scaled = int16_lut_scale(x, multiplier, shift);
    let abs = scaled.unsigned_abs();
    // Table steps are 1/24: the Q3.12 input times 3 is 24·x in Q9.
    let index = abs >> 9;
    let mut result: u32 = if index >= 255 {
        0x7FFF << 10
    } else {
        let a = u32::from(SIGMOID_TABLE_Q16[index as usize]);
        let b = u32::from(SIGMOID_TABLE_Q16[index as usize + 1]);
        let frac = abs & 0x1FF;
        (a << 9).wrapping_add(frac.wrapping_mul(b.wrapping_sub(a)))
    };
    result = if scaled >= 0 {
        result.wrapping_add(1 << 9)
    } else {
        (1u32 << 25)
            .wrapping_sub(result)
            .wrapping_add(1 << 9)
            .wrapping_sub(1)
    };
    (result >> 10) as i16
}

/// Tanh of one int16 value, TFLM's `reference_integer_ops::Tanh` (int16):
/// `(multiplier, shift)` from [`int16_lut_input_scale`]; the output is Q0.15.
#[inline(always)]
pub fn tanh_int16(x: i16, multiplier: i32, shift: i32) -> i16 {
    let scaled = int16_lut_scale(x, multiplier, shift);
    let abs = scaled.unsigned_abs();
    // Half the sigmoid's step: tanh(x) = 2·sigmoid(2x) − 1.
    let index = abs >> 8;
    let mut result: i32 = if index >= 255 {
        0xFFFF << 8
    } else {
        let a = u32::from(SIGMOID_TABLE_Q16[index as usize]);
        let b = u32::from(SIGMOID_TABLE_Q16[index as usize + 1]);
        let frac = abs & 0xFF;
        (a << 8).wrapping_add(frac.wrapping_mul(b.wrapping_sub(a))) as i32
    };
    result = if scaled >= 0 {
        result - (1 << 23) + (1 << 7)
    } else {
        -result + (1 << 23) + (1 << 7) - 1
    };
    (result >> 8) as i16
}

#[cfg(test)]
mod int16_lut_tests {
    use super::*;

    fn sigmoid(x: f64) -> f64 {
        1.0 / (1.0 + libm::exp(-x))
    }

    #[test]
    fn table_is_sigmoid_of_i_over_24() {
        let mut previous = 0u16;
        for (i, &entry) in SIGMOID_TABLE_Q16.iter().enumerate() {
            let exact = (65536.0 * sigmoid(i as f64 / 24.0)).min(65535.0);
            assert!(
                (f64::from(entry) - exact).abs() <= 1.2,
                "{i}: {entry} vs {exact}"
            );
            assert!(entry >= previous);
            previous = entry;
        }
    }

    #[test]
    fn power_of_two_scale_is_times_three() {
        assert_eq!(int16_lut_input_scale(0, 0), (3, 0));
        assert_eq!(int16_lut_input_scale(0, 2), (12, 0));
        assert_eq!(int16_lut_input_scale(3, 3), (3, 3));
    }

    #[test]
    fn hand_values() {
        let (m, s) = int16_lut_input_scale(0, 0);
        // sigmoid(0) = 0.5, tanh(0) = 0 in Q0.15.
        assert_eq!(logistic_int16(0, m, s), 16384);
        assert_eq!(tanh_int16(0, m, s), 0);
        // Q3.12 spans ±8, inside the table's ±10.7: the extremes do not
        // saturate...
        assert_eq!(logistic_int16(i16::MAX, m, s), 32757);
        assert_eq!(logistic_int16(i16::MIN, m, s), 11);
        // ...but a larger scale does.
        let (m4, s4) = int16_lut_input_scale(0, 2);
        assert_eq!(logistic_int16(i16::MAX, m4, s4), 32767);
        assert_eq!(logistic_int16(i16::MIN, m4, s4), 1);
        assert_eq!(tanh_int16(i16::MAX, m, s), 32767);
        assert_eq!(tanh_int16(i16::MIN, m, s), -32767);
        // x = 1.0 (4096 in Q3.12) lands exactly on table entry 24 for the
        // sigmoid: (47911 · 2^9 + 2^9) >> 10 = 23956 ≈ 0.7311 · 2^15...
        assert_eq!(logistic_int16(4096, m, s), 23956);
        // ...and on entry 48 for tanh: (57724 · 2^8 − 2^23 + 2^7) >> 8 =
        // 24956 ≈ 0.7616 · 2^15.
        assert_eq!(tanh_int16(4096, m, s), 24956);
        // A right shift rounds: (−1 · 3 + 4) >> 3 = 0, the middle.
        assert_eq!(tanh_int16(-1, 3, 3), 0);
    }

    #[test]
    fn close_to_the_real_functions_everywhere() {
        let (m, s) = int16_lut_input_scale(0, 0);
        for x in (i16::MIN..=i16::MAX).step_by(7) {
            let real = f64::from(x) / 4096.0;
            let sig = f64::from(logistic_int16(x, m, s)) / 32768.0;
            let th = f64::from(tanh_int16(x, m, s)) / 32768.0;
            assert!((sig - sigmoid(real)).abs() < 2e-4, "sigmoid {x}");
            assert!((th - libm::tanh(real)).abs() < 4e-4, "tanh {x}");
        }
    }

    #[test]
    fn odd_and_complementary_symmetry() {
        let (m, s) = int16_lut_input_scale(0, 0);
        for x in -32767..=32767i16 {
            let (p, n) = (tanh_int16(x, m, s), tanh_int16(-x, m, s));
            assert!((i32::from(p) + i32::from(n)).abs() <= 1, "tanh {x}");
            let (p, n) = (logistic_int16(x, m, s), logistic_int16(-x, m, s));
            assert!(
                (i32::from(p) + i32::from(n) - 32768).abs() <= 1,
                "sigmoid {x}"
            );
        }
    }
}
