//! The contract as a firmware build script reads it: the shipped boards
//! load through `load_named`, with the figures the firmware is built from.

use std::path::{Path, PathBuf};

use hilt_contract::board::{self, RunnerKind, Transport, UartKind};
use hilt_contract::scenario::{self, ScenarioSource};
use hilt_contract::{ConfigError, PlannerKind};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn every_shipped_board_loads_by_name() {
    let boards = repo().join("boards");
    let all = board::load_all(&boards).unwrap();
    assert!(all.len() >= 4);
    for b in &all {
        let again = board::load_named(&boards, &b.name).unwrap();
        assert_eq!(&again, b);
        // hilt's firmware takes board features; a board's own firmware
        // crate (`firmware = "..."`) reads HILT_BOARD instead.
        assert!(again.arena_size > 0 && (!again.features.is_empty() || again.firmware.is_some()));
    }
}

#[test]
fn a_board_with_its_own_firmware_names_the_crate() {
    let b = board::load_named(&repo().join("boards"), "qemu-mps2-an386-custom").unwrap();
    let firmware = b.firmware.expect("the example board names its firmware");
    assert!(firmware.ends_with("target/examples/custom-firmware"));
    assert!(firmware.join("Cargo.toml").is_file());
}

#[test]
fn a_uart_board_gives_the_firmware_its_divisor() {
    let b = board::load_named(&repo().join("boards"), "qemu-mps2-an386-uart").unwrap();
    assert_eq!(b.transport, Transport::Uart);
    assert_eq!(b.runner, RunnerKind::Qemu);
    let uart = b.uart.as_ref().unwrap();
    assert_eq!(uart.kind, UartKind::CmsdkApb);
    // 25 MHz / 115200 baud, rounded to nearest.
    assert_eq!(uart.divisor(b.core_clock_hz), 217);
    assert_eq!(
        b.memory_x,
        repo().join("boards/qemu-mps2-an386-uart/memory.x")
    );
}

#[test]
fn an_unknown_board_lists_the_defined_ones() {
    let e = board::load_named(&repo().join("boards"), "no-such-board").unwrap_err();
    assert!(matches!(e, ConfigError::Unknown { .. }), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("unknown board \"no-such-board\"") && text.contains("qemu-mps2-an386"),
        "{text}"
    );
}

#[test]
fn the_one_crc_is_the_protocol_one() {
    assert_eq!(hilt_contract::crc32(b"123456789"), 0xCBF4_3926);
}

#[test]
fn scenario_files_are_checked_and_resolved() {
    let path = repo().join("scenarios/smoke_reshape.toml");
    let file = scenario::load(&path).unwrap();
    assert_eq!(file.name, "smoke_reshape");
    assert_eq!(file.planner, PlannerKind::Greedy);
    let ScenarioSource::Model { model, steps, .. } = &file.source else {
        panic!("smoke_reshape names a model");
    };
    assert_eq!(model, &repo().join("scenarios/models/reshape_int8.tflite"));
    assert_eq!(steps.len(), 1);
    assert_eq!("offline".parse::<PlannerKind>(), Ok(PlannerKind::Offline));
    assert!("best".parse::<PlannerKind>().is_err());
}
