//! One pixel against four channels whose weights were widened to 16 bits
//! beforehand: the column kernel of CONV_2D's rows of evenly spaced pixels
//! (1×1 layers, im2col patches) on cores with the DSP extension.
//!
//! [`super::gemm_widened`]'s 2×2 blocks hold two pixels and two channels,
//! which leaves room for only two weight words at a time: each depth word
//! loads three weight pairs (`LDRD`, three cycles each and never
//! pipelined), one of them twice. Here the four sums of one pixel, its
//! input word unpacked once, and four weight words fill the twelve
//! registers an `asm!` block may name, and a channel quad's eight widened
//! words of a depth word come in with two `LDM`s of four (five cycles
//! each). Per depth word, sixteen multiply-adds take an input load, two
//! `SXTB16`, two `LDM` and eight `SMLAD`: 13 instructions and about 22
//! cycles on a Cortex-M4, against 17 and 25 for the 2×2 block.
//!
//! Off the target the block is emulated ([`super::arm_dsp`]), so it is
//! tested on the host against the plain sum.

#[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
use super::arm_dsp::mla2;
use super::arm_dsp::{sxtb16, sxtb16_ror8};
use super::quant_math::ChannelRequant;

/// Words a channel quad takes per depth word (two halfword pairs each).
pub(crate) const QUAD_PER_WORD: usize = 8;

/// Writes channel `k` (0..4) of a quad, weights `w` (a multiple of 4
/// long), widened: for depth word `j`, words `8j + 2k` and `8j + 2k + 1`
/// of `out` are its halfword pairs (bytes 0 and 2, bytes 1 and 3, as
/// `SXTB16` splits an input word).
#[inline(always)]
pub(crate) fn widen_quad_row(w: &[i8], k: usize, out: &mut [u32]) {
    let (ws, _) = w.as_chunks::<4>();
    let (o, _) = out.as_chunks_mut::<QUAD_PER_WORD>();
    let at = 2 * (k & 3);
    for (w, o) in ws.iter().zip(o) {
        let word = u32::from_le_bytes(w.map(|v| v as u8));
        o[at] = sxtb16(word);
        o[at + 1] = sxtb16_ror8(word);
    }
}

/// For `pixels` pixels at `x + i · stride`, each `4 · words` int8 values,
/// `sums[i][k] = start[k] + Σ w[k] · x[i]` against a channel quad's
/// weights widened by [`widen_quad_row`] (`8 · words` words at `w`).
///
/// # Safety
/// `4 · words` bytes must be readable at `x + i · stride` for every
/// `i < pixels`; `w` must be word-aligned with `8 · words` readable words;
/// `sums` must have `pixels` writable entries; `words`, `pixels >= 1`.
#[inline(never)]
pub(crate) unsafe fn column_1x4_wide_weights(
    x: *const i8,
    stride: usize,
    pixels: usize,
    w: *const u32,
    words: usize,
    start: [i32; 4],
    sums: *mut [i32; 4],
) {
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    // SAFETY: the caller's promise.
    unsafe {
        column_asm(x, stride, pixels, w, words, start, sums)
    }
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    for i in 0..pixels {
        let mut acc = start;
        for j in 0..words {
            // SAFETY: pixel i's depth word j and the quad's words for it
            // (the caller's promise).
            unsafe {
                let v = x.add(i * stride + 4 * j).cast::<u32>().read_unaligned();
                let (xa, xb) = (sxtb16(u32::from_le(v)), sxtb16_ror8(u32::from_le(v)));
                let q = w.add(QUAD_PER_WORD * j);
                for (k, a) in acc.iter_mut().enumerate() {
                    *a = mla2(xb, *q.add(2 * k + 1), mla2(xa, *q.add(2 * k), *a));
                }
            }
        }
        // SAFETY: sums has `pixels` entries (the caller's promise).
        unsafe { *sums.add(i) = acc };
    }
}

