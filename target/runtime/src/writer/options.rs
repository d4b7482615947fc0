//! The builtin options an operator can carry, as callers of the writer
//! state them.
//!
//! Kept apart from the writer itself: this is the vocabulary tests and
//! examples build operators with (one variant per TFLite options table
//! hilt's kernels read), while `option_tables` is how each variant is laid
//! out in the flatbuffer. Neither needs the other's details to be read.

use alloc::vec::Vec;

use crate::schema as fb;

/// Builtin options of an operator.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Options {
    /// No options table.
    None,
    /// FULLY_CONNECTED.
    FullyConnected {
        /// Fused activation.
        activation: fb::ActivationFunctionType,
        /// Keep the input's leading dimensions.
        keep_num_dims: bool,
    },
    /// CONV_2D.
    Conv2D {
        /// Padding.
        padding: fb::Padding,
        /// Strides (w, h).
        stride: (i32, i32),
        /// Dilations (w, h).
        dilation: (i32, i32),
        /// Fused activation.
        activation: fb::ActivationFunctionType,
    },
    /// TRANSPOSE_CONV.
    TransposeConv {
        /// Padding.
        padding: fb::Padding,
        /// Strides (w, h).
        stride: (i32, i32),
        /// Fused activation.
        activation: fb::ActivationFunctionType,
    },
    /// RESIZE_NEAREST_NEIGHBOR.
    ResizeNearestNeighbor {
        /// Corner pixels of input and output aligned.
        align_corners: bool,
        /// Pixel centres at half-integer coordinates.
        half_pixel_centers: bool,
    },
    /// DEPTHWISE_CONV_2D.
    DepthwiseConv2D {
        /// Padding.
        padding: fb::Padding,
        /// Strides (w, h).
        stride: (i32, i32),
        /// Dilations (w, h).
        dilation: (i32, i32),
        /// Output channels per input channel.
        depth_multiplier: i32,
        /// Fused activation.
        activation: fb::ActivationFunctionType,
    },
    /// AVERAGE_POOL_2D / MAX_POOL_2D.
    Pool2D {
        /// Padding.
        padding: fb::Padding,
        /// Strides (w, h).
        stride: (i32, i32),
        /// Filter (w, h).
        filter: (i32, i32),
        /// Fused activation.
        activation: fb::ActivationFunctionType,
    },
    /// ADD.
    Add {
        /// Fused activation.
        activation: fb::ActivationFunctionType,
    },
    /// MUL.
    Mul {
        /// Fused activation.
        activation: fb::ActivationFunctionType,
    },
    /// SUB.
    Sub {
        /// Fused activation.
        activation: fb::ActivationFunctionType,
    },
    /// DIV.
    Div {
        /// Fused activation.
        activation: fb::ActivationFunctionType,
    },
    /// L2_NORMALIZATION.
    L2Norm {
        /// Fused activation (TFLM takes only NONE).
        activation: fb::ActivationFunctionType,
    },
    /// LEAKY_RELU.
    LeakyRelu {
        /// Slope below zero.
        alpha: f32,
    },
    /// STRIDED_SLICE.
    StridedSlice {
        /// Axes whose begin is ignored (the axis start).
        begin_mask: i32,
        /// Axes whose end is ignored (the axis end).
        end_mask: i32,
        /// Axes removed from the output (one element taken).
        shrink_axis_mask: i32,
        /// Ellipsis axes (TFLM sets them aside; hilt refuses them).
        ellipsis_mask: i32,
        /// New axes (TFLM sets them aside; hilt refuses them).
        new_axis_mask: i32,
    },
    /// CONCATENATION.
    Concatenation {
        /// Axis (negative counts from the end).
        axis: i32,
        /// Fused activation.
        activation: fb::ActivationFunctionType,
    },
    /// BATCH_MATMUL.
    BatchMatMul {
        /// Transpose the left operand's last two axes.
        adj_x: bool,
        /// Transpose the right operand's last two axes.
        adj_y: bool,
    },
    /// MEAN and other reductions.
    Reducer {
        /// Keep reduced dimensions as size 1.
        keep_dims: bool,
    },
    /// ARG_MAX.
    ArgMax {
        /// The index type the output holds.
        output_type: fb::TensorType,
    },
    /// ARG_MIN.
    ArgMin {
        /// The index type the output holds.
        output_type: fb::TensorType,
    },
    /// CUMSUM.
    Cumsum {
        /// Each output sums the elements before it, not up to it.
        exclusive: bool,
        /// Sum from the axis' end.
        reverse: bool,
    },
    /// SOFTMAX.
    Softmax {
        /// Inverse temperature.
        beta: f32,
    },
    /// RESHAPE.
    Reshape {
        /// Target shape.
        new_shape: Vec<i32>,
    },
    /// SVDF.
    Svdf {
        /// Rank.
        rank: i32,
        /// Fused activation.
        activation: fb::ActivationFunctionType,
    },
    /// UNIDIRECTIONAL_SEQUENCE_LSTM.
    UnidirectionalSequenceLstm {
        /// The cell gate's activation (and the hidden state's), usually TANH.
        activation: fb::ActivationFunctionType,
        /// Cell state clip (0 = none).
        cell_clip: f32,
        /// Projection clip (0 = none).
        proj_clip: f32,
        /// Input is `[time, batch, features]` rather than `[batch, time, features]`.
        time_major: bool,
    },
    /// SQUEEZE.
    Squeeze {
        /// Axes to drop (all size-1 axes when empty).
        squeeze_dims: Vec<i32>,
    },
    /// SHAPE.
    Shape {
        /// Output element type (INT32 or INT64).
        out_type: fb::TensorType,
    },
    /// MIRROR_PAD.
    MirrorPad {
        /// REFLECT (edge not repeated) or SYMMETRIC (edge repeated).
        mode: fb::MirrorPadMode,
    },
    /// PACK.
    Pack {
        /// Number of inputs.
        values_count: i32,
        /// New axis (negative counts from the end of the output).
        axis: i32,
    },
    /// UNPACK.
    Unpack {
        /// Number of outputs.
        num: i32,
        /// Axis removed (negative counts from the end).
        axis: i32,
    },
    /// GATHER.
    Gather {
        /// Axis of the params indexed.
        axis: i32,
        /// Leading dimensions shared by params and indices.
        batch_dims: i32,
    },
    /// SPACE_TO_DEPTH and DEPTH_TO_SPACE.
    BlockSize {
        /// Which of the two ops the table is for.
        depth_to_space: bool,
        /// Block edge.
        block_size: i32,
    },
    /// RESIZE_BILINEAR.
    ResizeBilinear {
        /// Corner pixels of input and output aligned.
        align_corners: bool,
        /// Pixel centres at half-integer coordinates.
        half_pixel_centers: bool,
    },
}
