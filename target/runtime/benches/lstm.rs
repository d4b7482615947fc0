//! UNIDIRECTIONAL_SEQUENCE_LSTM per invoke: hilt's kernel (SSE2 on x86-64)
//! against TFLM's algorithm stage by stage (`lstm::reference`, with its
//! four scratch buffers), on the layer shapes of tflm_mnist_lstm (28 steps,
//! 28 features, 20 cells) and tflm_dtln_noise_suppression (one step,
//! 257 → 128 and 128 → 128 cells).

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use hilt_runtime::kernels::lstm::{
    self, GATES, LstmQuantParams, LstmScales, LstmShape, LstmWeights, reference,
};

/// Deterministic pseudo-random numbers (xorshift), so runs are comparable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn i8s(&mut self, n: usize) -> Vec<i8> {
        (0..n).map(|_| self.next() as i8).collect()
    }
    fn f32s(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
            .collect()
    }
}

/// (name, time steps, features, cells).
const LAYERS: &[(&str, u32, u32, u32)] = &[
    ("mnist_28x28x20", 28, 28, 20),
    ("dtln_1x257x128", 1, 257, 128),
    ("dtln_1x128x128", 1, 128, 128),
];

fn shape((time, input, state): (u32, u32, u32)) -> LstmShape {
    LstmShape {
        batch: 1,
        time_steps: time,
        input_size: input,
        state_size: state,
        time_major: 0,
    }
}

fn integer(c: &mut Criterion) {
    let mut group = c.benchmark_group("lstm_int8");
    for &(name, time, input, state) in LAYERS {
        let shape = shape((time, input, state));
        let quant = LstmQuantParams::from_scales(&LstmScales {
            input: (0.05, -12),
            hidden: (0.0078, 3),
            cell: 1.0 / 2048.0,
            input_weights: [(0.011, 0); GATES],
            recurrent_weights: [(0.009, 0); GATES],
            cell_clip: 0.0,
        });
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let (t, n, s) = (time as usize, input as usize, state as usize);
        let w_in: [Vec<i8>; GATES] = [0; GATES].map(|_| rng.i8s(s * n));
        let w_rec: [Vec<i8>; GATES] = [0; GATES].map(|_| rng.i8s(s * s));
        let bias: [Vec<i32>; GATES] =
            [0; GATES].map(|_| (0..s).map(|_| (rng.next() as i32) >> 20).collect());
        let weights = LstmWeights {
            input: [0, 1, 2, 3].map(|g| w_in[g].as_slice()),
            recurrent: [0, 1, 2, 3].map(|g| w_rec[g].as_slice()),
            bias: [0, 1, 2, 3].map(|g| bias[g].as_slice()),
        };
        let x = rng.i8s(t * n);
        let (mut h, mut cell, mut out) = (vec![3i8; s], vec![0i16; s], vec![0i8; t * s]);
        let mut bufs = [0; GATES].map(|_| vec![0i16; s]);
        group.bench_with_input(BenchmarkId::new("hilt", name), &(), |b, _| {
            b.iter(|| {
                lstm::eval_integer(
                    &shape,
                    &quant,
                    &weights,
                    black_box(&x),
                    &mut h,
                    &mut cell,
                    &mut out,
                )
                .unwrap();
                black_box(&out);
            })
        });
        group.bench_with_input(BenchmarkId::new("reference", name), &(), |b, _| {
            b.iter(|| {
                let [b0, b1, b2, b3] = &mut bufs;
                reference::eval_integer(
                    &shape,
                    &quant,
                    &weights,
                    black_box(&x),
                    &mut h,
                    &mut cell,
                    &mut out,
                    [b0, b1, b2, b3],
                )
                .unwrap();
                black_box(&out);
            })
        });
    }
    group.finish();
}

fn float(c: &mut Criterion) {
    let mut group = c.benchmark_group("lstm_float");
    for &(name, time, input, state) in LAYERS {
        let shape = shape((time, input, state));
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        let (t, n, s) = (time as usize, input as usize, state as usize);
        let w_in: [Vec<f32>; GATES] = [0; GATES].map(|_| rng.f32s(s * n));
        let w_rec: [Vec<f32>; GATES] = [0; GATES].map(|_| rng.f32s(s * s));
        let bias: [Vec<f32>; GATES] = [0; GATES].map(|_| rng.f32s(s));
        let weights = LstmWeights {
            input: [0, 1, 2, 3].map(|g| w_in[g].as_slice()),
            recurrent: [0, 1, 2, 3].map(|g| w_rec[g].as_slice()),
            bias: [0, 1, 2, 3].map(|g| bias[g].as_slice()),
        };
        let x = rng.f32s(t * n);
        let (mut h, mut cell, mut out) = (vec![0f32; s], vec![0f32; s], vec![0f32; t * s]);
        let mut bufs = [0; GATES].map(|_| vec![0f32; s]);
        group.bench_with_input(BenchmarkId::new("hilt", name), &(), |b, _| {
            b.iter(|| {
                lstm::eval_float(
                    &shape,
                    0.0,
                    &weights,
                    black_box(&x),
                    &mut h,
                    &mut cell,
                    &mut out,
                )
                .unwrap();
                black_box(&out);
            })
        });
        group.bench_with_input(BenchmarkId::new("reference", name), &(), |b, _| {
            b.iter(|| {
                let [b0, b1, b2, b3] = &mut bufs;
                reference::eval_float(
                    &shape,
                    0.0,
                    &weights,
                    black_box(&x),
                    &mut h,
                    &mut cell,
                    &mut out,
                    [b0, b1, b2, b3],
                )
                .unwrap();
                black_box(&out);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, integer, float);
criterion_main!(benches);
