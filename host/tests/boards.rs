//! Board definitions: the shipped ones are valid, and each kind of mistake
//! is reported with the file and field at fault.

use std::path::{Path, PathBuf};

use hilt::config::board::{
    BoardError, RunnerKind, Transport, UartKind, glob_match, load, load_all, select,
};

fn boards_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../boards")
}

#[test]
fn shipped_boards_are_valid() {
    let boards = load_all(&boards_dir()).unwrap();
    let names: Vec<&str> = boards.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "nrf52840-dk",
            "nrf5340-dk",
            "nucleo-h743zi",
            "qemu-microbit",
            "qemu-mps2-an386",
            "qemu-mps2-an386-64k",
            "qemu-mps2-an386-armv6m",
            "qemu-mps2-an386-custom",
            "qemu-mps2-an386-uart",
            "qemu-mps2-an500",
            "qemu-mps2-an505",
            "qemu-mps3-an547",
            "qemu-netduinoplus2",
            "qemu-netduinoplus2-uart",
            "stm32f746g-disco"
        ]
    );
    let virtual_boards = select(&boards, "qemu-*").unwrap();
    assert_eq!(virtual_boards.len(), 9);
    for b in &virtual_boards {
        assert_eq!(
            b.transport == Transport::Uart,
            b.name.ends_with("-uart") || b.name.ends_with("-custom"),
            "{}",
            b.name
        );
        assert_eq!(
            b.firmware.is_some(),
            b.name.ends_with("-custom"),
            "{}",
            b.name
        );
        assert_eq!(b.uart.is_some(), b.transport == Transport::Uart);
    }
    let usart = boards
        .iter()
        .find(|b| b.name == "qemu-netduinoplus2-uart")
        .and_then(|b| b.uart.clone())
        .unwrap();
    assert_eq!(usart.kind, UartKind::Stm32Usart);
    assert_eq!((usart.base, usart.baud), (0x4001_1000, 115_200));
    assert_eq!(usart.init.len(), 4);
    assert!(
        virtual_boards
            .iter()
            .all(|b| b.runner == RunnerKind::Qemu && b.latency_tolerance_percent == 0.0)
    );
    let custom = boards
        .iter()
        .find(|b| b.name == "qemu-mps2-an386-custom")
        .unwrap();
    assert!(
        custom
            .firmware
            .as_ref()
            .unwrap()
            .ends_with("target/examples/custom-firmware"),
        "{:?}",
        custom.firmware
    );
    let netduino = boards
        .iter()
        .find(|b| b.name == "qemu-netduinoplus2")
        .unwrap();
    assert_eq!(netduino.memory[1].length, 128 * 1024);
    // The 64 KiB board: only scenarios that name it run there (a glob
    // leaves it out), and it declares the stack it was measured to need.
    let small = boards
        .iter()
        .find(|b| b.name == "qemu-mps2-an386-64k")
        .unwrap();
    assert_eq!(small.memory[1].length, 64 * 1024);
    assert_eq!((small.globs, small.stack_size), (false, Some(0x2A00)));
    assert!(small.features.iter().any(|f| f == "small-ram"));
    assert!(!virtual_boards.iter().any(|b| b.name == small.name));
    assert_eq!(select(&boards, &small.name).unwrap().len(), 1);
    assert!(
        boards
            .iter()
            .filter(|b| b.name != small.name && b.name != "qemu-microbit")
            .all(|b| b.globs && b.stack_size.is_none() && b.stack_budget() == 16 * 1024)
    );
    // The micro:bit: an nRF51 over Nordic's UART, at the BAUDRATE code
    // Nordic's manual lists for 115,200 baud.
    let microbit = boards.iter().find(|b| b.name == "qemu-microbit").unwrap();
    let uart = microbit.uart.as_ref().unwrap();
    assert_eq!(uart.kind, UartKind::NrfUart);
    assert_eq!(uart.divisor(microbit.core_clock_hz), 0x01D7_E000);
    assert_eq!(
        (microbit.memory[1].length, microbit.globs),
        (16 * 1024, false)
    );
    let nrf53 = boards.iter().find(|b| b.name == "nrf5340-dk").unwrap();
    assert_eq!(nrf53.target, "thumbv8m.main-none-eabihf");
    assert_eq!(nrf53.probe.as_ref().unwrap().to_string(), "1366:1051");
}

