//! How each [`Options`] variant becomes a TFLite builtin-options table.
//!
//! One function per family of operators, so that adding an option means
//! reading a page about its neighbours rather than one match over every
//! table the schema has. [`builtin_options`] is the only entry: it routes
//! each variant to its family, and its match is exhaustive, so a new
//! variant does not compile until it has a family.
//!
//! The builder calls each table makes (and their order) decide the model's
//! bytes, which the committed example models pin: a family function
//! creates exactly the vectors and the table its variant needs, in the
//! order they are listed.

use flatbuffers::{FlatBufferBuilder, UnionWIPOffset, WIPOffset};

use super::options::Options;
use crate::schema as fb;

/// An operator's `builtin_options_type` and its table (`None`: no table).
pub(super) type OptionsTable = (fb::BuiltinOptions, Option<WIPOffset<UnionWIPOffset>>);

/// Writes the options table of `options` into `b`.
pub(super) fn builtin_options(b: &mut FlatBufferBuilder<'_>, options: &Options) -> OptionsTable {
    match options {
        Options::None => (fb::BuiltinOptions::NONE, None),
        Options::Conv2D { .. }
        | Options::DepthwiseConv2D { .. }
        | Options::TransposeConv { .. }
        | Options::Pool2D { .. } => spatial_options(b, options),
        Options::Add { .. }
        | Options::Mul { .. }
        | Options::Sub { .. }
        | Options::Div { .. }
        | Options::L2Norm { .. }
        | Options::LeakyRelu { .. }
        | Options::Softmax { .. } => elementwise_options(b, options),
        Options::FullyConnected { .. }
        | Options::BatchMatMul { .. }
        | Options::Svdf { .. }
        | Options::UnidirectionalSequenceLstm { .. } => matrix_and_sequence_options(b, options),
        Options::Reducer { .. }
        | Options::ArgMax { .. }
        | Options::ArgMin { .. }
        | Options::Cumsum { .. } => reduction_options(b, options),
        Options::Reshape { .. }
        | Options::Squeeze { .. }
        | Options::Shape { .. }
        | Options::Pack { .. }
        | Options::Unpack { .. }
        | Options::Concatenation { .. }
        | Options::StridedSlice { .. } => reshaping_options(b, options),
        Options::MirrorPad { .. }
        | Options::Gather { .. }
        | Options::BlockSize { .. }
        | Options::ResizeBilinear { .. }
        | Options::ResizeNearestNeighbor { .. } => data_movement_options(b, options),
    }
}

/// CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV and the 2-D pools: the ops
/// that slide a window with padding and strides.
fn spatial_options(b: &mut FlatBufferBuilder<'_>, options: &Options) -> OptionsTable {
    use fb::BuiltinOptions as K;
    match options {
        Options::Conv2D {
            padding,
            stride,
            dilation,
            activation,
        } => {
            let args = fb::Conv2DOptionsArgs {
                padding: *padding,
                stride_w: stride.0,
                stride_h: stride.1,
                fused_activation_function: *activation,
                dilation_w_factor: dilation.0,
                dilation_h_factor: dilation.1,
            };
            let t = fb::Conv2DOptions::create(b, &args);
            (K::Conv2DOptions, Some(t.as_union_value()))
        }
        Options::DepthwiseConv2D {
            padding,
            stride,
            dilation,
            depth_multiplier,
            activation,
        } => {
            let args = fb::DepthwiseConv2DOptionsArgs {
                padding: *padding,
                stride_w: stride.0,
                stride_h: stride.1,
                depth_multiplier: *depth_multiplier,
                fused_activation_function: *activation,
                dilation_w_factor: dilation.0,
                dilation_h_factor: dilation.1,
            };
            let t = fb::DepthwiseConv2DOptions::create(b, &args);
            (K::DepthwiseConv2DOptions, Some(t.as_union_value()))
        }
        Options::TransposeConv {
            padding,
            stride,
            activation,
        } => {
            let args = fb::TransposeConvOptionsArgs {
                padding: *padding,
                stride_w: stride.0,
                stride_h: stride.1,
                fused_activation_function: *activation,
                ..Default::default()
            };
            let t = fb::TransposeConvOptions::create(b, &args);
            (K::TransposeConvOptions, Some(t.as_union_value()))
        }
        Options::Pool2D {
            padding,
            stride,
            filter,
            activation,
        } => {
            let args = fb::Pool2DOptionsArgs {
                padding: *padding,
                stride_w: stride.0,
                stride_h: stride.1,
                filter_width: filter.0,
                filter_height: filter.1,
                fused_activation_function: *activation,
            };
            let t = fb::Pool2DOptions::create(b, &args);
            (K::Pool2DOptions, Some(t.as_union_value()))
        }
        _ => unreachable!("builtin_options routes only windowed ops here"),
    }
}

