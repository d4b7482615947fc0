//! The integer LSTM: int8 input, hidden state and output, int16 cell state,
//! int8 weights, int32 biases. Bit-exact with TFLM's
//! `EvalLstm<int8_t, int8_t, int16_t, int32_t>`, one cell (or, on x86-64,
//! four cells) at a time.

use super::super::KernelError;
use super::super::fixed_point::multiply_by_quantized_multiplier;
use super::luts::Luts;
use super::params::{LstmQuantParams, LstmShape};
use super::{GATE_CELL, GATE_FORGET, GATE_INPUT, GATE_OUTPUT, GATES, LstmWeights};

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

/// How the four gate dots of one vector run, decided once per invoke from
/// the offsets: the fast paths need every offset in the int8 range (true
/// of every valid int8 zero point), so that each offset value fits 16 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DotPath {
    Portable,
    /// SSE2 `pmaddwd` (`integer_sse2`), any weights offsets in range.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    Sse2,
}

impl DotPath {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    fn for_offsets(weights_offsets: [i32; GATES], x_offset: i32) -> Self {
        let in_range = |o: i32| (-128..=128).contains(&o);
        if in_range(x_offset) && weights_offsets.iter().all(|&o| in_range(o)) {
            DotPath::Sse2
        } else {
            DotPath::Portable
        }
    }

    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    fn for_offsets(_weights_offsets: [i32; GATES], _x_offset: i32) -> Self {
        DotPath::Portable
    }

    #[inline(always)]
    fn run(
        self,
        rows: [&[i8]; GATES],
        x: &[i8],
        weights_offsets: [i32; GATES],
        x_offset: i32,
    ) -> [i32; GATES] {
        match self {
            DotPath::Portable => gate_dots_portable(rows, x, weights_offsets, x_offset),
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
            DotPath::Sse2 => super::integer_sse2::gate_dots(rows, x, weights_offsets, x_offset),
        }
    }
}

/// The four gates' `Σ (w + w_offset)·(x + x_offset)` over their rows of one
/// cell, bit for bit what [`gate_dots_portable`] gives (integer sums wrap
/// modulo 2³² in any order; the tests hold the two together). With offsets
/// in the int8 range it runs in SSE2 on x86-64; elsewhere it is the plain
/// loop.
pub fn gate_dots(
    rows: [&[i8]; GATES],
    x: &[i8],
    weights_offsets: [i32; GATES],
    x_offset: i32,
) -> [i32; GATES] {
    DotPath::for_offsets(weights_offsets, x_offset).run(rows, x, weights_offsets, x_offset)
}

/// [`gate_dots`] in plain Rust, one row after the other (every target; the
/// reference for the fast paths).
pub fn gate_dots_portable(
    rows: [&[i8]; GATES],
    x: &[i8],
    weights_offsets: [i32; GATES],
    x_offset: i32,
) -> [i32; GATES] {
    let o = weights_offsets;
    [
        dot(rows[0], x, o[0], x_offset),
        dot(rows[1], x, o[1], x_offset),
        dot(rows[2], x, o[2], x_offset),
        dot(rows[3], x, o[3], x_offset),
    ]
}

/// Row `j` of each gate's `[cells, n]` matrix.
#[inline(always)]
fn rows<'a>(m: &[&'a [i8]; GATES], j: usize, n: usize) -> [&'a [i8]; GATES] {
    [
        &m[0][j * n..][..n],
        &m[1][j * n..][..n],
        &m[2][j * n..][..n],
        &m[3][j * n..][..n],
    ]
}

/// What every cell of one invoke shares: the constants and weights, and
/// the paths they allow, decided once.
struct Cells<'a, 'w> {
    quant: &'a LstmQuantParams,
    weights: &'a LstmWeights<'w, i8, i32>,
    luts: Luts,
    input_offsets: [i32; GATES],
    recurrent_offsets: [i32; GATES],
    input_dots: DotPath,
    hidden_dots: DotPath,
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    lanes: Option<super::integer_sse2::CellLanes>,
}

impl<'a, 'w> Cells<'a, 'w> {
    fn new(quant: &'a LstmQuantParams, weights: &'a LstmWeights<'w, i8, i32>) -> Self {
        let input_offsets = quant.gates.map(|q| q.input_weights_offset);
        let recurrent_offsets = quant.gates.map(|q| q.recurrent_weights_offset);
        let luts = Luts::of(quant);
        Cells {
            quant,
            weights,
            luts,
            input_offsets,
            recurrent_offsets,
            input_dots: DotPath::for_offsets(input_offsets, quant.input_offset),
            hidden_dots: DotPath::for_offsets(recurrent_offsets, quant.hidden_offset),
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
            lanes: super::integer_sse2::CellLanes::new(quant, &luts),
        }
    }

