//! The LSTM's sizes and the integer path's constants, computed in prepare
//! exactly as TFLM's `PrepareGateParametersInteger` and
//! `CreateLstmCellStateInfo` compute them.

use super::super::fixed_point::{int16_lut_input_scale, quantize_multiplier};
use super::GATES;

/// The sizes of one LSTM operator.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct LstmShape {
    /// Independent sequences.
    pub batch: u32,
    /// Time steps per invoke.
    pub time_steps: u32,
    /// Features per input vector.
    pub input_size: u32,
    /// Cells (the hidden and cell state width, and the output width).
    pub state_size: u32,
    /// 1: input and output are `[time, batch, ·]`, every batch row steps
    /// together; 0: `[batch, time, ·]`, one sequence after the other.
    pub time_major: u32,
}

/// One time step's view of the tensors: which rows it reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Batch rows computed together (`batch` when time-major, else 1).
    pub rows: usize,
    /// First input element.
    pub input: usize,
    /// First output element.
    pub output: usize,
    /// First hidden/cell state element.
    pub state: usize,
}

impl LstmShape {
    /// Elements of the input tensor.
    pub fn input_len(&self) -> usize {
        self.batch as usize * self.time_steps as usize * self.input_size as usize
    }

    /// Elements of the output tensor.
    pub fn output_len(&self) -> usize {
        self.batch as usize * self.time_steps as usize * self.state_size as usize
    }

    /// Elements of the hidden (and of the cell) state.
    pub fn state_len(&self) -> usize {
        self.batch as usize * self.state_size as usize
    }

    /// Rows computed per step.
    pub fn rows_per_step(&self) -> usize {
        if self.time_major != 0 {
            self.batch as usize
        } else {
            1
        }
    }

    /// The steps of one invoke in TFLM's order (its `LstmStepManager`):
    /// time-major runs `time_steps` steps over all rows; batch-major runs
    /// each row's sequence in turn.
    pub fn steps(&self) -> impl Iterator<Item = Step> + '_ {
        let (b, t) = (self.batch as usize, self.time_steps as usize);
        let (i, s) = (self.input_size as usize, self.state_size as usize);
        let time_major = self.time_major != 0;
        let outer = if time_major { 1 } else { b };
        (0..outer).flat_map(move |row| {
            (0..t).map(move |step| {
                if time_major {
                    Step {
                        rows: b,
                        input: step * b * i,
                        output: step * b * s,
                        state: 0,
                    }
                } else {
                    Step {
                        rows: 1,
                        input: (row * t + step) * i,
                        output: (row * t + step) * s,
                        state: row * s,
                    }
                }
            })
        })
    }

    /// Whether slices of these lengths fit the shape (the kernels then index
    /// inside them without further length checks).
    pub fn fits(
        &self,
        input: usize,
        weights: &[usize; 8],
        biases: &[usize; 4],
        hidden: usize,
        cell: usize,
        output: usize,
    ) -> bool {
        let (i, s) = (self.input_size as usize, self.state_size as usize);
        input == self.input_len()
            && weights[..GATES].iter().all(|&len| len == s * i)
            && weights[GATES..].iter().all(|&len| len == s * s)
            && biases.iter().all(|&len| len == s)
            && hidden == self.state_len()
            && cell == self.state_len()
            && output == self.output_len()
    }
}

/// One gate's two fully connected layers (input → gate, hidden → gate),
/// both rescaled to the Q3.12 gate pre-activation.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct GateQuant {
    /// `input · input_weights / 2^-12` as a Q31 multiplier…
    pub input_multiplier: i32,
    /// …and shift.
    pub input_shift: i32,
    /// `hidden · recurrent_weights / 2^-12` as a Q31 multiplier…
    pub recurrent_multiplier: i32,
    /// …and shift.
    pub recurrent_shift: i32,
    /// Minus the input weights' zero point (0 for symmetric weights).
    pub input_weights_offset: i32,
    /// Minus the recurrent weights' zero point.
    pub recurrent_weights_offset: i32,
}

