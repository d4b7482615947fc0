//! Small models of our own, written with the runtime's model writer, that
//! ship in `scenarios/models/` so a fresh clone has something real to run.
//!
//! `cargo run -p hilt --example write_example_models` rewrites them; a test
//! checks that the committed files are what this code writes. The runtime's
//! own tests use the same graphs.

use alloc::vec;
use alloc::vec::Vec;

use super::{ModelWriter, Options, TensorId, f32_bytes, i32_bytes};
use crate::schema::{
    ActivationFunctionType as Act, BuiltinOperator as Op, Padding, TensorType as T,
};

/// Deterministic weights: a small linear congruential generator.
struct Lcg(u32);

impl Lcg {
    fn next_i8(&mut self) -> u8 {
        self.0 = self.0.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        ((self.0 >> 24) as i8 / 2) as u8
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_i8()).collect()
    }
}

/// Every example model, with its file name.
pub fn all() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("reshape_int8.tflite", reshape_int8()),
        ("seed_fc_float.tflite", seed_fc_float()),
        ("tiny_convnet_int8.tflite", tiny_convnet_int8()),
        ("branches_int8.tflite", branches_int8()),
    ]
}

/// Per-channel int8 weights of `shape` (OHWI, or 1HWC for a depthwise
/// filter) and their int32 bias, quantised as TFLite's converter does.
fn conv_weights(
    w: &mut ModelWriter,
    rng: &mut Lcg,
    name: &str,
    shape: [i32; 4],
    depthwise: bool,
) -> (TensorId, TensorId) {
    let n = shape.iter().product::<i32>() as usize;
    let weights = w.constant(
        &alloc::format!("{name}/weights"),
        T::INT8,
        &shape,
        &rng.bytes(n),
    );
    let channels = if depthwise { shape[3] } else { shape[0] };
    let axis = if depthwise { 3 } else { 0 };
    let scales: Vec<f32> = (0..channels).map(|i| 0.004 + 0.0005 * i as f32).collect();
    w.quantize_per_channel(weights, &scales, &vec![0; channels as usize], axis);
    let bias_values: Vec<i32> = (0..channels).map(|i| (i - 3) * 40).collect();
    let bias = w.constant(
        &alloc::format!("{name}/bias"),
        T::INT32,
        &[channels],
        &i32_bytes(&bias_values),
    );
    let bias_scales: Vec<f32> = scales.iter().map(|s| s / 128.0).collect();
    w.quantize_per_channel(bias, &bias_scales, &vec![0; channels as usize], 0);
    (weights, bias)
}

