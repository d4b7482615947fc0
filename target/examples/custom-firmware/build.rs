//! The board's memory map, the model and the agent's configuration come
//! from `hilt-firmware-build` (`hilt run` says which board and model in
//! `HILT_*` variables; the board file is read and checked by
//! `hilt-contract`). This firmware makes two choices of its own, and
//! refuses a build that asks for something else rather than run it
//! differently from what the board file or the scenario says.

use hilt_firmware_build::{FirmwareBuild, PlannerKind};

/// UART0 of the MPS2 board, which `src/main.rs` drives.
const UART0: u32 = 0x4000_4000;

fn main() {
    let build = FirmwareBuild::from_env().unwrap_or_else(|e| panic!("{e}"));
    if build.planner != PlannerKind::Greedy {
        panic!(
            "custom-firmware plans its arena with greedy (its choice, in src/main.rs); the scenario asks for {}",
            build.planner
        );
    }
    let base = build.board.uart.as_ref().map(|u| u.base);
    if base != Some(UART0) {
        panic!(
            "{}: custom-firmware talks over UART0 at {UART0:#x}; the board's [uart] base is {base:x?}",
            build.board_file.display()
        );
    }
    build.write().unwrap_or_else(|e| panic!("{e}"));
    // defmt's linker script: the `.defmt` section, the table the host
    // decodes the log with.
    if std::env::var_os("CARGO_FEATURE_DEFMT").is_some() {
        println!("cargo::rustc-link-arg-bins=-Tdefmt.x");
    }
}
