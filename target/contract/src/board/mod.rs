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
//! boot = "vector-table"        # or "entry": started at the ELF's entry point
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
//!
//! A board that runs your own firmware (a crate linking `hilt-agent`) names
//! it, by its folder from the repository root (the folder holding
//! `boards/`); `hilt run` builds it instead of `target/firmware`:
//!
//! ```toml
//! firmware = "target/examples/custom-firmware"
//! ```
//!
//! A board may fix its model slot (the flash that holds the model, written
//! into the built firmware without rebuilding it). Without the key each
//! model size class (128 KiB, 256 KiB, ... ) is a firmware build of its
//! own; with it, one build serves every model up to that size:
//!
//! ```toml
//! model_slot = 0x100000      # bytes, a multiple of 64, inside FLASH
//! ```
//!
//! A board says how its core's cycles are estimated from what a virtual
//! board executes (hilt's QEMU plugin; see `Timing`): the core's timing
//! model, and the flash's wait states and cache, so that weights read from
//! slow flash cost what they cost. Without the table the core comes from
//! `[qemu] cpu` and the flash has no wait states:
//!
//! ```toml
//! [timing]
//! core = "cortex-m4"
//! flash_wait_states = 5
//! flash_cache = true
//! ```
//!
//! A board describes its virtual NPU's latency model (a scenario may
//! override it; see `crate::offload`):
//!
//! ```toml
//! [vnpu]
//! job_cycles = 10000
//! cycles_per_1000_macs = 64
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod budget;
mod checks;
mod memory_x;

pub use crate::shortfall::{MemoryShortfall, grouped};
pub use budget::{LEAST_STACK_BYTES, MIN_STACK_BYTES, least_slot};

use crate::error::{ConfigError, read_toml};
use crate::offload::{RawVnpu, VnpuModel};

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

/// The memory region that, when a board defines it, holds the arena alone
/// (linked at its origin, so the first pool starts where that memory does);
/// without it the arena goes into `RAM` after `.bss`.
pub const ARENA_REGION: &str = "ARENA";

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
    /// How QEMU starts the firmware.
    #[serde(default)]
    pub boot: QemuBoot,
}

/// How QEMU starts a virtual board's firmware (`[qemu] boot`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QemuBoot {
    /// `-kernel`: the core takes its stack pointer and reset vector from
    /// the firmware's vector table, which lies where the core boots.
    #[default]
    VectorTable,
    /// QEMU's generic loader starts the core at the firmware's entry point
    /// and the firmware sets its own stack pointer and vector table
    /// (cortex-m-rt's `set-sp` and `set-vtor`): for a core that boots from
    /// a memory too small for the firmware (the AN547's Cortex-M55 boots
    /// from a 512 KiB ITCM).
    Entry,
}

/// How cycles are estimated on a board (`[timing]`), or a timing profile
/// of a real part applied to a virtual board (`boards/timing/NAME.toml`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    /// The core's timing model: `cortex-m0plus`, `cortex-m3`, `cortex-m4`,
    /// `cortex-m33` (`cortex-m7` and `cortex-m55` are rough).
    pub core: String,
    /// Wait states of a flash access that misses its cache.
    #[serde(default)]
    pub flash_wait_states: u32,
    /// Whether a cache (an ART accelerator) sits in front of the flash.
    #[serde(default)]
    pub flash_cache: bool,
    /// The part's clock, Hz (a profile: for time from cycles).
    #[serde(default)]
    pub clock_hz: Option<u64>,
    /// For people: what part and where its figures come from.
    #[serde(default)]
    pub description: Option<String>,
}

impl Timing {
    /// The timing a virtual board has without a `[timing]` table: its QEMU
    /// CPU's core, flash without wait states.
    pub fn of_cpu(cpu: &str) -> Timing {
        Timing {
            core: cpu.to_string(),
            flash_wait_states: 0,
            flash_cache: false,
            clock_hz: None,
            description: None,
        }
    }
}

/// Register layout of the UART the firmware drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UartKind {
    /// Arm's CMSDK APB UART (MPS2/MPS3).
    CmsdkApb,
    /// The STM32F1/F2/F4 USART (SR, DR, BRR, CR1).
    Stm32Usart,
    /// Nordic's UART (nRF51, and UART0 of the nRF52 series): tasks and
    /// events, TXD and RXD, a BAUDRATE code rather than a divisor.
    NrfUart,
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

    /// What the firmware programs for the baud rate (rounded to nearest):
    /// CMSDK's BAUDDIV, or STM32's BRR with 16x oversampling — both the
    /// input clock over the baud rate; Nordic's BAUDRATE, the baud rate as
    /// a fraction of the clock in 32 bits, in steps of 0x1000 (115,200
    /// baud from 16 MHz: 0x01D7E000, the value Nordic's manual lists). 0
    /// when `baud` is 0 (which validation refuses).
    pub fn divisor(&self, core_clock_hz: u64) -> u64 {
        let (baud, clock) = (u64::from(self.baud), self.clock(core_clock_hz));
        if baud == 0 || clock == 0 {
            return 0;
        }
        match self.kind {
            UartKind::NrfUart => ((baud << 32) / clock + 0x800) & !0xFFF,
            UartKind::CmsdkApb | UartKind::Stm32Usart => (clock + baud / 2) / baud,
        }
    }

    /// The largest value the UART's register holds (CMSDK: 20 bits;
    /// STM32: 16 bits; Nordic: a code below the clock itself).
    pub fn max_divisor(&self) -> u64 {
        match self.kind {
            UartKind::CmsdkApb => (1 << 20) - 1,
            UartKind::Stm32Usart => 0xFFFF,
            UartKind::NrfUart => 0xFFFF_F000,
        }
    }
}

