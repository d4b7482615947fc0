//! Board definitions: `boards/NAME.toml` (+ `boards/NAME/memory.x`), parsed
//! into a raw form and then validated, so every mistake is reported with the
//! file and field at fault — by the host and by the firmware's build script
//! alike, from this one definition.
//!
//! ```toml
//! name = "qemu-mps2-an386"
//! description = "Arm MPS2 AN386 (Cortex-M4F) under QEMU"
//! target = "thumbv7em-none-eabihf"
//! features = ["mps2-an386"]
//! runner = "qemu"            # qemu | probe-rs | uart
//! transport = "rtt"          # rtt | uart
//! arena_size = 262144
//! core_clock_hz = 25000000
//! memory = [
//!   { name = "FLASH", origin = 0x00000000, length = 0x400000 },
//!   { name = "RAM", origin = 0x20000000, length = 0x400000 },
//! ]
//! [qemu]
//! machine = "mps2-an386"
//! cpu = "cortex-m4"
//! icount_shift = 0
//! ```
//!
//! A board reached over a serial line adds a `[uart]` table (the UART the
//! firmware drives) and, for a real board, where the host finds it:
//!
//! ```toml
//! runner = "uart"
//! transport = "uart"
//! serial_port = "/dev/serial/by-id/usb-STMicroelectronics_STLINK-V3_0042-if02"
//! flash_command = ["probe-rs", "download", "--chip", "STM32F429ZITx", "{elf}"]
//! [uart]
//! kind = "stm32-usart"       # cmsdk-apb | stm32-usart
//! base = 0x40004800
//! baud = 115200
//! clock_hz = 42000000        # the UART's input clock (default: core_clock_hz)
//! init = [ { address = 0x40023840, set = 0x40000 } ]   # clocks, pins
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, read_toml};

/// How a board is driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunnerKind {
    /// A virtual board: `qemu-system-arm`, memory through its gdbstub.
    Qemu,
    /// A real board through a debug probe.
    ProbeRs,
    /// A real board over a serial port: flashed by the board's
    /// `flash_command` (any tool: a bootloader, a vendor flasher, probe-rs'
    /// CLI), then driven over `serial_port`.
    Uart,
}

/// How messages travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// SEGGER RTT buffers in target RAM.
    Rtt,
    /// A UART.
    Uart,
}

/// A memory region of the board.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryRegion {
    /// Linker name (`FLASH`, `RAM`, ...).
    pub name: String,
    /// Start address.
    pub origin: u64,
    /// Bytes.
    pub length: u64,
}

/// QEMU settings of a virtual board.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QemuSettings {
    /// `-M` machine.
    pub machine: String,
    /// `-cpu`.
    pub cpu: String,
    /// `-icount shift=N`: instructions are counted deterministically.
    #[serde(default)]
    pub icount_shift: u8,
}

/// Register layout of the UART the firmware drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UartKind {
    /// Arm's CMSDK APB UART (MPS2/MPS3).
    CmsdkApb,
    /// The STM32F1/F2/F4 USART (SR, DR, BRR, CR1).
    Stm32Usart,
}

/// One read-modify-write the firmware does before enabling its UART
/// (a clock enable, a pin's function): `*address = (*address & !clear) | set`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterWrite {
    /// Register address (4-aligned).
    pub address: u32,
    /// Bits cleared first.
    #[serde(default)]
    pub clear: u32,
    /// Bits set then.
    #[serde(default)]
    pub set: u32,
}

/// The `[uart]` table: the UART the firmware talks over.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct UartSettings {
    /// Register layout.
    pub kind: UartKind,
    /// Register block address.
    pub base: u32,
    /// Baud rate (also what the host opens the serial port at).
    #[serde(default = "default_baud")]
    pub baud: u32,
    /// The UART's input clock, Hz (default: the core clock).
    #[serde(default)]
    pub clock_hz: Option<u64>,
    /// Set-up writes, in order, before the UART is enabled.
    #[serde(default)]
    pub init: Vec<RegisterWrite>,
}

fn default_baud() -> u32 {
    115_200
}

/// A probe selector `VID:PID[:SERIAL]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbeSelector {
    /// USB vendor id.
    pub vid: u16,
    /// USB product id.
    pub pid: u16,
    /// Serial number, when several identical probes are attached.
    pub serial: Option<String>,
}