/// MobileNet's blocks in miniature, for the lean schedule: a 3×3 conv,
/// then depthwise 3×3 (stride 1), pointwise widening 8 → 16 channels,
/// depthwise 3×3 stride 2, depthwise 5×5 (padding 2) and pointwise narrowing
/// 16 → 6, over an `h × w × 4` input. Every op but the first can run in
/// place.
pub fn mobilenet_blocks_int8(h: i32, w_: i32) -> Vec<u8> {
    let mut rng = Lcg(7);
    let mut w = ModelWriter::new();
    let input = w.input("image", T::INT8, &[1, h, w_, 4]);
    w.quantize(input, 1.0 / 128.0, 3);
    let conv = |padding, stride: i32| Options::Conv2D {
        padding,
        stride: (stride, stride),
        dilation: (1, 1),
        activation: Act::RELU6,
    };
    let depthwise = |padding, stride: i32| Options::DepthwiseConv2D {
        padding,
        stride: (stride, stride),
        dilation: (1, 1),
        depth_multiplier: 1,
        activation: Act::RELU6,
    };
    let (h2, w2) = ((h + 1) / 2, (w_ + 1) / 2);
    // Name, operator, filter shape, depthwise, options, output shape.
    type Layer = (&'static str, Op, [i32; 4], bool, Options, [i32; 4]);
    let steps: [Layer; 6] = [
        (
            "conv",
            Op::CONV_2D,
            [8, 3, 3, 4],
            false,
            conv(Padding::SAME, 1),
            [1, h, w_, 8],
        ),
        (
            "dw1",
            Op::DEPTHWISE_CONV_2D,
            [1, 3, 3, 8],
            true,
            depthwise(Padding::SAME, 1),
            [1, h, w_, 8],
        ),
        (
            "pw1",
            Op::CONV_2D,
            [16, 1, 1, 8],
            false,
            conv(Padding::VALID, 1),
            [1, h, w_, 16],
        ),
        (
            "dw2",
            Op::DEPTHWISE_CONV_2D,
            [1, 3, 3, 16],
            true,
            depthwise(Padding::SAME, 2),
            [1, h2, w2, 16],
        ),
        (
            "dw3",
            Op::DEPTHWISE_CONV_2D,
            [1, 5, 5, 16],
            true,
            depthwise(Padding::SAME, 1),
            [1, h2, w2, 16],
        ),
        (
            "pw2",
            Op::CONV_2D,
            [6, 1, 1, 16],
            false,
            conv(Padding::VALID, 1),
            [1, h2, w2, 6],
        ),
    ];
    let mut x = input;
    for (k, (name, op, filter, dw, options, shape)) in steps.into_iter().enumerate() {
        let (weights, bias) = conv_weights(&mut w, &mut rng, name, filter, dw);
        let y = if k == 5 {
            w.output("out", T::INT8, &shape)
        } else {
            w.tensor(&alloc::format!("{name}/out"), T::INT8, &shape)
        };
        w.quantize(y, 0.02 + 0.004 * k as f32, -128 + 10 * k as i64);
        w.op(op, &[Some(x), Some(weights), Some(bias)], &[y], options);
        x = y;
    }
    w.finish()
}

/// One convolution of a [`residual_block_int8`] chain: filter size,
/// stride, dilation and padding (square).
#[derive(Debug, Clone, Copy)]
pub struct BlockConv {
    /// Filter height and width.
    pub filter: i32,
    /// Stride along both axes.
    pub stride: i32,
    /// Dilation along both axes.
    pub dilation: i32,
    /// SAME or VALID.
    pub padding: Padding,
}

/// How a [`residual_block_int8`] ends after its two convolutions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockEnd {
    /// No ADD: the second convolution's output goes on.
    Convs,
    /// ADD(block input, second output).
    AddInputFirst,
    /// ADD(second output, block input).
    AddInputSecond,
}

