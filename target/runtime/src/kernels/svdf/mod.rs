//! SVDF: a rank-`r` factorised dense layer over a window of the last
//! `memory` frames, with its state kept in a variable tensor between invokes.
//!
//! Inputs, as TFLM numbers them: `0` input `[batch, input_size]`, `1`
//! weights_feature `[filters, input_size]`, `2` weights_time
//! `[filters, memory]`, `3` bias `[units]` (optional), `4` activation state
//! `[batch, memory · filters]` (a variable tensor); output `[batch, units]`,
//! `units = filters / rank`. Each invoke:
//!
//! 1. shifts the whole state left by one element (row `f` of the state is
//!    filter `f`'s last `memory` activations, oldest first);
//! 2. writes `weights_feature · input` into each filter's newest column;
//! 3. dots each filter's row of state with its row of weights_time, sums
//!    the `rank` filters of each unit, adds the bias;
//! 4. rescales to the output (integer) or applies the fused activation
//!    (float).
//!
//! Two paths, as TFLM micro has:
//! - **Integer**: int8 input and weights_feature, int16 (or int8)
//!   weights_time and state, int32 bias, int8 output. `effective_scale_1 =
//!   input·weights_feature/state` and `effective_scale_2 =
//!   state·weights_time/output` are computed in `f32` and then quantised, as
//!   TFLM's prepare does. Like TFLM, the integer path clamps to the int8
//!   range only: it does not apply the fused activation.
//! - **Float32**, with the fused activation.
//!
//! TFLM asks for `batch · filters` (plus `batch · units` on the integer
//! path) 32-bit scratch words for the per-filter dot products and the
//! per-unit sums. hilt needs no scratch: integer sums wrap modulo 2³² in
//! any order, so each unit's `rank` filter dots are one contiguous dot
//! product added straight onto its bias; the float path sums the filter dots
//! into the bias in TFLM's order, one at a time, so it rounds the same way.
//! [`reference`](mod@reference) is TFLM's algorithm step for step, scratch
//! buffers included; the tests hold the two to the same results.
//!
//! Speed: the feature matmul widens `input − zero_point` to i16 once per
//! batch row in a 256-byte stack buffer (rows of up to 128 features; longer
//! rows use `Σ w·x − zp·Σ w` on the int8 values), so each filter is an
//! i8 × i16 dot product; on x86-64 those and the int16 time dot products use
//! SSE2's `pmaddwd`. On tflm_keyword_scrambled's layer shapes this runs in
//! 2.3–3.4× fewer instructions than [`reference`](mod@reference)
//! (`benches/svdf.rs`).

mod dot;
pub mod reference;

use super::fixed_point::{multiply_by_quantized_multiplier, quantize_multiplier};
use super::tensor::{Dims, expect_type, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::model::TensorInfo;
use crate::schema::{ActivationFunctionType, TensorType};

/// The SVDF kernel.
pub const REGISTRATION: Registration = Registration {
    name: "SVDF",
    prepare,
    invoke,
};

const INPUT: usize = 0;
const WEIGHTS_FEATURE: usize = 1;
const WEIGHTS_TIME: usize = 2;
const BIAS: usize = 3;
const STATE: usize = 4;

/// The sizes of one SVDF operator.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SvdfShape {
    /// Rows of the input (independent sequences).
    pub batch: u32,
    /// Features per input row.
    pub input_size: u32,
    /// Filters (`units · rank`).
    pub filters: u32,
    /// Filters summed into each output unit.
    pub rank: u32,
    /// Frames of state per filter.
    pub memory: u32,
}

impl SvdfShape {
    /// Output features per row.
    pub fn units(&self) -> usize {
        (self.filters / self.rank.max(1)) as usize
    }

    /// Elements of the state tensor.
    pub fn state_len(&self) -> usize {
        self.batch as usize * self.filters as usize * self.memory as usize
    }

    /// Whether slices of these lengths fit the shape (the kernels index
    /// within them without further checks on lengths).
    fn fits(
        &self,
        input: usize,
        weights_feature: usize,
        weights_time: usize,
        bias: Option<usize>,
        state: usize,
        output: usize,
    ) -> bool {
        let (b, n, f, m) = (
            self.batch as usize,
            self.input_size as usize,
            self.filters as usize,
            self.memory as usize,
        );
        self.rank > 0
            && self.filters.is_multiple_of(self.rank)
            && m > 0
            && input == b * n
            && weights_feature == f * n
            && weights_time == f * m
            && bias.is_none_or(|len| len == self.units())
            && state == self.state_len()
            && output == b * self.units()
    }
}

