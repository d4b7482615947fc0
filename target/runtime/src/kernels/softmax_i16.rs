//! SOFTMAX's int16 → int16 arithmetic, TFLM's `SoftmaxInt16`: two 513-entry
//! int16 tables built in prepare (TFLM's `gen_lut`: `exp` over [-10, 0] and
//! `1 / (1 + x)` over [0, 1], each entry biased so that linear
//! interpolation between entries is centred on the function), looked up
//! with 7 bits of interpolation. Differences from the row maximum are
//! scaled so that [-65535, 0] means [-10, 0]; the exps are summed in
//! Q16.15, normalised to a leading one, the reciprocal looked up, and each
//! output is `exp · reciprocal` shifted back to Q0.15 (0..=32767).

use super::float_math::expf;

/// Entries of each table: 512 steps and one more for the last slope.
pub(crate) const LUT_LEN: usize = 513;

/// TFLM's `gen_lut<float, int16_t, int16_t>` of `f` over
/// `[input_min, input_max]` into Q0.15 of [-1, 1]; all in `f32` as TFLM.
pub(crate) fn gen_lut(f: impl Fn(f32) -> f32, input_min: f32, input_max: f32, i: usize) -> i16 {
    const STEPS: usize = LUT_LEN - 1;
    let step = (input_max - input_min) / STEPS as f32;
    let half_step = step / 2.0;
    // (i16::MAX - i16::MIN + 1) / (1 - (-1)).
    let inv = 65536.0f32 / 2.0;
    let clamp = |v: f32| v.clamp(-32768.0, 32767.0) as i16;
    if i >= STEPS {
        return clamp(libm::roundf(f(input_max) * inv));
    }
    let at = input_min + i as f32 * step;
    let val = f(at);
    let val_mid = f(at + half_step);
    let val_next = f(input_min + (i + 1) as f32 * step);
    let sample = libm::roundf(val * inv);
    let mid_interp = libm::roundf((val_next * inv + libm::roundf(val * inv)) / 2.0);
    let mid = libm::roundf(val_mid * inv);
    let bias = libm::roundf((mid_interp - mid) / 2.0);
    clamp(sample - bias)
}

/// The exp table entry `i` (exp over [-10, 0]).
pub(crate) fn exp_entry(i: usize) -> i16 {
    gen_lut(expf, -10.0, 0.0, i)
}

/// The reciprocal table entry `i` (`1 / (1 + x)` over [0, 1]).
pub(crate) fn reciprocal_entry(i: usize) -> i16 {
    gen_lut(|x| 1.0 / (1.0 + x), 0.0, 1.0, i)
}

/// TFLM's `lut_lookup_with_interpolation` for int16 input: entry
/// `256 + (v >> 7)`, then 7 bits of the slope to the next entry.
#[inline(always)]
pub(crate) fn lookup(v: i16, lut: &[i16; LUT_LEN]) -> i16 {
    let index = (256 + (i32::from(v) >> 7)) as usize;
    let offset = i32::from(v & 0x7f);
    let base = lut[index];
    let slope = lut[index + 1].wrapping_sub(base);
    let delta = (i32::from(slope) * offset + 64) >> 7;
    (i32::from(base) + delta) as i16
}

/// The scaling and tables of one SOFTMAX.
pub(crate) struct Int16Softmax<'a> {
    pub(crate) multiplier: i32,
    pub(crate) shift: i32,
    pub(crate) exp: &'a [i16; LUT_LEN],
    pub(crate) reciprocal: &'a [i16; LUT_LEN],
}

impl Int16Softmax<'_> {
    /// One row (at most 65536 long, so the Q16.15 sum fits 32 bits).
    pub(crate) fn row(&self, input: &[i16], output: &mut [i16]) {
        use super::fixed_point::multiply_by_quantized_multiplier;
        let max = input.iter().copied().max().unwrap_or(i16::MIN);
        let mut sum = 0i32;
        for (o, &x) in output.iter_mut().zip(input) {
            let diff = i32::from(x) - i32::from(max);
            let scaled = multiply_by_quantized_multiplier(diff, self.multiplier, self.shift);
            let sym = scaled.wrapping_add(32767).clamp(-32768, 32767) as i16;
            *o = lookup(sym, self.exp);
            sum = sum.wrapping_add(i32::from(*o));
        }
        let headroom_plus_one = (sum as u32).leading_zeros() as i32;
        let shifted = ((i64::from(sum) << (headroom_plus_one - 1).max(0)) + (1 << 13)) >> 14;
        let sym = (shifted - ((1 << 15) + (1 << 16))).clamp(-32768, 32767) as i16;
        let reciprocal = i64::from(lookup(sym, self.reciprocal));
        let right_shift = (31 - headroom_plus_one).max(1);
        let round = 1i64 << (right_shift - 1);
        for o in output.iter_mut() {
            let v = (i64::from(*o) * reciprocal + round) >> right_shift;
            *o = (v as i32).clamp(0, 32767) as i16;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_end_where_the_functions_do() {
        // exp(0) = 1 → 32767 (clamped), exp(-10) ≈ 0; 1/(1+0) = 1, 1/2 → 16384.
        assert_eq!(exp_entry(LUT_LEN - 1), 32767);
        assert!(exp_entry(0).abs() <= 2);
        assert_eq!(reciprocal_entry(LUT_LEN - 1), 16384);
        assert_eq!(reciprocal_entry(0), 32767);
    }

    #[test]
    fn lookup_interpolates_between_entries() {
        let mut lut = [0i16; LUT_LEN];
        for (i, v) in lut.iter_mut().enumerate() {
            *v = (i as i16) * 8;
        }
        // v = 0 → entry 256 exactly; v = 64 → halfway to entry 257.
        assert_eq!(lookup(0, &lut), 256 * 8);
        assert_eq!(lookup(64, &lut), 256 * 8 + 4);
        assert_eq!(lookup(-128, &lut), 255 * 8);
    }
}
