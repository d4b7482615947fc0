//! Real boards through a debug probe (probe-rs): pick the board's probe by
//! its `VID:PID[:SERIAL]` selector, attach to its chip, flash the firmware
//! ELF, reset it, and then talk to it over RTT exactly as to a QEMU board.
//!
//! ```no_run
//! use probe_rs::probe::list::Lister;
//!
//! let lister = Lister::new();
//! for probe in hilt::driver::probe_rs::list_probes(&lister) {
//!     println!("{probe}");
//! }
//! ```
//!
//! **RTT.** The run uses hilt's own [`Rtt`] over [`ProbeMemory`] (probe-rs's
//! `Core` seen as a [`TargetMemory`]), not probe-rs's RTT: real and virtual
//! boards then share one RTT, framing, log and timeout code path, the one the
//! QEMU tests exercise end to end, and a fault found on one kind of board is
//! a fault of the other too.
//!
//! probe-rs is synchronous: everything here blocks, and the orchestrator runs
//! it on a blocking thread, one board at a time per board (see
//! [`crate::orchestrate`]).

use std::io::Write;
use std::ops::Range;
use std::time::{Duration, Instant};

use probe_rs::config::{MemoryRegion as TargetRegion, Registry, Target, TargetSelector};
use probe_rs::flashing::{DownloadOptions, FlashProgress, ProgressEvent, ProgressOperation};
use probe_rs::probe::list::Lister;
use probe_rs::probe::{DebugProbeInfo, DebugProbeSelector, Probe};
use probe_rs::{Core, MemoryInterface, Permissions, Session};

use super::{BoardDriver, OnFlashed, check_image_board, conclude};
use crate::cancel::KillSwitch;
use crate::config::board::{Board, ProbeSelector};
use crate::config::scenario::Scenario;
use crate::elf::FirmwareImage;
use crate::link::defmt::DefmtSource;
use crate::link::rtt::Rtt;
use crate::link::{Link, LinkError};
use crate::memory::{MemoryError, TargetMemory};
use crate::outcome::BoardRun;
use crate::session::{RunFailure, run_session};

/// Drives real boards through a debug probe (`runner = "probe-rs"`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ProbeRsDriver;

impl BoardDriver for ProbeRsDriver {
    fn run(
        &self,
        board: &Board,
        scenario: &Scenario,
        image: &FirmwareImage,
        model_crc: u32,
        kill: &KillSwitch,
        on_flashed: OnFlashed,
    ) -> BoardRun {
        run_on_probe(board, scenario, image, model_crc, kill, on_flashed)
    }

    fn flash_phase(&self) -> Option<&'static str> {
        Some("opening the probe and flashing")
    }
}

/// How long the firmware gets, after reset, to set up its RTT control block.
const RTT_ATTACH: Duration = Duration::from_secs(20);
/// How long a core gets to halt after a reset.
const HALT: Duration = Duration::from_millis(500);

