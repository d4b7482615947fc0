//! Sliding-window geometry along one axis, shared by the convolution-like
//! kernels: TFLM's output sizes and padding, and, per output position, which
//! filter taps land inside the input. `conv_geometry` pairs two of these for
//! CONV_2D and DEPTHWISE_CONV_2D; TRANSPOSE_CONV uses them on their own. (The
//! PAD operator is `pad`, unrelated.)
//!
//! ```
//! use hilt_runtime::kernels::window_axis::Axis;
//! use hilt_runtime::schema::Padding;
//!
//! // 5 wide, 3-tap filter, stride 2, SAME: 3 outputs, one pad column each side.
//! let x = Axis::new(Padding::SAME, 5, 3, 2, 1).unwrap();
//! assert_eq!((x.out_size, x.pad), (3, 1));
//! assert_eq!(x.taps(0), 1..3); // the first output's left tap is padding
//! assert_eq!(x.taps(1), 0..3);
//! assert_eq!(x.taps(2), 0..2); // and the last output's right tap
//! assert_eq!((x.interior_lo, x.interior_hi), (1, 2));
//! ```

use core::ops::Range;

use crate::schema::Padding;

/// Largest input, window or stride an axis takes (2^24).
const MAX_WINDOW: i64 = 1 << 24;

/// One spatial axis (height or width) of a windowed operator.
///
/// Output position `o` reads input positions `o * stride - pad + k * dilation`
/// for filter taps `k` in `0..filter`; taps outside `0..in_size` read nothing
/// (TFLM's reference kernels skip them).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Axis {
    /// Input size.
    pub in_size: i32,
    /// Filter taps.
    pub filter: i32,
    /// Stride.
    pub stride: i32,
    /// Dilation.
    pub dilation: i32,
    /// Padding before the first input position.
    pub pad: i32,
    /// Output size, as TFLM computes it from the padding mode.
    pub out_size: i32,
    /// First output position whose taps all lie inside the input.
    pub interior_lo: i32,
    /// One past the last such position (`interior_lo <= interior_hi`).
    pub interior_hi: i32,
}

/// Why an axis cannot be set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AxisError {
    /// Stride, dilation or filter size below one, or an input size below zero.
    BadParameter,
    /// A padding mode other than SAME or VALID.
    UnknownPadding,
}

impl Axis {
    /// The axis of an input `in_size` long under a `filter`-tap window, as
    /// TFLM's `ComputePaddingHeightWidth` computes it.
    pub fn new(
        padding: Padding,
        in_size: i32,
        filter: i32,
        stride: i32,
        dilation: i32,
    ) -> Result<Self, AxisError> {
        if in_size < 0 || filter < 1 || stride < 1 || dilation < 1 {
            return Err(AxisError::BadParameter);
        }
        // In i64 so that no stride or dilation a model holds can overflow.
        let (n, f, s, d) = (
            i64::from(in_size),
            i64::from(filter),
            i64::from(stride),
            i64::from(dilation),
        );
        let effective = (f - 1) * d + 1;
        // Bounded so that the per-position arithmetic below stays in i32.
        if effective > MAX_WINDOW || n > MAX_WINDOW || s > MAX_WINDOW {
            return Err(AxisError::BadParameter);
        }
        let out = match padding {
            Padding::SAME => (n + s - 1) / s,
            Padding::VALID => ((n + s - effective) / s).max(0),
            _ => return Err(AxisError::UnknownPadding),
        };
        // TFLM puts the odd padding unit after the input, so `pad` is the floor half.
        let total = ((out - 1) * s + effective - n).max(0);
        let pad = total / 2;
        // Interior: origin >= 0 and origin + (filter - 1) * dilation < in_size.
        let lo = ((pad + s - 1) / s).min(out);
        let last = n - 1 + pad - (effective - 1);
        let hi = if last < 0 { 0 } else { last / s + 1 }.min(out).max(lo);
        let narrow = |v: i64| i32::try_from(v).map_err(|_| AxisError::BadParameter);
        Ok(Axis {
            in_size,
            filter,
            stride,
            dilation,
            pad: narrow(pad)?,
            out_size: narrow(out)?,
            interior_lo: narrow(lo)?,
            interior_hi: narrow(hi)?,
        })
    }

    /// The axis of outputs `o0..o1` alone, over the input positions they
    /// read, and the first of those positions: a kernel given that slice
    /// of the input and this axis computes exactly those outputs (the
    /// lean schedule's bands, `kernels::in_place`).
    pub fn band(&self, o0: i32, o1: i32) -> (Axis, i32) {
        let effective = (self.filter - 1) * self.dilation + 1;
        let first = self.origin(o0).max(0).min(self.in_size);
        let end = (self.origin(o1 - 1) + effective).clamp(first, self.in_size);
        let (n, s) = (end - first, self.stride);
        let pad = first - self.origin(o0);
        let out = o1 - o0;
        let lo = ((pad + s - 1) / s).min(out);
        let last = n - 1 + pad - (effective - 1);
        let hi = if last < 0 { 0 } else { last / s + 1 }.min(out).max(lo);
        let axis = Axis {
            in_size: n,
            filter: self.filter,
            stride: s,
            dilation: self.dilation,
            pad,
            out_size: out,
            interior_lo: lo,
            interior_hi: hi,
        };
        (axis, first)
    }

