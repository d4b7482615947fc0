//! One row of an int8 matrix product, requantised: FULLY_CONNECTED's batch
//! rows and 1×1 CONV_2D's pixels. The one place the dot products and the
//! requantisation meet: the scaling's form is chosen once per row, so the
//! loop over outputs has no branch on it.

use super::dot::dot_offset;
use super::requant::{ChannelRequant, Requant, ScaleForm};

/// One row of a matrix product: `out[c] = requant(bias[c] + offset + Σ_d
/// w[c, d]·(x[d] + x_offset))` for every output channel `c`, `weights`
/// holding one row of `x.len()` weights per channel. FULLY_CONNECTED and
/// 1×1 CONV_2D are this, row after row.
#[inline]
pub fn matvec(
    x: &[i8],
    x_offset: i32,
    weights: &[i8],
    bias: Option<&[i32]>,
    offset: i32,
    requant: &Requant<'_>,
    out: &mut [i8],
) {
    // One multiplier for every channel (per-tensor weights): its constants
    // are worked out once for the whole row, and so is which of the three
    // forms of the scaling applies, so the per-output code has no branch
    // on it (small layers spend much of their time requantising).
    if let Some(one) = requant.uniform() {
        matvec_uniform(x, x_offset, weights, bias, offset, &one, out);
    } else {
        matvec_with(
            x,
            x_offset,
            weights,
            bias,
            offset,
            |c, acc| requant.apply(c, acc),
            out,
        );
    }
}

/// [`matvec`] for per-tensor weights, their one channel's constants given
/// (a kernel that worked them out at prepare calls this directly).
#[inline]
pub fn matvec_uniform(
    x: &[i8],
    x_offset: i32,
    weights: &[i8],
    bias: Option<&[i32]>,
    offset: i32,
    one: &ChannelRequant,
    out: &mut [i8],
) {
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    if widens(x.len(), out.len()) {
        return wide_blocks(x, x_offset, weights, (bias, offset), one, out);
    }
    // Size builds keep one loop: the general form gives the same bytes.
    if super::super::COMPACT {
        return matvec_with(
            x,
            x_offset,
            weights,
            bias,
            offset,
            |_, acc| one.apply(acc),
            out,
        );
    }
    let full = one.stage.is_full_range();
    match one.form() {
        ScaleForm::OneRounding if full => matvec_with(
            x,
            x_offset,
            weights,
            bias,
            offset,
            |_, acc| one.apply_one_rounding_full(acc),
            out,
        ),
        ScaleForm::Narrow if full => matvec_with(
            x,
            x_offset,
            weights,
            bias,
            offset,
            |_, acc| one.apply_narrow_full(acc),
            out,
        ),
        ScaleForm::OneRounding => matvec_with(
            x,
            x_offset,
            weights,
            bias,
            offset,
            |_, acc| one.apply_one_rounding(acc),
            out,
        ),
        ScaleForm::Narrow => matvec_with(
            x,
            x_offset,
            weights,
            bias,
            offset,
            |_, acc| one.apply_narrow(acc),
            out,
        ),
        ScaleForm::Parts => matvec_with(
            x,
            x_offset,
            weights,
            bias,
            offset,
            |_, acc| one.apply(acc),
            out,
        ),
    }
}

/// The longest FULLY_CONNECTED input widened once on DSP cores (2 KiB of
/// stack).
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
const WIDE_INPUT: usize = 1024;

