//! UNIDIRECTIONAL_SEQUENCE_LSTM through the interpreter and against TFLM.
//!
//! - hand-checked single-cell cases (float and int8);
//! - the state carried over between invokes (three one-step invokes equal
//!   one three-step invoke);
//! - property tests: the scratch-free kernels against [`lstm::reference`],
//!   TFLM's algorithm stage by stage, bit for bit;
//! - one-op models whose outputs TFLM itself computed (the tflite-micro
//!   Python package the conformance set was made with), pinned in
//!   `tests/data/lstm_tflm.txt`;
//! - the LSTM layers of the conformance models (cut out of them, since the
//!   models' other kernels are separate work) against the LSTM outputs TFLM
//!   computed for the conformance inputs, pinned in
//!   `tests/data/lstm_conformance_tflm.txt`.
//!
//! `tests/tflm/lstm_goldens.py` regenerates both files: run
//! `HILT_LSTM_EXPORT=DIR cargo test -p hilt-runtime --test kernel_lstm -- --ignored
//! export` first, then the script on `DIR`.

use hilt_runtime::allocation::AllocOptions;
use hilt_runtime::interpreter::{Interpreter, InterpreterError};
use hilt_runtime::kernels::lstm::{
    self, GATES, LstmQuantParams, LstmScales, LstmShape, LstmWeights, reference,
};
use hilt_runtime::kernels::{KernelError, all_builtins};
use hilt_runtime::model::Model;
use hilt_runtime::planner::Greedy;
use hilt_runtime::schema::{ActivationFunctionType, BuiltinOperator, TensorType};
use hilt_runtime::writer::{ModelWriter, Options, TensorId, f32_bytes, i32_bytes};
use proptest::prelude::*;

// ---------------------------------------------------------------------------
// One-op models.

#[derive(Debug, Clone, PartialEq)]
struct Int8Quant {
    input: (f32, i32),
    hidden: (f32, i32),
    cell: f32,
    w_in: [f32; GATES],
    w_rec: [f32; GATES],
}

#[derive(Debug, Clone, PartialEq)]
enum Data {
    Float {
        w_in: [Vec<f32>; GATES],
        w_rec: [Vec<f32>; GATES],
        bias: [Vec<f32>; GATES],
    },
    Int8 {
        quant: Int8Quant,
        w_in: [Vec<i8>; GATES],
        w_rec: [Vec<i8>; GATES],
        bias: [Vec<i32>; GATES],
    },
}

#[derive(Debug, Clone, PartialEq)]
struct Spec {
    batch: usize,
    time: usize,
    input: usize,
    state: usize,
    time_major: bool,
    cell_clip: f32,
    data: Data,
}

impl Spec {
    fn shape(&self) -> LstmShape {
        LstmShape {
            batch: self.batch as u32,
            time_steps: self.time as u32,
            input_size: self.input as u32,
            state_size: self.state as u32,
            time_major: u32::from(self.time_major),
        }
    }

    fn io_dims(&self, last: usize) -> [i32; 3] {
        let (b, t) = (self.batch as i32, self.time as i32);
        if self.time_major {
            [t, b, last as i32]
        } else {
            [b, t, last as i32]
        }
    }

    fn is_float(&self) -> bool {
        matches!(self.data, Data::Float { .. })
    }

    fn input_bytes(&self) -> usize {
        self.batch * self.time * self.input * if self.is_float() { 4 } else { 1 }
    }

    fn quant_params(&self) -> Option<LstmQuantParams> {
        let Data::Int8 { quant, .. } = &self.data else {
            return None;
        };
        Some(LstmQuantParams::from_scales(&LstmScales {
            input: quant.input,
            hidden: quant.hidden,
            cell: quant.cell,
            input_weights: quant.w_in.map(|s| (s, 0)),
            recurrent_weights: quant.w_rec.map(|s| (s, 0)),
            cell_clip: self.cell_clip,
        }))
    }

