//! 2×2 int8 blocks against weights widened to 16 bits beforehand: the
//! micro-kernels of CONV_2D on cores with the DSP extension.
//!
//! In [`super::gemm`]'s blocks every weight word is unpacked (two
//! `SXTB16`) again for every pair of pixels it meets. Here a channel
//! pair's weights are unpacked once for a whole layer ([`widen_one`]) into
//! a layout where the four halfword pairs of one depth word of both rows
//! are 16 consecutive bytes, read with `LDRD`; only the inputs are unpacked
//! in the loop. Per four depth steps of two pixels against two channels:
//! two input loads, four `SXTB16`, three `LDRD` and eight `SMLAD` — 17
//! instructions for 16 multiply-adds, against 23 when both sides are
//! unpacked.
//!
//! - [`rows_2x2_wide_weights`]: a window pair's filter rows read where they
//!   lie in the input;
//! - [`column_2x2_wide_weights`]: a column of pixel pairs whose rows are
//!   evenly spaced (1×1 pixels, im2col patches), all in one `asm!`.
//!
//! Off the target the instructions are emulated ([`super::arm_dsp`]), so
//! the blocks are tested on the host against the plain sum.

use super::arm_dsp::{mla2, sxtb16, sxtb16_ror8};
use super::quant_math::ChannelRequant;

/// Words a pixel pair takes per depth word (two halfword pairs each).
pub(crate) const WIDE_PER_WORD: usize = 4;

/// Writes a channel's weights `w` (a multiple of 4 long) widened into half
/// `half` (0 or 1) of a channel pair's words: for depth word `j`, words
/// `4j + 2·half` and `4j + 2·half + 1` of `out` are its halfword pairs
/// (bytes 0 and 2, bytes 1 and 3, as `SXTB16` splits an input word).
#[inline(always)]
pub(crate) fn widen_one(w: &[i8], half: usize, out: &mut [u32]) {
    let (ws, _) = w.as_chunks::<4>();
    let (o, _) = out.as_chunks_mut::<WIDE_PER_WORD>();
    let at = 2 * (half & 1);
    for (w, o) in ws.iter().zip(o) {
        let word = u32::from_le_bytes(w.map(|v| v as u8));
        o[at] = sxtb16(word);
        o[at + 1] = sxtb16_ror8(word);
    }
}

/// `acc[2p + c] + Σ w[c]·x[p]` over `rows` runs of `4 · words` int8
/// inputs per pixel (`x[p]`, the next run `gap` bytes after the end of the
/// last) against a channel pair's weights widened beforehand (`w`: the
/// pair's two rows as [`widen_one`] lays them out, one run after another). The weights are unpacked once per channel
/// pair for a whole layer; each input word here costs a load and two
/// `SXTB16`, and each pair of weight words one `LDRD`: 17 instructions for
/// 16 multiply-adds.
///
/// # Safety
/// For each run `r < rows` and pixel `p`, `4 · words` bytes must be
/// readable at `x[p] + r · (4 · words + gap)`; `w` must be word-aligned
/// with `4 · words · rows` readable words; `words` and `rows` at least 1.
#[inline(always)]
pub(crate) unsafe fn rows_2x2_wide_weights(
    x: [*const i8; 2],
    w: *const u32,
    words: usize,
    rows: usize,
    gap: usize,
    acc: [i32; 4],
) -> [i32; 4] {
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    {
        // SAFETY: the caller's promise.
        unsafe { rows_wide_weights_asm(x, w, words, rows, gap, acc) }
    }
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    {
        let [mut x0, mut x1] = x;
        let mut w = w;
        let mut a = acc;
        for _ in 0..rows {
            for _ in 0..words {
                // SAFETY: within the current run (the caller's promise).
                unsafe {
                    let ws: [u32; WIDE_PER_WORD] = core::array::from_fn(|i| *w.add(i));
                    let xs = [x0, x1].map(|p| p.cast::<u32>().read_unaligned());
                    for (p, xw) in xs.into_iter().enumerate() {
                        let (xa, xb) = (sxtb16(xw), sxtb16_ror8(xw));
                        for c in 0..2 {
                            let i = 2 * p + c;
                            a[i] = mla2(xb, ws[2 * c + 1], mla2(xa, ws[2 * c], a[i]));
                        }
                    }
                    (x0, x1, w) = (x0.add(4), x1.add(4), w.add(WIDE_PER_WORD));
                }
            }
            (x0, x1) = (x0.wrapping_add(gap), x1.wrapping_add(gap));
        }
        a
    }
}