/// The integer path's constants, computed once in prepare.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SvdfQuantParams {
    /// Input zero point.
    pub input_zero_point: i32,
    /// State zero point (0 for int16 state).
    pub state_zero_point: i32,
    /// Output zero point.
    pub output_zero_point: i32,
    /// `input · weights_feature / state` as Q31 multiplier…
    pub scale_1_multiplier: i32,
    /// …and shift.
    pub scale_1_shift: i32,
    /// `state · weights_time / output` as Q31 multiplier…
    pub scale_2_multiplier: i32,
    /// …and shift.
    pub scale_2_shift: i32,
}

impl SvdfQuantParams {
    /// The constants from the tensors' scales and zero points, rounded as
    /// TFLM's prepare rounds them: the scale products in `f32`, then
    /// `QuantizeMultiplier` in `f64`.
    pub fn from_scales(
        input: (f32, i32),
        weights_feature_scale: f32,
        weights_time_scale: f32,
        state: (f32, i32),
        output: (f32, i32),
    ) -> Self {
        let scale_1 = f64::from(input.0 * weights_feature_scale / state.0);
        let scale_2 = f64::from(state.0 * weights_time_scale / output.0);
        let (scale_1_multiplier, scale_1_shift) = quantize_multiplier(scale_1);
        let (scale_2_multiplier, scale_2_shift) = quantize_multiplier(scale_2);
        SvdfQuantParams {
            input_zero_point: input.1,
            state_zero_point: state.1,
            output_zero_point: output.1,
            scale_1_multiplier,
            scale_1_shift,
            scale_2_multiplier,
            scale_2_shift,
        }
    }
}

/// Element type of the integer path's weights_time and state.
pub trait StateElement: bytemuck::Pod + Copy + Into<i32> + 'static {
    /// The type's range, as TFLM clamps the feature activations to it.
    const MIN: i32;
    /// See [`MIN`](Self::MIN).
    const MAX: i32;
    /// `value` clamped to the type's range.
    fn saturate(value: i32) -> Self;
    /// `Σ a·b`, wrapping.
    fn dot(a: &[Self], b: &[Self]) -> i32;
}

impl StateElement for i16 {
    const MIN: i32 = i16::MIN as i32;
    const MAX: i32 = i16::MAX as i32;
    #[inline(always)]
    fn saturate(value: i32) -> Self {
        value.clamp(<Self as StateElement>::MIN, <Self as StateElement>::MAX) as i16
    }
    #[inline(always)]
    fn dot(a: &[Self], b: &[Self]) -> i32 {
        dot::i16_i16(a, b)
    }
}

impl StateElement for i8 {
    const MIN: i32 = i8::MIN as i32;
    const MAX: i32 = i8::MAX as i32;
    #[inline(always)]
    fn saturate(value: i32) -> Self {
        value.clamp(<Self as StateElement>::MIN, <Self as StateElement>::MAX) as i8
    }
    #[inline(always)]
    fn dot(a: &[Self], b: &[Self]) -> i32 {
        a.iter().zip(b).fold(0i32, |acc, (&x, &y)| {
            acc.wrapping_add(i32::from(x) * i32::from(y))
        })
    }
}

/// Which path prepare chose.
const KIND_FLOAT: u32 = 0;
const KIND_INT16_STATE: u32 = 1;
const KIND_INT8_STATE: u32 = 2;

/// What prepare keeps for invoke (56 bytes in the tail).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
struct OpData {
    kind: u32,
    activation: i32,
    shape: SvdfShape,
    quant: SvdfQuantParams,
}

fn dim_error(tensor: u32) -> KernelError {
    KernelError::ShapeMismatch { tensor }
}

fn rank2(info: &TensorInfo<'_>) -> Result<(usize, usize), KernelError> {
    let dims = Dims::of(info)?;
    if dims.rank() != 2 {
        return Err(KernelError::UnsupportedRank {
            tensor: info.index,
            rank: dims.rank() as u32,
        });
    }
    if dims.get(0) < 0 || dims.get(1) < 0 {
        return Err(dim_error(info.index));
    }
    Ok((dims.get(0) as usize, dims.get(1) as usize))
}

