//! Float helpers for kernels: a branch-free `expf` and C's `roundf` followed
//! by the reference platform's float-to-int conversion.
//!
//! `expf` reduces `x = k·ln2 + r` (|r| ≤ ln2/2, Cody–Waite with a split ln2)
//! and evaluates a degree-7 polynomial for `exp(r)`: single precision only,
//! no division, no table and no branch, so loops over it vectorise on hosts
//! and it stays cheap on FPUs without double precision (Cortex-M4F/M33).
//! Its error is at most 2 ulp against the exact value (tested below), well
//! inside the conformance tolerance for float softmax and logistic.

/// `e^x`: ±0 → 1, large → +∞, very negative → 0 (subnormal results
/// included), NaN → NaN.
#[inline(always)]
pub fn expf(x: f32) -> f32 {
    const LOG2E: f32 = core::f32::consts::LOG2_E;
    // ln2 split so that k·LN2_HI is exact for |k| < 2^9.
    const LN2_HI: f32 = f32::from_bits(0x3f31_7200); // 0.693145751953125
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Round to nearest by adding and removing 1.5·2^23.
    const SHIFTER: f32 = 12_582_912.0;
    // Outside this range the result is +∞ or 0 anyway; clamping keeps k
    // within [-150, 129] so both scale factors below stay normal.
    let x = x.clamp(-104.0, 89.0);
    let shifted = x * LOG2E + SHIFTER;
    let kf = shifted - SHIFTER;
    // k sits in the low mantissa bits of `shifted` (no float→int
    // conversion, whose saturation checks would keep the loop scalar).
    let k = (shifted.to_bits() as i32).wrapping_sub(SHIFTER.to_bits() as i32);
    let r = (x - kf * LN2_HI) - kf * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0
                        + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    // 2^k as two normal powers of two, so one rounding happens even when
    // the result is subnormal.
    let k1 = k >> 1;
    p * pow2(k1) * pow2(k.wrapping_sub(k1))
}

/// `2^k` for `k` in [-126, 127] (anything for NaN inputs, whose result is
/// NaN regardless).
#[inline(always)]
fn pow2(k: i32) -> f32 {
    f32::from_bits((k.wrapping_add(127) as u32) << 23)
}

/// C's `static_cast<int32_t>(roundf(x))` as the reference TFLM (x86-64)
/// computes it: round half away from zero, and values outside the `i32`
/// range (and NaN) become `i32::MIN` — the "integer indefinite" of
/// `cvttss2si`.
#[inline(always)]
pub fn round_to_i32_like_x86(x: f32) -> i32 {
    // Truncate, then step away from zero when the dropped part is ≥ 1/2.
    // Within range both conversions are exact: below 2^23 `t` fits a
    // float's mantissa, above it `x` is already an integer. Selects, not
    // branches, so loops over it vectorise.
    let in_range = (-2_147_483_648.0..2_147_483_648.0).contains(&x);
    let t = x as i32;
    let frac = x - t as f32;
    let rounded = t
        .wrapping_add(i32::from(frac >= 0.5))
        .wrapping_sub(i32::from(frac <= -0.5));
    if in_range { rounded } else { i32::MIN }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f32, b: f64) -> f64 {
        let b32 = b as f32;
        let ulp = f64::from(f32::from_bits(b32.to_bits() + 1)) - f64::from(b32);
        ((f64::from(a) - b) / ulp).abs()
    }

    #[test]
    fn expf_within_two_ulps() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x < 88.7 {
            let got = expf(x);
            let want = libm::exp(f64::from(x));
            let e = ulps(got, want);
            assert!(e <= 2.0, "expf({x}) = {got}, exact {want}, {e} ulps");
            worst = worst.max(e);
            x += 0.000_731;
        }
        assert!(worst > 0.0);
        // Edges.
        assert_eq!(expf(0.0), 1.0);
        assert_eq!(expf(-0.0), 1.0);
        assert_eq!(expf(89.0), f32::INFINITY);
        assert_eq!(expf(f32::INFINITY), f32::INFINITY);
        assert_eq!(expf(-200.0), 0.0);
        assert_eq!(expf(f32::NEG_INFINITY), 0.0);
        assert!(expf(f32::NAN).is_nan());
        // Subnormal results.
        let tiny = expf(-100.0);
        assert!(tiny > 0.0 && tiny < f32::MIN_POSITIVE);
        assert!((f64::from(tiny) - libm::exp(-100.0)).abs() < 1e-45);
        // The largest finite result.
        assert!(expf(88.72).is_finite() && expf(88.73).is_infinite());
    }

    #[test]
    fn rounding_matches_roundf_and_x86_conversion() {
        for &x in &[
            0.0f32,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            -2.5,
            0.499_999_97,
            -0.499_999_97,
            1e9,
            -1e9,
            8_388_607.5,
            -8_388_607.5,
            16_777_217.0,
            2_147_483_520.0,
            -2_147_483_648.0,
        ] {
            assert_eq!(round_to_i32_like_x86(x), libm::roundf(x) as i32, "{x}");
        }
        assert_eq!(round_to_i32_like_x86(2_147_483_648.0), i32::MIN);
        assert_eq!(round_to_i32_like_x86(3e9), i32::MIN);
        assert_eq!(round_to_i32_like_x86(-3e9), i32::MIN);
        assert_eq!(round_to_i32_like_x86(f32::NAN), i32::MIN);
        let mut x = -300.0f32;
        while x < 300.0 {
            assert_eq!(round_to_i32_like_x86(x), libm::roundf(x) as i32, "{x}");
            x += 0.012_5;
        }
    }
}
