//! int8 CONV_2D (one group) on cores with the DSP extension whose pixels
//! are rows evenly spaced in memory: every 1×1 layer of stride 1 whose
//! depth is a whole number of words (each pixel is its input row), and
//! layers with short filter rows, such as VWW's and ResNet-8's first
//! 3×3×3 and KWS's 10×4×1, whose windows are first gathered into int8
//! patches on the stack (im2col).
//!
//! Each channel quad's weights are widened once
//! ([`gemm_quads::widen_quad_row`]) and then run down a whole column of
//! pixels in one `asm!` ([`gemm_quads::column_1x4_wide_weights`]; filters
//! longer than [`QUAD_FILTER`] go a channel pair at a time, two pixels at
//! a time, [`gemm_widened::column_2x2_wide_weights`]); the sums of up to
//! [`MAX_PAIRS`] pixels (or pixel pairs) are kept and each channel's
//! column requantised in one loop of its form
//! ([`ChannelRequant::apply_each`]). Sums start from the folded bias
//! `bias + input_offset · Σ w` and multiply raw inputs. A patch's padded
//! taps hold the input's zero point, `-input_offset`, so that they add
//! `w · (−input_offset)`, which cancels their share of the folded bias:
//! the result is TFLM's sum over the valid taps only.
//!
//! Patches and widened weights live on the stack, not in the arena:
//! nothing is requested in prepare, and the arena plans of every board are
//! those of the other paths.
//!
//! [`gemm_quads::widen_quad_row`]: super::gemm_quads::widen_quad_row
//! [`gemm_quads::column_1x4_wide_weights`]: super::gemm_quads::column_1x4_wide_weights
//! [`gemm_widened::column_2x2_wide_weights`]: super::gemm_widened::column_2x2_wide_weights

use super::conv_dsp::Operands;
use super::conv_geometry::{Geometry, Window};
use super::gemm_quads::{
    QUAD_PER_WORD, column_1x4_wide_weights, store_quad_columns, widen_quad_row,
};
use super::gemm_widened::{
    MAX_PAIRS, WIDE_MIN_POSITIONS, WIDE_PER_WORD, column_2x2_wide_weights, store_columns, widen_one,
};
use super::quant_math::{ChannelRequant, sum};

/// The longest filter (taps × input channels) taken: a channel pair's
/// widened weights fill [`MAX_FILTER`] words (2.5 KiB of stack; 3×3×64).
pub(crate) const MAX_FILTER: usize = 640;

/// The longest filter taken a channel quad at a time
/// ([`column_1x4_wide_weights`]): a quad's widened weights fill the same
/// [`MAX_FILTER`] words; longer filters go a channel pair at a time.
const QUAD_FILTER: usize = MAX_FILTER / 2;

/// Stack bytes of gathered patches.
const PATCH_BYTES: usize = 1024;

/// A channel pair's constants and widened weights.
struct Pair<'w> {
    /// `c[1] == c[0]` for a last odd channel (its copy is not stored).
    c: [usize; 2],
    /// `bias + input_offset · Σ w` per channel.
    folded: [i32; 2],
    requant: [ChannelRequant; 2],
    /// Both rows widened, `4 · ⌈len / 4⌉` words.
    wide: &'w [u32],
}

/// Calls `f` with channels (0, 1), (2, 3), … and a last odd one twice.
#[inline(always)]
fn for_each_channel_pair(ops: &Operands<'_>, mut f: impl FnMut(&Pair<'_>)) {
    let out_c = ops.geometry.out_c as usize;
    let len = ops.filter_len();
    let words = len.div_ceil(4);
    let mut wide = [0u32; MAX_FILTER];
    let mut c0 = 0;
    while c0 < out_c {
        let c = [c0, (c0 + 1).min(out_c - 1)];
        let wide = &mut wide[..words * WIDE_PER_WORD];
        for (half, &c) in c.iter().enumerate() {
            widen_row(&ops.weights[c * len..][..len], half, wide);
        }
        f(&Pair {
            c,
            folded: c.map(|c| folded_bias(ops, c)),
            requant: c.map(|c| ops.requant.channel(c)),
            wide,
        });
        c0 += 2;
    }
}

