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
mod option_tables;
mod options;

pub use options::Options;

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
    let (kind, options) = option_tables::builtin_options(b, &op.options);
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
