//! int8 CONV_2D on cores with the DSP extension, one group: two output
//! channels at a time across the whole output, two output positions at a
//! time, each block in registers ([`gemm::block_2x2`]).
//!
//! Channels are the outer loop so that a channel pair's constants — its
//! requantisation and `bias + input_offset · Σ w` — are computed once and
//! stay in registers while every position streams past. Folding the offset
//! into the start lets each window that lies wholly inside the input
//! multiply raw `x` by raw `w`; a window over the padded border skips taps
//! (TFLM's semantics), so its partial `Σ w` differs and it takes the
//! unfolded `Σ w·(x + offset)` instead, from the model's bias.
//!
//! - [`pointwise`]: 1×1 filters (never padded): every window is interior.
//!   (With stride 1 and a depth of whole words, `conv_widened` takes it.)
//! - [`rows_in_place`]: any filter with dilation 1 along x: each filter
//!   row of a window is one contiguous run of `cols · in_c` inputs and
//!   weights, read where it lies (no scratch). Two neighbouring positions
//!   pair up when their valid taps are the same. (With a depth of whole
//!   words and a filter up to 3×3×64, `conv_quads` takes it a channel
//!   quad at a time.)
//!
//! Nothing is requested in prepare: no scratch, nothing in the tail.

use super::conv_geometry::{Geometry, RowWindows, Window};
use super::gemm::{block_1x2, block_2x2, rows_2x2};
use super::gemm_widened::{
    MAX_PAIRS, WIDE_MIN_POSITIONS, row_1x2_wide_weights, rows_2x2_wide_weights, store_columns,
    widen_one, windows_2x2_wide_weights,
};
use super::quant_math::{ChannelRequant, Requant, sum};

/// One int8 convolution's operands (one group).
pub(crate) struct Operands<'a> {
    pub(crate) geometry: &'a Geometry,
    /// NHWC input, at least `geometry.input_len()` long.
    pub(crate) input: &'a [i8],
    /// `-input_zero_point`.
    pub(crate) input_offset: i32,
    /// `out_c` rows of `filter_len` weights.
    pub(crate) weights: &'a [i8],
    pub(crate) bias: Option<&'a [i32]>,
    pub(crate) requant: &'a Requant<'a>,
}

/// A channel pair's constants: `c1 == c0` for a last odd channel (its
/// second results are dropped).
struct Pair<'a> {
    c: [usize; 2],
    w: [&'a [i8]; 2],
    bias: [i32; 2],
    /// `bias + input_offset · Σ w`: the start of an interior window.
    folded: [i32; 2],
    requant: [ChannelRequant; 2],
    /// The two weight rows widened ([`gemm_widened::widen_one`]), when the
    /// filter is a whole number of words up to [`WIDE_WEIGHTS`].
    wide: Option<&'a [u32]>,
    /// Per filter tap (`fy · fw + fx`), `Σ w` over its input channels, for
    /// each channel: what a window over the padding subtracts from the
    /// folded bias. Filled when the weights are widened, the depth is whole
    /// words and the filter has at most [`MAX_TAPS`] taps.
    tap_sums: Option<&'a [[i32; MAX_TAPS]; 2]>,
}

/// The most filter taps whose sums a channel pair keeps (10×4 and 3×3 fit).
const MAX_TAPS: usize = 64;

/// Stack words for a channel pair's widened weights (2.5 KiB: filters of
/// up to 640 values, such as 3×3×64).
const WIDE_WEIGHTS: usize = 640;

impl<'a> Operands<'a> {
    pub(crate) fn filter_len(&self) -> usize {
        let g = self.geometry;
        (g.y.filter * g.x.filter) as usize * g.in_c as usize
    }