/// A residual block for the lean schedule's fused chains: two
/// convolutions `c` → `c` over an `h × w × c` input, then a pointwise head
/// to 4 channels (the model's output). With an ADD (`end`), a pointwise
/// stem (`h × w × 3` → `c` channels) comes first and the ADD sums its
/// output (the block's input) and the second convolution's; the
/// convolutions must then keep the stem's height and width.
pub fn residual_block_int8(
    h: i32,
    w_: i32,
    c: i32,
    convs: [BlockConv; 2],
    end: BlockEnd,
) -> Vec<u8> {
    let mut rng = Lcg(0xB10C);
    let mut w = ModelWriter::new();
    let channels = if end == BlockEnd::Convs { c } else { 3 };
    let input = w.input("image", T::INT8, &[1, h, w_, channels]);
    w.quantize(input, 1.0 / 64.0, -5);
    let conv = |b: &BlockConv| Options::Conv2D {
        padding: b.padding,
        stride: (b.stride, b.stride),
        dilation: (b.dilation, b.dilation),
        activation: Act::RELU,
    };
    let pointwise = BlockConv {
        filter: 1,
        stride: 1,
        dilation: 1,
        padding: Padding::VALID,
    };
    let out_size = |n: i32, b: &BlockConv| {
        let effective = (b.filter - 1) * b.dilation + 1;
        if b.padding == Padding::SAME {
            (n + b.stride - 1) / b.stride
        } else {
            ((n - effective + b.stride) / b.stride).max(0)
        }
    };
    // The stem: 3 → c channels (its weights `[c, 1, 1, 3]`).
    let x = if end == BlockEnd::Convs {
        input
    } else {
        let (ws, bs) = conv_weights(&mut w, &mut rng, "stem", [c, 1, 1, 3], false);
        let x = w.tensor("stem/out", T::INT8, &[1, h, w_, c]);
        w.quantize(x, 0.03, -128);
        w.op(
            Op::CONV_2D,
            &[Some(input), Some(ws), Some(bs)],
            &[x],
            conv(&pointwise),
        );
        x
    };
    let (h1, w1) = (out_size(h, &convs[0]), out_size(w_, &convs[0]));
    let y = w.tensor("conv1/out", T::INT8, &[1, h1, w1, c]);
    w.quantize(y, 0.04, -128);
    let mut layer = |w: &mut ModelWriter, name: &str, x: TensorId, b: &BlockConv, out: TensorId| {
        let (weights, bias) = conv_weights(w, &mut rng, name, [c, b.filter, b.filter, c], false);
        w.op(
            Op::CONV_2D,
            &[Some(x), Some(weights), Some(bias)],
            &[out],
            conv(b),
        );
    };
    layer(&mut w, "conv1", x, &convs[0], y);
    let (h2, w2) = (out_size(h1, &convs[1]), out_size(w1, &convs[1]));
    let z = w.tensor("conv2/out", T::INT8, &[1, h2, w2, c]);
    w.quantize(z, 0.05, 3);
    layer(&mut w, "conv2", y, &convs[1], z);
    let block = match end {
        BlockEnd::Convs => z,
        BlockEnd::AddInputFirst | BlockEnd::AddInputSecond => {
            let sum = w.tensor("add/out", T::INT8, &[1, h2, w2, c]);
            w.quantize(sum, 0.06, -20);
            let operands = if end == BlockEnd::AddInputFirst {
                [Some(x), Some(z)]
            } else {
                [Some(z), Some(x)]
            };
            w.op(
                Op::ADD,
                &operands,
                &[sum],
                Options::Add {
                    activation: Act::RELU,
                },
            );
            sum
        }
    };
    let (wh, bh) = conv_weights(&mut w, &mut rng, "head", [4, 1, 1, c], false);
    let out = w.output("out", T::INT8, &[1, h2, w2, 4]);
    w.quantize(out, 0.08, 0);
    w.op(
        Op::CONV_2D,
        &[Some(block), Some(wh), Some(bh)],
        &[out],
        conv(&pointwise),
    );
    w.finish()
}

/// Two independent branches joined by an ADD, for offload: a 3×3 CONV_2D
/// on one side (the engine's, when CONV_2D is offloaded) and two 3×3
/// DEPTHWISE_CONV_2D on the other (the CPU's). The CPU runs its branch
/// while the engine runs the convolution; the ADD waits for both.
pub fn branches_int8() -> Vec<u8> {
    let mut rng = Lcg(77);
    let mut w = ModelWriter::new();
    let c = 8;
    let input = w.input("x", T::INT8, &[1, 16, 16, c]);
    w.quantize(input, 1.0 / 64.0, 0);
    let same = Options::Conv2D {
        padding: Padding::SAME,
        stride: (1, 1),
        dilation: (1, 1),
        activation: Act::RELU,
    };
    let (wa, ba) = conv_weights(&mut w, &mut rng, "npu/conv", [c, 3, 3, c], false);
    let a = w.tensor("npu/conv/out", T::INT8, &[1, 16, 16, c]);
    w.quantize(a, 0.02, -128);
    w.op(Op::CONV_2D, &[Some(input), Some(wa), Some(ba)], &[a], same);
    let dw = || Options::DepthwiseConv2D {
        padding: Padding::SAME,
        stride: (1, 1),
        dilation: (1, 1),
        depth_multiplier: 1,
        activation: Act::RELU6,
    };
    let mut b = input;
    for name in ["cpu/dw1", "cpu/dw2"] {
        let (wb, bb) = conv_weights(&mut w, &mut rng, name, [1, 3, 3, c], true);
        let out = w.tensor(&alloc::format!("{name}/out"), T::INT8, &[1, 16, 16, c]);
        w.quantize(out, 0.02, -128);
        w.op(
            Op::DEPTHWISE_CONV_2D,
            &[Some(b), Some(wb), Some(bb)],
            &[out],
            dw(),
        );
        b = out;
    }
    let y = w.output("sum", T::INT8, &[1, 16, 16, c]);
    w.quantize(y, 0.04, -128);
    w.op(
        Op::ADD,
        &[Some(a), Some(b)],
        &[y],
        Options::Add {
            activation: Act::NONE,
        },
    );
    w.finish()
}

