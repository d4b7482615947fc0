//! DEPTHWISE_CONV_2D against TFLM's reference loop on the host: the plain
//! loops, the packed four-channel path and the line ring, over random and
//! hand-picked geometries (the DSP instructions emulated bit for bit).

use super::*;
use crate::kernels::quant_math::OutputStage;
use crate::kernels::window_axis::Axis;
use crate::schema::Padding;
use proptest::prelude::*;

/// A random int8 depthwise layer and its input.
#[derive(Debug, Clone)]
struct Layer {
    dims: [usize; 4],
    filter: (usize, usize),
    multiplier: usize,
    same: bool,
    stride: (usize, usize),
    dilation: (usize, usize),
    x_offset: i32,
    bias: bool,
    /// Biases up to 2^30 (the 32-bit requantisation does not apply).
    big: bool,
    seed: u64,
}

fn layer() -> impl Strategy<Value = Layer> {
    (
        (1usize..=2, 1usize..=8, 1usize..=11, 1usize..=21),
        (
            1usize..=4,
            1usize..=4,
            prop_oneof![6 => Just(1usize), 1 => 2usize..=3, 2 => Just(4usize), 1 => Just(8usize)],
        ),
        (
            any::<bool>(),
            1usize..=2,
            1usize..=2,
            1usize..=2,
            1usize..=2,
        ),
        (
            prop_oneof![Just(-127), Just(128), Just(0), -127i32..=128],
            any::<bool>(),
        ),
        (prop_oneof![4 => Just(false), 1 => Just(true)], any::<u64>()),
    )
        .prop_map(
            |((b, h, w, c), (fh, fw, m), (same, sy, sx, dy, dx), (off, bias), (big, seed))| Layer {
                dims: [b, h, w, if m > 1 { c.min(9) } else { c }],
                filter: (fh, fw),
                multiplier: m,
                same,
                stride: (sy, sx),
                dilation: (dy, dx),
                x_offset: off,
                bias,
                big,
                seed,
            },
        )
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 32) as u32
    }
    fn i8(&mut self) -> i8 {
        self.next() as i8
    }
}

/// Everything one run needs, with the arrays the tail would hold.
struct Built {
    data: OpData,
    x: Vec<i8>,
    w: Vec<i8>,
    bias: Option<Vec<i32>>,
    folded: Vec<i32>,
    multiplier: Vec<i32>,
    shift: Vec<[u8; 2]>,
    narrow: bool,
    stage: OutputStage,
}

fn build(l: &Layer) -> Option<Built> {
    let [b, h, w, c] = l.dims;
    let padding = if l.same {
        Padding::SAME
    } else {
        Padding::VALID
    };
    let axis = |n, f, s, d| Axis::new(padding, n as i32, f as i32, s as i32, d as i32).ok();
    let y = axis(h, l.filter.0, l.stride.0, l.dilation.0)?;
    let xa = axis(w, l.filter.1, l.stride.1, l.dilation.1)?;
    let out_c = c * l.multiplier;
    let geometry = Geometry {
        batches: b as u32,
        in_c: c as u32,
        out_c: out_c as u32,
        y,
        x: xa,
    };
    let mut rng = Rng(l.seed | 1);
    let taps = l.filter.0 * l.filter.1;
    let x: Vec<i8> = (0..geometry.input_len()).map(|_| rng.i8()).collect();
    let wts: Vec<i8> = (0..taps * out_c).map(|_| rng.i8()).collect();
    let bias = l.bias.then(|| {
        (0..out_c)
            .map(|_| rng.next() as i32 >> if l.big { 1 } else { 12 })
            .collect::<Vec<_>>()
    });
    let folded: Vec<i32> = (0..out_c)
        .map(|o| {
            let s: i32 = wts
                .iter()
                .skip(o)
                .step_by(out_c)
                .map(|&v| i32::from(v))
                .sum();
            bias.as_ref()
                .map_or(0, |b| b[o])
                .wrapping_add(l.x_offset * s)
        })
        .collect();
    let multiplier = (0..out_c)
        .map(|_| (1 << 30) + (rng.next() >> 2) as i32)
        .collect();
    // Left shifts (positive) now and then: the packed path's wide form.
    let top = if l.seed & 8 == 0 { 11 } else { 12 };
    let shifts: Vec<i32> = (0..out_c).map(|_| (rng.next() % top) as i32 - 10).collect();
    let narrow = (0..out_c).all(|o| {
        let model = i64::from(bias.as_ref().map_or(0, |b| b[o]));
        let start = model.abs().max(i64::from(folded[o]).abs());
        accumulators_within_narrow(start, taps)
    });
    let shift = shifts
        .iter()
        .map(|&s| crate::kernels::quant_math::shift_parts(s))
        .collect();
    let lo = (rng.next() % 100) as i32 - 128;
    let mut stage = OutputStage {
        offset: (rng.next() % 256) as i32 - 128,
        min: lo,
        max: (lo + (rng.next() % 256) as i32).min(127),
    };
    // The whole int8 range (the packed path's fast form) half the time.
    if l.seed & 16 == 0 {
        (stage.min, stage.max) = (-128, 127);
    }
    let mut channels: ChannelParams = bytemuck::Zeroable::zeroed();
    channels.input_offset = l.x_offset;
    channels.stage = stage;
    let data = OpData {
        kind: KIND_INT8,
        multiplier: l.multiplier as u32,
        geometry,
        float_min: 0.0,
        float_max: 0.0,
        folded: bytemuck::Zeroable::zeroed(),
        channels,
    };
    Some(Built {
        data,
        x,
        w: wts,
        bias,
        folded,
        multiplier,
        shift,
        narrow,
        stage,
    })
}

