//! A `.tflite` writer for tests and host tools (feature `writer`, needs `alloc`).
//!
//! The project's own tests build the graphs they need with it instead of
//! depending on files nobody here wrote. Output is an ordinary TFLite model:
//! TensorFlow's own tools read it.
//!
//! ```
//! use hilt_runtime::model::Model;
//! use hilt_runtime::schema::{BuiltinOperator, TensorType};
//! use hilt_runtime::writer::{ModelWriter, Options};
//!
//! let mut w = ModelWriter::new();
//! let x = w.input("x", TensorType::FLOAT32, &[1, 4]);
//! let y = w.output("y", TensorType::FLOAT32, &[1, 4]);
//! w.op(BuiltinOperator::RELU, &[Some(x)], &[y], Options::None);
//! let bytes = w.finish();
//! let model = Model::from_bytes(&bytes).unwrap();
//! assert_eq!(model.operator_count(), 1);
//! ```

pub mod examples;
pub mod offline_plan;

use alloc::string::String;
use alloc::vec::Vec;

use flatbuffers::{FlatBufferBuilder, WIPOffset};

use crate::planner::OFFLINE_PLAN_METADATA;
use crate::schema as fb;

/// A tensor of the model being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorId(pub u32);

/// Quantisation parameters: one scale/zero point, or one per channel.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantization {
    /// Scales.
    pub scale: Vec<f32>,
    /// Zero points.
    pub zero_point: Vec<i64>,
    /// The channel axis for per-channel parameters.
    pub quantized_dimension: i32,
}

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

#[derive(Debug, Clone)]
struct TensorDef {
    name: String,
    dtype: fb::TensorType,
    shape: Vec<i32>,
    buffer: u32,
    quantization: Option<Quantization>,
    is_variable: bool,
}

#[derive(Debug, Clone)]
struct OpDef {
    opcode: u32,
    inputs: Vec<i32>,
    outputs: Vec<i32>,
    options: Options,
}

/// Accumulates tensors, operators and metadata, then writes the flatbuffer.
#[derive(Debug, Clone)]
pub struct ModelWriter {
    tensors: Vec<TensorDef>,
    /// Buffer 0 is the empty sentinel every TFLite model starts with.
    buffers: Vec<Vec<u8>>,
    opcodes: Vec<(i32, i32)>,
    /// Custom code per opcode entry (`None` for builtins), parallel to `opcodes`.
    custom_codes: Vec<Option<String>>,
    ops: Vec<OpDef>,
    inputs: Vec<i32>,
    outputs: Vec<i32>,
    metadata: Vec<(String, u32)>,
    description: String,
}

impl Default for ModelWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl ModelWriter {
    /// An empty model.
    pub fn new() -> Self {
        ModelWriter {
            tensors: Vec::new(),
            buffers: alloc::vec![Vec::new()],
            opcodes: Vec::new(),
            custom_codes: Vec::new(),
            ops: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            metadata: Vec::new(),
            description: String::from("written by hilt-runtime's model writer"),
        }
    }

    fn push_tensor(
        &mut self,
        name: &str,
        dtype: fb::TensorType,
        shape: &[i32],
        buffer: u32,
    ) -> TensorId {
        self.tensors.push(TensorDef {
            name: name.into(),
            dtype,
            shape: shape.into(),
            buffer,
            quantization: None,
            is_variable: false,
        });
        TensorId(self.tensors.len() as u32 - 1)
    }

    /// An activation tensor (no data).
    pub fn tensor(&mut self, name: &str, dtype: fb::TensorType, shape: &[i32]) -> TensorId {
        self.push_tensor(name, dtype, shape, 0)
    }

    /// An activation tensor that is also a model input.
    pub fn input(&mut self, name: &str, dtype: fb::TensorType, shape: &[i32]) -> TensorId {
        let t = self.tensor(name, dtype, shape);
        self.inputs.push(t.0 as i32);
        t
    }

    /// An activation tensor that is also a model output.
    pub fn output(&mut self, name: &str, dtype: fb::TensorType, shape: &[i32]) -> TensorId {
        let t = self.tensor(name, dtype, shape);
        self.outputs.push(t.0 as i32);
        t
    }