    /// The one-op model.
    fn model(&self) -> Vec<u8> {
        let mut w = ModelWriter::new();
        let (s, i) = (self.state as i32, self.input as i32);
        let mut inputs: Vec<Option<TensorId>> = vec![None; 24];
        let (x, out, hidden, cell);
        match &self.data {
            Data::Float { w_in, w_rec, bias } => {
                x = w.input("input", TensorType::FLOAT32, &self.io_dims(self.input));
                for g in 0..GATES {
                    let name = format!("w_in{g}");
                    inputs[1 + g] =
                        Some(w.constant(&name, TensorType::FLOAT32, &[s, i], &f32_bytes(&w_in[g])));
                    let name = format!("w_rec{g}");
                    inputs[5 + g] = Some(w.constant(
                        &name,
                        TensorType::FLOAT32,
                        &[s, s],
                        &f32_bytes(&w_rec[g]),
                    ));
                    let name = format!("bias{g}");
                    inputs[12 + g] =
                        Some(w.constant(&name, TensorType::FLOAT32, &[s], &f32_bytes(&bias[g])));
                }
                hidden = w.variable("hidden", TensorType::FLOAT32, &[self.batch as i32, s]);
                cell = w.variable("cell", TensorType::FLOAT32, &[self.batch as i32, s]);
                out = w.output("output", TensorType::FLOAT32, &self.io_dims(self.state));
            }
            Data::Int8 {
                quant,
                w_in,
                w_rec,
                bias,
            } => {
                x = w.input("input", TensorType::INT8, &self.io_dims(self.input));
                w.quantize(x, quant.input.0, i64::from(quant.input.1));
                for g in 0..GATES {
                    let bytes: Vec<u8> = w_in[g].iter().map(|&v| v as u8).collect();
                    let t = w.constant(&format!("w_in{g}"), TensorType::INT8, &[s, i], &bytes);
                    w.quantize(t, quant.w_in[g], 0);
                    inputs[1 + g] = Some(t);
                    let bytes: Vec<u8> = w_rec[g].iter().map(|&v| v as u8).collect();
                    let t = w.constant(&format!("w_rec{g}"), TensorType::INT8, &[s, s], &bytes);
                    w.quantize(t, quant.w_rec[g], 0);
                    inputs[5 + g] = Some(t);
                    let t = w.constant(
                        &format!("bias{g}"),
                        TensorType::INT32,
                        &[s],
                        &i32_bytes(&bias[g]),
                    );
                    w.quantize(t, quant.input.0 * quant.w_in[g], 0);
                    inputs[12 + g] = Some(t);
                }
                hidden = w.variable("hidden", TensorType::INT8, &[self.batch as i32, s]);
                w.quantize(hidden, quant.hidden.0, i64::from(quant.hidden.1));
                cell = w.variable("cell", TensorType::INT16, &[self.batch as i32, s]);
                w.quantize(cell, quant.cell, 0);
                out = w.output("output", TensorType::INT8, &self.io_dims(self.state));
                w.quantize(out, quant.hidden.0, i64::from(quant.hidden.1));
            }
        }
        inputs[0] = Some(x);
        inputs[18] = Some(hidden);
        inputs[19] = Some(cell);
        w.op(
            BuiltinOperator::UNIDIRECTIONAL_SEQUENCE_LSTM,
            &inputs,
            &[out],
            Options::UnidirectionalSequenceLstm {
                activation: ActivationFunctionType::TANH,
                cell_clip: self.cell_clip,
                proj_clip: 0.0,
                time_major: self.time_major,
            },
        );
        w.finish()
    }
}

/// Runs `model` once per input on one interpreter; returns each output and
/// the arena figures.
fn run(model: &[u8], inputs: &[Vec<u8>]) -> (Vec<Vec<u8>>, RunInfo) {
    let model = Model::from_bytes(model).expect("valid model");
    let resolver = all_builtins();
    let mut arena = vec![0u8; 1 << 20];
    let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
    let allocation = *interpreter
        .allocate(&Greedy, &AllocOptions::default())
        .expect("allocate");
    let info = RunInfo {
        head: allocation.head.len as usize,
        used: interpreter.arena_used_bytes(),
    };
    let mut outputs = Vec::new();
    for input in inputs {
        interpreter.input_mut(0).unwrap().copy_from_slice(input);
        interpreter.invoke().expect("invoke");
        outputs.push(
            (0..interpreter.output_count())
                .flat_map(|o| interpreter.output(o).unwrap().to_vec())
                .collect(),
        );
    }
    (outputs, info)
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[derive(Debug, Clone, Copy)]
struct RunInfo {
    head: usize,
    used: usize,
}

/// A small deterministic generator, so the TFLM-checked cases are the same
/// on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
    fn i8s(&mut self, n: usize, lo: i64, hi: i64) -> Vec<i8> {
        (0..n).map(|_| self.range(lo, hi) as i8).collect()
    }
    fn f32s(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.unit() * scale).collect()
    }
}

// ---------------------------------------------------------------------------
// Hand-checked cases.

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// One cell, one feature: every quantity by hand.
#[test]
fn float_single_cell_by_hand() {
    let spec = Spec {
        batch: 1,
        time: 2,
        input: 1,
        state: 1,
        time_major: false,
        cell_clip: 0.0,
        data: Data::Float {
            // input, forget, cell, output gates
            w_in: [vec![0.5], vec![-0.25], vec![1.0], vec![0.75]],
            w_rec: [vec![0.1], vec![0.2], vec![-0.3], vec![0.4]],
            bias: [vec![0.0], vec![1.0], vec![0.0], vec![-0.5]],
        },
    };
    let xs = [0.8f32, -0.6];
    let (outputs, info) = run(&spec.model(), &[f32_bytes(&xs)]);
    let got: Vec<f32> = f32s(&outputs[0]);

    let (mut h, mut c) = (0.0f64, 0.0f64);
    let mut want = Vec::new();
    for &x in &xs {
        let x = f64::from(x);
        let i = sigmoid(0.5 * x + 0.1 * h);
        let f = sigmoid(-0.25 * x + 0.2 * h + 1.0);
        let g = (x - 0.3 * h).tanh();
        let o = sigmoid(0.75 * x + 0.4 * h - 0.5);
        c = f * c + i * g;
        h = o * c.tanh();
        want.push(h);
    }
    for (g, w) in got.iter().zip(&want) {
        assert!((f64::from(*g) - w).abs() < 1e-6, "{got:?} vs {want:?}");
    }
    // No scratch: the head holds the input and the output only.
    assert_eq!(info.head, 16 + 16);
}