    /// Calls `f` for channels (0, 1), (2, 3), … and a last odd one alone;
    /// `widened` asks for each pair's widened weights and tap sums (only the
    /// in-place kernels read them).
    #[inline(always)]
    fn for_each_pair(&self, widened: bool, mut f: impl FnMut(&Pair<'_>)) {
        let out_c = self.geometry.out_c as usize;
        let len = self.filter_len();
        let positions = self.geometry.output_len() / out_c.max(1);
        let widen = widened
            && !super::COMPACT
            && len.is_multiple_of(4)
            && len <= WIDE_WEIGHTS
            && positions >= WIDE_MIN_POSITIONS;
        let mut wide = [0u32; WIDE_WEIGHTS];
        let in_c = self.geometry.in_c as usize;
        let taps = (self.geometry.y.filter * self.geometry.x.filter) as usize;
        let by_tap = widen && in_c.is_multiple_of(4) && taps <= MAX_TAPS;
        let mut tap_sums = [[0i32; MAX_TAPS]; 2];
        let mut c0 = 0;
        while c0 < out_c {
            let c = [c0, (c0 + 1).min(out_c - 1)];
            let w = c.map(|c| &self.weights[c * len..][..len]);
            let bias = c.map(|c| self.bias.map_or(0, |b| b[c]));
            let folded =
                [0, 1].map(|i| bias[i].wrapping_add(self.input_offset.wrapping_mul(sum(w[i]))));
            let requant = c.map(|c| self.requant.channel(c));
            if widen {
                for (half, w) in w.iter().enumerate() {
                    widen_one(w, half, &mut wide[..len]);
                }
            }
            if by_tap {
                for (sums, w) in tap_sums.iter_mut().zip(&w) {
                    for (s, tap) in sums.iter_mut().zip(w.chunks_exact(in_c)) {
                        *s = sum(tap);
                    }
                }
            }
            f(&Pair {
                c,
                w,
                bias,
                folded,
                requant,
                wide: widen.then_some(&wide[..len]),
                tap_sums: by_tap.then_some(&tap_sums),
            });
            c0 += 2;
        }
    }
}

impl Pair<'_> {
    /// Writes one position's two results at output offset `o` (pixel start).
    #[inline(always)]
    fn store(&self, out: &mut [i8], o: usize, acc: [i32; 2]) {
        out[o + self.c[0]] = self.requant[0].apply(acc[0]);
        if self.c[1] != self.c[0] {
            out[o + self.c[1]] = self.requant[1].apply(acc[1]);
        }
    }
}

/// A 1×1 convolution (one group): a matrix product of the input pixels
/// and the weight rows. `out` holds `geometry.output_len()` values.
#[inline(never)]
pub(crate) fn pointwise(ops: &Operands<'_>, out: &mut [i8]) {
    let g = ops.geometry;
    let (in_c, out_c) = (g.in_c as usize, g.out_c as usize);
    let (ow, oh) = (g.x.out_size as usize, g.y.out_size as usize);
    let positions = g.batches as usize * oh * ow;
    let dense = g.x.stride == 1 && g.y.stride == 1;
    let (sy, sx) = (g.y.stride as usize, g.x.stride as usize);
    let (ih, iw) = (g.y.in_size as usize, g.x.in_size as usize);
    let input_at = |p: usize| -> usize {
        if dense {
            return p * in_c;
        }
        let (ox, rest) = (p % ow, p / ow);
        let (oy, b) = (rest % oh, rest / oh);
        ((b * ih + oy * sy) * iw + ox * sx) * in_c
    };
    if dense && in_c > 0 {
        return pointwise_dense(ops, positions, out);
    }
    let x = |p: usize| &ops.input[input_at(p)..][..in_c];
    ops.for_each_pair(false, |pair| {
        let mut p = 0;
        while p + 2 <= positions {
            let s = pair.folded;
            let a = block_2x2::<false>([x(p), x(p + 1)], pair.w, 0, [s[0], s[1], s[0], s[1]]);
            pair.store(out, p * out_c, [a[0], a[1]]);
            pair.store(out, (p + 1) * out_c, [a[2], a[3]]);
            p += 2;
        }
        if p < positions {
            let a = block_1x2::<false>(x(p), pair.w, 0, pair.folded);
            pair.store(out, p * out_c, a);
        }
    });
}

