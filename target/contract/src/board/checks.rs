//! The checks a board file passes, each a named function, run in the order
//! of [`CHECKS`] so that a file with several mistakes names the first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::memory_x::check_memory_x;
use super::{
    Board, KNOWN_TARGETS, MemoryRegion, ProbeSelector, RawBoard, RunnerKind, Transport,
    UartSettings,
};
use crate::error::ConfigError;
use crate::offload::VnpuModel;

/// One named check of a raw board file.
type Check = fn(&Path, &RawBoard) -> Result<(), ConfigError>;

/// Every check a board file passes, in the order their errors are reported
/// (a file with several mistakes names the first of this list).
const CHECKS: [(&str, Check); 17] = [
    ("name matches the file", name_matches_file),
    ("target is known", target_is_known),
    ("chip is not empty", chip_not_empty),
    ("probe selector parses", probe_parses),
    ("runner has its settings", runner_has_its_settings),
    ("flash command fits the runner", flash_command_fits),
    ("power cycle names a program", power_cycle_names_a_program),
    ("uart table matches the transport", uart_matches_transport),
    ("core clock runs", core_clock_runs),
    ("memory regions are sound", memory_regions_sound),
    ("RAM and FLASH exist", ram_and_flash_exist),
    ("stack size is sound", stack_size_sound),
    ("arena fits in RAM", arena_fits_ram),
    ("model slot fits in FLASH", model_slot_fits_flash),
    ("pools split the arena", pools_split_the_arena),
    ("linker script agrees", linker_script_agrees),
    ("firmware names a crate", firmware_names_a_crate),
];

pub(super) fn validate(path: &Path, raw: RawBoard) -> Result<Board, ConfigError> {
    for (_, check) in CHECKS {
        check(path, &raw)?;
    }
    let probe = parse_probe(path, &raw)?;
    let latency_tolerance_percent = latency_tolerance(path, &raw)?;
    let firmware = raw.firmware.as_deref().map(|f| firmware_dir(path, f));
    Ok(Board {
        memory_x: memory_x_path(path),
        name: raw.name,
        description: raw.description,
        chip: raw.chip,
        probe,
        target: raw.target,
        features: raw.features,
        runner: raw.runner,
        transport: raw.transport,
        arena_size: raw.arena_size,
        core_clock_hz: raw.core_clock_hz,
        memory: raw.memory,
        pools: raw.pools,
        qemu: raw.qemu,
        serial_port: raw.serial_port,
        flash_command: raw.flash_command,
        uart: raw.uart,
        latency_tolerance_percent,
        firmware,
        vnpu: raw.vnpu.unwrap_or_default().over(VnpuModel::default()),
        model_slot: raw.model_slot,
        timing: raw.timing,
        stack_size: raw.stack_size,
        globs: raw.globs.unwrap_or(true),
        power_cycle: raw.power_cycle,
    })
}

/// The repository root of a board file: the folder holding its `boards/`.
fn repo_of(path: &Path) -> &Path {
    path.parent()
        .and_then(Path::parent)
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new("."))
}

/// The `firmware` folder, from the repository root.
fn firmware_dir(path: &Path, firmware: &str) -> PathBuf {
    repo_of(path).join(firmware)
}

/// `firmware`, when given, is a folder from the repository root (the folder
/// that holds the board's `boards/` folder) with a crate's `Cargo.toml`.
fn firmware_names_a_crate(path: &Path, raw: &RawBoard) -> Result<(), ConfigError> {
    let Some(firmware) = raw.firmware.as_deref() else {
        return Ok(());
    };
    if firmware.trim().is_empty() {
        return Err(invalid(
            path,
            "firmware",
            "empty: give the firmware crate's folder from the repository root, e.g. \"target/examples/custom-firmware\"",
        ));
    }
    let dir = firmware_dir(path, firmware);
    if !dir.is_dir() {
        return Err(invalid(
            path,
            "firmware",
            format!(
                "{} is not a folder (the path is taken from {})",
                dir.display(),
                repo_of(path).display()
            ),
        ));
    }
    if !dir.join("Cargo.toml").is_file() {
        return Err(invalid(
            path,
            "firmware",
            format!(
                "{} has no Cargo.toml: name a firmware crate's folder",
                dir.display()
            ),
        ));
    }
    Ok(())
}

