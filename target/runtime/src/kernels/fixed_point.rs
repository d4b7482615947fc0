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
// gemmlowp fixed-point math (`fixedpoint.h` as TFLM ships it): exp, tanh,
// logistic and reciprocal on Qm.n values, for 32-bit and 16-bit raw types.
//
// A value is a raw integer plus a number of integer bits `m` (excluding the
// sign bit): raw / 2^(BITS-1-m). gemmlowp encodes `m` in the type; here it is
// a parameter. Products of Qa and Qb values are Q(a+b) values
// ([`FixedRaw::mul`]); [`rescale`] moves a value to another format.
// ---------------------------------------------------------------------------

/// A raw fixed-point integer type (`i32` or `i16`) with gemmlowp's scalar
/// primitives.
pub trait FixedRaw: Copy + PartialEq + PartialOrd + core::fmt::Debug {
    /// Width in bits.
    const BITS: i32;
    /// Zero.
    const ZERO: Self;
    /// The largest value.
    const MAX: Self;
    /// The smallest value.
    const MIN: Self;
    /// Plain (wrapping) addition, gemmlowp's `Add`.
    fn add(self, other: Self) -> Self;
    /// Plain (wrapping) subtraction, gemmlowp's `Sub`.
    fn sub(self, other: Self) -> Self;
    /// Plain (wrapping) negation, gemmlowp's `Neg`.
    fn neg(self) -> Self;
    /// Bitwise and.
    fn and(self, other: Self) -> Self;
    /// `1 << shift` (shift below `BITS - 1`).
    fn pot(shift: i32) -> Self;
    /// Fixed-point product: `SaturatingRoundingDoublingHighMul`.
    fn mul(self, other: Self) -> Self;
    /// `RoundingDivideByPOT`.
    fn rounding_divide_by_pot(self, exponent: i32) -> Self;
    /// Saturating left shift of a value within `±threshold` (gemmlowp's
    /// 64-bit-widened `ShiftLeft`).
    fn shift_left(self, exponent: i32) -> Self;
    /// `(a + b) / 2` rounded half away from zero: `RoundingHalfSum`.
    fn rounding_half_sum(self, other: Self) -> Self;
    /// `AddSaturatingIf16Bit`: plain for 32 bits, saturating for 16.
    fn add_saturating_if_16bit(self, other: Self) -> Self;
    /// A constant given as its 32-bit raw value, rounded down to this width
    /// (`RescaleConstantInitializer`).
    fn constant(raw32: i32) -> Self;
    /// The value widened to `i32`.
    fn to_i32(self) -> i32;
}

impl FixedRaw for i32 {
    const BITS: i32 = 32;
    const ZERO: Self = 0;
    const MAX: Self = i32::MAX;
    const MIN: Self = i32::MIN;
    #[inline(always)]
    fn add(self, other: Self) -> Self {
        self.wrapping_add(other)
    }
    #[inline(always)]
    fn sub(self, other: Self) -> Self {
        self.wrapping_sub(other)
    }
    #[inline(always)]
    fn neg(self) -> Self {
        self.wrapping_neg()
    }
    #[inline(always)]
    fn and(self, other: Self) -> Self {
        self & other
    }
    #[inline(always)]
    fn pot(shift: i32) -> Self {
        1 << shift
    }
    #[inline(always)]
    fn mul(self, other: Self) -> Self {
        saturating_rounding_doubling_high_mul(self, other)
    }
    #[inline(always)]
    fn rounding_divide_by_pot(self, exponent: i32) -> Self {
        rounding_divide_by_pot(self, exponent)
    }
    #[inline(always)]
    fn shift_left(self, exponent: i32) -> Self {
        (i64::from(self) << exponent).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
    }
    #[inline(always)]
    fn rounding_half_sum(self, other: Self) -> Self {
        let sum = i64::from(self) + i64::from(other);
        let sign = if sum >= 0 { 1 } else { -1 };
        ((sum + sign) / 2) as i32
    }
    #[inline(always)]
    fn add_saturating_if_16bit(self, other: Self) -> Self {
        self.wrapping_add(other)
    }
    #[inline(always)]
    fn constant(raw32: i32) -> Self {
        raw32
    }
    #[inline(always)]
    fn to_i32(self) -> i32 {
        self
    }
}

