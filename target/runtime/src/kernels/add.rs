//! ADD: element-wise sum with NumPy-style broadcasting — float32, int8,
//! int16 and (unquantised) int32 — bit-exact with TFLM's reference kernels.
//!
//! int8 follows TFLM's `AddFunc`: both inputs are offset by their zero
//! points, shifted left by 20 bits (15 for int16), scaled by their own multipliers (each
//! input's scale over twice the larger input scale), summed, and the sum
//! scaled by the output multiplier — every multiplier computed once in
//! prepare. A scaled input depends only on the input byte, so large adds
//! tabulate both inputs' 256 values on the stack first and look them up.
//!
//! Broadcasting covers any shapes TFLM's `BroadcastAdd4DSlow` accepts (up to
//! six dimensions; each input dimension equals the output's or is 1).
//! Prepare folds the shapes into as few runs as possible (a same-shape add
//! becomes one flat loop, a scalar or per-channel operand a strided one), so
//! invoke's inner loops are long and branch-free.

use bytemuck::{Pod, Zeroable};

use super::fixed_point::{
    activation_range_quantized, multiply_by_quantized_multiplier_smaller_than_one,
    quantize_multiplier_smaller_than_one_exp,
};
use super::tensor::{Dims, MAX_RANK, quant, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::model::TensorInfo;
use crate::schema::{ActivationFunctionType, TensorType};

/// The ADD kernel.
pub const REGISTRATION: Registration = Registration {
    name: "ADD",
    prepare,
    invoke,
};

const KIND_FLOAT32: u32 = 0;
pub(super) const KIND_INT8: u32 = 1;
const KIND_INT16: u32 = 2;
const KIND_INT32: u32 = 3;

/// The two inputs and the output of an element-wise binary op, checked to
/// share one type, with the walk that broadcasts the inputs to the output:
/// the set-up ADD, SUB, MUL and SQUARED_DIFFERENCE share.
pub(crate) struct Binary<'m> {
    pub(crate) input1: TensorInfo<'m>,
    pub(crate) input2: TensorInfo<'m>,
    pub(crate) output: TensorInfo<'m>,
    pub(crate) walk: Broadcast,
}

impl<'m> Binary<'m> {
    /// Reads inputs 0 and 1 and output 0; an input of another type than the
    /// output is `UnsupportedType`, shapes that do not broadcast to the
    /// output's `ShapeMismatch` on the output.
    pub(crate) fn prepare(ctx: &PrepareContext<'_, 'm, '_>) -> Result<Self, KernelError> {
        let input1 = ctx.input(0)?;
        let input2 = ctx.input(1)?;
        let output = ctx.output(0)?;
        for t in [&input1, &input2] {
            if t.dtype != output.dtype {
                return Err(KernelError::UnsupportedType {
                    tensor: t.index,
                    dtype: t.dtype.0,
                });
            }
        }
        let walk = Broadcast::new(
            &Dims::of(&input1)?,
            &Dims::of(&input2)?,
            &Dims::of(&output)?,
        )
        .ok_or(KernelError::ShapeMismatch {
            tensor: output.index,
        })?;
        Ok(Binary {
            input1,
            input2,
            output,
            walk,
        })
    }
}

/// An element-wise walk over broadcast operands: `rank` runs (outermost
/// first) of `extent` output elements, each operand advancing by its stride
/// (0 where it is broadcast).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct Broadcast {
    pub(crate) rank: u32,
    pub(crate) extent: [u32; MAX_RANK],
    pub(crate) stride1: [u32; MAX_RANK],
    pub(crate) stride2: [u32; MAX_RANK],
    /// Elements each operand and the output hold.
    pub(crate) len1: u32,
    pub(crate) len2: u32,
    pub(crate) len_out: u32,
}