    /// A constant tensor with `data` (little-endian bytes).
    pub fn constant(
        &mut self,
        name: &str,
        dtype: fb::TensorType,
        shape: &[i32],
        data: &[u8],
    ) -> TensorId {
        self.buffers.push(data.into());
        let buffer = self.buffers.len() as u32 - 1;
        self.push_tensor(name, dtype, shape, buffer)
    }

    /// A variable tensor (state kept between invocations).
    pub fn variable(&mut self, name: &str, dtype: fb::TensorType, shape: &[i32]) -> TensorId {
        let t = self.tensor(name, dtype, shape);
        self.tensors[t.0 as usize].is_variable = true;
        t
    }

    /// Sets per-tensor quantisation (one scale and zero point).
    pub fn quantize(&mut self, t: TensorId, scale: f32, zero_point: i64) -> &mut Self {
        self.quantize_per_channel(t, &[scale], &[zero_point], 0)
    }

    /// Sets per-channel quantisation along `axis`.
    pub fn quantize_per_channel(
        &mut self,
        t: TensorId,
        scale: &[f32],
        zero_point: &[i64],
        axis: i32,
    ) -> &mut Self {
        self.tensors[t.0 as usize].quantization = Some(Quantization {
            scale: scale.into(),
            zero_point: zero_point.into(),
            quantized_dimension: axis,
        });
        self
    }

    /// Marks an existing tensor as a model input.
    pub fn mark_input(&mut self, t: TensorId) -> &mut Self {
        self.inputs.push(t.0 as i32);
        self
    }

    /// Marks an existing tensor as a model output.
    pub fn mark_output(&mut self, t: TensorId) -> &mut Self {
        self.outputs.push(t.0 as i32);
        self
    }

    /// Appends an operator; `None` inputs are omitted optional inputs (-1).
    pub fn op(
        &mut self,
        code: fb::BuiltinOperator,
        inputs: &[Option<TensorId>],
        outputs: &[TensorId],
        options: Options,
    ) -> &mut Self {
        let opcode = match self
            .opcodes
            .iter()
            .zip(&self.custom_codes)
            .position(|(&(c, _), custom)| c == code.0 && custom.is_none())
        {
            Some(i) => i,
            None => {
                self.opcodes.push((code.0, 1));
                self.custom_codes.push(None);
                self.opcodes.len() - 1
            }
        } as u32;
        self.ops.push(OpDef {
            opcode,
            inputs: inputs
                .iter()
                .map(|t| t.map_or(-1, |t| t.0 as i32))
                .collect(),
            outputs: outputs.iter().map(|t| t.0 as i32).collect(),
            options,
        });
        self
    }

    /// Appends a `CUSTOM` operator named `name` (no custom options): how a
    /// vendor op (an NPU's command stream, say) appears in a model.
    pub fn custom_op(
        &mut self,
        name: &str,
        inputs: &[TensorId],
        outputs: &[TensorId],
    ) -> &mut Self {
        let opcode = match self
            .custom_codes
            .iter()
            .position(|c| c.as_deref() == Some(name))
        {
            Some(i) => i,
            None => {
                // The schema's BuiltinOperator::CUSTOM (32), outside hilt's subset.
                self.opcodes.push((32, 1));
                self.custom_codes.push(Some(name.into()));
                self.opcodes.len() - 1
            }
        } as u32;
        self.ops.push(OpDef {
            opcode,
            inputs: inputs.iter().map(|t| t.0 as i32).collect(),
            outputs: outputs.iter().map(|t| t.0 as i32).collect(),
            options: Options::None,
        });
        self
    }

    /// A tensor that claims buffer `buffer` whether or not it exists: for
    /// tests of the loader's checks.
    pub fn tensor_with_buffer(
        &mut self,
        name: &str,
        dtype: fb::TensorType,
        shape: &[i32],
        buffer: u32,
    ) -> TensorId {
        self.push_tensor(name, dtype, shape, buffer)
    }

    /// An operator with raw opcode and tensor indices, valid or not: for
    /// tests of the loader's checks.
    pub fn op_raw(&mut self, opcode_index: u32, inputs: &[i32], outputs: &[i32]) -> &mut Self {
        if self.opcodes.is_empty() {
            self.opcodes.push((fb::BuiltinOperator::ADD.0, 1));
            self.custom_codes.push(None);
        }
        self.ops.push(OpDef {
            opcode: opcode_index,
            inputs: inputs.into(),
            outputs: outputs.into(),
            options: Options::None,
        });
        self
    }