/// Widens a weight row into half `half` of a channel pair's words, a last
/// partial word padded with zeros.
#[inline(always)]
fn widen_row(row: &[i8], half: usize, wide: &mut [u32]) {
    widen_padded(row, half, wide, WIDE_PER_WORD, widen_one);
}

/// A weight row widened by `widen` (`per_word` words a depth word) into
/// slot `slot`, a last partial word padded with zeros.
#[inline(always)]
fn widen_padded(
    row: &[i8],
    slot: usize,
    wide: &mut [u32],
    per_word: usize,
    widen: fn(&[i8], usize, &mut [u32]),
) {
    let whole = row.len() / 4 * 4;
    widen(&row[..whole], slot, wide);
    if whole < row.len() {
        let mut last = [0i8; 4];
        last[..row.len() - whole].copy_from_slice(&row[whole..]);
        widen(&last, slot, &mut wide[whole / 4 * per_word..]);
    }
}

/// A channel quad's constants and widened weights: [`Pair`] four wide.
struct Quad<'w> {
    /// Past the last channel, copies of it (computed, not stored).
    c: [usize; 4],
    /// How many of `c` are distinct channels.
    distinct: usize,
    folded: [i32; 4],
    requant: [ChannelRequant; 4],
    /// The four rows widened, `8 · ⌈len / 4⌉` words.
    wide: &'w [u32],
}

/// Calls `f` with channels (0..4), (4..8), …, a last partial quad filled
/// with copies of its last channel. Filters up to [`QUAD_FILTER`].
#[inline(always)]
fn for_each_channel_quad(ops: &Operands<'_>, mut f: impl FnMut(&Quad<'_>)) {
    let out_c = ops.geometry.out_c as usize;
    let len = ops.filter_len();
    let words = len.div_ceil(4);
    let mut wide = [0u32; MAX_FILTER];
    let mut c0 = 0;
    while c0 < out_c {
        let c: [usize; 4] = core::array::from_fn(|k| (c0 + k).min(out_c - 1));
        let wide = &mut wide[..words * QUAD_PER_WORD];
        for (k, &c) in c.iter().enumerate() {
            let row = &ops.weights[c * len..][..len];
            widen_padded(row, k, wide, QUAD_PER_WORD, widen_quad_row);
        }
        f(&Quad {
            c,
            distinct: (out_c - c0).min(4),
            folded: c.map(|c| folded_bias(ops, c)),
            requant: c.map(|c| ops.requant.channel(c)),
            wide,
        });
        c0 += 4;
    }
}

/// `bias + input_offset · Σ w` of channel `c`.
#[inline(always)]
fn folded_bias(ops: &Operands<'_>, c: usize) -> i32 {
    let len = ops.filter_len();
    let bias = ops.bias.map_or(0, |b| b[c]);
    bias.wrapping_add(
        ops.input_offset
            .wrapping_mul(sum(&ops.weights[c * len..][..len])),
    )
}

impl Quad<'_> {
    /// [`Pair::run`] for a quad: `pixels` rows at `x + j · stride`, row
    /// `j`'s outputs from `out[o + j · out_c]`; `sums` is scratch.
    fn run(
        &self,
        (x, stride): (&[i8], usize),
        pixels: usize,
        (o, out_c): (usize, usize),
        out: &mut [i8],
        sums: &mut [[i32; 4]; MAX_PAIRS],
    ) {
        let words = self.wide.len() / QUAD_PER_WORD;
        let mut done = 0;
        while done < pixels {
            let n = (pixels - done).min(MAX_PAIRS);
            let end = (n - 1) * stride + 4 * words;
            let rows = &x[done * stride..][..end];
            // SAFETY: every row read lies in `rows` (`end` covers the last
            // one's 4 · words bytes); `wide` holds 8 · words aligned words;
            // `sums` has MAX_PAIRS >= n entries; words, n >= 1.
            unsafe {
                let (xp, wp, sp) = (rows.as_ptr(), self.wide.as_ptr(), sums.as_mut_ptr());
                column_1x4_wide_weights(xp, stride, n, wp, words, self.folded, sp);
            }
            let first = o + done * out_c;
            let quad = (self.c, self.distinct);
            store_quad_columns(quad, &self.requant, &sums[..n], (first, out_c), out);
            done += n;
        }
    }
}

