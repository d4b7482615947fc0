//! int8 building blocks of FULLY_CONNECTED, CONV_2D and DEPTHWISE_CONV_2D:
//! the per-channel requantisation data computed once at prepare, and the
//! inner products the kernels spend their time in.
//!
//! TFLM's reference kernels compute, per output channel `c`,
//! `acc = bias[c] + Σ w·(x + input_offset)` and requantise `acc`. Because
//! int32 accumulation is exact (wrapping, as TFLM's C++ does in practice),
//! the offset term `input_offset · Σ w` is a per-channel constant, which
//! the convolutions fold into the bias at prepare ([`fold_bias`]) so that
//! every window wholly inside the input needs only `Σ w·x`; windows that
//! hang over a padded border skip taps, so they use the model's own bias
//! and the unfolded formula ([`dot_offset`]). FULLY_CONNECTED reads each
//! weight once per input row, so there the offset is added to the input
//! instead ([`matvec`]), shared by four weight rows, and no per-channel
//! array is stored for it.

use super::KernelError;
use super::context::{PrepareContext, Stored};
use super::fixed_point::{activation_range_quantized, quantize_multiplier};
use super::tensor::{Quant, channel_scales, require_quant};
use crate::model::TensorInfo;
use crate::schema::{ActivationFunctionType, TensorType};

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

/// Per-output-channel requantisation constants in the arena's tail.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ChannelParams {
    /// Q31 multipliers: one per channel, or one for all.
    pub multiplier: Stored<i32>,
    /// Their power-of-two exponents (TFLM's `shift`) as `[left, right + 1]`
    /// with `left = max(shift, 0)`, `right = max(-shift, 0)`: same length.
    pub shift: Stored<[u8; 2]>,
    /// `-input_zero_point`, in `-127..=128`.
    pub input_offset: i32,
    /// Output zero point and activation clamp.
    pub stage: OutputStage,
}

/// How the real multiplier `input_scale · filter_scale / output_scale` is
/// rounded: TFLM computes it two ways, and the last bit of the Q31 value
/// depends on which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleRule {
    /// `(f64(input) · f64(filter[c])) / f64(output)`, per channel (scale
    /// arrays of length one broadcast): CONV_2D, DEPTHWISE_CONV_2D and
    /// per-channel FULLY_CONNECTED (`PopulateConvolutionQuantizationParams`).
    PerChannel,
    /// `f64(f32(input · filter)) / f64(output)`, one multiplier: per-tensor
    /// FULLY_CONNECTED (`GetQuantizedConvolutionMultipler`).
    PerTensorProduct,
}

/// What [`prepare_channels`] needs to know about the operator.
#[derive(Debug, Clone, Copy)]
pub struct ChannelSetup<'m> {
    /// The activation input.
    pub input: TensorInfo<'m>,
    /// The (constant) int8 weights.
    pub filter: TensorInfo<'m>,
    /// The output.
    pub output: TensorInfo<'m>,
    /// Output channels.
    pub channels: usize,
    /// The filter axis that holds the output channels (per-channel scales run along it).
    pub channel_axis: i32,
    /// How multipliers are computed.
    pub rule: ScaleRule,
    /// The fused activation.
    pub activation: ActivationFunctionType,
}