/// Output pixels from which a layer widens its weights: each channel pair
/// pays for widening its rows once, and each pixel pair gains back about
/// a third of that, so layers of a handful of pixels (the last 1×1 layers
/// of a classifier) keep the unwidened kernels.
pub(crate) const WIDE_MIN_POSITIONS: usize = 16;

/// Pixel pairs whose sums are kept before they are requantised.
pub(crate) const MAX_PAIRS: usize = 64;

/// Requantises the sums of `n` pixels (pixel `i`'s in `sums[i / 2]`, as a
/// 2×2 block leaves them) into `out[o + i · stride + c]` for each channel
/// `c` of the pair (one for a last odd channel), a column per channel in
/// one loop of its form, its bounds checked once.
#[inline(always)]
pub(crate) fn store_columns(
    c: [usize; 2],
    requant: &[ChannelRequant; 2],
    sums: &[[i32; 4]],
    n: usize,
    (o, stride): (usize, usize),
    out: &mut [i8],
) {
    let flat = sums.as_flattened();
    let channels = if c[1] == c[0] { 1 } else { 2 };
    for (k, (&c, requant)) in c.iter().zip(requant).enumerate().take(channels) {
        let (sums, column) = (
            &flat[k..][..2 * n - 1],
            &mut out[o + c..][..(n - 1) * stride + 1],
        );
        let (s, d) = (sums.as_ptr(), column.as_mut_ptr());
        // SAFETY: i < n, so 2i < 2n - 1 = sums.len() and i · stride <
        // column.len().
        requant.apply_each(
            n,
            |i| unsafe { *s.add(2 * i) },
            |i, v| unsafe { *d.add(i * stride) = v },
        );
    }
}

/// `acc[c] + Σ w[c]·x` for one pixel's run `x` (a whole number of words)
/// against a channel pair's widened weights for it (`x.len()` words): the
/// single windows that have no neighbour with the same taps.
#[inline(always)]
pub(crate) fn row_1x2_wide_weights(x: &[i8], w: &[u32], acc: [i32; 2]) -> [i32; 2] {
    let (xs, _) = x.as_chunks::<4>();
    let (ws, _) = w.as_chunks::<WIDE_PER_WORD>();
    let [mut a0, mut a1] = acc;
    for (x, w) in xs.iter().zip(ws) {
        let word = u32::from_le_bytes(x.map(|v| v as u8));
        let (xa, xb) = (sxtb16(word), sxtb16_ror8(word));
        a0 = mla2(xb, w[1], mla2(xa, w[0], a0));
        a1 = mla2(xb, w[3], mla2(xa, w[2], a1));
    }
    [a0, a1]
}

/// One depth word of [`rows_2x2_wide_weights`] by hand: a weight `LDRD` per
/// channel (the first reloaded rather than held), an input load and two
/// `SXTB16` per pixel.
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
macro_rules! wide_weights_step {
    () => {
        concat!(
            "ldrd {wa}, {wb}, [{w}]\n",
            "ldr {xb}, [{x0}], #4\n",
            "sxtb16 {xa}, {xb}\n",
            "sxtb16 {xb}, {xb}, ror #8\n",
            "smlad {a00}, {xa}, {wa}, {a00}\n",
            "smlad {a00}, {xb}, {wb}, {a00}\n",
            "ldrd {wa}, {wb}, [{w}, #8]\n",
            "smlad {a01}, {xa}, {wa}, {a01}\n",
            "smlad {a01}, {xb}, {wb}, {a01}\n",
            "ldr {xb}, [{x1}], #4\n",
            "sxtb16 {xa}, {xb}\n",
            "sxtb16 {xb}, {xb}, ror #8\n",
            "smlad {a11}, {xa}, {wa}, {a11}\n",
            "smlad {a11}, {xb}, {wb}, {a11}\n",
            "ldrd {wa}, {wb}, [{w}], #16\n",
            "smlad {a10}, {xa}, {wa}, {a10}\n",
            "smlad {a10}, {xb}, {wb}, {a10}\n",
        )
    };
}