/// Why a probe-rs board could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The board definition names no probe (only probe-rs boards do).
    #[error("{board}: the board definition has no probe selector (VID:PID[:SERIAL])")]
    NoSelector {
        /// Board.
        board: String,
    },
    /// No attached probe matches the board's selector.
    #[error("{board}: no probe matches {selector}; attached probes: {attached}")]
    NotAttached {
        /// Board.
        board: String,
        /// Its selector.
        selector: String,
        /// What is attached ("none" when nothing is).
        attached: String,
    },
    /// Several probes match and the selector has no serial number to tell
    /// them apart: using either could flash the wrong board.
    #[error(
        "{board}: {count} probes match {selector} ({candidates}); add the serial number to the board's `probe` (VID:PID:SERIAL)"
    )]
    Ambiguous {
        /// Board.
        board: String,
        /// Its selector.
        selector: String,
        /// How many matched.
        count: usize,
        /// The matching probes.
        candidates: String,
    },
    /// The probe is listed but could not be opened (in use, permissions).
    #[error("{board}: cannot open probe {probe}: {reason}")]
    Open {
        /// Board.
        board: String,
        /// The probe.
        probe: String,
        /// probe-rs's words.
        reason: String,
    },
    /// The board definition names no chip (only probe-rs boards do).
    #[error("{board}: the board definition has no probe-rs `chip`")]
    NoChip {
        /// Board.
        board: String,
    },
    /// probe-rs does not know the chip, or knows it under another name.
    #[error("{board}: probe-rs does not know chip {chip:?}: {reason}")]
    UnknownChip {
        /// Board.
        board: String,
        /// The chip named by the board.
        chip: String,
        /// Why.
        reason: String,
    },
    /// The board's memory regions are not where probe-rs says the chip's are
    /// (the firmware would be linked for memory the chip does not have).
    #[error("{board}: region {region} is not {kind} of {chip} (probe-rs has {known})")]
    Memory {
        /// Board.
        board: String,
        /// Chip.
        chip: String,
        /// Board region: name and address range.
        region: String,
        /// "flash" or "RAM".
        kind: &'static str,
        /// The chip's regions of that kind.
        known: String,
    },
    /// Attaching to the chip failed (wiring, power, locked chip).
    #[error("{board}: cannot attach to {chip}: {reason}")]
    Attach {
        /// Board.
        board: String,
        /// Chip.
        chip: String,
        /// probe-rs's words.
        reason: String,
    },
    /// Flashing the ELF failed.
    #[error("{board}: flashing {path} failed: {reason}")]
    Flash {
        /// Board.
        board: String,
        /// The ELF.
        path: String,
        /// probe-rs's words.
        reason: String,
    },
    /// Reset, halt or run failed.
    #[error("{board}: cannot {action} the core: {reason}")]
    Core {
        /// Board.
        board: String,
        /// What was tried.
        action: &'static str,
        /// probe-rs's words.
        reason: String,
    },
}

/// probe-rs's error messages are short and keep the detail in their
/// sources: one line with the whole chain says what went wrong.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string().trim_end_matches('.').to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let part = s.to_string();
        let part = part.trim_end_matches('.');
        if !text.contains(part) {
            text.push_str(": ");
            text.push_str(part);
        }
        source = s.source();
    }
    text
}

/// An attached probe as plain data, so that matching is testable without
/// USB (probe-rs's `DebugProbeInfo` needs a driver behind it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachedProbe {
    /// probe-rs's name for it ("J-Link", "STLink V2-1", ...).
    pub identifier: String,
    /// USB vendor id.
    pub vid: u16,
    /// USB product id.
    pub pid: u16,
    /// USB serial number.
    pub serial: Option<String>,
}

impl std::fmt::Display for AttachedProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04x}:{:04x}", self.vid, self.pid)?;
        if let Some(s) = &self.serial {
            write!(f, ":{s}")?;
        }
        write!(f, " ({})", self.identifier)
    }
}

impl From<&DebugProbeInfo> for AttachedProbe {
    fn from(info: &DebugProbeInfo) -> Self {
        AttachedProbe {
            identifier: info.identifier.clone(),
            vid: info.vendor_id,
            pid: info.product_id,
            serial: info.serial_number.clone(),
        }
    }
}

impl AttachedProbe {
    /// The probe-rs selector that opens exactly this probe.
    fn selector(&self) -> DebugProbeSelector {
        DebugProbeSelector {
            vendor_id: self.vid,
            product_id: self.pid,
            interface: None,
            serial_number: self.serial.clone(),
        }
    }
}

/// Whether `probe` is one the selector names. Serial numbers compare as
/// written or, as probe-rs also accepts, as the hex of the probe's serial
/// (old ST-LINKs report binary serials).
pub fn selector_matches(selector: &ProbeSelector, probe: &AttachedProbe) -> bool {
    if selector.vid != probe.vid || selector.pid != probe.pid {
        return false;
    }
    match (&selector.serial, &probe.serial) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(want), Some(have)) => {
            let hex: String = have.bytes().map(|b| format!("{b:02X}")).collect();
            want == have || want.eq_ignore_ascii_case(&hex)
        }
    }
}