fn invalid(path: &Path, field: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::invalid(path, field, problem)
}

/// The linker script beside the board file: `boards/NAME/memory.x`.
fn memory_x_path(path: &Path) -> PathBuf {
    path.with_extension("").join("memory.x")
}

fn name_matches_file(path: &Path, raw: &RawBoard) -> Result<(), ConfigError> {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if raw.name != stem {
        return Err(invalid(
            path,
            "name",
            format!("{:?} differs from the file name {stem:?}", raw.name),
        ));
    }
    Ok(())
}

fn target_is_known(path: &Path, raw: &RawBoard) -> Result<(), ConfigError> {
    if !KNOWN_TARGETS.contains(&raw.target.as_str()) {
        return Err(invalid(
            path,
            "target",
            format!(
                "{:?} is not one of {}",
                raw.target,
                KNOWN_TARGETS.join(", ")
            ),
        ));
    }
    Ok(())
}

fn chip_not_empty(path: &Path, raw: &RawBoard) -> Result<(), ConfigError> {
    if raw.chip.as_deref().is_some_and(|c| c.trim().is_empty()) {
        return Err(invalid(path, "chip", "empty"));
    }
    Ok(())
}

fn parse_probe(path: &Path, raw: &RawBoard) -> Result<Option<ProbeSelector>, ConfigError> {
    raw.probe
        .as_deref()
        .map(str::parse::<ProbeSelector>)
        .transpose()
        .map_err(|e| invalid(path, "probe", e))
}

fn probe_parses(path: &Path, raw: &RawBoard) -> Result<(), ConfigError> {
    parse_probe(path, raw).map(drop)
}

/// Each runner's own needs: QEMU its `[qemu]` table (and no serial port),
/// probe-rs RTT, a probe and a chip, uart a serial port and its UART.
fn runner_has_its_settings(path: &Path, raw: &RawBoard) -> Result<(), ConfigError> {
    let (field, problem) = match raw.runner {
        RunnerKind::Qemu if raw.qemu.is_none() => {
            ("qemu", "a qemu board needs a [qemu] table (machine, cpu)")
        }
        RunnerKind::Qemu if raw.serial_port.is_some() => (
            "serial_port",
            "a qemu board's UART is a pty QEMU picks at start; leave serial_port out",
        ),
        RunnerKind::ProbeRs if raw.transport != Transport::Rtt => (
            "transport",
            "probe-rs boards talk over rtt; for a board driven over its serial line use runner = \"uart\" (flash_command can call probe-rs)",
        ),
        RunnerKind::ProbeRs if raw.probe.is_none() => (
            "probe",
            "a probe-rs board needs a probe selector VID:PID[:SERIAL]",
        ),
        RunnerKind::ProbeRs if raw.chip.is_none() => {
            ("chip", "a probe-rs board needs its probe-rs chip name")
        }
        RunnerKind::Uart
            if raw
                .serial_port
                .as_deref()
                .is_none_or(|p| p.trim().is_empty()) =>
        {
            (
                "serial_port",
                "a uart board needs a serial port (e.g. /dev/ttyACM0)",
            )
        }
        RunnerKind::Uart if raw.transport != Transport::Uart => (
            "transport",
            "a uart board talks over its uart: transport = \"uart\"",
        ),
        _ => return Ok(()),
    };
    Err(invalid(path, field, problem))
}

fn power_cycle_names_a_program(path: &Path, raw: &RawBoard) -> Result<(), ConfigError> {
    match &raw.power_cycle {
        Some(command) if command.first().is_none_or(|p| p.trim().is_empty()) => Err(invalid(
            path,
            "power_cycle",
            "empty: give the program and its arguments, e.g. [\"uhubctl\", \"-a\", \"cycle\", \"-l\", \"1-1\", \"-p\", \"2\"]",
        )),
        _ => Ok(()),
    }
}