/// Requantises the sums of `sums.len()` pixels (a quad's four per pixel,
/// as [`column_1x4_wide_weights`] and [`windows_1x4_wide_weights`] leave
/// them) into `out[o + i · stride + c[k]]` for the quad's first `distinct`
/// channels: a column per channel in one loop of its form, its bounds
/// checked once. `sums` must not be empty.
#[inline(always)]
pub(crate) fn store_quad_columns(
    (c, distinct): ([usize; 4], usize),
    requant: &[ChannelRequant; 4],
    sums: &[[i32; 4]],
    (o, stride): (usize, usize),
    out: &mut [i8],
) {
    let n = sums.len();
    let flat = sums.as_flattened();
    for k in 0..distinct.min(4) {
        let column = &mut out[o + c[k]..][..(n - 1) * stride + 1];
        let (s, d) = (flat[k..].as_ptr(), column.as_mut_ptr());
        // SAFETY: i < n, so 4i + k < flat.len() and i · stride <
        // column.len().
        requant[k].apply_each(
            n,
            |i| unsafe { *s.add(4 * i) },
            |i, v| unsafe { *d.add(i * stride) = v },
        );
    }
}

/// One depth word: the input word (r10) unpacked into r12 and lr, the
/// quad's eight words in two `LDM`s into r0–r3 (r11), sums in r4, r5, r8
/// and r9.
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
macro_rules! quad_step {
    () => {
        concat!(
            "ldr lr, [r10], #4\n",
            "sxtb16 r12, lr\n",
            "sxtb16 lr, lr, ror #8\n",
            "ldm r11!, {{r0-r3}}\n",
            "smlad r4, r12, r0, r4\n",
            "smlad r4, lr, r1, r4\n",
            "smlad r5, r12, r2, r5\n",
            "smlad r5, lr, r3, r5\n",
            "ldm r11!, {{r0-r3}}\n",
            "smlad r8, r12, r0, r8\n",
            "smlad r8, lr, r1, r8\n",
            "smlad r9, r12, r2, r9\n",
            "smlad r9, lr, r3, r9\n",
        )
    };
}

/// A run of depth words through [`quad_step`], four a loop turn: r0 holds
/// the run's weight bytes (32 a word), `[sp]` the end of its weights. A
/// count that is not a multiple of four enters the turn at the step that
/// leaves a multiple (the loop test costs six cycles a turn: one turn in
/// four rather than in two).
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
macro_rules! quad_run {
    () => {
        concat!(
            // r1 = (words % 4) · 32: 0 → 2f, 32 → 5f, 64 → 6f, 96 → 7f.
            "ands r1, r0, #96\n",
            "beq 2f\n",
            "cmp r1, #64\n",
            "beq 6f\n",
            "bhi 7f\n",
            "b 5f\n",
            "2:\n",
            quad_step!(),
            "7:\n",
            quad_step!(),
            "6:\n",
            quad_step!(),
            "5:\n",
            quad_step!(),
            "ldr r0, [sp]\n",
            "cmp r11, r0\n",
            "bne 2b\n",
        )
    };
}

/// The end of a pixel (or window) of the quad loops: the input moves on by
/// the gap at `[sp + 8]`, and the count at `[sp + 12]` says whether another
/// follows (back to label 1).
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
macro_rules! next_pixel {
    () => {
        concat!(
            "ldr r0, [sp, #8]\n",
            "add r10, r10, r0\n",
            "ldr r0, [sp, #12]\n",
            "subs r0, r0, #1\n",
            "str r0, [sp, #12]\n",
            "bne 1b\n",
        )
    };
}

/// Four [`quad_step`]s.
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
macro_rules! quad_steps4 {
    () => {
        concat!(quad_step!(), quad_step!(), quad_step!(), quad_step!())
    };
}

