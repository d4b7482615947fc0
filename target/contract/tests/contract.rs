//! The contract as a firmware build script reads it: the shipped boards
//! load through `load_named`, with the figures the firmware is built from.

use std::path::{Path, PathBuf};

use hilt_contract::board::{self, RunnerKind, Transport, UartKind};
use hilt_contract::offload::{Accelerator, VnpuModel};
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

/// A fresh folder under the system's temporary one, named for `test`.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hilt-contract-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A model scenario with `extra` keys before its steps, loaded.
fn scenario_with(test: &str, extra: &str) -> Result<scenario::ScenarioFile, ConfigError> {
    let path = scratch(test).join(format!("{test}.toml"));
    std::fs::write(
        &path,
        format!(
            "model = \"m.tflite\"\nboards = [\"qemu-*\"]\n{extra}\n[[steps]]\ninputs = [\"i.bin\"]\nexpected = [\"o.bin\"]\n"
        ),
    )
    .unwrap();
    scenario::load(&path)
}

#[test]
fn offload_keys_default_to_no_accelerator_and_the_runtime_list() {
    let file = scenario_with("offload-default", "").unwrap();
    assert_eq!(file.offload.accelerator, Accelerator::None);
    assert!(file.offload.coherent);
    assert_eq!(
        file.offload.ops,
        [
            "CONV_2D",
            "DEPTHWISE_CONV_2D",
            "FULLY_CONNECTED",
            "ADD",
            "AVERAGE_POOL_2D",
            "MAX_POOL_2D"
        ]
    );
    assert_eq!(file.offload.op_codes(), [3, 4, 9, 0, 1, 17]);
    // No scenario override: the board's engine figures stand.
    let board = VnpuModel {
        job_cycles: 7,
        cycles_per_1000_macs: 9,
        driver_submit_cycles: 11,
        driver_cycles_per_line: 13,
    };
    assert_eq!(file.offload.vnpu_on(board), board);
}

#[test]
fn offload_keys_are_read_and_override_the_board_engine_key_by_key() {
    let file = scenario_with(
        "offload-set",
        "accelerator = \"vnpu\"\noffload = [\"CONV_2D\", \"HILT_VNPU_NEGATE\"]\ncoherent = false\n[vnpu]\njob_cycles = 500\ndriver_cycles_per_line = 6\n",
    )
    .unwrap();
    assert_eq!(file.offload.accelerator, Accelerator::Vnpu);
    assert!(!file.offload.coherent);
    assert_eq!(
        file.offload.op_codes(),
        [3, hilt_contract::offload::CUSTOM_CODE]
    );
    let board = VnpuModel {
        job_cycles: 2000,
        cycles_per_1000_macs: 8,
        driver_submit_cycles: 900,
        driver_cycles_per_line: 3,
    };
    assert_eq!(
        file.offload.vnpu_on(board),
        VnpuModel {
            job_cycles: 500,
            cycles_per_1000_macs: 8,
            driver_submit_cycles: 900,
            driver_cycles_per_line: 6,
        }
    );
}

#[test]
fn the_kernels_key_chooses_every_kernel_or_the_models() {
    use hilt_contract::scenario::KernelChoice;
    let all = scenario_with("kernels-default", "").unwrap();
    assert_eq!(all.kernels, KernelChoice::All);
    let own = scenario_with("kernels-model", "kernels = \"model\"").unwrap();
    assert_eq!(own.kernels, KernelChoice::Model);
    let e = scenario_with("kernels-bad", "kernels = \"some\"")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("kernels-bad.toml") && e.contains("field `kernels`") && e.contains("\"some\""),
        "{e}"
    );
}