#[test]
fn unknown_board_lists_the_known_ones() {
    let boards = load_all(&boards_dir()).unwrap();
    let err = select(&boards, "stm32f4-nope").unwrap_err();
    assert!(matches!(err, BoardError::Unknown { .. }));
    assert!(err.to_string().contains("qemu-mps2-an386"), "{err}");
    assert!(glob_match("nrf5*-dk", "nrf5340-dk"));
    assert!(!glob_match("nrf5?-dk", "nrf5340-dk"));
}

const GOOD: &str = r#"
name = "b"
target = "thumbv7em-none-eabihf"
runner = "qemu"
transport = "rtt"
arena_size = 1024
core_clock_hz = 1000
memory = [
  { name = "FLASH", origin = 0x0, length = 0x10000 },
  { name = "RAM", origin = 0x20000000, length = 0x8000 },
]
[qemu]
machine = "mps2-an386"
cpu = "cortex-m4"
"#;

const UART: &str = "[uart]\nkind = \"cmsdk-apb\"\nbase = 0x40004000\n";

const MEMORY_X: &str = "MEMORY\n{\n  FLASH : ORIGIN = 0x00000000, LENGTH = 64K\n  RAM : ORIGIN = 0x20000000, LENGTH = 32K\n}\n";

fn board_in_temp(
    toml: &str,
    memory_x: Option<&str>,
) -> Result<hilt::config::board::Board, BoardError> {
    // A fresh folder per call: tests run in parallel threads.
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "hilt-boards-{}-{n}-{:x}",
        std::process::id(),
        fxhash(toml)
    ));
    std::fs::create_dir_all(dir.join("b")).unwrap();
    std::fs::write(dir.join("b.toml"), toml).unwrap();
    if let Some(m) = memory_x {
        std::fs::write(dir.join("b/memory.x"), m).unwrap();
    }
    load(&dir.join("b.toml"))
}

fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    })
}

/// [`GOOD`] with one more key (`KEY = VALUE`, after `arena_size`).
fn with_key(line: &str) -> String {
    GOOD.replace("arena_size = 1024", &format!("arena_size = 1024\n{line}"))
}

fn problem(toml: &str) -> String {
    board_in_temp(toml, Some(MEMORY_X)).unwrap_err().to_string()
}

#[test]
fn a_minimal_board_loads() {
    let board = board_in_temp(GOOD, Some(MEMORY_X)).unwrap();
    assert_eq!(board.arena_size, 1024);
}