/// Zero weights, biases on exact Q3.12 values: the gates are table lookups
/// and the cell and hidden states follow by hand.
#[test]
fn int8_single_cell_by_hand() {
    // input · weight scale = 2^-12: the FC multiplier is exactly 1, so each
    // gate's pre-activation is its bias in Q3.12.
    let quant = Int8Quant {
        input: (1.0 / 16.0, 0),
        hidden: (1.0 / 128.0, 0),
        cell: 1.0 / 4096.0,
        w_in: [1.0 / 256.0; GATES],
        w_rec: [1.0 / 256.0; GATES],
    };
    let spec = Spec {
        batch: 1,
        time: 2,
        input: 1,
        state: 1,
        time_major: false,
        cell_clip: 0.0,
        data: Data::Int8 {
            quant,
            w_in: [vec![0], vec![0], vec![0], vec![0]],
            w_rec: [vec![0], vec![0], vec![0], vec![0]],
            // i = σ(1), f = σ(0), g = tanh(1), o = σ(2)
            bias: [vec![4096], vec![0], vec![4096], vec![8192]],
        },
    };
    let (outputs, _) = run(&spec.model(), &[vec![0, 0]]);
    // σ(1) = 23956, tanh(1) = 24956, σ(0) = 16384, σ(2) = table[48] =
    // (57724 · 2^9 + 2^9) >> 10 = 28862 (Q0.15).
    let (i, f, g, o) = (23956i64, 16384i64, 24956i64, 28862i64);
    // Step 1: c = i·g · 2^-30 / 2^-12 = i·g / 2^18, rounded.
    let c1 = (i * g + (1 << 17)) >> 18;
    assert_eq!(c1, 2281);
    // h = tanh(c) · o · 2^-30 / 2^-7 = tanh(c)·o / 2^23, rounded.
    let tanh_c1 = f64::from(2281.0f32 / 4096.0).tanh();
    let h1 = (tanh_c1 * 32768.0 * o as f64 / f64::from(1 << 23)).round() as i64;
    // Step 2: c = f·c/2^15 + i·g/2^18.
    let c2 = ((f * c1 + (1 << 14)) >> 15) + c1;
    let tanh_c2 = (c2 as f64 / 4096.0).tanh();
    let h2 = (tanh_c2 * 32768.0 * o as f64 / f64::from(1 << 23)).round() as i64;
    let got: Vec<i64> = outputs[0].iter().map(|&b| i64::from(b as i8)).collect();
    // The table's interpolation is within one step of the real tanh.
    assert!((got[0] - h1).abs() <= 1, "{got:?} vs {h1}, {h2}");
    assert!((got[1] - h2).abs() <= 1, "{got:?} vs {h1}, {h2}");
    assert_eq!(got, [h1, h2], "exact here");
}

// ---------------------------------------------------------------------------
// Random specs.

fn random_int8_spec(rng: &mut Rng, shape: (usize, usize, usize, usize), time_major: bool) -> Spec {
    let (batch, time, input, state) = shape;
    let scale = |rng: &mut Rng, lo: f32, hi: f32| lo + (hi - lo) * (rng.unit() * 0.5 + 0.5);
    let quant = Int8Quant {
        input: (scale(rng, 0.01, 0.1), rng.range(-128, 127) as i32),
        hidden: (scale(rng, 0.004, 0.01), rng.range(-10, 10) as i32),
        cell: [1.0 / 2048.0, 1.0 / 4096.0, 1.0 / 32768.0][rng.range(0, 2) as usize],
        w_in: [0; GATES].map(|_| scale(rng, 0.005, 0.05)),
        w_rec: [0; GATES].map(|_| scale(rng, 0.005, 0.05)),
    };
    let mut vecs = |n: usize| [0; GATES].map(|_| rng.i8s(n, -127, 127));
    let w_in = vecs(state * input);
    let w_rec = vecs(state * state);
    let bias = [0; GATES].map(|_| {
        (0..state)
            .map(|_| rng.range(-20_000, 20_000) as i32)
            .collect()
    });
    let cell_clip = [0.0, 10.0, 0.75][rng.range(0, 2) as usize];
    Spec {
        batch,
        time,
        input,
        state,
        time_major,
        cell_clip,
        data: Data::Int8 {
            quant,
            w_in,
            w_rec,
            bias,
        },
    }
}

fn random_float_spec(rng: &mut Rng, shape: (usize, usize, usize, usize), time_major: bool) -> Spec {
    let (batch, time, input, state) = shape;
    let mut vecs = |n: usize, s: f32| [0; GATES].map(|_| rng.f32s(n, s));
    let w_in = vecs(state * input, 0.8);
    let w_rec = vecs(state * state, 0.8);
    let bias = vecs(state, 0.5);
    Spec {
        batch,
        time,
        input,
        state,
        time_major,
        cell_clip: [0.0, 10.0, 0.5][(rng.next() % 3) as usize],
        data: Data::Float { w_in, w_rec, bias },
    }
}

fn random_input(rng: &mut Rng, spec: &Spec) -> Vec<u8> {
    let n = spec.batch * spec.time * spec.input;
    if spec.is_float() {
        f32_bytes(&rng.f32s(n, 2.0))
    } else {
        rng.i8s(n, -128, 127).iter().map(|&v| v as u8).collect()
    }
}

// ---------------------------------------------------------------------------
// Kernel against reference, directly.

