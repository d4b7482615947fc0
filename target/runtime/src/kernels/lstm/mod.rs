//! UNIDIRECTIONAL_SEQUENCE_LSTM: a standard (Keras) LSTM layer run over a
//! sequence, its hidden and cell state kept in variable tensors between
//! invokes.
//!
//! Inputs, as TFLite numbers them (24, optional ones `-1`): `0` input
//! `[batch, time, features]` (or `[time, batch, features]` when
//! `time_major`); `1..=4` input → {input, forget, cell, output} gate weights
//! `[cells, features]`; `5..=8` hidden → gate ("recurrent") weights `[cells,
//! cells]`; `12..=15` gate biases `[cells]`; `18` hidden state and `19` cell
//! state `[batch, cells]`, both variable tensors. Output: the hidden state
//! after every step, `[batch, time, cells]`. Peephole (`9..=11`),
//! projection (`16`, `17`) and layer-norm (`20..=23`) inputs must be
//! omitted, as TFLM micro requires. Per time step and cell:
//!
//! ```text
//! f = σ(W_f·x + R_f·h + b_f)    i = σ(W_i·x + R_i·h + b_i)
//! g = tanh(W_c·x + R_c·h + b_c)  o = σ(W_o·x + R_o·h + b_o)
//! c = clip(f·c + i·g)           h = o·tanh(c)
//! ```
//!
//! `act` is the options' activation, which must be TANH (TFLM's gate code
//! also knows sigmoid, but the schema cannot name it for this op).
//!
//! Two paths, as TFLM micro has (its `lstm_eval.h`):
//! - **Integer**: int8 input, hidden state and output, int16 cell state
//!   (a power-of-two scale), int8 weights, int32 biases. Each gate's two FCs
//!   go to int16 in Q3.12 with multipliers TFLM's prepare computes
//!   (`input·weight / 2^-12`, the product in `f32`); the gates use TFLM's
//!   int16 table sigmoid/tanh ([`logistic_int16`], [`tanh_int16`]); the
//!   products are rescaled with TFLM's elementwise Mul.
//! - **Float32**, with TFLM's reference logistic (cut-offs at −9 and
//!   16.62) and the FC/Mul min/max clamps.
//!
//! TFLM requests four scratch buffers of `batch · cells` cell-state
//! elements (gate outputs and the recurrent FC). hilt requests none: every
//! stage after the FCs is elementwise, so each cell runs its four gates and
//! its state update together and its new hidden value goes straight into
//! this step's slice of the output; once every cell has read the old hidden
//! state, the slice is copied into it (TFLM copies the other way, same
//! result). [`reference`](mod@reference) is TFLM's algorithm stage by stage with its
//! buffers; the tests hold the kernels to it and to TFLM's own outputs.
//!
//!
//! Speed on x86-64 (SSE2, the baseline; every other target runs the plain
//! loops, one cell at a time): the integer path takes each cell's four
//! gate rows against the input and the hidden state with `pmaddwd`, and
//! then four cells side by side, one per lane, from the FC sums to the new
//! hidden value (rescales, saturations, the int16 LUTs with scalar table
//! reads, the cell update); the float path's dots run four cells side by
//! side, each lane adding its products in the scalar order, so every sum
//! rounds as before. Results are bit for bit the plain paths' (the tests
//! hold each fast piece to its plain one). No extra op data, no scratch.
//!
//! [`logistic_int16`]: super::fixed_point::logistic_int16
//! [`tanh_int16`]: super::fixed_point::tanh_int16

pub(crate) mod float;
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod float_sse2;
mod integer;
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod integer_sse2;
mod luts;
mod params;
pub mod reference;

pub use float::{dots_cells, dots_cells_portable, eval_float, expf, sigmoid_f32, tanhf};
pub use integer::{eval_integer, gate_dots, gate_dots_portable};
pub use params::{GateQuant, LstmQuantParams, LstmScales, LstmShape, Step};

use super::tensor::{Dims, expect_type, require_quant};
use super::{InvokeContext, KernelError, PrepareContext, Registration};
use crate::model::TensorInfo;
use crate::schema::{ActivationFunctionType, TensorType};

/// The UNIDIRECTIONAL_SEQUENCE_LSTM kernel.
pub const REGISTRATION: Registration = Registration {
    name: "UNIDIRECTIONAL_SEQUENCE_LSTM",
    prepare,
    invoke,
};

