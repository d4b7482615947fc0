//! The integer LSTM's int16 activation tables, as its gates read them:
//! the input scales of TFLM's int16 sigmoid and tanh LUTs for the gates
//! and for the cell state, and the lookups themselves.
//!
//! Both the portable cells (`integer`) and the SSE2 lanes
//! (`integer_sse2`) read them, so they live here, below both.

use super::super::fixed_point::{int16_lut_input_scale, logistic_int16, tanh_int16};
use super::params::LstmQuantParams;
use super::{GATE_CELL, GATE_FORGET, GATE_INPUT, GATE_OUTPUT, GATES};

/// The LUT input scales: sigmoid gates and the Q3.12 cell gate's tanh
/// read Q3.12 (×3, no shift); the cell state's tanh its own.
#[derive(Clone, Copy)]
pub(super) struct Luts {
    pub(super) gate: (i32, i32),
    pub(super) cell_tanh: (i32, i32),
}

impl Luts {
    pub(super) fn of(quant: &LstmQuantParams) -> Self {
        Luts {
            gate: int16_lut_input_scale(0, 0),
            cell_tanh: (quant.cell_tanh_multiplier, quant.cell_tanh_shift),
        }
    }

    /// The four gates' activations (tensor order) from their
    /// pre-activations: σ for input, forget and output, tanh for the cell
    /// gate; Q0.15.
    #[inline(always)]
    pub(super) fn gates(&self, pre: [i16; GATES]) -> [i16; GATES] {
        let (m, s) = self.gate;
        [
            logistic_int16(pre[GATE_INPUT], m, s),
            logistic_int16(pre[GATE_FORGET], m, s),
            tanh_int16(pre[GATE_CELL], m, s),
            logistic_int16(pre[GATE_OUTPUT], m, s),
        ]
    }

    #[inline(always)]
    pub(super) fn tanh_cell(&self, c: i16) -> i16 {
        tanh_int16(c, self.cell_tanh.0, self.cell_tanh.1)
    }
}
