//! DEPTHWISE_CONV_2D 3×3 with depth multiplier 1, one channel at a time
//! through a ring of three input lines (DS-CNN, MobileNet).
//!
//! [`super::depthwise_packed`] takes four channels of a tap per word, but a
//! depthwise product is never summed across channels, so each of its
//! multiplies does one product (`SMLABB`/`SMLATT`) and every output pays a
//! full requantisation with its own channel's tables. Here the loop runs
//! the other way round: one channel, a whole output line at a time.
//!
//! - The channel's input lines are copied, offset added, into a ring of
//!   three 16-bit lines, so that two neighbouring taps of a line sit in one
//!   word and `SMLAD` adds both products: a line of three taps is one
//!   `SMLAD` and one halfword multiply, and two neighbouring outputs share
//!   the words they read ([`macs`]). Padding is stored as zero (`x + offset
//!   = 0`), so windows over the border need no code of their own and every
//!   output starts from the model's bias, as TFLM's reference sums only the
//!   taps inside the input.
//! - The ring's words interleave the three lines (`[pair][slot]`), so one
//!   pointer and fixed offsets reach every tap; which line a slot holds
//!   rotates, and the filter's lines are handed to the loop in the slots'
//!   order instead of moving data.
//! - The channel's multiplier and shift are read once and a whole line of
//!   accumulators is requantised in one loop.
//! - The run axis (the one the loop walks) is the longer output axis: a
//!   DS-CNN's 25 × 5 maps run down their columns.

use super::KernelError;
use super::arm_dsp::{pack, sadd16, splat16};
use super::conv_geometry::Geometry;
use super::depthwise_packed::Operands;
use super::window_axis::Axis;

/// Longest output line the ring and the accumulator line hold (stack:
/// 3 · ([`MAX_RUN`] / 2 + 2) words of ring, [`MAX_RUN`] + 1 accumulators).
const MAX_RUN: usize = 128;

/// Shortest output line worth a ring: below, setting up each channel and
/// line costs more than the paired products save (measured: VWW's 12 × 12
/// and 6 × 6 layers are faster in [`super::depthwise_packed`], its 48 × 48
/// and 24 × 24 layers and KWS's 25 × 5 here).
const MIN_RUN: usize = 16;

/// Words of the ring per slot for a line of `run` outputs (each loop turn
/// computes two outputs, the last may be past the line).
fn pairs(run: usize) -> usize {
    run / 2 + 2
}

/// One axis as the ring sees it: where its taps lie and how far apart its
/// elements are in the input, the output and the filter.
#[derive(Clone, Copy)]
struct Line {
    axis: Axis,
    /// Bytes between neighbouring input elements along the axis.
    x_step: usize,
    /// Bytes between neighbouring outputs along the axis.
    out_step: usize,
    /// Bytes between neighbouring filter taps along the axis.
    w_step: usize,
}

/// Whether the ring takes `g`: 3×3, multiplier 1, stride 1, no dilation,
/// an output line of [`MIN_RUN`]..=[`MAX_RUN`] along one axis.
///
/// Strided layers stay with [`super::depthwise_packed`]: they copy two to
/// four input values into the ring per output, and the copy costs more
/// than the paired products save (measured on VWW's stride-2 layers).
#[inline(never)]
pub(super) fn applies(g: &Geometry) -> bool {
    lines(g).is_some()
}

/// The run axis and the step axis of `g`, if the ring takes it.
fn lines(g: &Geometry) -> Option<(Line, Line)> {
    let c = g.in_c as usize;
    if g.in_c != g.out_c || c == 0 {
        return None;
    }
    let square = [g.y, g.x]
        .iter()
        .all(|a| a.filter == 3 && a.dilation == 1 && a.stride == 1 && a.out_size > 0);
    if !square {
        return None;
    }
    let x = Line {
        axis: g.x,
        x_step: c,
        out_step: c,
        w_step: c,
    };
    let y = Line {
        axis: g.y,
        x_step: g.x.in_size as usize * c,
        out_step: g.x.out_size as usize * c,
        w_step: 3 * c,
    };
    let fits = |l: &Line| (MIN_RUN..=MAX_RUN).contains(&(l.axis.out_size as usize));
    // The longer output line runs (fewer set-ups per channel).
    let (run, step) = if g.y.out_size > g.x.out_size {
        (y, x)
    } else {
        (x, y)
    };
    if fits(&run) {
        Some((run, step))
    } else if fits(&step) {
        Some((step, run))
    } else {
        None
    }
}