    /// Input position of output `o`'s first tap (may be negative).
    #[inline(always)]
    pub fn origin(&self, o: i32) -> i32 {
        o * self.stride - self.pad
    }

    /// Filter taps of output `o` that land inside the input.
    #[inline]
    pub fn taps(&self, o: i32) -> Range<i32> {
        let origin = self.origin(o);
        if self.dilation == 1 {
            // No division on the common path (it is per output pixel).
            let end = (self.in_size - origin).clamp(0, self.filter);
            return (-origin).clamp(0, end)..end;
        }
        let start = if origin < 0 {
            (-origin + self.dilation - 1) / self.dilation
        } else {
            0
        };
        let room = self.in_size - 1 - origin;
        let end = if room < 0 {
            0
        } else {
            (room / self.dilation + 1).min(self.filter)
        };
        start.min(end)..end
    }

    /// Whether every tap of output `o` lands inside the input.
    #[inline(always)]
    pub fn is_interior(&self, o: i32) -> bool {
        o >= self.interior_lo && o < self.interior_hi
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Taps by brute force.
    fn naive_taps(a: &Axis, o: i32) -> Vec<i32> {
        (0..a.filter)
            .filter(|k| {
                let i = a.origin(o) + k * a.dilation;
                (0..a.in_size).contains(&i)
            })
            .collect()
    }

    #[test]
    fn a_band_reads_what_its_outputs_read() {
        for padding in [Padding::SAME, Padding::VALID] {
            for in_size in 1..12 {
                for (filter, stride, dilation) in
                    [(3, 1, 1), (3, 2, 1), (5, 1, 1), (3, 1, 2), (1, 1, 1)]
                {
                    let a = Axis::new(padding, in_size, filter, stride, dilation).unwrap();
                    for o0 in 0..a.out_size {
                        for o1 in o0 + 1..=a.out_size {
                            let (b, first) = a.band(o0, o1);
                            assert_eq!(b.out_size, o1 - o0);
                            for o in o0..o1 {
                                let whole: Vec<i32> = naive_taps(&a, o)
                                    .iter()
                                    .map(|k| a.origin(o) + k * a.dilation)
                                    .collect();
                                let band: Vec<i32> = naive_taps(&b, o - o0)
                                    .iter()
                                    .map(|k| first + b.origin(o - o0) + k * b.dilation)
                                    .collect();
                                assert_eq!(band, whole, "{a:?} band {o0}..{o1} o={o}");
                                assert_eq!(
                                    b.is_interior(o - o0),
                                    naive_taps(&b, o - o0).len() == filter as usize
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn matches_tflm_padding() {
        // 224 → 112 with a 3×3 stride-2 SAME filter: total padding 1, all after.
        let a = Axis::new(Padding::SAME, 224, 3, 2, 1).unwrap();
        assert_eq!((a.out_size, a.pad), (112, 0));
        // 96 → 48, 3-tap stride 2.
        let a = Axis::new(Padding::SAME, 96, 3, 2, 1).unwrap();
        assert_eq!((a.out_size, a.pad), (48, 0));
        // VALID never pads.
        let a = Axis::new(Padding::VALID, 10, 4, 1, 1).unwrap();
        assert_eq!((a.out_size, a.pad), (7, 0));
        // Dilation widens the window: 3 taps at dilation 2 cover 5.
        let a = Axis::new(Padding::SAME, 7, 3, 1, 2).unwrap();
        assert_eq!((a.out_size, a.pad), (7, 2));
        let a = Axis::new(Padding::VALID, 3, 5, 1, 1).unwrap();
        assert_eq!(a.out_size, 0);
        assert!(Axis::new(Padding::SAME, 3, 3, 0, 1).is_err());
    }

    #[test]
    fn taps_and_interior_match_brute_force() {
        for padding in [Padding::SAME, Padding::VALID] {
            for in_size in 0..12 {
                for filter in 1..6 {
                    for stride in 1..4 {
                        for dilation in 1..4 {
                            let a = Axis::new(padding, in_size, filter, stride, dilation).unwrap();
                            for o in 0..a.out_size {
                                let naive = naive_taps(&a, o);
                                let got: Vec<i32> = a.taps(o).collect();
                                assert_eq!(got, naive, "{a:?} o={o}");
                                assert_eq!(
                                    a.is_interior(o),
                                    naive.len() == filter as usize,
                                    "{a:?} o={o}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
