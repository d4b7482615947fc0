//! LOG_SOFTMAX over the last dimension — int8 and float32, bit-exact with
//! TFLM's reference kernel.
//!
//! int8 is TFLM's `LogSoftmaxQuantized`: each difference from the row's
//! maximum is scaled into Q5.26, the exps (gemmlowp's
//! `exp_on_negative_values`) summed in Q12.19, their log taken in Q5.26
//! (`log_x_for_x_greater_than_or_equal_to_1`), and each output is the
//! scaled difference less that log, shifted to Q4.3 and offset by 127.
//! TFLM fixes the output quantisation at scale 16/256 and zero point 127;
//! hilt refuses any other. Differences at or below a threshold (the larger
//! of `diff_min - 1` and the log sum brought back to input steps) give -128.
//! float32 follows TFLM's loop: max, the sum of `exp(x - max)`, its `log`.

use bytemuck::{Pod, Zeroable};

use super::fixed_point::{
    calculate_input_radius, exp_on_negative_values, log_x_for_x_greater_than_or_equal_to_1,
    multiply_by_quantized_multiplier, preprocess_log_softmax_scaling_exp, rescale,
    rounding_divide_by_pot,
};
use super::float_math::expf;
use super::tensor::{Dims, map_rows, require_quant, same_type_and_size};
use super::{InvokeContext, KernelError, PrepareContext, QuantProblem, Registration};
use crate::schema::TensorType;

/// The LOG_SOFTMAX kernel.
pub const REGISTRATION: Registration = Registration {
    name: "LOG_SOFTMAX",
    prepare,
    invoke,
};

/// Integer bits of the scaled differences and of the log (`kInputIntegerBits`).
const INPUT_INTEGER_BITS: i32 = 5;
/// Integer bits of the sum of exps.
const ACCUMULATION_INTEGER_BITS: i32 = 12;
/// Integer bits of the output before its offset (`kOutputIntegerBits`).
const OUTPUT_INTEGER_BITS: i32 = 4;
/// The output quantisation TFLM requires.
const OUTPUT_SCALE: f32 = 16.0 / 256.0;
const OUTPUT_ZERO_POINT: i32 = 127;

