//! Every CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED layer of the
//! conformance models (`../shared/conformance`, or `HILT_CONFORMANCE_DIR`),
//! rebuilt as a one-op model with its real weights, bias, quantisation and
//! options, run on random inputs and compared with TFLM's reference loops:
//! real multipliers, zero points and shapes, even for models whose other
//! operators have no kernel yet. Skipped when the set is absent.

mod conv_family;

use std::path::PathBuf;

use conv_family::*;
use hilt_runtime::model::{Model, OpCode, TensorInfo};
use hilt_runtime::schema::{BuiltinOperator as Op, TensorType as T};
use hilt_runtime::writer::{Options, f32_bytes};

fn conformance_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("HILT_CONFORMANCE_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance"),
    };
    dir.join("models").is_dir().then_some(dir)
}

fn quant_of(t: &TensorInfo<'_>) -> Option<Q> {
    let q = t.raw().quantization()?;
    let scales: Vec<f32> = q.scale()?.iter().collect();
    if scales.is_empty() {
        return None;
    }
    let zero_points: Vec<i64> = q
        .zero_point()
        .map_or_else(|| vec![0; scales.len()], |z| z.iter().collect());
    Some(Q {
        scales,
        zero_points,
        axis: q.quantized_dimension(),
    })
}

fn shape(t: &TensorInfo<'_>) -> Vec<i32> {
    t.shape().collect()
}

