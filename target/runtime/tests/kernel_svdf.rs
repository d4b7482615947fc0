//! SVDF: one-op models through the interpreter with hand-computed values
//! (rank 1 and 2, several steps so the state shift shows, zero points,
//! saturation, rounding), prepare's errors, and properties of the
//! scratch-free kernels against TFLM's algorithm step for step
//! (`svdf::reference`).

use hilt_runtime::interpreter::{Interpreter, InterpreterError};
use hilt_runtime::kernels::svdf::{self, StateElement, SvdfQuantParams, SvdfShape};
use hilt_runtime::kernels::{KernelError, all_builtins};
use hilt_runtime::model::Model;
use hilt_runtime::planner::Greedy;
use hilt_runtime::schema::{ActivationFunctionType as Act, BuiltinOperator, TensorType};
use hilt_runtime::writer::{ModelWriter, Options, TensorId, f32_bytes, i32_bytes};
use proptest::prelude::*;

// ---------------------------------------------------------------------------
// Building and running one-op models.

/// Model bytes kept 16-aligned, as a model sits in flash.
struct Aligned {
    words: Vec<u128>,
    len: usize,
}

impl Aligned {
    fn new(bytes: &[u8]) -> Self {
        let mut words = vec![0u128; bytes.len().div_ceil(16)];
        bytemuck::cast_slice_mut::<u128, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
        Aligned {
            words,
            len: bytes.len(),
        }
    }

    fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice::<u128, u8>(&self.words)[..self.len]
    }
}

