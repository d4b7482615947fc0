//! The DSP convolution kernels (`conv_dsp`, `conv_widened`, `conv_quads`) against
//! TFLM's reference loop on the host, where the DSP instructions are
//! emulated bit for bit: every path a geometry can take, with padding,
//! strides, dilations, odd channel counts and the int8 zero points' whole
//! range.

use super::conv_dsp::{Operands, pointwise, rows_in_place};
use super::conv_geometry::Geometry;
use super::conv_quads;
use super::conv_widened;
use super::quant_math::{OutputStage, Requant, shift_parts};
use super::window_axis::Axis;
use crate::schema::Padding;

fn bytes(n: usize, seed: u64) -> Vec<i8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 56) as u8 as i8
        })
        .collect()
}

/// TFLM's reference loop: padded taps skipped, `Σ w·(x + offset)`.
fn reference(ops: &Operands<'_>) -> Vec<i8> {
    let g = ops.geometry;
    let (in_c, out_c) = (g.in_c as usize, g.out_c as usize);
    let fw = g.x.filter as usize;
    let len = ops.filter_len();
    let mut out = vec![0i8; g.output_len()];
    g.for_each_pixel(|win, o| {
        for c in 0..out_c {
            let mut acc = ops.bias.map_or(0, |b| b[c]);
            for fy in win.rows.clone() {
                for fx in win.cols.clone() {
                    let xo = win.input_at(g, fy, fx);
                    let wo = c * len + (fy as usize * fw + fx as usize) * in_c;
                    for i in 0..in_c {
                        let (x, w) = (ops.input[xo + i], ops.weights[wo + i]);
                        acc += i32::from(w) * (i32::from(x) + ops.input_offset);
                    }
                }
            }
            out[o + c] = ops.requant.apply(c, acc);
        }
    });
    out
}

struct Case {
    hw: (i32, i32),
    in_c: u32,
    out_c: u32,
    filter: (i32, i32),
    stride: (i32, i32),
    dilation_y: i32,
    /// Only the widened im2col takes a dilation along x.
    dilation_x: i32,
    padding: Padding,
    offset: i32,
}

/// `case.offset` is `-zero_point` of an int8, `-127..=128` (prepare
/// checks it): padded taps of patches hold the zero point.
/// Returns whether the widened 1×1 kernel took the case.
fn check(case: &Case, seed: u64) -> bool {
    let axis = |n, f, s, d| Axis::new(case.padding, n, f, s, d).unwrap();
    let g = Geometry {
        batches: 2,
        in_c: case.in_c,
        out_c: case.out_c,
        y: axis(case.hw.0, case.filter.0, case.stride.0, case.dilation_y),
        x: axis(case.hw.1, case.filter.1, case.stride.1, case.dilation_x),
    };
    let len = (case.filter.0 * case.filter.1) as usize * case.in_c as usize;
    let input = bytes(g.input_len(), seed);
    let weights = bytes(len * case.out_c as usize, seed + 1);
    let bias: Vec<i32> = (0..case.out_c as i32).map(|c| c * 977 - 3000).collect();
    let multiplier: Vec<i32> = (0..case.out_c as i32)
        .map(|c| 1_100_000_000 + c * 7_000_000)
        .collect();
    let shift: Vec<[u8; 2]> = (0..case.out_c as i32)
        .map(|c| shift_parts(-7 - c % 3))
        .collect();
    let stage = OutputStage {
        offset: -5,
        min: -128,
        max: 127,
    };
    let requant = Requant::new(&multiplier, &shift, stage).unwrap();
    let ops = Operands {
        geometry: &g,
        input: &input,
        input_offset: case.offset,
        weights: &weights,
        bias: Some(&bias),
        requant: &requant,
    };
    let want = reference(&ops);
    if case.dilation_x == 1 {
        let mut got = vec![0i8; g.output_len()];
        rows_in_place(&ops, &mut got);
        assert_eq!(got, want, "rows in place, seed {seed}");
    }
    if conv_quads::takes(&g) {
        let mut got = vec![0i8; g.output_len()];
        conv_quads::rows(&ops, &mut got);
        assert_eq!(got, want, "rows a quad at a time, seed {seed}");
    }
    if len <= 512 {
        let mut got = vec![0i8; g.output_len()];
        conv_widened::im2col(&ops, &mut got);
        assert_eq!(got, want, "widened im2col, seed {seed}");
    }
    if case.filter == (1, 1) {
        let mut got = vec![0i8; g.output_len()];
        pointwise(&ops, &mut got);
        assert_eq!(got, want, "pointwise, seed {seed}");
        if conv_widened::takes_pointwise(&g) {
            let mut got = vec![0i8; g.output_len()];
            conv_widened::pointwise(&ops, &mut got);
            assert_eq!(got, want, "widened pointwise, seed {seed}");
            return true;
        }
    }
    false
}