/// TFLM's reference loop: every tap inside the input, `w·(x + offset)`.
fn reference(t: &Built, requant: &Requant<'_>) -> Vec<i8> {
    let g = &t.data.geometry;
    let m = t.data.multiplier as usize;
    let (in_c, out_c) = (g.in_c as usize, g.out_c as usize);
    let mut out = vec![0i8; g.output_len()];
    g.for_each_pixel(|win, o| {
        for oc in 0..out_c {
            let mut acc = t.bias.as_ref().map_or(0, |b| b[oc]);
            for fy in 0..g.y.filter {
                for fx in 0..g.x.filter {
                    let iy = win.y0 + fy * g.y.dilation;
                    let ix = win.x0 + fx * g.x.dilation;
                    if iy < 0 || ix < 0 || iy >= g.y.in_size || ix >= g.x.in_size {
                        continue;
                    }
                    let at = win.image
                        + (iy as usize * g.x.in_size as usize + ix as usize) * in_c
                        + oc / m;
                    let wv = t.w[(fy * g.x.filter + fx) as usize * out_c + oc];
                    let xv = i32::from(t.x[at]) + t.data.channels.input_offset;
                    acc = acc.wrapping_add(i32::from(wv) * xv);
                }
            }
            out[o + oc] = requant.apply(oc, acc);
        }
    });
    out
}

fn run(t: &Built, packed: bool) -> Vec<i8> {
    let biases = Biases {
        model: t.bias.as_deref(),
        folded: &t.folded,
    };
    let tables = Tables {
        multiplier: &t.multiplier,
        shift: &t.shift,
        narrow: t.narrow,
    };
    let mut out = vec![0i8; t.data.geometry.output_len()];
    let requant = Requant::new(&t.multiplier, &t.shift, t.stage).unwrap();
    depthwise_i8_with(
        &t.data, &t.x, &t.w, &biases, &requant, &tables, &mut out, packed,
    )
    .unwrap();
    out
}

#[test]
fn long_3x3_runs_match_the_reference() {
    // Rows wide enough for the packed path's run-long 3×3 loop, with and
    // without remainder channels, multipliers 1 and 4, strides 1 and 2.
    for (c, m, stride, seed) in [(12, 1, 1, 3), (10, 1, 2, 4), (3, 4, 1, 5), (2, 8, 2, 6)] {
        for same in [true, false] {
            let l = Layer {
                dims: [1, 5, 23, c],
                filter: (3, 3),
                multiplier: m,
                same,
                stride: (stride, stride),
                dilation: (1, 1),
                x_offset: 128,
                bias: true,
                big: false,
                seed: seed * 8 + u64::from(same) * 16,
            };
            let t = build(&l).unwrap();
            let requant = Requant::new(&t.multiplier, &t.shift, t.stage).unwrap();
            let want = reference(&t, &requant);
            assert_eq!(run(&t, false), want, "{l:?}");
            assert_eq!(run(&t, true), want, "{l:?}");
        }
    }
}

