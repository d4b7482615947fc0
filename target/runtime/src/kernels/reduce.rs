//! Reductions over axes — MEAN, SUM and REDUCE_MAX — bit-exact with TFLM's
//! reference kernels (`reduce_common.cc`: `EvalMeanHelper`,
//! `EvalSumHelper`, `EvalMaxHelper`).
//!
//! The axes are a constant int32 tensor (negative values count from the
//! end, duplicates count once). MEAN takes float32, int8 and int16, and one
//! for the integer types always the requantising mean, `QuantizedMeanOrSum`:
//! the sum less `count · zero_point`, scaled by `in_scale / out_scale` with
//! `1/count` folded into the multiplier (shifted up by `⌊log2 count⌋`, at
//! most 32 and keeping the final shift ≥ -31, then divided by the count),
//! offset by the output zero point and clamped. That holds when input and
//! output share scale and zero point too: the TFLM build that made the
//! conformance set rounds there as well, where a raw sum divided by the
//! count (C's division toward zero) differed on about half the channels
//! of a 7×7×1280 global pool (the one-op vectors `mean_*_same_*` hold it).
//!
//! SUM (float32, int8, int16) is that requantisation without the count
//! folded in, whatever the two quantisations. REDUCE_MAX takes float32
//! (starting from the lowest finite float, so an all `-inf` row gives
//! `-FLT_MAX` as in TFLM) and int8 with the input's quantisation on the
//! output (TFLM refuses anything else).
//!
//! Floats accumulate in input order and MEAN divides by the count, as TFLM
//! does. Each output is reduced on its own (input order restricted to it),
//! so no scratch is needed where TFLM asks for an int32 sum per output.

use bytemuck::{Pod, Zeroable};

use super::fixed_point::{multiply_by_quantized_multiplier, quantize_multiplier};
use super::quantize::QuantizedInt;
use super::tensor::{Dims, MAX_RANK, check_zero_point, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::model::TensorInfo;
use crate::schema::TensorType;

/// The MEAN kernel.
pub const MEAN: Registration = Registration {
    name: "MEAN",
    prepare: prepare_mean,
    invoke,
};

/// The SUM kernel.
pub const SUM: Registration = Registration {
    name: "SUM",
    prepare: prepare_sum,
    invoke,
};

/// The REDUCE_MAX kernel.
pub const REDUCE_MAX: Registration = Registration {
    name: "REDUCE_MAX",
    prepare: prepare_max,
    invoke,
};

/// What invoke computes (`MeanPlan::path`): float MEAN's plain division,
/// integer MEAN's requantisation, SUM, or REDUCE_MAX.
const FLOAT_MEAN: u32 = 0;
const REQUANTIZE: u32 = 1;
const SUM_PATH: u32 = 2;
const MAX_PATH: u32 = 3;

/// What prepare computes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct MeanPlan {
    pub(crate) dtype: i32,
    pub(crate) rank: u32,
    pub(crate) dims: [u32; MAX_RANK],
    /// Bit `d` set: axis `d` is reduced.
    pub(crate) reduced: u32,
    /// Elements averaged into each output.
    pub(crate) count: u32,
    pub(crate) path: u32,
    pub(crate) input_zero_point: i32,
    pub(crate) output_zero_point: i32,
    /// `in_scale / out_scale` with `1/count` folded in.
    pub(crate) multiplier: i32,
    pub(crate) shift: i32,
}

impl MeanPlan {
    /// The plan for `dims` reduced over `axes`, or `None` for an axis out
    /// of range.
    pub(crate) fn new(dims: &[i32], axes: &[i32]) -> Option<Self> {
        let rank = dims.len();
        let mut plan = MeanPlan {
            rank: rank as u32,
            ..MeanPlan::default()
        };
        for (d, &size) in dims.iter().enumerate() {
            plan.dims[d] = u32::try_from(size).ok()?;
        }
        for &a in axes {
            let axis = if a < 0 { a + rank as i32 } else { a };
            if !(0..rank as i32).contains(&axis) {
                return None;
            }
            plan.reduced |= 1 << axis;
        }
        let count: u64 = (0..rank)
            .filter(|&d| plan.is_reduced(d))
            .map(|d| u64::from(plan.dims[d]))
            .product();
        plan.count = u32::try_from(count).ok()?;
        Some(plan)
    }

    fn is_reduced(&self, d: usize) -> bool {
        self.reduced & (1 << d) != 0
    }