impl Broadcast {
    /// The walk for `a + b → out`, or `None` when the shapes do not broadcast
    /// to `out`.
    pub(crate) fn new(a: &Dims, b: &Dims, out: &Dims) -> Option<Self> {
        let rank = out.rank();
        if a.rank() > rank || b.rank() > rank {
            return None;
        }
        // Dimension `d` of a shape right-aligned to `rank` dimensions.
        let aligned = |s: &Dims, d: usize| -> i32 {
            let pad = rank - s.rank();
            if d < pad { 1 } else { s.get(d - pad) }
        };
        let mut walk = Broadcast::default();
        // (extent, a broadcast, b broadcast) runs, outermost first.
        let mut runs = [(1u64, false, false); MAX_RANK];
        let mut n = 0;
        for d in 0..rank {
            let (o, x, y) = (out.get(d), aligned(a, d), aligned(b, d));
            if o < 0 || (x != o && x != 1) || (y != o && y != 1) || o != x.max(y) {
                // A zero-size output must still come from zero-size inputs.
                if !(o == 0 && (x == 0 || x == 1) && (y == 0 || y == 1)) {
                    return None;
                }
            }
            if o == 1 {
                continue;
            }
            let key = (x == 1, y == 1);
            if n > 0 && (runs[n - 1].1, runs[n - 1].2) == key {
                runs[n - 1].0 *= o as u64;
            } else {
                runs[n] = (o as u64, key.0, key.1);
                n += 1;
            }
        }
        if n == 0 {
            runs[0] = (1, false, false);
            n = 1;
        }
        let (mut acc1, mut acc2) = (1u64, 1u64);
        for i in (0..n).rev() {
            let (extent, bcast1, bcast2) = runs[i];
            walk.extent[i] = u32::try_from(extent).ok()?;
            walk.stride1[i] = if bcast1 { 0 } else { u32::try_from(acc1).ok()? };
            walk.stride2[i] = if bcast2 { 0 } else { u32::try_from(acc2).ok()? };
            if !bcast1 {
                acc1 *= extent;
            }
            if !bcast2 {
                acc2 *= extent;
            }
        }
        walk.rank = n as u32;
        walk.len1 = u32::try_from(a.elements()).ok()?;
        walk.len2 = u32::try_from(b.elements()).ok()?;
        walk.len_out = u32::try_from(out.elements()).ok()?;
        // The strides must cover each operand exactly once per broadcast.
        let expected = |acc: u64, len: u32| acc == u64::from(len) || walk.len_out == 0;
        (expected(acc1, walk.len1) && expected(acc2, walk.len2)).then_some(walk)
    }

    /// Whether the walk is one run over equal-shaped operands.
    pub(crate) fn is_flat(&self) -> bool {
        self.rank == 1 && self.stride1[0] == 1 && self.stride2[0] == 1
    }

    /// Calls `f(a[i], b[j])` for every output element in order, writing
    /// `out`. Slices must have the lengths the walk was built for.
    #[inline(always)]
    pub(crate) fn run<A: Copy, B: Copy, U>(
        &self,
        a: &[A],
        b: &[B],
        out: &mut [U],
        f: impl Fn(A, B) -> U,
    ) -> Result<(), KernelError> {
        if a.len() != self.len1 as usize
            || b.len() != self.len2 as usize
            || out.len() != self.len_out as usize
        {
            return Err(KernelError::Internal);
        }
        if out.is_empty() {
            return Ok(());
        }
        let rank = self.rank as usize;
        let last = rank - 1;
        let inner = self.extent[last] as usize;
        let (s1, s2) = (self.stride1[last] as usize, self.stride2[last] as usize);
        let mut index = [0u32; MAX_RANK];
        let (mut i1, mut i2) = (0usize, 0usize);
        for chunk in out.chunks_exact_mut(inner) {
            match (s1, s2) {
                (1, 1) => {
                    for ((o, &x), &y) in chunk
                        .iter_mut()
                        .zip(&a[i1..i1 + inner])
                        .zip(&b[i2..i2 + inner])
                    {
                        *o = f(x, y);
                    }
                }
                (0, 1) => {
                    let x = a[i1];
                    for (o, &y) in chunk.iter_mut().zip(&b[i2..i2 + inner]) {
                        *o = f(x, y);
                    }
                }
                (1, 0) => {
                    let y = b[i2];
                    for (o, &x) in chunk.iter_mut().zip(&a[i1..i1 + inner]) {
                        *o = f(x, y);
                    }
                }
                _ => {
                    // Only a one-element run has both operands broadcast.
                    let (x, y) = (a[i1], b[i2]);
                    for o in chunk.iter_mut() {
                        *o = f(x, y);
                    }
                }
            }
            // Advance the outer runs like an odometer.
            let mut d = last;
            while d > 0 {
                d -= 1;
                index[d] += 1;
                i1 += self.stride1[d] as usize;
                i2 += self.stride2[d] as usize;
                if index[d] < self.extent[d] {
                    break;
                }
                i1 -= (self.stride1[d] * self.extent[d]) as usize;
                i2 -= (self.stride2[d] * self.extent[d]) as usize;
                index[d] = 0;
            }
        }
        Ok(())
    }
}