/// The integer path's constants (int8 activations, int16 cell state).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct LstmQuantParams {
    /// The four gates, in tensor order: input, forget, cell, output.
    pub gates: [GateQuant; GATES],
    /// Minus the input's zero point.
    pub input_offset: i32,
    /// Minus the hidden state's zero point.
    pub hidden_offset: i32,
    /// forget gate (Q0.15) × cell state → cell state: multiplier…
    pub forget_cell_multiplier: i32,
    /// …and shift.
    pub forget_cell_shift: i32,
    /// input gate (Q0.15) × cell gate (Q0.15) → cell state: multiplier…
    pub input_cell_multiplier: i32,
    /// …and shift.
    pub input_cell_shift: i32,
    /// tanh(cell) (Q0.15) × output gate (Q0.15) → hidden state: multiplier…
    pub hidden_multiplier: i32,
    /// …and shift.
    pub hidden_shift: i32,
    /// The hidden state's zero point.
    pub hidden_zero_point: i32,
    /// tanh of the cell state: LUT input multiplier (power of two resolved)…
    pub cell_tanh_multiplier: i32,
    /// …and right shift.
    pub cell_tanh_shift: i32,
    /// The cell clip in cell-state units.
    pub cell_clip: i32,
    /// 1 if the cell state is clipped (the option's clip is above 0).
    pub clip_cell: u32,
}

/// The quantisation of the tensors the integer constants come from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LstmScales {
    /// Input scale and zero point.
    pub input: (f32, i32),
    /// Hidden state (= output) scale and zero point.
    pub hidden: (f32, i32),
    /// Cell state scale (a power of two in practice).
    pub cell: f32,
    /// Input weights' scale and zero point per gate (tensor order).
    pub input_weights: [(f32, i32); GATES],
    /// Recurrent weights' scale and zero point per gate.
    pub recurrent_weights: [(f32, i32); GATES],
    /// The option's cell clip (0 = none).
    pub cell_clip: f32,
}

/// Q3.12, the gates' pre-activation scale.
const GATE_INPUT_SCALE: f32 = 1.0 / 4096.0;
/// Q0.15, the gates' output scale.
const GATE_OUTPUT_SCALE: f32 = 1.0 / 32768.0;

/// TFLM's `CheckedLog2` result: `round(log2(x))` computed in `f32` (the
/// check that `x` is a power of two is ignored by the LSTM, so is here).
fn log2_rounded(x: f32) -> i32 {
    let log2 = libm::logf(x) * (1.0f32 / libm::logf(2.0));
    libm::roundf(log2) as i32
}

/// `QuantizeMultiplier(double(a) · double(b) / double(c))`, TFLM's
/// `CreateInterGateMulParams`.
fn mul_params(a: f32, b: f32, c: f32) -> (i32, i32) {
    quantize_multiplier(f64::from(a) * f64::from(b) / f64::from(c))
}

/// `QuantizeMultiplier(double(a · b) / double(c))`: the float product first,
/// as TFLM's `GetQuantizedConvolutionMultipler` does for per-tensor FC.
fn fc_params(a: f32, b: f32, c: f32) -> (i32, i32) {
    quantize_multiplier(f64::from(a * b) / f64::from(c))
}