/// Runs the kernel and the reference over `inputs` (one invoke each) with
/// their own state, asserting identical outputs and states every time.
fn assert_kernel_matches_reference(spec: &Spec, inputs: &[Vec<u8>]) {
    let shape = spec.shape();
    let n = spec.batch * spec.state;
    let out_len = spec.batch * spec.time * spec.state;
    let len = shape.rows_per_step() * spec.state;
    match &spec.data {
        Data::Float { w_in, w_rec, bias } => {
            let weights = LstmWeights {
                input: [0, 1, 2, 3].map(|g| w_in[g].as_slice()),
                recurrent: [0, 1, 2, 3].map(|g| w_rec[g].as_slice()),
                bias: [0, 1, 2, 3].map(|g| bias[g].as_slice()),
            };
            let (mut h1, mut c1, mut h2, mut c2) =
                (vec![0f32; n], vec![0f32; n], vec![0f32; n], vec![0f32; n]);
            let mut bufs = [0; 4].map(|_| vec![0f32; len]);
            for x in inputs {
                let x: Vec<f32> = f32s(x);
                let (mut o1, mut o2) = (vec![0f32; out_len], vec![0f32; out_len]);
                lstm::eval_float(
                    &shape,
                    spec.cell_clip,
                    &weights,
                    &x,
                    &mut h1,
                    &mut c1,
                    &mut o1,
                )
                .unwrap();
                let [b0, b1, b2, b3] = &mut bufs;
                reference::eval_float(
                    &shape,
                    spec.cell_clip,
                    &weights,
                    &x,
                    &mut h2,
                    &mut c2,
                    &mut o2,
                    [b0, b1, b2, b3],
                )
                .unwrap();
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&o1), bits(&o2), "output");
                assert_eq!(bits(&h1), bits(&h2), "hidden");
                assert_eq!(bits(&c1), bits(&c2), "cell");
            }
        }
        Data::Int8 {
            quant,
            w_in,
            w_rec,
            bias,
        } => {
            let q = spec.quant_params().unwrap();
            let weights = LstmWeights {
                input: [0, 1, 2, 3].map(|g| w_in[g].as_slice()),
                recurrent: [0, 1, 2, 3].map(|g| w_rec[g].as_slice()),
                bias: [0, 1, 2, 3].map(|g| bias[g].as_slice()),
            };
            let zp = quant.hidden.1 as i8;
            let (mut h1, mut c1, mut h2, mut c2) =
                (vec![zp; n], vec![0i16; n], vec![zp; n], vec![0i16; n]);
            let mut bufs = [0; 4].map(|_| vec![0i16; len]);
            for x in inputs {
                let x: Vec<i8> = x.iter().map(|&b| b as i8).collect();
                let (mut o1, mut o2) = (vec![0i8; out_len], vec![0i8; out_len]);
                lstm::eval_integer(&shape, &q, &weights, &x, &mut h1, &mut c1, &mut o1).unwrap();
                let [b0, b1, b2, b3] = &mut bufs;
                reference::eval_integer(
                    &shape,
                    &q,
                    &weights,
                    &x,
                    &mut h2,
                    &mut c2,
                    &mut o2,
                    [b0, b1, b2, b3],
                )
                .unwrap();
                assert_eq!(o1, o2, "output");
                assert_eq!(h1, h2, "hidden");
                assert_eq!(c1, c2, "cell");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn int8_kernel_matches_reference(
        seed in 1u64..u64::MAX,
        shape in (1usize..=3, 1usize..=4, 1usize..=9, 1usize..=9),
        time_major in any::<bool>(),
    ) {
        let mut rng = Rng(seed);
        let spec = random_int8_spec(&mut rng, shape, time_major);
        let inputs: Vec<_> = (0..3).map(|_| random_input(&mut rng, &spec)).collect();
        assert_kernel_matches_reference(&spec, &inputs);
    }

    #[test]
    fn float_kernel_matches_reference(
        seed in 1u64..u64::MAX,
        shape in (1usize..=3, 1usize..=4, 1usize..=9, 1usize..=9),
        time_major in any::<bool>(),
    ) {
        let mut rng = Rng(seed);
        let spec = random_float_spec(&mut rng, shape, time_major);
        let inputs: Vec<_> = (0..3).map(|_| random_input(&mut rng, &spec)).collect();
        assert_kernel_matches_reference(&spec, &inputs);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Rows long enough for every SIMD chunk (16, 8, 4 and the 0–3 scalar
    /// rest) and state sizes on both sides of the float path's four-cell
    /// blocks.
    #[test]
    fn int8_kernel_matches_reference_long_rows(
        seed in 1u64..u64::MAX,
        shape in (1usize..=2, 1usize..=3, 1usize..=40, 1usize..=40),
        time_major in any::<bool>(),
    ) {
        let mut rng = Rng(seed);
        let spec = random_int8_spec(&mut rng, shape, time_major);
        let inputs: Vec<_> = (0..2).map(|_| random_input(&mut rng, &spec)).collect();
        assert_kernel_matches_reference(&spec, &inputs);
    }

    #[test]
    fn float_kernel_matches_reference_long_rows(
        seed in 1u64..u64::MAX,
        shape in (1usize..=2, 1usize..=3, 1usize..=40, 1usize..=40),
        time_major in any::<bool>(),
    ) {
        let mut rng = Rng(seed);
        let spec = random_float_spec(&mut rng, shape, time_major);
        let inputs: Vec<_> = (0..2).map(|_| random_input(&mut rng, &spec)).collect();
        assert_kernel_matches_reference(&spec, &inputs);
    }
}

/// The fast gate dot products (SSE2 on x86-64) against the plain ones, for
/// every length up to 80 and offsets across the int8 range, zero weight
/// offsets (the common case, its own loop) and non-zero ones, and offsets
/// outside the int8 range (which take the plain path).
#[test]
fn gate_dots_match_portable() {
    let mut rng = Rng(11);
    for n in 0..=80 {
        for trial in 0..12 {
            let rows: Vec<Vec<i8>> = (0..GATES).map(|_| rng.i8s(n + 3, -128, 127)).collect();
            let x = rng.i8s(n, -128, 127);
            let x_offset = [128, -127, 0, rng.range(-127, 128) as i32][trial % 4];
            let w_offsets = match trial % 3 {
                0 => [0; GATES],
                1 => [0, 1, 2, 3].map(|_| rng.range(-128, 128) as i32),
                _ => [0, 1, 2, 3].map(|_| rng.range(-40_000, 40_000) as i32),
            };
            // Rows longer than `x`: the dots read only their first n.
            let rows = [0, 1, 2, 3].map(|g| &rows[g][..]);
            let rows = rows.map(|r| &r[..n]);
            assert_eq!(
                lstm::gate_dots(rows, &x, w_offsets, x_offset),
                lstm::gate_dots_portable(rows, &x, w_offsets, x_offset),
                "n {n} trial {trial}"
            );
        }
    }
}

/// The float path's four-cell dots (SSE2 on x86-64) against one cell at a
/// time, bit for bit, including infinities and NaN from huge values.
#[test]
fn float_dots_cells_match_portable() {
    let mut rng = Rng(5);
    for n in 0..=40 {
        for cells in [lstm::CELLS, lstm::CELLS + 3, 3 * lstm::CELLS] {
            let mut w: Vec<Vec<f32>> = (0..GATES).map(|_| rng.f32s(cells * n, 3.0)).collect();
            let mut x = rng.f32s(n, 2.0);
            if n > 2 {
                w[1][n - 1] = 3.0e38;
                x[n - 2] = 3.0e38;
                w[2][1] = f32::NAN;
            }
            let w = [0, 1, 2, 3].map(|g| &w[g][..]);
            for j in 0..=cells - lstm::CELLS {
                let bits = |d: [[f32; lstm::CELLS]; GATES]| d.map(|g| g.map(f32::to_bits));
                assert_eq!(
                    bits(lstm::dots_cells(&w, j, &x)),
                    bits(lstm::dots_cells_portable(&w, j, &x)),
                    "n {n} cells {cells} j {j}"
                );
            }
        }
    }
}

/// Saturation everywhere: the largest weights, biases and inputs, so every
/// int16 clamp (FC outputs, gate sums, cell products and sums) is hit.
#[test]
fn int8_saturating_extremes_match_reference() {
    let mut rng = Rng(7);
    for time_major in [false, true] {
        let mut spec = random_int8_spec(&mut rng, (2, 3, 5, 4), time_major);
        if let Data::Int8 {
            quant,
            w_in,
            w_rec,
            bias,
        } = &mut spec.data
        {
            quant.w_in = [0.5; GATES];
            quant.w_rec = [0.5; GATES];
            quant.cell = 1.0 / 32768.0;
            for g in 0..GATES {
                w_in[g]
                    .iter_mut()
                    .for_each(|w| *w = if *w > 0 { 127 } else { -128 });
                bias[g]
                    .iter_mut()
                    .for_each(|b| *b = b.signum() * 2_000_000_000);
            }
            w_rec[0][0] = -128;
        }
        let inputs: Vec<_> = (0..3).map(|_| random_input(&mut rng, &spec)).collect();
        assert_kernel_matches_reference(&spec, &inputs);
    }
}

// ---------------------------------------------------------------------------
// Through the interpreter.

/// Three one-step invokes carry the state over exactly as one three-step
/// invoke does.
#[test]
fn state_carries_over_between_invokes() {
    let mut rng = Rng(0x5eed);
    for float in [false, true] {
        let step = if float {
            random_float_spec(&mut rng, (1, 1, 6, 5), false)
        } else {
            random_int8_spec(&mut rng, (1, 1, 6, 5), false)
        };
        let whole = Spec {
            time: 3,
            ..step.clone()
        };
        let inputs: Vec<_> = (0..3).map(|_| random_input(&mut rng, &step)).collect();
        let (stepped, _) = run(&step.model(), &inputs);
        let (once, _) = run(&whole.model(), &[inputs.concat()]);
        assert_eq!(stepped.concat(), once[0], "float: {float}");
    }
}

/// The interpreter runs the kernel the property tests checked.
#[test]
fn interpreter_runs_the_kernel() {
    let mut rng = Rng(99);
    for (float, time_major) in [(false, false), (false, true), (true, false), (true, true)] {
        let shape = (2, 3, 7, 5);
        let spec = if float {
            random_float_spec(&mut rng, shape, time_major)
        } else {
            random_int8_spec(&mut rng, shape, time_major)
        };
        let inputs: Vec<_> = (0..3).map(|_| random_input(&mut rng, &spec)).collect();
        let (outputs, info) = run(&spec.model(), &inputs);
        assert_eq!(outputs.len(), 3);
        // Head: input and output only, no kernel scratch.
        let out_bytes = spec.batch * spec.time * spec.state * if float { 4 } else { 1 };
        let round = |n: usize| n.div_ceil(16) * 16;
        assert_eq!(info.head, round(spec.input_bytes()) + round(out_bytes));
        assert!(info.used > info.head);
        assert_kernel_matches_reference(&spec, &inputs);
    }
}

#[test]
fn refuses_what_tflm_refuses() {
    let mut rng = Rng(3);
    let spec = random_int8_spec(&mut rng, (1, 2, 3, 4), false);
    let model = spec.model();
    let ok = Model::from_bytes(&model).unwrap();
    let resolver = all_builtins();
    let mut arena = vec![0u8; 1 << 16];
    assert!(
        Interpreter::new(ok, &resolver, &mut arena)
            .allocate(&Greedy, &AllocOptions::default())
            .is_ok()
    );

    // A non-TANH activation.
    let mut w = ModelWriter::new();
    let x = w.input("x", TensorType::FLOAT32, &[1, 1, 2]);
    let mut inputs: Vec<Option<TensorId>> = vec![None; 24];
    inputs[0] = Some(x);
    for g in 0..GATES {
        inputs[1 + g] = Some(w.constant("wi", TensorType::FLOAT32, &[3, 2], &f32_bytes(&[0.0; 6])));
        inputs[5 + g] = Some(w.constant("wr", TensorType::FLOAT32, &[3, 3], &f32_bytes(&[0.0; 9])));
        inputs[12 + g] = Some(w.constant("b", TensorType::FLOAT32, &[3], &f32_bytes(&[0.0; 3])));
    }
    inputs[18] = Some(w.variable("h", TensorType::FLOAT32, &[1, 3]));
    inputs[19] = Some(w.variable("c", TensorType::FLOAT32, &[1, 3]));
    let y = w.output("y", TensorType::FLOAT32, &[1, 1, 3]);
    let base = w.clone();
    let options = |activation| Options::UnidirectionalSequenceLstm {
        activation,
        cell_clip: 0.0,
        proj_clip: 0.0,
        time_major: false,
    };
    let try_model = |w: &ModelWriter| {
        let bytes = w.finish();
        let model = Model::from_bytes(&bytes).unwrap();
        let mut arena = vec![0u8; 1 << 16];
        let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
        match interpreter.allocate(&Greedy, &AllocOptions::default()) {
            Ok(_) => Ok(()),
            Err(InterpreterError::Kernel { error, .. }) => Err(error),
            Err(other) => panic!("not a kernel error: {other}"),
        }
    };
    let mut good = base.clone();
    good.op(
        BuiltinOperator::UNIDIRECTIONAL_SEQUENCE_LSTM,
        &inputs,
        &[y],
        options(ActivationFunctionType::TANH),
    );
    assert!(try_model(&good).is_ok());

    let mut relu = base.clone();
    relu.op(
        BuiltinOperator::UNIDIRECTIONAL_SEQUENCE_LSTM,
        &inputs,
        &[y],
        options(ActivationFunctionType::RELU),
    );
    assert_eq!(
        try_model(&relu),
        Err(KernelError::UnsupportedParameter {
            what: "LSTM activation must be TANH"
        })
    );

    // A peephole weight.
    let mut peephole = base.clone();
    let p = peephole.constant("p", TensorType::FLOAT32, &[3], &f32_bytes(&[0.0; 3]));
    let mut with_peephole = inputs.clone();
    with_peephole[10] = Some(p);
    peephole.op(
        BuiltinOperator::UNIDIRECTIONAL_SEQUENCE_LSTM,
        &with_peephole,
        &[y],
        options(ActivationFunctionType::TANH),
    );
    assert!(matches!(
        try_model(&peephole),
        Err(KernelError::UnsupportedParameter { .. })
    ));

    // A state that is not a variable tensor.
    let mut plain = base.clone();
    let h = plain.tensor("h2", TensorType::FLOAT32, &[1, 3]);
    let mut with_plain = inputs.clone();
    with_plain[18] = Some(h);
    plain.mark_input(h);
    plain.op(
        BuiltinOperator::UNIDIRECTIONAL_SEQUENCE_LSTM,
        &with_plain,
        &[y],
        options(ActivationFunctionType::TANH),
    );
    assert_eq!(
        try_model(&plain),
        Err(KernelError::NotVariable { position: 18 })
    );

    // Hybrid (float input, int8 weights): TFLM micro has no such path.
    let mut hybrid = base.clone();
    let q = hybrid.constant("q", TensorType::INT8, &[3, 2], &[0; 6]);
    hybrid.quantize(q, 0.1, 0);
    let mut with_hybrid = inputs.clone();
    with_hybrid[1] = Some(q);
    hybrid.op(
        BuiltinOperator::UNIDIRECTIONAL_SEQUENCE_LSTM,
        &with_hybrid,
        &[y],
        options(ActivationFunctionType::TANH),
    );
    assert_eq!(
        try_model(&hybrid),
        Err(KernelError::UnsupportedType {
            tensor: q.0,
            dtype: TensorType::INT8.0
        })
    );

    // Wrong recurrent weight shape.
    let mut bad = base;
    let r = bad.constant("r", TensorType::FLOAT32, &[3, 2], &f32_bytes(&[0.0; 6]));
    let mut with_bad = inputs;
    with_bad[6] = Some(r);
    bad.op(
        BuiltinOperator::UNIDIRECTIONAL_SEQUENCE_LSTM,
        &with_bad,
        &[y],
        options(ActivationFunctionType::TANH),
    );
    assert_eq!(
        try_model(&bad),
        Err(KernelError::ShapeMismatch { tensor: r.0 })
    );
}

// ---------------------------------------------------------------------------
// Against TFLM's own outputs.

/// The one-op cases TFLM ran: every path (batch- and time-major, several
/// batches, zero points, cell scales 2^-11/2^-12/2^-15, clips, saturation).
fn tflm_cases() -> Vec<(String, Spec, Vec<Vec<u8>>)> {
    let int8_shapes = [
        (1, 3, 6, 5, false),
        (2, 2, 5, 4, false),
        (3, 2, 4, 6, true),
        (1, 2, 17, 12, false),
        (2, 3, 9, 7, true),
        (1, 1, 3, 2, false),
        (2, 1, 8, 8, false),
        (1, 4, 10, 3, true),
        (3, 1, 2, 9, false),
        (1, 2, 33, 16, false),
    ];
    let float_shapes = [
        (1, 3, 6, 5, false),
        (2, 3, 4, 5, true),
        (2, 2, 7, 3, false),
        (1, 2, 20, 10, false),
    ];
    let mut cases = Vec::new();
    for (k, &(b, t, i, s, tm)) in int8_shapes.iter().enumerate() {
        let mut rng = Rng(1000 + k as u64);
        let spec = random_int8_spec(&mut rng, (b, t, i, s), tm);
        let inputs = (0..3).map(|_| random_input(&mut rng, &spec)).collect();
        cases.push((format!("int8_{k}"), spec, inputs));
    }
    // Saturation: extreme weights, biases and scales.
    let mut rng = Rng(2000);
    let mut spec = random_int8_spec(&mut rng, (2, 3, 5, 4), false);
    if let Data::Int8 {
        quant, w_in, bias, ..
    } = &mut spec.data
    {
        quant.w_in = [0.5; GATES];
        quant.w_rec = [0.5; GATES];
        quant.cell = 1.0 / 32768.0;
        for g in 0..GATES {
            w_in[g]
                .iter_mut()
                .for_each(|w| *w = if *w > 0 { 127 } else { -128 });
            bias[g]
                .iter_mut()
                .for_each(|b| *b = b.signum() * 2_000_000_000);
        }
    }
    let inputs = (0..3).map(|_| random_input(&mut rng, &spec)).collect();
    cases.push(("int8_saturating".into(), spec, inputs));
    for (k, &(b, t, i, s, tm)) in float_shapes.iter().enumerate() {
        let mut rng = Rng(3000 + k as u64);
        let spec = random_float_spec(&mut rng, (b, t, i, s), tm);
        let inputs = (0..3).map(|_| random_input(&mut rng, &spec)).collect();
        cases.push((format!("float_{k}"), spec, inputs));
    }
    cases
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// `key → bytes` from a golden file: lines `KEY… HEX`, `#` comments.
fn goldens(text: &str) -> std::collections::HashMap<String, Vec<u8>> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (key, data) = l.rsplit_once(' ').expect("KEY HEX");
            (key.to_string(), unhex(data))
        })
        .collect()
}

/// Float outputs: within the conformance tolerance first (a clearer message),
/// then bit for bit: the kernel rounds `expf` and `tanhf` as the C
/// libraries under TFLM do.
fn compare_f32(got: &[u8], want: &[u8], what: &str) {
    let (got, want) = (f32s(got), f32s(want));
    assert_eq!(got.len(), want.len(), "{what}");
    let mut inexact = 0;
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 + 1e-4 * w.abs(),
            "{what}[{k}]: {g} vs {w}"
        );
        inexact += usize::from(g.to_bits() != w.to_bits());
    }
    assert_eq!(
        inexact, 0,
        "{what}: values within tolerance but not bit-identical"
    );
}