/// The tensors of one SVDF operator, as prepare reads them.
struct Tensors<'m> {
    input: TensorInfo<'m>,
    weights_feature: TensorInfo<'m>,
    weights_time: TensorInfo<'m>,
    bias: Option<TensorInfo<'m>>,
    state: TensorInfo<'m>,
    output: TensorInfo<'m>,
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let options = ctx
        .op()
        .raw()
        .builtin_options_as_svdfoptions()
        .ok_or(KernelError::MissingOptions)?;
    if ctx.input_count() != 5 {
        return Err(KernelError::UnsupportedParameter {
            what: "SVDF takes five inputs (bias may be omitted as -1)",
        });
    }
    if ctx.output_count() != 1 {
        return Err(KernelError::UnsupportedParameter {
            what: "SVDF has one output",
        });
    }
    let t = Tensors {
        input: ctx.input(INPUT)?,
        weights_feature: ctx.input(WEIGHTS_FEATURE)?,
        weights_time: ctx.input(WEIGHTS_TIME)?,
        bias: ctx.optional_input(BIAS),
        state: ctx.input(STATE)?,
        output: ctx.output(0)?,
    };
    let shape = checked_shape(&t, options.rank())?;
    let activation = options.fused_activation_function();
    let data = match t.input.dtype {
        TensorType::INT8 => integer_op_data(&t, shape, activation)?,
        TensorType::FLOAT32 => float_op_data(&t, shape, activation)?,
        other => {
            return Err(KernelError::UnsupportedType {
                tensor: t.input.index,
                dtype: other.0,
            });
        }
    };
    ctx.store(&data)
}

/// The operator's sizes, every tensor's shape checked against them (and
/// the state checked to be a variable tensor).
fn checked_shape(t: &Tensors<'_>, rank: i32) -> Result<SvdfShape, KernelError> {
    if rank <= 0 {
        return Err(KernelError::UnsupportedParameter {
            what: "SVDF rank must be positive",
        });
    }
    let (batch, input_size) = rank2(&t.input)?;
    let (filters, feature_cols) = rank2(&t.weights_feature)?;
    let (time_rows, memory) = rank2(&t.weights_time)?;
    let rank = rank as usize;
    if filters % rank != 0 || feature_cols != input_size {
        return Err(dim_error(t.weights_feature.index));
    }
    let units = filters / rank;
    if time_rows != filters || memory == 0 {
        return Err(dim_error(t.weights_time.index));
    }
    if let Some(bias) = &t.bias {
        let dims = Dims::of(bias)?;
        if dims.rank() == 0 || dims.get(0) as usize != units || dims.elements() != units {
            return Err(dim_error(bias.index));
        }
    }
    if rank2(&t.state)? != (batch, memory * filters) {
        return Err(dim_error(t.state.index));
    }
    if !t.state.is_variable || t.state.constant.is_some() {
        return Err(KernelError::NotVariable {
            position: STATE as u32,
        });
    }
    if rank2(&t.output)? != (batch, units) {
        return Err(dim_error(t.output.index));
    }
    Ok(SvdfShape {
        batch: batch as u32,
        input_size: input_size as u32,
        filters: filters as u32,
        rank: rank as u32,
        memory: memory as u32,
    })
}

