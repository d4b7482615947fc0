//! TFLM's SVDF algorithm step for step, with its scratch buffers passed in:
//! the yardstick `svdf`'s kernels are tested against (and benchmarked
//! beside), not a kernel; nothing at invoke calls it.

use super::{
    KernelError, StateElement, SvdfQuantParams, SvdfShape, activation_float,
    multiply_by_quantized_multiplier,
};
use crate::schema::ActivationFunctionType;

/// `EvalIntegerSvdfReference`: `scratch` holds `batch · filters` words,
/// `scratch_output` `batch · units`.
#[allow(clippy::too_many_arguments)]
pub fn eval_integer<T: StateElement>(
    shape: &SvdfShape,
    quant: &SvdfQuantParams,
    input: &[i8],
    weights_feature: &[i8],
    weights_time: &[T],
    bias: Option<&[i32]>,
    state: &mut [T],
    output: &mut [i8],
    scratch: &mut [i32],
    scratch_output: &mut [i32],
) -> Result<(), KernelError> {
    let n_batch = shape.batch as usize;
    let n_input = shape.input_size as usize;
    let n_filter = shape.filters as usize;
    let n_rank = shape.rank as usize;
    let n_unit = shape.units();
    let n_memory = shape.memory as usize;
    if scratch.len() < n_batch * n_filter || scratch_output.len() < n_batch * n_unit {
        return Err(KernelError::Internal);
    }

    // Left shift the whole state by one element.
    for i in 1..n_batch * n_filter * n_memory {
        state[i - 1] = state[i];
    }

    // Feature matmul into each filter's newest column.
    for b in 0..n_batch {
        for r in 0..n_filter {
            let mut dot_prod = 0i32;
            for c in 0..n_input {
                let w = i32::from(weights_feature[r * n_input + c]);
                let x = i32::from(input[b * n_input + c]) - quant.input_zero_point;
                dot_prod = dot_prod.wrapping_add(w.wrapping_mul(x));
            }
            dot_prod = multiply_by_quantized_multiplier(
                dot_prod,
                quant.scale_1_multiplier,
                quant.scale_1_shift,
            );
            dot_prod = quant.state_zero_point.wrapping_add(dot_prod);
            dot_prod = dot_prod.clamp(T::MIN, T::MAX);
            state[b * n_filter * n_memory + r * n_memory + n_memory - 1] = T::saturate(dot_prod);
        }
    }

    // Time weights.
    for b in 0..n_batch {
        for i in 0..n_filter {
            let mut acc = 0i32;
            for j in 0..n_memory {
                let w: i32 = weights_time[i * n_memory + j].into();
                let s: i32 = state[b * n_memory * n_filter + i * n_memory + j].into();
                acc = acc.wrapping_add(w.wrapping_mul(s.wrapping_sub(quant.state_zero_point)));
            }
            scratch[b * n_filter + i] = acc;
        }
    }

    // Bias.
    for b in 0..n_batch {
        for j in 0..n_unit {
            scratch_output[b * n_unit + j] = bias.map_or(0, |bias| bias[j]);
        }
    }

    // Reduce over rank.
    for b in 0..n_batch {
        for i in 0..n_unit {
            for j in 0..n_rank {
                let v = scratch[b * n_filter + i * n_rank + j];
                scratch_output[b * n_unit + i] = scratch_output[b * n_unit + i].wrapping_add(v);
            }
        }
    }

    // Rescale.
    for i in 0..n_batch * n_unit {
        let x2 = multiply_by_quantized_multiplier(
            scratch_output[i],
            quant.scale_2_multiplier,
            quant.scale_2_shift,
        );
        let x3 = x2.wrapping_add(quant.output_zero_point);
        output[i] = x3.clamp(-128, 127) as i8;
    }
    Ok(())
}

/// `EvalFloatSvdfReference`: `scratch` holds `batch · filters` floats.
#[allow(clippy::too_many_arguments)]
pub fn eval_float(
    shape: &SvdfShape,
    activation: ActivationFunctionType,
    input: &[f32],
    weights_feature: &[f32],
    weights_time: &[f32],
    bias: Option<&[f32]>,
    state: &mut [f32],
    output: &mut [f32],
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let batch_size = shape.batch as usize;
    let input_size = shape.input_size as usize;
    let num_filters = shape.filters as usize;
    let rank = shape.rank as usize;
    let num_units = shape.units();
    let memory_size = shape.memory as usize;
    if scratch.len() < batch_size * num_filters {
        return Err(KernelError::Internal);
    }

    for i in 1..batch_size * num_filters * memory_size {
        state[i - 1] = state[i];
    }

    for b in 0..batch_size {
        for j in 0..num_filters {
            let mut dot_prod = 0.0f32;
            for k in 0..input_size {
                dot_prod += weights_feature[j * input_size + k] * input[b * input_size + k];
            }
            state[b * num_filters * memory_size + j * memory_size + memory_size - 1] = dot_prod;
        }
    }

    for b in 0..batch_size {
        for i in 0..num_filters {
            let mut acc = 0.0f32;
            for j in 0..memory_size {
                acc += weights_time[i * memory_size + j]
                    * state[b * memory_size * num_filters + i * memory_size + j];
            }
            scratch[b * num_filters + i] = acc;
        }
    }

    for b in 0..batch_size {
        for j in 0..num_units {
            output[b * num_units + j] = bias.map_or(0.0, |bias| bias[j]);
        }
    }

    for b in 0..batch_size {
        for i in 0..num_units {
            for j in 0..rank {
                output[b * num_units + i] += scratch[b * num_filters + i * rank + j];
            }
        }
    }

    for v in output[..batch_size * num_units].iter_mut() {
        *v = activation_float(activation, *v);
    }
    Ok(())
}
