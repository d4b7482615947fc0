//! Invoke's half of the requantisation: an int32 accumulator scaled by its
//! channel's Q31 multiplier and power-of-two shift, offset and clamped to
//! int8, exactly as TFLM's `MultiplyByQuantizedMultiplier` (in the cheapest
//! form prepare proved exact for the channel); and the two-byte encoding of
//! a stored shift, which prepare writes and invoke reads.

use super::super::KernelError;

/// What happens to a requantised accumulator: add the output zero point,
/// clamp to the fused activation's range.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct OutputStage {
    /// Output zero point.
    pub offset: i32,
    /// Smallest output value (activation range ∩ int8).
    pub min: i32,
    /// Largest output value.
    pub max: i32,
}

/// TFLM's `shift` as the `[left, right + 1]` pair [`scale_parts`] takes.
pub fn shift_parts(shift: i32) -> [u8; 2] {
    // quantize_multiplier keeps shifts within -31..=31.
    let shift = shift.clamp(-31, 31);
    [shift.max(0) as u8, ((-shift).max(0) + 1) as u8]
}

/// The flag [`prepare_channels`](super::prepare_channels) sets on a stored
/// shift's `left` byte when prepare has proven that channel's accumulators
/// small enough for [`scale_narrow`]: `|acc · 2^left| < 2^29` for every
/// input, and `right1 ≤ 31`.
pub const NARROW: u8 = 0x80;

/// A stored shift pair `[left | flag, right1]` as `(left, right1, narrow)`.
/// Prepare wrote `left ≤ 31`, `1 ≤ right1 ≤ 32` and the flag only with
/// `right1 ≤ 31`, so invoke does not re-check the table: the arithmetic
/// below wraps its shifts, so any other byte gives a wrong value, never a
/// panic.
#[inline(always)]
pub fn shift_fields([left, right1]: [u8; 2]) -> (u32, u32, bool) {
    (u32::from(left & 31), u32::from(right1), left & NARROW != 0)
}

/// The requantisation of one operator at invoke: its multipliers, shifts
/// and output stage, read from the tail.
#[derive(Debug, Clone, Copy)]
pub struct Requant<'a> {
    multiplier: &'a [i32],
    shift: &'a [[u8; 2]],
    /// 1 for per-channel arrays, 0 for a single multiplier.
    step: usize,
    stage: OutputStage,
}

impl<'a> Requant<'a> {
    /// From stored arrays (of equal length, one or one per channel). Only
    /// the lengths are checked: prepare wrote the shifts, and
    /// [`shift_fields`] reads any byte safely.
    #[inline]
    pub fn new(
        multiplier: &'a [i32],
        shift: &'a [[u8; 2]],
        stage: OutputStage,
    ) -> Result<Self, KernelError> {
        if multiplier.is_empty() || multiplier.len() != shift.len() {
            return Err(KernelError::Internal);
        }
        Ok(Requant {
            multiplier,
            shift,
            step: usize::from(multiplier.len() > 1),
            stage,
        })
    }

    /// The one channel's constants when every channel shares them.
    #[inline(always)]
    pub fn uniform(&self) -> Option<ChannelRequant> {
        (self.step == 0).then(|| self.channel(0))
    }

    /// Whether channels `0..channels` all have a multiplier.
    pub fn covers(&self, channels: usize) -> bool {
        self.step == 0 || self.multiplier.len() >= channels
    }

    /// Channel `c`'s accumulator as an int8 output, as TFLM's reference
    /// kernels compute it (`MultiplyByQuantizedMultiplier`, offset, clamp):
    /// in 32 bits ([`scale_narrow`]) where prepare proved it exact.
    #[inline(always)]
    pub fn apply(&self, c: usize, acc: i32) -> i8 {
        let i = c * self.step;
        let (left, right1, narrow) = shift_fields(self.shift[i]);
        let m = self.multiplier[i];
        let scaled = if narrow {
            scale_narrow(acc, m, left, right1)
        } else {
            scale_parts(acc, m, left, right1)
        };
        self.stage.clamp(scaled)
    }