    /// Adds a metadata entry.
    pub fn metadata(&mut self, name: &str, data: &[u8]) -> &mut Self {
        self.buffers.push(data.into());
        self.metadata
            .push((name.into(), self.buffers.len() as u32 - 1));
        self
    }

    /// Adds TFLM's offline plan: one offset per tensor, -1 = plan at run time.
    pub fn offline_plan(&mut self, offsets: &[i32]) -> &mut Self {
        let bytes = offline_plan::offline_plan_bytes(1, offsets);
        self.metadata(OFFLINE_PLAN_METADATA, &bytes)
    }

    /// Number of tensors so far.
    pub fn tensor_count(&self) -> u32 {
        self.tensors.len() as u32
    }

    /// Writes the model.
    pub fn finish(&self) -> Vec<u8> {
        let mut b = FlatBufferBuilder::with_capacity(1024);
        let tensors: Vec<_> = self
            .tensors
            .iter()
            .map(|t| write_tensor(&mut b, t))
            .collect();
        let ops: Vec<_> = self.ops.iter().map(|op| write_op(&mut b, op)).collect();
        let tensors = b.create_vector(&tensors);
        let ops = b.create_vector(&ops);
        let inputs = b.create_vector(&self.inputs);
        let outputs = b.create_vector(&self.outputs);
        let name = b.create_string("main");
        let subgraph = fb::SubGraph::create(
            &mut b,
            &fb::SubGraphArgs {
                tensors: Some(tensors),
                inputs: Some(inputs),
                outputs: Some(outputs),
                operators: Some(ops),
                name: Some(name),
            },
        );
        let subgraphs = b.create_vector(&[subgraph]);
        let codes: Vec<_> = self
            .opcodes
            .iter()
            .zip(&self.custom_codes)
            .map(|(&(code, version), custom)| {
                let custom_code = custom.as_deref().map(|name| b.create_string(name));
                // Codes above 126 go in `builtin_code` only; the byte field then
                // holds the placeholder 127.
                let deprecated = if code < 127 { code as i8 } else { 127 };
                fb::OperatorCode::create(
                    &mut b,
                    &fb::OperatorCodeArgs {
                        deprecated_builtin_code: deprecated,
                        custom_code,
                        version,
                        builtin_code: fb::BuiltinOperator(code),
                    },
                )
            })
            .collect();
        let codes = b.create_vector(&codes);
        let buffers: Vec<_> = self
            .buffers
            .iter()
            .map(|data| {
                let data = if data.is_empty() {
                    None
                } else {
                    Some(b.create_vector(data))
                };
                fb::Buffer::create(
                    &mut b,
                    &fb::BufferArgs {
                        data,
                        offset: 0,
                        size: 0,
                    },
                )
            })
            .collect();
        let buffers = b.create_vector(&buffers);
        let metadata: Vec<_> = self
            .metadata
            .iter()
            .map(|(name, buffer)| {
                let name = b.create_string(name);
                fb::Metadata::create(
                    &mut b,
                    &fb::MetadataArgs {
                        name: Some(name),
                        buffer: *buffer,
                    },
                )
            })
            .collect();
        let metadata = b.create_vector(&metadata);
        let description = b.create_string(&self.description);
        let model = fb::Model::create(
            &mut b,
            &fb::ModelArgs {
                version: 3,
                operator_codes: Some(codes),
                subgraphs: Some(subgraphs),
                description: Some(description),
                buffers: Some(buffers),
                metadata_buffer: None,
                metadata: Some(metadata),
            },
        );
        fb::finish_model_buffer(&mut b, model);
        b.finished_data().to_vec()
    }
}

fn write_tensor<'b>(b: &mut FlatBufferBuilder<'b>, t: &TensorDef) -> WIPOffset<fb::Tensor<'b>> {
    let shape = b.create_vector(&t.shape);
    let name = b.create_string(&t.name);
    let quantization = t.quantization.as_ref().map(|q| {
        let scale = b.create_vector(&q.scale);
        let zero_point = b.create_vector(&q.zero_point);
        fb::QuantizationParameters::create(
            b,
            &fb::QuantizationParametersArgs {
                min: None,
                max: None,
                scale: Some(scale),
                zero_point: Some(zero_point),
                quantized_dimension: q.quantized_dimension,
            },
        )
    });
    fb::Tensor::create(
        b,
        &fb::TensorArgs {
            shape: Some(shape),
            type_: t.dtype,
            buffer: t.buffer,
            name: Some(name),
            quantization,
            is_variable: t.is_variable,
        },
    )
}

