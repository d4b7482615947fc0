//! Picks the board (from the one `board-*` feature, or `HILT_BOARD`), its
//! linker script and figures, and the model to embed, through
//! `hilt-firmware-build` (the same helper a user's firmware uses; its docs
//! list the `HILT_*` variables; the board file is read and checked by
//! `hilt-contract`, as the host reads it); then, for a board that talks
//! over a UART, the UART's constants for `src/uart.rs`; and `hilt_vnpu`
//! unless `HILT_ENGINE=none` (the firmware links the virtual NPU).

use std::fmt::Write as _;
use std::fs;

use hilt_firmware_build::FirmwareBuild;
use hilt_firmware_build::board::{Transport, UartKind};

fn main() {
    let build = FirmwareBuild::from_env().unwrap_or_else(|e| panic!("{e}"));
    build.write().unwrap_or_else(|e| panic!("{e}"));
    // cortex-m-rt's linker script (it includes the board's memory.x), given
    // here so that .cargo/config.toml's rustflags (the DSP flag of the
    // hard-float targets) stay the only ones and never shadow it.
    println!("cargo::rustc-link-arg-bins=-Tlink.x");
    println!("cargo::rustc-check-cfg=cfg(hilt_uart)");
    println!("cargo::rustc-check-cfg=cfg(hilt_vnpu)");
    println!("cargo::rustc-check-cfg=cfg(hilt_fault_status)");
    // ARMv7-M and ARMv8-M.main have the fault status registers the
    // HardFault handler reports; ARMv6-M and ARMv8-M.base do not.
    let target = std::env::var("TARGET").unwrap_or_default();
    if !target.starts_with("thumbv6m") && !target.starts_with("thumbv8m.base") {
        println!("cargo::rustc-cfg=hilt_fault_status");
    }
    if build.engine {
        println!("cargo::rustc-cfg=hilt_vnpu");
    }
    if let Some(uart) = uart_config(&build) {
        println!("cargo::rustc-cfg=hilt_uart");
        fs::write(build.out_dir.join("uart.rs"), uart).unwrap();
    }
}

/// The board's `[uart]` table as constants for `src/uart.rs`, when its
/// `transport` is `uart` (the contract checked the table: a uart transport
/// has one, its divisor fits, its writes are aligned).
fn uart_config(build: &FirmwareBuild) -> Option<String> {
    let board = &build.board;
    if board.transport != Transport::Uart {
        return None;
    }
    let uart = board.uart.as_ref().unwrap_or_else(|| {
        panic!(
            "{}: transport = \"uart\" needs a [uart] table",
            build.board_file.display()
        )
    });
    let kind = match uart.kind {
        UartKind::CmsdkApb => "CmsdkApb",
        UartKind::Stm32Usart => "Stm32Usart",
        UartKind::NrfUart => "NrfUart",
    };
    let base = uart.base;
    // CMSDK and STM32 divide their input clock by baud (CMSDK: BAUDDIV;
    // STM32 with 16x oversampling: BRR = mantissa << 4 | fraction, the same
    // number); Nordic's takes a BAUDRATE code (see `UartSettings::divisor`).
    let divisor = uart.divisor(board.core_clock_hz);
    let mut init = String::new();
    for w in &uart.init {
        let _ = write!(
            init,
            "RegisterWrite {{ address: {:#010x}, clear: {:#010x}, set: {:#010x} }}, ",
            w.address, w.clear, w.set
        );
    }
    Some(format!(
        "/// Register layout.\npub(crate) const KIND: Kind = Kind::{kind};\n\
         /// Register block.\npub(crate) const BASE: usize = {base:#010x};\n\
         /// Input clock / baud rate.\npub(crate) const DIVISOR: u32 = {divisor};\n\
         /// Clock and pin set-up, in order, before the UART is enabled.\n\
         pub(crate) const INIT: &[RegisterWrite] = &[{init}];\n"
    ))
}