/// int8 parameters: TFLM's `OpDataAdd`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct QuantizedAdd {
    pub(crate) input1_offset: i32,
    pub(crate) input2_offset: i32,
    pub(crate) output_offset: i32,
    pub(crate) left_shift: i32,
    pub(crate) input1_multiplier: i32,
    pub(crate) input1_shift: i32,
    pub(crate) input2_multiplier: i32,
    pub(crate) input2_shift: i32,
    pub(crate) output_multiplier: i32,
    pub(crate) output_shift: i32,
    pub(crate) activation_min: i32,
    pub(crate) activation_max: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub(super) struct AddData {
    pub(super) kind: u32,
    activation_min_f32: f32,
    activation_max_f32: f32,
    pub(super) quantized: QuantizedAdd,
    pub(super) walk: Broadcast,
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let Binary {
        input1,
        input2,
        output,
        walk,
    } = Binary::prepare(ctx)?;
    let activation = ctx
        .op()
        .raw()
        .builtin_options_as_add_options()
        .map_or(ActivationFunctionType::NONE, |o| {
            o.fused_activation_function()
        });
    let mut data = AddData {
        kind: KIND_FLOAT32,
        activation_min_f32: 0.0,
        activation_max_f32: 0.0,
        quantized: QuantizedAdd::default(),
        walk,
    };
    match output.dtype {
        TensorType::FLOAT32 => {
            let (lo, hi) = super::fixed_point::activation_range_float(activation);
            data.activation_min_f32 = lo;
            data.activation_max_f32 = hi;
        }
        TensorType::INT8 | TensorType::INT16 => {
            let (kind, quantized) = quantized_params(&input1, &input2, &output, activation, "ADD")?;
            data.kind = kind;
            data.quantized = quantized;
        }
        TensorType::INT32 => {
            // TFLM adds unquantised int32 only, and ignores the activation.
            for t in [&input1, &input2] {
                if quant(t).is_some() {
                    return Err(KernelError::UnsupportedParameter {
                        what: "ADD int32 inputs must not be quantised",
                    });
                }
            }
            data.kind = KIND_INT32;
        }
        other => {
            return Err(KernelError::UnsupportedType {
                tensor: output.index,
                dtype: other.0,
            });
        }
    }
    ctx.store(&data)
}