fn describe(probes: &[AttachedProbe]) -> String {
    if probes.is_empty() {
        "none".into()
    } else {
        probes
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The one attached probe that `board`'s selector names.
pub fn choose_probe<'p>(
    board: &Board,
    attached: &'p [AttachedProbe],
) -> Result<&'p AttachedProbe, ProbeError> {
    let selector = board.probe.as_ref().ok_or_else(|| ProbeError::NoSelector {
        board: board.name.clone(),
    })?;
    let matching: Vec<&AttachedProbe> = attached
        .iter()
        .filter(|p| selector_matches(selector, p))
        .collect();
    match matching.as_slice() {
        [one] => Ok(one),
        [] => Err(ProbeError::NotAttached {
            board: board.name.clone(),
            selector: selector.to_string(),
            attached: describe(attached),
        }),
        many => Err(ProbeError::Ambiguous {
            board: board.name.clone(),
            selector: selector.to_string(),
            count: many.len(),
            candidates: describe(&many.iter().map(|p| (*p).clone()).collect::<Vec<_>>()),
        }),
    }
}

/// Every probe the lister sees (USB enumeration only: no probe is opened,
/// so this is fast and safe while other boards run).
pub fn list_probes(lister: &Lister) -> Vec<AttachedProbe> {
    lister.list_all().iter().map(AttachedProbe::from).collect()
}

/// Opens the probe `board`'s selector names.
pub fn open_probe(board: &Board, lister: &Lister) -> Result<Probe, ProbeError> {
    let attached = list_probes(lister);
    let chosen = choose_probe(board, &attached)?;
    lister
        .open(chosen.selector())
        .map_err(|e| ProbeError::Open {
            board: board.name.clone(),
            probe: chosen.to_string(),
            reason: chain(&e),
        })
}