/// [`pointwise`] with stride 1 (`in_c > 0`): pixels are consecutive rows
/// of the input and the output, walked two at a time.
fn pointwise_dense(ops: &Operands<'_>, positions: usize, out: &mut [i8]) {
    let g = ops.geometry;
    let (in_c, out_c) = (g.in_c as usize, g.out_c as usize);
    let x = &ops.input[..positions * in_c];
    let out = &mut out[..positions * out_c];
    ops.for_each_pair(false, |pair| {
        let s = pair.folded;
        let start = [s[0], s[1], s[0], s[1]];
        let xs = x.chunks_exact(2 * in_c);
        let last = xs.remainder();
        let mut outs = out.chunks_exact_mut(2 * out_c);
        for (x2, o2) in xs.zip(outs.by_ref()) {
            let (x0, x1) = x2.split_at(in_c);
            let a = if in_c % 8 == 0 {
                let ptrs = [
                    x0.as_ptr(),
                    x1.as_ptr(),
                    pair.w[0].as_ptr(),
                    pair.w[1].as_ptr(),
                ];
                // SAFETY: one run of in_c bytes of each of the four rows.
                unsafe { rows_2x2(ptrs, in_c / 8, 1, 0, start) }
            } else {
                block_2x2::<false>([x0, x1], pair.w, 0, start)
            };
            pair.store(o2, 0, [a[0], a[1]]);
            pair.store(o2, out_c, [a[2], a[3]]);
        }
        if !last.is_empty() {
            let a = block_1x2::<false>(last, pair.w, 0, pair.folded);
            pair.store(outs.into_remainder(), 0, a);
        }
    });
}

/// Any convolution with one group and dilation 1 along x, filter rows read
/// in place. `out` holds `geometry.output_len()` values.
#[inline(never)]
pub(crate) fn rows_in_place(ops: &Operands<'_>, out: &mut [i8]) {
    let g = ops.geometry;
    let full_rows = 0..g.y.filter;
    let mut sums = [[0i32; 4]; MAX_PAIRS];
    let span = interior_span(g);
    ops.for_each_pair(true, |pair| {
        g.for_each_row(|windows, o| {
            let len = windows.len();
            let rows_full = len > 0 && windows.at(0).rows == full_rows;
            let whole_words = (g.x.filter as usize * g.in_c as usize).is_multiple_of(4);
            let (lo, hi) = if rows_full && whole_words && pair.wide.is_some() {
                span
            } else {
                (len, len)
            };
            windows_one_by_one(ops, pair, windows, o, 0..lo, out);
            if let Some(wide) = pair.wide.filter(|_| hi > lo) {
                interior_column(ops, pair, wide, windows, (o, lo..hi), &mut sums, out);
            }
            windows_one_by_one(ops, pair, windows, o, hi.max(lo)..len, out);
        });
    });
}

/// The output columns `lo..hi` whose windows lie wholly inside the input
/// along x, the same on every row (one run: the windows of a row move one
/// way).
pub(crate) fn interior_span(g: &Geometry) -> (usize, usize) {
    let full = 0..g.x.filter;
    let len = g.x.out_size.max(0) as usize;
    let at = |ox: usize| g.x.taps(ox as i32);
    let lo = (0..len).find(|&ox| at(ox) == full).unwrap_or(len);
    let hi = (lo..len).find(|&ox| at(ox) != full).unwrap_or(len);
    (lo, hi)
}

/// Interior windows `lo..hi` of a row (every filter tap inside the input)
/// against a channel pair with widened weights: a column of window pairs
/// in one `asm!`, then each channel requantised in one loop.
fn interior_column(
    ops: &Operands<'_>,
    pair: &Pair<'_>,
    wide: &[u32],
    windows: &RowWindows<'_>,
    (o, span): (usize, core::ops::Range<usize>),
    sums: &mut [[i32; 4]; MAX_PAIRS],
    out: &mut [i8],
) {
    let g = ops.geometry;
    let (in_c, out_c) = (g.in_c as usize, g.out_c as usize);
    let len = g.x.filter as usize * in_c;
    let rows = g.y.filter as usize;
    let row_stride = g.y.dilation as usize * g.x.in_size as usize * in_c;
    let step = g.x.stride as usize * in_c;
    let words = (len / 4, rows, row_stride - len);
    let mut ox = span.start;
    while ox < span.end {
        let n = (span.end - ox).min(2 * MAX_PAIRS);
        let x0 = windows.at(ox).input_at(g, 0, 0);
        // Bounds checked once: the last window's last run ends inside.
        let reach = (n - 1) * step + (rows - 1) * row_stride + len;
        let x = &ops.input[x0..][..reach];
        let full = n / 2;
        // SAFETY: every run read lies in `x` (`reach` covers the last
        // window's last run); `wide` holds the pair's filter widened,
        // rows · len / 4 depth words; `sums` has MAX_PAIRS entries.
        unsafe {
            if full > 0 {
                windows_2x2_wide_weights(
                    x.as_ptr(),
                    step,
                    full,
                    wide.as_ptr(),
                    words,
                    pair.folded,
                    sums.as_mut_ptr(),
                );
            }
            if n % 2 == 1 {
                // A last odd window pairs with itself.
                let last = x.as_ptr().add((n - 1) * step);
                windows_2x2_wide_weights(
                    last,
                    0,
                    1,
                    wide.as_ptr(),
                    words,
                    pair.folded,
                    sums.as_mut_ptr().add(full),
                );
            }
        }
        store_columns(
            pair.c,
            &pair.requant,
            &sums[..n.div_ceil(2)],
            n,
            (o + ox * out_c, out_c),
            out,
        );
        ox += n;
    }
}