    /// Outputs: the product of the kept dimensions.
    pub(crate) fn outputs(&self) -> usize {
        (0..self.rank as usize)
            .filter(|&d| !self.is_reduced(d))
            .map(|d| self.dims[d] as usize)
            .product()
    }

    /// Folds `1/count` into a multiplier of `in_scale / out_scale` as TFLM's
    /// `QuantizedMeanOrSum` does; `None` if the shift would be negative.
    pub(crate) fn fold_count(&mut self, multiplier: i32, shift: i32) -> Option<()> {
        if self.count == 0 {
            (self.multiplier, self.shift) = (multiplier, shift);
            return Some(());
        }
        let n = i64::from(self.count);
        let log2 = 63 - (n as u64).leading_zeros() as i32;
        let up = log2.min(32).min(31 + shift);
        if up < 0 {
            return None;
        }
        self.multiplier = ((i64::from(multiplier) << up) / n) as i32;
        self.shift = shift - up;
        Some(())
    }

    /// Calls `f(output_index, input_index)` for every input element, outputs
    /// in order and each output's inputs in input order.
    fn walk(&self, mut f: impl FnMut(usize, usize)) {
        let rank = self.rank as usize;
        let mut pitch = [0usize; MAX_RANK];
        let mut acc = 1usize;
        for d in (0..rank).rev() {
            pitch[d] = acc;
            acc *= self.dims[d] as usize;
        }
        let kept: Axes = (0..rank).filter(|&d| !self.is_reduced(d)).collect();
        let reduced: Axes = (0..rank).filter(|&d| self.is_reduced(d)).collect();
        let mut out_index = 0;
        for_each(&self.dims, &kept, &pitch, |base| {
            for_each(&self.dims, &reduced, &pitch, |offset| {
                f(out_index, base + offset)
            });
            out_index += 1;
        });
    }
}

/// A fixed-capacity list of axis numbers (no heap).
#[derive(Debug, Clone, Copy, Default)]
struct Axes {
    axes: [usize; MAX_RANK],
    len: usize,
}

impl FromIterator<usize> for Axes {
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> Self {
        let mut list = Axes::default();
        for a in iter.into_iter().take(MAX_RANK) {
            list.axes[list.len] = a;
            list.len += 1;
        }
        list
    }
}

/// Calls `f` with the input offset of every index over `axes` (row-major).
fn for_each(
    dims: &[u32; MAX_RANK],
    axes: &Axes,
    pitch: &[usize; MAX_RANK],
    mut f: impl FnMut(usize),
) {
    let axes = &axes.axes[..axes.len];
    if axes.iter().any(|&a| dims[a] == 0) {
        return;
    }
    let mut index = [0u32; MAX_RANK];
    loop {
        f(axes.iter().map(|&a| index[a] as usize * pitch[a]).sum());
        let mut k = axes.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            let a = axes[k];
            index[a] += 1;
            if index[a] < dims[a] {
                break;
            }
            index[a] = 0;
        }
    }
}

/// The resolved axes of the constant int32 axis tensor.
fn read_axes(axis: &TensorInfo<'_>) -> Result<([i32; MAX_RANK], usize), KernelError> {
    if axis.dtype != TensorType::INT32 {
        return Err(KernelError::UnsupportedType {
            tensor: axis.index,
            dtype: axis.dtype.0,
        });
    }
    let bytes = axis.constant.ok_or(KernelError::UnsupportedParameter {
        what: "reduction axes must be a constant tensor",
    })?;
    if bytes.len() % 4 != 0 || bytes.len() / 4 > MAX_RANK {
        return Err(KernelError::ShapeMismatch { tensor: axis.index });
    }
    let mut axes = [0i32; MAX_RANK];
    for (a, b) in axes.iter_mut().zip(bytes.chunks_exact(4)) {
        *a = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
    Ok((axes, bytes.len() / 4))
}

/// Which reduction prepare is planning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reduction {
    Mean,
    Sum,
    Max,
}

