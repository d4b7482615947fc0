//! Writes seed inputs for the fuzz targets.
//!
//! ```text
//! cargo run --example build_corpus -- [OUT_DIR]     # default: corpus
//! ```
//!
//! Writes `OUT_DIR/load_and_plan/*.tflite` (small valid models made with
//! hilt's `ModelWriter`) and `OUT_DIR/plan_requests/*.bin`. Relative
//! directories are taken from the fuzz package's folder. The tracked seeds
//! were written with `OUT_DIR = seeds`.

use std::path::{Path, PathBuf};
use std::{env, fs};

use hilt_runtime::model::Model;
use hilt_runtime::schema::{
    ActivationFunctionType as Act, BuiltinOperator as Op, Padding, TensorType as T,
};
use hilt_runtime::writer::{ModelWriter, Options, f32_bytes, i32_bytes};

fn fc(activation: Act) -> Options {
    Options::FullyConnected {
        activation,
        keep_num_dims: false,
    }
}

/// input 4 floats → FC 8 → ReLU → FC 2 (the runtime's seed example).
fn fc_chain() -> ModelWriter {
    let mut w = ModelWriter::new();
    let input = w.input("input", T::FLOAT32, &[1, 4]);
    let w1 = w.constant("fc1/w", T::FLOAT32, &[8, 4], &f32_bytes(&[0.5; 32]));
    let b1 = w.constant("fc1/b", T::FLOAT32, &[8], &f32_bytes(&[0.1; 8]));
    let hidden = w.tensor("fc1/out", T::FLOAT32, &[1, 8]);
    let relu = w.tensor("relu/out", T::FLOAT32, &[1, 8]);
    let w2 = w.constant("fc2/w", T::FLOAT32, &[2, 8], &f32_bytes(&[0.25; 16]));
    let b2 = w.constant("fc2/b", T::FLOAT32, &[2], &f32_bytes(&[0.0; 2]));
    let output = w.output("output", T::FLOAT32, &[1, 2]);
    w.op(
        Op::FULLY_CONNECTED,
        &[Some(input), Some(w1), Some(b1)],
        &[hidden],
        fc(Act::NONE),
    );
    w.op(Op::RELU, &[Some(hidden)], &[relu], Options::None);
    w.op(
        Op::FULLY_CONNECTED,
        &[Some(relu), Some(w2), Some(b2)],
        &[output],
        fc(Act::NONE),
    );
    w
}

/// Int8 FC layers whose bias is omitted (-1 inputs).
fn fc_int8_no_bias() -> ModelWriter {
    let mut w = ModelWriter::new();
    let mut x = w.input("x", T::INT8, &[1, 16]);
    w.quantize(x, 0.05, -3);
    for (i, width) in [24, 8, 12, 4].into_iter().enumerate() {
        let prev: i32 = if i == 0 { 16 } else { [24, 8, 12][i - 1] };
        let weights = w.constant(
            &format!("w{i}"),
            T::INT8,
            &[width, prev],
            &vec![1u8; (width * prev) as usize],
        );
        w.quantize(weights, 0.01, 0);
        let y = if i == 3 {
            w.output("y", T::INT8, &[1, width])
        } else {
            w.tensor(&format!("h{i}"), T::INT8, &[1, width])
        };
        w.quantize(y, 0.1, 5);
        w.op(
            Op::FULLY_CONNECTED,
            &[Some(x), Some(weights), None],
            &[y],
            fc(Act::RELU),
        );
        x = y;
    }
    w
}

