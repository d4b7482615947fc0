//! Malformed models: every fault is a typed error that names where it is.

mod common;

use common::seed_fc_model;
use hilt_runtime::model::{FlatbufferFault, Model, ModelError, Site};
use hilt_runtime::schema::{self, BuiltinOperator, TensorType};
use hilt_runtime::writer::{ModelWriter, Options, f32_bytes};

fn err(bytes: &[u8]) -> ModelError {
    Model::from_bytes(bytes).expect_err("model must be refused")
}

#[test]
fn empty_and_short_inputs_are_malformed() {
    assert!(matches!(
        err(&[]),
        ModelError::Malformed {
            fault: FlatbufferFault::NotAModel,
            ..
        }
    ));
    assert!(matches!(err(&[1, 2, 3]), ModelError::Malformed { .. }));
    assert!(matches!(err(&[0xff; 64]), ModelError::Malformed { .. }));
}

#[test]
fn every_truncation_of_a_valid_model_is_refused_without_panic() {
    let bytes = seed_fc_model();
    for len in 0..bytes.len() {
        // Some prefixes may still verify (trailing data unused); none may panic.
        let _ = Model::from_bytes(&bytes[..len]);
    }
    assert!(Model::from_bytes(&bytes[..bytes.len() / 2]).is_err());
}

#[test]
fn every_single_byte_flip_is_handled() {
    let bytes = seed_fc_model();
    for i in 0..bytes.len() {
        let mut corrupt = bytes.clone();
        corrupt[i] ^= 0xA5;
        if let Ok(model) = Model::from_bytes(&corrupt) {
            // Whatever still verifies must be fully readable.
            for t in model.tensors() {
                let _ = t.shape().count();
            }
            for op in model.operators() {
                let _ = (op.inputs().count(), op.code.to_string());
            }
        }
    }
}

fn one_op(build: impl FnOnce(&mut ModelWriter)) -> Vec<u8> {
    let mut w = ModelWriter::new();
    build(&mut w);
    w.finish()
}

#[test]
fn tensor_index_out_of_range_names_operator_and_entry() {
    let bytes = one_op(|w| {
        let x = w.input("x", TensorType::FLOAT32, &[4]);
        let _ = x;
        w.op_raw(0, &[0, 7], &[0]);
    });
    assert_eq!(
        err(&bytes),
        ModelError::IndexOutOfRange {
            site: Site::Operator { subgraph: 0, op: 0 },
            field: "inputs",
            entry: 1,
            value: 7,
            len: 1
        }
    );
}

#[test]
fn omitted_optional_input_is_allowed_but_not_as_output() {
    let ok = one_op(|w| {
        w.input("x", TensorType::FLOAT32, &[4]);
        w.op_raw(0, &[0, -1], &[0]);
    });
    assert!(Model::from_bytes(&ok).is_ok());
    let bad = one_op(|w| {
        w.input("x", TensorType::FLOAT32, &[4]);
        w.op_raw(0, &[0], &[-1]);
    });
    assert!(matches!(
        err(&bad),
        ModelError::IndexOutOfRange {
            field: "outputs",
            value: -1,
            ..
        }
    ));
}

#[test]
fn opcode_index_out_of_range() {
    let bytes = one_op(|w| {
        w.input("x", TensorType::FLOAT32, &[4]);
        w.op_raw(3, &[0], &[0]);
    });
    assert!(matches!(
        err(&bytes),
        ModelError::IndexOutOfRange {
            field: "opcode_index",
            value: 3,
            len: 1,
            ..
        }
    ));
}

#[test]
fn buffer_index_out_of_range() {
    let bytes = one_op(|w| {
        w.tensor_with_buffer("w", TensorType::FLOAT32, &[4], 9);
    });
    assert_eq!(
        err(&bytes),
        ModelError::IndexOutOfRange {
            site: Site::Tensor {
                subgraph: 0,
                tensor: 0
            },
            field: "buffer",
            entry: 0,
            value: 9,
            len: 1
        }
    );
}

#[test]
fn subgraph_io_out_of_range() {
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::FLOAT32, &[4]);
    w.mark_output(hilt_runtime::writer::TensorId(x.0 + 5));
    assert!(matches!(
        err(&w.finish()),
        ModelError::IndexOutOfRange {
            site: Site::Subgraph(0),
            field: "outputs",
            value: 5,
            ..
        }
    ));
}

