//! Random shapes on the targets: every kernel with a hand-written Arm path
//! (the `arm-dsp` SIMD and `asm!` loops of CONV_2D's and FULLY_CONNECTED's
//! GEMM, DEPTHWISE_CONV_2D's packed loops, and the `smmulr` requantisation
//! of ADD and MUL) runs one-op models of random shapes, strides, dilations,
//! paddings, quantisations and activations on the Cortex-M4 (DSP), its
//! ARMv6-M build (the portable kernels) and the Cortex-M33 (DSP), and must
//! give, byte for byte, what the host's kernels give (`expected_from_host`).
//! The host property tests run the portable Rust; this is where the
//! target's own loops meet shapes the shipped models never have.
//!
//! The shapes come from a fixed seed, so a failure reproduces;
//! `HILT_SWEEP_SEED=N` draws another set (the nightly job can vary it) and
//! `HILT_SWEEP_MODELS=N` draws more or fewer per kernel.
//!
//! Skipped (with a message) without `qemu-system-arm`, unless
//! `HILT_QEMU_REQUIRED=1`.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hilt::config::board::load_all;
use hilt::orchestrate::{Job, run_jobs};
use hilt::outcome::Outcome;
use hilt_runtime::schema::{
    ActivationFunctionType as Act, BuiltinOperator as Op, Padding, TensorType as T,
};
use hilt_runtime::writer::{ModelWriter, Options, i32_bytes};

use common::repo;

/// The boards: the DSP kernels on two cores, the portable ones on one.
const BOARDS: [&str; 3] = [
    "qemu-mps2-an386",
    "qemu-mps2-an386-armv6m",
    "qemu-mps2-an505",
];

/// xorshift64*: reproducible shapes without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A whole number in `lo..=hi`.
    fn range(&mut self, lo: i32, hi: i32) -> i32 {
        lo + (self.next() % (hi - lo + 1) as u64) as i32
    }

    /// A float in `[lo, hi)`.
    fn float(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }

    fn pick<U: Copy>(&mut self, from: &[U]) -> U {
        from[self.next() as usize % from.len()]
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// `n` int32 values in `-limit..=limit`.
    fn i32s(&mut self, n: usize, limit: i32) -> Vec<i32> {
        (0..n).map(|_| self.range(-limit, limit)).collect()
    }

    fn activation(&mut self) -> Act {
        self.pick(&[Act::NONE, Act::RELU, Act::RELU6, Act::RELU_N1_TO_1])
    }
}

/// One random model and its input.
struct Case {
    name: String,
    model: Vec<u8>,
    input: Vec<u8>,
}

/// The output extent of a window over `size` (TFLM's rule).
fn out_extent(size: i32, kernel: i32, stride: i32, dilation: i32, padding: Padding) -> i32 {
    let reach = (kernel - 1) * dilation + 1;
    if padding == Padding::SAME {
        (size + stride - 1) / stride
    } else {
        (size - reach + stride) / stride
    }
}

/// (height, width) of a kernel, stride or dilation.
type Pair = (i32, i32);

/// A window (kernel, stride, dilation, padding) that gives at least one
/// output on an `h`×`w` input.
fn window(rng: &mut Rng, h: i32, w: i32) -> (Pair, Pair, Pair, Padding) {
    loop {
        let kernel = (rng.pick(&[1, 2, 3, 3, 5]), rng.pick(&[1, 2, 3, 3, 5]));
        let stride = (rng.range(1, 2), rng.range(1, 2));
        let dilation = (rng.pick(&[1, 1, 1, 2]), rng.pick(&[1, 1, 1, 2]));
        let padding = rng.pick(&[Padding::SAME, Padding::VALID]);
        let oh = out_extent(h, kernel.0, stride.0, dilation.0, padding);
        let ow = out_extent(w, kernel.1, stride.1, dilation.1, padding);
        if oh >= 1 && ow >= 1 {
            return (kernel, stride, dilation, padding);
        }
    }
}