impl LstmQuantParams {
    /// The constants from the tensors' scales and zero points.
    pub fn from_scales(scales: &LstmScales) -> Self {
        let mut gates = [GateQuant::default(); GATES];
        for (g, gate) in gates.iter_mut().enumerate() {
            let (w_in, w_in_zp) = scales.input_weights[g];
            let (w_rec, w_rec_zp) = scales.recurrent_weights[g];
            let (input_multiplier, input_shift) = fc_params(scales.input.0, w_in, GATE_INPUT_SCALE);
            let (recurrent_multiplier, recurrent_shift) =
                fc_params(scales.hidden.0, w_rec, GATE_INPUT_SCALE);
            *gate = GateQuant {
                input_multiplier,
                input_shift,
                recurrent_multiplier,
                recurrent_shift,
                input_weights_offset: w_in_zp.wrapping_neg(),
                recurrent_weights_offset: w_rec_zp.wrapping_neg(),
            };
        }
        let (forget_cell_multiplier, forget_cell_shift) =
            mul_params(GATE_OUTPUT_SCALE, scales.cell, scales.cell);
        let (input_cell_multiplier, input_cell_shift) =
            mul_params(GATE_OUTPUT_SCALE, GATE_OUTPUT_SCALE, scales.cell);
        let (hidden_multiplier, hidden_shift) =
            mul_params(GATE_OUTPUT_SCALE, GATE_OUTPUT_SCALE, scales.hidden.0);

        // tanh reads its input as Q3.12: a cell state in Q(15+p).(−p) needs
        // a shift of 15 + p − 3 first (TFLM's lstm_internal::Tanh).
        let power = log2_rounded(scales.cell);
        let left_shift = 15 + power - 3;
        let (cell_tanh_multiplier, cell_tanh_shift) = if left_shift < 0 {
            int16_lut_input_scale(3, -left_shift)
        } else {
            int16_lut_input_scale(0, left_shift)
        };

        // `static_cast<int16_t>` of the clamped quotient: truncation.
        let cell_clip =
            (f64::from(scales.cell_clip) / f64::from(scales.cell)).clamp(-32768.0, 32767.0) as i16;
        LstmQuantParams {
            gates,
            input_offset: scales.input.1.wrapping_neg(),
            hidden_offset: scales.hidden.1.wrapping_neg(),
            forget_cell_multiplier,
            forget_cell_shift,
            input_cell_multiplier,
            input_cell_shift,
            hidden_multiplier,
            hidden_shift,
            hidden_zero_point: scales.hidden.1,
            cell_tanh_multiplier,
            cell_tanh_shift,
            cell_clip: i32::from(cell_clip),
            clip_cell: u32::from(scales.cell_clip > 0.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_of_powers_of_two() {
        for p in -20..5 {
            assert_eq!(log2_rounded(libm::powf(2.0, p as f32)), p);
        }
        // Not a power of two: rounded, as TFLM ignores CheckedLog2's verdict.
        assert_eq!(log2_rounded(0.0003), -12);
    }

    fn scales(cell: f32, cell_clip: f32) -> LstmScales {
        LstmScales {
            input: (0.05, -128),
            hidden: (0.0078, -4),
            cell,
            input_weights: [(0.02, 0); GATES],
            recurrent_weights: [(0.01, 0); GATES],
            cell_clip,
        }
    }

    #[test]
    fn cell_constants() {
        // Cell in Q3.12: tanh needs no shift, ×3 in the LUT; the clip of 10
        // is past int16 and saturates.
        let q = LstmQuantParams::from_scales(&scales(1.0 / 4096.0, 10.0));
        assert_eq!((q.cell_tanh_multiplier, q.cell_tanh_shift), (3, 0));
        assert_eq!((q.cell_clip, q.clip_cell), (32767, 1));
        // Q4.11: one left shift folded into the multiplier; clip 20480.
        let q = LstmQuantParams::from_scales(&scales(1.0 / 2048.0, 10.0));
        assert_eq!((q.cell_tanh_multiplier, q.cell_tanh_shift), (6, 0));
        assert_eq!(q.cell_clip, 20480);
        // Q0.15: three right shifts; clip 0.3 truncates to 9830.
        let q = LstmQuantParams::from_scales(&scales(1.0 / 32768.0, 0.3));
        assert_eq!((q.cell_tanh_multiplier, q.cell_tanh_shift), (3, 3));
        assert_eq!(q.cell_clip, 9830);
        // No clip.
        let q = LstmQuantParams::from_scales(&scales(1.0 / 4096.0, 0.0));
        assert_eq!(q.clip_cell, 0);
    }

    #[test]
    fn gate_and_mul_multipliers() {
        let q = LstmQuantParams::from_scales(&scales(1.0 / 4096.0, 0.0));
        // forget × cell → cell is 2^-15 exactly: multiplier 0.5, shift −14.
        assert_eq!(
            (q.forget_cell_multiplier, q.forget_cell_shift),
            (1 << 30, -14)
        );
        // input × cell gate → Q3.12 cell: 2^-30 / 2^-12 = 2^-18.
        assert_eq!(
            (q.input_cell_multiplier, q.input_cell_shift),
            (1 << 30, -17)
        );
        assert_eq!(q.hidden_zero_point, -4);
        assert_eq!((q.input_offset, q.hidden_offset), (128, 4));
        let (m, s) =
            quantize_multiplier(f64::from(0.05f32 * 0.02f32) / f64::from(GATE_INPUT_SCALE));
        assert_eq!(
            (q.gates[0].input_multiplier, q.gates[0].input_shift),
            (m, s)
        );
    }

    #[test]
    fn steps_follow_tflm_offsets() {
        let shape = LstmShape {
            batch: 2,
            time_steps: 3,
            input_size: 5,
            state_size: 4,
            time_major: 0,
        };
        let steps: alloc::vec::Vec<_> = shape.steps().collect();
        assert_eq!(steps.len(), 6);
        assert_eq!(
            steps[4],
            Step {
                rows: 1,
                input: 4 * 5,
                output: 4 * 4,
                state: 4
            }
        );
        let shape = LstmShape {
            time_major: 1,
            ..shape
        };
        let steps: alloc::vec::Vec<_> = shape.steps().collect();
        assert_eq!(steps.len(), 3);
        assert_eq!(
            steps[2],
            Step {
                rows: 2,
                input: 2 * 2 * 5,
                output: 2 * 2 * 4,
                state: 0
            }
        );
    }
}