/// SVDF with a variable state tensor (lives in the persistent tail).
fn svdf_variable() -> ModelWriter {
    let mut w = ModelWriter::new();
    let x = w.input("x", T::FLOAT32, &[1, 8]);
    let feature = w.constant("feature", T::FLOAT32, &[4, 8], &f32_bytes(&[0.1; 32]));
    let time = w.constant("time", T::FLOAT32, &[4, 10], &f32_bytes(&[0.2; 40]));
    let bias = w.constant("bias", T::FLOAT32, &[4], &f32_bytes(&[0.0; 4]));
    let state = w.variable("state", T::FLOAT32, &[1, 40]);
    let y = w.tensor("svdf/out", T::FLOAT32, &[1, 4]);
    let z = w.output("z", T::FLOAT32, &[1, 4]);
    w.op(
        Op::SVDF,
        &[Some(x), Some(feature), Some(time), Some(bias), Some(state)],
        &[y],
        Options::Svdf {
            rank: 1,
            activation: Act::RELU,
        },
    );
    w.op(Op::TANH, &[Some(y)], &[z], Options::None);
    w
}

/// The FC chain with an offline plan: `offsets[t]` per tensor, -1 = run time.
fn fc_chain_offline(offsets: &[i32]) -> ModelWriter {
    let mut w = fc_chain();
    w.offline_plan(offsets);
    w
}

/// Two branches joined by ADD, plus a second output read at step 0.
fn residual() -> ModelWriter {
    let mut w = ModelWriter::new();
    let x = w.input("x", T::FLOAT32, &[1, 4, 4, 3]);
    let a = w.tensor("a", T::FLOAT32, &[1, 4, 4, 3]);
    let b = w.tensor("b", T::FLOAT32, &[1, 4, 4, 3]);
    let c = w.tensor("c", T::FLOAT32, &[1, 4, 4, 3]);
    let sum = w.output("sum", T::FLOAT32, &[1, 4, 4, 3]);
    let early = w.output("early", T::FLOAT32, &[1, 4, 4, 3]);
    w.op(Op::RELU, &[Some(x)], &[a], Options::None);
    w.op(Op::LOGISTIC, &[Some(x)], &[early], Options::None);
    w.op(Op::TANH, &[Some(a)], &[b], Options::None);
    w.op(
        Op::MUL,
        &[Some(a), Some(b)],
        &[c],
        Options::Mul {
            activation: Act::NONE,
        },
    );
    w.op(
        Op::ADD,
        &[Some(x), Some(c)],
        &[sum],
        Options::Add {
            activation: Act::RELU6,
        },
    );
    w
}

/// A small int8 CNN: conv, depthwise conv, pool, reshape, FC, softmax.
fn conv_int8() -> ModelWriter {
    let mut w = ModelWriter::new();
    let x = w.input("image", T::INT8, &[1, 8, 8, 1]);
    w.quantize(x, 0.0039, -128);
    let k = w.constant("conv/k", T::INT8, &[4, 3, 3, 1], &[1u8; 36]);
    w.quantize_per_channel(k, &[0.01, 0.02, 0.03, 0.04], &[0, 0, 0, 0], 0);
    let kb = w.constant("conv/b", T::INT32, &[4], &i32_bytes(&[1, 2, 3, 4]));
    let c1 = w.tensor("conv/out", T::INT8, &[1, 8, 8, 4]);
    w.op(
        Op::CONV_2D,
        &[Some(x), Some(k), Some(kb)],
        &[c1],
        Options::Conv2D {
            padding: Padding::SAME,
            stride: (1, 1),
            dilation: (1, 1),
            activation: Act::RELU,
        },
    );
    let dk = w.constant("dw/k", T::INT8, &[1, 3, 3, 4], &[2u8; 36]);
    let d1 = w.tensor("dw/out", T::INT8, &[1, 4, 4, 4]);
    w.op(
        Op::DEPTHWISE_CONV_2D,
        &[Some(c1), Some(dk), None],
        &[d1],
        Options::DepthwiseConv2D {
            padding: Padding::SAME,
            stride: (2, 2),
            dilation: (1, 1),
            depth_multiplier: 1,
            activation: Act::RELU6,
        },
    );
    let p1 = w.tensor("pool/out", T::INT8, &[1, 2, 2, 4]);
    w.op(
        Op::AVERAGE_POOL_2D,
        &[Some(d1)],
        &[p1],
        Options::Pool2D {
            padding: Padding::VALID,
            stride: (2, 2),
            filter: (2, 2),
            activation: Act::NONE,
        },
    );
    let shape = w.constant("shape", T::INT32, &[2], &i32_bytes(&[1, 16]));
    let flat = w.tensor("flat", T::INT8, &[1, 16]);
    w.op(
        Op::RESHAPE,
        &[Some(p1), Some(shape)],
        &[flat],
        Options::Reshape {
            new_shape: vec![1, 16],
        },
    );
    let fw = w.constant("fc/w", T::INT8, &[3, 16], &[3u8; 48]);
    let logits = w.tensor("logits", T::INT8, &[1, 3]);
    w.op(
        Op::FULLY_CONNECTED,
        &[Some(flat), Some(fw), None],
        &[logits],
        fc(Act::NONE),
    );
    let probs = w.output("probs", T::INT8, &[1, 3]);
    w.quantize(probs, 1.0 / 256.0, -128);
    w.op(
        Op::SOFTMAX,
        &[Some(logits)],
        &[probs],
        Options::Softmax { beta: 1.0 },
    );
    w
}