    /// Channel `c`'s constants, for loops that requantise many outputs of
    /// one channel (they stay in registers instead of being re-read).
    #[inline(always)]
    pub fn channel(&self, c: usize) -> ChannelRequant {
        let i = c * self.step;
        let (left, right1, narrow) = shift_fields(self.shift[i]);
        ChannelRequant::from_fields(self.multiplier[i], left, right1, narrow, self.stage)
    }
}

impl ChannelRequant {
    /// One channel's constants from its stored multiplier and shift
    /// bytes (as [`prepare_channels`](super::prepare_channels) wrote them)
    /// and the output stage.
    #[inline(always)]
    pub fn new(multiplier: i32, shift: [u8; 2], stage: OutputStage) -> Self {
        let (left, right1, narrow) = shift_fields(shift);
        Self::from_fields(multiplier, left, right1, narrow, stage)
    }

    /// [`new`](Self::new) with the shift bytes already read.
    #[inline(always)]
    fn from_fields(
        multiplier: i32,
        left: u32,
        right1: u32,
        narrow: bool,
        stage: OutputStage,
    ) -> Self {
        // The one-rounding form holds for m > 2^30 and a right shift.
        let one_rounding = multiplier > 1 << 30 && (2..=32).contains(&right1);
        ChannelRequant {
            multiplier,
            left,
            right1,
            // 2^30 + 2^(29 + right1) from its two words: no 64-bit shift.
            round: if !one_rounding {
                0
            } else if right1 == 2 {
                (1 << 30) + (1 << 31)
            } else {
                (i64::from(1i32.wrapping_shl(right1 - 3)) << 32) | (1 << 30)
            },
            narrow,
            stage,
        }
    }
}

/// One channel's requantisation ([`Requant::channel`]).
#[derive(Debug, Clone, Copy)]
pub struct ChannelRequant {
    multiplier: i32,
    left: u32,
    right1: u32,
    /// `2^30 + 2^(30 + right)` when [`scale_one_rounding`] applies, else 0.
    round: i64,
    /// Whether [`scale_narrow`] applies (prepare bounded the channel's
    /// accumulators); taken before one-rounding, as it is shorter.
    narrow: bool,
    /// Read by `matvec`, which picks its loop by whether the clamp is int8's own.
    pub(super) stage: OutputStage,
}

/// Which of the exact scalings a channel's constants allow (the shortest
/// first): see [`ChannelRequant::apply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleForm {
    /// [`scale_one_rounding`].
    OneRounding,
    /// [`scale_narrow`].
    Narrow,
    /// [`scale_parts`]: any accumulator.
    Parts,
}

impl ChannelRequant {
    /// The form [`apply`](Self::apply) takes for this channel.
    #[inline(always)]
    pub fn form(&self) -> ScaleForm {
        if self.narrow {
            ScaleForm::Narrow
        } else if self.round != 0 {
            ScaleForm::OneRounding
        } else {
            ScaleForm::Parts
        }
    }

    /// [`apply`](Self::apply) where [`form`](Self::form) is `OneRounding`
    /// (any other channel gets a wrong value, never a panic).
    #[inline(always)]
    pub fn apply_one_rounding(&self, acc: i32) -> i8 {
        let scaled = scale_one_rounding(acc, self.multiplier, self.left, self.right1, self.round);
        self.stage.clamp(scaled)
    }

    /// [`apply_one_rounding`](Self::apply_one_rounding) for an output
    /// stage that clamps only to int8 ([`OutputStage::is_full_range`]):
    /// the bounds are then constants, two registers fewer in the loops.
    #[inline(always)]
    pub fn apply_one_rounding_full(&self, acc: i32) -> i8 {
        let scaled = scale_one_rounding(acc, self.multiplier, self.left, self.right1, self.round);
        self.stage.clamp_full(scaled)
    }

    /// [`apply_narrow`](Self::apply_narrow) for a full-range stage.
    #[inline(always)]
    pub fn apply_narrow_full(&self, acc: i32) -> i8 {
        self.stage
            .clamp_full(scale_narrow(acc, self.multiplier, self.left, self.right1))
    }