/// [`rows_2x2_wide_weights`] in one `asm!`: two depth words per loop turn
/// (an odd count enters at the second), the run length, the rows left and
/// the gap on the stack.
///
/// # Safety
/// As [`rows_2x2_wide_weights`].
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
#[inline(always)]
unsafe fn rows_wide_weights_asm(
    x: [*const i8; 2],
    w: *const u32,
    words: usize,
    rows: usize,
    gap: usize,
    acc: [i32; 4],
) -> [i32; 4] {
    let [mut a00, mut a01, mut a10, mut a11] = acc;
    // SAFETY: reads only the caller's promised bytes (LDRD at word-aligned
    // addresses); the three words pushed are popped before the end.
    unsafe {
        core::arch::asm!(
            "str {xa}, [sp, #-4]!",
            "str {wb}, [sp, #-4]!",
            "str {wa}, [sp, #-4]!",
            // [sp]: gap, [sp + 4]: rows left, [sp + 8]: 16 · words.
            "1:",
            "ldr {end}, [sp, #8]",
            "tst {end}, #16",
            "add {end}, {end}, {w}",
            "bne 3f",
            "2:",
            wide_weights_step!(),
            "3:",
            wide_weights_step!(),
            "cmp {w}, {end}",
            "bne 2b",
            "ldr {wa}, [sp]",
            "add {x0}, {x0}, {wa}",
            "add {x1}, {x1}, {wa}",
            "ldr {wa}, [sp, #4]",
            "subs {wa}, {wa}, #1",
            "str {wa}, [sp, #4]",
            "bne 1b",
            "add sp, sp, #12",
            x0 = inout(reg) x[0] => _,
            x1 = inout(reg) x[1] => _,
            w = inout(reg) w => _,
            end = out(reg) _,
            a00 = inout(reg) a00,
            a01 = inout(reg) a01,
            a10 = inout(reg) a10,
            a11 = inout(reg) a11,
            wa = inout(reg) gap => _,
            wb = inout(reg) rows => _,
            xa = inout(reg) 16 * words => _,
            xb = out(reg) _,
            options(readonly),
        );
    }
    [a00, a01, a10, a11]
}

/// [`rows_2x2_wide_weights`] with one run per pixel, over `pairs` pixel
/// pairs in a column: pair `i` is the pixels at `x + 2i · stride` and
/// `x + (2i + 1) · stride`, each `4 · words` int8 values; every pair starts
/// from `start` (one per channel) and its four sums go to `sums[i]`
/// (`[p0c0, p0c1, p1c0, p1c1]`). On the target the whole column is one
/// `asm!`, so a short filter pays no call per pixel pair.
///
/// # Safety
/// `4 · words` bytes must be readable at `x + j · stride` for every
/// `j < 2 · pairs`; `w` must be word-aligned with `4 · words` readable
/// words; `sums` must have `pairs` writable entries; `words`, `pairs >= 1`.
#[inline(never)]
pub(crate) unsafe fn column_2x2_wide_weights(
    x: *const i8,
    stride: usize,
    pairs: usize,
    w: *const u32,
    words: usize,
    start: [i32; 2],
    sums: *mut [i32; 4],
) {
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    // SAFETY: the caller's promise.
    unsafe {
        column_asm(x, stride, pairs, w, words, start, sums)
    }
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    for i in 0..pairs {
        // SAFETY: pair i's pixels and sum (the caller's promise).
        unsafe {
            let x0 = x.add(2 * i * stride);
            let acc = [start[0], start[1], start[0], start[1]];
            *sums.add(i) = rows_2x2_wide_weights([x0, x0.add(stride)], w, words, 1, 0, acc);
        }
    }
}