/// Per-channel int8 weights, their scales and an int32 bias of the scale
/// TFLM requires (input scale × weight scale, zero point 0).
fn weights_and_bias(
    w: &mut ModelWriter,
    rng: &mut Rng,
    shape: &[i32],
    channels: i32,
    axis: i32,
    in_scale: f32,
) -> (
    hilt_runtime::writer::TensorId,
    hilt_runtime::writer::TensorId,
    f32,
) {
    let count: i32 = shape.iter().product();
    let filter = w.constant("filter", T::INT8, shape, &rng.bytes(count as usize));
    let scales: Vec<f32> = (0..channels).map(|_| rng.float(0.002, 0.05)).collect();
    w.quantize_per_channel(filter, &scales, &vec![0; channels as usize], axis);
    let bias = w.constant(
        "bias",
        T::INT32,
        &[channels],
        &i32_bytes(&rng.i32s(channels as usize, 3_000)),
    );
    let bias_scales: Vec<f32> = scales.iter().map(|s| s * in_scale).collect();
    w.quantize_per_channel(bias, &bias_scales, &vec![0; channels as usize], 0);
    let mean = scales.iter().sum::<f32>() / channels as f32;
    (filter, bias, mean)
}

fn conv(rng: &mut Rng, n: usize) -> Case {
    let (h, wd, c) = (rng.range(1, 12), rng.range(1, 12), rng.range(1, 24));
    let o = rng.range(1, 20);
    let (kernel, stride, dilation, padding) = window(rng, h, wd);
    let oh = out_extent(h, kernel.0, stride.0, dilation.0, padding);
    let ow = out_extent(wd, kernel.1, stride.1, dilation.1, padding);
    let in_scale = rng.float(0.01, 0.1);
    let mut w = ModelWriter::new();
    let x = w.input("x", T::INT8, &[1, h, wd, c]);
    w.quantize(x, in_scale, i64::from(rng.range(-20, 20)));
    let (filter, bias, mean) =
        weights_and_bias(&mut w, rng, &[o, kernel.0, kernel.1, c], o, 0, in_scale);
    let y = w.output("y", T::INT8, &[1, oh, ow, o]);
    let taps = (kernel.0 * kernel.1 * c) as f32;
    let out_scale = in_scale * mean * taps.sqrt() * rng.float(1.0, 8.0);
    w.quantize(y, out_scale, i64::from(rng.range(-20, 20)));
    w.op(
        Op::CONV_2D,
        &[Some(x), Some(filter), Some(bias)],
        &[y],
        Options::Conv2D {
            padding,
            stride: (stride.1, stride.0),
            dilation: (dilation.1, dilation.0),
            activation: rng.activation(),
        },
    );
    Case {
        name: format!("conv{n}_{h}x{wd}x{c}_k{}x{}_o{o}", kernel.0, kernel.1),
        model: w.finish(),
        input: rng.bytes((h * wd * c) as usize),
    }
}