fn data(t: &TensorInfo<'_>) -> Data {
    let bytes = t.constant.expect("constant");
    match t.dtype {
        T::INT8 => Data::I8(as_i8(bytes)),
        T::INT32 => Data::I32(
            bytes
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        T::FLOAT32 => Data::F32(as_f32(bytes)),
        other => panic!("unexpected constant type {other:?}"),
    }
}

/// Checks one layer; returns whether it was one of ours.
fn check_layer(model: &Model<'_>, op_index: u32, seed: u64) -> bool {
    let op = model.operator(op_index).unwrap();
    let OpCode::Builtin(code) = op.code else {
        return false;
    };
    if ![Op::CONV_2D, Op::DEPTHWISE_CONV_2D, Op::FULLY_CONNECTED].contains(&code) {
        return false;
    }
    let tensor = |i: usize| op.inputs().nth(i).flatten().and_then(|t| model.tensor(t));
    let (input, filter, bias) = (tensor(0).unwrap(), tensor(1).unwrap(), tensor(2));
    let output = model
        .tensor(op.outputs().next().flatten().unwrap())
        .unwrap();
    let raw = op.raw();
    let (options, window, act) = if code == Op::FULLY_CONNECTED {
        let o = raw.builtin_options_as_fully_connected_options().unwrap();
        let act = o.fused_activation_function();
        let options = Options::FullyConnected {
            activation: act,
            keep_num_dims: o.keep_num_dims(),
        };
        (options, None, act)
    } else if code == Op::CONV_2D {
        let o = raw.builtin_options_as_conv_2_doptions().unwrap();
        let window = Window {
            padding: o.padding(),
            stride: (o.stride_h() as usize, o.stride_w() as usize),
            dilation: (
                o.dilation_h_factor() as usize,
                o.dilation_w_factor() as usize,
            ),
        };
        let options = Options::Conv2D {
            padding: o.padding(),
            stride: (o.stride_w(), o.stride_h()),
            dilation: (o.dilation_w_factor(), o.dilation_h_factor()),
            activation: o.fused_activation_function(),
        };
        (options, Some(window), o.fused_activation_function())
    } else {
        let o = raw.builtin_options_as_depthwise_conv_2_doptions().unwrap();
        let window = Window {
            padding: o.padding(),
            stride: (o.stride_h() as usize, o.stride_w() as usize),
            dilation: (
                o.dilation_h_factor() as usize,
                o.dilation_w_factor() as usize,
            ),
        };
        let options = Options::DepthwiseConv2D {
            padding: o.padding(),
            stride: (o.stride_w(), o.stride_h()),
            dilation: (o.dilation_w_factor(), o.dilation_h_factor()),
            depth_multiplier: o.depth_multiplier(),
            activation: o.fused_activation_function(),
        };
        (options, Some(window), o.fused_activation_function())
    };
    let bytes = one_op(
        code,
        options,
        input.dtype,
        &shape(&input),
        quant_of(&input),
        &shape(&filter),
        data(&filter),
        quant_of(&filter),
        bias.map(|b| (data(&b), quant_of(&b))),
        &shape(&output),
        quant_of(&output),
    );
    let in_shape = shape(&input);
    let f_shape = shape(&filter);
    let out_shape = shape(&output);
    let channels = *out_shape.last().unwrap() as usize;
    let n_in: usize = in_shape.iter().map(|&d| d as usize).product();
    let mut lcg = Lcg(seed);
    let dims4 = |s: &[i32]| [s[0] as usize, s[1] as usize, s[2] as usize, s[3] as usize];
    let context = format!("op {op_index} {code:?} {in_shape:?} -> {out_shape:?}");
    match input.dtype {
        T::INT8 => {
            let x = lcg.i8s(n_in);
            let got = as_i8(&run(&bytes, &i8_bytes(&x)).unwrap());
            let (iq, fq, oq) = (
                quant_of(&input).unwrap(),
                quant_of(&filter).unwrap(),
                quant_of(&output).unwrap(),
            );
            let in_q = (iq.scales[0], iq.zero_points[0] as i32);
            let out_q = (oq.scales[0], oq.zero_points[0] as i32);
            let Data::I8(w) = data(&filter) else {
                unreachable!()
            };
            let bias = bias.map(|b| match data(&b) {
                Data::I32(v) => v,
                _ => unreachable!(),
            });
            let (sums, rq) = match window {
                Some(window) => {
                    let rq = Requant::per_channel(in_q, &fq.scales, out_q, channels, act);
                    let sums = if code == Op::CONV_2D {
                        conv_sums(
                            &x,
                            dims4(&in_shape),
                            &w,
                            dims4(&f_shape),
                            &window,
                            rq.input_offset,
                        )
                    } else {
                        let m = channels / in_shape[3] as usize;
                        let (fh, fw) = (f_shape[1] as usize, f_shape[2] as usize);
                        depthwise_sums(
                            &x,
                            dims4(&in_shape),
                            &w,
                            fh,
                            fw,
                            m,
                            &window,
                            rq.input_offset,
                        )
                    };
                    (sums, rq)
                }
                None => {
                    // FULLY_CONNECTED: per-tensor scales multiply in float first.
                    let (rq, fo) = if fq.scales.len() > 1 {
                        (
                            Requant::per_channel(in_q, &fq.scales, out_q, channels, act),
                            0,
                        )
                    } else {
                        let rq = Requant::fc_per_tensor(in_q, fq.scales[0], out_q, act);
                        (rq, -(fq.zero_points[0] as i32))
                    };
                    let k = *f_shape.last().unwrap() as usize;
                    let batches =
                        out_shape.iter().map(|&d| d as usize).product::<usize>() / channels;
                    let mut sums = Vec::new();
                    for b in 0..batches {
                        for c in 0..channels {
                            let s: i32 = (0..k)
                                .map(|d| {
                                    (i32::from(w[c * k + d]) + fo)
                                        * (i32::from(x[b * k + d]) + rq.input_offset)
                                })
                                .sum();
                            sums.push(s);
                        }
                    }
                    (sums, rq)
                }
            };
            let want = finish_i8(&sums, bias.as_deref(), &rq, channels);
            assert_eq!(got, want, "{context}");
        }
        T::FLOAT32 => {
            let x = lcg.f32s(n_in);
            let got = as_f32(&run(&bytes, &f32_bytes(&x)).unwrap());
            let Data::F32(w) = data(&filter) else {
                unreachable!()
            };
            let bias = bias.map(|b| match data(&b) {
                Data::F32(v) => v,
                _ => unreachable!(),
            });
            let sums = match window {
                Some(window) if code == Op::CONV_2D => {
                    conv_sums(&x, dims4(&in_shape), &w, dims4(&f_shape), &window, 0)
                }
                Some(window) => {
                    let m = channels / in_shape[3] as usize;
                    let (fh, fw) = (f_shape[1] as usize, f_shape[2] as usize);
                    depthwise_sums(&x, dims4(&in_shape), &w, fh, fw, m, &window, 0)
                }
                None => {
                    let k = *f_shape.last().unwrap() as usize;
                    let batches =
                        out_shape.iter().map(|&d| d as usize).product::<usize>() / channels;
                    let mut sums = Vec::new();
                    for b in 0..batches {
                        for c in 0..channels {
                            let mut t = 0.0f32;
                            for d in 0..k {
                                t += x[b * k + d] * w[c * k + d];
                            }
                            sums.push(t);
                        }
                    }
                    sums
                }
            };
            let want = finish_f32(&sums, bias.as_deref(), act, channels);
            assert_f32_exact(&got, &want);
        }
        other => panic!("{context}: unexpected type {other:?}"),
    }
    true
}

#[test]
fn every_conformance_layer_matches_tflm_reference() {
    let Some(dir) = conformance_dir() else {
        eprintln!("conformance set not found: skipped");
        return;
    };
    let mut models: Vec<_> = std::fs::read_dir(dir.join("models"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tflite"))
        .collect();
    models.sort();
    let mut layers = 0;
    for path in models {
        let file = std::fs::read(&path).unwrap();
        // Aligned for in-place i32/f32 views of the weights.
        let mut words = vec![0u128; file.len().div_ceil(16)];
        let aligned: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
        aligned[..file.len()].copy_from_slice(&file);
        let model = Model::from_bytes(&aligned[..file.len()]).unwrap();
        for op in 0..model.operator_count() {
            if check_layer(&model, op, u64::from(op) * 7919 + 1) {
                layers += 1;
            }
        }
    }
    eprintln!("{layers} layers checked");
    assert!(layers > 100, "only {layers} layers found");
}