/// Every channel's outputs for `pixels` rows at `x + j · stride` (whole
/// words each), row `j`'s from `out[o + j · out_c]`: a channel quad at a
/// time where the filter allows, else a pair at a time.
fn columns(
    ops: &Operands<'_>,
    rows: (&[i8], usize),
    pixels: usize,
    at: (usize, usize),
    out: &mut [i8],
    sums: &mut [[i32; 4]; MAX_PAIRS],
) {
    let line = Lines {
        count: 1,
        x_pitch: 0,
        o_pitch: 0,
    };
    columns_by_lines(ops, rows, (pixels, line), at, out, sums);
}

/// Evenly spaced runs of output pixels: a strided 1×1 layer's output rows.
#[derive(Clone, Copy)]
struct Lines {
    count: usize,
    /// From one run's first input pixel to the next's, in bytes.
    x_pitch: usize,
    /// From one run's first output to the next's.
    o_pitch: usize,
}

/// [`columns`] for `lines.count` runs of `pixels` each, all with the same
/// widened weights: each channel quad (or pair) is widened once.
fn columns_by_lines(
    ops: &Operands<'_>,
    (x, stride): (&[i8], usize),
    (pixels, lines): (usize, Lines),
    (o, out_c): (usize, usize),
    out: &mut [i8],
    sums: &mut [[i32; 4]; MAX_PAIRS],
) {
    let run = |k: usize| {
        let at = (o + k * lines.o_pitch, out_c);
        ((&x[k * lines.x_pitch..], stride), at)
    };
    if ops.filter_len() <= QUAD_FILTER {
        for_each_channel_quad(ops, |quad| {
            for k in 0..lines.count {
                let (rows, at) = run(k);
                quad.run(rows, pixels, at, out, sums);
            }
        });
    } else {
        for_each_channel_pair(ops, |pair| {
            for k in 0..lines.count {
                let (rows, at) = run(k);
                pair.run(rows, pixels, at, out, sums);
            }
        });
    }
}

impl Pair<'_> {
    /// The pair's outputs for `pixels` rows at `x + j · stride` (each at
    /// least `wide.len()` bytes: whole words), row `j`'s outputs starting at
    /// `out[o + j · out_c]`. `sums` is scratch.
    fn run(
        &self,
        (x, stride): (&[i8], usize),
        pixels: usize,
        (o, out_c): (usize, usize),
        out: &mut [i8],
        sums: &mut [[i32; 4]; MAX_PAIRS],
    ) {
        let words = self.wide.len() / WIDE_PER_WORD;
        let mut done = 0;
        while done < pixels {
            let n = (pixels - done).min(2 * MAX_PAIRS);
            let pairs = n.div_ceil(2);
            // A last odd pixel pairs with itself (stride 0 for that pair).
            let full = n / 2;
            let rows = &x[done * stride..];
            let end = (n - 1) * stride + 4 * words;
            let rows = &rows[..end];
            // SAFETY: every row read lies in `rows` (`end` covers the last
            // one's 4 · words bytes); `wide` holds 4 · words aligned words;
            // `sums` has MAX_PAIRS >= pairs entries; words, pairs >= 1.
            unsafe {
                if full > 0 {
                    let start = self.folded;
                    column_2x2_wide_weights(
                        rows.as_ptr(),
                        stride,
                        full,
                        self.wide.as_ptr(),
                        words,
                        start,
                        sums.as_mut_ptr(),
                    );
                }
                if pairs > full {
                    let last = rows.as_ptr().add((n - 1) * stride);
                    let at = sums.as_mut_ptr().add(full);
                    column_2x2_wide_weights(last, 0, 1, self.wide.as_ptr(), words, self.folded, at);
                }
            }
            store_columns(
                self.c,
                &self.requant,
                &sums[..n.div_ceil(2)],
                n,
                (o + done * out_c, out_c),
                out,
            );
            done += n;
        }
    }
}

