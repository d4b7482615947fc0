//! The input scalings SOFTMAX and LOG_SOFTMAX work out at prepare (TFLM's
//! `PreprocessSoftmaxScaling` family): a real `beta · input_scale` as a
//! multiplier and shift into the fixed-point format the exponentials take,
//! and the radius beyond which an input difference saturates.

use super::multiplier::{
    quantize_multiplier_greater_than_one, quantize_multiplier_smaller_than_one_exp,
};

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
mod tests {
    use super::*;

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