/// The integer path's op data: the tensors' types and quantisation
/// checked, the two effective scales quantised.
fn integer_op_data(
    t: &Tensors<'_>,
    shape: SvdfShape,
    activation: ActivationFunctionType,
) -> Result<OpData, KernelError> {
    expect_type(&t.weights_feature, &[TensorType::INT8])?;
    expect_type(&t.weights_time, &[TensorType::INT16, TensorType::INT8])?;
    // TFLM picks the state type from weights_time's; both must agree.
    expect_type(&t.state, &[t.weights_time.dtype])?;
    expect_type(&t.output, &[TensorType::INT8])?;
    let q_input = require_quant(&t.input)?;
    let q_feature = require_quant(&t.weights_feature)?;
    let q_time = require_quant(&t.weights_time)?;
    let q_state = require_quant(&t.state)?;
    let q_output = require_quant(&t.output)?;
    if let Some(bias) = &t.bias {
        expect_type(bias, &[TensorType::INT32])?;
        // TFLM checks the bias was quantised with state·weights_time.
        let q_bias = require_quant(bias)?;
        let expected = f64::from(q_state.scale * q_time.scale);
        if (f64::from(q_bias.scale) - expected).abs() >= 1e-5 {
            return Err(KernelError::UnsupportedParameter {
                what: "SVDF bias scale must be state scale times weights_time scale",
            });
        }
    }
    Ok(OpData {
        kind: if t.weights_time.dtype == TensorType::INT16 {
            KIND_INT16_STATE
        } else {
            KIND_INT8_STATE
        },
        activation: i32::from(activation.0),
        shape,
        quant: SvdfQuantParams::from_scales(
            (q_input.scale, q_input.zero_point),
            q_feature.scale,
            q_time.scale,
            (q_state.scale, q_state.zero_point),
            (q_output.scale, q_output.zero_point),
        ),
    })
}

/// The float path's op data: every tensor float32, an activation TFLM's
/// float SVDF applies.
fn float_op_data(
    t: &Tensors<'_>,
    shape: SvdfShape,
    activation: ActivationFunctionType,
) -> Result<OpData, KernelError> {
    for tensor in [&t.weights_feature, &t.weights_time, &t.state, &t.output] {
        expect_type(tensor, &[TensorType::FLOAT32])?;
    }
    if let Some(bias) = &t.bias {
        expect_type(bias, &[TensorType::FLOAT32])?;
    }
    if !matches!(
        activation,
        ActivationFunctionType::NONE
            | ActivationFunctionType::RELU
            | ActivationFunctionType::RELU_N1_TO_1
            | ActivationFunctionType::RELU6
            | ActivationFunctionType::TANH
            | ActivationFunctionType::SIGN_BIT
    ) {
        return Err(KernelError::UnsupportedParameter {
            what: "SVDF fused activation",
        });
    }
    Ok(OpData {
        kind: KIND_FLOAT,
        activation: i32::from(activation.0),
        shape,
        quant: SvdfQuantParams::default(),
    })
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: OpData = *ctx.op_data()?;
    let input = ctx.input(INPUT)?;
    let weights_feature = ctx.input(WEIGHTS_FEATURE)?;
    let weights_time = ctx.input(WEIGHTS_TIME)?;
    let bias = ctx.optional_input(BIAS)?;
    let state = ctx.variable(STATE)?;
    let output = ctx.output(0)?;
    match data.kind {
        KIND_INT16_STATE => eval_integer::<i16>(
            &data.shape,
            &data.quant,
            input.values()?,
            weights_feature.values()?,
            weights_time.values()?,
            bias.map(|b| b.values()).transpose()?,
            state.values()?,
            output.values()?,
        ),
        KIND_INT8_STATE => eval_integer::<i8>(
            &data.shape,
            &data.quant,
            input.values()?,
            weights_feature.values()?,
            weights_time.values()?,
            bias.map(|b| b.values()).transpose()?,
            state.values()?,
            output.values()?,
        ),
        KIND_FLOAT => eval_float(
            &data.shape,
            ActivationFunctionType(data.activation as i8),
            input.values()?,
            weights_feature.values()?,
            weights_time.values()?,
            bias.map(|b| b.values()).transpose()?,
            state.values()?,
            output.values()?,
        ),
        _ => Err(KernelError::Internal),
    }
}

/// Longest input row widened on the stack (256 bytes) for the feature
/// matmul; longer rows take the unwidened loop.
const WIDE_INPUT: usize = 128;

/// `Σ w·(x − zero_point)` over int8 vectors, wrapping as TFLM's int32
/// accumulator does on its targets.
#[inline(always)]
fn dot_i8_offset(weights: &[i8], x: &[i8], zero_point: i32) -> i32 {
    // Σ w·(x − zp) = Σ w·x − zp·Σ w exactly modulo 2³²; the i8·i8 products
    // stay in 16 bits.
    let mut dot = 0i32;
    let mut weight_sum = 0i32;
    for (&w, &v) in weights.iter().zip(x) {
        dot = dot.wrapping_add(i32::from(i16::from(w) * i16::from(v)));
        weight_sum = weight_sum.wrapping_add(i32::from(w));
    }
    dot.wrapping_sub(weight_sum.wrapping_mul(zero_point))
}

