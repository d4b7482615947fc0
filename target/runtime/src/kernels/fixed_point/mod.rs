//! Integer arithmetic exactly as TFLM's reference kernels do it (gemmlowp's
//! fixed-point rules, TFLM's "double rounding" default). Every quantised
//! kernel goes through these, so bit-exactness lives in one place.
//!
//! One file per family, all re-exported here: `multiplier` (real scales as
//! Q31 multipliers and shifts, and multiplying by them), `activation_range`
//! (a fused activation's clamp), `gemmlowp` (exp, tanh, logistic, reciprocal
//! and log on Qm.n values), `softmax_scaling` (the input scalings SOFTMAX
//! and LOG_SOFTMAX compute at prepare) and `int16_lut` (int16 sigmoid and
//! tanh by table lookup).

mod activation_range;
mod gemmlowp;
mod int16_lut;
mod multiplier;
mod softmax_scaling;

pub use activation_range::{activation_range_float, activation_range_quantized};
pub use gemmlowp::{
    FixedRaw, count_leading_sign_bits, exp_on_interval_between_negative_one_quarter_and_0_excl,
    exp_on_negative_values, get_reciprocal, log_x_for_x_greater_than_or_equal_to_1, logistic,
    logistic_on_positive_values, neg_tanh_on_negative_values, one,
    one_minus_x_over_one_plus_x_for_x_in_0_1, one_over_one_plus_x_for_x_in_0_1, rescale,
    saturating_rounding_multiply_by_pot, tanh,
};
pub use int16_lut::{SIGMOID_TABLE_Q16, int16_lut_input_scale, logistic_int16, tanh_int16};
pub(crate) use multiplier::frexp;
pub use multiplier::{
    multiply_by_quantized_multiplier, multiply_by_quantized_multiplier_greater_than_one,
    multiply_by_quantized_multiplier_i64, multiply_by_quantized_multiplier_smaller_than_one,
    quantize_multiplier, quantize_multiplier_greater_than_one,
    quantize_multiplier_smaller_than_one_exp, quantize_scale_ratio, round_half_away,
    rounding_divide_by_pot, saturating_rounding_doubling_high_mul,
};
pub use softmax_scaling::{
    calculate_input_radius, preprocess_log_softmax_scaling_exp, preprocess_softmax_scaling,
};