#[test]
fn one_op_models_match_tflm() {
    let goldens = goldens(include_str!("data/lstm_tflm.txt"));
    for (name, spec, inputs) in tflm_cases() {
        let (outputs, _) = run(&spec.model(), &inputs);
        for (k, got) in outputs.iter().enumerate() {
            let key = format!("{name} {k}");
            let want = goldens
                .get(&key)
                .unwrap_or_else(|| panic!("no golden for {key}"));
            if spec.is_float() {
                compare_f32(got, want, &key);
            } else {
                assert_eq!(hex(got), hex(want), "{key}");
            }
        }
    }
}

/// Writes the one-op models and their inputs to `HILT_LSTM_EXPORT` for
/// `tests/tflm/lstm_goldens.py`.
#[test]
#[ignore = "regenerates TFLM goldens: needs HILT_LSTM_EXPORT and the Python package"]
fn export_cases_for_tflm() {
    let dir = std::path::PathBuf::from(
        std::env::var_os("HILT_LSTM_EXPORT").expect("set HILT_LSTM_EXPORT"),
    );
    std::fs::create_dir_all(&dir).unwrap();
    for (name, spec, inputs) in tflm_cases() {
        std::fs::write(dir.join(format!("{name}.tflite")), spec.model()).unwrap();
        for (k, input) in inputs.iter().enumerate() {
            std::fs::write(dir.join(format!("{name}.step{k}.bin")), input).unwrap();
        }
    }
}