fn depthwise(rng: &mut Rng, n: usize) -> Case {
    let (mut h, mut wd, c) = (rng.range(1, 12), rng.range(1, 12), rng.range(1, 40));
    let mut multiplier = rng.pick(&[1, 1, 1, 2]);
    let (mut kernel, mut stride, mut dilation, padding) = window(rng, h, wd);
    // Every fourth case is 3×3 at stride 1 with a long line (16 to 40
    // outputs) along x or y: the one-channel line ring (`depthwise_rows`).
    if n % 4 == 3 {
        let long = rng.range(16, 40);
        if n % 8 == 3 {
            wd = long;
        } else {
            h = long;
        }
        (kernel, stride, dilation, multiplier) = ((3, 3), (1, 1), (1, 1), 1);
        (h, wd) = (h.max(3), wd.max(3));
    }
    let o = c * multiplier;
    let oh = out_extent(h, kernel.0, stride.0, dilation.0, padding);
    let ow = out_extent(wd, kernel.1, stride.1, dilation.1, padding);
    let in_scale = rng.float(0.01, 0.1);
    let mut w = ModelWriter::new();
    let x = w.input("x", T::INT8, &[1, h, wd, c]);
    w.quantize(x, in_scale, i64::from(rng.range(-20, 20)));
    let (filter, bias, mean) =
        weights_and_bias(&mut w, rng, &[1, kernel.0, kernel.1, o], o, 3, in_scale);
    let y = w.output("y", T::INT8, &[1, oh, ow, o]);
    let taps = (kernel.0 * kernel.1) as f32;
    let out_scale = in_scale * mean * taps.sqrt() * rng.float(1.0, 8.0);
    w.quantize(y, out_scale, i64::from(rng.range(-20, 20)));
    w.op(
        Op::DEPTHWISE_CONV_2D,
        &[Some(x), Some(filter), Some(bias)],
        &[y],
        Options::DepthwiseConv2D {
            padding,
            stride: (stride.1, stride.0),
            dilation: (dilation.1, dilation.0),
            depth_multiplier: multiplier,
            activation: rng.activation(),
        },
    );
    Case {
        name: format!(
            "dw{n}_{h}x{wd}x{c}_k{}x{}_m{multiplier}",
            kernel.0, kernel.1
        ),
        model: w.finish(),
        input: rng.bytes((h * wd * c) as usize),
    }
}

fn fully_connected(rng: &mut Rng, n: usize) -> Case {
    let (batch, depth, units) = (rng.range(1, 4), rng.range(1, 300), rng.range(1, 40));
    let in_scale = rng.float(0.01, 0.1);
    let mut w = ModelWriter::new();
    let x = w.input("x", T::INT8, &[batch, depth]);
    w.quantize(x, in_scale, i64::from(rng.range(-20, 20)));
    let filter = w.constant(
        "filter",
        T::INT8,
        &[units, depth],
        &rng.bytes((units * depth) as usize),
    );
    let w_scale = rng.float(0.002, 0.05);
    w.quantize(filter, w_scale, 0);
    let bias = w.constant(
        "bias",
        T::INT32,
        &[units],
        &i32_bytes(&rng.i32s(units as usize, 3_000)),
    );
    w.quantize(bias, in_scale * w_scale, 0);
    let y = w.output("y", T::INT8, &[batch, units]);
    let out_scale = in_scale * w_scale * (depth as f32).sqrt() * rng.float(1.0, 8.0);
    w.quantize(y, out_scale, i64::from(rng.range(-20, 20)));
    w.op(
        Op::FULLY_CONNECTED,
        &[Some(x), Some(filter), Some(bias)],
        &[y],
        Options::FullyConnected {
            activation: rng.activation(),
            keep_num_dims: false,
        },
    );
    Case {
        name: format!("fc{n}_{batch}x{depth}_u{units}"),
        model: w.finish(),
        input: rng.bytes((batch * depth) as usize),
    }
}

/// ADD or MUL of two int8 inputs of one shape (the second a constant, so
/// the model has one input), each with its own quantisation.
fn elementwise(rng: &mut Rng, n: usize, op: Op) -> Case {
    let shape = [1, rng.range(1, 9), rng.range(1, 9), rng.range(1, 33)];
    let count: i32 = shape.iter().product();
    let mut w = ModelWriter::new();
    let a = w.input("a", T::INT8, &shape);
    w.quantize(a, rng.float(0.01, 0.2), i64::from(rng.range(-30, 30)));
    let b = w.constant("b", T::INT8, &shape, &rng.bytes(count as usize));
    w.quantize(b, rng.float(0.01, 0.2), i64::from(rng.range(-30, 30)));
    let y = w.output("y", T::INT8, &shape);
    w.quantize(y, rng.float(0.02, 0.4), i64::from(rng.range(-30, 30)));
    let activation = rng.activation();
    let options = if op == Op::ADD {
        Options::Add { activation }
    } else {
        Options::Mul { activation }
    };
    w.op(op, &[Some(a), Some(b)], &[y], options);
    let kind = if op == Op::ADD { "add" } else { "mul" };
    Case {
        name: format!("{kind}{n}_{}x{}x{}", shape[1], shape[2], shape[3]),
        model: w.finish(),
        input: rng.bytes(count as usize),
    }
}