/// `Σ w·x` with the input already offset and widened to i16.
#[inline(always)]
fn dot_i8_i16(weights: &[i8], x: &[i16]) -> i32 {
    dot::i8_i16(weights, x)
}

/// One batch row's feature activations into each filter's newest column:
/// `saturate(scale_1(Σ w·(x − zp_in)) + zp_state)`.
#[inline(always)]
fn feature_row<T: StateElement>(
    quant: &SvdfQuantParams,
    x: &[i8],
    weights_feature: &[i8],
    batch_state: &mut [T],
    memory: usize,
) {
    let n_input = x.len();
    let newest = |dot: i32| {
        let scaled =
            multiply_by_quantized_multiplier(dot, quant.scale_1_multiplier, quant.scale_1_shift);
        T::saturate(scaled.wrapping_add(quant.state_zero_point))
    };
    let rows = weights_feature
        .chunks_exact(n_input)
        .zip(batch_state.chunks_exact_mut(memory));
    // x − zp fits in i16 for any int8 zero point.
    let zp = quant.input_zero_point;
    if n_input <= WIDE_INPUT && (i32::from(i8::MIN)..=i32::from(i8::MAX)).contains(&zp) {
        let mut wide = [0i16; WIDE_INPUT];
        for (d, &v) in wide.iter_mut().zip(x) {
            *d = (i32::from(v) - zp) as i16;
        }
        let wide = &wide[..n_input];
        for (w, row) in rows {
            row[memory - 1] = newest(dot_i8_i16(w, wide));
        }
    } else {
        for (w, row) in rows {
            row[memory - 1] = newest(dot_i8_offset(w, x, zp));
        }
    }
}

/// `Σ w·(s − zero_point)` over one unit's weights_time and state rows.
#[inline(always)]
fn dot_state<T: StateElement>(weights: &[T], state: &[T], zero_point: i32) -> i32 {
    if zero_point == 0 {
        T::dot(weights, state)
    } else {
        weights.iter().zip(state).fold(0i32, |acc, (&w, &s)| {
            acc.wrapping_add(w.into().wrapping_mul(s.into().wrapping_sub(zero_point)))
        })
    }
}

/// The integer SVDF step, bit-exact with TFLM's `EvalIntegerSvdfReference`,
/// without its scratch buffers. `state` is updated in place.
#[allow(clippy::too_many_arguments)]
pub fn eval_integer<T: StateElement>(
    shape: &SvdfShape,
    quant: &SvdfQuantParams,
    input: &[i8],
    weights_feature: &[i8],
    weights_time: &[T],
    bias: Option<&[i32]>,
    state: &mut [T],
    output: &mut [i8],
) -> Result<(), KernelError> {
    if !shape.fits(
        input.len(),
        weights_feature.len(),
        weights_time.len(),
        bias.map(<[i32]>::len),
        state.len(),
        output.len(),
    ) {
        return Err(KernelError::Internal);
    }
    let n_input = shape.input_size as usize;
    let memory = shape.memory as usize;
    let per_batch = shape.filters as usize * memory;
    if per_batch == 0 {
        // No filters: no state and no output.
        return Ok(());
    }
    let per_unit = shape.rank as usize * memory;
    let units = shape.units();

    // 1. Shift the whole state left by one; each filter's newest column
    //    (which received the next filter's oldest value) is rewritten below.
    if !state.is_empty() {
        state.copy_within(1.., 0);
    }

    // 2. Feature matmul into the newest column.
    if n_input > 0 {
        for (x, batch_state) in input
            .chunks_exact(n_input)
            .zip(state.chunks_exact_mut(per_batch))
        {
            feature_row(quant, x, weights_feature, batch_state, memory);
        }
    } else {
        // An empty dot product is 0 for every filter.
        let newest = T::saturate(quant.state_zero_point);
        for row in state.chunks_exact_mut(memory) {
            row[memory - 1] = newest;
        }
    }

    // 3–4. Time dot products summed over each unit's rank filters (one
    //      contiguous run of rank·memory weights and state), bias, rescale.
    if units == 0 {
        return Ok(());
    }
    for (batch_state, out) in state
        .chunks_exact(per_batch)
        .zip(output.chunks_exact_mut(units))
    {
        for (u, ((w, s), o)) in weights_time
            .chunks_exact(per_unit)
            .zip(batch_state.chunks_exact(per_unit))
            .zip(out.iter_mut())
            .enumerate()
        {
            let sum =
                dot_state(w, s, quant.state_zero_point).wrapping_add(bias.map_or(0, |b| b[u]));
            let scaled = multiply_by_quantized_multiplier(
                sum,
                quant.scale_2_multiplier,
                quant.scale_2_shift,
            );
            *o = scaled
                .wrapping_add(quant.output_zero_point)
                .clamp(i32::from(i8::MIN), i32::from(i8::MAX)) as i8;
        }
    }
    Ok(())
}