/// The smallest model every build can run: int8 [4, 16] → RESHAPE → [64].
/// The firmware smoke test uses it, since it needs no arithmetic kernel.
pub fn reshape_int8() -> Vec<u8> {
    let mut w = ModelWriter::new();
    let x = w.input("x", T::INT8, &[4, 16]);
    let shape = w.constant("shape", T::INT32, &[1], &i32_bytes(&[64]));
    let y = w.output("y", T::INT8, &[64]);
    w.op(
        Op::RESHAPE,
        &[Some(x), Some(shape)],
        &[y],
        Options::Reshape {
            new_shape: vec![64],
        },
    );
    w.finish()
}

/// The seed example: input 4 floats → FC 8 → ReLU → FC 2.
pub fn seed_fc_float() -> Vec<u8> {
    let mut w = ModelWriter::new();
    let weights1: Vec<f32> = (0..32)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) / 10.0)
        .collect();
    let weights2: Vec<f32> = (0..16).map(|i| ((i * 5 % 9) as f32 - 4.0) / 8.0).collect();
    let input = w.input("input", T::FLOAT32, &[1, 4]);
    let w1 = w.constant("fc1/weights", T::FLOAT32, &[8, 4], &f32_bytes(&weights1));
    let b1 = w.constant("fc1/bias", T::FLOAT32, &[8], &f32_bytes(&[0.1; 8]));
    let hidden = w.tensor("fc1/out", T::FLOAT32, &[1, 8]);
    let relu = w.tensor("relu/out", T::FLOAT32, &[1, 8]);
    let w2 = w.constant("fc2/weights", T::FLOAT32, &[2, 8], &f32_bytes(&weights2));
    let b2 = w.constant("fc2/bias", T::FLOAT32, &[2], &f32_bytes(&[0.0, 0.5]));
    let output = w.output("output", T::FLOAT32, &[1, 2]);
    let fc = Options::FullyConnected {
        activation: Act::NONE,
        keep_num_dims: false,
    };
    w.op(
        Op::FULLY_CONNECTED,
        &[Some(input), Some(w1), Some(b1)],
        &[hidden],
        fc.clone(),
    );
    w.op(Op::RELU, &[Some(hidden)], &[relu], Options::None);
    w.op(
        Op::FULLY_CONNECTED,
        &[Some(relu), Some(w2), Some(b2)],
        &[output],
        fc,
    );
    w.finish()
}

/// An int8 image classifier in miniature: 16×16×3 input, conv 3×3, depthwise
/// 3×3, pointwise conv, a residual add, global average pool, FC and softmax,
/// with per-channel weight quantisation as the TFLite converter writes it.
pub fn tiny_convnet_int8() -> Vec<u8> {
    let mut rng = Lcg(2024);
    let mut w = ModelWriter::new();
    let c = 8;
    let input = w.input("image", T::INT8, &[1, 16, 16, 3]);
    w.quantize(input, 1.0 / 128.0, 0);
    let features = convnet_features(&mut w, &mut rng, input, c);
    convnet_classifier(&mut w, &mut rng, features, c);
    w.finish()
}

