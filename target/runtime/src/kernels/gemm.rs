//! Register-blocked int8 inner products for cores with the DSP extension
//! (the micro-kernels of CONV_2D and FULLY_CONNECTED on Cortex-M4/M7/M33).
//!
//! A word of four int8 values unpacks with two `SXTB16` into the halfword
//! pairs (bytes 0, 2) and (bytes 1, 3); a weight word unpacked the same way
//! pairs up with it, and two `SMLAD` add the four products. Unpacking is
//! what costs: an unpacked word is used by every accumulator it meets, so
//! the blocks below keep several accumulators in registers:
//!
//! - [`block_2x2`]: two input rows (output positions) × two weight rows
//!   (output channels); per four depth steps two input and two weight words,
//!   eight unpacks, eight `SMLAD`: 20 instructions for 16 multiply-adds.
//! - [`block_1x2`]: one position against two channels, for a leftover position.
//! - [`row_1x4`]: one input row against four weight rows (FULLY_CONNECTED,
//!   whose weights are used once): 25 instructions for 16 multiply-adds.
//! - [`pairs_1x2`]: an im2col patch already widened to 16 bits (offset
//!   added, padded taps 0) in the pair order [`permute_pairs`] gives it, so
//!   the input costs one load per four depth steps: 11 for 8.
//!
//! `OFFSET` says whether `x + offset` is multiplied (TFLM's formula) or `x`
//! alone (the caller folded `offset · Σ w` into the accumulator's start).
//! Rows need not be aligned: Cortex-M's `LDR` takes any address. Depths
//! that are not a multiple of four finish with plain scalar steps.
//!
//! Off the target the instructions are emulated ([`super::arm_dsp`]), so
//! these are tested on the host against the plain loops.

use super::arm_dsp::{mla2, sadd16, splat16, sxtb16, sxtb16_ror8};

/// The word at `p` (any alignment).
///
/// # Safety
/// `p..p + 4` must be readable.
#[inline(always)]
unsafe fn load(p: *const i8) -> u32 {
    // SAFETY: the caller's promise.
    unsafe { p.cast::<u32>().read_unaligned() }
}

/// A word's two halfword pairs, offset in both halves when `OFFSET`.
#[inline(always)]
fn unpack<const OFFSET: bool>(word: u32, off: u32) -> (u32, u32) {
    let (a, b) = (sxtb16(word), sxtb16_ror8(word));
    if OFFSET {
        (sadd16(a, off), sadd16(b, off))
    } else {
        (a, b)
    }
}

/// `Σ w·(x + offset)` (or `Σ w·x`) over the scalar tail of a row.
#[inline(always)]
fn tail<const OFFSET: bool>(x: &[i8], w: &[i8], offset: i32) -> i32 {
    let offset = if OFFSET { offset } else { 0 };
    x.iter().zip(w).fold(0i32, |acc, (&x, &w)| {
        acc.wrapping_add(i32::from(w) * (i32::from(x) + offset))
    })
}

/// `acc[2p + c] + Σ_i w[c][i] · (x[p][i] + offset)` for positions `p` and
/// channels `c` in `0..2`, over `x[0].len()` depth steps (`offset` in
/// `-128..=128` only counts when `OFFSET`). Every row must be that long.
#[inline(always)]
pub(crate) fn block_2x2<const OFFSET: bool>(
    x: [&[i8]; 2],
    w: [&[i8]; 2],
    offset: i32,
    acc: [i32; 4],
) -> [i32; 4] {
    let n = x[0].len();
    let (x0, x1, w0, w1) = (&x[0][..n], &x[1][..n], &w[0][..n], &w[1][..n]);
    let off = splat16(offset);
    let mut a = acc;
    let words = n / 4;
    // SAFETY: every row holds `n >= 4 · words` bytes, and each pointer
    // below stays within its own row's first `4 · words` bytes.
    unsafe {
        #[cfg_attr(not(all(target_arch = "arm", feature = "arm-dsp")), allow(unused_mut))]
        let mut ptrs = [x0.as_ptr(), x1.as_ptr(), w0.as_ptr(), w1.as_ptr()];
        #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
        if !OFFSET && words >= 2 {
            word_pairs_2x2(&mut ptrs, words / 2, &mut a);
        }
        let [mut p0, mut p1, mut q0, mut q1] = ptrs;
        let end = x0.as_ptr().add(words * 4);
        while p0 != end {
            step_2x2::<OFFSET>(&mut a, [load(p0), load(p1)], [load(q0), load(q1)], off);
            (p0, p1, q0, q1) = (p0.add(4), p1.add(4), q0.add(4), q1.add(4));
        }
    }
    let done = words * 4;
    let t = |x: &[i8], w: &[i8]| tail::<OFFSET>(&x[done..], &w[done..], offset);
    [
        a[0].wrapping_add(t(x0, w0)),
        a[1].wrapping_add(t(x0, w1)),
        a[2].wrapping_add(t(x1, w0)),
        a[3].wrapping_add(t(x1, w1)),
    ]
}

