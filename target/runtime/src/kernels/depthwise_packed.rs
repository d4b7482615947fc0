//! DEPTHWISE_CONV_2D's interior windows with the DSP instructions, for
//! depth multiplier 1 (MobileNets, DS-CNN).
//!
//! With one output channel per input channel, input and weights of four
//! consecutive channels are four adjacent bytes: one word load brings four
//! channels of a tap. `SXTB16` splits each word into the halfword pairs of
//! channels (0, 2) and (1, 3), and `SMLABB` / `SMLATT` multiply each input
//! halfword by its own channel's weight (depthwise products are never summed
//! across channels, so `SMLAD` does not apply). Two output pixels are
//! computed side by side so that each unpacked weight word serves both.
//!
//! Windows here lie wholly inside the input, so no tap is skipped: the sums
//! start from the folded bias and add plain `w·x` ([`super::quantized`]),
//! and [`run`] checks once that the last window of the run is inside the
//! slices, after which the loops read without per-element bounds checks.
//! Channels past the last multiple of four go through a plain loop.

use super::KernelError;
use super::arm_dsp::{mla_bytes4, mla_bytes4_offset, splat16};
use super::conv::Geometry;
use super::arm_dsp::smmulr;
use super::quantized::{OutputStage, scale_parts};
#[cfg(doc)]
use super::quantized::Requant;

/// What the interior loops read.
pub(super) struct Operands<'a> {
    /// The whole input tensor.
    pub(super) x: &'a [i8],
    /// Weights `[fh][fw][channels]`.
    pub(super) w: &'a [i8],
    /// `bias + input_offset · Σ w`, per channel.
    pub(super) folded: &'a [i32],
    /// The model's bias (windows over the padding), if any.
    pub(super) bias: Option<&'a [i32]>,
    /// `-input_zero_point`, in `-127..=128`.
    pub(super) x_offset: i32,
    /// Per-channel requantisation.
    pub(super) scales: Scales<'a>,
}

/// The requantisation tables checked once per invoke, so that the
/// per-output step reads them without bounds checks; with `narrow` (set at
/// prepare when every accumulator and shift is small enough,
/// `depthwise_conv::fits_narrow_channel`) it takes the 32-bit form [`Scales::apply`] describes.
#[derive(Clone, Copy)]
pub(super) struct Scales<'a> {
    multiplier: &'a [i32],
    shift: &'a [[u8; 2]],
    /// 1 for per-channel tables, 0 for one multiplier.
    step: usize,
    stage: OutputStage,
    narrow: bool,
}

impl<'a> Scales<'a> {
    /// Tables for `channels` output channels: one entry or one per channel,
    /// shifts as [`super::quantized::shift_parts`] makes them.
    pub(super) fn new(
        multiplier: &'a [i32],
        shift: &'a [[u8; 2]],
        stage: OutputStage,
        channels: usize,
        narrow: bool,
    ) -> Result<Self, KernelError> {
        let (left_max, right_max) = if narrow { (29, 31) } else { (31, 32) };
        let len = multiplier.len();
        if multiplier.len() != shift.len()
            || (len != 1 && len < channels)
            || shift
                .iter()
                .any(|&[left, right]| left > left_max || !(1..=right_max).contains(&right))
        {
            return Err(KernelError::Internal);
        }
        Ok(Scales {
            multiplier,
            shift,
            step: usize::from(len > 1),
            stage,
            narrow,
        })
    }

    /// Channel `c`'s accumulator as an int8 output (`c` below the
    /// `channels` given to [`Scales::new`]). Bit for bit
    /// [`Requant::apply`]; when narrow, TFLM's doubling high multiply is
    /// `SMMULR(acc · 2^(left+1), m)` (exact: `acc · 2^(left+1)` fits 32
    /// bits) and its rounding shift `(2h + 2^e − [h < 0]) >> (e + 1)` in 32
    /// bits (`|h| < 2^30`, `e ≤ 30`).
    #[inline(always)]
    fn apply(&self, c: usize, acc: i32) -> i8 {
        let i = c * self.step;
        debug_assert!(i < self.multiplier.len());
        // SAFETY: `new` checked both tables hold one entry or at least
        // `channels`, and callers pass `c < channels`.
        let (m, [left, right1]) =
            unsafe { (*self.multiplier.get_unchecked(i), *self.shift.get_unchecked(i)) };
        let scaled = if self.narrow {
            let (left, right1) = (u32::from(left), u32::from(right1));
            // SAFETY: `new` checked `left ≤ 29` and `1 ≤ right1 ≤ 31`
            // for narrow tables, so every shift is below 32.
            let (shifted, round) =
                unsafe { (acc.unchecked_shl(left + 1), 1i32.unchecked_shl(right1 - 1)) };
            let h = smmulr(shifted as u32, m as u32) as i32;
            let negative = ((h as u32) >> 31) as i32;
            // SAFETY: as above.
            unsafe { h.wrapping_mul(2).wrapping_add(round).wrapping_sub(negative).unchecked_shr(right1) }
        } else {
            scale_parts(acc, m, u32::from(left), u32::from(right1))
        };
        let v = scaled.wrapping_add(self.stage.offset);
        v.max(self.stage.min).min(self.stage.max) as i8
    }
}