/// Gates per cell.
pub const GATES: usize = 4;
/// Index of the input gate in per-gate arrays (tensor order).
pub const GATE_INPUT: usize = 0;
/// The forget gate.
pub const GATE_FORGET: usize = 1;
/// The cell gate.
pub const GATE_CELL: usize = 2;
/// The output gate.
pub const GATE_OUTPUT: usize = 3;

/// Cells whose dots [`dots_cells`] computes at once (the lanes of the
/// SSE2 path; the portable path's block too, so both agree).
pub const CELLS: usize = 4;

const INPUT: usize = 0;
/// Input → gate weights are inputs `1..=4`, hidden → gate `5..=8`.
const INPUT_WEIGHTS: usize = 1;
const RECURRENT_WEIGHTS: usize = 5;
const PEEPHOLE: [usize; 3] = [9, 10, 11];
const BIASES: usize = 12;
const PROJECTION: [usize; 2] = [16, 17];
const HIDDEN_STATE: usize = 18;
const CELL_STATE: usize = 19;
const LAYER_NORM: [usize; 4] = [20, 21, 22, 23];
const INPUT_COUNT: usize = 24;

/// The constant tensors of one LSTM, per gate in tensor order.
#[derive(Debug, Clone, Copy)]
pub struct LstmWeights<'a, W, B> {
    /// Input → gate weights, `[cells, features]` row-major.
    pub input: [&'a [W]; GATES],
    /// Hidden → gate weights, `[cells, cells]`.
    pub recurrent: [&'a [W]; GATES],
    /// Gate biases, `[cells]`.
    pub bias: [&'a [B]; GATES],
}

impl<W, B> LstmWeights<'_, W, B> {
    fn lengths(&self) -> [usize; 2 * GATES] {
        let mut lengths = [0; 2 * GATES];
        for g in 0..GATES {
            lengths[g] = self.input[g].len();
            lengths[GATES + g] = self.recurrent[g].len();
        }
        lengths
    }

    fn bias_lengths(&self) -> [usize; GATES] {
        self.bias.map(<[B]>::len)
    }
}

const KIND_FLOAT: u32 = 0;
const KIND_INT8: u32 = 1;

/// What prepare keeps for invoke (176 bytes in the tail).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct OpData {
    kind: u32,
    shape: LstmShape,
    /// The float path's cell clip (0 = none).
    cell_clip: f32,
    quant: LstmQuantParams,
}

const _: () = assert!(size_of::<OpData>() == 176);

fn shape_error(info: &TensorInfo<'_>) -> KernelError {
    KernelError::ShapeMismatch { tensor: info.index }
}

fn dims_of_rank(info: &TensorInfo<'_>, rank: usize) -> Result<Dims, KernelError> {
    let dims = Dims::of(info)?;
    if dims.rank() != rank {
        return Err(KernelError::UnsupportedRank {
            tensor: info.index,
            rank: dims.rank() as u32,
        });
    }
    if dims.as_slice().iter().any(|&d| d < 0) {
        return Err(shape_error(info));
    }
    Ok(dims)
}

/// A per-tensor scale and zero point (per-channel weights are refused:
/// TFLM's LSTM reads only the first channel's multiplier).
fn per_tensor(info: &TensorInfo<'_>) -> Result<(f32, i32), KernelError> {
    let q = require_quant(info)?;
    if super::tensor::channel_scales(info).is_some_and(|s| s.len() > 1) {
        return Err(KernelError::UnsupportedParameter {
            what: "LSTM weights must be quantised per tensor",
        });
    }
    Ok((q.scale, q.zero_point))
}

fn prepare(ctx: &mut PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    let options = ctx
        .op()
        .raw()
        .builtin_options_as_unidirectional_sequence_lstmoptions()
        .ok_or(KernelError::MissingOptions)?;
    check_operands(ctx)?;
    let t = Tensors::read(ctx)?;
    let shape = checked_shape(&t, options.time_major())?;
    // TFLM's gate code knows sigmoid and tanh, but a model's options can
    // only name tanh (the schema has no sigmoid activation).
    if options.fused_activation_function() != ActivationFunctionType::TANH {
        return Err(KernelError::UnsupportedParameter {
            what: "LSTM activation must be TANH",
        });
    }
    check_types(&t)?;
    let cell_clip = options.cell_clip();
    let data = if t.input.dtype == TensorType::FLOAT32 {
        OpData {
            kind: KIND_FLOAT,
            shape,
            cell_clip,
            quant: LstmQuantParams::default(),
        }
    } else {
        OpData {
            kind: KIND_INT8,
            shape,
            cell_clip,
            quant: LstmQuantParams::from_scales(&integer_scales(&t, cell_clip)?),
        }
    };
    ctx.store(&data)
}