/// The sweep's models: `per_kernel` of each kind.
fn cases(seed: u64, per_kernel: usize) -> Vec<Case> {
    let mut rng = Rng(seed | 1);
    let mut all = Vec::new();
    for n in 0..per_kernel {
        all.push(conv(&mut rng, n));
        all.push(depthwise(&mut rng, n));
        all.push(fully_connected(&mut rng, n));
        if n % 2 == 0 {
            all.push(elementwise(&mut rng, n, Op::ADD));
            all.push(elementwise(&mut rng, n, Op::MUL));
        }
    }
    all
}

/// Writes `case`'s model, input and scenario into `dir`.
fn write_scenario(dir: &Path, case: &Case) -> PathBuf {
    std::fs::write(dir.join(format!("{}.tflite", case.name)), &case.model).unwrap();
    std::fs::write(dir.join(format!("{}.in.bin", case.name)), &case.input).unwrap();
    let path = dir.join(format!("{}.toml", case.name));
    let boards = BOARDS.map(|b| format!("{b:?}")).join(", ");
    std::fs::write(
        &path,
        format!(
            "model = \"{0}.tflite\"\ncompare = \"exact\"\nexpected_from_host = true\nboards = [{boards}]\ntimeout_s = 60\n\n[[steps]]\ninputs = [\"{0}.in.bin\"]\n",
            case.name
        ),
    )
    .unwrap();
    path
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn random_shapes_of_every_kernel_with_an_arm_path_match_the_host_on_every_core() {
    if !common::qemu_available("the DSP sweep") {
        return;
    }
    let seed = env_number("HILT_SWEEP_SEED", 0x5eed_d5b0);
    let per_kernel = env_number("HILT_SWEEP_MODELS", 8) as usize;
    let dir = std::env::temp_dir().join(format!("hilt-dsp-sweep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = cases(seed, per_kernel);
    let boards = load_all(&repo().join("boards")).unwrap();
    let mut jobs = Vec::new();
    for case in &cases {
        let path = write_scenario(&dir, case);
        let scenario = Arc::new(
            hilt::config::scenario::load(&path, &[]).unwrap_or_else(|e| {
                panic!("{}: {e}", case.name);
            }),
        );
        for name in BOARDS {
            jobs.push(Job {
                scenario: scenario.clone(),
                board: boards.iter().find(|b| b.name == name).unwrap().clone(),
            });
        }
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let results = runtime.block_on(run_jobs(&repo(), jobs, 2, |_| {}));
    let failed: Vec<String> = results
        .iter()
        .filter(|r| r.outcome != Outcome::Passed)
        .map(|r| format!("{} on {}: {}", r.scenario, r.board, r.outcome))
        .collect();
    eprintln!(
        "DSP sweep (seed {seed:#x}): {} models × {} boards, {} runs failed",
        cases.len(),
        BOARDS.len(),
        failed.len()
    );
    assert_eq!(results.len(), cases.len() * BOARDS.len());
    assert!(
        failed.is_empty(),
        "seed {seed:#x}, models in {}:\n{}",
        dir.display(),
        failed.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_sweep_draws_what_it_says() {
    // Same seed, same models; every kind present; every window valid.
    let a = cases(7, 4);
    let b = cases(7, 4);
    assert_eq!(a.len(), 4 * 3 + 2 * 2);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!((&x.name, &x.model, &x.input), (&y.name, &y.model, &y.input));
    }
    for prefix in ["conv", "dw", "fc", "add", "mul"] {
        assert!(a.iter().any(|c| c.name.starts_with(prefix)), "{prefix}");
    }
    // Each model runs on the host (what the boards are compared with).
    for case in &a {
        let model = hilt_runtime::model::Model::from_bytes(&case.model)
            .unwrap_or_else(|e| panic!("{}: {e:?}", case.name));
        assert_eq!(model.operator_count(), 1, "{}", case.name);
    }
}