/// The element-wise arithmetic and activation ops whose tables hold a
/// fused activation or one scalar.
fn elementwise_options(b: &mut FlatBufferBuilder<'_>, options: &Options) -> OptionsTable {
    use fb::BuiltinOptions as K;
    match options {
        Options::Add { activation } => {
            let args = fb::AddOptionsArgs {
                fused_activation_function: *activation,
                pot_scale_int16: true,
            };
            let t = fb::AddOptions::create(b, &args);
            (K::AddOptions, Some(t.as_union_value()))
        }
        Options::Mul { activation } => {
            let args = fb::MulOptionsArgs {
                fused_activation_function: *activation,
            };
            let t = fb::MulOptions::create(b, &args);
            (K::MulOptions, Some(t.as_union_value()))
        }
        Options::Sub { activation } => {
            let args = fb::SubOptionsArgs {
                fused_activation_function: *activation,
                pot_scale_int16: true,
            };
            let t = fb::SubOptions::create(b, &args);
            (K::SubOptions, Some(t.as_union_value()))
        }
        Options::Div { activation } => {
            let args = fb::DivOptionsArgs {
                fused_activation_function: *activation,
            };
            let t = fb::DivOptions::create(b, &args);
            (K::DivOptions, Some(t.as_union_value()))
        }
        Options::L2Norm { activation } => {
            let args = fb::L2NormOptionsArgs {
                fused_activation_function: *activation,
            };
            let t = fb::L2NormOptions::create(b, &args);
            (K::L2NormOptions, Some(t.as_union_value()))
        }
        Options::LeakyRelu { alpha } => {
            let args = fb::LeakyReluOptionsArgs { alpha: *alpha };
            let t = fb::LeakyReluOptions::create(b, &args);
            (K::LeakyReluOptions, Some(t.as_union_value()))
        }
        Options::Softmax { beta } => {
            let args = fb::SoftmaxOptionsArgs { beta: *beta };
            let t = fb::SoftmaxOptions::create(b, &args);
            (K::SoftmaxOptions, Some(t.as_union_value()))
        }
        _ => unreachable!("builtin_options routes only element-wise ops here"),
    }
}

