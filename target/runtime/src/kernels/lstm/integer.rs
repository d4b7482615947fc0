//! The integer LSTM: int8 input, hidden state and output, int16 cell state,
//! int8 weights, int32 biases. Bit-exact with TFLM's
//! `EvalLstm<int8_t, int8_t, int16_t, int32_t>`, one cell at a time.

use super::super::KernelError;
use super::super::fixed_point::{logistic_int16, multiply_by_quantized_multiplier, tanh_int16};
use super::params::{GateQuant, LstmQuantParams, LstmShape};
use super::{GATE_CELL, GATE_FORGET, GATE_INPUT, GATE_OUTPUT, LstmWeights};

/// `Σ (w + w_offset)·(x + x_offset)`, wrapping as TFLM's int32 accumulator
/// does on its targets.
#[inline(always)]
fn dot(weights: &[i8], x: &[i8], weights_offset: i32, x_offset: i32) -> i32 {
    if weights_offset == 0 {
        // Σ w·(x + xo) = Σ w·x + xo·Σ w exactly modulo 2³²; the i8·i8
        // products fit in 16 bits, which multiply-accumulate units eat.
        let mut dot = 0i32;
        let mut weight_sum = 0i32;
        for (&w, &v) in weights.iter().zip(x) {
            dot = dot.wrapping_add(i32::from(i16::from(w) * i16::from(v)));
            weight_sum = weight_sum.wrapping_add(i32::from(w));
        }
        dot.wrapping_add(weight_sum.wrapping_mul(x_offset))
    } else {
        weights.iter().zip(x).fold(0i32, |acc, (&w, &v)| {
            let w = i32::from(w).wrapping_add(weights_offset);
            let v = i32::from(v).wrapping_add(x_offset);
            acc.wrapping_add(w.wrapping_mul(v))
        })
    }
}

#[inline(always)]
fn saturate_i16(x: i32) -> i32 {
    x.clamp(i32::from(i16::MIN), i32::from(i16::MAX))
}

/// `a · b` rescaled, offset and clamped: TFLM's `MulElementwise`.
#[inline(always)]
fn mul(a: i16, b: i16, multiplier: i32, shift: i32, offset: i32, min: i32, max: i32) -> i32 {
    let product = i32::from(a) * i32::from(b);
    offset
        .wrapping_add(multiply_by_quantized_multiplier(product, multiplier, shift))
        .clamp(min, max)
}

/// What one cell needs to compute one gate: its weight rows and constants.
struct GateRow<'a> {
    input_weights: &'a [i8],
    recurrent_weights: &'a [i8],
    bias: i32,
    quant: &'a GateQuant,
}

/// A gate's pre-activation in Q3.12: two FCs into int16, saturated, added
/// with saturation (TFLM's `CalculateLstmGate` up to the activation).
#[inline(always)]
fn pre_activation(gate: &GateRow<'_>, x: &[i8], x_offset: i32, h: &[i8], h_offset: i32) -> i16 {
    let q = gate.quant;
    let from_input =
        dot(gate.input_weights, x, q.input_weights_offset, x_offset).wrapping_add(gate.bias);
    let from_input = saturate_i16(multiply_by_quantized_multiplier(
        from_input,
        q.input_multiplier,
        q.input_shift,
    ));
    let from_hidden = dot(
        gate.recurrent_weights,
        h,
        q.recurrent_weights_offset,
        h_offset,
    );
    let from_hidden = saturate_i16(multiply_by_quantized_multiplier(
        from_hidden,
        q.recurrent_multiplier,
        q.recurrent_shift,
    ));
    saturate_i16(from_input + from_hidden) as i16
}

