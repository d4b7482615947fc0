//! The lean schedule's fused chains: two convolutions run a row at a
//! time through a ring of the first one's output rows (and an ADD written
//! over the block's input) give TFLM's schedule's outputs bit for bit, on
//! random int8 inputs, over paddings, strides, dilations and filter
//! sizes; and a chain that cannot be fused says why.

mod common;

use hilt_runtime::model::Model;
use hilt_runtime::schedule::{Refusal, Schedule, fused, in_place};
use hilt_runtime::schema::Padding;
use hilt_runtime::writer::examples::{BlockConv, BlockEnd, residual_block_int8};

/// Output 0 and the committed head of one run under `schedule`, the
/// input filled from `seed`.
fn run(bytes: &[u8], schedule: Schedule, seed: u32) -> (Vec<u8>, u32) {
    common::run_scheduled(bytes, schedule, |input| {
        let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        for v in input {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            *v = (state >> 24) as u8;
        }
    })
    .unwrap()
}

const fn conv(filter: i32, stride: i32, dilation: i32, padding: Padding) -> BlockConv {
    BlockConv {
        filter,
        stride,
        dilation,
        padding,
    }
}

#[test]
fn fused_chains_give_the_unfused_bits() {
    use BlockEnd::{AddInputFirst, AddInputSecond, Convs};
    const SAME: Padding = Padding::SAME;
    const VALID: Padding = Padding::VALID;
    let s1 = conv(3, 1, 1, SAME);
    // (height, width, channels, convolutions, end, whether the ADD fuses)
    let cases = [
        (9, 7, 8, [s1, s1], AddInputFirst, true),
        (9, 7, 8, [s1, s1], AddInputSecond, true),
        // Rows too wide for bands of more than one.
        (6, 200, 8, [s1, s1], AddInputFirst, true),
        (7, 160, 8, [conv(3, 2, 1, SAME), s1], Convs, false),
        // Input row r is read again by the first conv's row r + 2 (5×5):
        // the ADD cannot go over it row by row, the convolutions fuse.
        (12, 5, 4, [conv(5, 1, 1, SAME), s1], AddInputFirst, false),
        (10, 6, 8, [s1, conv(3, 1, 2, SAME)], AddInputSecond, true),
        (
            10,
            6,
            8,
            [conv(1, 1, 1, VALID), conv(3, 1, 2, SAME)],
            AddInputSecond,
            true,
        ),
        (11, 9, 8, [conv(3, 2, 1, SAME), s1], Convs, false),
        (16, 16, 16, [conv(3, 2, 1, SAME), s1], Convs, false),
        (
            12,
            8,
            4,
            [conv(3, 1, 1, VALID), conv(3, 2, 1, VALID)],
            Convs,
            false,
        ),
        (
            13,
            6,
            8,
            [conv(1, 1, 1, VALID), conv(5, 2, 1, SAME)],
            Convs,
            false,
        ),
        (9, 9, 4, [conv(3, 1, 2, VALID), s1], Convs, false),
        (8, 3, 8, [s1, conv(3, 3, 1, SAME)], Convs, false),
    ];
    for (h, w, c, convs, end, with_add) in cases {
        let bytes = residual_block_int8(h, w, c, convs, end);
        let model = Model::from_bytes(&bytes).unwrap();
        // Narrowing is not resolved: every chain the shapes allow runs fused.
        // The first convolution is op 1 after a stem, op 0 without.
        let head = u32::from(end != Convs);
        let chain = fused(&model, Schedule::Narrowing, head)
            .unwrap_or_else(|e| panic!("{h}×{w}×{c} {convs:?}: not fused: {e}"));
        assert_eq!(chain.sum.is_some(), with_add, "{h}×{w} {convs:?} {end:?}");
        assert_eq!(chain.runner, head + if with_add { 2 } else { 1 });
        for seed in [1, 2, 3] {
            let (tflm, tflm_head) = run(&bytes, Schedule::Tflm, seed);
            let (fused_run, _) = run(&bytes, Schedule::Narrowing, seed);
            assert_eq!(fused_run, tflm, "{h}×{w}×{c} {convs:?} {end:?} seed {seed}");
            // Resolved, the lean schedule fuses only where it lowers the
            // peak.
            let (lean, lean_head) = run(&bytes, Schedule::Lean, seed);
            assert_eq!(
                lean, tflm,
                "{h}×{w}×{c} {convs:?} {end:?} lean, seed {seed}"
            );
            assert!(
                lean_head <= tflm_head,
                "{h}×{w}×{c} {convs:?}: head {lean_head} against {tflm_head}"
            );
        }
    }
}