/// The int8/int16 parameters of ADD (and SUB, which negates input 2's
/// contribution): TFLM's `CalculateOpDataAdd`/`CalculateOpDataSub`, the
/// same computation. `op` names the operator in errors.
pub(crate) fn quantized_params(
    input1: &TensorInfo<'_>,
    input2: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
    activation: ActivationFunctionType,
    op: &'static str,
) -> Result<(u32, QuantizedAdd), KernelError> {
    let q1 = require_quant(input1)?;
    let q2 = require_quant(input2)?;
    let qo = require_quant(output)?;
    for (t, q) in [(input1, q1), (input2, q2), (output, qo)] {
        if !(q.scale > 0.0 && q.scale.is_finite()) {
            return Err(KernelError::MissingQuantization { tensor: t.index });
        }
    }
    let bad = |what| KernelError::UnsupportedParameter { what };
    // Which scale gave a multiplier out of range, named per operator.
    let [e1, e2, eo] = if op == "SUB" {
        ["SUB input 1 scale", "SUB input 2 scale", "SUB output scale"]
    } else {
        ["ADD input 1 scale", "ADD input 2 scale", "ADD output scale"]
    };
    // TFLM's headroom: 20 bits for int8, 15 for int16 (so the shifted
    // inputs fit 32 bits).
    let (left_shift, qmin, qmax, kind) = if output.dtype == TensorType::INT8 {
        (20, -128, 127, KIND_INT8)
    } else {
        (15, -32768, 32767, KIND_INT16)
    };
    let twice_max_input_scale = 2.0 * f64::from(q1.scale.max(q2.scale));
    let real_input1 = f64::from(q1.scale) / twice_max_input_scale;
    let real_input2 = f64::from(q2.scale) / twice_max_input_scale;
    let real_output = twice_max_input_scale / (f64::from(1 << left_shift) * f64::from(qo.scale));
    let (input1_multiplier, input1_shift) =
        quantize_multiplier_smaller_than_one_exp(real_input1).ok_or(bad(e1))?;
    let (input2_multiplier, input2_shift) =
        quantize_multiplier_smaller_than_one_exp(real_input2).ok_or(bad(e2))?;
    let (output_multiplier, output_shift) =
        quantize_multiplier_smaller_than_one_exp(real_output).ok_or(bad(eo))?;
    // Zero points must be values of the type (TFLM's
    // CheckArithmeticParams), which keeps the shifted inputs in 32 bits.
    for (t, q) in [(input1, q1), (input2, q2), (output, qo)] {
        if !(qmin..=qmax).contains(&q.zero_point) {
            return Err(KernelError::MissingQuantization { tensor: t.index });
        }
    }
    let (activation_min, activation_max) =
        activation_range_quantized(activation, qo.scale, qo.zero_point, qmin, qmax);
    Ok((
        kind,
        QuantizedAdd {
            input1_offset: -q1.zero_point,
            input2_offset: -q2.zero_point,
            output_offset: qo.zero_point,
            left_shift,
            input1_multiplier,
            input1_shift,
            input2_multiplier,
            input2_shift,
            output_multiplier,
            output_shift,
            activation_min,
            activation_max,
        },
    ))
}

/// One input's contribution to a quantised sum: offset, shifted left and
/// scaled by its multiplier (the first half of TFLM's `AddFunc`).
#[inline(always)]
pub(crate) fn scale_input(
    x: i32,
    offset: i32,
    left_shift: i32,
    multiplier: i32,
    shift: i32,
) -> i32 {
    multiply_by_quantized_multiplier_smaller_than_one((x + offset) << left_shift, multiplier, shift)
}

/// The sum of two scaled inputs, requantised and clamped (the rest of
/// `AddFunc`).
#[inline(always)]
pub(crate) fn finish(sum: i32, p: &QuantizedAdd) -> i32 {
    let raw =
        multiply_by_quantized_multiplier_smaller_than_one(sum, p.output_multiplier, p.output_shift)
            + p.output_offset;
    raw.clamp(p.activation_min, p.activation_max)
}

/// One quantised sum, exactly TFLM's `AddFunc`.
#[inline(always)]
fn add_quantized(x: i32, y: i32, p: &QuantizedAdd) -> i32 {
    let scaled1 = scale_input(
        x,
        p.input1_offset,
        p.left_shift,
        p.input1_multiplier,
        p.input1_shift,
    );
    let scaled2 = scale_input(
        y,
        p.input2_offset,
        p.left_shift,
        p.input2_multiplier,
        p.input2_shift,
    );
    finish(scaled1 + scaled2, p)
}

