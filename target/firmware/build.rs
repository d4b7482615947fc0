//! Picks the board (from the one `board-*` feature, or `HILT_BOARD`), its
//! linker script and figures, and the model to embed, through
//! `hilt-firmware-build` (the same helper a user's firmware uses; its docs
//! list the `HILT_*` variables); then, for a board that talks over a UART,
//! the UART's constants for `src/uart.rs`.

use std::fmt::Write as _;
use std::fs;

use hilt_firmware_build::FirmwareBuild;

fn main() {
    let build = FirmwareBuild::from_env().unwrap_or_else(|e| panic!("{e}"));
    build.write().unwrap_or_else(|e| panic!("{e}"));
    println!("cargo::rustc-check-cfg=cfg(hilt_uart)");
    let file = build.board_file.display().to_string();
    if let Some(uart) = uart_config(&build.board_table, build.clock_hz, &file) {
        println!("cargo::rustc-cfg=hilt_uart");
        fs::write(build.out_dir.join("uart.rs"), uart).unwrap();
    }
}

/// The board's `[uart]` table as constants for `src/uart.rs`, when its
/// `transport` is `uart` (the host validated the table; this only reads it).
fn uart_config(table: &toml::Table, core_clock_hz: u64, file: &str) -> Option<String> {
    if table.get("transport").and_then(toml::Value::as_str) != Some("uart") {
        return None;
    }
    let uart = table
        .get("uart")
        .and_then(toml::Value::as_table)
        .unwrap_or_else(|| panic!("{file}: transport = \"uart\" needs a [uart] table"));
    let int = |t: &toml::Table, key: &str| t.get(key).and_then(toml::Value::as_integer);
    let kind = match uart.get("kind").and_then(toml::Value::as_str) {
        Some("cmsdk-apb") => "CmsdkApb",
        Some("stm32-usart") => "Stm32Usart",
        other => panic!("{file}: [uart] kind {other:?}: use cmsdk-apb or stm32-usart"),
    };
    let base = int(uart, "base").unwrap_or_else(|| panic!("{file}: [uart] needs base"));
    let baud = int(uart, "baud").unwrap_or(115_200).max(1) as u64;
    let clock = int(uart, "clock_hz").map_or(core_clock_hz, |c| c as u64);
    // Both UARTs divide their input clock by baud (CMSDK: BAUDDIV; STM32
    // with 16x oversampling: BRR = mantissa << 4 | fraction, the same number).
    let divisor = (clock + baud / 2) / baud;
    let mut init = String::new();
    for (i, w) in uart
        .get("init")
        .and_then(toml::Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let w = w
            .as_table()
            .unwrap_or_else(|| panic!("{file}: [uart] init[{i}] is not a table"));
        let address = int(w, "address")
            .unwrap_or_else(|| panic!("{file}: [uart] init[{i}] needs an address"));
        let _ = write!(
            init,
            "RegisterWrite {{ address: {address:#010x}, clear: {:#010x}, set: {:#010x} }}, ",
            int(w, "clear").unwrap_or(0),
            int(w, "set").unwrap_or(0)
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