/// Checks the quantisation of an int8 conv-like operator and stores its
/// multipliers: one per channel for per-channel weights, else one.
pub fn prepare_channels(
    ctx: &mut PrepareContext<'_, '_, '_>,
    setup: &ChannelSetup<'_>,
) -> Result<ChannelParams, KernelError> {
    let input_q = require_quant(&setup.input)?;
    let output_q = require_quant(&setup.output)?;
    let filter_q = require_quant(&setup.filter)?;
    let scales = channel_scales(&setup.filter).ok_or(KernelError::MissingQuantization {
        tensor: setup.filter.index,
    })?;
    let per_channel = scales.len() > 1;
    if per_channel {
        let axis = setup
            .filter
            .raw()
            .quantization()
            .map_or(0, |q| q.quantized_dimension());
        if scales.len() != setup.channels
            || axis != setup.channel_axis
            || setup.rule == ScaleRule::PerTensorProduct
        {
            return Err(KernelError::ShapeMismatch {
                tensor: setup.filter.index,
            });
        }
    }
    // Kernels add the offset to int8 values in 16-bit lanes.
    if !(-128..=127).contains(&input_q.zero_point) {
        return Err(KernelError::UnsupportedParameter {
            what: "int8 zero point outside -128..=127",
        });
    }
    let count = if per_channel { setup.channels } else { 1 };
    let multiplier_of = |c: usize| -> (i32, i32) {
        let real = match setup.rule {
            ScaleRule::PerChannel => {
                f64::from(input_q.scale) * f64::from(scales.get(c)) / f64::from(output_q.scale)
            }
            ScaleRule::PerTensorProduct => {
                f64::from(input_q.scale * filter_q.scale) / f64::from(output_q.scale)
            }
        };
        quantize_multiplier(real)
    };
    // Every op with per-channel requantisation keeps its bias at input 2.
    let bias = ctx.optional_input(2);
    let magnitudes = channel_magnitudes(setup, bias.as_ref(), filter_q.zero_point);
    // A channel's flag needs its own bound; a shared multiplier needs all.
    let narrow = |c: usize, left: u32| {
        magnitudes.as_ref().is_some_and(|f| {
            let within = |c| {
                let (start, weights) = f(c);
                narrow_bound(start, weights, left)
            };
            if per_channel {
                within(c)
            } else {
                (0..setup.channels).all(within)
            }
        })
    };
    let multiplier = ctx.store_from_fn(count, |c| multiplier_of(c).0)?;
    let shift = ctx.store_from_fn(count, |c| {
        let [left, right1] = shift_parts(multiplier_of(c).1);
        let flag = if right1 <= 31 && narrow(c, u32::from(left)) {
            NARROW
        } else {
            0
        };
        [left | flag, right1]
    })?;
    Ok(ChannelParams {
        multiplier,
        shift,
        input_offset: -input_q.zero_point,
        stage: output_stage(setup.activation, &output_q)?,
    })
}

/// A constant int32 bias's values (any alignment), checked to hold `channels`.
pub fn bias_values<'m>(
    bias: &TensorInfo<'m>,
    channels: usize,
) -> Result<impl Fn(usize) -> i32 + use<'m>, KernelError> {
    let data = bias.constant.ok_or(KernelError::UnsupportedParameter {
        what: "non-constant bias",
    })?;
    if bias.dtype != TensorType::INT32 {
        return Err(KernelError::UnsupportedType {
            tensor: bias.index,
            dtype: bias.dtype.0,
        });
    }
    if data.len() != channels * 4 {
        return Err(KernelError::ShapeMismatch { tensor: bias.index });
    }
    Ok(move |c: usize| {
        i32::from_le_bytes([
            data[4 * c],
            data[4 * c + 1],
            data[4 * c + 2],
            data[4 * c + 3],
        ])
    })
}

/// Stores `bias[c] + input_offset · weight_sum(c)` for every channel: the
/// accumulator's start for windows wholly inside the input.
pub fn fold_bias(
    ctx: &mut PrepareContext<'_, '_, '_>,
    bias: Option<&TensorInfo<'_>>,
    channels: usize,
    input_offset: i32,
    weight_sum: impl Fn(usize) -> i32,
) -> Result<Stored<i32>, KernelError> {
    let bias = bias.map(|b| bias_values(b, channels)).transpose()?;
    ctx.store_from_fn(channels, |c| {
        let b = bias.as_ref().map_or(0, |f| f(c));
        b.wrapping_add(input_offset.wrapping_mul(weight_sum(c)))
    })
}

/// The output stage of an int8 output with `quant` under `activation`.
pub fn output_stage(
    activation: ActivationFunctionType,
    quant: &Quant,
) -> Result<OutputStage, KernelError> {
    check_activation(activation)?;
    let (min, max) = activation_range_quantized(
        activation,
        quant.scale,
        quant.zero_point,
        i32::from(i8::MIN),
        i32::from(i8::MAX),
    );
    Ok(OutputStage {
        offset: quant.zero_point,
        min,
        max,
    })
}

