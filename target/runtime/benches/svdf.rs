//! SVDF per invoke: hilt's scratch-free kernel against TFLM's algorithm
//! step for step (`svdf::reference`, with its scratch buffers), on the
//! shapes of tflm_keyword_scrambled's SVDF layers.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use hilt_runtime::kernels::svdf::{self, SvdfQuantParams, SvdfShape};
use hilt_runtime::schema::ActivationFunctionType;

/// Deterministic pseudo-random numbers (xorshift), so runs are comparable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// (name, input_size, filters, memory): rank 1, batch 1, as in the model.
const LAYERS: &[(&str, u32, u32, u32)] = &[
    ("96x64x8", 96, 64, 8),
    ("16x64x8", 16, 64, 8),
    ("32x32x32", 32, 32, 32),
];

fn integer(c: &mut Criterion) {
    let mut group = c.benchmark_group("svdf_int8_int16_state");
    for &(name, input_size, filters, memory) in LAYERS {
        let shape = SvdfShape {
            batch: 1,
            input_size,
            filters,
            rank: 1,
            memory,
        };
        let quant =
            SvdfQuantParams::from_scales((0.059, -128), 0.0092, 0.0037, (0.0044, 0), (0.236, -128));
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let (n, f, m) = (input_size as usize, filters as usize, memory as usize);
        let input: Vec<i8> = (0..n).map(|_| rng.next() as i8).collect();
        let wf: Vec<i8> = (0..f * n).map(|_| rng.next() as i8).collect();
        let wt: Vec<i16> = (0..f * m).map(|_| (rng.next() as i16) >> 4).collect();
        let bias: Vec<i32> = (0..f).map(|_| (rng.next() as i32) >> 16).collect();
        let mut state = vec![0i16; f * m];
        let mut output = vec![0i8; f];
        let mut scratch = vec![0i32; f];
        let mut scratch_output = vec![0i32; f];
        group.bench_with_input(BenchmarkId::new("hilt", name), &(), |b, _| {
            b.iter(|| {
                svdf::eval_integer(
                    &shape,
                    &quant,
                    black_box(&input),
                    &wf,
                    &wt,
                    Some(&bias),
                    &mut state,
                    &mut output,
                )
                .unwrap();
                black_box(&output);
            })
        });
        group.bench_with_input(BenchmarkId::new("reference", name), &(), |b, _| {
            b.iter(|| {
                svdf::reference::eval_integer(
                    &shape,
                    &quant,
                    black_box(&input),
                    &wf,
                    &wt,
                    Some(&bias),
                    &mut state,
                    &mut output,
                    &mut scratch,
                    &mut scratch_output,
                )
                .unwrap();
                black_box(&output);
            })
        });
    }
    group.finish();
}

fn float(c: &mut Criterion) {
    let mut group = c.benchmark_group("svdf_float");
    let (name, input_size, filters, memory) = LAYERS[0];
    let shape = SvdfShape {
        batch: 1,
        input_size,
        filters,
        rank: 1,
        memory,
    };
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut value = || (rng.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
    let (n, f, m) = (input_size as usize, filters as usize, memory as usize);
    let input: Vec<f32> = (0..n).map(|_| value()).collect();
    let wf: Vec<f32> = (0..f * n).map(|_| value()).collect();
    let wt: Vec<f32> = (0..f * m).map(|_| value()).collect();
    let bias: Vec<f32> = (0..f).map(|_| value()).collect();
    let mut state = vec![0f32; f * m];
    let mut output = vec![0f32; f];
    let mut scratch = vec![0f32; f];
    let relu = ActivationFunctionType::RELU;
    group.bench_function(BenchmarkId::new("hilt", name), |b| {
        b.iter(|| {
            svdf::eval_float(
                &shape,
                relu,
                black_box(&input),
                &wf,
                &wt,
                Some(&bias),
                &mut state,
                &mut output,
            )
            .unwrap();
            black_box(&output);
        })
    });
    group.bench_function(BenchmarkId::new("reference", name), |b| {
        b.iter(|| {
            svdf::reference::eval_float(
                &shape,
                relu,
                black_box(&input),
                &wf,
                &wt,
                Some(&bias),
                &mut state,
                &mut output,
                &mut scratch,
            )
            .unwrap();
            black_box(&output);
        })
    });
    group.finish();
}

criterion_group!(benches, integer, float);
criterion_main!(benches);