/// Strides, in bytes of the input, between the taps and pixels of a window.
#[derive(Clone, Copy)]
struct Taps {
    fh: usize,
    fw: usize,
    /// From one filter row to the next (dilation included).
    row: usize,
    /// From one filter column to the next.
    col: usize,
    /// From one output pixel's window to the next (stride included).
    pixel: usize,
    channels: usize,
}

/// The tap strides of `g` (multiplier 1: input and output channels alike).
fn taps(g: &Geometry) -> Taps {
    let channels = g.out_c as usize;
    Taps {
        fh: g.y.filter as usize,
        fw: g.x.filter as usize,
        row: g.y.dilation as usize * g.x.in_size as usize * channels,
        col: g.x.dilation as usize * channels,
        pixel: g.x.stride as usize * channels,
        channels,
    }
}

/// Computes `count` consecutive interior output pixels of one row: the
/// first window starts at input offset `x0`, the first output at `o0`.
/// `Internal` if the caller's geometry and slices disagree (multiplier
/// other than 1, or a window outside the input).
pub(super) fn run(
    g: &Geometry,
    ops: &Operands<'_>,
    x0: usize,
    o0: usize,
    count: usize,
    out: &mut [i8],
) -> Result<(), KernelError> {
    let t = taps(g);
    let channels = t.channels;
    if count == 0 {
        return Ok(());
    }
    // The farthest byte any window of the run reads (the loops below index
    // only below it).
    let end = x0 + (count - 1) * t.pixel + (t.fh - 1) * t.row + (t.fw - 1) * t.col + channels;
    if g.in_c != g.out_c
        || end > ops.x.len()
        || ops.w.len() < t.fh * t.fw * channels
        || ops.folded.len() < channels
        || out.len() < o0 + count * channels
    {
        return Err(KernelError::Internal);
    }
    // The common filter as constants, so its taps unroll.
    let block = if (t.fh, t.fw) == (3, 3) {
        pixel_block::<3, 3>
    } else {
        pixel_block::<0, 0>
    };
    for p in 0..count {
        block(&t, ops, x0 + p * t.pixel, &mut out[o0 + p * channels..]);
    }
    Ok(())
}

/// One interior output pixel, every channel; a filter of `FH × FW` taps,
/// or `t.fh × t.fw` when those are 0.
#[inline(never)]
fn pixel_block<const FH: usize, const FW: usize>(
    t: &Taps,
    ops: &Operands<'_>,
    x0: usize,
    out: &mut [i8],
) {
    let (rows, cols) = if FH == 0 { (t.fh, t.fw) } else { (FH, FW) };
    let span = Span {
        x: x0,
        w: 0,
        rows,
        cols,
    };
    let t = &Taps {
        fh: rows,
        fw: cols,
        ..*t
    };
    let c4 = t.channels & !3;
    let out = &mut out[..t.channels];
    let folded = ops.folded[..c4].chunks_exact(4);
    for ((c, o4), f4) in (0..c4).step_by(4).zip(out.chunks_exact_mut(4)).zip(folded) {
        let start = core::array::from_fn(|i| f4[i] as u32);
        let [acc] = channels4::<1, false>(t, ops, &span, c, start);
        for (i, (o, &a)) in o4.iter_mut().zip(&acc).enumerate() {
            *o = ops.scales.apply(c + i, a as i32);
        }
    }
    for c in c4..t.channels {
        out[c] = ops.scales.apply(c, channel(t, ops, x0 + c, c));
    }
}

/// Where a window's taps inside the input start and how many there are.
struct Span {
    /// Input offset of the first tap inside the input (channel 0).
    x: usize,
    /// Weight offset of that tap (channel 0).
    w: usize,
    rows: usize,
    cols: usize,
}

