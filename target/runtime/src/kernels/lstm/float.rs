//! The float32 LSTM: TFLM's `EvalLstm<float, float, float, float>`, rounding
//! for rounding, one cell at a time.

use super::super::KernelError;
use super::params::LstmShape;
use super::{CELLS, GATE_CELL, GATE_FORGET, GATE_INPUT, GATE_OUTPUT, GATES, LstmWeights};

/// `std::max(x, lowest)` then `std::min(·, max)`: TFLM's
/// `ActivationFunctionWithMinMax` for "no activation", which turns ±inf into
/// ±`f32::MAX` and keeps NaN.
#[inline(always)]
pub(super) fn clamp_to_finite(x: f32) -> f32 {
    let x = if x < f32::MIN { f32::MIN } else { x };
    if f32::MAX < x { f32::MAX } else { x }
}

/// `2^(i/32)` as bits, minus `i << 47`: the table of ARM's
/// optimized-routines `expf` (the `expf` of glibc ≥ 2.27 and newlib ≥ 3.0).
const EXP2_TABLE: [u64; 32] = [
    0x3ff0000000000000,
    0x3fefd9b0d3158574,
    0x3fefb5586cf9890f,
    0x3fef9301d0125b51,
    0x3fef72b83c7d517b,
    0x3fef54873168b9aa,
    0x3fef387a6e756238,
    0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715,
    0x3feef1a7373aa9cb,
    0x3feedea64c123422,
    0x3feece086061892d,
    0x3feebfdad5362a27,
    0x3feeb42b569d4f82,
    0x3feeab07dd485429,
    0x3feea47eb03a5585,
    0x3feea09e667f3bcd,
    0x3fee9f75e8ec5f74,
    0x3feea11473eb0187,
    0x3feea589994cce13,
    0x3feeace5422aa0db,
    0x3feeb737b0cdc5e5,
    0x3feec49182a3f090,
    0x3feed503b23e255d,
    0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47,
    0x3fef199bdd85529c,
    0x3fef3720dcef9069,
    0x3fef5818dcfba487,
    0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da,
    0x3fefd0765b6e4540,
];

/// `e^x` rounded as the C libraries TFLM runs on round it: ARM's
/// optimized-routines algorithm (glibc ≥ 2.27, newlib ≥ 3.0), evaluated in
/// `f64` from a 32-entry table and a cubic. The `libm` crate's `expf` is an
/// older algorithm that differs in the last bit for about 1% of inputs.
pub fn expf(x: f32) -> f32 {
    const N: f64 = 32.0;
    let abstop = (x.to_bits() >> 20) & 0x7ff;
    if abstop >= (88.0f32.to_bits() >> 20) {
        if x == f32::NEG_INFINITY {
            return 0.0;
        }
        if abstop >= (f32::INFINITY.to_bits() >> 20) {
            return x + x;
        }
        // log(2^128) and log(2^-150).
        if x > f32::from_bits(0x42b1_7217) {
            return f32::INFINITY;
        }
        if x < f32::from_bits(0xc2cf_f1b4) {
            return 0.0;
        }
    }
    // x·N/ln2 = k + r, |r| ≤ 1/2, k rounded to even by the shift trick.
    let inv_ln2_n = f64::from_bits(0x3ff7_1547_652b_82fe) * N;
    let shift = f64::from_bits(0x4338_0000_0000_0000);
    let z = inv_ln2_n * f64::from(x);
    let kd = z + shift;
    let ki = kd.to_bits();
    let r = z - (kd - shift);
    // e^x = 2^(k/N) · 2^(r/N) ≈ s · (c0·r³ + c1·r² + c2·r + 1).
    let t = EXP2_TABLE[(ki % 32) as usize].wrapping_add(ki << 47);
    let s = f64::from_bits(t);
    let c0 = f64::from_bits(0x3fac_6af8_4b91_2394) / (N * N * N);
    let c1 = f64::from_bits(0x3fce_bfce_50fa_c4f3) / (N * N);
    let c2 = f64::from_bits(0x3fe6_2e42_ff0c_52d6) / N;
    let y = (c0 * r + c1) * (r * r) + (c2 * r + 1.0);
    (y * s) as f32
}