fn flash_command_fits(path: &Path, raw: &RawBoard) -> Result<(), ConfigError> {
    let Some(command) = &raw.flash_command else {
        return Ok(());
    };
    if raw.runner != RunnerKind::Uart {
        return Err(invalid(
            path,
            "flash_command",
            "only uart boards are flashed by a command (qemu loads the ELF, probe-rs flashes it)",
        ));
    }
    if command.first().is_none_or(|p| p.trim().is_empty()) {
        return Err(invalid(
            path,
            "flash_command",
            "empty: give the program and its arguments, e.g. [\"probe-rs\", \"download\", \"--chip\", \"CHIP\", \"{elf}\"]",
        ));
    }
    Ok(())
}

fn uart_matches_transport(path: &Path, raw: &RawBoard) -> Result<(), ConfigError> {
    match (&raw.uart, raw.transport) {
        (None, Transport::Uart) => Err(invalid(
            path,
            "uart",
            "transport = \"uart\" needs a [uart] table (kind, base, baud)",
        )),
        (Some(_), Transport::Rtt) => Err(invalid(
            path,
            "uart",
            "a [uart] table is only used with transport = \"uart\"",
        )),
        (Some(u), Transport::Uart) => check_uart(path, u, raw.core_clock_hz),
        (None, Transport::Rtt) => Ok(()),
    }
}

fn core_clock_runs(path: &Path, raw: &RawBoard) -> Result<(), ConfigError> {
    if raw.core_clock_hz == 0 {
        return Err(invalid(path, "core_clock_hz", "must be above 0"));
    }
    Ok(())
}

/// No empty, doubly defined or overlapping region.
fn memory_regions_sound(path: &Path, raw: &RawBoard) -> Result<(), ConfigError> {
    let mut names = BTreeMap::new();
    for region in &raw.memory {
        if region.length == 0 {
            return Err(invalid(
                path,
                "memory",
                format!("region {} is empty", region.name),
            ));
        }
        if names.insert(region.name.as_str(), region).is_some() {
            return Err(invalid(
                path,
                "memory",
                format!("region {} is defined twice", region.name),
            ));
        }
    }
    for (i, a) in raw.memory.iter().enumerate() {
        for b in &raw.memory[i + 1..] {
            if a.origin < b.origin + b.length && b.origin < a.origin + a.length {
                return Err(invalid(
                    path,
                    "memory",
                    format!("regions {} and {} overlap", a.name, b.name),
                ));
            }
        }
    }
    Ok(())
}

fn region<'r>(raw: &'r RawBoard, name: &str) -> Option<&'r MemoryRegion> {
    raw.memory.iter().find(|r| r.name == name)
}

fn ram_and_flash_exist(path: &Path, raw: &RawBoard) -> Result<(), ConfigError> {
    for name in ["RAM", "FLASH"] {
        if region(raw, name).is_none() {
            return Err(invalid(path, "memory", format!("no region named {name}")));
        }
    }
    Ok(())
}

/// A declared stack is no smaller than the least any firmware ran in
/// ([`super::LEAST_STACK_BYTES`]), 8-byte aligned (the AAPCS's stack
/// alignment), and leaves RAM for something else.
fn stack_size_sound(path: &Path, raw: &RawBoard) -> Result<(), ConfigError> {
    let Some(stack) = raw.stack_size else {
        return Ok(());
    };
    let ram = region(raw, "RAM").map_or(0, |r| r.length);
    let least = super::LEAST_STACK_BYTES;
    let problem = if stack < least {
        format!("{stack} bytes is below the least a firmware runs in ({least} bytes)")
    } else if stack % 8 != 0 {
        format!("{stack} bytes is not a multiple of 8 (the stack's alignment)")
    } else if stack >= ram {
        format!("{stack} bytes does not fit in RAM ({ram} bytes)")
    } else {
        return Ok(());
    };
    Err(invalid(path, "stack_size", problem))
}

