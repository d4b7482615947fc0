//! gemmlowp fixed-point math (`fixedpoint.h` as TFLM ships it): exp, tanh,
//! logistic and reciprocal on Qm.n values, for 32-bit and 16-bit raw types.
//!
//! A value is a raw integer plus a number of integer bits `m` (excluding the
//! sign bit): raw / 2^(BITS-1-m). gemmlowp encodes `m` in the type; here it is
//! a parameter. Products of Qa and Qb values are Q(a+b) values
//! ([`FixedRaw::mul`]); [`rescale`] moves a value to another format.
//!
//! TFLM's own routines built from these steps are here too: `GetReciprocal`,
//! `CountLeadingSignBits` and `log_x_for_x_greater_than_or_equal_to_1`.

use super::multiplier::{rounding_divide_by_pot, saturating_rounding_doubling_high_mul};

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Outputs of gemmlowp's own `fixedpoint.h` (see `testdata/gemmlowp_golden.cc`).
    const GOLDEN: &str = include_str!("../testdata/gemmlowp_golden.txt");

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
}