/// [`column_2x2_wide_weights`] by hand: [`wide_weights_step`]'s loop inside
/// a loop over the pixel pairs, its constants and counters on the stack.
///
/// # Safety
/// As [`column_2x2_wide_weights`].
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
#[inline(always)]
unsafe fn column_asm(
    x: *const i8,
    stride: usize,
    pairs: usize,
    w: *const u32,
    words: usize,
    start: [i32; 2],
    sums: *mut [i32; 4],
) {
    // After a pair, each input pointer has walked its 4 · words bytes and
    // moves on to the next pair's pixel.
    let skip = (2 * stride).wrapping_sub(4 * words);
    // SAFETY: reads only the caller's promised bytes, writes only `sums`;
    // the six words pushed are popped before the end.
    unsafe {
        core::arch::asm!(
            "str {xb}, [sp, #-4]!",
            "str {wa}, [sp, #-4]!",
            "str {wb}, [sp, #-4]!",
            "str {xa}, [sp, #-4]!",
            "strd {a00}, {a01}, [sp, #-8]!",
            // [sp]: start (two words), [sp + 8]: 16 · words, [sp + 12]:
            // the skip, [sp + 16]: pairs left, [sp + 20]: the next sums.
            "1:",
            "ldrd {a00}, {a01}, [sp]",
            "mov {a10}, {a00}",
            "mov {a11}, {a01}",
            "ldr {end}, [sp, #8]",
            "tst {end}, #16",
            "add {end}, {end}, {w}",
            "bne 3f",
            "2:",
            wide_weights_step!(),
            "3:",
            wide_weights_step!(),
            "cmp {w}, {end}",
            "bne 2b",
            "ldr {wa}, [sp, #20]",
            "strd {a00}, {a01}, [{wa}], #8",
            "strd {a10}, {a11}, [{wa}], #8",
            "str {wa}, [sp, #20]",
            "ldr {wa}, [sp, #8]",
            "sub {w}, {w}, {wa}",
            "ldr {wa}, [sp, #12]",
            "add {x0}, {x0}, {wa}",
            "add {x1}, {x1}, {wa}",
            "ldr {wa}, [sp, #16]",
            "subs {wa}, {wa}, #1",
            "str {wa}, [sp, #16]",
            "bne 1b",
            "add sp, sp, #24",
            x0 = inout(reg) x => _,
            x1 = inout(reg) x.wrapping_add(stride) => _,
            w = inout(reg) w => _,
            end = out(reg) _,
            a00 = inout(reg) start[0] => _,
            a01 = inout(reg) start[1] => _,
            a10 = out(reg) _,
            a11 = out(reg) _,
            wa = inout(reg) pairs => _,
            wb = inout(reg) skip => _,
            xa = inout(reg) 16 * words => _,
            xb = inout(reg) sums => _,
        );
    }
}

/// [`column_2x2_wide_weights`] for windows of `rows` runs: pair `i` is
/// the windows starting at `x + 2i · step` and `x + (2i + 1) · step`, each
/// `rows` runs of `4 · words` int8 values with `gap` bytes after each run;
/// `w` holds the pair's whole widened filter (`rows · words` depth words).
///
/// # Safety
/// For every window `j < 2 · pairs` and run `r < rows`, `4 · words` bytes
/// must be readable at `x + j · step + r · (4 · words + gap)`; `w` must be
/// word-aligned with `4 · words · rows` readable words; `sums` must have
/// `pairs` writable entries; `words`, `rows` and `pairs` at least 1.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
pub(crate) unsafe fn windows_2x2_wide_weights(
    x: *const i8,
    step: usize,
    pairs: usize,
    w: *const u32,
    (words, rows, gap): (usize, usize, usize),
    start: [i32; 2],
    sums: *mut [i32; 4],
) {
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    // SAFETY: the caller's promise.
    unsafe {
        windows_asm(x, step, pairs, w, (words, rows, gap), start, sums)
    }
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    for i in 0..pairs {
        // SAFETY: pair i's windows and sum (the caller's promise).
        unsafe {
            let x0 = x.add(2 * i * step);
            let acc = [start[0], start[1], start[0], start[1]];
            *sums.add(i) = rows_2x2_wide_weights([x0, x0.add(step)], w, words, rows, gap, acc);
        }
    }
}