/// [`quad_run`] for a count of depth words that is a multiple of 12
/// (3×3 filters over a multiple of 16 channels, ResNet-8's): twelve steps a
/// turn and no entry to pick, so a filter row of 12 words is one turn.
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
macro_rules! quad_run12 {
    () => {
        concat!(
            "2:\n",
            quad_steps4!(),
            quad_steps4!(),
            quad_steps4!(),
            "ldr r0, [sp]\n",
            "cmp r11, r0\n",
            "bne 2b\n",
        )
    };
}

/// [`column_1x4_wide_weights`] by hand: [`quad_run`] (four
/// [`quad_step`]s a loop turn) inside a loop over the pixels; the
/// column's constants on the stack, pushed from the registers they come
/// in: `[sp]` the end of the weights, `[sp + 4]` their bytes, `[sp + 8]`
/// the gap from one pixel's last word to the next pixel, `[sp + 12]` the
/// pixels left, `[sp + 16..32]` the four starting sums, `[sp + 32]` where
/// the next sums go.
///
/// # Safety
/// As [`column_1x4_wide_weights`].
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
#[inline(always)]
unsafe fn column_asm(
    x: *const i8,
    stride: usize,
    pixels: usize,
    w: *const u32,
    words: usize,
    start: [i32; 4],
    sums: *mut [i32; 4],
) {
    let bytes = 4 * QUAD_PER_WORD * words;
    let skip = stride.wrapping_sub(4 * words);
    // SAFETY: reads only the caller's promised bytes, writes only `sums`;
    // the nine words pushed are popped before the end.
    unsafe {
        core::arch::asm!(
            "push {{r0-r5, r8, r9, r12}}",
            "1:",
            "add lr, sp, #16",
            "ldm lr, {{r4, r5, r8, r9}}",
            "ldr r0, [sp, #4]",
            quad_run!(),
            "ldr r0, [sp, #32]",
            "stm r0!, {{r4, r5, r8, r9}}",
            "str r0, [sp, #32]",
            "ldr r0, [sp, #4]",
            "sub r11, r11, r0",
            next_pixel!(),
            "add sp, sp, #36",
            inout("r0") w.wrapping_byte_add(bytes) => _,
            inout("r1") bytes => _,
            inout("r2") skip => _,
            inout("r3") pixels => _,
            inout("r4") start[0] => _,
            inout("r5") start[1] => _,
            inout("r8") start[2] => _,
            inout("r9") start[3] => _,
            inout("r12") sums => _,
            inout("r10") x => _,
            inout("r11") w => _,
            out("lr") _,
        );
    }
}

/// For `count` windows at `x + i · step`, each `rows` runs of `4 · words`
/// int8 values with `x_gap` bytes after each run, `sums[i][k] = start[k] +
/// Σ w[k] · x[i]` against a channel quad's widened weights: run `r` reads
/// the `8 · words` words from `w + r · (8 · words + w_gap / 4)` (a border
/// window's valid taps are part of each widened filter row).
///
/// # Safety
/// Every run of every window must be readable; `w` word-aligned with
/// every run's words readable; `sums` must have `count` writable entries;
/// `words`, `rows`, `count >= 1`; `w_gap` a multiple of 4.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
pub(crate) unsafe fn windows_1x4_wide_weights(
    x: *const i8,
    step: usize,
    count: usize,
    w: *const u32,
    (words, rows, x_gap, w_gap): (usize, usize, usize, usize),
    start: [i32; 4],
    sums: *mut [i32; 4],
) {
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    {
        let run_bytes = 4 * QUAD_PER_WORD * words;
        let frame: [u32; 16] = [
            0,
            run_bytes as u32,
            step.wrapping_sub(rows * (4 * words + x_gap)) as u32,
            count as u32,
            sums as u32,
            x_gap as u32,
            w_gap as u32,
            rows as u32,
            0,
            (rows * (run_bytes + w_gap)) as u32,
            start[0] as u32,
            start[1] as u32,
            start[2] as u32,
            start[3] as u32,
            0,
            0,
        ];
        // SAFETY: the caller's promise.
        unsafe {
            if words.is_multiple_of(12) {
                windows_asm12(x, w, &frame)
            } else {
                windows_asm(x, w, &frame)
            }
        }
    }
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    for i in 0..count {
        let mut acc = start;
        for r in 0..rows {
            for j in 0..words {
                // SAFETY: window i's run r and the quad's words for it (the
                // caller's promise).
                unsafe {
                    let at = i * step + r * (4 * words + x_gap) + 4 * j;
                    let v = u32::from_le(x.add(at).cast::<u32>().read_unaligned());
                    let (xa, xb) = (sxtb16(v), sxtb16_ror8(v));
                    let q = w.add(r * (QUAD_PER_WORD * words + w_gap / 4) + QUAD_PER_WORD * j);
                    for (k, a) in acc.iter_mut().enumerate() {
                        *a = mla2(xb, *q.add(2 * k + 1), mla2(xa, *q.add(2 * k), *a));
                    }
                }
            }
        }
        // SAFETY: sums has `count` entries (the caller's promise).
        unsafe { *sums.add(i) = acc };
    }
}

