//! One-operator models for kernel tests: build them with the writer, run
//! them through the interpreter, and generate deterministic inputs.
#![allow(dead_code, unreachable_pub)]

use hilt_runtime::interpreter::{Interpreter, InterpreterError};
use hilt_runtime::kernels::{KernelError, all_builtins};
use hilt_runtime::model::Model;
use hilt_runtime::planner::Greedy;
use hilt_runtime::schema::{
    ActivationFunctionType as Act, BuiltinOperator as Op, Padding, TensorType as T,
};
use hilt_runtime::writer::{ModelWriter, Options};
use proptest::prelude::*;

/// A quantised or float tensor type for a one-op model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ty {
    pub dtype: T,
    /// (scale, zero point) for quantised types; a zero scale writes none.
    pub quant: Option<(f32, i64)>,
}

pub const F32: Ty = Ty {
    dtype: T::FLOAT32,
    quant: None,
};

pub fn q(dtype: T, scale: f32, zero_point: i64) -> Ty {
    Ty {
        dtype,
        quant: Some((scale, zero_point)),
    }
}

pub fn i8q(scale: f32, zero_point: i64) -> Ty {
    q(T::INT8, scale, zero_point)
}

pub fn i16q(scale: f32, zero_point: i64) -> Ty {
    q(T::INT16, scale, zero_point)
}

/// Bytes per element.
pub fn element_size(dtype: T) -> usize {
    match dtype {
        T::INT8 | T::UINT8 => 1,
        T::INT16 => 2,
        _ => 4,
    }
}

/// A model with one operator: `inputs` are model inputs, `output` the model
/// output.
pub fn single_op(
    op: Op,
    inputs: &[(Ty, &[i32])],
    output: (Ty, &[i32]),
    options: Options,
) -> Vec<u8> {
    let mut w = ModelWriter::new();
    let mut ids = Vec::new();
    for (i, (ty, shape)) in inputs.iter().enumerate() {
        let t = w.input(&format!("input{i}"), ty.dtype, shape);
        if let Some((s, z)) = ty.quant.filter(|&(s, _)| s != 0.0) {
            w.quantize(t, s, z);
        }
        ids.push(Some(t));
    }
    let out = w.output("output", output.0.dtype, output.1);
    if let Some((s, z)) = output.0.quant.filter(|&(s, _)| s != 0.0) {
        w.quantize(out, s, z);
    }
    w.op(op, &ids, &[out], options);
    w.finish()
}

/// A one-op model whose op inputs are `inputs` (model inputs) followed by
/// `constants` (type, shape, bytes).
pub fn op_with_constants(
    op: Op,
    inputs: &[(Ty, &[i32])],
    constants: &[(T, &[i32], Vec<u8>)],
    output: (Ty, &[i32]),
    options: Options,
) -> Vec<u8> {
    let mut w = ModelWriter::new();
    let mut ids = Vec::new();
    for (i, (ty, shape)) in inputs.iter().enumerate() {
        let t = w.input(&format!("input{i}"), ty.dtype, shape);
        if let Some((s, z)) = ty.quant {
            w.quantize(t, s, z);
        }
        ids.push(Some(t));
    }
    for (i, (dtype, shape, data)) in constants.iter().enumerate() {
        ids.push(Some(w.constant(&format!("const{i}"), *dtype, shape, data)));
    }
    let out = w.output("output", output.0.dtype, output.1);
    if let Some((s, z)) = output.0.quant {
        w.quantize(out, s, z);
    }
    w.op(op, &ids, &[out], options);
    w.finish()
}

/// The kernel error a model's set-up or run gave.
pub fn kernel_error(model: &[u8], inputs: &[&[u8]]) -> KernelError {
    match run(model, inputs) {
        Err(InterpreterError::Kernel { error, .. }) => error,
        other => panic!("expected a kernel error, got {other:?}"),
    }
}

pub fn add_options(activation: Act) -> Options {
    Options::Add { activation }
}

pub fn pool_options(
    padding: Padding,
    stride: (i32, i32),
    filter: (i32, i32),
    activation: Act,
) -> Options {
    Options::Pool2D {
        padding,
        stride,
        filter,
        activation,
    }
}

/// 16-aligned copy of `bytes`, as a model sits in flash.
pub fn aligned(bytes: &[u8]) -> Vec<u128> {
    let mut words = vec![0u128; bytes.len().div_ceil(16)];
    bytemuck::cast_slice_mut::<u128, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
    words
}

/// Runs `model` once on `inputs` (raw little-endian bytes) and returns every
/// output's bytes.
pub fn run(model: &[u8], inputs: &[&[u8]]) -> Result<Vec<Vec<u8>>, InterpreterError> {
    let words = aligned(model);
    let bytes = &bytemuck::cast_slice::<u128, u8>(&words)[..model.len()];
    let model = Model::from_bytes(bytes).expect("valid model");
    let resolver = all_builtins();
    let mut arena = vec![0u128; 1 << 16];
    let arena = bytemuck::cast_slice_mut::<u128, u8>(&mut arena);
    let mut interpreter = Interpreter::new(model, &resolver, arena);
    interpreter.allocate(&Greedy, &Default::default())?;
    for (i, data) in inputs.iter().enumerate() {
        let slot = interpreter.input_mut(i)?;
        assert_eq!(slot.len(), data.len(), "input {i} size");
        slot.copy_from_slice(data);
    }
    interpreter.invoke()?;
    (0..interpreter.output_count())
        .map(|i| interpreter.output(i).map(<[u8]>::to_vec))
        .collect()
}