/// One word of each row into a 2×2 block (`acc[2p + c]`).
#[inline(always)]
fn step_2x2<const OFFSET: bool>(acc: &mut [i32; 4], x: [u32; 2], w: [u32; 2], off: u32) {
    let (x0a, x0b) = unpack::<OFFSET>(x[0], off);
    let (x1a, x1b) = unpack::<OFFSET>(x[1], off);
    let (w0a, w0b) = unpack::<false>(w[0], 0);
    acc[0] = mla2(x0b, w0b, mla2(x0a, w0a, acc[0]));
    acc[2] = mla2(x1b, w0b, mla2(x1a, w0a, acc[2]));
    let (w1a, w1b) = unpack::<false>(w[1], 0);
    acc[1] = mla2(x0b, w1b, mla2(x0a, w1a, acc[1]));
    acc[3] = mla2(x1b, w1b, mla2(x1a, w1a, acc[3]));
}

/// The raw 2×2 block's main loop by hand: `pairs` times two words of each
/// row, advancing the four pointers past them. The compiler's schedule of
/// the same instructions keeps more values live than the twelve registers
/// `asm!` can have (r6, r7 reserved) and spills inside the loop; this one
/// fits them exactly, reloading the second input word once per word
/// instead (23 instructions per 16 multiply-adds), and keeps the loop end
/// on the stack.
///
/// # Safety
/// Each of the four pointers must have `8 · pairs` readable bytes, and
/// `pairs >= 1`.
/// The 2×2 block's inner step, twice: a word of each of the two pixels'
/// inputs (`p0`, `p1`) against a word of each channel's weights (`q0`,
/// `q1`), four int8 pairs into the four accumulators (one input word is
/// reloaded rather than held, for want of a register). One text for every
/// loop that walks the block.
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
macro_rules! two_pair_steps_2x2 {
    () => {
        concat!(
            ".rept 2\n",
            "ldr {t1}, [{p1}], #4\n",
            "ldr {t3}, [{q0}], #4\n",
            "sxtb16 {t2}, {t1}\n",
            "sxtb16 {t1}, {t1}, ror #8\n",
            "sxtb16 {t4}, {t3}\n",
            "sxtb16 {t3}, {t3}, ror #8\n",
            "smlad {a10}, {t2}, {t4}, {a10}\n",
            "smlad {a10}, {t1}, {t3}, {a10}\n",
            "ldr {t1}, [{p0}], #4\n",
            "sxtb16 {t2}, {t1}\n",
            "sxtb16 {t1}, {t1}, ror #8\n",
            "smlad {a00}, {t2}, {t4}, {a00}\n",
            "smlad {a00}, {t1}, {t3}, {a00}\n",
            "ldr {t3}, [{q1}], #4\n",
            "sxtb16 {t4}, {t3}\n",
            "sxtb16 {t3}, {t3}, ror #8\n",
            "smlad {a01}, {t2}, {t4}, {a01}\n",
            "smlad {a01}, {t1}, {t3}, {a01}\n",
            "ldr {t1}, [{p1}, #-4]\n",
            "sxtb16 {t2}, {t1}\n",
            "sxtb16 {t1}, {t1}, ror #8\n",
            "smlad {a11}, {t2}, {t4}, {a11}\n",
            "smlad {a11}, {t1}, {t3}, {a11}\n",
            ".endr\n",
        )
    };
}

