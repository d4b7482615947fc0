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
//! start from the folded bias and add plain `w·x` ([`super::quant_math`]),
//! and [`run`] checks once that the last window of the run is inside the
//! slices, after which the loops read without per-element bounds checks.
//! Channels past the last multiple of four go through a plain loop.

use super::KernelError;
use super::arm_dsp::smmulr;
use super::arm_dsp::{
    mla_bytes4, mla_bytes4_offset, mla_bytes4_unpacked, mla_shared4, splat16, sxtb16, sxtb16_ror8,
};
use super::conv_geometry::Geometry;
#[cfg(doc)]
use super::quant_math::Requant;
use super::quant_math::{NARROW, OutputStage, scale_parts, shift_fields};

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
/// per-output step reads them without bounds checks.
///
/// When prepare has bounded every accumulator within `±2^29`
/// (`depthwise_conv::small_accumulators`) and no multiplier shifts left,
/// the step is *narrow*: TFLM's doubling high multiply
/// `(acc·m + 2^30) >> 31` is `SMMULR(2·acc, m)` (exact, as `2·acc` fits 32
/// bits) and its rounding shift by `e` is `(2h + 2^e − [h < 0]) >> (e + 1)`
/// in 32 bits (`|h| < 2^29`, `e ≤ 30`): bit for bit [`Requant::apply`]
/// with no 64-bit arithmetic. *Fast* is narrow with the full int8 output
/// range (no activation clamp beyond int8, as with ReLU at zero point
/// -128), one `SSAT`.
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
    /// shifts as [`super::quant_math::shift_parts`] makes them;
    /// `small_accumulators` as prepare found.
    pub(super) fn new(
        multiplier: &'a [i32],
        shift: &'a [[u8; 2]],
        stage: OutputStage,
        channels: usize,
        small_accumulators: bool,
    ) -> Result<Self, KernelError> {
        let len = multiplier.len();
        if multiplier.len() != shift.len() || (len != 1 && len < channels) {
            return Err(KernelError::Internal);
        }
        // Prepare wrote the shifts ([`shift_fields`] reads any byte safely);
        // the narrow step reads `right1` raw, so it is checked here.
        let narrow = small_accumulators
            && shift
                .iter()
                .all(|&[left, right1]| left & !NARROW == 0 && (1..=31).contains(&right1));
        Ok(Scales {
            multiplier,
            shift,
            step: usize::from(len > 1),
            stage,
            narrow,
        })
    }

    /// Whether [`Scales::apply`] may take its fast form.
    pub(super) fn fast(&self) -> bool {
        self.narrow && (self.stage.min, self.stage.max) == (-128, 127)
    }

    /// Channel `c`'s accumulator as an int8 output (`c` below the
    /// `channels` given to [`Scales::new`]), bit for bit
    /// [`Requant::apply`]. `FAST` only where [`Scales::fast`] holds.
    #[inline(always)]
    fn apply<const FAST: bool>(&self, c: usize, acc: i32) -> i8 {
        let i = c * self.step;
        debug_assert!(i < self.multiplier.len());
        // SAFETY: `new` checked both tables hold one entry or at least
        // `channels`, and callers pass `c < channels`.
        let (m, shift) = unsafe {
            (
                *self.multiplier.get_unchecked(i),
                *self.shift.get_unchecked(i),
            )
        };
        self.one::<FAST>(acc, m, shift)
    }

    /// Channel `c`'s multiplier and shift (`c` below the `channels` given
    /// to [`Scales::new`]), for [`Scales::one`].
    #[inline(always)]
    pub(super) fn of(&self, c: usize) -> (i32, [u8; 2]) {
        let i = c * self.step;
        (self.multiplier[i], self.shift[i])
    }

    /// One accumulator with its channel's multiplier and shift.
    #[inline(always)]
    pub(super) fn one<const FAST: bool>(&self, acc: i32, m: i32, shift: [u8; 2]) -> i8 {
        let scaled = if FAST || self.narrow {
            debug_assert!(self.narrow && shift[0] & !NARROW == 0);
            let right1 = u32::from(shift[1]);
            // SAFETY: `new` made the tables narrow only with `1 ≤ right1 ≤
            // 31` (told to the compiler so that the shifts need no masking).
            unsafe { core::hint::assert_unchecked((1..32).contains(&right1)) };
            let round = ((1u32 << right1) >> 1) as i32;
            let h = smmulr(acc.wrapping_mul(2) as u32, m as u32) as i32;
            let negative = ((h as u32) >> 31) as i32;
            let sum = h.wrapping_mul(2).wrapping_add(round).wrapping_sub(negative);
            sum >> right1
        } else {
            let (left, right1, _) = shift_fields(shift);
            scale_parts(acc, m, left, right1)
        };
        let v = scaled.wrapping_add(self.stage.offset);
        if FAST {
            v.clamp(-128, 127) as i8
        } else {
            v.max(self.stage.min).min(self.stage.max) as i8
        }
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
    /// Output channels (weights per tap).
    channels: usize,
    /// Input channels.
    in_c: usize,
    /// The depth multiplier: output channel `c` reads input channel `c / m`.
    m: usize,
}