#[test]
fn the_optimize_key_chooses_speed_or_size() {
    use hilt_contract::scenario::OptimizeFor;
    let speed = scenario_with("optimize-default", "").unwrap();
    assert_eq!(speed.optimize, OptimizeFor::Speed);
    let size = scenario_with("optimize-size", "optimize = \"size\"").unwrap();
    assert_eq!(size.optimize, OptimizeFor::Size);
    assert_eq!(size.optimize.opt_level(), "z");
    let e = scenario_with("optimize-bad", "optimize = \"small\"")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("optimize-bad.toml")
            && e.contains("field `optimize`")
            && e.contains("\"small\": use speed or size"),
        "{e}"
    );
}

#[test]
fn the_schedule_and_constants_keys_choose_and_name_what_cannot_combine() {
    use hilt_contract::scenario::{ConstantsPlace, Schedule};
    let default = scenario_with("lean-default", "").unwrap();
    assert_eq!(
        (default.schedule, default.constants),
        (Schedule::Tflm, ConstantsPlace::Tail)
    );
    let lean = scenario_with("lean", "schedule = \"lean\"\nconstants = \"flash\"").unwrap();
    assert_eq!(
        (lean.schedule, lean.constants),
        (Schedule::Lean, ConstantsPlace::Flash)
    );
    for (name, text, field, said) in [
        (
            "schedule-bad",
            "schedule = \"tight\"",
            "schedule",
            "\"tight\": use tflm or lean",
        ),
        (
            "constants-bad",
            "constants = \"rom\"",
            "constants",
            "\"rom\": use tail or flash",
        ),
        (
            "schedule-vnpu",
            "schedule = \"lean\"\naccelerator = \"vnpu\"",
            "schedule",
            "does not run with an accelerator",
        ),
        (
            "constants-vnpu",
            "constants = \"flash\"\naccelerator = \"vnpu\"",
            "constants",
            "do not combine with an accelerator",
        ),
    ] {
        let e = scenario_with(name, text).unwrap_err().to_string();
        assert!(
            e.contains(&format!("{name}.toml"))
                && e.contains(&format!("field `{field}`"))
                && e.contains(said),
            "{e}"
        );
    }
}

#[test]
fn the_faults_key_arms_named_faults_and_names_an_unknown_one() {
    use hilt_proto::armed_faults::{ArmedFaults, Fault};
    let none = scenario_with("faults-default", "").unwrap();
    assert_eq!(none.faults, ArmedFaults::NONE);
    let two = scenario_with("faults-two", "faults = [\"misplan\", \"unchecked-plan\"]").unwrap();
    assert_eq!(
        two.faults,
        ArmedFaults::NONE
            .with(Fault::Misplan)
            .with(Fault::UncheckedPlan)
    );
    // The old cargo feature's name is not a fault's: the error lists them.
    let e = scenario_with("faults-bad", "faults = [\"fault-overrun\"]")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("faults-bad.toml")
            && e.contains("field `faults`")
            && e.contains("\"fault-overrun\" is no fault hilt injects")
            && e.contains("overrun, over-read"),
        "{e}"
    );
}

#[test]
fn bad_offload_keys_name_the_file_the_key_and_the_value() {
    let e = scenario_with("offload-bad-op", "offload = [\"CONV_2D\", \"CONV_9D\"]")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("offload-bad-op.toml")
            && e.contains("field `offload`")
            && e.contains("\"CONV_9D\""),
        "{e}"
    );
    let e = scenario_with("offload-bad-accel", "accelerator = \"tpu\"")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("field `accelerator`") && e.contains("\"tpu\""),
        "{e}"
    );
    let e = scenario_with("offload-bad-table", "[vnpu]\njob_cycle = 1")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("offload-bad-table.toml") && e.contains("job_cycle"),
        "{e}"
    );
    let e = scenario_with("offload-bad-type", "coherent = \"yes\"")
        .unwrap_err()
        .to_string();
    assert!(e.contains("coherent"), "{e}");
}