/// Refuses fused activations the conv-like kernels do not implement (TFLM
/// silently ignores them; no converter emits them on these operators).
pub fn check_activation(activation: ActivationFunctionType) -> Result<(), KernelError> {
    use ActivationFunctionType as A;
    match activation {
        A::NONE | A::RELU | A::RELU6 | A::RELU_N1_TO_1 => Ok(()),
        _ => Err(KernelError::UnsupportedParameter {
            what: "fused activation",
        }),
    }
}

/// TFLM's `shift` as the `[left, right + 1]` pair [`scale_parts`] takes.
pub fn shift_parts(shift: i32) -> [u8; 2] {
    // quantize_multiplier keeps shifts within -31..=31.
    let shift = shift.clamp(-31, 31);
    [shift.max(0) as u8, ((-shift).max(0) + 1) as u8]
}

/// The flag [`prepare_channels`] sets on a stored shift's `left` byte when
/// prepare has proven that channel's accumulators small enough for
/// [`scale_narrow`]: `|acc · 2^left| < 2^29` for every input, and `right1 ≤ 31`.
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

/// Whether every accumulator `bias[c] + Σ (w − filter_zp)·(x + offset)` of
/// a channel whose largest start is `start` and whose weights' magnitudes
/// sum to `weights` stays below `2^(29 − left)`: int8 inputs plus an
/// offset in `-127..=128` lie in `±255`.
fn narrow_bound(start: i64, weights: i64, left: u32) -> bool {
    (start + weights * 255) << left < 1 << 29
}