    /// [`apply`](Self::apply) where [`form`](Self::form) is `Narrow`.
    #[inline(always)]
    pub fn apply_narrow(&self, acc: i32) -> i8 {
        self.stage
            .clamp(scale_narrow(acc, self.multiplier, self.left, self.right1))
    }

    /// Requantises `acc(i)` for `i` in `0..n`, giving each result to
    /// `put(i, value)`: one loop per form and clamp, chosen once, so a
    /// column of outputs of one channel pays no per-value branches.
    #[inline(always)]
    pub fn apply_each<A, P>(&self, n: usize, acc: A, mut put: P)
    where
        A: Fn(usize) -> i32,
        P: FnMut(usize, i8),
    {
        #[inline(always)]
        fn each<A: Fn(usize) -> i32, P: FnMut(usize, i8)>(
            n: usize,
            acc: &A,
            put: &mut P,
            f: impl Fn(i32) -> i8,
        ) {
            for i in 0..n {
                put(i, f(acc(i)));
            }
        }
        // A copy, so that the constants stay in registers across the stores.
        let r = *self;
        // Size builds keep one loop: the general form gives the same bytes.
        if super::super::COMPACT {
            return each(n, &acc, &mut put, |a| r.apply(a));
        }
        let (m, left, right1, round) = (r.multiplier, r.left, r.right1, r.round);
        let stage = r.stage;
        match (r.form(), stage.is_full_range()) {
            (ScaleForm::OneRounding, true) => each(n, &acc, &mut put, |a| {
                stage.clamp_full(scale_one_rounding(a, m, left, right1, round))
            }),
            (ScaleForm::Narrow, true) => each(n, &acc, &mut put, |a| {
                stage.clamp_full(scale_narrow(a, m, left, right1))
            }),
            (ScaleForm::OneRounding, false) => each(n, &acc, &mut put, |a| {
                stage.clamp(scale_one_rounding(a, m, left, right1, round))
            }),
            (ScaleForm::Narrow, false) => each(n, &acc, &mut put, |a| {
                stage.clamp(scale_narrow(a, m, left, right1))
            }),
            (ScaleForm::Parts, _) => each(n, &acc, &mut put, |a| r.apply(a)),
        }
    }

    /// The accumulator as an int8 output (see [`Requant::apply`]).
    #[inline(always)]
    pub fn apply(&self, acc: i32) -> i8 {
        // Narrow first: its 32-bit `SMMULR` needs no 64-bit sum set up per
        // output, where one rounding's `SMLAL` does (VWW's column loops: 16
        // instructions an output → 12).
        let scaled = if self.narrow {
            scale_narrow(acc, self.multiplier, self.left, self.right1)
        } else if self.round != 0 {
            scale_one_rounding(acc, self.multiplier, self.left, self.right1, self.round)
        } else {
            scale_parts(acc, self.multiplier, self.left, self.right1)
        };
        self.stage.clamp(scaled)
    }
}

/// [`scale_parts`] in 32-bit arithmetic, exact when `|x · 2^left| < 2^29`
/// and `right1 ≤ 31` (what [`NARROW`] promises): with `y = x · 2^(left+1)`
/// (fits 32 bits), TFLM's doubling high multiply `(x'·m + 2^30) >> 31` is
/// `SMMULR(y, m)` = `(y·m + 2^31) >> 32`, and its rounding division by
/// `2^e` is `(2h + 2^e − [h < 0]) >> (e + 1)` (see [`scale_parts`]), which
/// cannot overflow since `|h| ≤ |x'| < 2^29` and `e ≤ 30`. Outside that
/// promise the result is wrong but nothing panics.
#[inline(always)]
pub fn scale_narrow(x: i32, multiplier: i32, left: u32, right1: u32) -> i32 {
    let y = x.wrapping_shl(left + 1);
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    let h = super::super::arm_dsp::smmulr(y as u32, multiplier as u32) as i32;
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    let h = ((i64::from(y) * i64::from(multiplier) + (1 << 31)) >> 32) as i32;
    let right1 = right1 & 31;
    let round = ((1u32 << right1) >> 1) as i32;
    let negative = ((h as u32) >> 31) as i32;
    h.wrapping_mul(2).wrapping_add(round).wrapping_sub(negative) >> right1
}