impl FixedRaw for i16 {
    const BITS: i32 = 16;
    const ZERO: Self = 0;
    const MAX: Self = i16::MAX;
    const MIN: Self = i16::MIN;
    #[inline(always)]
    fn add(self, other: Self) -> Self {
        self.wrapping_add(other)
    }
    #[inline(always)]
    fn sub(self, other: Self) -> Self {
        self.wrapping_sub(other)
    }
    #[inline(always)]
    fn neg(self) -> Self {
        self.wrapping_neg()
    }
    #[inline(always)]
    fn and(self, other: Self) -> Self {
        self & other
    }
    #[inline(always)]
    fn pot(shift: i32) -> Self {
        1 << shift
    }
    #[inline(always)]
    fn mul(self, other: Self) -> Self {
        if self == i16::MIN && other == i16::MIN {
            return i16::MAX;
        }
        let ab = i32::from(self) * i32::from(other);
        let nudge = if ab >= 0 { 1 << 14 } else { 1 - (1 << 14) };
        ((ab + nudge) / (1 << 15)) as i16
    }
    #[inline(always)]
    fn rounding_divide_by_pot(self, exponent: i32) -> Self {
        let mask = ((1i64 << exponent) - 1) as i16;
        let remainder = self & mask;
        let threshold = (mask >> 1) + i16::from(self < 0);
        (self >> exponent) + i16::from(remainder > threshold)
    }
    #[inline(always)]
    fn shift_left(self, exponent: i32) -> Self {
        (i64::from(self) << exponent).clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i16
    }
    #[inline(always)]
    fn rounding_half_sum(self, other: Self) -> Self {
        let sum = i32::from(self) + i32::from(other);
        let sign = if sum >= 0 { 1 } else { -1 };
        ((sum + sign) / 2) as i16
    }
    #[inline(always)]
    fn add_saturating_if_16bit(self, other: Self) -> Self {
        self.saturating_add(other)
    }
    #[inline(always)]
    fn constant(raw32: i32) -> Self {
        rounding_divide_by_pot(raw32, 16) as i16
    }
    #[inline(always)]
    fn to_i32(self) -> i32 {
        i32::from(self)
    }
}

/// Fractional bits of a Qm value of raw type `R`.
#[inline(always)]
const fn fractional_bits<R: FixedRaw>(integer_bits: i32) -> i32 {
    R::BITS - 1 - integer_bits
}

/// gemmlowp's `One()` for a format with `integer_bits`: the largest value
/// when there are no integer bits (1.0 is not representable).
#[inline(always)]
pub fn one<R: FixedRaw>(integer_bits: i32) -> R {
    if integer_bits == 0 {
        R::MAX
    } else {
        R::pot(fractional_bits::<R>(integer_bits))
    }
}

/// `SaturatingRoundingMultiplyByPOT`: `x · 2^exponent`, a saturating left
/// shift for positive exponents and a rounding right shift for negative ones.
#[inline(always)]
pub fn saturating_rounding_multiply_by_pot<R: FixedRaw>(x: R, exponent: i32) -> R {
    if exponent > 0 {
        let threshold = (1i32 << (R::BITS - 1 - exponent)) - 1;
        let x32 = x.to_i32();
        if x32 > threshold {
            R::MAX
        } else if x32 < -threshold {
            R::MIN
        } else {
            x.shift_left(exponent)
        }
    } else if exponent < 0 {
        x.rounding_divide_by_pot(-exponent)
    } else {
        x
    }
}

/// `Rescale`: the same real value moved from a format with `src_integer_bits`
/// to one with `dst_integer_bits` (saturating or rounding as needed).
#[inline(always)]
pub fn rescale<R: FixedRaw>(x: R, src_integer_bits: i32, dst_integer_bits: i32) -> R {
    saturating_rounding_multiply_by_pot(x, src_integer_bits - dst_integer_bits)
}