#[test]
fn line_ring_matches_the_reference() {
    // 3×3, multiplier 1, stride 1: the ring path (depthwise_rows) along
    // x and along y (the longer output axis), odd and even lines, SAME
    // and VALID, the narrow and the wide requantisation, one channel and
    // many, one batch and two; and the shapes it leaves to the packed
    // path (lines too short or too long, strides of 2).
    let (mut taken, mut cases) = (0, 0);
    let mut seed = 1u64;
    let shapes = [
        (5, 25),
        (25, 5),
        (16, 3),
        (3, 17),
        (7, 64),
        (3, 130),
        (30, 6),
        (9, 9),
    ];
    for (h, w) in shapes {
        for (sy, sx) in [(1, 1), (1, 2)] {
            for same in [true, false] {
                for (c, big) in [(1, false), (5, false), (8, true)] {
                    seed += 1;
                    let l = Layer {
                        dims: [1 + (seed % 2) as usize, h, w, c],
                        filter: (3, 3),
                        multiplier: 1,
                        same,
                        stride: (sy, sx),
                        dilation: (1, 1),
                        x_offset: [128, -127, 5][(seed % 3) as usize],
                        bias: !seed.is_multiple_of(4),
                        big,
                        seed: seed * 8 + u64::from(same) * 16,
                    };
                    let Some(t) = build(&l) else { continue };
                    cases += 1;
                    taken += usize::from(depthwise_rows::applies(&t.data.geometry));
                    let requant = Requant::new(&t.multiplier, &t.shift, t.stage).unwrap();
                    assert_eq!(run(&t, true), reference(&t, &requant), "{l:?}");
                }
            }
        }
    }
    // Stride 1 takes the ring where an output line is 16..=128 long:
    // every shape but 9 × 9, SAME 3 × 130 (130 long), VALID 16 × 3 (14
    // long) and VALID 3 × 17 (15 long), three channel counts each.
    assert_eq!((taken, cases), (3 * (2 * 8 - 5), 96));
}

#[test]
fn the_line_ring_runs_over_its_own_input() {
    // The lean schedule's in place: SAME 3×3 layers the ring takes, along
    // x and along y, their output written over their input.
    let mut seed = 40u64;
    for (h, w) in [(25, 5), (5, 25), (16, 16), (48, 20), (20, 48)] {
        for c in [1, 4, 7, 64] {
            seed += 1;
            let l = Layer {
                dims: [1, h, w, c],
                filter: (3, 3),
                multiplier: 1,
                same: true,
                stride: (1, 1),
                dilation: (1, 1),
                x_offset: [128, -127, 5][(seed % 3) as usize],
                bias: !seed.is_multiple_of(4),
                big: false,
                seed: seed * 8 + 16,
            };
            let t = build(&l).unwrap();
            assert!(depthwise_rows::applies(&t.data.geometry), "{l:?}");
            let requant = Requant::new(&t.multiplier, &t.shift, t.stage).unwrap();
            let biases = Biases {
                model: t.bias.as_deref(),
                folded: &t.folded,
            };
            let tables = Tables {
                multiplier: &t.multiplier,
                shift: &t.shift,
                narrow: t.narrow,
            };
            let ops = packed_operands(&t.data, &[], &t.w, &biases, &tables).unwrap();
            let mut io = t.x.clone();
            depthwise_rows::run_over_input(&t.data.geometry, &ops, &mut io).unwrap();
            assert_eq!(io, reference(&t, &requant), "{l:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn packed_and_plain_paths_match_the_reference(l in layer()) {
        let Some(t) = build(&l) else { return Ok(()) };
        let requant = Requant::new(&t.multiplier, &t.shift, t.stage).unwrap();
        let want = reference(&t, &requant);
        prop_assert_eq!(&run(&t, false), &want);
        prop_assert_eq!(&run(&t, true), &want);
    }
}