fn write_op<'b>(b: &mut FlatBufferBuilder<'b>, op: &OpDef) -> WIPOffset<fb::Operator<'b>> {
    use fb::BuiltinOptions as K;
    let (kind, options) = match &op.options {
        Options::None => (K::NONE, None),
        Options::FullyConnected {
            activation,
            keep_num_dims,
        } => {
            let args = fb::FullyConnectedOptionsArgs {
                fused_activation_function: *activation,
                keep_num_dims: *keep_num_dims,
                ..Default::default()
            };
            (
                K::FullyConnectedOptions,
                Some(fb::FullyConnectedOptions::create(b, &args).as_union_value()),
            )
        }
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
            (
                K::Conv2DOptions,
                Some(fb::Conv2DOptions::create(b, &args).as_union_value()),
            )
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
            (
                K::DepthwiseConv2DOptions,
                Some(fb::DepthwiseConv2DOptions::create(b, &args).as_union_value()),
            )
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
            (
                K::Pool2DOptions,
                Some(fb::Pool2DOptions::create(b, &args).as_union_value()),
            )
        }
        Options::Add { activation } => {
            let args = fb::AddOptionsArgs {
                fused_activation_function: *activation,
                pot_scale_int16: true,
            };
            (
                K::AddOptions,
                Some(fb::AddOptions::create(b, &args).as_union_value()),
            )
        }
        Options::Mul { activation } => {
            let args = fb::MulOptionsArgs {
                fused_activation_function: *activation,
            };
            (
                K::MulOptions,
                Some(fb::MulOptions::create(b, &args).as_union_value()),
            )
        }
        Options::Sub { activation } => {
            let args = fb::SubOptionsArgs {
                fused_activation_function: *activation,
                pot_scale_int16: true,
            };
            (
                K::SubOptions,
                Some(fb::SubOptions::create(b, &args).as_union_value()),
            )
        }
        Options::Div { activation } => {
            let args = fb::DivOptionsArgs {
                fused_activation_function: *activation,
            };
            (
                K::DivOptions,
                Some(fb::DivOptions::create(b, &args).as_union_value()),
            )
        }
        Options::L2Norm { activation } => {
            let args = fb::L2NormOptionsArgs {
                fused_activation_function: *activation,
            };
            (
                K::L2NormOptions,
                Some(fb::L2NormOptions::create(b, &args).as_union_value()),
            )
        }
        Options::LeakyRelu { alpha } => {
            let args = fb::LeakyReluOptionsArgs { alpha: *alpha };
            (
                K::LeakyReluOptions,
                Some(fb::LeakyReluOptions::create(b, &args).as_union_value()),
            )
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
            (
                K::StridedSliceOptions,
                Some(fb::StridedSliceOptions::create(b, &args).as_union_value()),
            )
        }
        Options::Concatenation { axis, activation } => {
            let args = fb::ConcatenationOptionsArgs {
                axis: *axis,
                fused_activation_function: *activation,
            };
            (
                K::ConcatenationOptions,
                Some(fb::ConcatenationOptions::create(b, &args).as_union_value()),
            )
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
            (
                K::TransposeConvOptions,
                Some(fb::TransposeConvOptions::create(b, &args).as_union_value()),
            )
        }
        Options::ResizeNearestNeighbor {
            align_corners,
            half_pixel_centers,
        } => {
            let args = fb::ResizeNearestNeighborOptionsArgs {
                align_corners: *align_corners,
                half_pixel_centers: *half_pixel_centers,
            };
            (
                K::ResizeNearestNeighborOptions,
                Some(fb::ResizeNearestNeighborOptions::create(b, &args).as_union_value()),
            )
        }
        Options::BatchMatMul { adj_x, adj_y } => {
            let args = fb::BatchMatMulOptionsArgs {
                adj_x: *adj_x,
                adj_y: *adj_y,
                asymmetric_quantize_inputs: false,
            };
            (
                K::BatchMatMulOptions,
                Some(fb::BatchMatMulOptions::create(b, &args).as_union_value()),
            )
        }
        Options::Reducer { keep_dims } => {
            let args = fb::ReducerOptionsArgs {
                keep_dims: *keep_dims,
            };
            (
                K::ReducerOptions,
                Some(fb::ReducerOptions::create(b, &args).as_union_value()),
            )
        }
        Options::ArgMax { output_type } => {
            let args = fb::ArgMaxOptionsArgs {
                output_type: *output_type,
            };
            (
                K::ArgMaxOptions,
                Some(fb::ArgMaxOptions::create(b, &args).as_union_value()),
            )
        }
        Options::ArgMin { output_type } => {
            let args = fb::ArgMinOptionsArgs {
                output_type: *output_type,
            };
            (
                K::ArgMinOptions,
                Some(fb::ArgMinOptions::create(b, &args).as_union_value()),
            )
        }
        Options::Cumsum { exclusive, reverse } => {
            let args = fb::CumsumOptionsArgs {
                exclusive: *exclusive,
                reverse: *reverse,
            };
            (
                K::CumsumOptions,
                Some(fb::CumsumOptions::create(b, &args).as_union_value()),
            )
        }
        Options::Softmax { beta } => {
            let args = fb::SoftmaxOptionsArgs { beta: *beta };
            (
                K::SoftmaxOptions,
                Some(fb::SoftmaxOptions::create(b, &args).as_union_value()),
            )
        }
        Options::Reshape { new_shape } => {
            let new_shape = b.create_vector(new_shape);
            let args = fb::ReshapeOptionsArgs {
                new_shape: Some(new_shape),
            };
            (
                K::ReshapeOptions,
                Some(fb::ReshapeOptions::create(b, &args).as_union_value()),
            )
        }
        Options::Svdf { rank, activation } => {
            let args = fb::SVDFOptionsArgs {
                rank: *rank,
                fused_activation_function: *activation,
                asymmetric_quantize_inputs: false,
            };
            (
                K::SVDFOptions,
                Some(fb::SVDFOptions::create(b, &args).as_union_value()),
            )
        }
        Options::Squeeze { .. }
        | Options::Shape { .. }
        | Options::MirrorPad { .. }
        | Options::Pack { .. }
        | Options::Unpack { .. }
        | Options::Gather { .. }
        | Options::BlockSize { .. }
        | Options::ResizeBilinear { .. } => data_movement_options(b, &op.options),
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
            (
                K::UnidirectionalSequenceLSTMOptions,
                Some(fb::UnidirectionalSequenceLSTMOptions::create(b, &args).as_union_value()),
            )
        }
    };
    let inputs = b.create_vector(&op.inputs);
    let outputs = b.create_vector(&op.outputs);
    fb::Operator::create(
        b,
        &fb::OperatorArgs {
            opcode_index: op.opcode,
            inputs: Some(inputs),
            outputs: Some(outputs),
            builtin_options_type: kind,
            builtin_options: options,
            ..Default::default()
        },
    )
}