/// The file as written (unvalidated).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBoard {
    pub(super) name: String,
    #[serde(default)]
    pub(super) description: String,
    #[serde(default)]
    pub(super) chip: Option<String>,
    #[serde(default)]
    pub(super) probe: Option<String>,
    pub(super) target: String,
    #[serde(default)]
    pub(super) features: Vec<String>,
    pub(super) runner: RunnerKind,
    pub(super) transport: Transport,
    pub(super) arena_size: u64,
    pub(super) core_clock_hz: u64,
    pub(super) memory: Vec<MemoryRegion>,
    #[serde(default)]
    pub(super) pools: Vec<crate::pools::PoolSpec>,
    #[serde(default)]
    pub(super) qemu: Option<QemuSettings>,
    #[serde(default)]
    pub(super) serial_port: Option<String>,
    #[serde(default)]
    pub(super) flash_command: Option<Vec<String>>,
    #[serde(default)]
    pub(super) uart: Option<UartSettings>,
    #[serde(default)]
    pub(super) latency_tolerance_percent: Option<f64>,
    #[serde(default)]
    pub(super) firmware: Option<String>,
    #[serde(default)]
    pub(super) vnpu: Option<RawVnpu>,
    #[serde(default)]
    pub(super) model_slot: Option<u64>,
    #[serde(default)]
    pub(super) timing: Option<Timing>,
    #[serde(default)]
    pub(super) stack_size: Option<u64>,
    #[serde(default)]
    pub(super) globs: Option<bool>,
    #[serde(default)]
    pub(super) power_cycle: Option<Vec<String>>,
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
    /// The arena's memory pools, in address order (empty: one memory).
    pub pools: Vec<crate::pools::PoolSpec>,
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
    /// The firmware crate built for this board instead of hilt's
    /// `target/firmware` (a folder with a `Cargo.toml`), resolved from the
    /// repository root.
    pub firmware: Option<PathBuf>,
    /// The latency model of the board's virtual NPU (`[vnpu]`; default:
    /// the runtime's engine defaults).
    pub vnpu: VnpuModel,
    /// The model slot's bytes in every firmware built for this board
    /// (`model_slot`), or None for a slot sized to each model's class.
    /// One slot for every model means one firmware build for every model
    /// (the model is written into the built ELF), so a virtual board, whose
    /// flash costs nothing to load, needs a build per configuration rather
    /// than per configuration and model size. On a real board a bigger slot
    /// is more bytes to flash on every run, which is why it is a choice.
    pub model_slot: Option<u64>,
    /// How cycles are estimated on it (`[timing]`), if it says.
    pub timing: Option<Timing>,
    /// The stack the board declares for its firmware (`stack_size`), if
    /// it does: a board with little RAM declares what its firmware was
    /// measured to need, so that the arena gets the rest. On a virtual
    /// board the QEMU plugin then holds every run to it (a stack access
    /// below it is an overflow). See [`Board::stack_budget`].
    pub stack_size: Option<u64>,
    /// Whether a glob in a scenario's `boards` picks this board (`globs`;
    /// default true). A board too small for most scenarios says false:
    /// scenarios that run there name it, as Zephyr's twister runs a
    /// platform that is not a default one only when asked.
    pub globs: bool,
    /// A command that power-cycles the board (`power_cycle`, e.g.
    /// `["uhubctl", "-a", "cycle", "-l", "1-1", "-p", "2"]` or a relay
    /// tool), with `{board}` and `{serial_port}` filled in: run when the
    /// board does not answer, before one more try.
    pub power_cycle: Option<Vec<String>>,
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

    /// The stack a firmware built for this board must have room for: its
    /// `stack_size`, else [`MIN_STACK_BYTES`].
    pub fn stack_budget(&self) -> u64 {
        self.stack_size.unwrap_or(MIN_STACK_BYTES)
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
    checks::validate(path, raw)
}

/// Reads and validates board `name` of `boards_dir` (`boards_dir/NAME.toml`)
/// alone, so a command about one board is not stopped by another board's
/// file: what `hilt layout --board` and a firmware build script call. An
/// unknown name is [`ConfigError::Unknown`], listing the defined boards.
pub fn load_named(boards_dir: &Path, name: &str) -> Result<Board, ConfigError> {
    let path = boards_dir.join(format!("{name}.toml"));
    if path.is_file() {
        return load(&path);
    }
    let mut known: Vec<String> = std::fs::read_dir(boards_dir)
        .map_err(|source| ConfigError::Read {
            path: boards_dir.into(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    known.sort();
    Err(ConfigError::Unknown {
        name: name.to_string(),
        known,
    })
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

/// The boards `pattern` picks: the one it names, or those whose names
/// match it as a glob (`*`/`?`) and that globs pick ([`Board::globs`]).
pub fn select<'b>(boards: &'b [Board], pattern: &str) -> Result<Vec<&'b Board>, ConfigError> {
    let glob = pattern.contains(['*', '?']);
    let chosen: Vec<&Board> = boards
        .iter()
        .filter(|b| (b.globs || !glob) && glob_match(pattern, &b.name))
        .collect();
    if chosen.is_empty() {
        return Err(ConfigError::Unknown {
            name: pattern.to_string(),
            known: boards.iter().map(|b| b.name.clone()).collect(),
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