impl fmt::Display for ProbeSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}:{:04x}", self.vid, self.pid)?;
        if let Some(s) = &self.serial {
            write!(f, ":{s}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for ProbeSelector {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = s.splitn(3, ':');
        let hex = |p: Option<&str>, what: &str| -> Result<u16, String> {
            let p = p
                .filter(|p| !p.is_empty())
                .ok_or_else(|| format!("{what} missing in {s:?} (want VID:PID[:SERIAL])"))?;
            u16::from_str_radix(p, 16)
                .map_err(|_| format!("{what} {p:?} is not a 16-bit hex number"))
        };
        let vid = hex(parts.next(), "vendor id")?;
        let pid = hex(parts.next(), "product id")?;
        let serial = parts.next().map(str::to_string);
        if serial.as_deref() == Some("") {
            return Err(format!("empty serial number in {s:?}"));
        }
        Ok(ProbeSelector { vid, pid, serial })
    }
}

impl RunnerKind {
    /// The name board files use (`runner = "..."`).
    pub fn name(self) -> &'static str {
        match self {
            RunnerKind::Qemu => "qemu",
            RunnerKind::ProbeRs => "probe-rs",
            RunnerKind::Uart => "uart",
        }
    }
}

impl fmt::Display for RunnerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl UartSettings {
    /// The UART's input clock: its own `clock_hz`, else the core clock.
    pub fn clock(&self, core_clock_hz: u64) -> u64 {
        self.clock_hz.unwrap_or(core_clock_hz)
    }

    /// The baud-rate divisor (rounded to nearest) the firmware programs:
    /// CMSDK's BAUDDIV, or STM32's BRR with 16x oversampling — both are
    /// the input clock over the baud rate. 0 when `baud` is 0 (which
    /// validation refuses).
    pub fn divisor(&self, core_clock_hz: u64) -> u64 {
        let baud = u64::from(self.baud);
        if baud == 0 {
            return 0;
        }
        (self.clock(core_clock_hz) + baud / 2) / baud
    }

    /// The largest divisor the UART's register holds (CMSDK: 20 bits;
    /// STM32: 16 bits).
    pub fn max_divisor(&self) -> u64 {
        match self.kind {
            UartKind::CmsdkApb => (1 << 20) - 1,
            UartKind::Stm32Usart => 0xFFFF,
        }
    }
}

/// The file as written (unvalidated).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBoard {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    chip: Option<String>,
    #[serde(default)]
    probe: Option<String>,
    target: String,
    #[serde(default)]
    features: Vec<String>,
    runner: RunnerKind,
    transport: Transport,
    arena_size: u64,
    core_clock_hz: u64,
    memory: Vec<MemoryRegion>,
    #[serde(default)]
    qemu: Option<QemuSettings>,
    #[serde(default)]
    serial_port: Option<String>,
    #[serde(default)]
    flash_command: Option<Vec<String>>,
    #[serde(default)]
    uart: Option<UartSettings>,
    #[serde(default)]
    latency_tolerance_percent: Option<f64>,
}

/// A validated board definition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Board {
    /// Name (the file's stem).
    pub name: String,
    /// One line for people.
    pub description: String,
    /// probe-rs chip name (real boards).
    pub chip: Option<String>,
    /// Probe selector (probe-rs boards).
    pub probe: Option<ProbeSelector>,
    /// Rust target triple.
    pub target: String,
    /// Firmware cargo features.
    pub features: Vec<String>,
    /// Runner.
    pub runner: RunnerKind,
    /// Transport.
    pub transport: Transport,
    /// Arena bytes the firmware reserves.
    pub arena_size: u64,
    /// Core clock, Hz.
    pub core_clock_hz: u64,
    /// Memory regions.
    pub memory: Vec<MemoryRegion>,
    /// QEMU settings (qemu boards).
    pub qemu: Option<QemuSettings>,
    /// Serial device (uart runner).
    pub serial_port: Option<String>,
    /// How a uart-runner board is flashed: a command and its arguments, with
    /// `{elf}`, `{board}` and `{serial_port}` replaced. None: the board
    /// already runs the scenario's firmware (the Hello's model hash says
    /// whether it does).
    pub flash_command: Option<Vec<String>>,
    /// The UART the firmware talks over (uart transport).
    pub uart: Option<UartSettings>,
    /// Allowed latency drift in snapshots, percent (0 = exact, as on QEMU).
    pub latency_tolerance_percent: f64,
    /// The linker script.
    pub memory_x: PathBuf,
}