/// `tanh(x)` as fdlibm's `tanhf` computes it (glibc's and newlib's): from
/// `expm1f(±2|x|)`, split at |x| = 1. The `libm` crate's `tanhf` (musl's)
/// splits elsewhere and differs in the last bit for about 1% of inputs.
pub fn tanhf(x: f32) -> f32 {
    let bits = x.to_bits();
    let abs_bits = bits & 0x7fff_ffff;
    let negative = bits >> 31 != 0;
    if abs_bits >= 0x7f80_0000 {
        // ±1 for ±inf, NaN for NaN.
        return if negative {
            1.0 / x - 1.0
        } else {
            1.0 / x + 1.0
        };
    }
    let z = if abs_bits < 0x41b0_0000 {
        // |x| < 22.
        if abs_bits == 0 {
            return x;
        }
        if abs_bits < 0x2400_0000 {
            // |x| < 2^-55: tanh(x) = x.
            return x * (1.0 + x);
        }
        if abs_bits >= 0x3f80_0000 {
            let t = libm::expm1f(2.0 * x.abs());
            1.0 - 2.0 / (t + 2.0)
        } else {
            let t = libm::expm1f(-2.0 * x.abs());
            -t / (t + 2.0)
        }
    } else {
        1.0 - 1.0e-30
    };
    if negative { -z } else { z }
}

/// TFLM's reference float logistic: exact formula between the cut-offs,
/// `exp(x)` below, 1 above.
#[inline(always)]
pub fn sigmoid_f32(x: f32) -> f32 {
    const CUTOFF_UPPER: f32 = 16.619_047;
    const CUTOFF_LOWER: f32 = -9.0;
    if x > CUTOFF_UPPER {
        1.0
    } else if x < CUTOFF_LOWER {
        expf(x)
    } else {
        1.0 / (1.0 + expf(-x))
    }
}

/// `std::max(std::min(clip, x), -clip)` (NaN becomes `clip`, as in TFLM).
#[inline(always)]
pub(super) fn clip_f32(x: f32, clip: f32) -> f32 {
    let x = if x < clip { x } else { clip };
    if x < -clip { -clip } else { x }
}

/// The four gates' `Σ x·w` over their rows of one cell, each summed from
/// 0.0 in index order as TFLM's float FC loop adds (so each rounds the
/// same), but interleaved: four independent add chains instead of one
/// after the other, which is what makes this fast, since each chain must
/// stay sequential.
#[inline(always)]
fn dots4(rows: [&[f32]; GATES], x: &[f32]) -> [f32; GATES] {
    let n = x.len();
    let [r0, r1, r2, r3] = rows;
    let (r0, r1, r2, r3) = (&r0[..n], &r1[..n], &r2[..n], &r3[..n]);
    let mut acc = [0.0f32; GATES];
    for d in 0..n {
        let v = x[d];
        acc[0] += v * r0[d];
        acc[1] += v * r1[d];
        acc[2] += v * r2[d];
        acc[3] += v * r3[d];
    }
    acc
}

/// Row `j` of each gate's `[cells, n]` matrix.
#[inline(always)]
fn rows<'a>(w: &[&'a [f32]; GATES], j: usize, n: usize) -> [&'a [f32]; GATES] {
    [w[0], w[1], w[2], w[3]].map(|m| &m[j * n..(j + 1) * n])
}

/// `[gate][k]`: gate `g`'s `Σ x·w` over row `j + k` of its matrix, for the
/// [`CELLS`] cells from `j`, each summed from 0.0 in index order as
/// [`dots4`] (and TFLM's FC loop) adds. On x86-64 each SSE2 lane is one
/// cell's sum, its products and additions in that same order, so every
/// result rounds the same; elsewhere, [`dots_cells_portable`].
#[inline(always)]
pub fn dots_cells(w: &[&[f32]; GATES], j: usize, x: &[f32]) -> [[f32; CELLS]; GATES] {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        super::float_sse2::dots_cells(w, j, x)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        dots_cells_portable(w, j, x)
    }
}

/// [`dots_cells`] one cell at a time (every target; the SIMD one's
/// reference).
pub fn dots_cells_portable(w: &[&[f32]; GATES], j: usize, x: &[f32]) -> [[f32; CELLS]; GATES] {
    let mut out = [[0.0; CELLS]; GATES];
    for (k, cell) in (j..j + CELLS).enumerate() {
        let dots = dots4(rows(w, cell, x.len()), x);
        for (gate, dot) in out.iter_mut().zip(dots) {
            gate[k] = dot;
        }
    }
    out
}

