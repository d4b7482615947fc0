//! int8 CONV_2D (one group, dilation 1 along x, a depth of whole words) on
//! cores with the DSP extension, a channel quad at a time, filter rows read
//! where they lie: ResNet-8's 3×3 layers.
//!
//! Each quad's four filters are widened once ([`widen_quad_row`]), and
//! every output row goes by in stretches of windows whose valid taps are
//! the same (the left border, the interior, the right border), each
//! stretch one call of [`windows_1x4_wide_weights`]: a window's valid
//! filter rows are its runs, the widened weights of its valid columns
//! their partners. A stretch starts from `bias + input_offset · Σ w` over
//! its valid taps only (TFLM skips the padded ones), from per-tap sums of
//! the weights made with the widening, and multiplies raw inputs; each
//! channel's column of the stretch is then requantised in one loop.
//!
//! Compared with [`super::conv_dsp::rows_in_place`] (channel pairs, 2×2
//! blocks), a depth word of a window costs 13 instructions instead of 17
//! for 16 multiply-adds, and border windows take the same kernel.
//! Nothing is requested in prepare: the widened quad lives on the stack.

use super::conv_dsp::{Operands, interior_span};
use super::conv_geometry::{Geometry, RowWindows};
use super::gemm_quads::{
    QUAD_PER_WORD, store_quad_columns, widen_quad_row, windows_1x4_wide_weights,
};
use super::gemm_widened::MAX_PAIRS;
use super::quant_math::{ChannelRequant, sum};

/// The longest filter taken (3×3×64, ResNet-8's widest): a quad's widened
/// weights fill `2 · MAX_FILTER` stack words (4.5 KiB).
const MAX_FILTER: usize = 576;

/// The most filter taps whose sums a quad keeps (3×3 and 4×4 fit; the
/// stack holds four rows of them).
const MAX_TAPS: usize = 16;

/// Whether [`rows`] takes `g`'s convolution (one group): dilation 1 along
/// x, a depth of whole words, a filter of at most [`MAX_FILTER`] values
/// and [`MAX_TAPS`] taps, at least four output channels (fewer would
/// compute copies: a U-Net's last 3×3 layer to one channel took 56 % more
/// cycles), and not a size build.
pub(crate) fn takes(g: &Geometry) -> bool {
    let taps = (g.y.filter * g.x.filter).max(0) as usize;
    let len = taps * g.in_c as usize;
    !super::COMPACT
        && g.x.dilation == 1
        && g.in_c > 0
        && g.in_c.is_multiple_of(4)
        && (1..=MAX_FILTER).contains(&len)
        && taps <= MAX_TAPS
        && g.out_c >= 4
}

/// A channel quad's constants.
struct Quad<'w> {
    /// Past the last channel, copies of it (computed, not stored).
    c: [usize; 4],
    /// How many of `c` are distinct channels.
    distinct: usize,
    bias: [i32; 4],
    /// `bias + input_offset · Σ w` over every tap: an interior window's
    /// start.
    folded: [i32; 4],
    requant: [ChannelRequant; 4],
    /// Per channel and filter tap (`fy · fw + fx`), `Σ w` over the tap's
    /// input channels.
    tap_sums: &'w [[i32; MAX_TAPS]; 4],
    /// The four filters widened, `8 · len / 4` words.
    wide: &'w [u32],
}

/// Every output of a convolution that [`takes`]. `out` holds
/// `geometry.output_len()` values. Out of line, so that the quad's 5.5 KiB
/// of stack is taken only while it runs.
#[inline(never)]
pub(crate) fn rows(ops: &Operands<'_>, out: &mut [i8]) {
    let g = ops.geometry;
    let (in_c, out_c) = (g.in_c as usize, g.out_c as usize);
    let len = ops.filter_len();
    let taps = len / in_c;
    let mut wide = [0u32; 2 * MAX_FILTER];
    let mut tap_sums = [[0i32; MAX_TAPS]; 4];
    let mut sums = [[0i32; 4]; MAX_PAIRS];
    let (lo, hi) = interior_span(g);
    let span = lo..hi.max(lo);
    let mut c0 = 0;
    while c0 < out_c {
        let c: [usize; 4] = core::array::from_fn(|k| (c0 + k).min(out_c - 1));
        let wide = &mut wide[..len / 4 * QUAD_PER_WORD];
        for (k, &c) in c.iter().enumerate() {
            let filter = &ops.weights[c * len..][..len];
            widen_quad_row(filter, k, wide);
            for (s, tap) in tap_sums[k][..taps]
                .iter_mut()
                .zip(filter.chunks_exact(in_c))
            {
                *s = sum(tap);
            }
        }
        let bias = c.map(|c| ops.bias.map_or(0, |b| b[c]));
        let folded: [i32; 4] = core::array::from_fn(|k| {
            let all = tap_sums[k][..taps]
                .iter()
                .fold(0i32, |s, &t| s.wrapping_add(t));
            bias[k].wrapping_add(ops.input_offset.wrapping_mul(all))
        });
        let quad = Quad {
            c,
            distinct: (out_c - c0).min(4),
            bias,
            folded,
            requant: c.map(|c| ops.requant.channel(c)),
            tap_sums: &tap_sums,
            wide,
        };
        g.for_each_row(|windows, o| row(ops, &quad, windows, (o, span.clone()), &mut sums, out));
        c0 += 4;
    }
}