#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
#[inline(always)]
unsafe fn word_pairs_2x2(ptrs: &mut [*const i8; 4], pairs: usize, acc: &mut [i32; 4]) {
    let [mut p0, mut p1, mut q0, mut q1] = *ptrs;
    let [mut a00, mut a01, mut a10, mut a11] = *acc;
    // SAFETY: reads only the caller's promised bytes; the one word pushed
    // is popped before the block ends.
    unsafe {
        let end = p0.add(8 * pairs);
        core::arch::asm!(
            "push {{{t4}}}",
            "2:",
            two_pair_steps_2x2!(),
            "ldr {t4}, [sp]",
            "cmp {p0}, {t4}",
            "bne 2b",
            "add sp, sp, #4",
            p0 = inout(reg) p0,
            p1 = inout(reg) p1,
            q0 = inout(reg) q0,
            q1 = inout(reg) q1,
            a00 = inout(reg) a00,
            a01 = inout(reg) a01,
            a10 = inout(reg) a10,
            a11 = inout(reg) a11,
            t1 = out(reg) _,
            t2 = out(reg) _,
            t3 = out(reg) _,
            t4 = inout(reg) end => _,
            options(readonly),
        );
    }
    *ptrs = [p0, p1, q0, q1];
    *acc = [a00, a01, a10, a11];
}

/// A raw 2×2 block over `rows` runs of `8 · pairs` bytes: the input
/// pointers `ptrs[0..2]` skip `gap` bytes after each run, the weight
/// pointers `ptrs[2..4]` run on (an interior window's filter rows, or one
/// 1×1 pixel with `rows = 1`). Adds `Σ w·x` into `acc` as [`block_2x2`]
/// does, with no per-run call: on the target the whole walk is one `asm!`.
///
/// # Safety
/// For every run `r < rows`, `8 · pairs` bytes must be readable from
/// `ptrs[p] + r · (8 · pairs + gap)` (inputs) and `ptrs[c] + r · 8 · pairs`
/// (weights); `pairs` and `rows` at least 1.
#[inline(always)]
pub(crate) unsafe fn rows_2x2(
    ptrs: [*const i8; 4],
    pairs: usize,
    rows: usize,
    gap: usize,
    acc: [i32; 4],
) -> [i32; 4] {
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    {
        // SAFETY: the caller's promise.
        unsafe { rows_2x2_asm(ptrs, pairs, rows, gap, acc) }
    }
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    {
        let [mut p0, mut p1, mut q0, mut q1] = ptrs;
        let mut a = acc;
        for _ in 0..rows {
            for _ in 0..2 * pairs {
                // SAFETY: within the current run (the caller's promise).
                unsafe {
                    step_2x2::<false>(&mut a, [load(p0), load(p1)], [load(q0), load(q1)], 0);
                    (p0, p1, q0, q1) = (p0.add(4), p1.add(4), q0.add(4), q1.add(4));
                }
            }
            (p0, p1) = (p0.wrapping_add(gap), p1.wrapping_add(gap));
        }
        a
    }
}