/// The conformance models whose LSTM layers are checked: model name and
/// the LSTM output tensors TFLM's goldens hold (in op order).
const CONFORMANCE: [&str; 3] = [
    "tflm_mnist_lstm_int8",
    "tflm_mnist_lstm_float",
    "tflm_dtln_noise_suppression",
];

fn conformance_dir() -> Option<std::path::PathBuf> {
    let dir = match std::env::var_os("HILT_CONFORMANCE_DIR") {
        Some(dir) => std::path::PathBuf::from(dir),
        None => {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance")
        }
    };
    if dir.join("manifest.json").is_file() {
        return Some(dir);
    }
    let required = std::env::var("HILT_CONFORMANCE_REQUIRED").is_ok_and(|v| v == "1");
    assert!(!required, "conformance set not found at {}", dir.display());
    eprintln!("conformance set not found at {}: skipped", dir.display());
    None
}

/// A model of `source`'s LSTM operators alone, in order: the first one's
/// input is the model input, every LSTM output is a model output. Tensors
/// (constants, variables, quantisation) and options are copied as they are.
fn lstm_layers(source: &[u8]) -> Vec<u8> {
    use hilt_runtime::model::OpCode;
    let model = Model::from_bytes(source).unwrap();
    let mut w = ModelWriter::new();
    let mut copied = std::collections::HashMap::new();
    let mut copy = |w: &mut ModelWriter, index: u32| -> TensorId {
        *copied.entry(index).or_insert_with(|| {
            let t = model.tensor(index).unwrap();
            let shape: Vec<i32> = t.shape().collect();
            let id = match t.constant {
                Some(data) => w.constant(t.name, t.dtype, &shape, data),
                None if t.is_variable => w.variable(t.name, t.dtype, &shape),
                None => w.tensor(t.name, t.dtype, &shape),
            };
            if let Some(q) = t.raw().quantization()
                && let Some(scale) = q.scale()
            {
                let zero_point: Vec<i64> = q.zero_point().map_or(vec![], |z| z.iter().collect());
                let scale: Vec<f32> = scale.iter().collect();
                w.quantize_per_channel(id, &scale, &zero_point, q.quantized_dimension());
            }
            id
        })
    };
    let lstm = |op: &hilt_runtime::model::OperatorInfo<'_>| {
        op.code == OpCode::Builtin(BuiltinOperator::UNIDIRECTIONAL_SEQUENCE_LSTM)
    };
    for (k, op) in model.operators().filter(lstm).enumerate() {
        let inputs: Vec<Option<TensorId>> =
            op.inputs().map(|t| t.map(|t| copy(&mut w, t))).collect();
        if k == 0 {
            w.mark_input(inputs[0].unwrap());
        }
        let out = copy(&mut w, op.outputs().next().flatten().unwrap());
        w.mark_output(out);
        let o = op
            .raw()
            .builtin_options_as_unidirectional_sequence_lstmoptions()
            .unwrap();
        w.op(
            BuiltinOperator::UNIDIRECTIONAL_SEQUENCE_LSTM,
            &inputs,
            &[out],
            Options::UnidirectionalSequenceLstm {
                activation: o.fused_activation_function(),
                cell_clip: o.cell_clip(),
                proj_clip: o.proj_clip(),
                time_major: o.time_major(),
            },
        );
    }
    w.finish()
}