/// TFLM's `LogSoftmaxOpData`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
struct LogSoftmaxData {
    dtype: i32,
    outer: u32,
    depth: u32,
    input_multiplier: i32,
    input_left_shift: i32,
    reverse_scaling_divisor: i32,
    reverse_scaling_left_shift: i32,
    diff_min: i32,
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let (input, output) = (ctx.input(0)?, ctx.output(0)?);
    same_type_and_size(&input, &output, &[TensorType::FLOAT32, TensorType::INT8])?;
    let dims = Dims::of(&input)?;
    if dims != Dims::of(&output)? || dims.rank() == 0 {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    let mut data = LogSoftmaxData {
        dtype: i32::from(output.dtype.0),
        outer: dims.outer() as u32,
        depth: dims.last() as u32,
        ..LogSoftmaxData::default()
    };
    if input.dtype == TensorType::INT8 {
        let (qi, qo) = (require_quant(&input)?, require_quant(&output)?);
        if qo.scale != OUTPUT_SCALE {
            return Err(KernelError::UnsupportedParameter {
                what: "LOG_SOFTMAX int8 output scale must be 16/256",
            });
        }
        if qo.zero_point != OUTPUT_ZERO_POINT {
            return Err(KernelError::BadQuantization {
                tensor: output.index,
                problem: QuantProblem::ZeroPointForKernel {
                    zero_point: qo.zero_point,
                    min: OUTPUT_ZERO_POINT,
                    max: OUTPUT_ZERO_POINT,
                },
            });
        }
        let (m, shift, divisor, reverse_shift) =
            preprocess_log_softmax_scaling_exp(1.0, f64::from(qi.scale), INPUT_INTEGER_BITS)
                .ok_or(KernelError::UnsupportedParameter {
                    what: "LOG_SOFTMAX input scale out of range",
                })?;
        data.input_multiplier = m;
        data.input_left_shift = shift;
        data.reverse_scaling_divisor = divisor;
        data.reverse_scaling_left_shift = reverse_shift;
        data.diff_min = -calculate_input_radius(INPUT_INTEGER_BITS, shift, 31);
    }
    ctx.store(&data)
}

/// One int8 row, TFLM's `LogSoftmaxQuantized` inner loops.
fn log_softmax_row(x: &[i8], out: &mut [i8], d: &LogSoftmaxData) {
    let max = x.iter().copied().fold(i8::MIN, i8::max);
    let scaled = |v: i8| {
        let diff = i32::from(v) - i32::from(max);
        multiply_by_quantized_multiplier(diff, d.input_multiplier, d.input_left_shift)
    };
    let mut sum_of_exps = 0i32;
    for &v in x {
        if i32::from(v) - i32::from(max) >= d.diff_min {
            let e = exp_on_negative_values(scaled(v), INPUT_INTEGER_BITS);
            sum_of_exps = sum_of_exps.wrapping_add(rescale(e, 0, ACCUMULATION_INTEGER_BITS));
        }
    }
    let log_sum = log_x_for_x_greater_than_or_equal_to_1(
        sum_of_exps,
        ACCUMULATION_INTEGER_BITS,
        INPUT_INTEGER_BITS,
    );
    let shifted_log_sum = log_sum.wrapping_add(i32::MIN);
    let adjusted_diff_min = (d.diff_min - 1).max(multiply_by_quantized_multiplier(
        shifted_log_sum,
        d.reverse_scaling_divisor,
        d.reverse_scaling_left_shift,
    ));
    for (o, &v) in out.iter_mut().zip(x) {
        *o = if i32::from(v) - i32::from(max) > adjusted_diff_min {
            let q = rounding_divide_by_pot(
                scaled(v).wrapping_sub(log_sum),
                31 - INPUT_INTEGER_BITS - OUTPUT_INTEGER_BITS,
            ) + i32::from(i8::MAX);
            q.clamp(-128, 127) as i8
        } else {
            i8::MIN
        };
    }
}

/// One float32 row in TFLM's order.
fn log_softmax_row_f32(x: &[f32], out: &mut [f32]) {
    let max = x.iter().fold(f32::MIN, |m, &v| if m < v { v } else { m });
    let sum: f32 = x.iter().map(|&v| expf(v - max)).sum();
    let log_sum = libm::logf(sum);
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v - max - log_sum;
    }
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &LogSoftmaxData = ctx.op_data()?;
    let (input, output) = (ctx.input(0)?, ctx.output(0)?);
    let depth = data.depth as usize;
    match TensorType(data.dtype as i8) {
        TensorType::FLOAT32 => map_rows(&input, output, depth, log_softmax_row_f32),
        TensorType::INT8 => map_rows(&input, output, depth, |row, o| {
            log_softmax_row(row, o, data)
        }),
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_of_powers_of_two_is_a_multiple_of_ln2() {
        // 2.0 in Q12.19 → ln 2 in Q5.26.
        let two = 2 << 19;
        let got = log_x_for_x_greater_than_or_equal_to_1(two, 12, 5);
        let want = (core::f64::consts::LN_2 * f64::from(1 << 26)) as i32;
        assert!((got - want).abs() < 1 << 8, "{got} vs {want}");
        let one = 1 << 19;
        assert!(log_x_for_x_greater_than_or_equal_to_1(one, 12, 5).abs() < 1 << 8);
    }

    #[test]
    fn equal_inputs_share_the_log_of_the_row_length() {
        let (m, shift, divisor, reverse) =
            preprocess_log_softmax_scaling_exp(1.0, 0.1, INPUT_INTEGER_BITS).unwrap();
        let d = LogSoftmaxData {
            input_multiplier: m,
            input_left_shift: shift,
            reverse_scaling_divisor: divisor,
            reverse_scaling_left_shift: reverse,
            diff_min: -calculate_input_radius(INPUT_INTEGER_BITS, shift, 31),
            ..LogSoftmaxData::default()
        };
        let mut out = [0i8; 4];
        log_softmax_row(&[5; 4], &mut out, &d);
        // ln(1/4) = -1.386 → -1.386 / (1/16) + 127 ≈ 105.
        assert_eq!(out, [105; 4]);
    }
}