/// Refuses operand lists TFLM micro does not run: other than 24 inputs
/// and one output, or with peephole, projection or layer-norm inputs.
fn check_operands(ctx: &PrepareContext<'_, '_, '_>) -> Result<(), KernelError> {
    if ctx.input_count() != INPUT_COUNT {
        return Err(KernelError::UnsupportedParameter {
            what: "UNIDIRECTIONAL_SEQUENCE_LSTM takes 24 inputs (optional ones -1)",
        });
    }
    if ctx.output_count() != 1 {
        return Err(KernelError::UnsupportedParameter {
            what: "UNIDIRECTIONAL_SEQUENCE_LSTM has one output",
        });
    }
    for position in PEEPHOLE.into_iter().chain(PROJECTION).chain(LAYER_NORM) {
        if ctx.optional_input(position).is_some() {
            return Err(KernelError::UnsupportedParameter {
                what: "LSTM peephole, projection and layer norm are not supported (as in TFLM)",
            });
        }
    }
    Ok(())
}

/// The tensors of one LSTM that prepare checks, per gate in tensor order.
struct Tensors<'m> {
    input: TensorInfo<'m>,
    input_weights: [TensorInfo<'m>; GATES],
    recurrent_weights: [TensorInfo<'m>; GATES],
    biases: [TensorInfo<'m>; GATES],
    hidden: TensorInfo<'m>,
    cell: TensorInfo<'m>,
    output: TensorInfo<'m>,
}

impl<'m> Tensors<'m> {
    /// The operator's tensors, the two states checked to be variable.
    fn read(ctx: &PrepareContext<'_, 'm, '_>) -> Result<Self, KernelError> {
        let t = Tensors {
            input: ctx.input(INPUT)?,
            input_weights: [
                ctx.input(INPUT_WEIGHTS)?,
                ctx.input(INPUT_WEIGHTS + 1)?,
                ctx.input(INPUT_WEIGHTS + 2)?,
                ctx.input(INPUT_WEIGHTS + 3)?,
            ],
            recurrent_weights: [
                ctx.input(RECURRENT_WEIGHTS)?,
                ctx.input(RECURRENT_WEIGHTS + 1)?,
                ctx.input(RECURRENT_WEIGHTS + 2)?,
                ctx.input(RECURRENT_WEIGHTS + 3)?,
            ],
            biases: [
                ctx.input(BIASES)?,
                ctx.input(BIASES + 1)?,
                ctx.input(BIASES + 2)?,
                ctx.input(BIASES + 3)?,
            ],
            hidden: ctx.input(HIDDEN_STATE)?,
            cell: ctx.input(CELL_STATE)?,
            output: ctx.output(0)?,
        };
        for (state, position) in [(&t.hidden, HIDDEN_STATE), (&t.cell, CELL_STATE)] {
            if !state.is_variable || state.constant.is_some() {
                return Err(KernelError::NotVariable {
                    position: position as u32,
                });
            }
        }
        Ok(t)
    }
}

/// The sizes, every tensor's shape checked against them, as TFLM's
/// `CreateLstmSizeInfo` and `ValidateTensorSize`.
fn checked_shape(t: &Tensors<'_>, time_major: bool) -> Result<LstmShape, KernelError> {
    let in_dims = dims_of_rank(&t.input, 3)?;
    let (batch, time_steps) = if time_major {
        (in_dims.get(1), in_dims.get(0))
    } else {
        (in_dims.get(0), in_dims.get(1))
    };
    let input_size = in_dims.get(2);
    let state_size = dims_of_rank(&t.hidden, 2)?.get(1);
    for w in &t.input_weights {
        if dims_of_rank(w, 2)?.as_slice() != [state_size, input_size] {
            return Err(shape_error(w));
        }
    }
    for w in &t.recurrent_weights {
        if dims_of_rank(w, 2)?.as_slice() != [state_size, state_size] {
            return Err(shape_error(w));
        }
    }
    for b in &t.biases {
        if dims_of_rank(b, 1)?.get(0) != state_size {
            return Err(shape_error(b));
        }
    }
    let state_elements = batch as usize * state_size as usize;
    if Dims::of(&t.hidden)?.elements() != state_elements {
        return Err(shape_error(&t.hidden));
    }
    if Dims::of(&t.cell)?.elements() != state_elements {
        return Err(shape_error(&t.cell));
    }
    let out_dims = dims_of_rank(&t.output, 3)?;
    if out_dims.as_slice() != [in_dims.get(0), in_dims.get(1), state_size] {
        return Err(shape_error(&t.output));
    }
    Ok(LstmShape {
        batch: batch as u32,
        time_steps: time_steps as u32,
        input_size: input_size as u32,
        state_size: state_size as u32,
        time_major: u32::from(time_major),
    })
}

/// The tensors' types: the hidden state feeds the recurrent FCs, so it has
/// the input's type; so has the output. All weights share one type, all
/// biases another.
fn check_types(t: &Tensors<'_>) -> Result<(), KernelError> {
    expect_type(&t.hidden, &[t.input.dtype])?;
    expect_type(&t.output, &[t.input.dtype])?;
    let (weight_type, bias_type, cell_type) = match t.input.dtype {
        TensorType::FLOAT32 => (
            TensorType::FLOAT32,
            TensorType::FLOAT32,
            TensorType::FLOAT32,
        ),
        TensorType::INT8 => (TensorType::INT8, TensorType::INT32, TensorType::INT16),
        other => {
            return Err(KernelError::UnsupportedType {
                tensor: t.input.index,
                dtype: other.0,
            });
        }
    };
    for w in t.input_weights.iter().chain(&t.recurrent_weights) {
        expect_type(w, &[weight_type])?;
    }
    for b in &t.biases {
        expect_type(b, &[bias_type])?;
    }
    expect_type(&t.cell, &[cell_type])
}

/// The integer path's scales and zero points, per tensor (and checked
/// positive where TFLM divides by them).
fn integer_scales(t: &Tensors<'_>, cell_clip: f32) -> Result<LstmScales, KernelError> {
    let mut w_in = [(0.0, 0); GATES];
    let mut w_rec = [(0.0, 0); GATES];
    for g in 0..GATES {
        w_in[g] = per_tensor(&t.input_weights[g])?;
        w_rec[g] = per_tensor(&t.recurrent_weights[g])?;
    }
    let scales = LstmScales {
        input: per_tensor(&t.input)?,
        hidden: per_tensor(&t.hidden)?,
        cell: per_tensor(&t.cell)?.0,
        input_weights: w_in,
        recurrent_weights: w_rec,
        cell_clip,
    };
    if !(scales.input.0 > 0.0 && scales.hidden.0 > 0.0 && scales.cell > 0.0) {
        return Err(KernelError::UnsupportedParameter {
            what: "LSTM scales must be positive",
        });
    }
    Ok(scales)
}

fn gate_inputs<'i, T: bytemuck::Pod>(
    ctx: &InvokeContext<'i, '_>,
    first: usize,
) -> Result<[&'i [T]; GATES], KernelError> {
    Ok([
        ctx.input(first)?.values()?,
        ctx.input(first + 1)?.values()?,
        ctx.input(first + 2)?.values()?,
        ctx.input(first + 3)?.values()?,
    ])
}

fn invoke(ctx: &InvokeContext<'_, '_>) -> Result<(), KernelError> {
    let data: OpData = *ctx.op_data()?;
    let input = ctx.input(INPUT)?;
    let hidden = ctx.variable(HIDDEN_STATE)?;
    let cell = ctx.variable(CELL_STATE)?;
    let output = ctx.output(0)?;
    match data.kind {
        KIND_INT8 => {
            let weights = LstmWeights {
                input: gate_inputs(ctx, INPUT_WEIGHTS)?,
                recurrent: gate_inputs(ctx, RECURRENT_WEIGHTS)?,
                bias: gate_inputs(ctx, BIASES)?,
            };
            eval_integer(
                &data.shape,
                &data.quant,
                &weights,
                input.values()?,
                hidden.values()?,
                cell.values()?,
                output.values()?,
            )
        }
        KIND_FLOAT => {
            let weights = LstmWeights {
                input: gate_inputs(ctx, INPUT_WEIGHTS)?,
                recurrent: gate_inputs(ctx, RECURRENT_WEIGHTS)?,
                bias: gate_inputs(ctx, BIASES)?,
            };
            eval_float(
                &data.shape,
                data.cell_clip,
                &weights,
                input.values()?,
                hidden.values()?,
                cell.values()?,
                output.values()?,
            )
        }
        _ => Err(KernelError::Internal),
    }
}