/// Per channel, `(|bias|, Σ max(|w|, |w − zp|))` of the filter along
/// `setup.channel_axis` (bias 0 without one), or `None` when the filter is
/// not constant or the bias not readable (then no channel is narrow). Each
/// call reads only that channel's weights: all channels cost one pass.
fn channel_magnitudes<'m>(
    setup: &ChannelSetup<'m>,
    bias: Option<&TensorInfo<'m>>,
    zero_point: i32,
) -> Option<impl Fn(usize) -> (i64, i64) + use<'m>> {
    let data = setup.filter.constant?;
    let dims = super::tensor::Dims::of(&setup.filter).ok()?;
    let axis = usize::try_from(setup.channel_axis).ok()?;
    let channels = setup.channels;
    if axis >= dims.rank() || dims.get(axis).max(0) as usize != channels || channels == 0 {
        return None;
    }
    let inner: usize = (axis + 1..dims.rank())
        .map(|i| dims.get(i).max(0) as usize)
        .product();
    if data.len() != dims.elements() || inner == 0 {
        return None;
    }
    let outer = data.len() / (inner * channels);
    let bias = match bias {
        Some(b) => Some(bias_values(b, channels).ok()?),
        None => None,
    };
    Some(move |c: usize| {
        let start = bias.as_ref().map_or(0, |f| i64::from(f(c)).abs());
        let mut sum = 0i64;
        for o in 0..outer {
            for &b in &data[(o * channels + c) * inner..][..inner] {
                let w = i64::from(b as i8);
                sum += w.abs().max((w - i64::from(zero_point)).abs());
            }
        }
        (start, sum)
    })
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
    /// bytes (as [`prepare_channels`] wrote them) and the output stage.
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
    /// Whether [`scale_narrow`] applies (where one-rounding does not).
    narrow: bool,
    stage: OutputStage,
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
        if self.round != 0 {
            ScaleForm::OneRounding
        } else if self.narrow {
            ScaleForm::Narrow
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

    /// The accumulator as an int8 output (see [`Requant::apply`]).
    #[inline(always)]
    pub fn apply(&self, acc: i32) -> i8 {
        // One-rounding first: as short as the narrow form, and the test
        // the channels that take it made before the narrow form existed.
        let scaled = if self.round != 0 {
            scale_one_rounding(acc, self.multiplier, self.left, self.right1, self.round)
        } else if self.narrow {
            scale_narrow(acc, self.multiplier, self.left, self.right1)
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
    let h = super::arm_dsp::smmulr(y as u32, multiplier as u32) as i32;
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

/// `Σ w·(x + offset)`: TFLM's formula, for windows that skip padded taps.
#[inline]
pub fn dot_offset(w: &[i8], x: &[i8], offset: i32) -> i32 {
    w.iter().zip(x).fold(0i32, |acc, (&w, &x)| {
        acc.wrapping_add(i32::from(w).wrapping_mul(i32::from(x) + offset))
    })
}

/// `Σ w` with wrapping arithmetic.
pub fn sum(w: &[i8]) -> i32 {
    w.iter()
        .fold(0i32, |acc, &v| acc.wrapping_add(i32::from(v)))
}

/// One row of a matrix product: `out[c] = requant(bias[c] + offset + Σ_d
/// w[c, d]·(x[d] + x_offset))` for every output channel `c`, `weights`
/// holding one row of `x.len()` weights per channel. FULLY_CONNECTED and
/// 1×1 CONV_2D are this, row after row.
#[inline]
pub fn matvec(
    x: &[i8],
    x_offset: i32,
    weights: &[i8],
    bias: Option<&[i32]>,
    offset: i32,
    requant: &Requant<'_>,
    out: &mut [i8],
) {
    // One multiplier for every channel (per-tensor weights): its constants
    // are worked out once for the whole row, and so is which of the three
    // forms of the scaling applies, so the per-output code has no branch
    // on it (small layers spend much of their time requantising).
    if let Some(one) = requant.uniform() {
        matvec_uniform(x, x_offset, weights, bias, offset, &one, out);
    } else {
        matvec_with(
            x,
            x_offset,
            weights,
            bias,
            offset,
            |c, acc| requant.apply(c, acc),
            out,
        );
    }
}

/// [`matvec`] for per-tensor weights, their one channel's constants given
/// (a kernel that worked them out at prepare calls this directly).
#[inline]
pub fn matvec_uniform(
    x: &[i8],
    x_offset: i32,
    weights: &[i8],
    bias: Option<&[i32]>,
    offset: i32,
    one: &ChannelRequant,
    out: &mut [i8],
) {
    let full = one.stage.is_full_range();
    match one.form() {
        ScaleForm::OneRounding if full => matvec_with(
            x,
            x_offset,
            weights,
            bias,
            offset,
            |_, acc| one.apply_one_rounding_full(acc),
            out,
        ),
        ScaleForm::Narrow if full => matvec_with(
            x,
            x_offset,
            weights,
            bias,
            offset,
            |_, acc| one.apply_narrow_full(acc),
            out,
        ),
        ScaleForm::OneRounding => matvec_with(
            x,
            x_offset,
            weights,
            bias,
            offset,
            |_, acc| one.apply_one_rounding(acc),
            out,
        ),
        ScaleForm::Narrow => matvec_with(
            x,
            x_offset,
            weights,
            bias,
            offset,
            |_, acc| one.apply_narrow(acc),
            out,
        ),
        ScaleForm::Parts => matvec_with(
            x,
            x_offset,
            weights,
            bias,
            offset,
            |_, acc| one.apply(acc),
            out,
        ),
    }
}

/// [`matvec`] with the requantisation as `requant(channel, acc)`.
#[inline(always)]
fn matvec_with(
    x: &[i8],
    x_offset: i32,
    weights: &[i8],
    bias: Option<&[i32]>,
    offset: i32,
    requant: impl Fn(usize, i32) -> i8,
    out: &mut [i8],
) {
    let k = x.len();
    let n = out.len();
    // Sliced once, so that the loops below index without checks.
    let (weights, bias) = (&weights[..n * k], bias.map(|b| &b[..n]));
    let start = |c: usize| bias.map_or(0, |b| b[c]).wrapping_add(offset);
    if k == 0 {
        for (c, o) in out.iter_mut().enumerate() {
            *o = requant(c, start(c));
        }
        return;
    }
    // One input (hello_world's 1→16 layer): one product per channel.
    if k == 1 {
        let v = i32::from(x[0]) + x_offset;
        single_input(v, weights, bias, offset, requant, out);
        return;
    }
    // Short rows: a plain sum per channel costs less than setting up
    // four-row blocks.
    if k < 4 {
        for (c, (o, w)) in out.iter_mut().zip(weights.chunks_exact(k)).enumerate() {
            *o = requant(c, start(c).wrapping_add(dot_offset(w, x, x_offset)));
        }
        return;
    }
    // Four channels at a time share each load (and offsetting) of `x`.
    // Blocks of four outputs, rows and biases taken as chunks: one bounds
    // check per block, not one per output and per bias.
    let blocks = n / 4;
    let mut c = 0;
    let out_blocks = out[..4 * blocks].chunks_exact_mut(4);
    for (ob, block) in out_blocks.zip(weights.chunks_exact(4 * k)) {
        let starts = match bias.and_then(|b| b.get(c..)?.first_chunk::<4>()) {
            Some(b) => b.map(|b| b.wrapping_add(offset)),
            None => [offset; 4],
        };
        #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
        let acc = super::gemm::rows_1x4(x, x_offset, block);
        #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
        let acc = {
            let (w0, rest) = block.split_at(k);
            let (w1, rest) = rest.split_at(k);
            let (w2, w3) = rest.split_at(k);
            dot4(x, x_offset, [w0, w1, w2, w3])
        };
        for (r, o) in ob.iter_mut().enumerate() {
            *o = requant(c + r, starts[r].wrapping_add(acc[r]));
        }
        c += 4;
    }
    while c < n {
        let w = &weights[c * k..][..k];
        #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
        let dot = super::gemm::row_1x1(x, x_offset, w);
        #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
        let dot = dot_offset(w, x, x_offset);
        out[c] = requant(c, start(c).wrapping_add(dot));
        c += 1;
    }
}

/// [`matvec_with`] for one input `v` (already offset): a function of its
/// own, so that its loop keeps every constant in a register rather than
/// sharing the register file with the long-row paths.
#[inline(never)]
fn single_input(
    v: i32,
    weights: &[i8],
    bias: Option<&[i32]>,
    offset: i32,
    requant: impl Fn(usize, i32) -> i8,
    out: &mut [i8],
) {
    let n = out.len().min(weights.len());
    let (weights, out) = (&weights[..n], &mut out[..n]);
    match bias.and_then(|b| b.get(..n)) {
        // No row offset (weights without a zero point): one register and
        // one addition fewer per output.
        Some(bias) if offset == 0 => {
            for (c, ((o, &w), &b)) in out.iter_mut().zip(weights).zip(bias).enumerate() {
                *o = requant(c, b.wrapping_add(i32::from(w).wrapping_mul(v)));
            }
        }
        Some(bias) => {
            for (c, ((o, &w), &b)) in out.iter_mut().zip(weights).zip(bias).enumerate() {
                let acc = b
                    .wrapping_add(offset)
                    .wrapping_add(i32::from(w).wrapping_mul(v));
                *o = requant(c, acc);
            }
        }
        None => {
            for (c, (o, &w)) in out.iter_mut().zip(weights).enumerate() {
                *o = requant(c, offset.wrapping_add(i32::from(w).wrapping_mul(v)));
            }
        }
    }
}

/// `Σ w_r·(x + x_offset)` for four weight rows of `x.len()` weights.
/// `x_offset` is in `-128..=128`, so `x + x_offset` fits 16 bits.
#[inline(always)]
pub fn dot4(x: &[i8], x_offset: i32, w: [&[i8]; 4]) -> [i32; 4] {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        if x.len() >= 64 {
            sse2::dot4_long(x, x_offset, w)
        } else {
            sse2::dot4(x, x_offset, w)
        }
    }
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    {
        super::gemm::row_1x4(x, x_offset, w)
    }
    #[cfg(not(any(
        all(target_arch = "x86_64", target_feature = "sse2"),
        all(target_arch = "arm", feature = "arm-dsp")
    )))]
    {
        dot4_portable(x, x_offset, w)
    }
}