#[test]
fn a_board_describes_its_engine_or_gets_the_runtime_defaults() {
    let shipped = board::load_named(&repo().join("boards"), "qemu-mps2-an386").unwrap();
    assert_eq!(shipped.vnpu, VnpuModel::default());
    // The runtime's small-NPU model (LatencyModel::MICRO_NPU and
    // DriverModel::MICRO_NPU).
    assert_eq!(
        VnpuModel::default(),
        VnpuModel {
            job_cycles: 10_000,
            cycles_per_1000_macs: 64,
            driver_submit_cycles: 1_000,
            driver_cycles_per_line: 4,
        }
    );
    let dir = scratch("board-vnpu").join("boards");
    std::fs::create_dir_all(dir.join("qemu-mps2-an386")).unwrap();
    std::fs::copy(
        repo().join("boards/qemu-mps2-an386/memory.x"),
        dir.join("qemu-mps2-an386/memory.x"),
    )
    .unwrap();
    let text = std::fs::read_to_string(repo().join("boards/qemu-mps2-an386.toml")).unwrap();
    let write = |table: &str| {
        std::fs::write(dir.join("qemu-mps2-an386.toml"), format!("{text}\n{table}")).unwrap();
        board::load(&dir.join("qemu-mps2-an386.toml"))
    };
    let b = write("[vnpu]\ncycles_per_1000_macs = 16\ndriver_submit_cycles = 250\n").unwrap();
    assert_eq!(
        b.vnpu,
        VnpuModel {
            job_cycles: 10_000,
            cycles_per_1000_macs: 16,
            driver_submit_cycles: 250,
            driver_cycles_per_line: 4,
        }
    );
    let e = write("[vnpu]\nmacs = 16\n").unwrap_err().to_string();
    assert!(
        e.contains("qemu-mps2-an386.toml") && e.contains("macs"),
        "{e}"
    );
}

#[test]
fn pool_keys_are_read_and_checked_against_the_board() {
    let file = scenario_with("pools-ok", "pools = [\"fast\", \"sram\"]").unwrap();
    assert_eq!(
        file.pools,
        Some(vec!["fast".to_string(), "sram".to_string()])
    );
    assert_eq!(scenario_with("pools-none", "").unwrap().pools, None);
    let e = scenario_with("pools-empty", "pools = []")
        .unwrap_err()
        .to_string();
    assert!(e.contains("field `pools`: names no pool"), "{e}");
    let e = scenario_with(
        "pools-nc",
        "pools = [\"sram\"]\naccelerator = \"vnpu\"\ncoherent = false",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("cannot be halved for non-coherent offload"),
        "{e}"
    );
    let e = scenario_with("pools-arena", "pools = [\"sram\"]\narena_size = 4096")
        .unwrap_err()
        .to_string();
    assert!(e.contains("drop arena_size (4096)"), "{e}");
    // The shipped MPS2 boards split their arena in two; a layout for them.
    let boards = repo().join("boards");
    let an386 = board::load_named(&boards, "qemu-mps2-an386").unwrap();
    let names: Vec<&str> = an386.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["fast", "sram"]);
    let layout = hilt_contract::pools::layout(
        &boards.join("x.toml"),
        &an386.name,
        &an386.pools,
        file.pools.as_deref(),
    )
    .unwrap();
    assert_eq!(u64::from(layout.size()), an386.arena_size);
}

#[test]
fn a_board_whose_pools_do_not_split_its_arena_is_refused() {
    let dir = scratch("pools-board");
    let shipped = repo().join("boards");
    let text = std::fs::read_to_string(shipped.join("qemu-mps2-an386.toml"))
        .unwrap()
        .replace("name = \"qemu-mps2-an386\"", "name = \"pooled\"")
        .replace("size = 0x1f8000", "size = 0x1f0000");
    std::fs::write(dir.join("pooled.toml"), text).unwrap();
    std::fs::create_dir_all(dir.join("pooled")).unwrap();
    std::fs::copy(
        shipped.join("qemu-mps2-an386/memory.x"),
        dir.join("pooled/memory.x"),
    )
    .unwrap();
    let e = board::load_named(&dir, "pooled").unwrap_err().to_string();
    assert!(
        e.contains("field `pools`: the pools hold 2064384 bytes but arena_size is 2097152"),
        "{e}"
    );
}