/// Per-tensor FULLY_CONNECTED on DSP cores with the input widened once
/// (offset added): the sums of up to [`WIDE_BLOCKS`] blocks of four rows
/// at a time in one `asm!`, then requantised in one loop of the form. Takes
/// layers [`widens`] takes; the rows after the last whole block of four
/// take one row at a time.
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
#[inline(never)]
fn wide_blocks(
    x: &[i8],
    x_offset: i32,
    weights: &[i8],
    (bias, offset): (Option<&[i32]>, i32),
    one: &ChannelRequant,
    out: &mut [i8],
) {
    use super::super::gemm_widened::{blocks_1x4_wide_input, widen_input};
    let (k, n) = (x.len(), out.len());
    let weights = &weights[..n * k];
    let bias = bias.map(|b| &b[..n]);
    let mut wide = [0u32; WIDE_INPUT / 2];
    let wide = &mut wide[..k / 2];
    widen_input(x, x_offset, wide);
    let mut sums = [[0i32; 4]; WIDE_BLOCKS];
    let whole = n / 4 * 4;
    let mut c = 0;
    while c < whole {
        let blocks = ((whole - c) / 4).min(WIDE_BLOCKS);
        let sums = &mut sums[..blocks];
        blocks_1x4_wide_input(wide, &weights[c * k..], k, sums);
        let sums = sums.as_flattened_mut();
        match bias.map(|b| &b[c..c + 4 * blocks]) {
            Some(bias) => {
                for (s, &b) in sums.iter_mut().zip(bias) {
                    *s = s.wrapping_add(b.wrapping_add(offset));
                }
            }
            None => sums.iter_mut().for_each(|s| *s = s.wrapping_add(offset)),
        }
        let outs = &mut out[c..c + 4 * blocks];
        let (s, o) = (sums.as_ptr(), outs.as_mut_ptr());
        // SAFETY: i < outs.len() == sums.len() (4 · blocks each).
        one.apply_each(
            outs.len(),
            |i| unsafe { *s.add(i) },
            |i, v| unsafe { *o.add(i) = v },
        );
        c += 4 * blocks;
    }
    for (r, o) in out.iter_mut().enumerate().skip(whole) {
        let start = bias.map_or(0, |b| b[r]).wrapping_add(offset);
        let dot = super::super::gemm::row_1x1(x, x_offset, &weights[r * k..][..k]);
        *o = one.apply(start.wrapping_add(dot));
    }
}

/// Whether [`wide_blocks`] takes a layer of `n` rows of `k` inputs: `k` a
/// multiple of 16 up to [`WIDE_INPUT`], at least four rows and
/// [`WIDE_MIN_PRODUCTS`] multiply-adds, and not a size build. Checked
/// inline, so that small layers (hello_world's) pay no call for it.
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
#[inline(always)]
fn widens(k: usize, n: usize) -> bool {
    !super::super::COMPACT
        && k.is_multiple_of(16)
        && k <= WIDE_INPUT
        && n >= 4
        && k * n >= WIDE_MIN_PRODUCTS
}

/// Multiply-adds from which a layer widens its input: below, widening and
/// setting up the run cost more than they save (hello_world's 16×16).
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
const WIDE_MIN_PRODUCTS: usize = 2048;

/// Blocks whose sums [`wide_blocks`] keeps (128 outputs, 512 bytes).
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
const WIDE_BLOCKS: usize = 32;

/// [`matvec`] with the requantisation as `requant(channel, acc)`.
#[inline(always)]
fn matvec_with(
    x: &[i8],
    x_offset: i32,
    weights: &[i8],
    bias: Option<&[i32]>,
    offset: i32,
    requant: impl Fn(usize, i32) -> i8,
    out: &mut [i8],
) {
    let k = x.len();
    let n = out.len();
    // Sliced once, so that the loops below index without checks.
    let (weights, bias) = (&weights[..n * k], bias.map(|b| &b[..n]));
    let start = |c: usize| bias.map_or(0, |b| b[c]).wrapping_add(offset);
    if k == 0 {
        for (c, o) in out.iter_mut().enumerate() {
            *o = requant(c, start(c));
        }
        return;
    }
    // One input (hello_world's 1→16 layer): one product per channel.
    if k == 1 {
        let v = i32::from(x[0]) + x_offset;
        single_input(v, weights, bias, offset, requant, out);
        return;
    }
    // Short rows: a plain sum per channel costs less than setting up
    // four-row blocks.
    if k < 4 {
        for (c, (o, w)) in out.iter_mut().zip(weights.chunks_exact(k)).enumerate() {
            *o = requant(c, start(c).wrapping_add(dot_offset(w, x, x_offset)));
        }
        return;
    }
    // Four channels at a time share each load (and offsetting) of `x`.
    // Blocks of four outputs, rows and biases taken as chunks: one bounds
    // check per block, not one per output and per bias.
    let blocks = n / 4;
    let mut c = 0;
    let out_blocks = out[..4 * blocks].chunks_exact_mut(4);
    for (ob, block) in out_blocks.zip(weights.chunks_exact(4 * k)) {
        let starts = match bias.and_then(|b| b.get(c..)?.first_chunk::<4>()) {
            Some(b) => b.map(|b| b.wrapping_add(offset)),
            None => [offset; 4],
        };
        #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
        let acc = super::super::gemm::rows_1x4(x, x_offset, block);
        #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
        let acc = {
            let (w0, rest) = block.split_at(k);
            let (w1, rest) = rest.split_at(k);
            let (w2, w3) = rest.split_at(k);
            super::dot::dot4(x, x_offset, [w0, w1, w2, w3])
        };
        for (r, o) in ob.iter_mut().enumerate() {
            *o = requant(c + r, starts[r].wrapping_add(acc[r]));
        }
        c += 4;
    }
    while c < n {
        let w = &weights[c * k..][..k];
        #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
        let dot = super::super::gemm::row_1x1(x, x_offset, w);
        #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
        let dot = dot_offset(w, x, x_offset);
        out[c] = requant(c, start(c).wrapping_add(dot));
        c += 1;
    }
}