/// Output pixels from which a layer whose depth goes a channel quad at a
/// time widens its weights: a quad's block gains back the widening of a
/// weight (about two cycles) in four pixels, where a pair's needs
/// [`WIDE_MIN_POSITIONS`] (VWW's last 1×1 layers, 3×3 pixels: 24.27 M →
/// 23.95 M estimated cycles).
const QUAD_MIN_POSITIONS: usize = 4;

/// Whether [`pointwise`] takes a 1×1 convolution (one group): a depth of
/// whole words up to [`MAX_FILTER`], at least [`QUAD_MIN_POSITIONS`] or
/// [`WIDE_MIN_POSITIONS`] output pixels, and not a size build. Up to
/// [`QUAD_FILTER`] deep it goes a channel quad at a time, at any stride
/// (ResNet-8's strided shortcut layers: IC 27.64 M → 26.99 M estimated
/// cycles, VWW's stride-1 code 0.5 % slower for the second shape), with
/// four output channels or more (fewer would compute copies); deeper, a
/// pair at a time and at stride 1 only.
pub(crate) fn takes_pointwise(g: &Geometry) -> bool {
    let in_c = g.in_c as usize;
    let by_quads = in_c <= QUAD_FILTER;
    let min = if by_quads {
        QUAD_MIN_POSITIONS
    } else {
        WIDE_MIN_POSITIONS
    };
    !super::COMPACT
        && if by_quads {
            g.out_c >= 4
        } else {
            g.x.stride == 1 && g.y.stride == 1
        }
        && in_c.is_multiple_of(4)
        && (1..=MAX_FILTER).contains(&in_c)
        && g.output_len() / (g.out_c as usize).max(1) >= min
}

/// A 1×1 convolution that [`takes_pointwise`].
#[inline(never)]
pub(crate) fn pointwise(ops: &Operands<'_>, out: &mut [i8]) {
    let g = ops.geometry;
    let (in_c, out_c) = (g.in_c as usize, g.out_c as usize);
    let positions = g.output_len() / out_c.max(1);
    let mut sums = [[0i32; 4]; MAX_PAIRS];
    if g.x.stride == 1 && g.y.stride == 1 {
        let x = &ops.input[..positions * in_c];
        columns(ops, (x, in_c), positions, (0, out_c), out, &mut sums);
        return;
    }
    // Strided (by quads): each output row's pixels are evenly spaced in
    // one input row, and the rows too.
    let (in_h, in_w) = (g.y.in_size as usize, g.x.in_size as usize);
    let (out_h, out_w) = (g.y.out_size as usize, g.x.out_size as usize);
    let lines = Lines {
        count: out_h,
        x_pitch: g.y.stride as usize * in_w * in_c,
        o_pitch: out_w * out_c,
    };
    let pixel = g.x.stride as usize * in_c;
    for b in 0..g.batches as usize {
        let x = &ops.input[b * in_h * in_w * in_c..];
        let at = (b * out_h * out_w * out_c, out_c);
        columns_by_lines(ops, (x, pixel), (out_w, lines), at, out, &mut sums);
    }
}

/// Whether [`im2col`] takes a convolution with a filter of `len` values
/// whose rows hold `row` (the in-place kernels take rows of two words and
/// more, reading them where they lie).
#[cfg_attr(not(all(target_arch = "arm", feature = "arm-dsp")), allow(dead_code))]
pub(crate) fn takes(len: usize, row: usize) -> bool {
    !super::COMPACT && (1..=PATCH_BYTES / 2).contains(&len) && (!row.is_multiple_of(4) || row < 8)
}