/// Defines [`windows_1x4_wide_weights`] by hand: [`quad_step`]'s loop
/// inside a loop over the runs inside a loop over the windows, its constants copied
/// from `frame` to the stack: `[sp]` the end of the run's weights,
/// `[sp + 4]` a run's weight bytes, `[sp + 8]` the gap from a window's
/// last run to the next window, `[sp + 12]` the windows left, `[sp + 16]`
/// where the next sums go, `[sp + 20]` and `[sp + 24]` the input's and the
/// weights' gaps after a run, `[sp + 28]` the runs of a window, `[sp + 32]`
/// its runs left, `[sp + 36]` the weight bytes a window walks, `[sp +
/// 40..56]` the four starting sums. Defined around a run body
/// ([`quad_run`] or [`quad_run12`]).
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
macro_rules! windows_loop {
    ($(#[$doc:meta])* $name:ident, $run:expr) => {
        $(#[$doc])*
        #[inline(always)]
        unsafe fn $name(x: *const i8, w: *const u32, frame: &[u32; 16]) {
            // SAFETY: reads only the caller's promised bytes and `frame`, writes
            // only the sums; the 64 bytes taken from the stack are freed before
            // the end.
            unsafe {
                core::arch::asm!(
                    "sub sp, sp, #64",
                    "ldm lr!, {{r0-r5, r8, r9}}",
                    "stm sp, {{r0-r5, r8, r9}}",
                    "ldm lr, {{r0-r5, r8, r9}}",
                    "add lr, sp, #32",
                    "stm lr, {{r0-r5, r8, r9}}",
                    "1:",
                    "add lr, sp, #40",
                    "ldm lr, {{r4, r5, r8, r9}}",
                    "ldr r0, [sp, #28]",
                    "str r0, [sp, #32]",
                    "4:",
                    "ldr r0, [sp, #4]",
                    "add r1, r11, r0",
                    "str r1, [sp]",
                    $run,
                    "ldr r0, [sp, #20]",
                    "add r10, r10, r0",
                    "ldr r0, [sp, #24]",
                    "add r11, r11, r0",
                    "ldr r0, [sp, #32]",
                    "subs r0, r0, #1",
                    "str r0, [sp, #32]",
                    "bne 4b",
                    "ldr r0, [sp, #16]",
                    "stm r0!, {{r4, r5, r8, r9}}",
                    "str r0, [sp, #16]",
                    "ldr r0, [sp, #36]",
                    "sub r11, r11, r0",
                    next_pixel!(),
                    "add sp, sp, #64",
                    inout("lr") frame.as_ptr() => _,
                    inout("r10") x => _,
                    inout("r11") w => _,
                    out("r0") _,
                    out("r1") _,
                    out("r2") _,
                    out("r3") _,
                    out("r4") _,
                    out("r5") _,
                    out("r8") _,
                    out("r9") _,
                    out("r12") _,
                );
            }
        }
    };
}

#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
windows_loop!(
    /// [`windows_1x4_wide_weights`] with any count of depth words a run.
    ///
    /// # Safety
    /// As [`windows_1x4_wide_weights`].
    windows_asm,
    quad_run!()
);

#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
windows_loop!(
    /// [`windows_asm`] for runs of a multiple of 12 depth words.
    ///
    /// # Safety
    /// As [`windows_1x4_wide_weights`].
    windows_asm12,
    quad_run12!()
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quad_windows_are_the_plain_sums() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 32) as u8 as i8
        };
        // (words per run, runs, input gap, weight gap in depth words,
        // windows, step)
        for (words, rows, x_gap, skip, count, step) in [
            (1, 1, 0, 0, 1, 0),
            (3, 3, 8, 0, 5, 12),
            (2, 2, 4, 1, 3, 8),
            (4, 1, 0, 2, 2, 16),
        ] {
            let reach = (count - 1) * step + rows * (4 * words + x_gap);
            let x: Vec<i8> = (0..reach).map(|_| next()).collect();
            let row_words = words + skip;
            let w: Vec<i8> = (0..16 * row_words * rows).map(|_| next()).collect();
            let per = 4 * row_words * rows;
            let mut wide = vec![0u32; QUAD_PER_WORD * row_words * rows];
            for k in 0..4 {
                widen_quad_row(&w[k * per..][..per], k, &mut wide);
            }
            let start = [-3, 1 << 24, 0, 99];
            let mut sums = vec![[0i32; 4]; count];
            let w_gap = 4 * QUAD_PER_WORD * skip;
            // SAFETY: every run, its widened weights and the sums are whole.
            unsafe {
                windows_1x4_wide_weights(
                    x.as_ptr(),
                    step,
                    count,
                    wide.as_ptr(),
                    (words, rows, x_gap, w_gap),
                    start,
                    sums.as_mut_ptr(),
                );
            }
            for (i, got) in sums.iter().enumerate() {
                let want: [i32; 4] = core::array::from_fn(|k| {
                    let mut s = start[k];
                    for r in 0..rows {
                        for d in 0..4 * words {
                            let xv = x[i * step + r * (4 * words + x_gap) + d];
                            let wv = w[k * per + r * 4 * row_words + d];
                            s = s.wrapping_add(i32::from(xv) * i32::from(wv));
                        }
                    }
                    s
                });
                assert_eq!(*got, want, "{words} words, {rows} runs, window {i}");
            }
        }
    }

    #[test]
    fn quad_columns_are_the_plain_sums() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 32) as u8 as i8
        };
        for (words, pixels, gap) in [(1, 1, 0), (2, 3, 4), (5, 7, 1), (16, 9, 0), (3, 2, 13)] {
            let stride = 4 * words + gap;
            let x: Vec<i8> = (0..stride * pixels).map(|_| next()).collect();
            let w: Vec<i8> = (0..16 * words).map(|_| next()).collect();
            let mut wide = vec![0u32; QUAD_PER_WORD * words];
            for k in 0..4 {
                widen_quad_row(&w[k * 4 * words..][..4 * words], k, &mut wide);
            }
            let start = [7, -1 << 20, 0, i32::MAX - 70_000];
            let mut sums = vec![[0i32; 4]; pixels];
            // SAFETY: every pixel, the widened quad and the sums are whole.
            unsafe {
                let (xp, wp) = (x.as_ptr(), wide.as_ptr());
                column_1x4_wide_weights(xp, stride, pixels, wp, words, start, sums.as_mut_ptr());
            }
            for (i, got) in sums.iter().enumerate() {
                let want: [i32; 4] = core::array::from_fn(|k| {
                    let row = &w[k * 4 * words..][..4 * words];
                    let px = &x[i * stride..][..4 * words];
                    row.iter().zip(px).fold(start[k], |s, (&a, &b)| {
                        s.wrapping_add(i32::from(a) * i32::from(b))
                    })
                });
                assert_eq!(*got, want, "{words} words, pixel {i}");
            }
        }
    }
}