/// One integer LSTM invoke over every time step; `hidden` and `cell` are
/// updated in place.
///
/// TFLM computes each gate for the whole state vector into one of four
/// scratch buffers, then the cell update, then the hidden state. Every
/// operation after the two FCs is elementwise, so here each cell runs all
/// four gates and its own state update at once; the new hidden values go
/// straight to this step's output slice (TFLM copies them there anyway)
/// and become the hidden state once every cell has read the old one. No
/// scratch memory.
#[allow(clippy::too_many_arguments)]
pub fn eval_integer(
    shape: &LstmShape,
    quant: &LstmQuantParams,
    weights: &LstmWeights<'_, i8, i32>,
    input: &[i8],
    hidden: &mut [i8],
    cell: &mut [i16],
    output: &mut [i8],
) -> Result<(), KernelError> {
    if !shape.fits(
        input.len(),
        &weights.lengths(),
        &weights.bias_lengths(),
        hidden.len(),
        cell.len(),
        output.len(),
    ) {
        return Err(KernelError::Internal);
    }
    let n_input = shape.input_size as usize;
    let n_state = shape.state_size as usize;
    if n_state == 0 {
        return Ok(());
    }
    // Sigmoid gates and the Q3.12 cell gate's tanh read Q3.12: ×3, no shift.
    let (gate_m, gate_s) = super::super::fixed_point::int16_lut_input_scale(0, 0);
    let (tanh_m, tanh_s) = (quant.cell_tanh_multiplier, quant.cell_tanh_shift);
    let clip = quant.cell_clip;
    let clip_cell = quant.clip_cell != 0;
    let (x_offset, h_offset) = (quant.input_offset, quant.hidden_offset);
    let (i16_min, i16_max) = (i32::from(i16::MIN), i32::from(i16::MAX));
    let (i8_min, i8_max) = (i32::from(i8::MIN), i32::from(i8::MAX));

    for step in shape.steps() {
        let len = step.rows * n_state;
        let out_rows = &mut output[step.output..step.output + len];
        let h_rows = &mut hidden[step.state..step.state + len];
        let c_rows = &mut cell[step.state..step.state + len];
        for r in 0..step.rows {
            let x = &input[step.input + r * n_input..][..n_input];
            let h = &h_rows[r * n_state..][..n_state];
            let c_row = &mut c_rows[r * n_state..][..n_state];
            let out = &mut out_rows[r * n_state..][..n_state];
            for (j, (c, o)) in c_row.iter_mut().zip(out.iter_mut()).enumerate() {
                let gate = |g: usize| GateRow {
                    input_weights: &weights.input[g][j * n_input..][..n_input],
                    recurrent_weights: &weights.recurrent[g][j * n_state..][..n_state],
                    bias: weights.bias[g][j],
                    quant: &quant.gates[g],
                };
                let forget = logistic_int16(
                    pre_activation(&gate(GATE_FORGET), x, x_offset, h, h_offset),
                    gate_m,
                    gate_s,
                );
                let input_gate = logistic_int16(
                    pre_activation(&gate(GATE_INPUT), x, x_offset, h, h_offset),
                    gate_m,
                    gate_s,
                );
                let cell_pre = pre_activation(&gate(GATE_CELL), x, x_offset, h, h_offset);
                let cell_gate = tanh_int16(cell_pre, gate_m, gate_s);
                let output_gate = logistic_int16(
                    pre_activation(&gate(GATE_OUTPUT), x, x_offset, h, h_offset),
                    gate_m,
                    gate_s,
                );

                // c = clip(sat(f·c + i·g)), each product rescaled and
                // clamped to int16 first (TFLM's UpdateLstmCell).
                let kept = mul(
                    forget,
                    *c,
                    quant.forget_cell_multiplier,
                    quant.forget_cell_shift,
                    0,
                    i16_min,
                    i16_max,
                );
                let added = mul(
                    input_gate,
                    cell_gate,
                    quant.input_cell_multiplier,
                    quant.input_cell_shift,
                    0,
                    i16_min,
                    i16_max,
                );
                let mut new_cell = saturate_i16(kept + added);
                if clip_cell {
                    new_cell = new_cell.min(clip).max(-clip);
                }
                *c = new_cell as i16;

                // h = tanh(c) · o, into the hidden state's int8 scale.
                let squashed = tanh_int16(*c, tanh_m, tanh_s);
                *o = mul(
                    squashed,
                    output_gate,
                    quant.hidden_multiplier,
                    quant.hidden_shift,
                    quant.hidden_zero_point,
                    i8_min,
                    i8_max,
                ) as i8;
            }
        }
        h_rows.copy_from_slice(out_rows);
    }
    Ok(())
}
