//! TFLM's LSTM algorithm step for step, with its four scratch buffers passed
//! in: the yardstick the kernels are tested against, not a kernel.
//!
//! Each function below is one of TFLM's `lstm_internal` stages working on
//! whole vectors (`FullyConnected`, `AddElementWise`, `Sigmoid`, `Tanh`,
//! `Mul`, `Clipping`), called in `LstmStep`'s order with its buffer reuse:
//! forget gate → buffer 0, input gate → buffer 1, cell gate → buffer 2,
//! recurrent FC → buffer 3; then the cell update (buffer 1 reused), the
//! output gate (buffer 1), tanh of the cell (buffer 0), the hidden state,
//! and a copy of the hidden state to the output.

use super::super::KernelError;
use super::super::fixed_point::{
    int16_lut_input_scale, logistic_int16, multiply_by_quantized_multiplier, tanh_int16,
};
use super::float::{clamp_to_finite, clip_f32, sigmoid_f32, tanhf};
use super::params::{LstmQuantParams, LstmShape};
use super::{GATE_CELL, GATE_FORGET, GATE_INPUT, GATE_OUTPUT, LstmWeights};

/// The two activations `CalculateLstmGate` switches between.
#[derive(Clone, Copy)]
enum Activation {
    Sigmoid,
    Tanh,
}

/// `reference_integer_ops::FullyConnected`, int8 in, int16 out.
#[allow(clippy::too_many_arguments)]
fn fully_connected_i8(
    input: &[i8],
    input_offset: i32,
    weights: &[i8],
    weights_offset: i32,
    bias: Option<&[i32]>,
    multiplier: i32,
    shift: i32,
    batches: usize,
    output_depth: usize,
    output: &mut [i16],
) {
    let accum_depth = weights.len() / output_depth;
    for b in 0..batches {
        for out_c in 0..output_depth {
            let mut acc = 0i32;
            for d in 0..accum_depth {
                let input_val = i32::from(input[b * accum_depth + d]);
                let filter_val = i32::from(weights[out_c * accum_depth + d]);
                acc = acc.wrapping_add(
                    filter_val
                        .wrapping_add(weights_offset)
                        .wrapping_mul(input_val.wrapping_add(input_offset)),
                );
            }
            if let Some(bias) = bias {
                acc = acc.wrapping_add(bias[out_c]);
            }
            // Output offset 0, activation range int16.
            let acc = multiply_by_quantized_multiplier(acc, multiplier, shift);
            output[out_c + output_depth * b] = acc.clamp(-32768, 32767) as i16;
        }
    }
}

/// `AddElementWise` with the output aliasing the first input, as TFLM
/// calls it (elementwise, so in place is the same computation).
fn add_elementwise_i16(a_and_out: &mut [i16], b: &[i16]) {
    for i in 0..a_and_out.len() {
        let sum = i32::from(a_and_out[i]) + i32::from(b[i]);
        a_and_out[i] = sum.clamp(-32768, 32767) as i16;
    }
}

/// `reference_integer_ops::MulElementwise` of one element pair.
fn mul_element(
    a: i16,
    b: i16,
    multiplier: i32,
    shift: i32,
    offset: i32,
    (min, max): (i32, i32),
) -> i32 {
    let product = i32::from(a) * i32::from(b);
    offset
        .wrapping_add(multiply_by_quantized_multiplier(product, multiplier, shift))
        .clamp(min, max)
}

/// `lstm_internal::Tanh` on int16: the cell state scale power decides the
/// LUT input scaling.
fn tanh_i16(cell_state_scale_power: i32, data: &[i16], out: &mut [i16]) {
    let mut left_shift = (15 + cell_state_scale_power) - 3;
    let mut multiplier = 0;
    if left_shift < 0 {
        left_shift = -left_shift;
        multiplier = 3;
    }
    let (m, s) = int16_lut_input_scale(multiplier, left_shift);
    for (o, &x) in out.iter_mut().zip(data) {
        *o = tanh_int16(x, m, s);
    }
}

fn sigmoid_i16(data: &mut [i16]) {
    let (m, s) = int16_lut_input_scale(0, 0);
    for x in data.iter_mut() {
        *x = logistic_int16(*x, m, s);
    }
}

/// The cell state scale power TFLM stores (`CheckedLog2`), recovered from
/// the kernel's tanh constants so the reference needs nothing else.
fn cell_state_scale_power(quant: &LstmQuantParams) -> i32 {
    // multiplier 3<<k, shift 0  ⇔  15 + p − 3 = k ≥ 0;
    // multiplier 3, shift k > 0  ⇔  15 + p − 3 = −k.
    if quant.cell_tanh_shift > 0 {
        -quant.cell_tanh_shift - 12
    } else {
        (quant.cell_tanh_multiplier / 3).trailing_zeros() as i32 - 12
    }
}