/// Every output of `g` into `out` (`batches × oh × ow × channels`).
/// `Internal` if `g` is not one [`applies`] takes or the slices are shorter
/// than it says. Out of line, so that its ring and accumulators are on the
/// stack only while it runs.
#[inline(never)]
pub(super) fn run(g: &Geometry, ops: &Operands<'_>, out: &mut [i8]) -> Result<(), KernelError> {
    let Some((run, step)) = lines(g) else {
        return Err(KernelError::Internal);
    };
    let c = g.in_c as usize;
    let image_in = g.y.in_size as usize * g.x.in_size as usize * c;
    let image_out = g.y.out_size as usize * g.x.out_size as usize * c;
    let batches = g.batches as usize;
    if ops.x.len() < batches * image_in
        || out.len() < batches * image_out
        || ops.w.len() < 9 * c
        || ops.bias.is_some_and(|b| b.len() < c)
    {
        return Err(KernelError::Internal);
    }
    for b in 0..batches {
        let x = &ops.x[b * image_in..][..image_in];
        let o = &mut out[b * image_out..][..image_out];
        channels(&run, &step, ops, &mut Lines::Apart(x, o), c)?;
    }
    Ok(())
}

/// [`run`] over one buffer that holds the input and receives the output
/// (the lean schedule's in place): a layer whose output has its input's
/// shape (padding `SAME`, one batch). The ring makes that safe as it is:
/// output line `s` overwrites input line `s` of its channel only, after
/// the ring took that line and the next, and no later line reads it.
/// `Internal` if `g` is not such a layer or `io` is shorter.
#[inline(never)]
pub(super) fn run_over_input(
    g: &Geometry,
    ops: &Operands<'_>,
    io: &mut [i8],
) -> Result<(), KernelError> {
    let Some((run, step)) = lines(g) else {
        return Err(KernelError::Internal);
    };
    let c = g.in_c as usize;
    let same = g.y.in_size == g.y.out_size && g.x.in_size == g.x.out_size;
    let image = g.y.in_size as usize * g.x.in_size as usize * c;
    if !same
        || g.batches != 1
        || io.len() < image
        || ops.w.len() < 9 * c
        || ops.bias.is_some_and(|b| b.len() < c)
    {
        return Err(KernelError::Internal);
    }
    channels(&run, &step, ops, &mut Lines::Shared(&mut io[..image]), c)
}

/// The `c` channels of one image, from `lines`.
fn channels(
    run: &Line,
    step: &Line,
    ops: &Operands<'_>,
    lines: &mut Lines<'_, '_>,
    c: usize,
) -> Result<(), KernelError> {
    // Zeroed once: the columns over the padding are never written.
    let mut ring = [0u32; 3 * (MAX_RUN / 2 + 2)];
    let mut acc = [0i32; MAX_RUN + 1];
    let fast = ops.scales.fast();
    for ch in 0..c {
        if fast {
            channel::<true>(run, step, ops, lines, ch, &mut ring, &mut acc)?;
        } else {
            channel::<false>(run, step, ops, lines, ch, &mut ring, &mut acc)?;
        }
    }
    Ok(())
}

/// Where a channel's input lines come from and its output lines go.
enum Lines<'a, 'b> {
    /// An input and an output apart.
    Apart(&'a [i8], &'b mut [i8]),
    /// One buffer: the output written over the input.
    Shared(&'b mut [i8]),
}

impl Lines<'_, '_> {
    fn input(&self) -> &[i8] {
        match self {
            Lines::Apart(x, _) => x,
            Lines::Shared(io) => io,
        }
    }