/// [`dot4`] in plain Rust (every target; the reference for the SIMD one).
#[inline]
pub fn dot4_portable(x: &[i8], x_offset: i32, w: [&[i8]; 4]) -> [i32; 4] {
    let n = x.len();
    let (w0, w1, w2, w3) = (&w[0][..n], &w[1][..n], &w[2][..n], &w[3][..n]);
    let off = x_offset as i16;
    // Four plain reductions in one loop sharing the offset input.
    let (mut a0, mut a1, mut a2, mut a3) = (0i32, 0i32, 0i32, 0i32);
    for i in 0..n {
        let v = i32::from(i16::from(x[i]) + off);
        a0 = a0.wrapping_add(v * i32::from(w0[i]));
        a1 = a1.wrapping_add(v * i32::from(w1[i]));
        a2 = a2.wrapping_add(v * i32::from(w2[i]));
        a3 = a3.wrapping_add(v * i32::from(w3[i]));
    }
    [a0, a1, a2, a3]
}

/// `Σ w_r·x` for four weight rows, `x` already offset into 16 bits (an
/// im2col patch: `x + input_offset`, padded taps 0).
#[inline(always)]
pub fn dot4_i16(x: &[i16], w: [&[i8]; 4]) -> [i32; 4] {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        sse2::dot4_i16(x, w)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        dot4_i16_portable(x, w)
    }
}