/// Interior runs from this many pixels go through [`interior3x3`].
const LONG_RUN: usize = 8;

/// The tap strides of `g`.
fn taps(g: &Geometry) -> Taps {
    let in_c = g.in_c as usize;
    Taps {
        fh: g.y.filter as usize,
        fw: g.x.filter as usize,
        row: g.y.dilation as usize * g.x.in_size as usize * in_c,
        col: g.x.dilation as usize * in_c,
        pixel: g.x.stride as usize * in_c,
        channels: g.out_c as usize,
        in_c,
        m: (g.out_c / g.in_c.max(1)) as usize,
    }
}

/// Whether the packed path takes `g`: multiplier 1 (a word holds four
/// channels of input), or a multiple of 4 (four outputs share one input
/// byte), and at least four output channels.
pub(super) fn applies(g: &Geometry) -> bool {
    let (in_c, out_c) = (g.in_c, g.out_c);
    in_c > 0 && out_c >= 4 && out_c % in_c == 0 && (out_c == in_c || (out_c / in_c) % 4 == 0)
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
    let end = x0 + (count - 1) * t.pixel + (t.fh - 1) * t.row + (t.fw - 1) * t.col + t.in_c;
    if !applies(g)
        || end > ops.x.len()
        || ops.w.len() < t.fh * t.fw * channels
        || ops.folded.len() < channels
        || out.len() < o0 + count * channels
    {
        return Err(KernelError::Internal);
    }
    // The common filter as constants, so its taps unroll.
    // Long runs reuse each channel group's weights across the run; short
    // ones (small images) are cheaper a pixel at a time.
    let long = count >= LONG_RUN;
    let block = match ((t.fh, t.fw) == (3, 3), ops.scales.fast(), t.m > 1, long) {
        (true, true, false, true) => interior3x3::<true, false>,
        (true, false, false, true) => interior3x3::<false, false>,
        (true, true, true, true) => interior3x3::<true, true>,
        (true, false, true, true) => interior3x3::<false, true>,
        (true, true, false, false) => window::<3, 3, false, true, false>,
        (true, false, false, false) => window::<3, 3, false, false, false>,
        (true, true, true, false) => window::<3, 3, false, true, true>,
        (true, false, true, false) => window::<3, 3, false, false, true>,
        (false, true, false, _) => window::<0, 0, false, true, false>,
        (false, false, false, _) => window::<0, 0, false, false, false>,
        (false, true, true, _) => window::<0, 0, false, true, true>,
        (false, false, true, _) => window::<0, 0, false, false, true>,
    };
    let span = Span {
        x: x0,
        w: 0,
        rows: t.fh,
        cols: t.fw,
    };
    let out = &mut out[o0..o0 + count * channels];
    block(&t, ops, &span, Some(ops.folded), out);
    Ok(())
}