impl OutputStage {
    /// A requantised value plus the zero point, clamped.
    #[inline(always)]
    fn clamp(&self, scaled: i32) -> i8 {
        let v = scaled.wrapping_add(self.offset);
        // max then min, as TFLM: a range inverted by odd quantisation yields `max`.
        v.max(self.min).min(self.max) as i8
    }

    /// Whether the clamp is int8's own range (no fused activation narrows
    /// it): then [`clamp_full`](Self::clamp_full) gives the same values.
    #[inline(always)]
    pub fn is_full_range(&self) -> bool {
        self.min == i32::from(i8::MIN) && self.max == i32::from(i8::MAX)
    }

    /// [`clamp`](Self::clamp) where [`is_full_range`](Self::is_full_range) holds.
    #[inline(always)]
    fn clamp_full(&self, scaled: i32) -> i8 {
        let v = scaled.wrapping_add(self.offset);
        v.clamp(i32::from(i8::MIN), i32::from(i8::MAX)) as i8
    }
}

/// TFLM's `MultiplyByQuantizedMultiplier(x, multiplier, shift)` for the
/// multipliers [`quantize_multiplier`] makes (`0 ≤ multiplier < 2^31`).
///
/// [`quantize_multiplier`]: super::super::fixed_point::quantize_multiplier
pub fn scale(x: i32, multiplier: i32, shift: i32) -> i32 {
    let [left, right] = shift_parts(shift);
    scale_parts(x, multiplier, u32::from(left), u32::from(right))
}

/// [`scale`] with the shift split as [`shift_parts`] does, without
/// branches (`right1 = right + 1`, `1..=32`):
/// - `SaturatingRoundingDoublingHighMul(x, m)` is `h = (x·m + 2^30) >> 31`:
///   its nudge for negative products, `1 − 2^30`, followed by division
///   truncating toward zero, is the same floor shift; and it never
///   saturates, since `m` is never `i32::MIN`;
/// - `RoundingDivideByPOT(h, e)` (ties away from zero) is
///   `(2h + 2^e − [h < 0]) >> (e + 1)` for every `e ≥ 0`: for `e ≥ 1` the
///   `−1` and gemmlowp's `−2` floor alike (an odd numerator is never a
///   multiple of `2^(e+1)`), and for `e = 0` it is `h`.
#[inline(always)]
pub fn scale_parts(x: i32, multiplier: i32, left: u32, right1: u32) -> i32 {
    #[cfg(target_pointer_width = "64")]
    {
        scale_parts_wide(x, multiplier, left, right1)
    }
    #[cfg(not(target_pointer_width = "64"))]
    {
        scale_parts_narrow(x, multiplier, left, right1)
    }
}

/// [`scale_parts`] in 64-bit arithmetic (cheap on 64-bit cores).
#[inline(always)]
pub fn scale_parts_wide(x: i32, multiplier: i32, left: u32, right1: u32) -> i32 {
    let product = i64::from(x.wrapping_shl(left)) * i64::from(multiplier);
    let high = (product + (1 << 30)) >> 31;
    let round = 1i64.wrapping_shl(right1.wrapping_sub(1));
    let sum = (2 * high).wrapping_add(round).wrapping_add(high >> 63);
    sum.wrapping_shr(right1) as i32
}

/// [`scale_parts`] for 32-bit cores: one 32×32→64 multiply, then gemmlowp's
/// `RoundingDivideByPOT` in 32 bits (`h` always fits: `|x·m| < 2^62`), so no
/// 64-bit variable shift.
#[inline(always)]
pub fn scale_parts_narrow(x: i32, multiplier: i32, left: u32, right1: u32) -> i32 {
    let product = i64::from(x.wrapping_shl(left)) * i64::from(multiplier);
    let high = ((product + (1 << 30)) >> 31) as i32;
    let e = right1.wrapping_sub(1);
    let mask = 1u32.wrapping_shl(e).wrapping_sub(1) as i32;
    let threshold = (mask >> 1) + i32::from(high < 0);
    high.wrapping_shr(e) + i32::from((high & mask) > threshold)
}