/// [`dot4_i16`] in plain Rust.
#[inline]
pub fn dot4_i16_portable(x: &[i16], w: [&[i8]; 4]) -> [i32; 4] {
    let n = x.len();
    let w = w.map(|r| &r[..n]);
    let mut acc = [0i32; 4];
    for i in 0..n {
        let v = i32::from(x[i]);
        for r in 0..4 {
            acc[r] = acc[r].wrapping_add(v * i32::from(w[r][i]));
        }
    }
    acc
}

/// `Σ w·x` for one row, `x` as in [`dot4_i16`].
#[inline]
pub fn dot_i16(x: &[i16], w: &[i8]) -> i32 {
    x.iter().zip(w).fold(0i32, |acc, (&v, &wv)| {
        acc.wrapping_add(i32::from(v) * i32::from(wv))
    })
}

/// SSE2 (x86-64's baseline): LLVM does not find the dense 16-bit
/// multiply-add (`pmaddwd`) for these sums on its own.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod sse2 {
    use core::arch::x86_64::{
        __m128i, _mm_add_epi16, _mm_add_epi32, _mm_cvtsi64_si128, _mm_madd_epi16, _mm_set1_epi16,
        _mm_setzero_si128, _mm_srai_epi16, _mm_unpackhi_epi8, _mm_unpacklo_epi8,
    };

    /// Sixteen int8 values sign-extended to two vectors of eight i16.
    #[inline(always)]
    fn widen(v: &[i8; 16]) -> [__m128i; 2] {
        let v: __m128i = bytemuck::cast(*v);
        // SAFETY: SSE2 is enabled for this build (the module's cfg).
        // Each byte paired with itself, shifted down: its sign extension.
        unsafe {
            [
                _mm_srai_epi16::<8>(_mm_unpacklo_epi8(v, v)),
                _mm_srai_epi16::<8>(_mm_unpackhi_epi8(v, v)),
            ]
        }
    }

    /// Eight int8 values sign-extended to one vector of eight i16.
    #[inline(always)]
    fn widen8(v: &[i8; 8]) -> __m128i {
        // SAFETY: SSE2 is enabled for this build (the module's cfg).
        unsafe {
            let v = _mm_cvtsi64_si128(i64::from_le_bytes(v.map(|b| b as u8)));
            _mm_srai_epi16::<8>(_mm_unpacklo_epi8(v, v))
        }
    }

    /// `acc + a·b` in pairs: eight 16-bit products summed into four lanes.
    #[inline(always)]
    fn madd(acc: __m128i, a: __m128i, b: __m128i) -> __m128i {
        // SAFETY: SSE2 is enabled for this build (the module's cfg).
        unsafe { _mm_add_epi32(acc, _mm_madd_epi16(a, b)) }
    }

    #[inline(always)]
    fn add16(a: __m128i, b: __m128i) -> __m128i {
        // SAFETY: SSE2 is enabled for this build (the module's cfg).
        unsafe { _mm_add_epi16(a, b) }
    }

    /// [`super::dot4_i16`].
    #[inline(always)]
    pub(super) fn dot4_i16(x: &[i16], w: [&[i8]; 4]) -> [i32; 4] {
        let n = x.len();
        let w = [&w[0][..n], &w[1][..n], &w[2][..n], &w[3][..n]];
        let (xc, _) = x.as_chunks::<16>();
        let [w0, w1, w2, w3] = w.map(|r| r.as_chunks::<16>().0);
        // SAFETY: SSE2 is enabled for this build (the module's cfg).
        let mut acc = [unsafe { _mm_setzero_si128() }; 4];
        for ((((xs, r0), r1), r2), r3) in xc.iter().zip(w0).zip(w1).zip(w2).zip(w3) {
            let [lo, hi]: [__m128i; 2] = bytemuck::cast(*xs);
            for (a, ws) in acc.iter_mut().zip([r0, r1, r2, r3]) {
                let [wl, wh] = widen(ws);
                *a = madd(madd(*a, lo, wl), hi, wh);
            }
        }
        let mut done = xc.len() * 16;
        if let Some(xs) = x[done..].first_chunk::<8>() {
            let lo: __m128i = bytemuck::cast(*xs);
            for (a, r) in acc.iter_mut().zip(w) {
                if let Some(ws) = r[done..].first_chunk::<8>() {
                    *a = madd(*a, lo, widen8(ws));
                }
            }
            done += 8;
        }
        core::array::from_fn(|r| {
            let lanes: [i32; 4] = bytemuck::cast(acc[r]);
            let head = lanes.iter().fold(0i32, |s, &v| s.wrapping_add(v));
            head.wrapping_add(super::dot_i16(&x[done..], &w[r][done..]))
        })
    }

    /// [`super::dot4`] for rows long enough that a call costs nothing.
    #[inline(never)]
    pub(super) fn dot4_long(x: &[i8], x_offset: i32, w: [&[i8]; 4]) -> [i32; 4] {
        dot4(x, x_offset, w)
    }

    #[inline(always)]
    pub(super) fn dot4(x: &[i8], x_offset: i32, w: [&[i8]; 4]) -> [i32; 4] {
        let n = x.len();
        let w = [&w[0][..n], &w[1][..n], &w[2][..n], &w[3][..n]];
        let (xc, _) = x.as_chunks::<16>();
        let [w0, w1, w2, w3] = w.map(|r| r.as_chunks::<16>().0);
        // SAFETY: SSE2 is enabled for this build (the module's cfg).
        let (off, zero) = unsafe { (_mm_set1_epi16(x_offset as i16), _mm_setzero_si128()) };
        let mut acc = [zero; 4];
        let rows = xc.iter().zip(w0).zip(w1).zip(w2).zip(w3);
        for ((((xs, r0), r1), r2), r3) in rows {
            let [lo, hi] = widen(xs);
            let (lo, hi) = (add16(lo, off), add16(hi, off));
            for (a, ws) in acc.iter_mut().zip([r0, r1, r2, r3]) {
                let [wl, wh] = widen(ws);
                *a = madd(madd(*a, lo, wl), hi, wh);
            }
        }
        let mut done = xc.len() * 16;
        if let Some(xs) = x[done..].first_chunk::<8>() {
            let lo = add16(widen8(xs), off);
            for (a, r) in acc.iter_mut().zip(w) {
                if let Some(ws) = r[done..].first_chunk::<8>() {
                    *a = madd(*a, lo, widen8(ws));
                }
            }
            done += 8;
        }
        core::array::from_fn(|r| {
            let lanes: [i32; 4] = bytemuck::cast(acc[r]);
            let head = lanes.iter().fold(0i32, |s, &v| s.wrapping_add(v));
            head.wrapping_add(super::dot_offset(&w[r][done..], &x[done..], x_offset))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[i8], b: &[i8]) -> i32 {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| i32::from(x) * i32::from(y))
            .sum()
    }

    #[test]
    fn dots_match_naive() {
        let a: Vec<i8> = (0..77).map(|i| ((i * 37 + 11) % 256) as u8 as i8).collect();
        let b: Vec<i8> = (0..77).map(|i| ((i * 91 + 5) % 256) as u8 as i8).collect();
        for n in 0..77 {
            let got = dot4(&a[..n], 0, [&b[..n], &a[..n], &b[..n], &b[..n]]);
            assert_eq!(got[0], naive(&a[..n], &b[..n]));
            assert_eq!(got[1], naive(&a[..n], &a[..n]));
            // Input offsets span -127..=128 (int8 zero points).
            let shifted: Vec<i16> = a[..n].iter().map(|&v| i16::from(v) - 7).collect();
            let rows = [&b[..n], &a[..n], &b[..n], &b[..n]];
            assert_eq!(dot4_i16(&shifted, rows), dot4_portable(&a[..n], -7, rows));
            assert_eq!(
                dot4_i16_portable(&shifted, rows),
                dot4_portable(&a[..n], -7, rows)
            );
            assert_eq!(dot_i16(&shifted, &b[..n]), dot_offset(&b[..n], &a[..n], -7));
            for offset in [128, -127, 0, 5] {
                let rows = [&b[..n], &a[..n], &b[..n], &b[..n]];
                assert_eq!(
                    super::super::gemm::row_1x4(&a[..n], offset, rows),
                    dot4_portable(&a[..n], offset, rows)
                );
                let got = dot4(&a[..n], offset, rows);
                assert_eq!(got, dot4_portable(&a[..n], offset, rows));
                assert_eq!(got[2], dot_offset(&b[..n], &a[..n], offset));
            }
            assert_eq!(
                dot_offset(&a[..n], &b[..n], 128),
                a[..n]
                    .iter()
                    .zip(&b[..n])
                    .map(|(&w, &x)| i32::from(w) * (i32::from(x) + 128))
                    .sum::<i32>()
            );
        }
    }

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

    /// `matvec` picks the per-tensor scaling's form once per row: each form
    /// (and the per-channel path) gives what `Requant::apply` gives per
    /// output, for every row length the product special-cases.
    #[test]
    fn matvec_matches_per_output_requantisation_in_every_form() {
        let x: Vec<i8> = (0..37).map(|i| ((i * 53 + 7) % 256) as u8 as i8).collect();
        let w: Vec<i8> = (0..37 * 9)
            .map(|i| ((i * 29 + 3) % 256) as u8 as i8)
            .collect();
        let bias: Vec<i32> = (0..9).map(|c| c * 1001 - 4000).collect();
        let m = 1_518_500_250;
        // Right shift (one rounding); left shift flagged narrow; left shift.
        let shifts = [shift_parts(-9), [2 | NARROW, 1], shift_parts(2)];
        let forms = [ScaleForm::OneRounding, ScaleForm::Narrow, ScaleForm::Parts];
        for (shift, form) in shifts.into_iter().zip(forms) {
            let (ms, ss) = ([m], [shift]);
            let r = Requant::new(&ms, &ss, stage_wide()).unwrap();
            assert_eq!(r.channel(0).form(), form);
            let (ms9, ss9) = ([m; 9], [shift; 9]);
            let per_channel = Requant::new(&ms9, &ss9, stage_wide()).unwrap();
            for k in [0, 1, 2, 3, 4, 8, 37] {
                for n in [1, 4, 9] {
                    for b in [None, Some(&bias[..n])] {
                        let weights = &w[..n * k];
                        let want: Vec<i8> = (0..n)
                            .map(|c| {
                                let dot = dot_offset(&weights[c * k..][..k], &x[..k], 5);
                                let acc = b.map_or(0, |b| b[c]).wrapping_add(17).wrapping_add(dot);
                                r.apply(c, acc)
                            })
                            .collect();
                        for req in [&r, &per_channel] {
                            let mut got = vec![0i8; n];
                            matvec(&x[..k], 5, weights, b, 17, req, &mut got);
                            assert_eq!(got, want, "{form:?} k {k} n {n} bias {}", b.is_some());
                        }
                    }
                }
            }
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
    fn narrow_bound_is_strict() {
        // 2^29 − 1 is the largest magnitude the 32-bit form takes.
        assert!(narrow_bound((1 << 29) - 1, 0, 0));
        assert!(!narrow_bound(1 << 29, 0, 0));
        assert!(!narrow_bound(0, ((1 << 29) / 255) + 1, 0));
        assert!(narrow_bound(0, 1000, 10));
        assert!(!narrow_bound(0, 1 << 20, 2));
    }

    #[test]
    fn requant_new_checks_lengths() {
        let stage = stage_wide();
        assert!(Requant::new(&[], &[], stage).is_err());
        assert!(Requant::new(&[1, 2], &[[0, 1]], stage).is_err());
        assert!(Requant::new(&[1], &[[0, 1]], stage).is_ok());
    }
}