#[test]
fn pointwise_matches_reference() {
    let mut seed = 1;
    let mut widened = 0;
    for (in_c, out_c) in [
        (64, 64),
        (3, 5),
        (17, 1),
        (8, 6),
        (12, 7),
        (256, 3),
        (332, 2),
        (4, 1),
    ] {
        for hw in [(5, 5), (4, 6), (1, 1)] {
            for stride in [(1, 1), (2, 1), (2, 3)] {
                for offset in [-127, 128, 0] {
                    let case = Case {
                        hw,
                        in_c,
                        out_c,
                        filter: (1, 1),
                        stride,
                        dilation_y: 1,
                        dilation_x: 1,
                        padding: Padding::VALID,
                        offset,
                    };
                    widened += usize::from(check(&case, seed));
                    seed += 1;
                }
            }
        }
    }
    // At stride 1 on 5×5 and 4×6 (two images: 50 and 48 pixels), at the
    // three offsets: every depth of whole words up to 320 with four output
    // channels or more (64, 8, 12: by quads, 7 a partial one), and deeper
    // with any count (332: by pairs); and the three by quads at the two
    // other strides too (4 to 15 pixels each). 256 → 3 and 4 → 1 go
    // elsewhere.
    assert_eq!(
        widened,
        (4 + 3 * 2) * 2 * 3,
        "cases the widened 1×1 kernel took"
    );
}

#[test]
fn the_widened_im2col_takes_dilation_along_x() {
    let mut seed = 500;
    for (filter, in_c, out_c) in [
        ((3, 3), 3, 5),
        ((2, 4), 2, 2),
        ((1, 3), 8, 3),
        ((1, 2), 1, 5),
    ] {
        for padding in [Padding::SAME, Padding::VALID] {
            for offset in [-127, 128, 0] {
                let case = Case {
                    hw: (9, 11),
                    in_c,
                    out_c,
                    filter,
                    stride: (1, 2),
                    dilation_y: 2,
                    dilation_x: 3,
                    padding,
                    offset,
                };
                let _ = check(&case, seed);
                seed += 1;
            }
        }
    }
}

#[test]
fn rows_in_place_matches_reference() {
    let mut seed = 100;
    let shapes = [
        ((3, 3), 16, 16, (1, 1)),
        ((3, 3), 5, 3, (2, 2)),
        ((10, 4), 1, 4, (2, 2)),
        ((2, 3), 7, 1, (1, 2)),
        ((3, 1), 4, 6, (3, 1)),
        // The first layers that take this path instead of im2col.
        ((3, 3), 3, 8, (2, 2)),
        ((3, 3), 1, 8, (2, 2)),
        // Quads of channels with a partial last quad, and rows of one word.
        ((3, 3), 8, 7, (1, 1)),
        ((3, 3), 4, 5, (2, 1)),
        ((1, 3), 12, 6, (1, 2)),
    ];
    for (filter, in_c, out_c, stride) in shapes {
        for padding in [Padding::SAME, Padding::VALID] {
            for (hw, dilation_y) in [((7, 9), 1), ((12, 6), 2), ((2, 3), 1)] {
                for offset in [-127, 128, 0, 3] {
                    let case = Case {
                        hw,
                        in_c,
                        out_c,
                        filter,
                        stride,
                        dilation_y,
                        dilation_x: 1,
                        padding,
                        offset,
                    };
                    let _ = check(&case, seed);
                    seed += 1;
                }
            }
        }
    }
}