#[test]
fn mistakes_name_the_field() {
    let cases = [
        (
            GOOD.replace("name = \"b\"", "name = \"c\""),
            "field `name`: \"c\" differs from the file name \"b\"",
        ),
        (
            GOOD.replace("thumbv7em-none-eabihf", "riscv32imc-unknown-none-elf"),
            "field `target`",
        ),
        (
            GOOD.replace("runner = \"qemu\"", "runner = \"jtag\""),
            "unknown variant `jtag`",
        ),
        (
            GOOD.replace("arena_size = 1024", "arena_size = 40000"),
            "field `arena_size`: 40000 bytes does not fit in RAM",
        ),
        (
            with_key("model_slot = 1000"),
            "field `model_slot`: 1000 bytes: a slot is a multiple of 64 bytes, at least 1024",
        ),
        (
            with_key("model_slot = 0x100000"),
            "field `model_slot`: 1048576 bytes leave no room for the code in FLASH",
        ),
        (with_key("colour = \"red\""), "unknown key `colour`"),
        (
            with_key("stack_size = 1024"),
            "field `stack_size`: 1024 bytes is below the least a firmware runs in (4096 bytes)",
        ),
        (
            with_key("stack_size = 5004"),
            "field `stack_size`: 5004 bytes is not a multiple of 8",
        ),
        (
            with_key("stack_size = 0x8000"),
            "field `stack_size`: 32768 bytes does not fit in RAM (32768 bytes)",
        ),
        (
            GOOD.replace("origin = 0x20000000", "origin = 0x8000"),
            "field `memory`: regions FLASH and RAM overlap",
        ),
        (
            GOOD.split("[qemu]").next().unwrap().to_string(),
            "field `qemu`: a qemu board needs a [qemu] table",
        ),
        (
            GOOD.replace(
                "runner = \"qemu\"",
                "runner = \"probe-rs\"\nprobe = \"0483\"\nchip = \"STM32F405RGTx\"",
            ),
            "field `probe`: product id missing",
        ),
        (
            GOOD.replace(
                "runner = \"qemu\"",
                "runner = \"probe-rs\"\nprobe = \"0483:zz\"\nchip = \"STM32F405RGTx\"",
            ),
            "product id \"zz\" is not a 16-bit hex number",
        ),
        (
            GOOD.replace(
                "runner = \"qemu\"",
                "runner = \"probe-rs\"\nprobe = \"0483:374b\"",
            ),
            "field `chip`",
        ),
        (
            GOOD.replace("runner = \"qemu\"", "runner = \"uart\""),
            "field `serial_port`",
        ),
        (
            GOOD.replace(
                "runner = \"qemu\"",
                "runner = \"uart\"\nserial_port = \"/dev/ttyACM0\"",
            ),
            "field `transport`: a uart board talks over its uart",
        ),
        (
            GOOD.replace("transport = \"rtt\"", "transport = \"uart\""),
            "field `uart`: transport = \"uart\" needs a [uart] table",
        ),
        (
            format!("{GOOD}{UART}"),
            "field `uart`: a [uart] table is only used with transport = \"uart\"",
        ),
        (
            format!(
                "{}{UART}",
                GOOD.replace("transport = \"rtt\"", "transport = \"uart\"")
            ),
            "field `uart`: 115200 baud from a 1000 Hz clock needs a divisor of 0",
        ),
        (
            format!(
                "{}{}",
                GOOD.replace("transport = \"rtt\"", "transport = \"uart\""),
                UART.replace("base", "clock_hz = 25000000\nbase")
                    .replace("0x40004000", "0x40004002")
            ),
            "field `uart`: base 0x40004002 is not 4-aligned",
        ),
        (
            format!(
                "{}{}",
                GOOD.replace("transport = \"rtt\"", "transport = \"uart\""),
                UART.replace(
                    "base",
                    "clock_hz = 25000000\ninit = [{ address = 0x40023845, set = 1 }]\nbase"
                )
            ),
            "field `uart`: init address 0x40023845 is not 4-aligned",
        ),
        (
            format!(
                "{}{}",
                GOOD.replace("transport = \"rtt\"", "transport = \"uart\""),
                UART.replace("cmsdk-apb", "pl011")
            ),
            "unknown variant `pl011`",
        ),
        (
            GOOD.replace(
                "runner = \"qemu\"",
                "runner = \"qemu\"\nserial_port = \"/dev/ttyS0\"",
            ),
            "field `serial_port`: a qemu board's UART is a pty QEMU picks",
        ),
        (
            GOOD.replace(
                "runner = \"qemu\"",
                "runner = \"qemu\"\nflash_command = [\"st-flash\"]",
            ),
            "field `flash_command`: only uart boards are flashed by a command",
        ),
        (
            format!(
                "{}{}",
                GOOD.replace(
                    "runner = \"qemu\"",
                    "runner = \"uart\"\nserial_port = \"/dev/ttyACM0\"\nflash_command = []"
                )
                .replace("transport = \"rtt\"", "transport = \"uart\""),
                UART.replace("base", "clock_hz = 25000000\nbase")
            ),
            "field `flash_command`: empty",
        ),
        (
            format!(
                "{}{}",
                GOOD.replace(
                    "runner = \"qemu\"",
                    "runner = \"probe-rs\"\nprobe = \"0483:374b\"\nchip = \"STM32F405RGTx\""
                )
                .replace("transport = \"rtt\"", "transport = \"uart\""),
                UART.replace("base", "clock_hz = 25000000\nbase")
            ),
            "field `transport`: probe-rs boards talk over rtt",
        ),
        (
            GOOD.replace("arena_size = 1024", "arena_size = \"big\""),
            "invalid type",
        ),
    ];
    for (toml, expected) in cases {
        let message = problem(&toml);
        assert!(
            message.contains(expected),
            "expected {expected:?} in {message:?}"
        );
        assert!(message.contains("b.toml"), "{message}");
    }
}