/// The convnet's feature extractor: conv 3×3, depthwise 3×3, pointwise
/// conv and the residual add around the last two; returns the add's
/// `[1, 16, 16, c]` output. (Tensors, weights and random draws come in the
/// order the committed model file holds them.)
fn convnet_features(w: &mut ModelWriter, rng: &mut Lcg, input: TensorId, c: i32) -> TensorId {
    let (w1, b1) = conv_weights(w, rng, "conv1", [c, 3, 3, 3], false);
    let x1 = w.tensor("conv1/out", T::INT8, &[1, 16, 16, c]);
    w.quantize(x1, 0.02, -128);
    let same = |stride| Options::Conv2D {
        padding: Padding::SAME,
        stride,
        dilation: (1, 1),
        activation: Act::RELU,
    };
    w.op(
        Op::CONV_2D,
        &[Some(input), Some(w1), Some(b1)],
        &[x1],
        same((1, 1)),
    );

    let (w2, b2) = conv_weights(w, rng, "dw2", [1, 3, 3, c], true);
    let x2 = w.tensor("dw2/out", T::INT8, &[1, 16, 16, c]);
    w.quantize(x2, 0.02, -128);
    let dw = Options::DepthwiseConv2D {
        padding: Padding::SAME,
        stride: (1, 1),
        dilation: (1, 1),
        depth_multiplier: 1,
        activation: Act::RELU6,
    };
    w.op(
        Op::DEPTHWISE_CONV_2D,
        &[Some(x1), Some(w2), Some(b2)],
        &[x2],
        dw,
    );

    let (w3, b3) = conv_weights(w, rng, "pw3", [c, 1, 1, c], false);
    let x3 = w.tensor("pw3/out", T::INT8, &[1, 16, 16, c]);
    w.quantize(x3, 0.03, 0);
    let pointwise = Options::Conv2D {
        padding: Padding::VALID,
        stride: (1, 1),
        dilation: (1, 1),
        activation: Act::NONE,
    };
    w.op(
        Op::CONV_2D,
        &[Some(x2), Some(w3), Some(b3)],
        &[x3],
        pointwise,
    );

    let x4 = w.tensor("residual/out", T::INT8, &[1, 16, 16, c]);
    w.quantize(x4, 0.04, -20);
    w.op(
        Op::ADD,
        &[Some(x1), Some(x3)],
        &[x4],
        Options::Add {
            activation: Act::NONE,
        },
    );
    x4
}

/// The convnet's classifier over `features`: global average pool, flatten,
/// FC to four classes and softmax, whose output is the model's.
fn convnet_classifier(w: &mut ModelWriter, rng: &mut Lcg, features: TensorId, c: i32) {
    let x5 = w.tensor("pool/out", T::INT8, &[1, 1, 1, c]);
    w.quantize(x5, 0.04, -20);
    let pool = Options::Pool2D {
        padding: Padding::VALID,
        stride: (16, 16),
        filter: (16, 16),
        activation: Act::NONE,
    };
    w.op(Op::AVERAGE_POOL_2D, &[Some(features)], &[x5], pool);

    let shape = w.constant("flatten/shape", T::INT32, &[2], &i32_bytes(&[1, c]));
    let x6 = w.tensor("flatten/out", T::INT8, &[1, c]);
    w.quantize(x6, 0.04, -20);
    w.op(
        Op::RESHAPE,
        &[Some(x5), Some(shape)],
        &[x6],
        Options::Reshape {
            new_shape: vec![1, c],
        },
    );

    let classes = 4;
    let fc_weights = w.constant(
        "fc/weights",
        T::INT8,
        &[classes, c],
        &rng.bytes((classes * c) as usize),
    );
    w.quantize(fc_weights, 0.01, 0);
    let fc_bias = w.constant(
        "fc/bias",
        T::INT32,
        &[classes],
        &i32_bytes(&[100, -50, 25, 0]),
    );
    w.quantize(fc_bias, 0.0004, 0);
    let logits = w.tensor("fc/out", T::INT8, &[1, classes]);
    w.quantize(logits, 0.1, 10);
    let fc = Options::FullyConnected {
        activation: Act::NONE,
        keep_num_dims: false,
    };
    w.op(
        Op::FULLY_CONNECTED,
        &[Some(x6), Some(fc_weights), Some(fc_bias)],
        &[logits],
        fc,
    );

    let probabilities = w.output("probabilities", T::INT8, &[1, classes]);
    w.quantize(probabilities, 1.0 / 256.0, -128);
    w.op(
        Op::SOFTMAX,
        &[Some(logits)],
        &[probabilities],
        Options::Softmax { beta: 1.0 },
    );
}