fn arena_fits_ram(path: &Path, raw: &RawBoard) -> Result<(), ConfigError> {
    // A board may give the arena a region of its own (`ARENA`), so that it
    // starts where a memory starts and its pools are those memories.
    if let Some(arena) = region(raw, super::ARENA_REGION) {
        if raw.arena_size == 0 || raw.arena_size > arena.length {
            return Err(invalid(
                path,
                "arena_size",
                format!(
                    "{} bytes does not fit in the {} region ({} bytes)",
                    raw.arena_size,
                    super::ARENA_REGION,
                    arena.length
                ),
            ));
        }
        return Ok(());
    }
    let ram = region(raw, "RAM").map_or(0, |r| r.length);
    if raw.arena_size == 0 || raw.arena_size >= ram {
        return Err(invalid(
            path,
            "arena_size",
            format!(
                "{} bytes does not fit in RAM ({ram} bytes, which also holds stack and RTT buffers)",
                raw.arena_size
            ),
        ));
    }
    Ok(())
}

/// A fixed model slot holds at least the slot's header and a little model,
/// keeps the slot's 64-byte granule, and leaves flash for the code (which
/// the link then checks to the byte).
fn model_slot_fits_flash(path: &Path, raw: &RawBoard) -> Result<(), ConfigError> {
    let Some(slot) = raw.model_slot else {
        return Ok(());
    };
    let flash = region(raw, "FLASH").map_or(0, |r| r.length);
    let problem = if slot < 1024 || slot % 64 != 0 {
        Some(format!(
            "{slot} bytes: a slot is a multiple of 64 bytes, at least 1024"
        ))
    } else if slot >= flash {
        Some(format!(
            "{slot} bytes leave no room for the code in FLASH ({flash} bytes)"
        ))
    } else {
        None
    };
    problem.map_or(Ok(()), |p| Err(invalid(path, "model_slot", p)))
}

fn pools_split_the_arena(path: &Path, raw: &RawBoard) -> Result<(), ConfigError> {
    crate::pools::check_board_pools(path, &raw.pools, raw.arena_size)
}

fn linker_script_agrees(path: &Path, raw: &RawBoard) -> Result<(), ConfigError> {
    check_memory_x(path, &memory_x_path(path), &raw.memory)
}

/// The gate's latency slack: as written, else exact on QEMU (whose counts
/// are deterministic) and 2% on real boards (their run-to-run spread).
fn latency_tolerance(path: &Path, raw: &RawBoard) -> Result<f64, ConfigError> {
    let default = if raw.runner == RunnerKind::Qemu {
        0.0
    } else {
        2.0
    };
    let tolerance = raw.latency_tolerance_percent.unwrap_or(default);
    if !(0.0..=100.0).contains(&tolerance) {
        return Err(invalid(
            path,
            "latency_tolerance_percent",
            "must be between 0 and 100",
        ));
    }
    Ok(tolerance)
}

/// A UART the firmware can set up: a real baud rate its clock can divide
/// down to, and aligned set-up registers.
fn check_uart(path: &Path, uart: &UartSettings, core_clock_hz: u64) -> Result<(), ConfigError> {
    if uart.baud == 0 {
        return Err(invalid(path, "uart", "baud must be above 0"));
    }
    let clock = uart.clock(core_clock_hz);
    let divisor = uart.divisor(core_clock_hz);
    // CMSDK: BAUDDIV of at least 16; STM32: BRR of at least 16 with 16x
    // oversampling.
    let max = uart.max_divisor();
    if !(16..=max).contains(&divisor) {
        return Err(invalid(
            path,
            "uart",
            format!(
                "{} baud from a {clock} Hz clock needs a divisor of {divisor}; the UART takes 16..={max}",
                uart.baud
            ),
        ));
    }
    if !uart.base.is_multiple_of(4) {
        return Err(invalid(
            path,
            "uart",
            format!("base {:#x} is not 4-aligned", uart.base),
        ));
    }
    if let Some(w) = uart.init.iter().find(|w| !w.address.is_multiple_of(4)) {
        return Err(invalid(
            path,
            "uart",
            format!("init address {:#x} is not 4-aligned", w.address),
        ));
    }
    Ok(())
}