fn i16_bytes(values: &[i16]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn i8_bytes(values: &[i8]) -> Vec<u8> {
    values.iter().map(|&v| v as u8).collect()
}

/// An integer SVDF op: every tensor's type, scale and zero point, and the
/// constants.
#[derive(Debug, Clone)]
struct IntSpec {
    batch: usize,
    input_size: usize,
    filters: usize,
    rank: usize,
    memory: usize,
    /// INT16 (weights_time and state int16) or INT8 (both int8).
    state_type: TensorType,
    input_q: (f32, i32),
    feature_scale: f32,
    time_scale: f32,
    state_q: (f32, i32),
    output_q: (f32, i32),
    weights_feature: Vec<i8>,
    /// Widened to i16 whatever the state type (narrowed when written).
    weights_time: Vec<i16>,
    bias: Option<Vec<i32>>,
    activation: Act,
}

impl IntSpec {
    fn units(&self) -> usize {
        self.filters / self.rank
    }

    fn shape(&self) -> SvdfShape {
        SvdfShape {
            batch: self.batch as u32,
            input_size: self.input_size as u32,
            filters: self.filters as u32,
            rank: self.rank as u32,
            memory: self.memory as u32,
        }
    }

    fn quant(&self) -> SvdfQuantParams {
        SvdfQuantParams::from_scales(
            self.input_q,
            self.feature_scale,
            self.time_scale,
            self.state_q,
            self.output_q,
        )
    }

    /// The model; the state tensor is also marked as model output 1 so
    /// tests can read it.
    fn model(&self) -> Vec<u8> {
        let mut w = ModelWriter::new();
        let (b, n, f, m, u) = (
            self.batch as i32,
            self.input_size as i32,
            self.filters as i32,
            self.memory as i32,
            self.units() as i32,
        );
        let x = w.input("x", TensorType::INT8, &[b, n]);
        w.quantize(x, self.input_q.0, self.input_q.1.into());
        let wf = w.constant(
            "weights_feature",
            TensorType::INT8,
            &[f, n],
            &i8_bytes(&self.weights_feature),
        );
        w.quantize(wf, self.feature_scale, 0);
        let time_bytes = if self.state_type == TensorType::INT16 {
            i16_bytes(&self.weights_time)
        } else {
            self.weights_time.iter().map(|&v| v as i8 as u8).collect()
        };
        let wt = w.constant("weights_time", self.state_type, &[f, m], &time_bytes);
        w.quantize(wt, self.time_scale, 0);
        let bias = self.bias.as_ref().map(|bias| {
            let t = w.constant("bias", TensorType::INT32, &[u], &i32_bytes(bias));
            w.quantize(t, self.state_q.0 * self.time_scale, 0);
            t
        });
        let state = w.variable("state", self.state_type, &[b, m * f]);
        w.quantize(state, self.state_q.0, self.state_q.1.into());
        let y = w.output("y", TensorType::INT8, &[b, u]);
        w.quantize(y, self.output_q.0, self.output_q.1.into());
        w.op(
            BuiltinOperator::SVDF,
            &[Some(x), Some(wf), Some(wt), bias, Some(state)],
            &[y],
            Options::Svdf {
                rank: self.rank as i32,
                activation: self.activation,
            },
        );
        w.mark_output(state);
        w.finish()
    }
}

/// One step's output bytes and state bytes.
type StepBytes = (Vec<u8>, Vec<u8>);

/// Runs `steps` invocations of one model on one interpreter (state carries
/// over); returns each step's output 0 and output 1 (the state) bytes.
fn run_steps(model: &[u8], steps: &[Vec<u8>]) -> Result<Vec<StepBytes>, InterpreterError> {
    let aligned = Aligned::new(model);
    let model = Model::from_bytes(aligned.bytes()).expect("valid model");
    let resolver = all_builtins();
    let mut arena = vec![0u128; 64 * 1024 / 16];
    let arena: &mut [u8] = bytemuck::cast_slice_mut(&mut arena);
    let mut interpreter = Interpreter::new(model, &resolver, arena);
    interpreter.allocate(&Greedy, &Default::default())?;
    let mut results = Vec::new();
    for input in steps {
        interpreter.input_mut(0)?.copy_from_slice(input);
        interpreter.invoke()?;
        results.push((
            interpreter.output(0)?.to_vec(),
            interpreter.output(1)?.to_vec(),
        ));
    }
    Ok(results)
}

fn as_i8(bytes: &[u8]) -> Vec<i8> {
    bytes.iter().map(|&b| b as i8).collect()
}

fn as_i16(bytes: &[u8]) -> Vec<i16> {
    bytes
        .chunks_exact(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect()
}

fn as_f32(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn run_int(spec: &IntSpec, inputs: &[Vec<i8>]) -> Vec<(Vec<i8>, Vec<u8>)> {
    let steps: Vec<Vec<u8>> = inputs.iter().map(|x| i8_bytes(x)).collect();
    run_steps(&spec.model(), &steps)
        .expect("runs")
        .into_iter()
        .map(|(y, s)| (as_i8(&y), s))
        .collect()
}

/// Unit scales everywhere the multipliers should be exactly one:
/// `scale_1 = 0.5·0.5/0.25 = 1`, `scale_2 = 0.25·1/0.25 = 1`.
fn unit_spec() -> IntSpec {
    IntSpec {
        batch: 1,
        input_size: 2,
        filters: 2,
        rank: 1,
        memory: 3,
        state_type: TensorType::INT16,
        input_q: (0.5, 1),
        feature_scale: 0.5,
        time_scale: 1.0,
        state_q: (0.25, 0),
        output_q: (0.25, 3),
        weights_feature: vec![1, 2, -3, 4],
        weights_time: vec![1, 10, 2, 2, -1, 3],
        bias: Some(vec![5, -7]),
        activation: Act::RELU,
    }
}

// ---------------------------------------------------------------------------
// Hand-computed cases.

#[test]
fn unit_multipliers_are_exact() {
    let q = unit_spec().quant();
    assert_eq!((q.scale_1_multiplier, q.scale_1_shift), (1 << 30, 1));
    assert_eq!((q.scale_2_multiplier, q.scale_2_shift), (1 << 30, 1));
}

#[test]
fn rank1_int16_four_steps_shift_the_state() {
    // filter 0 = [1, 2], filter 1 = [-3, 4]; input zero point 1;
    // time rows (oldest → newest) [1, 10, 2] and [2, -1, 3]; bias [5, -7];
    // output zero point 3; every multiplier 1.
    let spec = unit_spec();
    let steps = run_int(&spec, &[vec![3, 0], vec![1, 5], vec![-1, 2], vec![2, 2]]);
    // Step 1: x − zp = [2, −1] → features [0, −10].
    //   state [0 0 0 | 0 0 −10]; y = [5 + 0, −7 + 3·(−10)] + 3 = [8, −34].
    // Step 2: [0, 4] → [8, 16]; state [0 0 8 | 0 −10 16];
    //   y = [5 + 2·8, −7 + 10 + 48] + 3 = [24, 54].
    // Step 3: [−2, 1] → [0, 10]; state [0 8 0 | −10 16 10];
    //   y = [5 + 80, −7 − 20 − 16 + 30] + 3 = [88, −10].
    // Step 4: [1, 1] → [3, 1]; the first frames fall off: state [8 0 3 | 16 10 1];
    //   y = [5 + 8 + 6, −7 + 32 − 10 + 3] + 3 = [22, 21].
    let want_y: [[i8; 2]; 4] = [[8, -34], [24, 54], [88, -10], [22, 21]];
    let want_state: [[i16; 6]; 4] = [
        [0, 0, 0, 0, 0, -10],
        [0, 0, 8, 0, -10, 16],
        [0, 8, 0, -10, 16, 10],
        [8, 0, 3, 16, 10, 1],
    ];
    for (k, (y, state)) in steps.iter().enumerate() {
        assert_eq!(y, &want_y[k], "output at step {k}");
        assert_eq!(as_i16(state), want_state[k], "state at step {k}");
    }
}

#[test]
fn rank2_two_batches_no_bias() {
    // 4 filters, rank 2 → 2 units; memory 2; input_size 1; no bias; all zero
    // points 0 and multipliers 1.
    let spec = IntSpec {
        batch: 2,
        input_size: 1,
        filters: 4,
        rank: 2,
        memory: 2,
        input_q: (0.5, 0),
        output_q: (0.25, 0),
        weights_feature: vec![1, 2, -1, 3],
        weights_time: vec![1, 1, 2, 0, 0, 1, 1, -1],
        bias: None,
        ..unit_spec()
    };
    let steps = run_int(&spec, &[vec![4, -2], vec![1, 3], vec![0, -1]]);
    // Step 1, batch 0: features [4, 8, −4, 12]; unit 0 = [0 4]·[1 1] + [0 8]·[2 0] = 4,
    //   unit 1 = [0 −4]·[0 1] + [0 12]·[1 −1] = −16. Batch 1: features
    //   [−2, −4, 2, −6] → unit 0 = −2, unit 1 = 2 + 6 = 8.
    // Step 2, batch 0: features [1, 2, −1, 3]; rows [4 1] [8 2] [−4 −1] [12 3]
    //   → 5 + 16 = 21, −1 + 9 = 8. Batch 1: features [3, 6, −3, 9]; rows
    //   [−2 3] [−4 6] [2 −3] [−6 9] → 1 − 8 = −7, −3 − 15 = −18.
    // Step 3, batch 0: features 0; rows [1 0] [2 0] [−1 0] [3 0] → 1 + 4 = 5, 0 + 3 = 3.
    //   Batch 1: features [−1, −2, 1, −3]; rows [3 −1] [6 −2] [−3 1] [9 −3]
    //   → 2 + 12 = 14, 1 + 12 = 13.
    let want: [[i8; 4]; 3] = [[4, -16, -2, 8], [21, 8, -7, -18], [5, 3, 14, 13]];
    for (k, (y, _)) in steps.iter().enumerate() {
        assert_eq!(y, &want[k], "step {k}");
    }
    assert_eq!(
        as_i16(&steps[2].1),
        [1, 0, 2, 0, -1, 0, 3, 0, 3, -1, 6, -2, -3, 1, 9, -3]
    );
}

#[test]
fn saturation_of_state_and_output() {
    // scale_1 = 1·1/(1/1024) = 1024: a feature dot of ±16,129 saturates the
    // int16 state; scale_2 = (1/1024)·1/(1/64) = 1/16.
    let spec = IntSpec {
        batch: 1,
        input_size: 1,
        filters: 3,
        rank: 1,
        memory: 1,
        input_q: (1.0, 0),
        feature_scale: 1.0,
        time_scale: 1.0,
        state_q: (1.0 / 1024.0, 0),
        output_q: (1.0 / 64.0, -10),
        weights_feature: vec![127, -128, 1],
        weights_time: vec![1, 1, -32768],
        bias: None,
        ..unit_spec()
    };
    let q = spec.quant();
    assert_eq!((q.scale_1_multiplier, q.scale_1_shift), (1 << 30, 11));
    assert_eq!((q.scale_2_multiplier, q.scale_2_shift), (1 << 30, -3));
    let steps = run_int(&spec, &[vec![127], vec![-128], vec![2]]);
    // Step 1: dots [16129, −16256, 127]·1024 → state [32767, −32768, 32767 (130048)];
    //   y = [32767/16, −32768/16, −32768·32767/16] − 10
    //     = [2048, −2048, huge negative] − 10 → clamped [127, −128, −128].
    assert_eq!(as_i16(&steps[0].1), [32767, -32768, 32767]);
    assert_eq!(steps[0].0, [127, -128, -128]);
    // Step 2: dots [−16256, 16384, −128] → state [−32768, 32767, −32768 (−131072)];
    //   y = [−2048, 2048, 32768·32768/16 = 2^26] − 10 → [−128, 127, 127].
    assert_eq!(as_i16(&steps[1].1), [-32768, 32767, -32768]);
    assert_eq!(steps[1].0, [-128, 127, 127]);
    // Step 3: input 2 → dots [254, −256, 2] → state [260096 → 32767, −262144 → −32768, 2048];
    //   filter 2: 2048 · −32768 = −2^26 → /16 = −4,194,304 → −128.
    assert_eq!(as_i16(&steps[2].1), [32767, -32768, 2048]);
    assert_eq!(steps[2].0, [127, -128, -128]);
}

#[test]
fn rounding_of_both_rescales() {
    // scale_1 = 1·0.5/1 = 0.5 and scale_2 = 1·1/2 = 0.5, i.e. multiplier 2^30,
    // shift 0: gemmlowp's rounding doubling high multiply, which rounds
    // halves up (1.5 → 2, −1.5 → −1, 2.5 → 3, −2.5 → −2).
    let spec = IntSpec {
        batch: 1,
        input_size: 1,
        filters: 4,
        rank: 1,
        memory: 1,
        input_q: (1.0, 0),
        feature_scale: 0.5,
        time_scale: 1.0,
        state_q: (1.0, 0),
        output_q: (2.0, 0),
        weights_feature: vec![3, -3, 5, -5],
        weights_time: vec![1, 1, 3, 3],
        bias: Some(vec![0, 0, 0, 1]),
        ..unit_spec()
    };
    let q = spec.quant();
    assert_eq!((q.scale_1_multiplier, q.scale_1_shift), (1 << 30, 0));
    let steps = run_int(&spec, &[vec![1]]);
    // state = round([1.5, −1.5, 2.5, −2.5]) = [2, −1, 3, −2]
    assert_eq!(as_i16(&steps[0].1), [2, -1, 3, -2]);
    // sums [2, −1, 9, −6 + 1 = −5] · 0.5 = [1, −0.5 → 0, 4.5 → 5, −2.5 → −2]
    assert_eq!(steps[0].0, [1, 0, 5, -2]);
}

#[test]
fn int8_state_with_zero_point() {
    // int8 weights_time and state (TFLM's second integer variant): the
    // state zero point is added before the clamp and taken off again in the
    // time dot products.
    let spec = IntSpec {
        batch: 1,
        input_size: 2,
        filters: 2,
        rank: 1,
        memory: 2,
        state_type: TensorType::INT8,
        input_q: (0.5, 0),
        feature_scale: 0.5,
        time_scale: 1.0,
        state_q: (0.25, 100),
        output_q: (0.25, -5),
        weights_feature: vec![10, 10, -20, 1],
        weights_time: vec![1, 2, 3, -1],
        bias: Some(vec![1, 2]),
        activation: Act::NONE,
    };
    let steps = run_int(&spec, &[vec![1, 2], vec![2, -1]]);
    // The interpreter resets int8 state to its zero point (100).
    // Step 1: dots [30, −18] + 100 = [130 → 127, 82]; state [100 127 | 100 82];
    //   y = [1 + 1·0 + 2·27, 2 + 3·0 − 1·(−18)] − 5 = [50, 15].
    assert_eq!(as_i8(&steps[0].1), [100, 127, 100, 82]);
    assert_eq!(steps[0].0, [50, 15]);
    // Step 2: dots [10, −41] + 100 = [110, 59]; state [127 110 | 82 59];
    //   y = [1 + 27 + 20, 2 + 3·(−18) − 1·(−41)] − 5 = [43, −16].
    assert_eq!(as_i8(&steps[1].1), [127, 110, 82, 59]);
    assert_eq!(steps[1].0, [43, -16]);
}

#[test]
fn integer_path_ignores_the_fused_activation_as_tflm_does() {
    // TFLM's integer SVDF clamps to the int8 range only; RELU6 must not clip.
    let mut spec = unit_spec();
    spec.activation = Act::RELU6;
    let relu6 = run_int(&spec, &[vec![3, 0], vec![1, 5]]);
    spec.activation = Act::NONE;
    let none = run_int(&spec, &[vec![3, 0], vec![1, 5]]);
    assert_eq!(relu6, none);
    assert_eq!(relu6[0].0, [8, -34]);
}

#[test]
fn keyword_scrambled_first_svdf_multipliers() {
    // The scales of tflm_keyword_scrambled's first SVDF: the products are
    // rounded in f32 before QuantizeMultiplier, as TFLM's prepare does.
    let q = SvdfQuantParams::from_scales(
        (0.059_208_333, -128),
        0.009_171_206_5,
        0.003_705_506_2,
        (0.004_370_165, 0),
        (0.236_183_38, -128),
    );
    let s1 = f64::from(0.059_208_333f32 * 0.009_171_206_5f32 / 0.004_370_165f32);
    let s2 = f64::from(0.004_370_165f32 * 0.003_705_506_2f32 / 0.236_183_38f32);
    assert_eq!(
        (q.scale_1_multiplier, q.scale_1_shift),
        hilt_runtime::kernels::fixed_point::quantize_multiplier(s1)
    );
    assert_eq!(
        (q.scale_2_multiplier, q.scale_2_shift),
        hilt_runtime::kernels::fixed_point::quantize_multiplier(s2)
    );
    assert_eq!((q.input_zero_point, q.output_zero_point), (-128, -128));
}

// ---------------------------------------------------------------------------
// Float.

#[derive(Debug, Clone)]
struct FloatSpec {
    batch: usize,
    input_size: usize,
    filters: usize,
    rank: usize,
    memory: usize,
    weights_feature: Vec<f32>,
    weights_time: Vec<f32>,
    bias: Option<Vec<f32>>,
    activation: Act,
}

impl FloatSpec {
    fn units(&self) -> usize {
        self.filters / self.rank
    }

    fn model(&self) -> Vec<u8> {
        let mut w = ModelWriter::new();
        let (b, n, f, m, u) = (
            self.batch as i32,
            self.input_size as i32,
            self.filters as i32,
            self.memory as i32,
            self.units() as i32,
        );
        let x = w.input("x", TensorType::FLOAT32, &[b, n]);
        let wf = w.constant(
            "weights_feature",
            TensorType::FLOAT32,
            &[f, n],
            &f32_bytes(&self.weights_feature),
        );
        let wt = w.constant(
            "weights_time",
            TensorType::FLOAT32,
            &[f, m],
            &f32_bytes(&self.weights_time),
        );
        let bias = self
            .bias
            .as_ref()
            .map(|bias| w.constant("bias", TensorType::FLOAT32, &[u], &f32_bytes(bias)));
        let state = w.variable("state", TensorType::FLOAT32, &[b, m * f]);
        let y = w.output("y", TensorType::FLOAT32, &[b, u]);
        w.op(
            BuiltinOperator::SVDF,
            &[Some(x), Some(wf), Some(wt), bias, Some(state)],
            &[y],
            Options::Svdf {
                rank: self.rank as i32,
                activation: self.activation,
            },
        );
        w.mark_output(state);
        w.finish()
    }
}

fn run_float(spec: &FloatSpec, inputs: &[Vec<f32>]) -> Vec<(Vec<f32>, Vec<f32>)> {
    let steps: Vec<Vec<u8>> = inputs.iter().map(|x| f32_bytes(x)).collect();
    run_steps(&spec.model(), &steps)
        .expect("runs")
        .into_iter()
        .map(|(y, s)| (as_f32(&y), as_f32(&s)))
        .collect()
}

#[test]
fn float_rank2_with_bias_and_relu() {
    // 4 filters, rank 2, memory 2, input_size 2; values small integers so
    // every sum is exact.
    let spec = FloatSpec {
        batch: 1,
        input_size: 2,
        filters: 4,
        rank: 2,
        memory: 2,
        weights_feature: vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0, -1.0, 0.5],
        weights_time: vec![1.0, 2.0, 0.5, -1.0, 1.0, 1.0, 2.0, 0.0],
        bias: Some(vec![0.25, -3.0]),
        activation: Act::RELU,
    };
    let steps = run_float(&spec, &[vec![2.0, 4.0], vec![-1.0, 2.0]]);
    // Step 1: features [2, 4, 6, 0]; rows [0 2] [0 4] [0 6] [0 0]
    //   unit 0 = 0.25 + 4 − 4 = 0.25; unit 1 = −3 + 6 + 0 = 3.
    assert_eq!(steps[0].1, [0.0, 2.0, 0.0, 4.0, 0.0, 6.0, 0.0, 0.0]);
    assert_eq!(steps[0].0, [0.25, 3.0]);
    // Step 2: features [−1, 2, 1, 2]; rows [2 −1] [4 2] [6 1] [0 2]
    //   unit 0 = 0.25 + (2 − 2) + (2 − 2) = 0.25; unit 1 = −3 + 7 + 0 = 4.
    assert_eq!(steps[1].1, [2.0, -1.0, 4.0, 2.0, 6.0, 1.0, 0.0, 2.0]);
    assert_eq!(steps[1].0, [0.25, 4.0]);
}

#[test]
fn float_activations() {
    let base = FloatSpec {
        batch: 1,
        input_size: 1,
        filters: 3,
        rank: 1,
        memory: 1,
        weights_feature: vec![1.0, -1.0, 10.0],
        weights_time: vec![1.0, 1.0, 1.0],
        bias: None,
        activation: Act::NONE,
    };
    let run = |activation| {
        run_float(
            &FloatSpec {
                activation,
                ..base.clone()
            },
            &[vec![0.5]],
        )[0]
        .0
        .clone()
    };
    assert_eq!(run(Act::NONE), [0.5, -0.5, 5.0]);
    assert_eq!(run(Act::RELU), [0.5, 0.0, 5.0]);
    assert_eq!(run(Act::RELU6), [0.5, 0.0, 5.0]);
    assert_eq!(run(Act::RELU_N1_TO_1), [0.5, -0.5, 1.0]);
    assert_eq!(run(Act::SIGN_BIT), [0.0, 1.0, 0.0]);
    let tanh = run(Act::TANH);
    for (got, x) in tanh.iter().zip([0.5f32, -0.5, 5.0]) {
        assert!((got - x.tanh()).abs() <= 1e-6, "{got} vs tanh({x})");
    }
}

// ---------------------------------------------------------------------------
// Memory: no scratch.

#[test]
fn requests_no_scratch() {
    let spec = unit_spec();
    let aligned = Aligned::new(&spec.model());
    let model = Model::from_bytes(aligned.bytes()).unwrap();
    let resolver = all_builtins();
    let mut arena = vec![0u128; 4096 / 16];
    let arena: &mut [u8] = bytemuck::cast_slice_mut(&mut arena);
    let mut interpreter = Interpreter::new(model, &resolver, arena);
    let mut scratch = usize::MAX;
    let mut head = 0;
    interpreter
        .allocate_with_report(&Greedy, &Default::default(), |plan| {
            scratch = plan.requests.len() - 2; // input and output tensors
            head = plan.head;
        })
        .unwrap();
    assert_eq!(scratch, 0);
    // Input (2 B) and output (2 B), each in its own 16-byte slot.
    assert_eq!(head, 32);
}

// ---------------------------------------------------------------------------
// Errors.

fn prepare_error(model: &[u8]) -> KernelError {
    match run_steps(model, &[]) {
        Err(InterpreterError::Kernel { error, .. }) => error,
        other => panic!("expected a kernel error, got {other:?}"),
    }
}

/// Builds `spec`'s model through `edit`, which may change tensors and
/// the op before it is written.
fn model_with(spec: &IntSpec, edit: impl FnOnce(&mut ModelParts)) -> Vec<u8> {
    let mut parts = ModelParts::from(spec);
    edit(&mut parts);
    parts.write()
}

/// An integer SVDF model in editable pieces.
struct ModelParts {
    spec: IntSpec,
    input_type: TensorType,
    output_type: TensorType,
    state_shape: Vec<i32>,
    state_variable: bool,
    time_type: TensorType,
    bias_scale: f32,
    options: Options,
    inputs: usize,
}

impl From<&IntSpec> for ModelParts {
    fn from(spec: &IntSpec) -> Self {
        ModelParts {
            spec: spec.clone(),
            input_type: TensorType::INT8,
            output_type: TensorType::INT8,
            state_shape: vec![spec.batch as i32, (spec.memory * spec.filters) as i32],
            state_variable: true,
            time_type: spec.state_type,
            bias_scale: spec.state_q.0 * spec.time_scale,
            options: Options::Svdf {
                rank: spec.rank as i32,
                activation: spec.activation,
            },
            inputs: 5,
        }
    }
}

impl ModelParts {
    fn write(&self) -> Vec<u8> {
        let s = &self.spec;
        let mut w = ModelWriter::new();
        let (b, n, f, m, u) = (
            s.batch as i32,
            s.input_size as i32,
            s.filters as i32,
            s.memory as i32,
            s.units() as i32,
        );
        let x = w.input("x", self.input_type, &[b, n]);
        w.quantize(x, s.input_q.0, s.input_q.1.into());
        let wf = w.constant(
            "wf",
            TensorType::INT8,
            &[f, n],
            &i8_bytes(&s.weights_feature),
        );
        w.quantize(wf, s.feature_scale, 0);
        let time_bytes = if self.time_type == TensorType::INT8 {
            s.weights_time.iter().map(|&v| v as i8 as u8).collect()
        } else {
            i16_bytes(&s.weights_time)
        };
        let wt = w.constant("wt", self.time_type, &[f, m], &time_bytes);
        w.quantize(wt, s.time_scale, 0);
        let bias = w.constant(
            "bias",
            TensorType::INT32,
            &[u],
            &i32_bytes(&vec![0; s.units()]),
        );
        w.quantize(bias, self.bias_scale, 0);
        let state: TensorId = if self.state_variable {
            w.variable("state", s.state_type, &self.state_shape)
        } else {
            w.tensor("state", s.state_type, &self.state_shape)
        };
        w.quantize(state, s.state_q.0, s.state_q.1.into());
        let y = w.output("y", self.output_type, &[b, u]);
        w.quantize(y, s.output_q.0, s.output_q.1.into());
        let all = [Some(x), Some(wf), Some(wt), Some(bias), Some(state)];
        w.op(
            BuiltinOperator::SVDF,
            &all[..self.inputs],
            &[y],
            self.options.clone(),
        );
        w.finish()
    }
}

#[test]
fn prepare_rejects_bad_operators() {
    let spec = unit_spec();
    // Sanity: the unedited parts run.
    assert!(run_steps(&model_with(&spec, |_| {}), &[]).is_ok());

    let e = prepare_error(&model_with(&spec, |p| p.options = Options::None));
    assert_eq!(e, KernelError::MissingOptions);

    let e = prepare_error(&model_with(&spec, |p| {
        p.options = Options::Svdf {
            rank: 0,
            activation: Act::NONE,
        }
    }));
    assert!(
        matches!(e, KernelError::UnsupportedParameter { .. }),
        "{e:?}"
    );

    // 2 filters do not split into rank 3.
    let e = prepare_error(&model_with(&spec, |p| {
        p.options = Options::Svdf {
            rank: 3,
            activation: Act::NONE,
        }
    }));
    assert!(matches!(e, KernelError::ShapeMismatch { .. }), "{e:?}");

    let e = prepare_error(&model_with(&spec, |p| p.inputs = 4));
    assert!(
        matches!(e, KernelError::UnsupportedParameter { .. }),
        "{e:?}"
    );

    // State of the wrong size (tensor 5 in the written order).
    let e = prepare_error(&model_with(&spec, |p| p.state_shape = vec![1, 5]));
    assert_eq!(e, KernelError::ShapeMismatch { tensor: 4 });

    let e = prepare_error(&model_with(&spec, |p| p.state_variable = false));
    assert_eq!(e, KernelError::NotVariable { position: 4 });

    // weights_time int8 against an int16 state.
    let e = prepare_error(&model_with(&spec, |p| p.time_type = TensorType::INT8));
    assert_eq!(
        e,
        KernelError::UnsupportedType {
            tensor: 4,
            dtype: TensorType::INT16.0
        }
    );

    let e = prepare_error(&model_with(&spec, |p| p.output_type = TensorType::INT16));
    assert_eq!(
        e,
        KernelError::UnsupportedType {
            tensor: 5,
            dtype: TensorType::INT16.0
        }
    );

    let e = prepare_error(&model_with(&spec, |p| p.input_type = TensorType::INT16));
    assert_eq!(
        e,
        KernelError::UnsupportedType {
            tensor: 0,
            dtype: TensorType::INT16.0
        }
    );

    let e = prepare_error(&model_with(&spec, |p| p.bias_scale = 0.5));
    assert!(
        matches!(e, KernelError::UnsupportedParameter { .. }),
        "{e:?}"
    );
}

// ---------------------------------------------------------------------------
// Properties: the scratch-free kernels against TFLM's algorithm.

#[derive(Debug, Clone)]
struct Case<T> {
    shape: SvdfShape,
    quant: SvdfQuantParams,
    weights_feature: Vec<i8>,
    weights_time: Vec<T>,
    bias: Option<Vec<i32>>,
    initial_state: Vec<T>,
    inputs: Vec<Vec<i8>>,
}

fn shape_strategy() -> impl Strategy<Value = SvdfShape> {
    // Inputs past 128 features take the feature matmul's unwidened loop.
    let input_size = prop_oneof![4 => 0u32..=40, 1 => 120u32..=150];
    (1u32..=3, input_size, 1u32..=6, 1u32..=3, 1u32..=10).prop_map(
        |(batch, input_size, units, rank, memory)| SvdfShape {
            batch,
            input_size,
            filters: units * rank,
            rank,
            memory,
        },
    )
}

fn quant_strategy(
    state_zero_points: std::ops::RangeInclusive<i32>,
) -> impl Strategy<Value = SvdfQuantParams> {
    (
        // Zero points outside int8 take the unwidened loop too.
        prop_oneof![4 => -128i32..=127, 1 => -70_000i32..=70_000],
        state_zero_points,
        -128i32..=127,
        (1i32 << 30)..=i32::MAX,
        -24i32..=12,
        (1i32 << 30)..=i32::MAX,
        -30i32..=4,
    )
        .prop_map(|(iz, sz, oz, m1, s1, m2, s2)| SvdfQuantParams {
            input_zero_point: iz,
            state_zero_point: sz,
            output_zero_point: oz,
            scale_1_multiplier: m1,
            scale_1_shift: s1,
            scale_2_multiplier: m2,
            scale_2_shift: s2,
        })
}

fn case_strategy<T: StateElement + std::fmt::Debug>(
    element: impl Strategy<Value = T> + Clone + 'static,
    state_zero_points: std::ops::RangeInclusive<i32>,
) -> impl Strategy<Value = Case<T>> {
    (
        shape_strategy(),
        quant_strategy(state_zero_points),
        1usize..=5,
    )
        .prop_flat_map(move |(shape, quant, steps)| {
            let b = shape.batch as usize;
            let n = shape.input_size as usize;
            let f = shape.filters as usize;
            let m = shape.memory as usize;
            let u = shape.units();
            (
                Just(shape),
                Just(quant),
                prop::collection::vec(any::<i8>(), f * n),
                prop::collection::vec(element.clone(), f * m),
                prop::option::of(prop::collection::vec(
                    prop_oneof![any::<i32>(), -100_000i32..100_000],
                    u,
                )),
                prop::collection::vec(element.clone(), b * f * m),
                prop::collection::vec(prop::collection::vec(any::<i8>(), b * n), steps),
            )
                .prop_map(
                    |(shape, quant, weights_feature, weights_time, bias, initial_state, inputs)| {
                        Case {
                            shape,
                            quant,
                            weights_feature,
                            weights_time,
                            bias,
                            initial_state,
                            inputs,
                        }
                    },
                )
        })
}

fn check_integer_case<T: StateElement + PartialEq + std::fmt::Debug>(
    case: &Case<T>,
) -> Result<(), TestCaseError> {
    let shape = &case.shape;
    let units = shape.units();
    let batch = shape.batch as usize;
    let mut fast_state = case.initial_state.clone();
    let mut ref_state = case.initial_state.clone();
    let mut scratch = vec![0i32; batch * shape.filters as usize];
    let mut scratch_output = vec![0i32; batch * units];
    for (k, x) in case.inputs.iter().enumerate() {
        let mut fast = vec![0i8; batch * units];
        let mut reference = vec![0i8; batch * units];
        svdf::eval_integer(
            shape,
            &case.quant,
            x,
            &case.weights_feature,
            &case.weights_time,
            case.bias.as_deref(),
            &mut fast_state,
            &mut fast,
        )
        .unwrap();
        svdf::reference::eval_integer(
            shape,
            &case.quant,
            x,
            &case.weights_feature,
            &case.weights_time,
            case.bias.as_deref(),
            &mut ref_state,
            &mut reference,
            &mut scratch,
            &mut scratch_output,
        )
        .unwrap();
        prop_assert_eq!(&fast_state, &ref_state, "state at step {}", k);
        prop_assert_eq!(&fast, &reference, "output at step {}", k);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn integer_int16_state_matches_tflm_algorithm(
        case in case_strategy(prop_oneof![any::<i16>(), -300i16..300], 0..=0)
    ) {
        check_integer_case(&case)?;
    }

    #[test]
    fn integer_int16_state_with_zero_point_matches_tflm_algorithm(
        case in case_strategy(any::<i16>(), -32768..=32767)
    ) {
        check_integer_case(&case)?;
    }

    #[test]
    fn integer_int8_state_matches_tflm_algorithm(
        case in case_strategy(any::<i8>(), -128..=127)
    ) {
        check_integer_case(&case)?;
    }

    #[test]
    fn float_matches_tflm_algorithm_bit_for_bit(
        shape in shape_strategy(),
        seed in any::<u64>(),
        with_bias in any::<bool>(),
        steps in 1usize..=5,
        activation in prop_oneof![
            Just(Act::NONE), Just(Act::RELU), Just(Act::RELU_N1_TO_1),
            Just(Act::RELU6), Just(Act::TANH), Just(Act::SIGN_BIT)
        ],
    ) {
        // A small deterministic generator keeps the strategy simple.
        let mut s = seed | 1;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        };
        let b = shape.batch as usize;
        let n = shape.input_size as usize;
        let f = shape.filters as usize;
        let m = shape.memory as usize;
        let u = shape.units();
        let wf: Vec<f32> = (0..f * n).map(|_| next()).collect();
        let wt: Vec<f32> = (0..f * m).map(|_| next()).collect();
        let bias: Option<Vec<f32>> = with_bias.then(|| (0..u).map(|_| next()).collect());
        let mut fast_state: Vec<f32> = (0..b * f * m).map(|_| next()).collect();
        let mut ref_state = fast_state.clone();
        let mut scratch = vec![0f32; b * f];
        for k in 0..steps {
            let x: Vec<f32> = (0..b * n).map(|_| next()).collect();
            let mut fast = vec![0f32; b * u];
            let mut reference = vec![0f32; b * u];
            svdf::eval_float(&shape, activation, &x, &wf, &wt, bias.as_deref(), &mut fast_state, &mut fast).unwrap();
            svdf::reference::eval_float(&shape, activation, &x, &wf, &wt, bias.as_deref(), &mut ref_state, &mut reference, &mut scratch).unwrap();
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(&fast_state), bits(&ref_state), "state at step {}", k);
            prop_assert_eq!(bits(&fast), bits(&reference), "output at step {}", k);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Through the interpreter: prepare's multipliers from real scales, the
    /// state reset and carried between invokes, and the tensor plumbing.
    #[test]
    fn one_op_models_match_tflm_algorithm(
        (batch, input_size, units, rank, memory) in (1usize..=2, 1usize..=12, 1usize..=4, 1usize..=2, 1usize..=6),
        scales in (0.001f32..0.1, 0.001f32..0.02, 0.0005f32..0.01, 0.0005f32..0.01, 0.01f32..0.5),
        zero_points in (-128i32..=127, -128i32..=127),
        seed in any::<u64>(),
        steps in 1usize..=4,
    ) {
        let mut s = seed | 1;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let filters = units * rank;
        let (input_scale, feature_scale, time_scale, state_scale, output_scale) = scales;
        let spec = IntSpec {
            batch,
            input_size,
            filters,
            rank,
            memory,
            state_type: TensorType::INT16,
            input_q: (input_scale, zero_points.0),
            feature_scale,
            time_scale,
            state_q: (state_scale, 0),
            output_q: (output_scale, zero_points.1),
            weights_feature: (0..filters * input_size).map(|_| next() as i8).collect(),
            weights_time: (0..filters * memory).map(|_| next() as i16).collect(),
            bias: (next() % 2 == 0)
                .then(|| (0..units).map(|_| (next() as i32) >> 12).collect()),
            activation: Act::RELU,
        };
        let inputs: Vec<Vec<i8>> = (0..steps)
            .map(|_| (0..batch * input_size).map(|_| next() as i8).collect())
            .collect();
        let got = run_int(&spec, &inputs);

        let shape = spec.shape();
        let quant = spec.quant();
        let mut state = vec![0i16; batch * filters * memory];
        let mut scratch = vec![0i32; batch * filters];
        let mut scratch_output = vec![0i32; batch * units];
        for (k, x) in inputs.iter().enumerate() {
            let mut want = vec![0i8; batch * units];
            svdf::reference::eval_integer(
                &shape, &quant, x, &spec.weights_feature, &spec.weights_time,
                spec.bias.as_deref(), &mut state, &mut want, &mut scratch, &mut scratch_output,
            ).unwrap();
            prop_assert_eq!(&got[k].0, &want, "output at step {}", k);
            prop_assert_eq!(as_i16(&got[k].1), state.clone(), "state at step {}", k);
        }
    }
}

#[test]
fn empty_shapes_do_nothing() {
    let quant = unit_spec().quant();
    for (batch, input_size, filters) in [(1, 3, 0), (0, 3, 2), (1, 0, 2), (0, 0, 0)] {
        let shape = SvdfShape {
            batch,
            input_size,
            filters,
            rank: 1,
            memory: 2,
        };
        let (b, n, f) = (batch as usize, input_size as usize, filters as usize);
        let mut state = vec![7i16; b * f * 2];
        let mut output = vec![0i8; b * f];
        svdf::eval_integer(
            &shape,
            &quant,
            &vec![1; b * n],
            &vec![1; f * n],
            &vec![1i16; f * 2],
            None,
            &mut state,
            &mut output,
        )
        .unwrap();
        // An empty input row still shifts in a zero-valued feature.
        if n == 0 {
            assert!(state.chunks(2).all(|row| row == [7, 0]));
        }
        let mut state = vec![7f32; b * f * 2];
        let mut output = vec![0f32; b * f];
        svdf::eval_float(
            &shape,
            Act::NONE,
            &vec![1.0; b * n],
            &vec![1.0; f * n],
            &vec![1.0; f * 2],
            None,
            &mut state,
            &mut output,
        )
        .unwrap();
    }
}

#[test]
fn mismatched_slices_are_an_error_not_a_panic() {
    let shape = unit_spec().shape();
    let quant = unit_spec().quant();
    let mut state = vec![0i16; 6];
    let mut output = vec![0i8; 2];
    let short_input = [0i8; 1];
    assert_eq!(
        svdf::eval_integer(
            &shape,
            &quant,
            &short_input,
            &[0; 4],
            &[0i16; 6],
            None,
            &mut state,
            &mut output
        ),
        Err(KernelError::Internal)
    );
}