/// Merged address ranges of the chip's regions of one kind, so a board
/// region may span two adjacent chip regions (DTCM + SRAM, two flash banks).
fn merged(target: &Target, pick: impl Fn(&TargetRegion) -> bool) -> Vec<Range<u64>> {
    let mut ranges: Vec<Range<u64>> = target
        .memory_map
        .iter()
        .filter(|r| pick(r))
        .map(TargetRegion::address_range)
        .collect();
    ranges.sort_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::new();
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// Looks the board's chip up in probe-rs's built-in targets and checks the
/// board's FLASH and RAM regions against the chip's memory map. The name
/// must be the exact probe-rs name: probe-rs also accepts a prefix, which
/// would let a typo pick a different package silently.
pub fn check_chip(board: &Board) -> Result<Target, ProbeError> {
    let chip = board.chip.as_deref().ok_or_else(|| ProbeError::NoChip {
        board: board.name.clone(),
    })?;
    let unknown = |reason: String| ProbeError::UnknownChip {
        board: board.name.clone(),
        chip: chip.to_string(),
        reason,
    };
    let target = Registry::from_builtin_families()
        .get_target_by_name(chip)
        .map_err(|e| unknown(chain(&e)))?;
    if !target.name.eq_ignore_ascii_case(chip) {
        return Err(unknown(format!(
            "it is only a prefix of {}; write that name",
            target.name
        )));
    }
    for region in &board.memory {
        let (kind, ranges) = match region.name.as_str() {
            "FLASH" => ("flash", merged(&target, |r| r.as_nvm_region().is_some())),
            "RAM" => ("RAM", merged(&target, TargetRegion::is_ram)),
            _ => continue,
        };
        let end = region.origin + region.length;
        if !ranges
            .iter()
            .any(|r| r.start <= region.origin && end <= r.end)
        {
            return Err(ProbeError::Memory {
                board: board.name.clone(),
                chip: target.name.clone(),
                region: format!("{} {:#010x}..{end:#010x}", region.name, region.origin),
                kind,
                known: ranges
                    .iter()
                    .map(|r| format!("{:#010x}..{:#010x}", r.start, r.end))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    Ok(target)
}

/// The core that runs the firmware: the one that sees the board's RAM
/// (nRF5340: the application core, not the network core).
pub fn firmware_core(board: &Board, target: &Target) -> usize {
    let ram = board.memory.iter().find(|m| m.name == "RAM");
    ram.and_then(|ram| {
        target
            .memory_map
            .iter()
            .find(|r| r.is_ram() && r.contains(ram.origin))
    })
    .and_then(|r| r.cores().first())
    .and_then(|name| target.cores.iter().position(|c| &c.name == name))
    .unwrap_or(0)
}

/// Attaches a session to `board`'s chip through `probe`.
pub fn attach(board: &Board, probe: Probe) -> Result<Session, ProbeError> {
    let target = check_chip(board)?;
    let chip = target.name.clone();
    probe
        .attach(TargetSelector::Specified(target), Permissions::default())
        .map_err(|e| ProbeError::Attach {
            board: board.name.clone(),
            chip,
            reason: chain(&e),
        })
}

/// Turns probe-rs's flashing events into progress lines ("erasing 50%"),
/// one per quarter of each phase, prefixed with the board: several boards
/// may flash at once and their lines interleave on stderr.
#[derive(Debug)]
pub struct FlashReport {
    board: String,
    /// Per phase: total bytes (if known), bytes done, last quarter printed.
    phases: Vec<(&'static str, Option<u64>, u64, u64)>,
    started: Instant,
}

fn phase_name(op: ProgressOperation) -> &'static str {
    match op {
        ProgressOperation::Fill => "reading back",
        ProgressOperation::Erase => "erasing",
        ProgressOperation::Program => "programming",
        ProgressOperation::Verify => "verifying",
    }
}

impl FlashReport {
    /// A report for `board`.
    pub fn new(board: &str) -> Self {
        FlashReport {
            board: board.to_string(),
            phases: Vec::new(),
            started: Instant::now(),
        }
    }

    fn phase(&mut self, op: ProgressOperation) -> &mut (&'static str, Option<u64>, u64, u64) {
        let name = phase_name(op);
        if let Some(i) = self.phases.iter().position(|p| p.0 == name) {
            &mut self.phases[i]
        } else {
            self.phases.push((name, None, 0, 0));
            let last = self.phases.len() - 1;
            &mut self.phases[last]
        }
    }

    /// The line to print for `event`, if any.
    pub fn line(&mut self, event: &ProgressEvent) -> Option<String> {
        let board = self.board.clone();
        let elapsed = self.started.elapsed().as_secs_f64();
        match event {
            ProgressEvent::AddProgressBar { operation, total } => {
                self.phase(*operation).1 = *total;
                None
            }
            ProgressEvent::Started(op) => {
                let (name, total, ..) = *self.phase(*op);
                Some(match total {
                    Some(t) => format!("[{board}] {name} {} KiB", t.div_ceil(1024)),
                    None => format!("[{board}] {name}"),
                })
            }
            ProgressEvent::Progress {
                operation, size, ..
            } => {
                let p = self.phase(*operation);
                p.2 += size;
                let total = p.1.filter(|&t| t > 0)?;
                let quarter = (p.2.min(total) * 4 / total).min(3);
                if quarter > p.3 {
                    p.3 = quarter;
                    Some(format!("[{board}] {} {}%", p.0, quarter * 25))
                } else {
                    None
                }
            }
            ProgressEvent::Finished(op) => {
                let name = self.phase(*op).0;
                Some(format!("[{board}] {name} done ({elapsed:.1} s)"))
            }
            ProgressEvent::Failed(op) => {
                let name = self.phase(*op).0;
                Some(format!("[{board}] {name} FAILED ({elapsed:.1} s)"))
            }
            ProgressEvent::DiagnosticMessage { message } => {
                Some(format!("[{board}] flash algorithm: {}", message.trim()))
            }
            ProgressEvent::FlashLayoutReady { .. } => None,
        }
    }
}

/// Flashes the ELF at `path`, with progress lines on stderr. Only changed
/// sectors are written (probe-rs reads back first) and the result is
/// verified, so a bad flash is a clear error rather than odd outputs.
pub fn flash(
    board: &Board,
    session: &mut Session,
    path: &std::path::Path,
) -> Result<(), ProbeError> {
    let mut report = FlashReport::new(&board.name);
    let mut options = DownloadOptions::new();
    options.progress = FlashProgress::new(|event| {
        if let Some(line) = report.line(&event) {
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
    });
    options.preverify = true;
    options.verify = true;
    let format = probe_rs::flashing::ElfLoader(probe_rs::flashing::ElfOptions::default());
    probe_rs::flashing::download_file_with_options(session, path, format, options).map_err(|e| {
        ProbeError::Flash {
            board: board.name.clone(),
            path: path.display().to_string(),
            reason: chain(&e),
        }
    })
}

/// Resets into the new firmware. The RTT id left in RAM by the previous run
/// is wiped while the core is halted at reset, so the host cannot attach to
/// the stale control block before the new firmware writes its own.
pub fn start(board: &Board, core: &mut Core<'_>, rtt_address: u32) -> Result<(), ProbeError> {
    let failed = |action: &'static str, e: probe_rs::Error| ProbeError::Core {
        board: board.name.clone(),
        action,
        reason: chain(&e),
    };
    core.reset_and_halt(HALT)
        .map_err(|e| failed("reset and halt", e))?;
    core.write_32(u64::from(rtt_address), &[0; 4])
        .map_err(|e| failed("clear the old RTT block of", e))?;
    core.run().map_err(|e| failed("start", e))
}

/// A probe-rs core as [`TargetMemory`]. A Cortex-M core's memory is read
/// and written through the debug port while it runs, so `pause` and
/// `resume` stay no-ops and the firmware's timing is not disturbed.
/// Every access first checks the run's [`KillSwitch`]: a run that timed out
/// ends at its next access (there is no process to kill, as with QEMU).
pub struct ProbeMemory<'s> {
    core: Core<'s>,
    cancel: KillSwitch,
}

impl std::fmt::Debug for ProbeMemory<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeMemory")
            .field("core", &self.core.id())
            .finish_non_exhaustive()
    }
}

impl<'s> ProbeMemory<'s> {
    /// Memory through `core`, cancelled when `cancel` fires.
    pub fn new(core: Core<'s>, cancel: KillSwitch) -> Self {
        ProbeMemory { core, cancel }
    }

    fn check(&self) -> Result<(), MemoryError> {
        if self.cancel.fired() {
            Err(MemoryError::Disconnected("the run was cancelled".into()))
        } else {
            Ok(())
        }
    }
}

/// Probe-level failures (USB gone, probe timeout) mean the link is lost;
/// anything else is the target refusing this access.
fn memory_error(addr: u32, len: usize, e: probe_rs::Error) -> MemoryError {
    match e {
        probe_rs::Error::Probe(p) => MemoryError::Disconnected(chain(&p)),
        probe_rs::Error::Timeout => MemoryError::Timeout(Duration::ZERO),
        other => MemoryError::Refused {
            addr,
            len,
            reason: chain(&other),
        },
    }
}

impl TargetMemory for ProbeMemory<'_> {
    fn read(&mut self, addr: u32, buf: &mut [u8]) -> Result<(), MemoryError> {
        self.check()?;
        self.core
            .read(u64::from(addr), buf)
            .map_err(|e| memory_error(addr, buf.len(), e))
    }

    fn write(&mut self, addr: u32, data: &[u8]) -> Result<(), MemoryError> {
        self.check()?;
        self.core
            .write(u64::from(addr), data)
            .map_err(|e| memory_error(addr, data.len(), e))
    }

    fn read_u32(&mut self, addr: u32) -> Result<u32, MemoryError> {
        self.check()?;
        self.core
            .read_word_32(u64::from(addr))
            .map_err(|e| memory_error(addr, 4, e))
    }

    // One 32-bit bus write: RTT offsets must change in one access, never
    // byte by byte under the firmware's feet.
    fn write_u32(&mut self, addr: u32, value: u32) -> Result<(), MemoryError> {
        self.check()?;
        self.core
            .write_word_32(u64::from(addr), value)
            .map_err(|e| memory_error(addr, 4, e))
    }
}

/// The core's registers through the probe: r0..r15 and xPSR (probe-rs's
/// Cortex-M numbering follows the debug register selector's: xPSR is 16).
impl crate::backtrace::Core for ProbeMemory<'_> {
    fn registers(&mut self) -> Result<[u32; 17], MemoryError> {
        self.core
            .halt(Duration::from_millis(500))
            .map_err(|e| memory_error(0, 0, e))?;
        let mut words = [0u32; 17];
        for (n, word) in (0u16..).zip(words.iter_mut()) {
            *word = self
                .core
                .read_core_reg::<u32>(probe_rs::RegisterId(n))
                .map_err(|e| memory_error(0, 0, e))?;
        }
        Ok(words)
    }
}