/// Unusual tensors: zero-sized, scalar, untouched, packed INT4 constant,
/// FLOAT16/COMPLEX128/BOOL, an input that is also an output, and an opcode
/// above 127 (stored via the placeholder).
fn odd_tensors() -> ModelWriter {
    let mut w = ModelWriter::new();
    let x = w.input("x", T::FLOAT16, &[2, 3]);
    let empty = w.tensor("empty", T::FLOAT32, &[4, 0]);
    let scalar = w.tensor("scalar", T::COMPLEX128, &[]);
    let _unused = w.tensor("unused", T::INT64, &[7]);
    let packed = w.constant("int4", T::INT4, &[5], &[0x12, 0x34, 0x05]);
    let flag = w.tensor("flag", T::BOOL, &[1]);
    let y = w.output("y", T::FLOAT16, &[2, 3]);
    w.mark_output(x);
    w.op(
        Op::DEQUANTIZE,
        &[Some(x), None],
        &[scalar, empty],
        Options::None,
    );
    w.op(
        Op(150),
        &[Some(scalar), Some(packed)],
        &[flag],
        Options::None,
    );
    w.op(
        Op::CONCATENATION,
        &[Some(flag), Some(x), Some(x)],
        &[y],
        Options::None,
    );
    w.metadata("min_runtime_version", b"1.5.0\0");
    w
}

/// Activations of 1 GiB each: plans whose head overflows or exceeds any arena.
fn huge_tensors() -> ModelWriter {
    let mut w = ModelWriter::new();
    let x = w.input("x", T::FLOAT32, &[1, 1 << 28]);
    let a = w.tensor("a", T::FLOAT32, &[1, 1 << 28]);
    let b = w.tensor("b", T::FLOAT32, &[1 << 28, 1]);
    let c = w.tensor("c", T::FLOAT32, &[1 << 14, 1 << 14]);
    let y = w.output("y", T::FLOAT32, &[16, 1 << 24]);
    w.op(Op::RELU, &[Some(x)], &[a], Options::None);
    w.op(Op::RELU, &[Some(a)], &[b], Options::None);
    w.op(
        Op::ADD,
        &[Some(a), Some(b)],
        &[c],
        Options::Add {
            activation: Act::NONE,
        },
    );
    w.op(Op::RELU, &[Some(c)], &[y], Options::None);
    w
}