/// TFLM's `MultiplyByQuantizedMultiplierSmallerThanOne(x, m, shift)` for
/// `|x| < 2^29` and `-30 ≤ shift ≤ 0` in 32-bit arithmetic: the doubling
/// high multiply `⌊(x·m + 2^30) / 2^31⌋` is the rounded high word of
/// `2x · m` (one `SMMULR` on cores with the DSP extension; `2x` fits), and
/// the rounding shift by `e = -shift` is `(2h + 2^e − [h < 0]) >> (e + 1)`
/// (`|h| < 2^29`, so nothing overflows). int8 ADD's operands always fit:
/// `|x + offset| ≤ 255` shifted left by 20 is below `2^28`, and so is each
/// scaled input; their sum is below `2^29`.
#[derive(Debug, Clone, Copy)]
struct SmallScale {
    multiplier: i32,
    /// `2^e`.
    round: i32,
    /// `e + 1`, in `1..=31`.
    shift: u32,
}

impl SmallScale {
    /// `None` unless `-30 ≤ shift ≤ 0`.
    fn new(multiplier: i32, shift: i32) -> Option<Self> {
        let e = u32::try_from(-shift).ok().filter(|&e| e <= 30)?;
        Some(SmallScale {
            multiplier,
            round: 1 << e,
            shift: e + 1,
        })
    }

    /// `x · multiplier · 2^shift`, rounded as TFLM (`|x| < 2^29`).
    #[inline(always)]
    fn apply(&self, x: i32) -> i32 {
        let h = high_mul_rounded(x.wrapping_mul(2), self.multiplier);
        let sum = h
            .wrapping_mul(2)
            .wrapping_add(self.round)
            .wrapping_sub(((h as u32) >> 31) as i32);
        // SAFETY: `new` keeps the shift within 1..=31 (and the fields are
        // set nowhere else); told to the compiler so the shift needs no mask.
        unsafe { core::hint::assert_unchecked(self.shift < 32) };
        sum >> self.shift
    }
}

/// `⌊(a·b + 2^31) / 2^32⌋`.
#[inline(always)]
fn high_mul_rounded(a: i32, b: i32) -> i32 {
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    {
        super::arm_dsp::smmulr(a as u32, b as u32) as i32
    }
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    {
        ((i64::from(a) * i64::from(b) + (1 << 31)) >> 32) as i32
    }
}

/// int8 ADD in 32-bit arithmetic ([`SmallScale`]): TFLM's `AddFunc` when
/// the left shift is at most 20 and every shift within `-30..=0`.
#[derive(Debug, Clone, Copy)]
pub(super) struct SmallAdd {
    inputs: [(i32, SmallScale); 2],
    left_shift: u32,
    output: SmallScale,
    offset: i32,
    min: i32,
    max: i32,
}

impl SmallAdd {
    pub(super) fn new(p: &QuantizedAdd) -> Option<Self> {
        let left_shift = u32::try_from(p.left_shift).ok().filter(|&s| s <= 20)?;
        Some(SmallAdd {
            inputs: [
                (
                    p.input1_offset,
                    SmallScale::new(p.input1_multiplier, p.input1_shift)?,
                ),
                (
                    p.input2_offset,
                    SmallScale::new(p.input2_multiplier, p.input2_shift)?,
                ),
            ],
            left_shift,
            output: SmallScale::new(p.output_multiplier, p.output_shift)?,
            offset: p.output_offset,
            min: p.activation_min,
            max: p.activation_max,
        })
    }

    /// Input `k`'s scaled value of the int8 `x`.
    #[inline(always)]
    fn input(&self, k: usize, x: i8) -> i32 {
        let (offset, scale) = self.inputs[k];
        scale.apply((i32::from(x) + offset) << self.left_shift)
    }

    /// The output of two scaled inputs' sum.
    #[inline(always)]
    pub(super) fn finish(&self, sum: i32) -> i8 {
        let raw = self.output.apply(sum) + self.offset;
        // max then min, as `finish` and TFLM for an ordered range.
        raw.max(self.min).min(self.max) as i8
    }

    /// The 256 scaled values of input `k`.
    pub(super) fn table(&self, k: usize) -> [i32; 256] {
        core::array::from_fn(|i| self.input(k, i as u8 as i8))
    }
}