/// [`windows_2x2_wide_weights`] by hand: [`wide_weights_step`]'s loop
/// inside a loop over the runs inside a loop over the window pairs, its
/// constants and counters on the stack.
///
/// # Safety
/// As [`windows_2x2_wide_weights`].
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
#[inline(always)]
unsafe fn windows_asm(
    x: *const i8,
    step: usize,
    pairs: usize,
    w: *const u32,
    (words, rows, gap): (usize, usize, usize),
    start: [i32; 2],
    sums: *mut [i32; 4],
) {
    // After a pair each input pointer has walked its window's runs and
    // gaps; it moves on to the next pair's window.
    let walked = rows * (4 * words + gap);
    let skip = (2 * step).wrapping_sub(walked);
    // SAFETY: reads only the caller's promised bytes, writes only `sums`;
    // the frame is freed before the end.
    unsafe {
        core::arch::asm!(
            "sub sp, sp, #40",
            "strd {a00}, {a01}, [sp]",
            "str {xa}, [sp, #8]",
            "str {wb}, [sp, #12]",
            "str {wa}, [sp, #16]",
            "str {xb}, [sp, #20]",
            "str {a10}, [sp, #24]",
            "str {a11}, [sp, #28]",
            "str {end}, [sp, #36]",
            // [sp]: start (two words), [sp + 8]: 16 · words, [sp + 12]:
            // the skip, [sp + 16]: pairs left, [sp + 20]: the next sums,
            // [sp + 24]: the gap, [sp + 28]: rows, [sp + 32]: runs left,
            // [sp + 36]: the filter's widened bytes.
            "1:",
            "ldrd {a00}, {a01}, [sp]",
            "mov {a10}, {a00}",
            "mov {a11}, {a01}",
            "ldr {wa}, [sp, #28]",
            "str {wa}, [sp, #32]",
            "4:",
            "ldr {end}, [sp, #8]",
            "tst {end}, #16",
            "add {end}, {end}, {w}",
            "bne 3f",
            "2:",
            wide_weights_step!(),
            "3:",
            wide_weights_step!(),
            "cmp {w}, {end}",
            "bne 2b",
            "ldr {wa}, [sp, #24]",
            "add {x0}, {x0}, {wa}",
            "add {x1}, {x1}, {wa}",
            "ldr {wa}, [sp, #32]",
            "subs {wa}, {wa}, #1",
            "str {wa}, [sp, #32]",
            "bne 4b",
            "ldr {wa}, [sp, #20]",
            "strd {a00}, {a01}, [{wa}], #8",
            "strd {a10}, {a11}, [{wa}], #8",
            "str {wa}, [sp, #20]",
            "ldr {wa}, [sp, #36]",
            "sub {w}, {w}, {wa}",
            "ldr {wa}, [sp, #12]",
            "add {x0}, {x0}, {wa}",
            "add {x1}, {x1}, {wa}",
            "ldr {wa}, [sp, #16]",
            "subs {wa}, {wa}, #1",
            "str {wa}, [sp, #16]",
            "bne 1b",
            "add sp, sp, #40",
            x0 = inout(reg) x => _,
            x1 = inout(reg) x.wrapping_add(step) => _,
            w = inout(reg) w => _,
            end = inout(reg) 16 * words * rows => _,
            a00 = inout(reg) start[0] => _,
            a01 = inout(reg) start[1] => _,
            a10 = inout(reg) gap => _,
            a11 = inout(reg) rows => _,
            wa = inout(reg) pairs => _,
            wb = inout(reg) skip => _,
            xa = inout(reg) 16 * words => _,
            xb = inout(reg) sums => _,
        );
    }
}