/// `exp(a)` for a Q0 value `a` in [-1/4, 0): a Taylor expansion around -1/8.
#[inline]
pub fn exp_on_interval_between_negative_one_quarter_and_0_excl<R: FixedRaw>(a: R) -> R {
    let constant_term = R::constant(1_895_147_668); // exp(-1/8)
    let constant_1_over_3 = R::constant(715_827_883);
    // x = a + 1/8
    let x = a.add(R::pot(R::BITS - 1 - 3));
    let x2 = x.mul(x);
    let x3 = x2.mul(x);
    let x4 = x2.mul(x2);
    let x4_over_4 = saturating_rounding_multiply_by_pot(x4, -2);
    let x4_over_24_plus_x3_over_6_plus_x2_over_2 =
        saturating_rounding_multiply_by_pot(x4_over_4.add(x3).mul(constant_1_over_3).add(x2), -1);
    constant_term
        .add_saturating_if_16bit(constant_term.mul(x.add(x4_over_24_plus_x3_over_6_plus_x2_over_2)))
}

/// `exp(a)` for `a ≤ 0` in Q`integer_bits`; the result is Q0
/// (`exp_on_negative_values`).
#[inline]
pub fn exp_on_negative_values<R: FixedRaw>(a: R, integer_bits: i32) -> R {
    let fractional = R::BITS - 1 - integer_bits;
    let one_quarter = R::pot(fractional - 2);
    let mask = one_quarter.sub(R::pot(0));
    let a_mod_quarter_minus_one_quarter = a.and(mask).sub(one_quarter);
    let mut result = exp_on_interval_between_negative_one_quarter_and_0_excl(rescale(
        a_mod_quarter_minus_one_quarter,
        integer_bits,
        0,
    ));
    let remainder = a_mod_quarter_minus_one_quarter.sub(a);
    // exp(-2^e) for e = -2..=4, as Q0.31 raw values.
    const BARREL: [(i32, i32); 7] = [
        (-2, 1_672_461_947),
        (-1, 1_302_514_674),
        (0, 790_015_084),
        (1, 290_630_308),
        (2, 39_332_535),
        (3, 720_401),
        (4, 242),
    ];
    for &(exponent, multiplier) in &BARREL {
        if integer_bits > exponent {
            let bit = R::pot(fractional + exponent);
            if remainder.and(bit) != R::ZERO {
                result = result.mul(R::constant(multiplier));
            }
        }
    }
    if integer_bits > 5 {
        let clamp = R::constant(-(1 << (36 - integer_bits))); // -32.0
        if a < clamp {
            result = R::ZERO;
        }
    }
    if a == R::ZERO { one(0) } else { result }
}

/// `1 / (1 + a)` for a Q0 value `a` in [0, 1): Newton–Raphson division.
#[inline]
pub fn one_over_one_plus_x_for_x_in_0_1<R: FixedRaw>(a: R) -> R {
    let half_denominator = a.rounding_half_sum(one(0));
    let x = newton_raphson_reciprocal(half_denominator);
    // x / 2 (exact: one integer bit fewer), back to Q0.
    rescale(x, 1, 0)
}

/// `(1 - a) / (1 + a)` for a Q0 value `a` in [0, 1).
#[inline]
pub fn one_minus_x_over_one_plus_x_for_x_in_0_1<R: FixedRaw>(a: R) -> R {
    let half_denominator = a.rounding_half_sum(one(0));
    let x = newton_raphson_reciprocal(half_denominator);
    rescale(x.sub(one(2)), 2, 0)
}

/// `1 / d` in Q2 for a Q0 `d` in [1/2, 1): three Newton–Raphson steps from
/// 48/17 - 32/17·d.
#[inline(always)]
fn newton_raphson_reciprocal<R: FixedRaw>(half_denominator: R) -> R {
    let constant_48_over_17 = R::constant(1_515_870_810);
    let constant_neg_32_over_17 = R::constant(-1_010_580_540);
    let mut x = constant_48_over_17.add(half_denominator.mul(constant_neg_32_over_17));
    for _ in 0..3 {
        let half_denominator_times_x = half_denominator.mul(x);
        let one_minus_half_denominator_times_x = one::<R>(2).sub(half_denominator_times_x);
        x = x.add(rescale(x.mul(one_minus_half_denominator_times_x), 4, 2));
    }
    x
}

/// `-tanh(a)` for `a ≤ 0` in Q`integer_bits`; the result is Q0.
#[inline]
pub fn neg_tanh_on_negative_values<R: FixedRaw>(a: R, integer_bits: i32) -> R {
    // exp(2a): the same raw value read with one more integer bit.
    one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(a, integer_bits + 1))
}

