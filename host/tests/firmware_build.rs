//! Firmware builds refuse what would fail far from its cause: an arena so
//! large that the stack, growing down from the top of RAM, would run into
//! it. The 128 KiB STM32F405 with a 96 KiB arena leaves about 9.4 KiB of
//! stack after the agent's buffers and the RTT channels (a prepare then
//! corrupted the arena's tail: "AVERAGE_POOL_2D is not supported"); the
//! board's own 88 KiB arena builds.

mod common;

use hilt::config::board::load_all;
use hilt::firmware::{BuildError, FirmwareRequest, MIN_STACK_BYTES, build};
use hilt_runtime::canary::CanaryMode;
use hilt_runtime::planner::PlannerKind;

use common::repo;

#[test]
fn an_arena_that_leaves_too_little_stack_is_refused_with_the_figures() {
    let boards = load_all(&repo().join("boards")).unwrap();
    let board = boards
        .iter()
        .find(|b| b.name == "qemu-netduinoplus2")
        .unwrap();
    let model = repo().join("scenarios/models/tiny_convnet_int8.tflite");
    let request = |arena_size| FirmwareRequest {
        board,
        model: &model,
        arena_size,
        planner: PlannerKind::Greedy,
        features: &[],
        canary: CanaryMode::Bounds,
        align: 16,
        pools: None,
    };
    match build(&repo(), &request(96 * 1024)) {
        Err(BuildError::Stack {
            board,
            stack,
            needed,
            ..
        }) => {
            assert_eq!(board, "qemu-netduinoplus2");
            assert_eq!(needed, MIN_STACK_BYTES);
            assert!(stack < MIN_STACK_BYTES, "{stack}");
        }
        other => panic!("expected the stack to be refused, got {other:?}"),
    }
    let elf = build(&repo(), &request(board.arena_size)).unwrap();
    assert!(elf.is_file());
}