/// One output row of a quad: stretches of windows with the same valid
/// taps, up to [`MAX_PAIRS`] windows each; `span` holds the columns whose
/// windows lie inside the input along x (the same on every row).
#[inline(always)]
fn row(
    ops: &Operands<'_>,
    quad: &Quad<'_>,
    windows: &RowWindows<'_>,
    (o, span): (usize, core::ops::Range<usize>),
    sums: &mut [[i32; 4]; MAX_PAIRS],
    out: &mut [i8],
) {
    let g = ops.geometry;
    let (in_c, out_c) = (g.in_c as usize, g.out_c as usize);
    let fw = g.x.filter as usize;
    let step = g.x.stride as usize * in_c;
    let row_stride = g.y.dilation as usize * g.x.in_size as usize * in_c;
    let count = windows.len();
    let full_rows = 0..g.y.filter;
    // Sums of windows `done..ox` wait in `sums` and are requantised
    // together (a channel's constants set up once for the row, not once per
    // stretch: a row's border windows are stretches of one).
    let flush = |sums: &[[i32; 4]], first: usize, out: &mut [i8]| {
        store_quad_columns(
            (quad.c, quad.distinct),
            &quad.requant,
            sums,
            (first, out_c),
            out,
        );
    };
    let mut done = 0;
    let mut ox = 0;
    while ox < count {
        if ox - done == MAX_PAIRS {
            flush(&sums[..ox - done], o + done * out_c, out);
            done = ox;
        }
        let win = windows.at(ox);
        let (rows, cols) = (win.rows.clone(), win.cols.clone());
        let inside = span.contains(&ox);
        let room = MAX_PAIRS - (ox - done);
        let mut n = 1;
        if inside {
            n = (span.end - ox).min(room);
        } else {
            // Border windows: neighbours with the same valid columns.
            let end = if ox < span.start { span.start } else { count };
            while ox + n < end && n < room && windows.at(ox + n).cols == cols {
                n += 1;
            }
        }
        let start: [i32; 4] = if inside && rows == full_rows {
            quad.folded
        } else {
            core::array::from_fn(|k| {
                let mut s = quad.bias[k];
                for fy in rows.clone() {
                    let first = fy as usize * fw;
                    for t in first + cols.start as usize..first + cols.end as usize {
                        s = s.wrapping_add(ops.input_offset.wrapping_mul(quad.tap_sums[k][t]));
                    }
                }
                s
            })
        };
        let stretch = &mut sums[ox - done..][..n];
        if rows.is_empty() || cols.is_empty() {
            stretch.fill(start);
        } else {
            let run = cols.len() * in_c;
            let x0 = win.input_at(g, rows.start, cols.start);
            // Bounds checked once: the last window's last run ends inside.
            let reach = (n - 1) * step + (rows.len() - 1) * row_stride + run;
            let x = &ops.input[x0..][..reach];
            let w_first = (rows.start as usize * fw + cols.start as usize) * in_c / 4;
            let w_words = (rows.len() - 1) * fw * in_c / 4 + run / 4;
            let w = &quad.wide[w_first * QUAD_PER_WORD..][..w_words * QUAD_PER_WORD];
            let gaps = (
                run / 4,
                rows.len(),
                row_stride - run,
                (fw * in_c - run) / 4 * QUAD_PER_WORD * 4,
            );
            // SAFETY: every run read lies in `x` (`reach` covers the last
            // window's last run) and its weights in `w` (a filter row of
            // the quad is `fw · in_c / 4` depth words, the window's runs
            // `run / 4` of them from its first valid column); `stretch`
            // holds n entries; run, rows and n are at least 1.
            unsafe {
                windows_1x4_wide_weights(
                    x.as_ptr(),
                    step,
                    n,
                    w.as_ptr(),
                    gaps,
                    start,
                    stretch.as_mut_ptr(),
                );
            }
        }
        ox += n;
    }
    if ox > done {
        flush(&sums[..ox - done], o + done * out_c, out);
    }
}