/// One depth word of [`blocks_1x4_wide_input`] by hand: the input's two
/// halfword pairs by `LDRD`, then each row's word unpacked against them.
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
macro_rules! wide_input_step {
    () => {
        concat!(
            "ldrd {xa}, {xb}, [{x}], #8\n",
            "ldr {wa}, [{w0}, {n}]\n",
            "sxtb16 {wb}, {wa}, ror #8\n",
            "sxtb16 {wa}, {wa}\n",
            "smlad {a1}, {xa}, {wa}, {a1}\n",
            "smlad {a1}, {xb}, {wb}, {a1}\n",
            "ldr {wa}, [{w0}], #4\n",
            "sxtb16 {wb}, {wa}, ror #8\n",
            "sxtb16 {wa}, {wa}\n",
            "smlad {a0}, {xa}, {wa}, {a0}\n",
            "smlad {a0}, {xb}, {wb}, {a0}\n",
            "ldr {wa}, [{w2}, {n}]\n",
            "sxtb16 {wb}, {wa}, ror #8\n",
            "sxtb16 {wa}, {wa}\n",
            "smlad {a3}, {xa}, {wa}, {a3}\n",
            "smlad {a3}, {xb}, {wb}, {a3}\n",
            "ldr {wa}, [{w2}], #4\n",
            "sxtb16 {wb}, {wa}, ror #8\n",
            "sxtb16 {wa}, {wa}\n",
            "smlad {a2}, {xa}, {wa}, {a2}\n",
            "smlad {a2}, {xb}, {wb}, {a2}\n",
        )
    };
}

/// Writes a FULLY_CONNECTED input (a multiple of 4 long) widened for
/// [`blocks_1x4_wide_input`]: for depth word `j`, words `2j` and `2j + 1` of
/// `out` are its halfword pairs (bytes 0 and 2, bytes 1 and 3), each value
/// plus `offset` (`-127..=128`, so every sum fits 16 bits).
#[inline(always)]
pub(crate) fn widen_input(x: &[i8], offset: i32, out: &mut [u32]) {
    let off = super::arm_dsp::splat16(offset);
    let (xs, _) = x.as_chunks::<4>();
    let (o, _) = out.as_chunks_mut::<2>();
    for (x, o) in xs.iter().zip(o) {
        let word = u32::from_le_bytes(x.map(|v| v as u8));
        *o = [
            super::arm_dsp::sadd16(sxtb16(word), off),
            super::arm_dsp::sadd16(sxtb16_ror8(word), off),
        ];
    }
}