/// Interior windows of a 3×3 filter, one channel group at a time across
/// the whole run: the group's nine weight words are loaded once and reused
/// for every pixel, and each pixel's taps are read at fixed distances from
/// its first. Same arguments and results as [`window`] with `R = C = 3`.
#[inline(never)]
fn interior3x3<const FAST: bool, const SHARED: bool>(
    t: &Taps,
    ops: &Operands<'_>,
    span: &Span,
    bias: Option<&[i32]>,
    out: &mut [i8],
) {
    let channels = t.channels;
    let c4 = channels & !3;
    for c in (0..c4).step_by(4) {
        let w: [u32; 9] = core::array::from_fn(|k| word(ops.w, k * channels + c));
        // Unpacked once for the whole run (only where each pixel unpacks
        // its own input word).
        let unpacked: [[u32; 2]; 9] = w.map(|w| [sxtb16(w), sxtb16_ror8(w)]);
        let start: [u32; 4] = bias.map_or([0; 4], |b| core::array::from_fn(|i| b[c + i] as u32));
        let x_first = span.x + if SHARED { c / t.m } else { c };
        for (p, o4) in out.chunks_exact_mut(channels).enumerate() {
            let x = x_first + p * t.pixel;
            let mut acc = start;
            for (k, (&wv, &wu)) in w.iter().zip(&unpacked).enumerate() {
                let at = x + (k / 3) * t.row + (k % 3) * t.col;
                if SHARED {
                    mla_shared4(splat16(i32::from(byte(ops.x, at))), wv, &mut acc);
                } else {
                    mla_bytes4_unpacked(word(ops.x, at), wu, &mut acc);
                }
            }
            for (i, (o, &a)) in o4[c..c + 4].iter_mut().zip(&acc).enumerate() {
                *o = ops.scales.apply::<FAST>(c + i, a as i32);
            }
        }
    }
    if c4 < channels {
        for (p, o) in out.chunks_exact_mut(channels).enumerate() {
            let here = Span {
                x: span.x + p * t.pixel,
                w: 0,
                rows: 3,
                cols: 3,
            };
            for c in c4..channels {
                let start = bias.map_or(0, |b| b[c]);
                o[c] = ops
                    .scales
                    .apply::<FAST>(c, channel(t, ops, &here, c, start, 0));
            }
        }
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
pub(super) fn edge(
    g: &Geometry,
    ops: &Operands<'_>,
    win: &super::conv_geometry::Window,
    out: &mut [i8],
) -> Result<(), KernelError> {
    let t = taps(g);
    let (rows, cols) = (win.rows.clone(), win.cols.clone());
    let channels = t.channels;
    if out.len() != channels || ops.bias.is_some_and(|b| b.len() < channels) {
        return Err(KernelError::Internal);
    }
    if rows.is_empty() || cols.is_empty() {
        for (c, o) in out.iter_mut().enumerate() {
            *o = ops.scales.apply::<false>(c, ops.bias.map_or(0, |b| b[c]));
        }
        return Ok(());
    }
    let first = win.input_at(g, rows.start, cols.start);
    let last = win.input_at(g, rows.end - 1, cols.end - 1) + t.in_c;
    let w_end = ((rows.end - 1) as usize * t.fw + cols.end as usize) * channels;
    if !applies(g) || last > ops.x.len() || w_end > ops.w.len() {
        return Err(KernelError::Internal);
    }
    let span = Span {
        x: first,
        w: (rows.start as usize * t.fw + cols.start as usize) * channels,
        rows: rows.len(),
        cols: cols.len(),
    };
    // A 3×3 filter's borders as constants (one row or column cut).
    let block = match (span.rows, span.cols, ops.scales.fast(), t.m > 1) {
        (2, 3, true, false) => window::<2, 3, true, true, false>,
        (3, 2, true, false) => window::<3, 2, true, true, false>,
        (2, 2, true, false) => window::<2, 2, true, true, false>,
        (_, _, true, false) => window::<0, 0, true, true, false>,
        (_, _, false, false) => window::<0, 0, true, false, false>,
        (_, _, true, true) => window::<0, 0, true, true, true>,
        (_, _, false, true) => window::<0, 0, true, false, true>,
    };
    block(&t, ops, &span, ops.bias, &mut out[..channels]);
    Ok(())
}

/// Output pixels `t.pixel` apart, as many as `out` holds (`t.channels`
/// each), over the taps of `span` (`R × C` of them, or the span's own
/// counts when `R` is 0; the span placed for the first pixel), each sum
/// from `bias` (zero if none). `OFFSET` adds the input offset to every
/// input (windows over the padding); `FAST` as [`Scales::apply`]; `SHARED`
/// for multipliers of 4 and more (four outputs, one input byte).
#[inline(never)]
fn window<
    const R: usize,
    const C: usize,
    const OFFSET: bool,
    const FAST: bool,
    const SHARED: bool,
>(
    t: &Taps,
    ops: &Operands<'_>,
    span: &Span,
    bias: Option<&[i32]>,
    out: &mut [i8],
) {
    let (rows, cols) = if R == 0 {
        (span.rows, span.cols)
    } else {
        (R, C)
    };
    let c4 = t.channels & !3;
    let bias = bias.map(|b| &b[..t.channels]);
    let x_of = |pixel: usize, c: usize| pixel + if SHARED { c / t.m } else { c };
    let group = |x: usize, c: usize, o4: &mut [i8]| {
        let start = bias.map_or([0; 4], |b| {
            debug_assert!(c + 4 <= b.len());
            // SAFETY: `b` holds `t.channels` values and `c + 4 <= c4`.
            let b4 = unsafe { &*b.as_ptr().add(c).cast::<[i32; 4]>() };
            b4.map(|v| v as u32)
        });
        let [acc] = channels4::<1, OFFSET, SHARED>(t, ops, (rows, cols), (x, span.w + c), start);
        for (i, (o, &a)) in o4.iter_mut().zip(&acc).enumerate() {
            *o = ops.scales.apply::<FAST>(c + i, a as i32);
        }
    };
    if c4 == t.channels {
        // One loop over every pixel's groups, so that nothing is set up
        // again per pixel.
        let (mut pixel, mut c) = (span.x, 0);
        for o4 in out.chunks_exact_mut(4) {
            group(x_of(pixel, c), c, o4);
            c += 4;
            if c == t.channels {
                c = 0;
                pixel += t.pixel;
            }
        }
        return;
    }
    for (p, out) in out.chunks_exact_mut(t.channels).enumerate() {
        let pixel = span.x + p * t.pixel;
        for (c, o4) in (0..c4).step_by(4).zip(out.chunks_exact_mut(4)) {
            group(x_of(pixel, c), c, o4);
        }
        let here = Span {
            x: pixel,
            rows,
            cols,
            ..*span
        };
        for c in c4..t.channels {
            let start = bias.map_or(0, |b| b[c]);
            let offset = if OFFSET { ops.x_offset } else { 0 };
            out[c] = ops
                .scales
                .apply::<FAST>(c, channel(t, ops, &here, c, start, offset));
        }
    }
}

/// Four channels of `P` pixels `t.pixel` apart over `rows × cols` taps,
/// from `start`; `first` holds the input and weight offsets of the first
/// pixel's first tap (input channel and weight channel included).
/// `OFFSET` adds the input offset to every input; `SHARED` reads one input
/// byte for the four (multiplier a multiple of 4) rather than a word of
/// four input channels (multiplier 1).
#[inline(always)]
fn channels4<const P: usize, const OFFSET: bool, const SHARED: bool>(
    t: &Taps,
    ops: &Operands<'_>,
    (rows, cols): (usize, usize),
    (x0, w0): (usize, usize),
    start: [u32; 4],
) -> [[u32; 4]; P] {
    let offset = splat16(ops.x_offset);
    let mut acc = [start; P];
    for fy in 0..rows {
        for fx in 0..cols {
            // Tap offsets apart from the window's start: the same for every
            // pixel and channel group, so the compiler keeps them.
            let (x_tap, w_tap) = (fy * t.row + fx * t.col, (fy * t.fw + fx) * t.channels);
            let wv = word(ops.w, w0 + w_tap);
            for (p, a) in acc.iter_mut().enumerate() {
                let x_at = x0 + p * t.pixel + x_tap;
                if SHARED {
                    let xv = i32::from(byte(ops.x, x_at));
                    let xv = if OFFSET { xv + ops.x_offset } else { xv };
                    mla_shared4(splat16(xv), wv, a);
                } else {
                    let xv = word(ops.x, x_at);
                    if OFFSET {
                        mla_bytes4_offset(xv, wv, offset, a);
                    } else {
                        mla_bytes4(xv, wv, a);
                    }
                }
            }
        }
    }
    acc
}

/// One channel of one window in plain arithmetic (the last
/// `channels % 4`): `start + Σ w·(x + offset)` over the span's taps.
fn channel(t: &Taps, ops: &Operands<'_>, span: &Span, c: usize, start: i32, offset: i32) -> i32 {
    let mut acc = start;
    for fy in 0..span.rows {
        for fx in 0..span.cols {
            let xv = ops.x[span.x + fy * t.row + fx * t.col + c / t.m];
            let wv = ops.w[span.w + (fy * t.fw + fx) * t.channels + c];
            acc = acc.wrapping_add(i32::from(wv) * (i32::from(xv) + offset));
        }
    }
    acc
}

/// Byte `i` of `v`.
#[inline(always)]
fn byte(v: &[i8], i: usize) -> i8 {
    debug_assert!(i < v.len());
    // SAFETY: as for `word`: `run` and `edge` checked the window's extent.
    unsafe { *v.get_unchecked(i) }
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