#[test]
fn conformance_lstm_layers_match_tflm() {
    let Some(dir) = conformance_dir() else {
        return;
    };
    let goldens = goldens(include_str!("data/lstm_conformance_tflm.txt"));
    for name in CONFORMANCE {
        let source = std::fs::read(dir.join(format!("models/{name}.tflite"))).unwrap();
        let layers = lstm_layers(&source);
        let mut checked = 0;
        for case in 0..3 {
            let inputs: Vec<Vec<u8>> = (0..3)
                .map(|step| {
                    std::fs::read(
                        dir.join(format!("cases/{name}/case{case}_step{step}_input0.bin")),
                    )
                    .unwrap()
                })
                .collect();
            let (outputs, _) = run(&layers, &inputs);
            for (step, got) in outputs.iter().enumerate() {
                let key = format!("{name} {case} {step}");
                let want = goldens
                    .get(&key)
                    .unwrap_or_else(|| panic!("no golden for {key}"));
                if name.contains("float") {
                    compare_f32(got, want, &key);
                } else {
                    assert_eq!(hex(got), hex(want), "{key}");
                }
                checked += got.len();
            }
        }
        println!("{name}: {checked} output bytes identical to TFLM's");
    }
}

/// Writes the conformance models' LSTM layers to `HILT_LSTM_EXPORT` (for
/// reference; the script reads the full models).
#[test]
#[ignore = "regenerates TFLM goldens: needs HILT_LSTM_EXPORT"]
fn export_conformance_layers() {
    let Some(dir) = conformance_dir() else {
        return;
    };
    let out = std::path::PathBuf::from(
        std::env::var_os("HILT_LSTM_EXPORT").expect("set HILT_LSTM_EXPORT"),
    );
    std::fs::create_dir_all(&out).unwrap();
    for name in CONFORMANCE {
        let source = std::fs::read(dir.join(format!("models/{name}.tflite"))).unwrap();
        std::fs::write(
            out.join(format!("layers_{name}.tflite.model")),
            lstm_layers(&source),
        )
        .unwrap();
    }
}