    fn output(&mut self) -> &mut [i8] {
        match self {
            Lines::Apart(_, out) => out,
            Lines::Shared(io) => io,
        }
    }
}

/// Channel `ch` of one image: every output line along `run`, one per step
/// along `step`, through `ring` (zero over the padding columns) and `acc`.
/// `Internal` if the input or the output is shorter than the lines
/// (which [`run`] checked).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn channel<const FAST: bool>(
    run: &Line,
    step: &Line,
    ops: &Operands<'_>,
    lines: &mut Lines<'_, '_>,
    ch: usize,
    ring: &mut [u32; 3 * (MAX_RUN / 2 + 2)],
    acc: &mut [i32; MAX_RUN + 1],
) -> Result<(), KernelError> {
    let n = run.axis.out_size as usize;
    let pairs = pairs(n);
    let ring = &mut ring[..3 * pairs];
    // Filter line k (along the step axis) as the pairs (w0, w1), (w1, w2).
    let filter: [[u32; 2]; 3] = core::array::from_fn(|k| {
        let tap = |j: usize| i32::from(ops.w[k * step.w_step + j * run.w_step + ch]);
        [pack(tap(0), tap(1)), pack(tap(1), tap(2))]
    });
    // The filter's lines in the slots' order, for each slot that may hold
    // the window's first line (the ring rotates, the weights follow).
    let turned: [[[u32; 2]; 3]; 3] =
        core::array::from_fn(|first| core::array::from_fn(|slot| filter[(slot + 3 - first) % 3]));
    let (m, shift) = ops.scales.of(ch);
    let bias = ops.bias.map_or(0, |b| b[ch]);
    // Lines 0 and 1 of the padded input, then one more per output line:
    // padded line `s + 2` goes into slot `(s + 2) % 3`, and the window's
    // first line is in slot `s % 3`.
    fill(
        ring,
        pairs,
        0,
        run,
        step,
        lines.input(),
        ch,
        0,
        ops.x_offset,
    )?;
    fill(
        ring,
        pairs,
        1,
        run,
        step,
        lines.input(),
        ch,
        1,
        ops.x_offset,
    )?;
    let (mut first, mut last) = (0, 2);
    for s in 0..step.axis.out_size as usize {
        // The ring takes input line s + 1 before output line s is written
        // (over input line s, when the two share a buffer).
        fill(
            ring,
            pairs,
            last,
            run,
            step,
            lines.input(),
            ch,
            s + 2,
            ops.x_offset,
        )?;
        macs(ring, n, &turned[first], acc);
        (first, last) = (next_slot(first), next_slot(last));
        let out = lines.output();
        let at = s * step.out_step + ch;
        if at + (n - 1) * run.out_step >= out.len() {
            return Err(KernelError::Internal);
        }
        let o = out[at..].as_mut_ptr();
        for (i, &a) in acc[..n].iter().enumerate() {
            // SAFETY: the last of these outputs lies inside `out` (above).
            unsafe {
                *o.add(i * run.out_step) = ops.scales.one::<FAST>(a.wrapping_add(bias), m, shift);
            }
        }
    }
    Ok(())
}

/// The slot after `slot`.
#[inline(always)]
fn next_slot(slot: usize) -> usize {
    if slot == 2 { 0 } else { slot + 1 }
}

/// Writes input line `padded − pad` (along the step axis) of channel `ch`
/// into ring slot `slot`, each value plus `offset`; a line over the padding
/// is all zero. Only the words that hold input columns are written: the
/// columns over the padding stay as [`run`] zeroed them (a word that holds
/// one of each gets a zero for the padding half). `Internal` if the line's
/// last value lies past `x`.
#[allow(clippy::too_many_arguments)]
fn fill(
    ring: &mut [u32],
    pairs: usize,
    slot: usize,
    run: &Line,
    step: &Line,
    x: &[i8],
    ch: usize,
    padded: usize,
    offset: i32,
) -> Result<(), KernelError> {
    let line = padded as i32 - step.axis.pad;
    let pad = run.axis.pad as usize;
    // Columns of the ring that hold input (the rest stay zero).
    let (lo, hi) = (pad, (pad + run.axis.in_size as usize).min(2 * pairs));
    if hi <= lo {
        return Ok(());
    }
    let words = &mut ring[..3 * pairs];
    if line < 0 || line >= step.axis.in_size {
        for q in lo / 2..hi.div_ceil(2) {
            words[3 * q + slot] = 0;
        }
        return Ok(());
    }
    let xs = run.x_step;
    let base = line as usize * step.x_step + ch;
    let at = |col: usize| base + (col - pad) * xs;
    if at(hi - 1) >= x.len() {
        return Err(KernelError::Internal);
    }
    let value = |col: usize| i32::from(x[at(col)]) + offset;
    let mut q = lo / 2;
    if lo % 2 == 1 {
        words[3 * q + slot] = pack(0, value(lo));
        q += 1;
    }
    let whole = hi / 2;
    if q < whole {
        let offsets = splat16(offset);
        // SAFETY: the loads reach column 2 · whole − 1 ≤ hi − 1, whose
        // offset at(hi − 1) < x.len() (above); the stores reach word
        // 3 · (whole − 1) + slot < 3 · pairs, as whole ≤ pairs.
        unsafe {
            let mut src = x.as_ptr().add(at(2 * q));
            let mut dst = words.as_mut_ptr().add(3 * q + slot);
            for _ in q..whole {
                let (a, b) = (i32::from(*src), i32::from(*src.add(xs)));
                *dst = sadd16(pack(a, b), offsets);
                src = src.add(2 * xs);
                dst = dst.add(3);
            }
        }
    }
    if hi % 2 == 1 {
        words[3 * whole + slot] = pack(value(hi - 1), 0);
    }
    Ok(())
}