/// FULLY_CONNECTED and BATCH_MATMUL, and the recurrent ops built on them
/// (SVDF, UNIDIRECTIONAL_SEQUENCE_LSTM).
fn matrix_and_sequence_options(b: &mut FlatBufferBuilder<'_>, options: &Options) -> OptionsTable {
    use fb::BuiltinOptions as K;
    match options {
        Options::FullyConnected {
            activation,
            keep_num_dims,
        } => {
            let args = fb::FullyConnectedOptionsArgs {
                fused_activation_function: *activation,
                keep_num_dims: *keep_num_dims,
                ..Default::default()
            };
            let t = fb::FullyConnectedOptions::create(b, &args);
            (K::FullyConnectedOptions, Some(t.as_union_value()))
        }
        Options::BatchMatMul { adj_x, adj_y } => {
            let args = fb::BatchMatMulOptionsArgs {
                adj_x: *adj_x,
                adj_y: *adj_y,
                asymmetric_quantize_inputs: false,
            };
            let t = fb::BatchMatMulOptions::create(b, &args);
            (K::BatchMatMulOptions, Some(t.as_union_value()))
        }
        Options::Svdf { rank, activation } => {
            let args = fb::SVDFOptionsArgs {
                rank: *rank,
                fused_activation_function: *activation,
                asymmetric_quantize_inputs: false,
            };
            let t = fb::SVDFOptions::create(b, &args);
            (K::SVDFOptions, Some(t.as_union_value()))
        }
        Options::UnidirectionalSequenceLstm {
            activation,
            cell_clip,
            proj_clip,
            time_major,
        } => {
            let args = fb::UnidirectionalSequenceLSTMOptionsArgs {
                fused_activation_function: *activation,
                cell_clip: *cell_clip,
                proj_clip: *proj_clip,
                time_major: *time_major,
                asymmetric_quantize_inputs: false,
                diagonal_recurrent_tensors: false,
            };
            let t = fb::UnidirectionalSequenceLSTMOptions::create(b, &args);
            (
                K::UnidirectionalSequenceLSTMOptions,
                Some(t.as_union_value()),
            )
        }
        _ => unreachable!("builtin_options routes only matrix and sequence ops here"),
    }
}

/// The reductions and scans: MEAN and its kin, ARG_MAX, ARG_MIN, CUMSUM.
fn reduction_options(b: &mut FlatBufferBuilder<'_>, options: &Options) -> OptionsTable {
    use fb::BuiltinOptions as K;
    match options {
        Options::Reducer { keep_dims } => {
            let args = fb::ReducerOptionsArgs {
                keep_dims: *keep_dims,
            };
            let t = fb::ReducerOptions::create(b, &args);
            (K::ReducerOptions, Some(t.as_union_value()))
        }
        Options::ArgMax { output_type } => {
            let args = fb::ArgMaxOptionsArgs {
                output_type: *output_type,
            };
            let t = fb::ArgMaxOptions::create(b, &args);
            (K::ArgMaxOptions, Some(t.as_union_value()))
        }
        Options::ArgMin { output_type } => {
            let args = fb::ArgMinOptionsArgs {
                output_type: *output_type,
            };
            let t = fb::ArgMinOptions::create(b, &args);
            (K::ArgMinOptions, Some(t.as_union_value()))
        }
        Options::Cumsum { exclusive, reverse } => {
            let args = fb::CumsumOptionsArgs {
                exclusive: *exclusive,
                reverse: *reverse,
            };
            let t = fb::CumsumOptions::create(b, &args);
            (K::CumsumOptions, Some(t.as_union_value()))
        }
        _ => unreachable!("builtin_options routes only reductions here"),
    }
}

