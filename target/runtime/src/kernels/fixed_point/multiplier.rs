//! Real scales as Q31 fixed-point multipliers and power-of-two shifts (TFLM's
//! `QuantizeMultiplier` family, at prepare), and an integer multiplied by
//! one (`MultiplyByQuantizedMultiplier` and the gemmlowp steps it is made
//! of, at invoke).

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
pub(crate) fn frexp(x: f64) -> (f64, i32) {
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
    // Wrapping shifts: what a release build's shifts do, without a debug
    // build's panic on a hostile model's exponent of 32 or more.
    let mask = 1i32.wrapping_shl(exponent as u32).wrapping_sub(1);
    let remainder = x & mask;
    let threshold = (mask >> 1) + i32::from(x < 0);
    x.wrapping_shr(exponent as u32) + i32::from(remainder > threshold)
}

/// `x · multiplier · 2^shift` for a multiplier from [`quantize_multiplier`]:
/// TFLM's `MultiplyByQuantizedMultiplier` (double rounding).
#[inline(always)]
pub fn multiply_by_quantized_multiplier(x: i32, multiplier: i32, shift: i32) -> i32 {
    let left_shift = shift.max(0);
    let right_shift = (-shift).max(0);
    rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(
            x.wrapping_mul(1i32.wrapping_shl(left_shift as u32)),
            multiplier,
        ),
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
    // TFLM only checks |x| < 2^47 and the shift range in debug builds; a
    // hostile bias or scale breaks them. The wrapping forms compile to what
    // `*`, `+` and shifts do in a release build (no cost on the target) and
    // keep a debug build from panicking on such a model.
    let x = x
        .wrapping_mul(i64::from(reduced))
        .wrapping_add(1i64.wrapping_shl((total_shift - 1) as u32));
    x.wrapping_shr(total_shift as u32) as i32
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
    saturating_rounding_doubling_high_mul(
        x.wrapping_mul(1i32.wrapping_shl(left_shift as u32)),
        multiplier,
    )
}

/// TFLM's `QuantizeMultiplierSmallerThanOneExp`: `multiplier` in (0, 1),
/// shift ≤ 0. `None` outside that range (TFLM aborts there).
pub fn quantize_multiplier_smaller_than_one_exp(multiplier: f64) -> Option<(i32, i32)> {
    if !(multiplier > 0.0 && multiplier < 1.0) {
        return None;
    }
    let (q, shift) = quantize_multiplier(multiplier);
    (shift <= 0).then_some((q, shift))
}

/// TFLM's `QuantizeMultiplierGreaterThanOne`: `multiplier` > 1, shift ≥ 0.
/// `None` outside that range (TFLM aborts there).
pub fn quantize_multiplier_greater_than_one(multiplier: f64) -> Option<(i32, i32)> {
    if multiplier.is_nan() || multiplier <= 1.0 || multiplier.is_infinite() {
        return None;
    }
    let (q, shift) = quantize_multiplier(multiplier);
    (shift >= 0).then_some((q, shift))
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