#[test]
fn a_residual_block_needs_its_input_and_a_few_rows() {
    // 32×32×16 as MLPerf Tiny IC's first block: TFLM's schedule holds the
    // block's input, the first and the second convolution's outputs (16 KiB
    // each); fused, the input's buffer, the ring and a band of the second
    // output's rows (4 KiB between them), beside the model's input.
    let s1 = conv(3, 1, 1, Padding::SAME);
    let bytes = residual_block_int8(32, 32, 16, [s1, s1], BlockEnd::AddInputFirst);
    let (tflm, tflm_head) = run(&bytes, Schedule::Tflm, 9);
    let (lean, lean_head) = run(&bytes, Schedule::Lean, 9);
    assert_eq!(lean, tflm);
    assert_eq!(tflm_head, 3 * 16_384);
    assert!(lean_head <= 16_384 + 4_096 + 3_072, "lean head {lean_head}");
}

#[test]
fn chains_that_cannot_fuse_say_why() {
    let s1 = conv(3, 1, 1, Padding::SAME);
    let bytes = residual_block_int8(9, 7, 8, [s1, s1], BlockEnd::AddInputFirst);
    let model = Model::from_bytes(&bytes).unwrap();
    // The stem's output is the block's input, read by the ADD too.
    assert_eq!(
        fused(&model, Schedule::Narrowing, 0).err(),
        Some(Refusal::IntermediateReadBy { op: 3 })
    );
    assert_eq!(
        Refusal::IntermediateReadBy { op: 3 }.to_string(),
        "its output is read by op 3 too (needs a whole buffer)"
    );
    // The second convolution is followed by the ADD, not a convolution.
    assert_eq!(
        fused(&model, Schedule::Narrowing, 2).err(),
        Some(Refusal::NoFusedForm)
    );
    // TFLM's schedule fuses nothing, and a fused op is not run in place.
    assert_eq!(
        fused(&model, Schedule::Tflm, 1).err(),
        Some(Refusal::TflmSchedule)
    );
    assert_eq!(
        in_place(&model, Schedule::Narrowing, 1).err(),
        Some(Refusal::Fused { runner: 3 })
    );
    // The chain's ADD writes over the block's input.
    let add = in_place(&model, Schedule::Narrowing, 3).unwrap();
    assert_eq!(
        add.input,
        fused(&model, Schedule::Narrowing, 1).unwrap().input
    );
    // A ring as tall as the first output is no saving: 3 rows of 3.
    let bytes = residual_block_int8(3, 7, 8, [s1, s1], BlockEnd::Convs);
    let model = Model::from_bytes(&bytes).unwrap();
    assert!(matches!(
        fused(&model, Schedule::Narrowing, 0).err(),
        Some(Refusal::Shape { .. })
    ));
    // A chain's second convolution starts no chain of its own.
    let bytes = residual_block_int8(9, 7, 8, [s1, s1], BlockEnd::Convs);
    let model = Model::from_bytes(&bytes).unwrap();
    assert_eq!(fused(&model, Schedule::Narrowing, 0).unwrap().runner, 1);
    assert_eq!(
        fused(&model, Schedule::Narrowing, 1).err(),
        Some(Refusal::Fused { runner: 1 })
    );
}