/// Any convolution of one group whose filter holds at most half of
/// [`PATCH_BYTES`] values, each window gathered into an int8 patch first, a block of
/// patches at a time.
#[inline(never)]
pub(crate) fn im2col(ops: &Operands<'_>, out: &mut [i8]) {
    let g = ops.geometry;
    let out_c = g.out_c as usize;
    let padded = ops.filter_len().div_ceil(4) * 4;
    let capacity = PATCH_BYTES / padded.max(1);
    // -input_offset is the zero point, an int8 (prepare checks it).
    let zero = (-ops.input_offset) as i8;
    let mut patches = [zero; PATCH_BYTES];
    let mut sums = [[0i32; 4]; MAX_PAIRS];
    let (mut count, mut first) = (0, 0);
    let full = |win: &Window| win.rows == (0..g.y.filter) && win.cols == (0..g.x.filter);
    let mut run = |patches: &[i8], count: usize, first: usize, out: &mut [i8]| {
        columns(
            ops,
            (patches, padded),
            count,
            (first, out_c),
            out,
            &mut sums,
        );
    };
    g.for_each_pixel(|win, o| {
        if count == 0 {
            first = o;
        }
        let patch = &mut patches[count * padded..][..padded];
        if !full(win) {
            patch.fill(zero);
            gather(ops, win, patch);
        } else if g.x.dilation == 1 {
            gather_interior(ops, win, patch);
        } else {
            gather(ops, win, patch);
        }
        count += 1;
        if count == capacity {
            run(&patches, count, first, out);
            count = 0;
        }
    });
    if count > 0 {
        run(&patches, count, first, out);
    }
}

/// `dst.copy_from_slice(src)` for the few bytes of a filter row (VWW's
/// first layer: 9), a word at a time in line: `copy_from_slice` calls
/// `memcpy`, whose set-up outweighs such a copy several times over.
#[inline(always)]
fn copy_short(src: &[i8], dst: &mut [i8]) {
    let (src_words, src_tail) = src.as_chunks::<4>();
    let (dst_words, dst_tail) = dst.as_chunks_mut::<4>();
    for (d, s) in dst_words.iter_mut().zip(src_words) {
        *d = *s;
    }
    for (d, s) in dst_tail.iter_mut().zip(src_tail) {
        *d = *s;
    }
}

/// [`gather`] for a window wholly inside the input with no dilation along
/// x: its filter rows are evenly spaced runs of the input, sliced once.
#[inline(always)]
fn gather_interior(ops: &Operands<'_>, win: &Window, patch: &mut [i8]) {
    let g = ops.geometry;
    let row_len = g.x.filter as usize * g.in_c as usize;
    let pitch = g.y.dilation as usize * g.x.in_size as usize * g.in_c as usize;
    let rows = g.y.filter as usize;
    let first = win.input_at(g, 0, 0);
    let src = &ops.input[first..first + (rows - 1) * pitch + row_len];
    let dst = &mut patch[..rows * row_len];
    let (words, tail) = (row_len / 4, row_len % 4);
    let (mut s, mut d) = (src.as_ptr(), dst.as_mut_ptr());
    for _ in 0..rows {
        // SAFETY: row r reads src[r · pitch..][..row_len] and writes
        // dst[r · row_len..][..row_len], inside the slices taken above.
        unsafe {
            for w in 0..words {
                let v = s.add(4 * w).cast::<u32>().read_unaligned();
                d.add(4 * w).cast::<u32>().write_unaligned(v);
            }
            for t in 4 * words..4 * words + tail {
                *d.add(t) = *s.add(t);
            }
        }
        // Past the last row these point beyond the slices, never read.
        s = s.wrapping_add(pitch);
        d = d.wrapping_add(row_len);
    }
}

/// Copies a window's taps inside the input into `patch` (laid out as the
/// filter: rows, columns, channels); padded taps are left as they are.
#[inline(always)]
fn gather(ops: &Operands<'_>, win: &Window, patch: &mut [i8]) {
    let g = ops.geometry;
    let in_c = g.in_c as usize;
    let row_len = g.x.filter as usize * in_c;
    for fy in win.rows.clone() {
        let row = &mut patch[fy as usize * row_len..][..row_len];
        if g.x.dilation == 1 {
            let (c0, c1) = (win.cols.start as usize * in_c, win.cols.end as usize * in_c);
            let src = &ops.input[win.input_at(g, fy, win.cols.start)..][..c1 - c0];
            copy_short(src, &mut row[c0..c1]);
        } else {
            for fx in win.cols.clone() {
                let src = &ops.input[win.input_at(g, fy, fx)..][..in_c];
                row[fx as usize * in_c..][..in_c].copy_from_slice(src);
            }
        }
    }
}