/// `CalculateLstmGate`, integer.
#[allow(clippy::too_many_arguments)]
fn gate_integer(
    quant: &LstmQuantParams,
    gate: usize,
    weights: &LstmWeights<'_, i8, i32>,
    input: &[i8],
    hidden: &[i8],
    rows: usize,
    n_state: usize,
    activation: Activation,
    gate_output: &mut [i16],
    fc_output_buffer: &mut [i16],
) {
    let q = &quant.gates[gate];
    fully_connected_i8(
        input,
        quant.input_offset,
        weights.input[gate],
        q.input_weights_offset,
        Some(weights.bias[gate]),
        q.input_multiplier,
        q.input_shift,
        rows,
        n_state,
        gate_output,
    );
    fully_connected_i8(
        hidden,
        quant.hidden_offset,
        weights.recurrent[gate],
        q.recurrent_weights_offset,
        None,
        q.recurrent_multiplier,
        q.recurrent_shift,
        rows,
        n_state,
        fc_output_buffer,
    );
    add_elementwise_i16(gate_output, fc_output_buffer);
    match activation {
        Activation::Sigmoid => sigmoid_i16(gate_output),
        Activation::Tanh => {
            // "Set the scale power to -12 to avoid shift."
            let (m, s) = int16_lut_input_scale(0, 0);
            for x in gate_output.iter_mut() {
                *x = tanh_int16(*x, m, s);
            }
        }
    }
}

/// TFLM's integer `EvalLstm`: `buffers` are its four int16 scratch buffers,
/// each at least `batch · state_size` long.
#[allow(clippy::too_many_arguments)]
pub fn eval_integer(
    shape: &LstmShape,
    quant: &LstmQuantParams,
    weights: &LstmWeights<'_, i8, i32>,
    input: &[i8],
    hidden: &mut [i8],
    cell: &mut [i16],
    output: &mut [i8],
    buffers: [&mut [i16]; 4],
) -> Result<(), KernelError> {
    let n_input = shape.input_size as usize;
    let n_state = shape.state_size as usize;
    let rows = shape.rows_per_step();
    let len = rows * n_state;
    if buffers.iter().any(|b| b.len() < len) {
        return Err(KernelError::Internal);
    }
    let [b0, b1, b2, b3] = buffers;
    let (b0, b1, b2, b3) = (
        &mut b0[..len],
        &mut b1[..len],
        &mut b2[..len],
        &mut b3[..len],
    );
    let power = cell_state_scale_power(quant);
    let int16 = (-32768, 32767);
    for step in shape.steps() {
        let x = &input[step.input..step.input + rows * n_input];
        // Step 1: forget, input and cell gates.
        {
            let h = &hidden[step.state..step.state + len];
            gate_integer(
                quant,
                GATE_FORGET,
                weights,
                x,
                h,
                rows,
                n_state,
                Activation::Sigmoid,
                b0,
                b3,
            );
            gate_integer(
                quant,
                GATE_INPUT,
                weights,
                x,
                h,
                rows,
                n_state,
                Activation::Sigmoid,
                b1,
                b3,
            );
            gate_integer(
                quant,
                GATE_CELL,
                weights,
                x,
                h,
                rows,
                n_state,
                Activation::Tanh,
                b2,
                b3,
            );
        }
        // Step 2: the cell state.
        let c = &mut cell[step.state..step.state + len];
        for (c, &f) in c.iter_mut().zip(b0.iter()) {
            let (m, s) = (quant.forget_cell_multiplier, quant.forget_cell_shift);
            *c = mul_element(f, *c, m, s, 0, int16) as i16;
        }
        for (i, &g) in b1.iter_mut().zip(b2.iter()) {
            let (m, s) = (quant.input_cell_multiplier, quant.input_cell_shift);
            *i = mul_element(*i, g, m, s, 0, int16) as i16;
        }
        add_elementwise_i16(c, b1);
        if quant.clip_cell != 0 {
            let clip = quant.cell_clip as i16;
            for v in c.iter_mut() {
                *v = (*v).min(clip).max(-clip);
            }
        }
        // Step 3: the output gate and the hidden state.
        {
            let h = &hidden[step.state..step.state + len];
            gate_integer(
                quant,
                GATE_OUTPUT,
                weights,
                x,
                h,
                rows,
                n_state,
                Activation::Sigmoid,
                b1,
                b3,
            );
        }
        tanh_i16(power, c, b0);
        let h = &mut hidden[step.state..step.state + len];
        for ((h, &t), &o) in h.iter_mut().zip(b0.iter()).zip(b1.iter()) {
            let (m, s) = (quant.hidden_multiplier, quant.hidden_shift);
            *h = mul_element(t, o, m, s, quant.hidden_zero_point, (-128, 127)) as i8;
        }
        // Step 4: copy the hidden state to the output.
        output[step.output..step.output + len].copy_from_slice(h);
    }
    Ok(())
}