/// `tanh(a)` for any Q`integer_bits` value; the result is Q0.
#[inline]
pub fn tanh<R: FixedRaw>(a: R, integer_bits: i32) -> R {
    let negative = a < R::ZERO;
    let n = if negative { a } else { a.neg() };
    let t = neg_tanh_on_negative_values(n, integer_bits);
    if a == R::ZERO {
        R::ZERO
    } else if negative {
        t.neg()
    } else {
        t
    }
}

/// `1 / (1 + exp(-a))` for `a > 0` in Q`integer_bits`; the result is Q0.
#[inline]
pub fn logistic_on_positive_values<R: FixedRaw>(a: R, integer_bits: i32) -> R {
    one_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(a.neg(), integer_bits))
}

/// `1 / (1 + exp(-a))` for any Q`integer_bits` value; the result is Q0.
#[inline]
pub fn logistic<R: FixedRaw>(a: R, integer_bits: i32) -> R {
    let positive = a > R::ZERO;
    let abs_input = if positive { a } else { a.neg() };
    let result_if_positive = logistic_on_positive_values(abs_input, integer_bits);
    if a == R::ZERO {
        R::constant(1 << 30) // 0.5
    } else if positive {
        result_if_positive
    } else {
        one::<R>(0).sub(result_if_positive)
    }
}

/// `1 / x` for a positive Q`x_integer_digits` value `x`, as TFLM's
/// `GetReciprocal`: a Q0 scale in [1/2, 1] and the number of bits `x` has
/// above 1.0, so that `1/x = scale · 2^-num_bits_over_unit`.
#[inline]
pub fn get_reciprocal(x: i32, x_integer_digits: i32) -> (i32, i32) {
    let headroom_plus_one = (x as u32).leading_zeros();
    let num_bits_over_unit = x_integer_digits - headroom_plus_one as i32;
    let shifted_sum_minus_one = (x as u32)
        .checked_shl(headroom_plus_one)
        .unwrap_or(0)
        .wrapping_sub(1 << 31) as i32;
    (
        one_over_one_plus_x_for_x_in_0_1(shifted_sum_minus_one),
        num_bits_over_unit,
    )
}

