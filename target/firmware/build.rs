//! Picks the board (from the one `board-*` feature), its linker script and
//! figures, and the model to embed; records them for `src/main.rs`.
//!
//! Environment: `HILT_MODEL` (the .tflite to embed; default: the repo's
//! seed model), `HILT_ARENA_SIZE` (bytes; default: the board's
//! `arena_size`), `HILT_PLANNER` (`linear`, `greedy` or `offline`; default
//! greedy), `HILT_CANARY` (`off`, `bounds`, `buffers`), `HILT_BOARDS_DIR` (default: the repo's `boards/`).

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let repo = manifest.join("../..");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());

    let boards: Vec<String> = env::vars()
        .filter_map(|(k, _)| {
            k.strip_prefix("CARGO_FEATURE_BOARD_")
                .map(|b| b.to_lowercase().replace('_', "-"))
        })
        .collect();
    let board = match boards.as_slice() {
        [one] => one.clone(),
        [] => panic!("enable exactly one board-* feature (e.g. --features board-qemu-mps2-an386)"),
        many => panic!("several board features enabled: {many:?}"),
    };
    let boards_dir =
        env::var_os("HILT_BOARDS_DIR").map_or_else(|| repo.join("boards"), PathBuf::from);
    let toml_path = boards_dir.join(format!("{board}.toml"));
    let toml_text =
        fs::read_to_string(&toml_path).unwrap_or_else(|e| panic!("{}: {e}", toml_path.display()));
    let table: toml::Table = toml_text
        .parse()
        .unwrap_or_else(|e| panic!("{}: {e}", toml_path.display()));
    let number = |key: &str| {
        table
            .get(key)
            .and_then(toml::Value::as_integer)
            .unwrap_or(0) as u64
    };
    let arena_size: u64 = match env::var("HILT_ARENA_SIZE") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("HILT_ARENA_SIZE={v:?} is not a number")),
        Err(_) => number("arena_size"),
    };
    let clock_hz = number("core_clock_hz");
    let align: u32 = env::var("HILT_ALIGN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    if !align.is_power_of_two() || align > 1 << 20 {
        panic!("HILT_ALIGN={align}: a power of two up to 1 MiB");
    }
    let canary = env::var("HILT_CANARY").unwrap_or_else(|_| "off".into());
    if !["off", "bounds", "buffers"].contains(&canary.as_str()) {
        panic!("HILT_CANARY={canary:?}: use off, bounds or buffers");
    }
    let uart = uart_config(&table, clock_hz, &toml_path.display().to_string());
    let planner = env::var("HILT_PLANNER").unwrap_or_else(|_| "greedy".into());
    if !["linear", "greedy", "offline"].contains(&planner.as_str()) {
        panic!("HILT_PLANNER={planner:?}: use linear, greedy or offline");
    }

    // memory.x from the board, plus placement of the arena and metadata.
    let memory_x = boards_dir.join(&board).join("memory.x");
    let mut script =
        fs::read_to_string(&memory_x).unwrap_or_else(|e| panic!("{}: {e}", memory_x.display()));
    script.push_str(
        "\n/* hilt: the tensor arena in its own named section, after .bss */\n\
         SECTIONS\n{\n  .hilt_arena (NOLOAD) : ALIGN(16)\n  {\n    __hilt_arena_start = .;\n    *(.hilt_arena .hilt_arena.*);\n    __hilt_arena_end = .;\n  } > RAM\n} INSERT AFTER .bss;\n\
         /* hilt: which board and model this ELF is for (read by the host) */\n\
         SECTIONS\n{\n  .hilt_meta (INFO) :\n  {\n    KEEP(*(.hilt_meta));\n  }\n} INSERT AFTER .hilt_arena;\n",
    );
    fs::write(out.join("memory.x"), script).unwrap();
    println!("cargo:rustc-link-search={}", out.display());

    let model = env::var_os("HILT_MODEL").map_or_else(
        || repo.join("scenarios/models/seed_fc_float.tflite"),
        PathBuf::from,
    );
    let model_bytes =
        fs::read(&model).unwrap_or_else(|e| panic!("HILT_MODEL {}: {e}", model.display()));
    fs::write(out.join("model.tflite"), &model_bytes).unwrap();

    let mut config = String::new();
    let _ = writeln!(
        config,
        "/// The board this firmware is built for.\npub const BOARD: &str = {board:?};"
    );
    let _ = writeln!(
        config,
        "/// Arena bytes.\npub const ARENA_SIZE: usize = {arena_size};"
    );
    let _ = writeln!(
        config,
        "/// Memory planner.\npub const PLANNER: &str = {planner:?};"
    );
    let _ = writeln!(
        config,
        "/// Canary mode.\npub const CANARY: &str = {canary:?};"
    );
    let _ = writeln!(
        config,
        "/// Activation buffer alignment.\npub const ALIGN: u32 = {align};"
    );
    let _ = writeln!(
        config,
        "/// Core clock, Hz.\npub const CLOCK_HZ: u32 = {clock_hz};"
    );
    let _ = writeln!(
        config,
        "/// Bytes of the embedded model.\npub const MODEL_LEN: usize = {};",
        model_bytes.len()
    );
    let _ = writeln!(
        config,
        "/// CRC-32 of the embedded model.\npub const MODEL_CRC: u32 = {:#010x};",
        crc32(&model_bytes)
    );
    let _ = writeln!(
        config,
        "/// File name of the embedded model.\npub const MODEL_NAME: &str = {:?};",
        model.file_name().unwrap().to_string_lossy()
    );
    println!("cargo::rustc-check-cfg=cfg(hilt_uart)");
    if let Some(uart) = uart {
        println!("cargo::rustc-cfg=hilt_uart");
        config.push_str(&uart);
    }
    fs::write(out.join("config.rs"), config).unwrap();

    println!("cargo:rerun-if-changed={}", toml_path.display());
    println!("cargo:rerun-if-changed={}", memory_x.display());
    println!("cargo:rerun-if-changed={}", model.display());
    for var in [
        "HILT_MODEL",
        "HILT_ARENA_SIZE",
        "HILT_BOARDS_DIR",
        "HILT_PLANNER",
        "HILT_CANARY",
        "HILT_ALIGN",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
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
        "/// The UART the host talks to (board `[uart]`).\n\
         pub mod uart {{\n\
         use crate::uart::{{Kind, RegisterWrite}};\n\
         /// Register layout.\npub const KIND: Kind = Kind::{kind};\n\
         /// Register block.\npub const BASE: usize = {base:#010x};\n\
         /// Input clock / baud rate.\npub const DIVISOR: u32 = {divisor};\n\
         /// Clock and pin set-up, in order, before the UART is enabled.\n\
         pub const INIT: &[RegisterWrite] = &[{init}];\n\
         }}\n"
    ))
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}