/// [`scale_parts`] with both of TFLM's roundings folded into one, for
/// `2^30 < multiplier < 2^31` and a right shift `e = right1 - 1 >= 1`
/// (`round = 2^30 + 2^(30 + e)`): fewer instructions on 32-bit cores.
///
/// With `t = x·m + 2^30`, TFLM computes `h = ⌊t / 2^31⌋` and then
/// `⌊(h + 2^(e−1) − [h < 0]) / 2^e⌋` (gemmlowp's ties-away division), and
/// `⌊(⌊t/B⌋ + c) / D⌋ = ⌊(t + c·B) / (B·D)⌋` for integers, so the result is
/// `(x·m + 2^30 + 2^(30+e) − [h < 0]·2^31) >> (31 + e)`: the high word of
/// the 64-bit sum shifted by `e − 1`. Since `m > 2^30`, `h < 0` exactly
/// when `x < 0` (`x ≤ −1` gives `t ≤ 2^30 − m < 0`).
#[inline(always)]
pub fn scale_one_rounding(x: i32, multiplier: i32, left: u32, right1: u32, round: i64) -> i32 {
    let x = x.wrapping_shl(left);
    let negative = i64::from(x >> 31) << 31;
    let sum = i64::from(x) * i64::from(multiplier) + round + negative;
    ((sum >> 32) as i32).wrapping_shr(right1.wrapping_sub(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_is_tflm_multiply_by_quantized_multiplier() {
        use crate::kernels::fixed_point::multiply_by_quantized_multiplier as tflm;
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let edges = [
            i32::MIN,
            i32::MIN + 1,
            -(1 << 30),
            -65_537,
            -3,
            -2,
            -1,
            0,
            1,
            2,
            3,
            65_535,
            1 << 30,
            i32::MAX,
        ];
        let multipliers = [
            0,
            1,
            1 << 30,
            (1 << 30) + 1,
            1_518_500_250,
            i32::MAX - 1,
            i32::MAX,
        ];
        for shift in -31..=30 {
            for &m in &multipliers {
                for &x in &edges {
                    assert_eq!(scale(x, m, shift), tflm(x, m, shift), "{x} {m} {shift}");
                    let [l, r] = shift_parts(shift);
                    let (l, r) = (u32::from(l), u32::from(r));
                    assert_eq!(scale_parts_narrow(x, m, l, r), tflm(x, m, shift));
                    assert_eq!(scale_parts_wide(x, m, l, r), tflm(x, m, shift));
                    if m > 1 << 30 && r >= 2 {
                        let round = (1i64 << 30) + (1i64 << (29 + r));
                        let one = scale_one_rounding(x, m, l, r, round);
                        assert_eq!(one, tflm(x, m, shift), "{x} {m} {shift}");
                    }
                    // The narrow form at the edges of its bound.
                    for y in [x, (1 << 29) - 1, -(1 << 29) + 1, 1 << 28, -(1 << 28)] {
                        if r <= 31 && (i64::from(y) << l).abs() < 1 << 29 {
                            assert_eq!(
                                scale_narrow(y, m, l, r),
                                tflm(y, m, shift),
                                "{y} {m} {shift}"
                            );
                        }
                    }
                }
            }
            for _ in 0..2000 {
                let r = next();
                let x = (r as i32) >> (r >> 59);
                let m = ((r >> 32) as i32 & i32::MAX) | (1 << 30);
                assert_eq!(scale(x, m, shift), tflm(x, m, shift), "{x} {m} {shift}");
                let [l, rr] = shift_parts(shift);
                let narrow = scale_parts_narrow(x, m, u32::from(l), u32::from(rr));
                assert_eq!(narrow, tflm(x, m, shift), "{x} {m} {shift}");
                if m > 1 << 30 && rr >= 2 {
                    let round = (1i64 << 30) + (1i64 << (29 + u32::from(rr)));
                    let one = scale_one_rounding(x, m, u32::from(l), u32::from(rr), round);
                    assert_eq!(one, tflm(x, m, shift), "{x} {m} {shift}");
                }
                let (ms, ss) = ([m], [shift_parts(shift)]);
                let r = Requant::new(&ms, &ss, stage_wide()).unwrap();
                assert_eq!(r.channel(0).apply(x), r.apply(0, x));
                let clamp = tflm(x, m, shift).wrapping_add(-3).clamp(-128, 127) as i8;
                assert_eq!(r.apply(0, x), clamp, "{x} {m} {shift}");
                // Within the narrow bound, the 32-bit form is exact.
                if rr <= 31 && (i64::from(x) << l).abs() < 1 << 29 {
                    let narrow = scale_narrow(x, m, u32::from(l), u32::from(rr));
                    assert_eq!(narrow, tflm(x, m, shift), "{x} {m} {shift}");
                    let flagged = [[l | NARROW, rr]];
                    let r = Requant::new(&ms, &flagged, stage_wide()).unwrap();
                    assert_eq!(r.apply(0, x), clamp, "{x} {m} {shift}");
                    assert_eq!(r.channel(0).apply(x), clamp, "{x} {m} {shift}");
                }
            }
        }
    }

    fn stage_wide() -> OutputStage {
        OutputStage {
            offset: -3,
            min: -128,
            max: 127,
        }
    }

    #[test]
    fn requant_clamps_in_tflm_order() {
        let stage = OutputStage {
            offset: 5,
            min: 10,
            max: 3,
        };
        let shift = [shift_parts(1)];
        let r = Requant::new(&[1 << 30], &shift, stage).unwrap();
        // An inverted range yields `max`, as std::min(std::max(v, min), max).
        assert_eq!(r.apply(0, 100), 3);
        assert_eq!(r.apply(7, -100), 3);
    }

    #[test]
    fn shift_fields_read_any_byte_safely() {
        assert_eq!(shift_fields(shift_parts(-5)), (0, 6, false));
        assert_eq!(shift_fields([3 | NARROW, 4]), (3, 4, true));
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                let shift = [[a, b]];
                let r = Requant::new(&[i32::MAX], &shift, stage_wide()).unwrap();
                // Garbage shifts give garbage, never a panic.
                let _ = (r.apply(0, 12345), r.channel(0).apply(-12345));
            }
        }
    }

    /// The constant-bound forms give what the general ones give, for a
    /// stage that is int8's range, and only such a stage claims it.
    #[test]
    fn full_range_forms_match_the_clamped_ones() {
        let wide = stage_wide();
        assert!(wide.is_full_range());
        assert!(!OutputStage { min: -100, ..wide }.is_full_range());
        assert!(!OutputStage { max: 0, ..wide }.is_full_range());
        for (m, shift) in [
            (i32::MAX, [0u8, 8]),
            (1 << 30 | 12345, [0, 3]),
            (1 << 29, [2, 1]),
        ] {
            for narrow in [0, NARROW] {
                let bytes = [[shift[0] | narrow, shift[1]]];
                let one = ChannelRequant::new(m, bytes[0], wide);
                let multipliers = [m];
                let same = Requant::new(&multipliers, &bytes, wide).unwrap();
                for acc in [-(1 << 28), -70_000, -129, -1, 0, 1, 300, 65_535, 1 << 28] {
                    assert_eq!(one.apply(acc), same.apply(0, acc), "{m} {shift:?} {acc}");
                    assert_eq!(
                        one.apply_one_rounding_full(acc),
                        one.apply_one_rounding(acc)
                    );
                    assert_eq!(one.apply_narrow_full(acc), one.apply_narrow(acc));
                }
            }
        }
    }

    #[test]
    fn requant_new_checks_lengths() {
        let stage = stage_wide();
        assert!(Requant::new(&[], &[], stage).is_err());
        assert!(Requant::new(&[1, 2], &[[0, 1]], stage).is_err());
        assert!(Requant::new(&[1], &[[0, 1]], stage).is_ok());
    }
}