/// The integer paths' quantisation: zero points, and the multiplier of
/// MEAN's requantisation (count folded in) or SUM's.
fn quantized(
    plan: &mut MeanPlan,
    reduction: Reduction,
    input: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
) -> Result<(), KernelError> {
    let (qi, qo) = (require_quant(input)?, require_quant(output)?);
    let (lo, hi) = if output.dtype == TensorType::INT8 {
        (-128, 127)
    } else {
        (-32768, 32767)
    };
    for (t, q) in [(input, qi), (output, qo)] {
        check_zero_point(t.index, q, lo..=hi)?;
    }
    plan.input_zero_point = qi.zero_point;
    plan.output_zero_point = qo.zero_point;
    let (multiplier, shift) = quantize_multiplier(f64::from(qi.scale) / f64::from(qo.scale));
    match reduction {
        Reduction::Max if qi != qo => Err(KernelError::UnsupportedParameter {
            what: "REDUCE_MAX int8 needs the output quantised as its input (as TFLM)",
        }),
        Reduction::Max => {
            plan.path = MAX_PATH;
            Ok(())
        }
        Reduction::Sum => {
            plan.path = SUM_PATH;
            (plan.multiplier, plan.shift) = (multiplier, shift);
            Ok(())
        }
        Reduction::Mean => {
            plan.path = REQUANTIZE;
            plan.fold_count(multiplier, shift)
                .ok_or(KernelError::UnsupportedParameter {
                    what: "MEAN scale ratio too small to fold the element count in",
                })
        }
    }
}

fn prepare_mean(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    prepare(ctx, Reduction::Mean)
}

fn prepare_sum(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    prepare(ctx, Reduction::Sum)
}

fn prepare_max(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    prepare(ctx, Reduction::Max)
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>, reduction: Reduction) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let axis = ctx.input(1)?;
    let output = ctx.output(0)?;
    if input.dtype != output.dtype {
        return Err(KernelError::UnsupportedType {
            tensor: output.index,
            dtype: output.dtype.0,
        });
    }
    let (axes, n) = read_axes(&axis)?;
    let dims = Dims::of(&input)?;
    let mut plan =
        MeanPlan::new(dims.as_slice(), &axes[..n]).ok_or(KernelError::UnsupportedParameter {
            what: "reduction axis out of range",
        })?;
    // TFLM writes the output in the kept dimensions' order whatever shape
    // the model gives it (keep_dims or not), so only the count must agree.
    if Dims::of(&output)?.elements() != plan.outputs() {
        return Err(KernelError::ShapeMismatch {
            tensor: output.index,
        });
    }
    plan.dtype = i32::from(output.dtype.0);
    // TFLM's types: MEAN and SUM float32, int8, int16; REDUCE_MAX float32, int8.
    match (output.dtype, reduction) {
        (TensorType::FLOAT32, Reduction::Mean) => plan.path = FLOAT_MEAN,
        (TensorType::FLOAT32, Reduction::Sum) => plan.path = SUM_PATH,
        (TensorType::FLOAT32, Reduction::Max) => plan.path = MAX_PATH,
        (TensorType::INT8, _) | (TensorType::INT16, Reduction::Mean | Reduction::Sum) => {
            quantized(&mut plan, reduction, &input, &output)?
        }
        (other, _) => {
            return Err(KernelError::UnsupportedType {
                tensor: output.index,
                dtype: other.0,
            });
        }
    }
    ctx.store(&plan)
}

fn mean_float(plan: &MeanPlan, input: &[f32], output: &mut [f32]) {
    output.fill(0.0);
    plan.walk(|o, i| output[o] += input[i]);
    if plan.count > 0 {
        let n = plan.count as f32;
        for v in output.iter_mut() {
            *v /= n;
        }
    }
}

fn sum_float(plan: &MeanPlan, input: &[f32], output: &mut [f32]) {
    output.fill(0.0);
    plan.walk(|o, i| output[o] += input[i]);
}

/// REDUCE_MAX: TFLM's `ReduceGeneric` from the lowest finite value, keeping
/// the current value unless the input is greater (so NaN inputs are passed
/// over).
fn max_of<T: Copy + PartialOrd>(plan: &MeanPlan, lowest: T, input: &[T], output: &mut [T]) {
    output.fill(lowest);
    plan.walk(|o, i| {
        if input[i] > output[o] {
            output[o] = input[i];
        }
    });
}