/// [`matvec_with`] for one input `v` (already offset): a function of its
/// own, so that its loop keeps every constant in a register rather than
/// sharing the register file with the long-row paths.
#[inline(never)]
fn single_input(
    v: i32,
    weights: &[i8],
    bias: Option<&[i32]>,
    offset: i32,
    requant: impl Fn(usize, i32) -> i8,
    out: &mut [i8],
) {
    let n = out.len().min(weights.len());
    let (weights, out) = (&weights[..n], &mut out[..n]);
    match bias.and_then(|b| b.get(..n)) {
        // No row offset (weights without a zero point): one register and
        // one addition fewer per output.
        Some(bias) if offset == 0 => {
            for (c, ((o, &w), &b)) in out.iter_mut().zip(weights).zip(bias).enumerate() {
                *o = requant(c, b.wrapping_add(i32::from(w).wrapping_mul(v)));
            }
        }
        Some(bias) => {
            for (c, ((o, &w), &b)) in out.iter_mut().zip(weights).zip(bias).enumerate() {
                let acc = b
                    .wrapping_add(offset)
                    .wrapping_add(i32::from(w).wrapping_mul(v));
                *o = requant(c, acc);
            }
        }
        None => {
            for (c, (o, &w)) in out.iter_mut().zip(weights).enumerate() {
                *o = requant(c, offset.wrapping_add(i32::from(w).wrapping_mul(v)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::requant::{NARROW, OutputStage, shift_parts};
    use super::*;

    fn stage_wide() -> OutputStage {
        OutputStage {
            offset: -3,
            min: -128,
            max: 127,
        }
    }

    /// `matvec` picks the per-tensor scaling's form once per row: each form
    /// (and the per-channel path) gives what `Requant::apply` gives per
    /// output, for every row length the product special-cases.
    #[test]
    fn matvec_matches_per_output_requantisation_in_every_form() {
        let x: Vec<i8> = (0..37).map(|i| ((i * 53 + 7) % 256) as u8 as i8).collect();
        let w: Vec<i8> = (0..37 * 9)
            .map(|i| ((i * 29 + 3) % 256) as u8 as i8)
            .collect();
        let bias: Vec<i32> = (0..9).map(|c| c * 1001 - 4000).collect();
        let m = 1_518_500_250;
        // Right shift (one rounding); left shift flagged narrow; left shift.
        let shifts = [shift_parts(-9), [2 | NARROW, 1], shift_parts(2)];
        let forms = [ScaleForm::OneRounding, ScaleForm::Narrow, ScaleForm::Parts];
        for (shift, form) in shifts.into_iter().zip(forms) {
            let (ms, ss) = ([m], [shift]);
            let r = Requant::new(&ms, &ss, stage_wide()).unwrap();
            assert_eq!(r.channel(0).form(), form);
            let (ms9, ss9) = ([m; 9], [shift; 9]);
            let per_channel = Requant::new(&ms9, &ss9, stage_wide()).unwrap();
            for k in [0, 1, 2, 3, 4, 8, 37] {
                for n in [1, 4, 9] {
                    for b in [None, Some(&bias[..n])] {
                        let weights = &w[..n * k];
                        let want: Vec<i8> = (0..n)
                            .map(|c| {
                                let dot = dot_offset(&weights[c * k..][..k], &x[..k], 5);
                                let acc = b.map_or(0, |b| b[c]).wrapping_add(17).wrapping_add(dot);
                                r.apply(c, acc)
                            })
                            .collect();
                        for req in [&r, &per_channel] {
                            let mut got = vec![0i8; n];
                            matvec(&x[..k], 5, weights, b, 17, req, &mut got);
                            assert_eq!(got, want, "{form:?} k {k} n {n} bias {}", b.is_some());
                        }
                    }
                }
            }
        }
    }
}