#[test]
fn a_uart_board_loads_with_its_flash_command() {
    let toml = format!(
        "{}{}",
        GOOD.replace(
            "runner = \"qemu\"",
            "runner = \"uart\"\nserial_port = \"/dev/ttyACM0\"\nflash_command = [\"st-flash\", \"write\", \"{elf}\"]"
        )
        .replace("transport = \"rtt\"", "transport = \"uart\"")
        .split("[qemu]")
        .next()
        .unwrap(),
        UART.replace("base", "clock_hz = 25000000\nbase")
    );
    let board = board_in_temp(&toml, Some(MEMORY_X)).unwrap();
    assert_eq!(board.runner, RunnerKind::Uart);
    assert_eq!(board.serial_port.as_deref(), Some("/dev/ttyACM0"));
    assert_eq!(board.flash_command.as_ref().unwrap()[2], "{elf}");
    let uart = board.uart.unwrap();
    assert_eq!(
        (uart.kind, uart.baud, uart.clock_hz),
        (UartKind::CmsdkApb, 115_200, Some(25_000_000))
    );
    // Real hardware: two percent of latency drift, as probe-rs boards.
    assert_eq!(board.latency_tolerance_percent, 2.0);
}

#[test]
fn memory_x_must_agree_with_the_toml() {
    let missing = board_in_temp(GOOD, None).unwrap_err().to_string();
    assert!(missing.contains("memory.x"), "{missing}");
    let wrong = board_in_temp(GOOD, Some(&MEMORY_X.replace("32K", "16K")))
        .unwrap_err()
        .to_string();
    assert!(
        wrong.contains("region RAM is Some(536870912)/Some(16384) there but 0x20000000/0x8000"),
        "{wrong}"
    );
}

#[test]
fn latency_tolerance_is_the_clock_resolution_on_virtual_boards() {
    let boards = load_all(&boards_dir()).unwrap();
    let by_name = |n: &str| boards.iter().find(|b| b.name == n).unwrap();
    // MPS2: SysTick at 25 MHz, one instruction per ns: a tick is 40.
    let mps2 = by_name("qemu-mps2-an386").latency_tolerance();
    assert_eq!((mps2.percent, mps2.cycles), (0.0, 40));
    // STM32F405 at 168 MHz: 5.95 ns, rounded up to 6 instructions.
    let stm32 = by_name("qemu-netduinoplus2").latency_tolerance();
    assert_eq!((stm32.percent, stm32.cycles), (0.0, 6));
    // Real boards: their run-to-run spread, no clock slack (DWT is exact).
    let real = by_name("stm32f746g-disco").latency_tolerance();
    assert_eq!((real.percent, real.cycles), (2.0, 0));
}

/// `firmware = "…"` names a crate folder from the folder that holds
/// `boards/`: a missing folder, one with no Cargo.toml, and an empty value
/// are each named; a crate is accepted.
#[test]
fn a_board_firmware_crate_must_exist_and_be_a_crate() {
    let root = std::env::temp_dir().join(format!("hilt-board-firmware-{}", std::process::id()));
    std::fs::create_dir_all(root.join("boards/b")).unwrap();
    std::fs::create_dir_all(root.join("fw/no-crate")).unwrap();
    std::fs::create_dir_all(root.join("fw/crate")).unwrap();
    std::fs::write(
        root.join("fw/crate/Cargo.toml"),
        "[package]\nname = \"crate\"\n",
    )
    .unwrap();
    std::fs::write(root.join("boards/b/memory.x"), MEMORY_X).unwrap();
    let load_with = |firmware: &str| {
        let toml = GOOD.replace(
            "runner = \"qemu\"",
            &format!("runner = \"qemu\"\nfirmware = {firmware:?}"),
        );
        std::fs::write(root.join("boards/b.toml"), toml).unwrap();
        load(&root.join("boards/b.toml"))
    };
    let missing = load_with("fw/gone").unwrap_err().to_string();
    assert!(
        missing.contains("field `firmware`") && missing.contains("fw/gone is not a folder"),
        "{missing}"
    );
    let not_a_crate = load_with("fw/no-crate").unwrap_err().to_string();
    assert!(not_a_crate.contains("has no Cargo.toml"), "{not_a_crate}");
    let empty = load_with(" ").unwrap_err().to_string();
    assert!(empty.contains("field `firmware`: empty"), "{empty}");
    let board = load_with("fw/crate").unwrap();
    assert_eq!(board.firmware, Some(root.join("fw/crate")));
    std::fs::remove_dir_all(&root).unwrap();
}