/// One cell's gates and state update from its FC sums: TFLM's FC min/max
/// clamps (the recurrent FC has bias 0.0), the activations, the cell
/// update and the new hidden value (returned).
#[inline(always)]
fn update_cell(
    from_input: [f32; GATES],
    from_hidden: [f32; GATES],
    bias: [f32; GATES],
    c: &mut f32,
    cell_clip: f32,
) -> f32 {
    let pre =
        |g: usize| clamp_to_finite(from_input[g] + bias[g]) + clamp_to_finite(from_hidden[g] + 0.0);
    let forget = sigmoid_f32(pre(GATE_FORGET));
    let input_gate = sigmoid_f32(pre(GATE_INPUT));
    let cell_gate = tanhf(pre(GATE_CELL));
    let output_gate = sigmoid_f32(pre(GATE_OUTPUT));

    let mut new_cell = clamp_to_finite(forget * *c) + clamp_to_finite(input_gate * cell_gate);
    if cell_clip > 0.0 {
        new_cell = clip_f32(new_cell, cell_clip);
    }
    *c = new_cell;
    clamp_to_finite(tanhf(new_cell) * output_gate)
}

/// One batch row of one step: every cell's gates from `x` and the old
/// hidden state `h`, its cell state `c` updated, its new hidden value into
/// `out`. Blocks of [`CELLS`] cells go through [`dots_cells`], the rest one
/// by one (every cell one by one off x86-64).
fn step_row(
    weights: &LstmWeights<'_, f32, f32>,
    cell_clip: f32,
    x: &[f32],
    h: &[f32],
    c: &mut [f32],
    out: &mut [f32],
) {
    let (n_input, n_state) = (x.len(), h.len());
    let bias = |j: usize| weights.bias.map(|b| b[j]);
    // Elsewhere than x86-64 the cells go one by one, as they always did:
    // the blocks only pay with SIMD lanes.
    let blocks = if cfg!(all(target_arch = "x86_64", target_feature = "sse2")) {
        n_state / CELLS
    } else {
        0
    };
    for block in 0..blocks {
        let j = block * CELLS;
        let from_input = dots_cells(&weights.input, j, x);
        let from_hidden = dots_cells(&weights.recurrent, j, h);
        for k in 0..CELLS {
            out[j + k] = update_cell(
                from_input.map(|g| g[k]),
                from_hidden.map(|g| g[k]),
                bias(j + k),
                &mut c[j + k],
                cell_clip,
            );
        }
    }
    for j in blocks * CELLS..n_state {
        let from_input = dots4(rows(&weights.input, j, n_input), x);
        let from_hidden = dots4(rows(&weights.recurrent, j, n_state), h);
        out[j] = update_cell(from_input, from_hidden, bias(j), &mut c[j], cell_clip);
    }
}

/// One float LSTM invoke over every time step; `hidden` and `cell` are
/// updated in place. Same structure as
/// [`eval_integer`](super::eval_integer): no scratch memory.
#[allow(clippy::too_many_arguments)]
pub fn eval_float(
    shape: &LstmShape,
    cell_clip: f32,
    weights: &LstmWeights<'_, f32, f32>,
    input: &[f32],
    hidden: &mut [f32],
    cell: &mut [f32],
    output: &mut [f32],
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
    for step in shape.steps() {
        let len = step.rows * n_state;
        let out_rows = &mut output[step.output..step.output + len];
        let h_rows = &mut hidden[step.state..step.state + len];
        let c_rows = &mut cell[step.state..step.state + len];
        for r in 0..step.rows {
            step_row(
                weights,
                cell_clip,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp2_table_is_two_to_the_i_over_32() {
        for (i, &entry) in EXP2_TABLE.iter().enumerate() {
            let exact = libm::exp2(i as f64 / 32.0).to_bits();
            assert_eq!(entry, exact.wrapping_sub((i as u64) << 47), "{i}");
        }
    }

    /// Within an ulp of the exact functions (bit-exactness with the C
    /// libraries was checked against glibc 2.36 over every 13th float:
    /// `expf` identical everywhere, `tanhf` but for a handful of inputs where
    /// the `libm` crate's `expm1f` differs).
    #[test]
    fn close_to_the_real_functions() {
        let mut bits = 0u32;
        while bits < 0xffff_0000 {
            let x = f32::from_bits(bits);
            bits += 4099;
            if !x.is_finite() || x.abs() > 80.0 {
                continue;
            }
            let e = f64::from(expf(x));
            let want = libm::exp(f64::from(x));
            assert!((e - want).abs() <= want * 1.2e-7, "exp {x}");
            let t = f64::from(tanhf(x));
            let want = libm::tanh(f64::from(x));
            assert!((t - want).abs() <= want.abs() * 2.4e-7 + 1e-45, "tanh {x}");
        }
        assert_eq!(expf(f32::NEG_INFINITY), 0.0);
        assert_eq!(expf(100.0), f32::INFINITY);
        assert_eq!(expf(-200.0), 0.0);
        assert_eq!(tanhf(f32::INFINITY), 1.0);
        assert_eq!(tanhf(-30.0), -1.0);
        assert!(expf(f32::NAN).is_nan() && tanhf(f32::NAN).is_nan());
    }
}