/// [`rows_2x2`] by hand: [`word_pairs_2x2`]'s loop inside a loop over the
/// runs, its counters on the stack.
///
/// # Safety
/// As [`rows_2x2`].
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
#[inline(always)]
unsafe fn rows_2x2_asm(
    ptrs: [*const i8; 4],
    pairs: usize,
    rows: usize,
    gap: usize,
    acc: [i32; 4],
) -> [i32; 4] {
    let [mut p0, mut p1, mut q0, mut q1] = ptrs;
    let [mut a00, mut a01, mut a10, mut a11] = acc;
    // SAFETY: reads only the caller's promised bytes; the four words
    // pushed are popped before the block ends.
    unsafe {
        core::arch::asm!(
            "str {t3}, [sp, #-4]!",
            "str {t2}, [sp, #-4]!",
            "str {t1}, [sp, #-4]!",
            "sub sp, sp, #4",
            "1:",
            "ldr {t1}, [sp, #4]",
            "str {t1}, [sp]",
            "2:",
            two_pair_steps_2x2!(),
            "ldr {t1}, [sp]",
            "subs {t1}, {t1}, #1",
            "str {t1}, [sp]",
            "bne 2b",
            "ldr {t1}, [sp, #8]",
            "add {p0}, {p0}, {t1}",
            "add {p1}, {p1}, {t1}",
            "ldr {t1}, [sp, #12]",
            "subs {t1}, {t1}, #1",
            "str {t1}, [sp, #12]",
            "bne 1b",
            "add sp, sp, #16",
            p0 = inout(reg) p0,
            p1 = inout(reg) p1,
            q0 = inout(reg) q0,
            q1 = inout(reg) q1,
            a00 = inout(reg) a00,
            a01 = inout(reg) a01,
            a10 = inout(reg) a10,
            a11 = inout(reg) a11,
            t1 = inout(reg) pairs => _,
            t2 = inout(reg) gap => _,
            t3 = inout(reg) rows => _,
            t4 = out(reg) _,
            options(readonly),
        );
    }
    let _ = (p0, p1, q0, q1);
    [a00, a01, a10, a11]
}

/// [`block_2x2`] for one position: `acc[c] + Σ_i w[c][i] · (x[i] + offset)`.
#[inline(always)]
pub(crate) fn block_1x2<const OFFSET: bool>(
    x: &[i8],
    w: [&[i8]; 2],
    offset: i32,
    acc: [i32; 2],
) -> [i32; 2] {
    let n = x.len();
    let (w0, w1) = (&w[0][..n], &w[1][..n]);
    let off = splat16(offset);
    let [mut a0, mut a1] = acc;
    let (xc, _) = x.as_chunks::<4>();
    let (w0c, _) = w0.as_chunks::<4>();
    let (w1c, _) = w1.as_chunks::<4>();
    for ((xs, r0), r1) in xc.iter().zip(w0c).zip(w1c) {
        let (xa, xb) = unpack::<OFFSET>(u32::from_le_bytes(xs.map(|v| v as u8)), off);
        let (wa, wb) = unpack::<false>(u32::from_le_bytes(r0.map(|v| v as u8)), 0);
        a0 = mla2(xb, wb, mla2(xa, wa, a0));
        let (wa, wb) = unpack::<false>(u32::from_le_bytes(r1.map(|v| v as u8)), 0);
        a1 = mla2(xb, wb, mla2(xa, wa, a1));
    }
    let done = xc.len() * 4;
    [
        a0.wrapping_add(tail::<OFFSET>(&x[done..], &w0[done..], offset)),
        a1.wrapping_add(tail::<OFFSET>(&x[done..], &w1[done..], offset)),
    ]
}

/// `Σ_i w[r][i] · (x[i] + offset)` for four weight rows of `x.len()`
/// (`offset` in `-128..=128`): each input word is unpacked and offset once.
#[inline(always)]
pub(crate) fn row_1x4(x: &[i8], offset: i32, w: [&[i8]; 4]) -> [i32; 4] {
    let n = x.len();
    let w = w.map(|r| &r[..n]);
    let off = splat16(offset);
    let [mut a0, mut a1, mut a2, mut a3] = [0i32; 4];
    let words = n / 4;
    let mut step = |xw: u32, ws: [u32; 4]| {
        let (xa, xb) = unpack::<true>(xw, off);
        let (wa, wb) = unpack::<false>(ws[0], 0);
        a0 = mla2(xb, wb, mla2(xa, wa, a0));
        let (wa, wb) = unpack::<false>(ws[1], 0);
        a1 = mla2(xb, wb, mla2(xa, wa, a1));
        let (wa, wb) = unpack::<false>(ws[2], 0);
        a2 = mla2(xb, wb, mla2(xa, wa, a2));
        let (wa, wb) = unpack::<false>(ws[3], 0);
        a3 = mla2(xb, wb, mla2(xa, wa, a3));
    };
    let (xc, _) = x.as_chunks::<4>();
    let [w0, w1, w2, w3] = w.map(|r| r.as_chunks::<4>().0);
    let word = |r: &[i8; 4]| u32::from_le_bytes(r.map(|v| v as u8));
    for ((((xs, r0), r1), r2), r3) in xc.iter().zip(w0).zip(w1).zip(w2).zip(w3) {
        step(word(xs), [word(r0), word(r1), word(r2), word(r3)]);
    }
    let done = words * 4;
    let t = |r: usize| tail::<true>(&x[done..], &w[r][done..], offset);
    [
        a0.wrapping_add(t(0)),
        a1.wrapping_add(t(1)),
        a2.wrapping_add(t(2)),
        a3.wrapping_add(t(3)),
    ]
}