/// How far a latency may move before the gate says so. It lives with the
/// board because both of its parts are facts of the board: its run-to-run
/// spread and the resolution of the clock its firmware counts with.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Tolerance {
    /// Relative slack, percent of the accepted figure (real boards).
    pub percent: f64,
    /// Absolute slack, cycles: the board clock's resolution (virtual boards).
    pub cycles: u64,
}

impl Tolerance {
    /// No slack at all.
    pub const EXACT: Tolerance = Tolerance {
        percent: 0.0,
        cycles: 0,
    };

    /// The slack around an accepted figure `old`, in cycles.
    pub fn slack(&self, old: f64) -> f64 {
        (old.abs() * self.percent / 100.0).max(self.cycles as f64)
    }
}

impl Board {
    /// How far a latency figure may move in the gate: the board's
    /// `latency_tolerance_percent`, and on virtual boards one tick of the
    /// clock the firmware counts with. Under QEMU's `-icount shift=N` an
    /// instruction takes 2^N ns of virtual time and SysTick ticks at the
    /// core clock, so one tick is `1e9 / core_clock_hz / 2^N` instructions
    /// (40 on MPS2 at 25 MHz): a figure read through it is exact only to
    /// that resolution.
    pub fn latency_tolerance(&self) -> Tolerance {
        let cycles = match &self.qemu {
            Some(q) if self.core_clock_hz > 0 => {
                let ns_per_tick = 1e9 / self.core_clock_hz as f64;
                let ns_per_instruction = f64::from(1u32 << q.icount_shift.min(31));
                (ns_per_tick / ns_per_instruction).ceil().max(1.0) as u64
            }
            _ => 0,
        };
        Tolerance {
            percent: self.latency_tolerance_percent,
            cycles,
        }
    }

    /// Whether hilt puts a scenario's firmware on the board itself: QEMU
    /// loads the ELF, probe-rs flashes it, a uart board only through its
    /// `flash_command` (without one, it runs whatever it was given).
    pub fn hilt_installs_firmware(&self) -> bool {
        self.runner != RunnerKind::Uart || self.flash_command.is_some()
    }

    /// Counts per firmware tick. Real cores count cycles (DWT): 1. Under
    /// QEMU the firmware counts SysTick ticks at the board clock while
    /// QEMU's `-icount shift=N` executes one instruction per 2^N ns, so a
    /// tick is `10^9 / clock / 2^N` instructions (40 on MPS2 at 25 MHz with
    /// N = 0, as TFLM's own Cortex-M4 figures are counted): reported
    /// "cycles" on QEMU are instructions.
    pub fn cycle_scale(&self) -> f64 {
        match (&self.runner, &self.qemu) {
            (RunnerKind::Qemu, Some(q)) => {
                1e9 / self.core_clock_hz as f64 / f64::from(1u32 << q.icount_shift)
            }
            _ => 1.0,
        }
    }
}

/// Rust targets the firmware builds for.
pub const KNOWN_TARGETS: [&str; 4] = [
    "thumbv6m-none-eabi",
    "thumbv7em-none-eabihf",
    "thumbv7em-none-eabi",
    "thumbv8m.main-none-eabihf",
];

/// Reads and validates `path` (`boards/NAME.toml`).
pub fn load(path: &Path) -> Result<Board, ConfigError> {
    let raw: RawBoard = read_toml(path)?;
    validate(path, raw)
}

/// Reads and validates board `name` of `boards_dir` (`boards_dir/NAME.toml`):
/// what a firmware build script calls with the board its feature names.
pub fn load_named(boards_dir: &Path, name: &str) -> Result<Board, ConfigError> {
    load(&boards_dir.join(format!("{name}.toml")))
}

/// One named check of a raw board file.
type Check = fn(&Path, &RawBoard) -> Result<(), ConfigError>;