/// The ops that change a tensor's shape or split and join tensors without
/// moving elements within an axis: RESHAPE, SQUEEZE, SHAPE, PACK, UNPACK,
/// CONCATENATION, STRIDED_SLICE.
fn reshaping_options(b: &mut FlatBufferBuilder<'_>, options: &Options) -> OptionsTable {
    use fb::BuiltinOptions as K;
    match options {
        Options::Reshape { new_shape } => {
            let new_shape = Some(b.create_vector(new_shape));
            let t = fb::ReshapeOptions::create(b, &fb::ReshapeOptionsArgs { new_shape });
            (K::ReshapeOptions, Some(t.as_union_value()))
        }
        Options::Squeeze { squeeze_dims } => {
            let squeeze_dims = Some(b.create_vector(squeeze_dims));
            let t = fb::SqueezeOptions::create(b, &fb::SqueezeOptionsArgs { squeeze_dims });
            (K::SqueezeOptions, Some(t.as_union_value()))
        }
        Options::Shape { out_type } => {
            let args = fb::ShapeOptionsArgs {
                out_type: *out_type,
            };
            let t = fb::ShapeOptions::create(b, &args);
            (K::ShapeOptions, Some(t.as_union_value()))
        }
        Options::Pack { values_count, axis } => {
            let args = fb::PackOptionsArgs {
                values_count: *values_count,
                axis: *axis,
            };
            let t = fb::PackOptions::create(b, &args);
            (K::PackOptions, Some(t.as_union_value()))
        }
        Options::Unpack { num, axis } => {
            let args = fb::UnpackOptionsArgs {
                num: *num,
                axis: *axis,
            };
            let t = fb::UnpackOptions::create(b, &args);
            (K::UnpackOptions, Some(t.as_union_value()))
        }
        Options::Concatenation { axis, activation } => {
            let args = fb::ConcatenationOptionsArgs {
                axis: *axis,
                fused_activation_function: *activation,
            };
            let t = fb::ConcatenationOptions::create(b, &args);
            (K::ConcatenationOptions, Some(t.as_union_value()))
        }
        Options::StridedSlice {
            begin_mask,
            end_mask,
            shrink_axis_mask,
            ellipsis_mask,
            new_axis_mask,
        } => {
            let args = fb::StridedSliceOptionsArgs {
                begin_mask: *begin_mask,
                end_mask: *end_mask,
                ellipsis_mask: *ellipsis_mask,
                new_axis_mask: *new_axis_mask,
                shrink_axis_mask: *shrink_axis_mask,
                offset: false,
            };
            let t = fb::StridedSliceOptions::create(b, &args);
            (K::StridedSliceOptions, Some(t.as_union_value()))
        }
        _ => unreachable!("builtin_options routes only reshaping ops here"),
    }
}

/// The ops that move elements to new positions: MIRROR_PAD, GATHER,
/// SPACE_TO_DEPTH / DEPTH_TO_SPACE and the two resizes.
fn data_movement_options(b: &mut FlatBufferBuilder<'_>, options: &Options) -> OptionsTable {
    use fb::BuiltinOptions as K;
    match options {
        Options::MirrorPad { mode } => {
            let t = fb::MirrorPadOptions::create(b, &fb::MirrorPadOptionsArgs { mode: *mode });
            (K::MirrorPadOptions, Some(t.as_union_value()))
        }
        Options::Gather { axis, batch_dims } => {
            let args = fb::GatherOptionsArgs {
                axis: *axis,
                batch_dims: *batch_dims,
            };
            let t = fb::GatherOptions::create(b, &args);
            (K::GatherOptions, Some(t.as_union_value()))
        }
        Options::BlockSize {
            depth_to_space: true,
            block_size,
        } => {
            let args = fb::DepthToSpaceOptionsArgs {
                block_size: *block_size,
            };
            let t = fb::DepthToSpaceOptions::create(b, &args);
            (K::DepthToSpaceOptions, Some(t.as_union_value()))
        }
        Options::BlockSize { block_size, .. } => {
            let args = fb::SpaceToDepthOptionsArgs {
                block_size: *block_size,
            };
            let t = fb::SpaceToDepthOptions::create(b, &args);
            (K::SpaceToDepthOptions, Some(t.as_union_value()))
        }
        Options::ResizeBilinear {
            align_corners,
            half_pixel_centers,
        } => {
            let args = fb::ResizeBilinearOptionsArgs {
                align_corners: *align_corners,
                half_pixel_centers: *half_pixel_centers,
            };
            let t = fb::ResizeBilinearOptions::create(b, &args);
            (K::ResizeBilinearOptions, Some(t.as_union_value()))
        }
        Options::ResizeNearestNeighbor {
            align_corners,
            half_pixel_centers,
        } => {
            let args = fb::ResizeNearestNeighborOptionsArgs {
                align_corners: *align_corners,
                half_pixel_centers: *half_pixel_centers,
            };
            let t = fb::ResizeNearestNeighborOptions::create(b, &args);
            (K::ResizeNearestNeighborOptions, Some(t.as_union_value()))
        }
        _ => unreachable!("builtin_options routes only data-movement ops here"),
    }
}