/// Windows `span` of a row, two at a time where their taps are the same.
fn windows_one_by_one(
    ops: &Operands<'_>,
    pair: &Pair<'_>,
    windows: &RowWindows<'_>,
    o: usize,
    span: core::ops::Range<usize>,
    out: &mut [i8],
) {
    let g = ops.geometry;
    let out_c = g.out_c as usize;
    let full_cols = 0..g.x.filter;
    let full_rows = 0..g.y.filter;
    let mut ox = span.start;
    while ox < span.end {
        let win = &windows.at(ox);
        let interior = win.rows == full_rows && win.cols == full_cols;
        if let (false, Some(wide), Some(taps)) = (interior, pair.wide, pair.tap_sums) {
            let two = ox + 1 < span.end && windows.at(ox + 1).cols == win.cols;
            let a = if two {
                border_pair(ops, pair, (wide, taps), &[win, &windows.at(ox + 1)])
            } else {
                border_pair(ops, pair, (wide, taps), &[win])
            };
            pair.store(out, o + ox * out_c, [a[0], a[1]]);
            if two {
                pair.store(out, o + (ox + 1) * out_c, [a[2], a[3]]);
            }
            ox += 1 + usize::from(two);
            continue;
        }
        if ox + 1 < span.end && windows.at(ox + 1).cols == win.cols {
            let next = windows.at(ox + 1);
            let a = if interior {
                interior_pair(ops, pair, [win, &next])
            } else {
                window_pair::<true>(ops, pair, [win, &next], pair.bias)
            };
            pair.store(out, o + ox * out_c, [a[0], a[1]]);
            pair.store(out, o + (ox + 1) * out_c, [a[2], a[3]]);
            ox += 2;
        } else {
            let a = if interior {
                window_one::<false>(ops, pair, win, pair.folded)
            } else {
                window_one::<true>(ops, pair, win, pair.bias)
            };
            pair.store(out, o + ox * out_c, a);
            ox += 1;
        }
    }
}

/// Input and weight runs of one window's valid filter rows (`cols` taps each).
#[inline(always)]
fn for_each_row_run(g: &Geometry, win: &Window, mut f: impl FnMut(usize, usize, usize)) {
    let (fw, in_c) = (g.x.filter as usize, g.in_c as usize);
    let len = win.cols.len() * in_c;
    for fy in win.rows.clone() {
        let x = win.input_at(g, fy, win.cols.start);
        let w = (fy as usize * fw + win.cols.start as usize) * in_c;
        f(x, w, len);
    }
}