    /// Cell `j`'s raw FC sums, per gate in tensor order: `[from input,
    /// from hidden]`, before bias and rescaling.
    #[inline(always)]
    fn dots(&self, j: usize, x: &[i8], h: &[i8]) -> [[i32; GATES]; 2] {
        let w = self.weights;
        [
            self.input_dots.run(
                rows(&w.input, j, x.len()),
                x,
                self.input_offsets,
                self.quant.input_offset,
            ),
            self.hidden_dots.run(
                rows(&w.recurrent, j, h.len()),
                h,
                self.recurrent_offsets,
                self.quant.hidden_offset,
            ),
        ]
    }

    /// Cell `j`'s four gate pre-activations in Q3.12, tensor order: each
    /// gate's two FCs into int16, saturated, added with saturation (TFLM's
    /// `CalculateLstmGate` up to the activation).
    #[inline(always)]
    fn pre_activations(&self, j: usize, x: &[i8], h: &[i8]) -> [i16; GATES] {
        let [from_input, from_hidden] = self.dots(j, x, h);
        let pre = |g: usize| {
            let q = &self.quant.gates[g];
            let a = saturate_i16(multiply_by_quantized_multiplier(
                from_input[g].wrapping_add(self.weights.bias[g][j]),
                q.input_multiplier,
                q.input_shift,
            ));
            let b = saturate_i16(multiply_by_quantized_multiplier(
                from_hidden[g],
                q.recurrent_multiplier,
                q.recurrent_shift,
            ));
            saturate_i16(a + b) as i16
        };
        [pre(0), pre(1), pre(2), pre(3)]
    }

    /// One batch row of one step: every cell's gates from `x` and the old
    /// hidden state `h`, its cell state in `c` updated, its new hidden
    /// value into `out`. On x86-64, blocks of four cells run their
    /// rescaling and state update in SSE2 lanes (`integer_sse2`, bit for
    /// bit the scalar arithmetic) when the constants allow it; the rest one
    /// by one.
    fn step_row(&self, x: &[i8], h: &[i8], c: &mut [i16], out: &mut [i8]) {
        #[allow(unused_mut)]
        let mut done = 0;
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        if let Some(lanes) = &self.lanes {
            let (c4, _) = c.as_chunks_mut::<4>();
            let (o4, _) = out.as_chunks_mut::<4>();
            for (block, (c4, o4)) in c4.iter_mut().zip(o4).enumerate() {
                let j = block * 4;
                let dots = [
                    self.dots(j, x, h),
                    self.dots(j + 1, x, h),
                    self.dots(j + 2, x, h),
                    self.dots(j + 3, x, h),
                ];
                let b = &self.weights.bias;
                let bias = [
                    &b[0].as_chunks::<4>().0[block],
                    &b[1].as_chunks::<4>().0[block],
                    &b[2].as_chunks::<4>().0[block],
                    &b[3].as_chunks::<4>().0[block],
                ];
                lanes.update(lanes.activations(dots, bias), c4, o4);
                done = j + 4;
            }
        }
        for j in done..h.len() {
            let gates = self.luts.gates(self.pre_activations(j, x, h));
            out[j] = update_cell(self.quant, &self.luts, gates, &mut c[j]);
        }
    }
}

/// One cell's state update from its gate activations: `c = clip(sat(f·c +
/// i·g))`, each product rescaled and clamped to int16 first (TFLM's
/// `UpdateLstmCell`), then `h = tanh(c)·o` in the hidden state's int8
/// scale (returned).
#[inline(always)]
fn update_cell(quant: &LstmQuantParams, luts: &Luts, gates: [i16; GATES], c: &mut i16) -> i8 {
    let (i16_min, i16_max) = (i32::from(i16::MIN), i32::from(i16::MAX));
    let kept = mul(
        gates[GATE_FORGET],
        *c,
        quant.forget_cell_multiplier,
        quant.forget_cell_shift,
        0,
        i16_min,
        i16_max,
    );
    let added = mul(
        gates[GATE_INPUT],
        gates[GATE_CELL],
        quant.input_cell_multiplier,
        quant.input_cell_shift,
        0,
        i16_min,
        i16_max,
    );
    let mut new_cell = saturate_i16(kept + added);
    if quant.clip_cell != 0 {
        new_cell = new_cell.min(quant.cell_clip).max(-quant.cell_clip);
    }
    *c = new_cell as i16;
    mul(
        luts.tanh_cell(*c),
        gates[GATE_OUTPUT],
        quant.hidden_multiplier,
        quant.hidden_shift,
        quant.hidden_zero_point,
        i32::from(i8::MIN),
        i32::from(i8::MAX),
    ) as i8
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
    let cells = Cells::new(quant, weights);
    for step in shape.steps() {
        let len = step.rows * n_state;
        let out_rows = &mut output[step.output..step.output + len];
        let h_rows = &mut hidden[step.state..step.state + len];
        let c_rows = &mut cell[step.state..step.state + len];
        for r in 0..step.rows {
            cells.step_row(
                &input[step.input + r * n_input..][..n_input],
                &h_rows[r * n_state..][..n_state],
                &mut c_rows[r * n_state..][..n_state],
                &mut out_rows[r * n_state..][..n_state],
            );
        }
        h_rows.copy_from_slice(out_rows);
    }
    Ok(())
}
