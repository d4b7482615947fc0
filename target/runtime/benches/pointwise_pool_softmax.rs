//! Per-invoke time of ADD, pooling, SOFTMAX, LOGISTIC, QUANTIZE and
//! DEQUANTIZE as one-op models through the interpreter, on the shapes of the
//! conformance models (ResNet-8's residual adds and global pool, DS-CNN's
//! pool, classifier heads) and some larger ones.
//!
//! `HILT_DUMP_BENCH_MODELS=DIR` also writes each model and its input to DIR
//! (`NAME.tflite`, `NAME.in0.bin`, ...), to time TFLM on the same models.

#[path = "../tests/one_op/mod.rs"]
mod one_op;

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use hilt_runtime::interpreter::Interpreter;
use hilt_runtime::kernels::all_builtins;
use hilt_runtime::model::Model;
use hilt_runtime::planner::Greedy;
use hilt_runtime::schema::{
    ActivationFunctionType as Act, BuiltinOperator as Op, Padding, TensorType as T,
};
use hilt_runtime::writer::Options;
use one_op::*;

struct Bench {
    name: &'static str,
    model: Vec<u8>,
    inputs: Vec<Vec<u8>>,
}

fn unary(
    name: &'static str,
    op: Op,
    input: (Ty, &[i32]),
    output: (Ty, &[i32]),
    options: Options,
) -> Bench {
    let mut rng = Rng(7);
    let data = rng.tensor(input.0.dtype, elements(input.1), -4.0, 4.0);
    Bench {
        name,
        model: single_op(op, &[input], output, options),
        inputs: vec![data],
    }
}

#[rustfmt::skip]
fn benches() -> Vec<Bench> {
    let mut rng = Rng(1);
    let mut out = Vec::new();
    for (name, ty, shape) in [
        ("add_i8_32x32x16", i8q(0.05, -3), &[1, 32, 32, 16][..]),
        ("add_i8_8x8x64", i8q(0.05, -3), &[1, 8, 8, 64][..]),
        ("add_f32_32x32x16", F32, &[1, 32, 32, 16][..]),
    ] {
        let o = if ty.dtype == T::FLOAT32 { F32 } else { i8q(0.09, 4) };
        out.push(Bench {
            name,
            model: single_op(Op::ADD, &[(ty, shape), (ty, shape)], (o, shape), add_options(Act::RELU)),
            inputs: vec![
                rng.tensor(ty.dtype, elements(shape), -4.0, 4.0),
                rng.tensor(ty.dtype, elements(shape), -4.0, 4.0),
            ],
        });
    }
    let p = i8q(0.1, -3);
    out.push(unary("avgpool_i8_global_8x8x64", Op::AVERAGE_POOL_2D, (p, &[1, 8, 8, 64]), (p, &[1, 1, 1, 64]), pool_options(Padding::VALID, (8, 8), (8, 8), Act::NONE)));
    out.push(unary("avgpool_i8_global_25x5x64", Op::AVERAGE_POOL_2D, (p, &[1, 25, 5, 64]), (p, &[1, 1, 1, 64]), pool_options(Padding::VALID, (5, 25), (5, 25), Act::NONE)));
    out.push(unary("avgpool_i8_3x3s2_32x32x16", Op::AVERAGE_POOL_2D, (p, &[1, 32, 32, 16]), (p, &[1, 16, 16, 16]), pool_options(Padding::SAME, (2, 2), (3, 3), Act::NONE)));
    out.push(unary("maxpool_i8_2x2s2_32x32x16", Op::MAX_POOL_2D, (p, &[1, 32, 32, 16]), (p, &[1, 16, 16, 16]), pool_options(Padding::VALID, (2, 2), (2, 2), Act::NONE)));
    out.push(unary("avgpool_f32_global_8x8x64", Op::AVERAGE_POOL_2D, (F32, &[1, 8, 8, 64]), (F32, &[1, 1, 1, 64]), pool_options(Padding::VALID, (8, 8), (8, 8), Act::NONE)));
    out.push(unary("maxpool_f32_2x2s2_32x32x16", Op::MAX_POOL_2D, (F32, &[1, 32, 32, 16]), (F32, &[1, 16, 16, 16]), pool_options(Padding::VALID, (2, 2), (2, 2), Act::NONE)));
    let sm = Options::Softmax { beta: 1.0 };
    out.push(unary("softmax_i8_10", Op::SOFTMAX, (i8q(0.1, 5), &[1, 10]), (i8q(1.0 / 256.0, -128), &[1, 10]), sm.clone()));
    out.push(unary("softmax_i8_1000", Op::SOFTMAX, (i8q(0.1, 5), &[1, 1000]), (i8q(1.0 / 256.0, -128), &[1, 1000]), sm.clone()));
    out.push(unary("softmax_i8_i16_1000", Op::SOFTMAX, (i8q(0.1, 5), &[1, 1000]), (i16q(1.0 / 65536.0, -32768), &[1, 1000]), sm.clone()));
    out.push(unary("softmax_f32_1000", Op::SOFTMAX, (F32, &[1, 1000]), (F32, &[1, 1000]), sm));
    out.push(unary("logistic_i8_4096", Op::LOGISTIC, (i8q(0.05, 3), &[4096]), (i8q(1.0 / 256.0, -128), &[4096]), Options::None));
    out.push(unary("logistic_f32_4096", Op::LOGISTIC, (F32, &[4096]), (F32, &[4096]), Options::None));
    out.push(unary("quantize_f32_i8_4096", Op::QUANTIZE, (F32, &[4096]), (i8q(0.05, 3), &[4096]), Options::None));
    out.push(unary("quantize_i16_i8_4096", Op::QUANTIZE, (i16q(1e-3, 0), &[4096]), (i8q(0.05, 3), &[4096]), Options::None));
    out.push(unary("dequantize_i8_4096", Op::DEQUANTIZE, (i8q(0.05, 3), &[4096]), (F32, &[4096]), Options::None));
    out
}

fn kernels(c: &mut Criterion) {
    let benches = benches();
    if let Ok(dir) = std::env::var("HILT_DUMP_BENCH_MODELS") {
        for b in &benches {
            std::fs::write(format!("{dir}/{}.tflite", b.name), &b.model).unwrap();
            for (i, data) in b.inputs.iter().enumerate() {
                std::fs::write(format!("{dir}/{}.in{i}.bin", b.name), data).unwrap();
            }
        }
    }
    let resolver = all_builtins();
    let mut group = c.benchmark_group("ops");
    for b in &benches {
        let words = aligned(&b.model);
        let bytes = &bytemuck::cast_slice::<u128, u8>(&words)[..b.model.len()];
        let model = Model::from_bytes(bytes).unwrap();
        let mut arena = vec![0u128; 1 << 16];
        let mut interpreter =
            Interpreter::new(model, &resolver, bytemuck::cast_slice_mut(&mut arena));
        interpreter.allocate(&Greedy, &Default::default()).unwrap();
        for (i, data) in b.inputs.iter().enumerate() {
            interpreter.input_mut(i).unwrap().copy_from_slice(data);
        }
        group.bench_function(b.name, |bench| {
            bench.iter(|| black_box(&mut interpreter).invoke().unwrap())
        });
    }
    group.finish();
}

criterion_group!(
    name = ops;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1));
    targets = kernels
);
criterion_main!(ops);