/// Little-endian bytes of `f32` values.
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Little-endian bytes of `i32` values.
pub fn i32_bytes(values: &[i32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The options tables of the shape and data-movement ops (SQUEEZE to
/// RESIZE_BILINEAR), apart from [`write_op`] to keep it short.
fn data_movement_options<'b>(
    b: &mut FlatBufferBuilder<'b>,
    options: &Options,
) -> (
    fb::BuiltinOptions,
    Option<WIPOffset<flatbuffers::UnionWIPOffset>>,
) {
    use fb::BuiltinOptions as K;
    match options {
        Options::Squeeze { squeeze_dims } => {
            let squeeze_dims = Some(b.create_vector(squeeze_dims));
            let args = fb::SqueezeOptionsArgs { squeeze_dims };
            let t = fb::SqueezeOptions::create(b, &args);
            (K::SqueezeOptions, Some(t.as_union_value()))
        }
        Options::Shape { out_type } => {
            let args = fb::ShapeOptionsArgs {
                out_type: *out_type,
            };
            let t = fb::ShapeOptions::create(b, &args);
            (K::ShapeOptions, Some(t.as_union_value()))
        }
        Options::MirrorPad { mode } => {
            let t = fb::MirrorPadOptions::create(b, &fb::MirrorPadOptionsArgs { mode: *mode });
            (K::MirrorPadOptions, Some(t.as_union_value()))
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
        _ => (K::NONE, None),
    }
}