/// `Σ_i w[i] · (x[i] + offset)` for one weight row of `x.len()`: the rows
/// left over after the four-row blocks (a layer of fewer than four
/// outputs is only these), two multiply-adds per `SMLAD`.
#[inline(always)]
// Only DSP builds call it (others sum with `quant_math::dot_offset`); the
// host tests check it against the plain sum all the same.
#[cfg_attr(not(all(target_arch = "arm", feature = "arm-dsp")), allow(dead_code))]
pub(crate) fn row_1x1(x: &[i8], offset: i32, w: &[i8]) -> i32 {
    let n = x.len().min(w.len());
    let off = splat16(offset);
    let word = |r: &[i8; 4]| u32::from_le_bytes(r.map(|v| v as u8));
    let (xc, _) = x[..n].as_chunks::<4>();
    let (wc, _) = w[..n].as_chunks::<4>();
    let mut acc = 0i32;
    for (xs, ws) in xc.iter().zip(wc) {
        let (xa, xb) = unpack::<true>(word(xs), off);
        let (wa, wb) = unpack::<false>(word(ws), 0);
        acc = mla2(xb, wb, mla2(xa, wa, acc));
    }
    let done = n / 4 * 4;
    acc.wrapping_add(tail::<true>(&x[done..n], &w[done..n], offset))
}

/// [`row_1x4`] for four consecutive weight rows (`block` holds `4 · n`
/// weights, `n = x.len()`), as FULLY_CONNECTED stores them: on the target
/// the main loop is one `asm!` that addresses all four rows from two
/// pointers and the row length, with the loop end and the offset on the
/// stack (26 instructions per 16 multiply-adds, no spills).
#[inline(always)]
pub(crate) fn rows_1x4(x: &[i8], offset: i32, block: &[i8]) -> [i32; 4] {
    let n = x.len();
    let block = &block[..4 * n];
    let rows = || -> [&[i8]; 4] { core::array::from_fn(|r| &block[r * n..][..n]) };
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    if n >= 8 {
        let pairs = n / 8;
        // SAFETY: reads the first 8 · pairs bytes of `x` and of each row.
        let acc = unsafe { rows_1x4_asm(x.as_ptr(), block.as_ptr(), n, pairs, splat16(offset)) };
        let done = pairs * 8;
        if done == n {
            return acc;
        }
        let rest = row_1x4(&x[done..], offset, rows().map(|r| &r[done..]));
        return core::array::from_fn(|r| acc[r].wrapping_add(rest[r]));
    }
    row_1x4(x, offset, rows())
}