/// One output pixel whose window hangs over the padding: only its taps
/// inside the input, each `w·(x + input_offset)`, from the model's bias.
/// `Internal` if the window reaches outside the slices.
#[inline(never)]
pub(super) fn edge(
    g: &Geometry,
    ops: &Operands<'_>,
    win: &super::conv::Window,
    out: &mut [i8],
) -> Result<(), KernelError> {
    let t = taps(g);
    let (rows, cols) = (win.rows.clone(), win.cols.clone());
    let channels = t.channels;
    if out.len() < channels || ops.bias.is_some_and(|b| b.len() < channels) {
        return Err(KernelError::Internal);
    }
    let bias = |c: usize| ops.bias.map_or(0, |b| b[c]);
    if rows.is_empty() || cols.is_empty() {
        for (c, o) in out[..channels].iter_mut().enumerate() {
            *o = ops.scales.apply(c, bias(c));
        }
        return Ok(());
    }
    let first = win.input_at(g, rows.start, cols.start);
    let last = win.input_at(g, rows.end - 1, cols.end - 1) + channels;
    let w_end = ((rows.end - 1) as usize * t.fw + cols.end as usize) * channels;
    if g.in_c != g.out_c || last > ops.x.len() || w_end > ops.w.len() {
        return Err(KernelError::Internal);
    }
    let span = Span {
        x: first,
        w: (rows.start as usize * t.fw + cols.start as usize) * channels,
        rows: rows.len(),
        cols: cols.len(),
    };
    let c4 = channels & !3;
    for c in (0..c4).step_by(4) {
        let start = core::array::from_fn(|i| bias(c + i) as u32);
        let [acc] = channels4::<1, true>(&t, ops, &span, c, start);
        for (i, &a) in acc.iter().enumerate() {
            out[c + i] = ops.scales.apply(c + i, a as i32);
        }
    }
    for c in c4..channels {
        let mut acc = bias(c);
        for fy in 0..span.rows {
            for fx in 0..span.cols {
                let xv = ops.x[span.x + fy * t.row + fx * t.col + c];
                let wv = ops.w[span.w + (fy * t.fw + fx) * channels + c];
                acc = acc.wrapping_add(i32::from(wv) * (i32::from(xv) + ops.x_offset));
            }
        }
        out[c] = ops.scales.apply(c, acc);
    }
    Ok(())
}

/// Channels `c..c + 4` of `P` pixels `t.pixel` apart over the taps of
/// `span`, from `start`; `OFFSET` adds the input offset to every input.
#[inline(always)]
fn channels4<const P: usize, const OFFSET: bool>(
    t: &Taps,
    ops: &Operands<'_>,
    span: &Span,
    c: usize,
    start: [u32; 4],
) -> [[u32; 4]; P] {
    let offset = splat16(ops.x_offset);
    let mut acc = [start; P];
    let mut w_row = span.w + c;
    let mut x_row = span.x + c;
    for _ in 0..span.rows {
        let (mut w_at, mut x_at) = (w_row, x_row);
        for _ in 0..span.cols {
            let wv = word(ops.w, w_at);
            for (p, a) in acc.iter_mut().enumerate() {
                let xv = word(ops.x, x_at + p * t.pixel);
                if OFFSET {
                    mla_bytes4_offset(xv, wv, offset, a);
                } else {
                    mla_bytes4(xv, wv, a);
                }
            }
            w_at += t.channels;
            x_at += t.col;
        }
        w_row += t.fw * t.channels;
        x_row += t.row;
    }
    acc
}

/// One channel of one window, in plain arithmetic (the last `channels % 4`).
fn channel(t: &Taps, ops: &Operands<'_>, x: usize, c: usize) -> i32 {
    let mut acc = ops.folded[c];
    for fy in 0..t.fh {
        for fx in 0..t.fw {
            let xv = ops.x[x + fy * t.row + fx * t.col];
            let wv = ops.w[(fy * t.fw + fx) * t.channels + c];
            acc = acc.wrapping_add(i32::from(xv) * i32::from(wv));
        }
    }
    acc
}

/// Four bytes of `v` from `i` as a little-endian word.
#[inline(always)]
fn word(v: &[i8], i: usize) -> u32 {
    debug_assert!(i + 4 <= v.len());
    // SAFETY: `run` checked that every window of the run, all its taps and
    // channels, lies within the input and that the weights hold every tap;
    // `i + 4` is at most those ends. Unaligned reads are fine for `u32`
    // through `read_unaligned` (one `LDR` on ARMv7E-M).
    u32::from_le(unsafe { core::ptr::read_unaligned(v.as_ptr().add(i).cast::<u32>()) })
}