/// A long chain with sizes that vary, so greedy reuse has work to do.
fn long_chain() -> ModelWriter {
    let mut w = ModelWriter::new();
    let mut prev = w.input("x", T::INT8, &[1, 32]);
    let mut older = prev;
    for i in 0..24 {
        let width = [32, 7, 100, 16, 3, 64][i % 6];
        let t = if i == 23 {
            w.output("y", T::INT8, &[1, width])
        } else {
            w.tensor(&format!("t{i}"), T::INT8, &[1, width])
        };
        if i % 3 == 2 {
            w.op(
                Op::ADD,
                &[Some(prev), Some(older)],
                &[t],
                Options::Add {
                    activation: Act::NONE,
                },
            );
        } else {
            w.op(Op::RELU, &[Some(prev)], &[t], Options::None);
        }
        older = prev;
        prev = t;
    }
    w
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    fs::write(dir.join(name), bytes).unwrap_or_else(|e| panic!("writing {name}: {e}"));
}

fn main() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = env::args().nth(1).unwrap_or_else(|| "corpus".into());
    let out = Path::new(root).join(PathBuf::from(out));

    // Tensor order of fc_chain: input, fc1/w, fc1/b, fc1/out, relu/out, fc2/w, fc2/b, output.
    let models: Vec<(&str, ModelWriter)> = vec![
        ("fc_chain", fc_chain()),
        ("fc_int8_no_bias", fc_int8_no_bias()),
        ("svdf_variable", svdf_variable()),
        (
            "offline_full",
            fc_chain_offline(&[0, -1, -1, 16, 48, -1, -1, 80]),
        ),
        (
            "offline_partial",
            fc_chain_offline(&[-1, -1, -1, 64, -1, -1, -1, 0]),
        ),
        (
            "offline_overlap",
            fc_chain_offline(&[0, -1, -1, 0, 16, -1, -1, 32]),
        ),
        ("residual", residual()),
        ("conv_int8", conv_int8()),
        ("odd_tensors", odd_tensors()),
        ("huge_tensors", huge_tensors()),
        ("long_chain", long_chain()),
    ];
    let dir = out.join("load_and_plan");
    fs::create_dir_all(&dir).expect("creating the corpus folder");
    for (name, writer) in &models {
        let bytes = writer.finish();
        Model::from_bytes(&bytes)
            .unwrap_or_else(|e| panic!("{name}: the writer made an invalid model: {e}"));
        write(&dir, &format!("{name}.tflite"), &bytes);
    }

    // plan_requests: 8 bytes per request [align, first, len, flags, size/offset × 4].
    let req = |align: u8, first: u8, len: u8, flags: u8, raw: u32| {
        let mut v = vec![align, first, len, flags];
        v.extend_from_slice(&raw.to_le_bytes());
        v
    };
    let requests: Vec<(&str, Vec<u8>)> = vec![
        (
            "two_tensors",
            [req(4, 0, 1, 0, 100), req(4, 1, 1, 0, 20)].concat(),
        ),
        (
            "mixed_align_hold",
            [
                req(4, 0, 3, 0x80 | 2, 256),
                req(10, 1, 0, 0, 3000),
                req(0, 2, 4, 0x40, 17),
                req(20, 0, 0, 0, 8),
            ]
            .concat(),
        ),
        (
            "offline_fixed",
            [
                req(4, 0, 2, 0, 64 << 1),
                req(4, 1, 2, 0, 1),
                req(6, 3, 1, 0, 0),
                0x200u32.to_le_bytes().to_vec(),
            ]
            .concat(),
        ),
        (
            "overflow",
            [
                req(4, 0, 5, 0x20, 0xffff_fff0),
                req(4, 1, 1, 0x20, 0x8000_0000),
            ]
            .concat(),
        ),
        ("inverted", [req(4, 3, 2, 0x10, 10)].concat()),
    ];
    let dir = out.join("plan_requests");
    fs::create_dir_all(&dir).expect("creating the corpus folder");
    for (name, bytes) in &requests {
        write(&dir, &format!("{name}.bin"), bytes);
    }
    println!(
        "wrote {} models and {} request lists under {}",
        models.len(),
        requests.len(),
        out.display()
    );
}