/// [`rows_1x4`]'s main loop: `pairs` times two words of `x` against the
/// rows at `w`, `w + n`, `w + 2n`, `w + 3n`.
///
/// # Safety
/// `x` and each row must have `8 · pairs` readable bytes; `pairs >= 1`.
#[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
#[inline(always)]
unsafe fn rows_1x4_asm(x: *const i8, w: *const i8, n: usize, pairs: usize, off: u32) -> [i32; 4] {
    let [mut a0, mut a1, mut a2, mut a3] = [0i32; 4];
    // SAFETY: reads only the caller's promised bytes; the two words pushed
    // are popped before the block ends.
    unsafe {
        let end = x.add(8 * pairs);
        let w2 = w.add(2 * n);
        core::arch::asm!(
            "str {t4}, [sp, #-4]!",
            "str {t1}, [sp, #-4]!",
            "2:",
            ".rept 2",
            "ldr {t1}, [{xp}], #4",
            "ldr {t4}, [sp, #4]",
            "sxtb16 {t2}, {t1}",
            "sxtb16 {t1}, {t1}, ror #8",
            "sadd16 {t2}, {t2}, {t4}",
            "sadd16 {t1}, {t1}, {t4}",
            "ldr {t3}, [{q0}, {d}]",
            "sxtb16 {t4}, {t3}",
            "sxtb16 {t3}, {t3}, ror #8",
            "smlad {a1}, {t2}, {t4}, {a1}",
            "smlad {a1}, {t1}, {t3}, {a1}",
            "ldr {t3}, [{q0}], #4",
            "sxtb16 {t4}, {t3}",
            "sxtb16 {t3}, {t3}, ror #8",
            "smlad {a0}, {t2}, {t4}, {a0}",
            "smlad {a0}, {t1}, {t3}, {a0}",
            "ldr {t3}, [{q2}, {d}]",
            "sxtb16 {t4}, {t3}",
            "sxtb16 {t3}, {t3}, ror #8",
            "smlad {a3}, {t2}, {t4}, {a3}",
            "smlad {a3}, {t1}, {t3}, {a3}",
            "ldr {t3}, [{q2}], #4",
            "sxtb16 {t4}, {t3}",
            "sxtb16 {t3}, {t3}, ror #8",
            "smlad {a2}, {t2}, {t4}, {a2}",
            "smlad {a2}, {t1}, {t3}, {a2}",
            ".endr",
            "ldr {t1}, [sp]",
            "cmp {xp}, {t1}",
            "bne 2b",
            "add sp, sp, #8",
            xp = inout(reg) x => _,
            q0 = inout(reg) w => _,
            q2 = inout(reg) w2 => _,
            d = in(reg) n,
            a0 = inout(reg) a0,
            a1 = inout(reg) a1,
            a2 = inout(reg) a2,
            a3 = inout(reg) a3,
            t1 = inout(reg) end => _,
            t2 = out(reg) _,
            t3 = out(reg) _,
            t4 = inout(reg) off => _,
            options(readonly),
        );
    }
    [a0, a1, a2, a3]
}

/// Reorders a widened patch in place so that each group of four values
/// `v0 v1 v2 v3` reads as the words `(v0, v2)` and `(v1, v3)`: the pairs
/// `SXTB16` makes of a weight word. A last partial group stays as it is.
#[inline]
pub(crate) fn permute_pairs(patch: &mut [i16]) {
    let (groups, _) = patch.as_chunks_mut::<4>();
    for g in groups {
        g.swap(1, 2);
    }
}

/// A patch reordered by [`permute_pairs`] as its whole groups' halfword
/// pairs (two words a group) and its last partial group. The patch must
/// start 4-byte aligned (scratch is); an unaligned one is all tail.
#[inline]
pub(crate) fn pair_words(patch: &[i16]) -> (&[[u32; 2]], &[i16]) {
    let split = patch.len() / 4 * 4;
    let (groups, tail) = patch.split_at(split);
    match bytemuck::try_cast_slice::<i16, [u32; 2]>(groups) {
        Ok(words) => (words, tail),
        Err(_) => (&[], patch),
    }
}