/// `reference_ops::FullyConnected`, float.
fn fully_connected_f32(
    input: &[f32],
    weights: &[f32],
    bias: Option<&[f32]>,
    batches: usize,
    output_depth: usize,
    output: &mut [f32],
) {
    let accum_depth = weights.len() / output_depth;
    for b in 0..batches {
        for out_c in 0..output_depth {
            let mut total = 0.0f32;
            for d in 0..accum_depth {
                total += input[b * accum_depth + d] * weights[out_c * accum_depth + d];
            }
            let bias_value = bias.map_or(0.0, |bias| bias[out_c]);
            output[out_c + output_depth * b] = clamp_to_finite(total + bias_value);
        }
    }
}

/// `CalculateLstmGate`, float.
#[allow(clippy::too_many_arguments)]
fn gate_float(
    gate: usize,
    weights: &LstmWeights<'_, f32, f32>,
    input: &[f32],
    hidden: &[f32],
    rows: usize,
    n_state: usize,
    activation: Activation,
    gate_output: &mut [f32],
    fc_output_buffer: &mut [f32],
) {
    fully_connected_f32(
        input,
        weights.input[gate],
        Some(weights.bias[gate]),
        rows,
        n_state,
        gate_output,
    );
    fully_connected_f32(
        hidden,
        weights.recurrent[gate],
        None,
        rows,
        n_state,
        fc_output_buffer,
    );
    for (g, &r) in gate_output.iter_mut().zip(fc_output_buffer.iter()) {
        *g += r;
    }
    for g in gate_output.iter_mut() {
        *g = match activation {
            Activation::Sigmoid => sigmoid_f32(*g),
            Activation::Tanh => tanhf(*g),
        };
    }
}

/// TFLM's float `EvalLstm`: `buffers` are its four float scratch buffers,
/// each at least `batch · state_size` long.
#[allow(clippy::too_many_arguments)]
pub fn eval_float(
    shape: &LstmShape,
    cell_clip: f32,
    weights: &LstmWeights<'_, f32, f32>,
    input: &[f32],
    hidden: &mut [f32],
    cell: &mut [f32],
    output: &mut [f32],
    buffers: [&mut [f32]; 4],
) -> Result<(), KernelError> {
    let n_input = shape.input_size as usize;
    let n_state = shape.state_size as usize;
    let rows = shape.rows_per_step();
    let len = rows * n_state;
    if buffers.iter().any(|b| b.len() < len) {
        return Err(KernelError::Internal);
    }
    let [b0, b1, b2, b3] = buffers;
    let (b0, b1, b2, b3) = (
        &mut b0[..len],
        &mut b1[..len],
        &mut b2[..len],
        &mut b3[..len],
    );
    for step in shape.steps() {
        let x = &input[step.input..step.input + rows * n_input];
        {
            let h = &hidden[step.state..step.state + len];
            let sig = Activation::Sigmoid;
            gate_float(GATE_FORGET, weights, x, h, rows, n_state, sig, b0, b3);
            gate_float(GATE_INPUT, weights, x, h, rows, n_state, sig, b1, b3);
            gate_float(
                GATE_CELL,
                weights,
                x,
                h,
                rows,
                n_state,
                Activation::Tanh,
                b2,
                b3,
            );
        }
        let c = &mut cell[step.state..step.state + len];
        for (c, &f) in c.iter_mut().zip(b0.iter()) {
            *c = clamp_to_finite(f * *c);
        }
        for (i, &g) in b1.iter_mut().zip(b2.iter()) {
            *i = clamp_to_finite(*i * g);
        }
        for (c, &u) in c.iter_mut().zip(b1.iter()) {
            *c += u;
        }
        if cell_clip > 0.0 {
            for c in c.iter_mut() {
                *c = clip_f32(*c, cell_clip);
            }
        }
        {
            let h = &hidden[step.state..step.state + len];
            let sig = Activation::Sigmoid;
            gate_float(GATE_OUTPUT, weights, x, h, rows, n_state, sig, b1, b3);
        }
        for (t, &c) in b0.iter_mut().zip(c.iter()) {
            *t = tanhf(c);
        }
        let h = &mut hidden[step.state..step.state + len];
        for ((h, &t), &o) in h.iter_mut().zip(b0.iter()).zip(b1.iter()) {
            *h = clamp_to_finite(t * o);
        }
        output[step.output..step.output + len].copy_from_slice(h);
    }
    Ok(())
}
