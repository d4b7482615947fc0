//! The clamp a fused activation puts on an operator's output, on the
//! quantised scale or in float (TFLM's `CalculateActivationRange*`).

use super::multiplier::round_half_away;

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