/// `Σ_i w[r][i] · x[i]` for two weight rows against a patch split by
/// [`pair_words`]: per four depth steps one input load (both words), two
/// weight loads, four unpacks, four `SMLAD`.
#[inline(always)]
pub(crate) fn pairs_1x2(words: &[[u32; 2]], tail: &[i16], w: [&[i8]; 2]) -> [i32; 2] {
    let n = words.len() * 4 + tail.len();
    let (w0, w1) = (&w[0][..n], &w[1][..n]);
    let [mut a0, mut a1] = [0i32; 2];
    let (r0s, _) = w0.as_chunks::<4>();
    let (r1s, _) = w1.as_chunks::<4>();
    let word = |r: &[i8; 4]| u32::from_le_bytes(r.map(|v| v as u8));
    for ((&[xa, xb], r0), r1) in words.iter().zip(r0s).zip(r1s) {
        let (wa, wb) = unpack::<false>(word(r0), 0);
        a0 = mla2(xb, wb, mla2(xa, wa, a0));
        let (wa, wb) = unpack::<false>(word(r1), 0);
        a1 = mla2(xb, wb, mla2(xa, wa, a1));
    }
    let done = n - tail.len();
    for ((&v, &u0), &u1) in tail.iter().zip(&w0[done..]).zip(&w1[done..]) {
        let v = i32::from(v);
        a0 = a0.wrapping_add(v * i32::from(u0));
        a1 = a1.wrapping_add(v * i32::from(u1));
    }
    [a0, a1]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic bytes covering the whole int8 range.
    fn bytes(n: usize, seed: u32) -> Vec<i8> {
        let mut s = seed.wrapping_mul(2_654_435_761).max(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s >> 24) as u8 as i8
            })
            .collect()
    }

    fn reference(x: &[i8], w: &[i8], offset: i32) -> i32 {
        x.iter()
            .zip(w)
            .map(|(&x, &w)| i32::from(w) * (i32::from(x) + offset))
            .sum()
    }

    #[test]
    fn blocks_match_the_plain_sum() {
        for n in 0..41 {
            let x = [bytes(n + 3, 1), bytes(n, 2)];
            let w = [bytes(n, 3), bytes(n + 1, 4), bytes(n, 5), bytes(n, 6)];
            let (x0, x1) = (&x[0][3..], &x[1][..]);
            let (w0, w1) = (&w[0][..], &w[1][1..]);
            for offset in [-128, -127, 0, 5, 127, 128] {
                let start = [7, -9, 1 << 20, -3];
                let got = block_2x2::<true>([x0, x1], [w0, w1], offset, start);
                let want = [
                    7 + reference(x0, w0, offset),
                    -9 + reference(x0, w1, offset),
                    (1 << 20) + reference(x1, w0, offset),
                    -3 + reference(x1, w1, offset),
                ];
                assert_eq!(got, want, "n {n} offset {offset}");
                let raw = block_2x2::<false>([x0, x1], [w0, w1], offset, [0; 4]);
                assert_eq!(raw[3], reference(x1, w1, 0), "n {n}");
                if n >= 20 {
                    // Two runs of 8 bytes; the inputs skip 4 bytes between them.
                    let ptrs = [x0.as_ptr(), x1.as_ptr(), w0.as_ptr(), w1.as_ptr()];
                    // SAFETY: inputs read bytes 0..8 and 12..20, weights 0..16,
                    // of rows at least 20 long.
                    let got = unsafe { rows_2x2(ptrs, 1, 2, 4, [1, 2, 3, 4]) };
                    let run = |x: &[i8], w: &[i8]| {
                        reference(&x[..8], &w[..8], 0) + reference(&x[12..20], &w[8..16], 0)
                    };
                    let want = [
                        1 + run(x0, w0),
                        2 + run(x0, w1),
                        3 + run(x1, w0),
                        4 + run(x1, w1),
                    ];
                    assert_eq!(got, want, "n {n}");
                }
                let one = block_1x2::<true>(x1, [w0, w1], offset, [2, 3]);
                assert_eq!(one, [want[2] - (1 << 20) + 2, want[3] + 3 + 3]);
                let rows = [w0, w1, &w[2][..], &w[3][..]];
                let four = row_1x4(x0, offset, rows);
                assert_eq!(four, rows.map(|r| reference(x0, r, offset)), "n {n}");
                for r in rows {
                    assert_eq!(row_1x1(x0, offset, r), reference(x0, r, offset), "n {n}");
                }
                let block: Vec<i8> = rows.iter().flat_map(|r| r.iter().copied()).collect();
                assert_eq!(rows_1x4(x0, offset, &block), four, "n {n}");
                let mut patch: Vec<i16> =
                    x0.iter().map(|&v| i16::from(v) + offset as i16).collect();
                permute_pairs(&mut patch);
                let (words, rest) = pair_words(&patch);
                assert_eq!(words.len() * 4 + rest.len(), n);
                assert_eq!(
                    pairs_1x2(words, rest, [w0, w1]),
                    [four[0], four[1]],
                    "n {n}"
                );
            }
        }
    }
}