/// Windows over the padding with the same valid taps (one or two) against
/// a channel pair with widened weights: each valid filter row is one run
/// read in place; the sum starts from `bias + input_offset · Σ w` over the
/// valid taps only (TFLM skips the padded ones) and multiplies raw inputs.
/// A single window's sums are `[c0, c1]` followed by copies.
fn border_pair(
    ops: &Operands<'_>,
    pair: &Pair<'_>,
    (wide, taps): (&[u32], &[[i32; MAX_TAPS]; 2]),
    win: &[&Window],
) -> [i32; 4] {
    let g = ops.geometry;
    let (fw, in_c) = (g.x.filter as usize, g.in_c as usize);
    let (rows, cols) = (win[0].rows.clone(), win[0].cols.clone());
    let mut start = pair.bias;
    for fy in rows.clone() {
        for t in fy as usize * fw + cols.start as usize..fy as usize * fw + cols.end as usize {
            for (s, taps) in start.iter_mut().zip(taps) {
                *s = s.wrapping_add(ops.input_offset.wrapping_mul(taps[t]));
            }
        }
    }
    let len = cols.len() * in_c;
    let mut acc = [start[0], start[1], start[0], start[1]];
    for fy in rows.clone().filter(|_| len > 0) {
        let x = |w: &Window| &ops.input[w.input_at(g, fy, cols.start)..][..len];
        let w = &wide[(fy as usize * fw + cols.start as usize) * in_c..][..len];
        if let [one] = win {
            let a = row_1x2_wide_weights(x(one), w, [acc[0], acc[1]]);
            acc = [a[0], a[1], a[0], a[1]];
        } else {
            let xs = [x(win[0]), x(win[1])];
            // SAFETY: each input run is `len` bytes (sliced above); `w`
            // holds the run's len / 4 widened depth words (in_c is whole
            // words).
            acc = unsafe {
                rows_2x2_wide_weights(
                    [xs[0].as_ptr(), xs[1].as_ptr()],
                    w.as_ptr(),
                    len / 4,
                    1,
                    0,
                    acc,
                )
            };
        }
    }
    acc
}

/// Two windows with the same valid taps against a channel pair.
#[inline(always)]
fn window_pair<const OFFSET: bool>(
    ops: &Operands<'_>,
    pair: &Pair<'_>,
    win: [&Window; 2],
    start: [i32; 2],
) -> [i32; 4] {
    let g = ops.geometry;
    // Same taps: every run of the second window is the first's, shifted.
    let step = (win[1].x0 - win[0].x0) as isize * g.in_c as isize;
    let mut acc = [start[0], start[1], start[0], start[1]];
    for_each_row_run(g, win[0], |xo, wo, len| {
        let x1 = (xo as isize + step) as usize;
        let xs = [&ops.input[xo..][..len], &ops.input[x1..][..len]];
        let ws = [&pair.w[0][wo..][..len], &pair.w[1][wo..][..len]];
        acc = block_2x2::<OFFSET>(xs, ws, ops.input_offset, acc);
    });
    acc
}

/// Two interior windows against a channel pair: every filter row is read,
/// so the weights are one run and the input runs are evenly spaced.
#[inline(always)]
fn interior_pair(ops: &Operands<'_>, pair: &Pair<'_>, win: [&Window; 2]) -> [i32; 4] {
    let g = ops.geometry;
    let (fw, in_c) = (g.x.filter as usize, g.in_c as usize);
    let len = fw * in_c;
    if len % 8 != 0 || len == 0 {
        return window_pair::<false>(ops, pair, win, pair.folded);
    }
    let rows = g.y.filter as usize;
    let row_stride = g.y.dilation as usize * g.x.in_size as usize * in_c;
    let x0 = win[0].input_at(g, 0, 0);
    let x1 = win[1].input_at(g, 0, 0);
    let last = (rows - 1) * row_stride + len;
    let s = pair.folded;
    // Bounds checked once: both windows' last runs end inside the input.
    let (i0, i1) = (&ops.input[x0..][..last], &ops.input[x1..][..last]);
    let ptrs = [
        i0.as_ptr(),
        i1.as_ptr(),
        pair.w[0].as_ptr(),
        pair.w[1].as_ptr(),
    ];
    // SAFETY: run r of the inputs is bytes r · row_stride .. + len of
    // `i0`/`i1` (checked above); the weights' runs are the filter, each
    // row `rows · len = filter_len` long.
    unsafe {
        rows_2x2(
            ptrs,
            len / 8,
            rows,
            row_stride - len,
            [s[0], s[1], s[0], s[1]],
        )
    }
}

/// One window against a channel pair.
#[inline(always)]
fn window_one<const OFFSET: bool>(
    ops: &Operands<'_>,
    pair: &Pair<'_>,
    win: &Window,
    start: [i32; 2],
) -> [i32; 2] {
    let mut acc = start;
    for_each_row_run(ops.geometry, win, |xo, wo, len| {
        let ws = [&pair.w[0][wo..][..len], &pair.w[1][wo..][..len]];
        acc = block_1x2::<OFFSET>(&ops.input[xo..][..len], ws, ops.input_offset, acc);
    });
    acc
}