/// CPU time of this thread (a shared machine's load does not count).
fn thread_cpu_seconds() -> f64 {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    unsafe extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: a valid pointer to a timespec-shaped struct (64-bit Linux).
    unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.sec as f64 + ts.nsec as f64 * 1e-9
}

/// Median CPU time per invoke of the conformance models' LSTM layers (run with
/// `--release -- --ignored --nocapture`; compare with TFLM timed the same
/// way on the same machine, see `tests/tflm/lstm_goldens.py --time`).
#[test]
#[ignore = "timing: run in release"]
fn time_conformance_layers() {
    let Some(dir) = conformance_dir() else {
        return;
    };
    for name in CONFORMANCE {
        let source = std::fs::read(dir.join(format!("models/{name}.tflite"))).unwrap();
        let layers = lstm_layers(&source);
        let model = Model::from_bytes(&layers).unwrap();
        let resolver = all_builtins();
        let mut arena = vec![0u8; 1 << 16];
        let mut interpreter = Interpreter::new(model, &resolver, &mut arena);
        interpreter
            .allocate(&Greedy, &AllocOptions::default())
            .unwrap();
        let input =
            std::fs::read(dir.join(format!("cases/{name}/case0_step0_input0.bin"))).unwrap();
        interpreter.input_mut(0).unwrap().copy_from_slice(&input);
        let mut samples = Vec::new();
        for _ in 0..15 {
            let start = thread_cpu_seconds();
            for _ in 0..200 {
                interpreter.invoke().unwrap();
            }
            samples.push((thread_cpu_seconds() - start) / 200.0 * 1e6);
        }
        samples.sort_by(f64::total_cmp);
        println!(
            "{name}: {:.2} us per invoke, arena {} B",
            samples[samples.len() / 2],
            interpreter.arena_used_bytes()
        );
    }
}