/// Runs `scenario` on a probe-rs board with the firmware `image`: open the
/// probe, attach, flash, reset, RTT, session. `on_flashed` is called once
/// the firmware is on the board, so the caller can start the scenario's
/// time limit there (flashing a large model takes longer than any run).
pub fn run_on_probe(
    board: &Board,
    scenario: &Scenario,
    image: &FirmwareImage,
    model_crc: u32,
    kill: &KillSwitch,
    on_flashed: impl FnOnce(),
) -> BoardRun {
    run_on_probe_with(
        &Lister::new(),
        board,
        scenario,
        image,
        model_crc,
        kill,
        on_flashed,
    )
}

/// [`run_on_probe`] with the probes `lister` sees (tests give a fake one).
pub fn run_on_probe_with(
    lister: &Lister,
    board: &Board,
    scenario: &Scenario,
    image: &FirmwareImage,
    model_crc: u32,
    kill: &KillSwitch,
    on_flashed: impl FnOnce(),
) -> BoardRun {
    let mut run = BoardRun::new(&scenario.name, &board.name);
    let start_error = |e: ProbeError| RunFailure::Start(e.to_string());
    let result = (|| -> Result<(), RunFailure> {
        check_image_board(image, board)?;
        let rtt_address = image.rtt_control_block()?;
        let probe = open_probe(board, lister).map_err(start_error)?;
        let mut session = attach(board, probe).map_err(start_error)?;
        flash(board, &mut session, &image.path).map_err(start_error)?;
        on_flashed();
        if kill.fired() {
            return Err(RunFailure::Start(format!(
                "{}: cancelled while flashing",
                board.name
            )));
        }
        let index = firmware_core(board, session.target());
        let mut core = session.core(index).map_err(|e| {
            RunFailure::Start(format!("{}: core {index}: {}", board.name, chain(&e)))
        })?;
        start(board, &mut core, rtt_address).map_err(start_error)?;
        let mut memory = ProbeMemory::new(core, kill.clone());
        let rtt = Rtt::attach(&mut memory, rtt_address, RTT_ATTACH)
            .map_err(|e| RunFailure::Link(LinkError::Rtt(e)))?;
        let defmt = DefmtSource::of(image);
        let mut link = Link::new(&mut memory, rtt);
        link.read_defmt(defmt.reader());
        let session_result = run_session(&mut link, board, scenario, model_crc, &mut run);
        run.defmt = link.take_defmt();
        run.logs.append(&mut link.logs);
        drop(link);
        if session_result.as_ref().is_err_and(super::wants_backtrace) {
            super::read_backtrace(&mut memory, image, scenario, &mut run);
        }
        session_result
    })();
    conclude(run, result, kill, scenario)
}