/// Redundant sign bits of `x` (bits below the sign bit that equal it; 31
/// for 0 and -1): TFLM's `CountLeadingSignBits`, how far `x` can be
/// shifted left without overflow.
#[inline(always)]
pub fn count_leading_sign_bits(x: i32) -> i32 {
    (x ^ (x >> 31)).leading_zeros() as i32 - 1
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

/// TFLM's `PreprocessSoftmaxScaling` (double-rounding build): the multiplier
/// and left shift that turn an input difference into a
/// Q`input_integer_bits` value of `beta · input_scale · diff`.
pub fn preprocess_softmax_scaling(
    beta: f64,
    input_scale: f64,
    input_integer_bits: i32,
) -> Option<(i32, i32)> {
    let max_real_multiplier = ((1i64 << 31) - 1) as f64;
    let real = (beta * input_scale * f64::from(1i32 << (31 - input_integer_bits)))
        .min(max_real_multiplier);
    quantize_multiplier_greater_than_one(real)
}

/// TFLM's `CalculateInputRadius`: the largest input magnitude that, scaled by
/// `2^input_left_shift`, still fits Q`input_integer_bits` in
/// `total_signed_bits`.
pub fn calculate_input_radius(
    input_integer_bits: i32,
    input_left_shift: i32,
    total_signed_bits: i32,
) -> i32 {
    let max_input_rescaled = f64::from((1i32 << input_integer_bits) - 1)
        * (1i64 << (total_signed_bits - input_integer_bits)) as f64
        / (1i64 << input_left_shift) as f64;
    libm::floor(max_input_rescaled) as i32
}

/// `ln(x)` for a Q`input_integer_bits` value `x ≥ 1`, as a
/// Q`output_integer_bits` value: TFLM's
/// `log_x_for_x_greater_than_or_equal_to_1` (a rational approximation of
/// `ln` on [sqrt(1/2)·2^k, sqrt(2)·2^k), the power of two added as
/// `k · ln 2`). Accumulates with one integer bit more than the output, so
/// that a saturated `k · ln 2` does not spoil the sum.
pub fn log_x_for_x_greater_than_or_equal_to_1(
    input: i32,
    input_integer_bits: i32,
    output_integer_bits: i32,
) -> i32 {
    // Q0 constants.
    const LOG_2: i32 = 1_488_522_236;
    const SQRT_SQRT_HALF: i32 = 1_805_811_301;
    const SQRT_HALF: i32 = 1_518_500_250;
    const ONE_QUARTER: i32 = 536_870_912;
    const ALPHA_N: i32 = 117_049_297;
    const ALPHA_D: i32 = 127_690_142;
    const ALPHA_I: i32 = 1_057_819_769;
    const ALPHA_F: i32 = 638_450_708;
    let accum_bits = output_integer_bits + 1;
    let mul = saturating_rounding_doubling_high_mul;
    let pot = saturating_rounding_multiply_by_pot::<i32>;
    let shifted_quarter = rescale(ONE_QUARTER, 0, accum_bits);
    // The input's bits read as Q0; the power of two is tracked separately.
    let z_a = input;
    let z_a_headroom_plus_1 = (z_a as u32).leading_zeros() as i32;
    let r_a = pot(mul(pot(z_a, z_a_headroom_plus_1 - 1), SQRT_HALF), 1);
    let z_a_pow_2_adj = pot(input_integer_bits - z_a_headroom_plus_1, 31 - accum_bits)
        .saturating_add(shifted_quarter);
    // The same, premultiplied by sqrt(1/2).
    let z_b = mul(z_a, SQRT_HALF);
    let z_b_headroom = (z_b as u32).leading_zeros() as i32 - 1;
    let r_b = pot(z_a, z_b_headroom);
    let z_b_pow_2_adj =
        pot(input_integer_bits - z_b_headroom, 31 - accum_bits).saturating_sub(shifted_quarter);
    let r = r_a.min(r_b);
    let z_pow_2_adj = z_a_pow_2_adj.max(z_b_pow_2_adj);
    let p = r.rounding_half_sum(SQRT_SQRT_HALF);
    let q = r.wrapping_sub(SQRT_SQRT_HALF);
    let q = q.wrapping_add(q);
    let common_sq = mul(q, q);
    let num = mul(q, r).wrapping_add(mul(mul(q, common_sq), ALPHA_N));
    let denom_minus_one = mul(
        p,
        ALPHA_I
            .wrapping_add(q)
            .wrapping_add(mul(ALPHA_D, common_sq)),
    )
    .wrapping_add(mul(ALPHA_F, q));
    let recip_denom = one_over_one_plus_x_for_x_in_0_1(denom_minus_one);
    let num_scaled = rescale(num, 0, accum_bits);
    let sum = mul(z_pow_2_adj, LOG_2).wrapping_add(mul(num_scaled, recip_denom));
    rescale(sum, accum_bits, output_integer_bits)
}

/// TFLM's `PreprocessLogSoftmaxScalingExp`: [`preprocess_softmax_scaling`]'s
/// multiplier and left shift, plus the reverse scaling (a Q0.31 divisor
/// and its left shift, ≤ 0) that takes a Q`input_integer_bits` value back
/// to input steps.
pub fn preprocess_log_softmax_scaling_exp(
    beta: f64,
    input_scale: f64,
    input_integer_bits: i32,
) -> Option<(i32, i32, i32, i32)> {
    let (multiplier, left_shift) =
        preprocess_softmax_scaling(beta, input_scale, input_integer_bits)?;
    // A shift of 0 would need `1 << 31`, which C's int cannot hold.
    if left_shift < 1 {
        return None;
    }
    let real_reverse = f64::from(1i32 << (31 - left_shift)) / f64::from(multiplier);
    let (divisor, reverse_left_shift) = quantize_multiplier_smaller_than_one_exp(real_reverse)?;
    Some((multiplier, left_shift, divisor, reverse_left_shift))
}

#[cfg(test)]
mod gemmlowp_tests {
    use super::*;

    /// Outputs of gemmlowp's own `fixedpoint.h` (see `testdata/gemmlowp_golden.cc`).
    const GOLDEN: &str = include_str!("testdata/gemmlowp_golden.txt");

    fn eval<R: FixedRaw>(name: &str, k: i32, x: R) -> R {
        match name {
            "exp_on_negative_values" => exp_on_negative_values(x, k),
            "logistic" => logistic(x, k),
            "tanh" => tanh(x, k),
            "one_over_one_plus_x_for_x_in_0_1" => one_over_one_plus_x_for_x_in_0_1(x),
            "one_minus_x_over_one_plus_x_for_x_in_0_1" => {
                one_minus_x_over_one_plus_x_for_x_in_0_1(x)
            }
            "exp_on_interval_between_negative_one_quarter_and_0_excl" => {
                exp_on_interval_between_negative_one_quarter_and_0_excl(x)
            }
            other => panic!("unknown function {other}"),
        }
    }

    #[test]
    fn matches_gemmlowp_bit_for_bit() {
        let mut checked = 0;
        for line in GOLDEN.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (name, ty) = (f[0], f[1]);
            let k: i32 = f[2].parse().unwrap();
            let x: i32 = f[3].parse().unwrap();
            let want: i32 = f[4].parse().unwrap();
            let got = match ty {
                "i32" => eval::<i32>(name, k, x),
                "i16" => i32::from(eval::<i16>(name, k, x as i16)),
                _ => unreachable!(),
            };
            assert_eq!(got, want, "{name}<{ty}, {k}>({x})");
            checked += 1;
        }
        assert!(checked > 2000);
    }

    fn q(raw: i32, k: i32) -> f64 {
        f64::from(raw) / f64::from(1u32 << (31 - k))
    }

    #[test]
    fn exp_logistic_tanh_track_real_math() {
        for i in -200..=200 {
            let x = f64::from(i) / 25.0; // [-8, 8]
            let raw = (x * f64::from(1 << 27)) as i32; // Q4.27
            if x <= 0.0 {
                let e = q(exp_on_negative_values(raw, 4), 0);
                assert!((e - libm::exp(x)).abs() < 1e-6, "exp({x}) = {e}");
            }
            let l = q(logistic(raw, 4), 0);
            assert!(
                (l - 1.0 / (1.0 + libm::exp(-x))).abs() < 1e-6,
                "logistic({x})"
            );
            let t = q(tanh(raw, 4), 0);
            assert!((t - libm::tanh(x)).abs() < 1e-6, "tanh({x}) = {t}");
        }
    }

    #[test]
    fn reciprocal_and_rescale() {
        // 1/3 from x = 3.0 in Q12.19: scale · 2^-num_bits_over_unit.
        let (scale, bits) = get_reciprocal(3 << 19, 12);
        let r = q(scale, 0) / f64::from(1 << bits);
        assert!((r - 1.0 / 3.0).abs() < 1e-8, "{r}");
        assert_eq!(rescale(1i32 << 26, 4, 0), 1 << 30); // 0.5
        assert_eq!(rescale(1i32 << 27, 4, 0), i32::MAX); // 1.0 saturates in Q0
        assert_eq!(rescale(-(1i32 << 27), 4, 0), i32::MIN);
        assert_eq!(rescale(3i32, 0, 1), 2); // rounding right shift
    }

    #[test]
    fn quantisation_helpers_match_tflm() {
        assert_eq!(
            quantize_multiplier_smaller_than_one_exp(0.5),
            Some((1 << 30, 0))
        );
        assert_eq!(quantize_multiplier_smaller_than_one_exp(1.0), None);
        assert_eq!(
            quantize_multiplier_greater_than_one(2.0),
            Some((1 << 30, 2))
        );
        assert_eq!(quantize_multiplier_greater_than_one(0.5), None);
        // Softmax with beta 1, input scale 1/16: 2^-4 · 2^26 = 2^22.
        assert_eq!(
            preprocess_softmax_scaling(1.0, 1.0 / 16.0, 5),
            Some((1 << 30, 23))
        );
        // Radius: 31 · 2^26 / 2^23 = 248.
        assert_eq!(calculate_input_radius(5, 23, 31), 248);
        // Capped multiplier.
        let (m, s) = preprocess_softmax_scaling(1e9, 1.0, 5).unwrap();
        assert_eq!((m, s), (i32::MAX, 31));
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
