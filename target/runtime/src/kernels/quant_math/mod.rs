//! The integer arithmetic of the int8 conv-like kernels (FULLY_CONNECTED,
//! CONV_2D and DEPTHWISE_CONV_2D; the int16 convolutions share its stored
//! shifts): the per-channel requantisation data computed once at prepare,
//! and the inner products the kernels spend their time in.
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
//!
//! Named for what it holds, arithmetic and no operator: `quantize` is the
//! QUANTIZE operator, and `fixed_point` holds TFLM's reference scalar
//! routines, which the faster forms here are tested against. One file per
//! stage: `channel_params` (prepare: checks the quantisation, stores the
//! multipliers), `requant` (invoke: an accumulator to an int8 output),
//! `matvec` (a requantised row of a matrix product) and `dot` (the inner
//! products, with the SSE2 variant beside the portable one; the Arm DSP
//! variants are `gemm`'s blocks, chosen by `cfg` where they are called).

mod channel_params;
mod dot;
mod matvec;
mod requant;

pub use channel_params::{
    ChannelParams, ChannelSetup, ScaleRule, bias_values, check_activation, fold_bias, output_stage,
    prepare_channels,
};
pub use dot::{dot_i16, dot_offset, dot4, dot4_i16, dot4_i16_portable, dot4_portable, sum};
pub use matvec::{matvec, matvec_uniform};
pub use requant::{
    ChannelRequant, NARROW, OutputStage, Requant, ScaleForm, scale, scale_narrow,
    scale_one_rounding, scale_parts, scale_parts_narrow, scale_parts_wide, shift_fields,
    shift_parts,
};