/// `Σ w[c][i] · (x[i] + offset)` for `4 · blocks` consecutive weight rows
/// of `n` values (`n` a multiple of 16), four rows at a time, the input
/// widened once by [`widen_input`] (`n / 2` words); `sums[b]` gets block
/// `b`'s four sums. Per four depth steps of a block, one `LDRD` of the
/// input and, per row, a load, two `SXTB16` and two `SMLAD`: 21
/// instructions for 16 multiply-adds, where unpacking and offsetting the
/// input for every block costs 26. On the target the whole run of blocks
/// is one `asm!`, four depth words per loop turn.
#[inline(never)]
pub(crate) fn blocks_1x4_wide_input(x: &[u32], weights: &[i8], n: usize, sums: &mut [[i32; 4]]) {
    let words = n / 4;
    let blocks = sums.len();
    let (x, weights) = (&x[..2 * words], &weights[..4 * n * blocks]);
    if words == 0 || blocks == 0 {
        sums.fill([0; 4]);
        return;
    }
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    {
        debug_assert!(words.is_multiple_of(4));
        // SAFETY: for every block, reads `x`'s 2 · words aligned words and
        // the block's four rows of n bytes (weights holds 4 · n · blocks);
        // writes `sums`' blocks entries; the frame is freed before the end.
        unsafe {
            core::arch::asm!(
                "sub sp, sp, #12",
                "str {x}, [sp]",
                "add {wb}, {x}, {wa}, lsl #3",
                "str {wb}, [sp, #4]",
                "str {xb}, [sp, #8]",
                // [sp]: the input, [sp + 4]: its end, [sp + 8]: blocks
                // left; {xa} walks the sums.
                "1:",
                "mov {a0}, #0",
                "mov {a1}, #0",
                "mov {a2}, #0",
                "mov {a3}, #0",
                "ldr {x}, [sp]",
                "str {xa}, [sp, #-4]!",
                "2:",
                wide_input_step!(),
                wide_input_step!(),
                wide_input_step!(),
                wide_input_step!(),
                "ldr {wa}, [sp, #8]",
                "cmp {x}, {wa}",
                "bne 2b",
                "ldr {xa}, [sp], #4",
                "strd {a0}, {a1}, [{xa}], #8",
                "strd {a2}, {a3}, [{xa}], #8",
                // The rows walked one row's length: on to the next block.
                "add {w0}, {w0}, {n}, lsl #1",
                "add {w0}, {w0}, {n}",
                "add {w2}, {w2}, {n}, lsl #1",
                "add {w2}, {w2}, {n}",
                "ldr {wa}, [sp, #8]",
                "subs {wa}, {wa}, #1",
                "str {wa}, [sp, #8]",
                "bne 1b",
                "add sp, sp, #12",
                x = inout(reg) x.as_ptr() => _,
                w0 = inout(reg) weights.as_ptr() => _,
                w2 = inout(reg) weights.as_ptr().add(2 * n) => _,
                n = in(reg) n,
                a0 = out(reg) _,
                a1 = out(reg) _,
                a2 = out(reg) _,
                a3 = out(reg) _,
                xa = inout(reg) sums.as_mut_ptr() => _,
                xb = inout(reg) blocks => _,
                wa = inout(reg) words => _,
                wb = out(reg) _,
            );
        }
    }
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    for (sum, block) in sums.iter_mut().zip(weights.chunks_exact(4 * n)) {
        let (xs, _) = x.as_chunks::<2>();
        *sum = core::array::from_fn(|r| {
            let (ws, _) = block[r * n..][..n].as_chunks::<4>();
            ws.iter().zip(xs).fold(0i32, |a, (w, x)| {
                let word = u32::from_le_bytes(w.map(|v| v as u8));
                mla2(x[1], sxtb16_ror8(word), mla2(x[0], sxtb16(word), a))
            })
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize, seed: u32) -> Vec<i8> {
        let mut s = seed.wrapping_mul(2_654_435_761) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s >> 24) as u8 as i8
            })
            .collect()
    }

    #[test]
    fn windows_are_their_pairs_blocks() {
        // (words, rows, gap, step, pairs)
        for (words, rows, gap, step, pairs, seed) in [
            (1, 1, 0, 4, 1, 1),
            (2, 3, 12, 8, 3, 2),
            (4, 3, 40, 16, 2, 3),
            (3, 2, 4, 0, 1, 4),
        ] {
            let reach = 2 * pairs * step + rows * (4 * words + gap) + 4;
            let xs = bytes(reach, seed);
            let w = [
                bytes(4 * words * rows, seed + 20),
                bytes(4 * words * rows, seed + 30),
            ];
            let mut wide = vec![0u32; 4 * words * rows];
            for (half, w) in w.iter().enumerate() {
                widen_one(w, half, &mut wide);
            }
            let mut sums = vec![[0i32; 4]; pairs];
            // SAFETY: the lengths above.
            unsafe {
                windows_2x2_wide_weights(
                    xs.as_ptr(),
                    step,
                    pairs,
                    wide.as_ptr(),
                    (words, rows, gap),
                    [9, -2],
                    sums.as_mut_ptr(),
                );
            }
            for (i, got) in sums.iter().enumerate() {
                for p in 0..2 {
                    for c in 0..2 {
                        let mut sum = [9, -2][c];
                        for r in 0..rows {
                            let x = &xs[(2 * i + p) * step + r * (4 * words + gap)..][..4 * words];
                            let w = &w[c][r * 4 * words..][..4 * words];
                            sum += x
                                .iter()
                                .zip(w)
                                .map(|(&x, &w)| i32::from(x) * i32::from(w))
                                .sum::<i32>();
                        }
                        assert_eq!(
                            got[2 * p + c],
                            sum,
                            "words {words} rows {rows} pair {i} p {p} c {c}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn one_pixel_against_widened_weights_is_the_plain_sum() {
        for (n, seed) in [(4, 1), (12, 2), (64, 3)] {
            let x = bytes(n, seed);
            let w = [bytes(n, seed + 20), bytes(n, seed + 30)];
            let mut wide = vec![0u32; n];
            for (half, w) in w.iter().enumerate() {
                widen_one(w, half, &mut wide);
            }
            let got = row_1x2_wide_weights(&x, &wide, [5, -6]);
            for c in 0..2 {
                let sum = x
                    .iter()
                    .zip(&w[c])
                    .fold([5, -6][c], |a, (&x, &w)| a + i32::from(x) * i32::from(w));
                assert_eq!(got[c], sum, "n {n} c {c}");
            }
        }
    }

    #[test]
    fn blocks_of_four_rows_against_a_widened_input_are_the_plain_sums() {
        for (n, blocks, seed) in [(16, 1, 1), (32, 3, 2), (640, 2, 3), (128, 5, 4)] {
            for offset in [-127, 128, 0, 5] {
                let x = bytes(n, seed);
                let weights = bytes(4 * n * blocks, seed + 9);
                let mut wide = vec![0u32; n / 2];
                widen_input(&x, offset, &mut wide);
                let mut sums = vec![[0i32; 4]; blocks];
                blocks_1x4_wide_input(&wide, &weights, n, &mut sums);
                for (row, w) in weights.chunks_exact(n).enumerate() {
                    let want: i32 = w
                        .iter()
                        .zip(&x)
                        .map(|(&w, &x)| i32::from(w) * (i32::from(x) + offset))
                        .sum();
                    assert_eq!(
                        sums[row / 4][row % 4],
                        want,
                        "n {n} offset {offset} row {row}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_column_is_its_pairs_blocks() {
        for (words, pairs, stride, seed) in
            [(1, 1, 4, 1), (2, 3, 8, 2), (3, 2, 20, 3), (7, 5, 28, 4)]
        {
            let xs = bytes(2 * pairs * stride, seed);
            let w = [bytes(4 * words, seed + 20), bytes(4 * words, seed + 30)];
            let mut wide = vec![0u32; 4 * words];
            for (half, w) in w.iter().enumerate() {
                widen_one(w, half, &mut wide);
            }
            let mut sums = vec![[0i32; 4]; pairs];
            // SAFETY: the lengths above.
            unsafe {
                column_2x2_wide_weights(
                    xs.as_ptr(),
                    stride,
                    pairs,
                    wide.as_ptr(),
                    words,
                    [9, -2],
                    sums.as_mut_ptr(),
                );
            }
            for (i, got) in sums.iter().enumerate() {
                for p in 0..2 {
                    for c in 0..2 {
                        let x = &xs[(2 * i + p) * stride..][..4 * words];
                        let sum = x
                            .iter()
                            .zip(&w[c])
                            .fold([9, -2][c], |a, (&x, &w)| a + i32::from(x) * i32::from(w));
                        assert_eq!(got[2 * p + c], sum, "words {words} pair {i} p {p} c {c}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_block_with_widened_weights_is_the_plain_sum() {
        // (words per run, rows, gap)
        for (words, rows, gap, seed) in [(1, 1, 0, 1), (2, 3, 5, 2), (3, 2, 0, 3), (16, 3, 40, 4)] {
            let run = 4 * words;
            let x_len = rows * (run + gap);
            let xs = [bytes(x_len + 4, seed), bytes(x_len + 4, seed + 7)];
            let w = [bytes(rows * run, seed + 20), bytes(rows * run, seed + 30)];
            let mut wide = vec![0u32; rows * run];
            for (half, w) in w.iter().enumerate() {
                widen_one(w, half, &mut wide);
            }
            let start = [3, -4, 1 << 21, -7];
            // SAFETY: the lengths above.
            let got = unsafe {
                rows_2x2_wide_weights(
                    [xs[0].as_ptr(), xs[1].as_ptr()],
                    wide.as_ptr(),
                    words,
                    rows,
                    gap,
                    start,
                )
            };
            for p in 0..2 {
                for c in 0..2 {
                    let mut sum = start[2 * p + c];
                    for r in 0..rows {
                        for i in 0..run {
                            let x = xs[p][r * (run + gap) + i];
                            sum += i32::from(x) * i32::from(w[c][r * run + i]);
                        }
                    }
                    assert_eq!(got[2 * p + c], sum, "words {words} rows {rows} p {p} c {c}");
                }
            }
        }
    }
}