/// Every check a board file passes, in the order their errors are reported
/// (a file with several mistakes names the first of this list).
const CHECKS: [(&str, Check); 12] = [
    ("name matches the file", name_matches_file),
    ("target is known", target_is_known),
    ("chip is not empty", chip_not_empty),
    ("probe selector parses", probe_parses),
    ("runner has its settings", runner_has_its_settings),
    ("flash command fits the runner", flash_command_fits),
    ("uart table matches the transport", uart_matches_transport),
    ("core clock runs", core_clock_runs),
    ("memory regions are sound", memory_regions_sound),
    ("RAM and FLASH exist", ram_and_flash_exist),
    ("arena fits in RAM", arena_fits_ram),
    ("linker script agrees", linker_script_agrees),
];

fn validate(path: &Path, raw: RawBoard) -> Result<Board, ConfigError> {
    for (_, check) in CHECKS {
        check(path, &raw)?;
    }
    let probe = parse_probe(path, &raw)?;
    let latency_tolerance_percent = latency_tolerance(path, &raw)?;
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
        qemu: raw.qemu,
        serial_port: raw.serial_port,
        flash_command: raw.flash_command,
        uart: raw.uart,
        latency_tolerance_percent,
    })
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

fn arena_fits_ram(path: &Path, raw: &RawBoard) -> Result<(), ConfigError> {
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

/// The linker script must exist and state the same regions as the TOML.
fn check_memory_x(
    path: &Path,
    memory_x: &Path,
    regions: &[MemoryRegion],
) -> Result<(), ConfigError> {
    let text = std::fs::read_to_string(memory_x)
        .map_err(|e| invalid(path, "memory", format!("{}: {e}", memory_x.display())))?;
    for region in regions {
        let line = text
            .lines()
            .find(|l| {
                l.trim_start().starts_with(&format!("{} ", region.name))
                    || l.trim_start().starts_with(&format!("{}:", region.name))
                    || l.trim_start().starts_with(&format!("{} (", region.name))
            })
            .ok_or_else(|| {
                invalid(
                    path,
                    "memory",
                    format!("{} has no {} region", memory_x.display(), region.name),
                )
            })?;
        let number = |key: &str| -> Option<u64> {
            let at = line.find(key)? + key.len();
            let rest = line[at..].trim_start().trim_start_matches('=').trim_start();
            let token: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            parse_number(&token)
        };
        let (origin, length) = (number("ORIGIN"), number("LENGTH"));
        if origin != Some(region.origin) || length != Some(region.length) {
            return Err(invalid(
                path,
                "memory",
                format!(
                    "{} region {} is {:?}/{:?} there but {:#x}/{:#x} in the TOML",
                    memory_x.display(),
                    region.name,
                    origin,
                    length,
                    region.origin,
                    region.length
                ),
            ));
        }
    }
    Ok(())
}

/// `0x…`, decimal, or with a `K`/`M` suffix, as linker scripts write them.
fn parse_number(token: &str) -> Option<u64> {
    let (digits, scale) = match token.chars().last()? {
        'K' | 'k' => (&token[..token.len() - 1], 1024),
        'M' | 'm' => (&token[..token.len() - 1], 1024 * 1024),
        _ => (token, 1),
    };
    let value = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16).ok()?,
        None => digits.parse().ok()?,
    };
    Some(value * scale)
}

/// Every board in `dir`, sorted by name; the first invalid one is an error.
pub fn load_all(dir: &Path) -> Result<Vec<Board>, ConfigError> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| ConfigError::Read {
            path: dir.into(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    let mut boards = paths
        .iter()
        .map(|p| load(p))
        .collect::<Result<Vec<_>, _>>()?;
    // By name, not file name ("a-uart.toml" sorts before "a.toml").
    boards.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(boards)
}

/// The boards whose names match `pattern` (a name or a glob with `*`/`?`).
pub fn select<'b>(boards: &'b [Board], pattern: &str) -> Result<Vec<&'b Board>, ConfigError> {
    let chosen: Vec<&Board> = boards
        .iter()
        .filter(|b| glob_match(pattern, &b.name))
        .collect();
    if chosen.is_empty() {
        return Err(ConfigError::Unknown {
            name: pattern.to_string(),
            known: boards
                .iter()
                .map(|b| b.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(chosen)
}

/// Shell-style matching with `*` and `?`.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some('*'), _) => go(&p[1..], n) || (!n.is_empty() && go(p, &n[1..])),
            (Some('?'), Some(_)) => go(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &n[1..]),
            _ => false,
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    go(&p, &n)
}