#[test]
fn negative_dimension() {
    let bytes = one_op(|w| {
        w.input("x", TensorType::FLOAT32, &[1, -3]);
    });
    assert_eq!(
        err(&bytes),
        ModelError::NegativeDimension {
            site: Site::Tensor {
                subgraph: 0,
                tensor: 0
            },
            axis: 1,
            value: -3
        }
    );
}

#[test]
fn shape_product_overflow() {
    let bytes = one_op(|w| {
        w.input("x", TensorType::FLOAT32, &[65536, 65536, 65536]);
    });
    assert_eq!(
        err(&bytes),
        ModelError::ShapeOverflow {
            site: Site::Tensor {
                subgraph: 0,
                tensor: 0
            }
        }
    );
    let bytes = one_op(|w| {
        // 2^30 elements fit in u32 but 4 bytes each do not.
        w.input("x", TensorType::FLOAT32, &[1 << 15, 1 << 15]);
    });
    assert!(matches!(err(&bytes), ModelError::ShapeOverflow { .. }));
}

#[test]
fn constant_buffer_length_must_match_shape() {
    let bytes = one_op(|w| {
        w.constant("w", TensorType::FLOAT32, &[2, 3], &f32_bytes(&[0.0; 5]));
    });
    assert_eq!(
        err(&bytes),
        ModelError::BufferSizeMismatch {
            site: Site::Tensor {
                subgraph: 0,
                tensor: 0
            },
            buffer: 1,
            expected: 24,
            actual: 20
        }
    );
}

#[test]
fn unsized_tensor_types_are_refused() {
    let bytes = one_op(|w| {
        w.input("s", TensorType::STRING, &[2]);
    });
    assert_eq!(
        err(&bytes),
        ModelError::UnsupportedType {
            site: Site::Tensor {
                subgraph: 0,
                tensor: 0
            },
            code: TensorType::STRING.0
        }
    );
}

#[test]
fn model_without_subgraphs() {
    let mut b = flatbuffers::FlatBufferBuilder::new();
    let subgraphs = b.create_vector::<flatbuffers::WIPOffset<schema::SubGraph>>(&[]);
    let model = schema::Model::create(
        &mut b,
        &schema::ModelArgs {
            subgraphs: Some(subgraphs),
            ..Default::default()
        },
    );
    schema::finish_model_buffer(&mut b, model);
    assert_eq!(err(b.finished_data()), ModelError::NoSubgraph);
}

#[test]
fn external_buffer_outside_the_file() {
    let mut b = flatbuffers::FlatBufferBuilder::new();
    let buffer = schema::Buffer::create(
        &mut b,
        &schema::BufferArgs {
            data: None,
            offset: 1 << 20,
            size: 64,
        },
    );
    let buffers = b.create_vector(&[buffer]);
    let sg = schema::SubGraph::create(&mut b, &schema::SubGraphArgs::default());
    let subgraphs = b.create_vector(&[sg]);
    let model = schema::Model::create(
        &mut b,
        &schema::ModelArgs {
            subgraphs: Some(subgraphs),
            buffers: Some(buffers),
            ..Default::default()
        },
    );
    schema::finish_model_buffer(&mut b, model);
    assert!(matches!(
        err(b.finished_data()),
        ModelError::BufferOutsideFile {
            buffer: 0,
            offset: 1048576,
            size: 64,
            ..
        }
    ));
}

#[test]
fn error_messages_name_the_place() {
    let bytes = one_op(|w| {
        w.input("x", TensorType::FLOAT32, &[4]);
        w.op_raw(0, &[0, 7], &[0]);
    });
    assert_eq!(
        err(&bytes).to_string(),
        "subgraph 0 operator 0: `inputs`[1] = 7 is out of range (there are 1)"
    );
}

#[test]
fn opcodes_above_126_use_the_wide_field() {
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::INT8, &[4]);
    let y = w.output("y", TensorType::INT8, &[4]);
    w.op(BuiltinOperator::QUANTIZE, &[Some(x)], &[y], Options::None);
    let bytes = w.finish();
    let model = Model::from_bytes(&bytes).unwrap();
    assert_eq!(model.operator(0).unwrap().code.to_string(), "QUANTIZE");
}