/// SplitMix64: deterministic inputs without a dependency.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [lo, hi).
    pub fn f32_in(&mut self, lo: f32, hi: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * unit
    }

    /// `n` random elements of `dtype` as bytes; floats uniform in [lo, hi).
    pub fn tensor(&mut self, dtype: T, n: usize, lo: f32, hi: f32) -> Vec<u8> {
        match dtype {
            T::FLOAT32 => (0..n)
                .flat_map(|_| self.f32_in(lo, hi).to_le_bytes())
                .collect(),
            T::INT8 => (0..n).map(|_| self.next_u64() as u8).collect(),
            T::INT16 => (0..n)
                .flat_map(|_| (self.next_u64() as i16).to_le_bytes())
                .collect(),
            T::INT32 => (0..n)
                .flat_map(|_| {
                    // Mostly moderate values, some extremes.
                    let v = self.next_u64();
                    let x = (v as i32) >> (v >> 59);
                    x.to_le_bytes()
                })
                .collect(),
            other => panic!("no generator for {other:?}"),
        }
    }
}

pub fn elements(shape: &[i32]) -> usize {
    shape.iter().map(|&d| d as usize).product()
}

pub fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

pub fn i16s(bytes: &[u8]) -> Vec<i16> {
    bytes
        .chunks_exact(2)
        .map(|c| i16::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

pub fn i32s(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

pub fn i8s(bytes: &[u8]) -> Vec<i8> {
    bytes.iter().map(|&b| b as i8).collect()
}

/// A broadcastable pair of shapes and their output shape.
pub fn broadcast_shapes() -> impl Strategy<Value = (Vec<i32>, Vec<i32>, Vec<i32>)> {
    broadcast_shapes_in(1..=5, 1..=4)
}

pub fn broadcast_shapes_in(
    ranks: std::ops::RangeInclusive<usize>,
    dims: std::ops::RangeInclusive<i32>,
) -> impl Strategy<Value = (Vec<i32>, Vec<i32>, Vec<i32>)> {
    ranks
        .prop_flat_map(move |rank| {
            (
                proptest::collection::vec(dims.clone(), rank),
                proptest::collection::vec(0u8..4, rank),
                0usize..=rank,
                0usize..=rank,
            )
        })
        .prop_map(|(out, mode, drop_a, drop_b)| {
            // Per dimension: 0 both full, 1 a broadcast, 2 b broadcast, 3 both 1.
            let mut a = Vec::new();
            let mut b = Vec::new();
            for (&o, &m) in out.iter().zip(&mode) {
                a.push(if m == 1 || m == 3 { 1 } else { o });
                b.push(if m == 2 || m == 3 { 1 } else { o });
            }
            let out: Vec<i32> = out
                .iter()
                .zip(&mode)
                .map(|(&o, &m)| if m == 3 { 1 } else { o })
                .collect();
            // Drop leading size-1 dimensions (lower rank operands).
            let trim = |s: Vec<i32>, n: usize| {
                let k = s.iter().take(n).take_while(|&&d| d == 1).count();
                s[k..].to_vec()
            };
            (trim(a, drop_a), trim(b, drop_b), out)
        })
}

/// Flat index into `shape` (right-aligned to `out`) for output index `idx`.
pub fn broadcast_index(shape: &[i32], out: &[i32], idx: &[usize]) -> usize {
    let pad = out.len() - shape.len();
    let mut flat = 0;
    for (d, &extent) in shape.iter().enumerate() {
        let i = if extent == 1 { 0 } else { idx[d + pad] };
        flat = flat * extent as usize + i;
    }
    flat
}

pub fn for_each_index(shape: &[i32], mut f: impl FnMut(&[usize])) {
    let total = elements(shape);
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..total {
        f(&idx);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] as usize {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// Any fused activation TFLM's integer kernels take.
pub fn activation() -> impl Strategy<Value = Act> {
    prop_oneof![
        Just(Act::NONE),
        Just(Act::RELU),
        Just(Act::RELU6),
        Just(Act::RELU_N1_TO_1)
    ]
}

/// `v` quantised with `scale` and zero point `zp` (TFLM's `Quantize`).
pub fn quantize_f(v: f32, scale: f32, zp: i32) -> i32 {
    zp + libm::roundf(v / scale) as i32
}

/// TFLM's `CalculateActivationRangeQuantized`: `act`'s range in the
/// quantised domain, within `lo..=hi`.
pub fn act_range_q(act: Act, scale: f32, zp: i32, lo: i32, hi: i32) -> (i32, i32) {
    let q = |v| quantize_f(v, scale, zp);
    match act {
        Act::RELU => (lo.max(q(0.0)), hi),
        Act::RELU6 => (lo.max(q(0.0)), hi.min(q(6.0))),
        Act::RELU_N1_TO_1 => (lo.max(q(-1.0)), hi.min(q(1.0))),
        _ => (lo, hi),
    }
}