/// Same shapes (residual adds): one plain loop, out of line so that most
/// of its constants stay in registers (inlined into `invoke` with every
/// other path, it kept them and its count on the stack: 27 instructions an
/// element, 24 here, and fewer of them loads).
#[inline(never)]
fn add_flat(
    q: &SmallAdd,
    (t1, t2): (&[i32; 256], &[i32; 256]),
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) {
    let q = *q;
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = q.finish(t1[x as u8 as usize] + t2[y as u8 as usize]);
    }
}

/// Outputs from which invoke tabulates each input's 256 scaled values
/// (2 KiB of stack, no arena) instead of scaling every element: two of the
/// three requantisations per element become lookups.
const TABLE_MIN_ELEMENTS: u32 = 1024;

pub(super) fn scaled_table(
    offset: i32,
    left_shift: i32,
    multiplier: i32,
    shift: i32,
) -> [i32; 256] {
    let mut table = [0i32; 256];
    for (i, t) in table.iter_mut().enumerate() {
        *t = scale_input(
            i32::from(i as u8 as i8),
            offset,
            left_shift,
            multiplier,
            shift,
        );
    }
    table
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: &AddData = ctx.op_data()?;
    let input1 = ctx.input(0)?;
    let input2 = ctx.input(1)?;
    let output = ctx.output(0)?;
    match data.kind {
        KIND_FLOAT32 => {
            let (lo, hi) = (data.activation_min_f32, data.activation_max_f32);
            data.walk.run(
                input1.values::<f32>()?,
                input2.values::<f32>()?,
                output.values::<f32>()?,
                // TFLM: min(max(x, lo), hi).
                |x, y| {
                    let s = x + y;
                    let s = if s < lo { lo } else { s };
                    if hi < s { hi } else { s }
                },
            )
        }
        KIND_INT8 => {
            let p = data.quantized;
            let (a, b, out) = (
                input1.values::<i8>()?,
                input2.values::<i8>()?,
                output.values::<i8>()?,
            );
            if let Some(q) = SmallAdd::new(&p).filter(|_| p.activation_min <= p.activation_max) {
                if data.walk.len_out >= TABLE_MIN_ELEMENTS {
                    let (t1, t2) = (q.table(0), q.table(1));
                    if data.walk.is_flat() && a.len() == out.len() && b.len() == out.len() {
                        add_flat(&q, (&t1, &t2), a, b, out);
                        return Ok(());
                    }
                    return data.walk.run(a, b, out, |x, y| {
                        q.finish(t1[x as u8 as usize] + t2[y as u8 as usize])
                    });
                }
                return data
                    .walk
                    .run(a, b, out, |x, y| q.finish(q.input(0, x) + q.input(1, y)));
            }
            if data.walk.len_out >= TABLE_MIN_ELEMENTS {
                let t1 = scaled_table(
                    p.input1_offset,
                    p.left_shift,
                    p.input1_multiplier,
                    p.input1_shift,
                );
                let t2 = scaled_table(
                    p.input2_offset,
                    p.left_shift,
                    p.input2_multiplier,
                    p.input2_shift,
                );
                data.walk.run(a, b, out, |x, y| {
                    finish(t1[x as u8 as usize] + t2[y as u8 as usize], &p) as i8
                })
            } else {
                data.walk.run(a, b, out, |x, y| {
                    add_quantized(i32::from(x), i32::from(y), &p) as i8
                })
            }
        }
        KIND_INT16 => {
            let p = data.quantized;
            data.walk.run(
                input1.values::<i16>()?,
                input2.values::<i16>()?,
                output.values::<i16>()?,
                |x, y| add_quantized(i32::from(x), i32::from(y), &p) as i16,
            )
        }
        KIND_INT32 => data.walk.run(
            input1.values::<i32>()?,
            input2.values::<i32>()?,
            output.values::<i32>()?,
            i32::wrapping_add,
        ),
        _ => Err(KernelError::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_scaling_is_tflms_for_every_int8_operand() {
        // A deterministic walk over multipliers, shifts and inputs,
        // extremes included.
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 32) as u32
        };
        let limit = (1 << 29) - 1;
        for _ in 0..200_000 {
            let m = (1 << 30) + (next() >> 2) as i32;
            let shift = -((next() % 31) as i32);
            let x = match next() % 4 {
                0 => limit,
                1 => -limit,
                _ => (next() as i32) >> 3,
            };
            assert_eq!(
                SmallScale::new(m, shift).unwrap().apply(x),
                multiply_by_quantized_multiplier_smaller_than_one(x, m, shift),
                "x={x} m={m} shift={shift}"
            );
        }
    }

    #[test]
    fn small_add_is_tflms_add() {
        let p = QuantizedAdd {
            input1_offset: 128,
            input2_offset: -127,
            output_offset: -3,
            left_shift: 20,
            input1_multiplier: 1_518_500_250,
            input1_shift: -1,
            input2_multiplier: 2_147_483_647,
            input2_shift: 0,
            output_multiplier: 1_431_655_765,
            output_shift: -19,
            activation_min: -128,
            activation_max: 127,
        };
        let q = SmallAdd::new(&p).unwrap();
        let (t1, t2) = (q.table(0), q.table(1));
        for x in -128i8..=127 {
            for y in -128i8..=127 {
                let want = add_quantized(i32::from(x), i32::from(y), &p) as i8;
                assert_eq!(q.finish(q.input(0, x) + q.input(1, y)), want, "{x} + {y}");
                let looked_up = t1[x as u8 as usize] + t2[y as u8 as usize];
                assert_eq!(q.finish(looked_up), want, "{x} + {y}");
            }
        }
        // Shifts outside the 32-bit form's range are refused.
        assert!(
            SmallAdd::new(&QuantizedAdd {
                output_shift: -31,
                ..p
            })
            .is_none()
        );
        assert!(
            SmallAdd::new(&QuantizedAdd {
                left_shift: 21,
                ..p
            })
            .is_none()
        );
    }

    fn walk(a: &[i32], b: &[i32], out: &[i32]) -> Option<Broadcast> {
        Broadcast::new(
            &Dims::from_slice(a),
            &Dims::from_slice(b),
            &Dims::from_slice(out),
        )
    }

    #[test]
    fn same_shapes_fold_into_one_run() {
        let w = walk(&[1, 4, 4, 8], &[1, 4, 4, 8], &[1, 4, 4, 8]).unwrap();
        assert_eq!(w.rank, 1);
        assert_eq!((w.extent[0], w.stride1[0], w.stride2[0]), (128, 1, 1));
    }

    #[test]
    fn scalar_and_channel_operands() {
        let w = walk(&[1, 4, 4, 8], &[1], &[1, 4, 4, 8]).unwrap();
        assert_eq!(
            (w.rank, w.extent[0], w.stride1[0], w.stride2[0]),
            (1, 128, 1, 0)
        );
        let w = walk(&[2, 3, 8], &[8], &[2, 3, 8]).unwrap();
        assert_eq!(w.rank, 2);
        assert_eq!(w.extent[..2], [6, 8]);
        assert_eq!(w.stride1[..2], [8, 1]);
        assert_eq!(w.stride2[..2], [0, 1]);
    }

    #[test]
    fn both_sides_broadcast() {
        // [2,1,3] + [1,4,1] → [2,4,3]
        let w = walk(&[2, 1, 3], &[1, 4, 1], &[2, 4, 3]).unwrap();
        let a: Vec<i32> = (0..6).collect();
        let b: Vec<i32> = (0..4).map(|v| v * 100).collect();
        let mut out = vec![0; 24];
        w.run(&a, &b, &mut out, |x, y| x + y).unwrap();
        let mut want = Vec::new();
        for i in 0..2 {
            for &bj in &b {
                for k in 0..3 {
                    want.push(a[i * 3 + k] + bj);
                }
            }
        }
        assert_eq!(out, want);
    }

    #[test]
    fn incompatible_shapes_are_refused() {
        assert!(walk(&[2, 3], &[3, 3], &[2, 3]).is_none());
        assert!(walk(&[2, 3], &[3], &[4, 3]).is_none());
        assert!(walk(&[1, 2, 3], &[3], &[2, 3]).is_none());
    }
}