/// One output line's sums into `acc[..n]` (and `acc[n]` when `n` is odd):
/// output `i` of the line is `Σ_slot Σ_j w[slot][j] · v[slot][i + j]`, `v`
/// the ring's halfwords and `w[slot]` the pairs `(w0, w1), (w1, w2)`.
///
/// On the target one `asm!` loop computes two outputs a turn: per slot,
/// two word loads, and for each output one `SMLAD` and one halfword
/// multiply: 18 products in 12 multiplies and 6 loads.
fn macs(ring: &[u32], n: usize, w: &[[u32; 2]; 3], acc: &mut [i32; MAX_RUN + 1]) {
    let turns = n.div_ceil(2);
    let words = 3 * pairs(n);
    debug_assert!(ring.len() >= words && turns * 2 <= acc.len());
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    {
        let _ = words;
        // SAFETY: turn `t` reads ring words 3 · t + (0..=5), below
        // 3 · pairs(n) ≤ ring.len(); the turns write 2 · turns ≤ n + 1 ≤
        // MAX_RUN + 1 accumulators.
        unsafe {
            core::arch::asm!(
                "1:",
                "ldr {t}, [{p}]",
                "smuad {a0}, {t}, {w0a}",
                "smultb {a1}, {t}, {w0a}",
                "ldr {t}, [{p}, #12]",
                "smlabt {a0}, {t}, {w0b}, {a0}",
                "smlad {a1}, {t}, {w0b}, {a1}",
                "ldr {t}, [{p}, #4]",
                "smlad {a0}, {t}, {w1a}, {a0}",
                "smlatb {a1}, {t}, {w1a}, {a1}",
                "ldr {t}, [{p}, #16]",
                "smlabt {a0}, {t}, {w1b}, {a0}",
                "smlad {a1}, {t}, {w1b}, {a1}",
                "ldr {t}, [{p}, #8]",
                "smlad {a0}, {t}, {w2a}, {a0}",
                "smlatb {a1}, {t}, {w2a}, {a1}",
                "ldr {t}, [{p}, #20]",
                "smlabt {a0}, {t}, {w2b}, {a0}",
                "smlad {a1}, {t}, {w2b}, {a1}",
                "add {p}, {p}, #12",
                "strd {a0}, {a1}, [{acc}], #8",
                "cmp {p}, {end}",
                "bne 1b",
                p = inout(reg) ring.as_ptr() => _,
                end = in(reg) ring.as_ptr().add(3 * turns),
                acc = inout(reg) acc.as_mut_ptr() => _,
                w0a = in(reg) w[0][0],
                w0b = in(reg) w[0][1],
                w1a = in(reg) w[1][0],
                w1b = in(reg) w[1][1],
                w2a = in(reg) w[2][0],
                w2b = in(reg) w[2][1],
                t = out(reg) _,
                a0 = out(reg) _,
                a1 = out(reg) _,
                options(nostack),
            );
        }
    }
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    {
        let ring = &ring[..words];
        let value = |slot: usize, col: usize| -> i32 {
            let word = ring[(col / 2) * 3 + slot];
            i32::from((word >> (16 * (col % 2))) as u16 as i16)
        };
        let tap = |pair: u32, hi: bool| i32::from((pair >> (16 * u32::from(hi))) as u16 as i16);
        for (i, a) in acc[..2 * turns].iter_mut().enumerate() {
            *a = (0..3).fold(0i32, |sum, slot| {
                let [p01, p12] = w[slot];
                let ws = [tap(p01, false), tap(p01, true), tap(p12, true)];
                (0..3).fold(sum, |sum, j| sum.wrapping_add(ws[j] * value(slot, i + j)))
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stack_buffers_are_the_sizes_the_book_gives() {
        // docs/performance.md, "Depthwise line ring".
        assert_eq!(core::mem::size_of::<[u32; 3 * (MAX_RUN / 2 + 2)]>(), 792);
        assert_eq!(core::mem::size_of::<[i32; MAX_RUN + 1]>(), 516);
    }
}