/// `std::max` / `std::min` as TFLM's float activations use them (NaN and
/// signed-zero behaviour included).
#[inline(always)]
fn std_max(a: f32, b: f32) -> f32 {
    if a < b { b } else { a }
}

#[inline(always)]
fn std_min(a: f32, b: f32) -> f32 {
    if b < a { b } else { a }
}

/// TFLM's `ActivationValFloat`.
#[inline(always)]
pub fn activation_float(activation: ActivationFunctionType, x: f32) -> f32 {
    match activation {
        ActivationFunctionType::RELU => std_max(0.0, x),
        ActivationFunctionType::RELU_N1_TO_1 => std_max(-1.0, std_min(x, 1.0)),
        ActivationFunctionType::RELU6 => std_max(0.0, std_min(x, 6.0)),
        ActivationFunctionType::TANH => libm::tanhf(x),
        ActivationFunctionType::SIGN_BIT => f32::from(u8::from(x.is_sign_negative())),
        _ => x,
    }
}

/// `Σ a·b` in order from 0.0, as TFLM's float loops add.
#[inline(always)]
fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).fold(0.0f32, |acc, (&x, &y)| acc + x * y)
}

/// The float SVDF step: TFLM's `EvalFloatSvdfReference`, rounding for
/// rounding, without its scratch buffer. `state` is updated in place.
#[allow(clippy::too_many_arguments)]
pub fn eval_float(
    shape: &SvdfShape,
    activation: ActivationFunctionType,
    input: &[f32],
    weights_feature: &[f32],
    weights_time: &[f32],
    bias: Option<&[f32]>,
    state: &mut [f32],
    output: &mut [f32],
) -> Result<(), KernelError> {
    if !shape.fits(
        input.len(),
        weights_feature.len(),
        weights_time.len(),
        bias.map(<[f32]>::len),
        state.len(),
        output.len(),
    ) {
        return Err(KernelError::Internal);
    }
    let n_input = shape.input_size as usize;
    let memory = shape.memory as usize;
    let per_batch = shape.filters as usize * memory;
    if per_batch == 0 {
        // No filters: no state and no output.
        return Ok(());
    }
    let units = shape.units();

    if !state.is_empty() {
        state.copy_within(1.., 0);
    }
    if n_input > 0 {
        for (x, batch_state) in input
            .chunks_exact(n_input)
            .zip(state.chunks_exact_mut(per_batch))
        {
            for (w, row) in weights_feature
                .chunks_exact(n_input)
                .zip(batch_state.chunks_exact_mut(memory))
            {
                row[memory - 1] = dot_f32(w, x);
            }
        }
    } else {
        for row in state.chunks_exact_mut(memory) {
            row[memory - 1] = 0.0;
        }
    }
    if units == 0 {
        return Ok(());
    }
    let rank = shape.rank as usize;
    for (batch_state, out) in state
        .chunks_exact(per_batch)
        .zip(output.chunks_exact_mut(units))
    {
        for (u, ((w, s), o)) in weights_time
            .chunks_exact(rank * memory)
            .zip(batch_state.chunks_exact(rank * memory))
            .zip(out.iter_mut())
            .enumerate()
        {
            // TFLM: output = bias (or 0), then += each filter's dot in turn.
            let mut sum = bias.map_or(0.0, |b| b[u]);
            for (wf, sf) in w.chunks_exact(memory).zip(s.chunks_exact(memory)) {
                sum += dot_f32(wf, sf);
            }
            *o = activation_float(activation, sum);
        }
    }
    Ok(())
}