fn mean_integer<T: QuantizedInt>(plan: &MeanPlan, input: &[T], output: &mut [T]) {
    // Sums go into the output-sized loop one output at a time.
    let mut current = usize::MAX;
    let mut sum = 0i32;
    let finish = |o: usize, sum: i32, output: &mut [T]| {
        output[o] = if plan.count == 0 {
            T::from_i32(0)
        } else {
            // REQUANTIZE and SUM_PATH: the multiplier holds the difference.
            let n = i64::from(plan.count);
            let shifted = (i64::from(sum) - i64::from(plan.input_zero_point) * n) as i32;
            let v = multiply_by_quantized_multiplier(shifted, plan.multiplier, plan.shift)
                + plan.output_zero_point;
            T::from_i32(v.clamp(T::MIN, T::MAX))
        };
    };
    output.fill(T::from_i32(0));
    plan.walk(|o, i| {
        if o != current {
            if current != usize::MAX {
                finish(current, sum, output);
            }
            current = o;
            sum = 0;
        }
        sum = sum.wrapping_add(input[i].to_i32());
    });
    if current != usize::MAX {
        finish(current, sum, output);
    }
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let plan: &MeanPlan = ctx.op_data()?;
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    match (TensorType(plan.dtype as i8), plan.path) {
        (TensorType::FLOAT32, SUM_PATH) => sum_float(plan, input.values()?, output.values()?),
        (TensorType::FLOAT32, MAX_PATH) => {
            max_of(plan, f32::MIN, input.values()?, output.values()?)
        }
        (TensorType::FLOAT32, _) => mean_float(plan, input.values()?, output.values()?),
        (TensorType::INT8, MAX_PATH) => max_of(plan, i8::MIN, input.values()?, output.values()?),
        (TensorType::INT8, _) => mean_integer::<i8>(plan, input.values()?, output.values()?),
        (TensorType::INT16, _) => mean_integer::<i16>(plan, input.values()?, output.values()?),
        _ => return Err(KernelError::Internal),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn averages_over_the_named_axes() {
        // [2,3] over axis 1: rows [1,2,3] and [4,5,6] → 2 and 5. One scale
        // and zero point on both sides is a multiplier of 1 with the count
        // folded in, and the mean rounds as TFLM's does (half up): [2,3]
        // → 3, where C's division would give 2, and [-1,-2] → -1.
        let one = |plan: &mut MeanPlan| {
            plan.dtype = i32::from(TensorType::INT8.0);
            plan.path = REQUANTIZE;
            let (multiplier, shift) = quantize_multiplier(1.0);
            plan.fold_count(multiplier, shift).unwrap();
        };
        let mut plan = MeanPlan::new(&[2, 3], &[1]).unwrap();
        one(&mut plan);
        let mut out = [0i8; 2];
        mean_integer(&plan, &[1i8, 2, 3, 4, 5, 6], &mut out);
        assert_eq!(out, [2, 5]);
        let mut plan = MeanPlan::new(&[2], &[-1, 0]).unwrap();
        assert_eq!(plan.count, 2);
        one(&mut plan);
        let mut out = [0i8; 1];
        mean_integer(&plan, &[2i8, 3], &mut out);
        assert_eq!(out, [3]);
        mean_integer(&plan, &[-1i8, -2], &mut out);
        assert_eq!(out, [-1]);
    }

    #[test]
    fn float_mean_over_middle_axes() {
        // [1,2,2,1] over axes 1, 2: (1 + 2 + 3 + 4) / 4.
        let plan = MeanPlan::new(&[1, 2, 2, 1], &[1, 2]).unwrap();
        let mut out = [0f32; 1];
        mean_float(&plan, &[1.0, 2.0, 3.0, 4.0], &mut out);
        assert_eq!(out, [2.5]);
    }

    #[test]
    fn the_count_folds_into_the_multiplier() {
        // 0.5 = 2^30 / 2^31 · 2^0; count 4 shifts up by 2 and divides by 4.
        let mut plan = MeanPlan::new(&[4], &[0]).unwrap();
        plan.fold_count(1 << 30, 0).unwrap();
        assert_eq!((plan.multiplier, plan.shift), (1 << 30, -2));
        // Count 3: up by 1, (2^30 · 2) / 3.
        let mut plan = MeanPlan::new(&[3], &[0]).unwrap();
        plan.fold_count(1 << 30, 0).unwrap();
        assert_eq!(
            (plan.multiplier, plan.shift),
            (((1i64 << 31) / 3) as i32, -1)
        );
    }

    #[test]
    fn bad_axes_are_refused() {
        assert!(MeanPlan::new(&[2, 3], &[2]).is_none());
        assert!(MeanPlan::new(&[2, 3], &[-3]).is_none());
    }
}
