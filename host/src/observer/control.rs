//! The two files the plugin reads (its `control.rs` parses them): the
//! control file, from the firmware ELF and the board, before QEMU starts;
//! the plan file, from the plan the board committed, before the first
//! invoke.

use std::fmt::Write as _;
use std::path::Path;

use object::{Object, ObjectSection, ObjectSymbol};

use crate::config::board::{Board, Timing};
use crate::elf::FirmwareImage;
use crate::model_file::ModelFile;
use crate::outcome::{PlannedBuffer, head_start};

use super::error::ObserverError;

/// The marks the runtime defines (`hilt_runtime::marks`).
pub const MARKS: [&str; 8] = [
    "hilt_mark_invoke_start",
    "hilt_mark_op_start",
    "hilt_mark_op_done",
    "hilt_mark_invoke_end",
    "hilt_mark_job_submitted",
    "hilt_mark_job_start",
    "hilt_mark_job_end",
    "hilt_mark_job_retired",
];

/// Peripheral and system windows of every Cortex-M (the Armv7-M and
/// Armv8-M memory maps: Peripheral 0x40000000–0x5FFFFFFF, System from
/// 0xE0000000); a firmware's drivers touch nothing else outside its ELF.
const DEVICE_WINDOWS: [(&str, u64, u64); 2] = [
    ("peripherals", 0x4000_0000, 0x2000_0000),
    ("system", 0xE000_0000, 0x2000_0000),
];

/// The stack's range, `[bottom, top)`.
pub type StackSpan = (u32, u32);

/// The control file's text and what the host keeps of it.
#[derive(Debug, Clone)]
pub struct ControlFile {
    /// What the plugin reads.
    pub text: String,
    /// The stack's range it names, if the ELF says where the stack is.
    pub stack: Option<StackSpan>,
    /// Whether the firmware marks its invokes (else the plugin has no
    /// invoke to count or check).
    pub marked: bool,
}

/// What the plugin is told before the run: marks, memory, timing.
pub fn control_text(
    image: &FirmwareImage,
    board: &Board,
    timing: &Timing,
    out: &Path,
    plan: &Path,
    checks: bool,
    hotspots: Option<&Path>,
) -> Result<ControlFile, ObserverError> {
    let data = std::fs::read(&image.path).map_err(|e| ObserverError::io(&image.path, e))?;
    let elf = |problem: String| ObserverError::Firmware {
        path: image.path.clone(),
        problem,
    };
    let file = object::File::parse(&*data).map_err(|e| elf(e.to_string()))?;
    let mut text = String::from("# hilt QEMU plugin control (written by hilt for one run)\n");
    let _ = writeln!(text, "out {}", out.display());
    let _ = writeln!(text, "plan {}", plan.display());
    let _ = writeln!(text, "core {}", timing.core);
    let _ = writeln!(text, "checks {}", if checks { "on" } else { "off" });
    if let Some(path) = hotspots {
        let _ = writeln!(text, "hotspots {}", path.display());
    }
    // A mark the linker dropped is code that never runs: a firmware that
    // never invokes (a calibration loop, one that hangs on purpose) has
    // none, and one without offload has no job marks.
    let mut marked = false;
    for name in MARKS {
        if let Some(symbol) = file.symbols().find(|s| s.name() == Ok(name)) {
            let _ = writeln!(text, "mark {name} {:#x}", symbol.address() & !1);
            marked |= name == MARKS[0];
        }
    }
    let mut ram_top = 0;
    for section in file.sections() {
        let object::SectionFlags::Elf { sh_flags } = section.flags() else {
            continue;
        };
        if sh_flags & u64::from(object::elf::SHF_ALLOC) == 0 || section.size() == 0 {
            continue;
        }
        let name = section.name().unwrap_or("?");
        let _ = writeln!(
            text,
            "region {name} {:#x} {:#x}",
            section.address(),
            section.size()
        );
        if sh_flags & u64::from(object::elf::SHF_WRITE) != 0 {
            ram_top = ram_top.max(section.address() + section.size());
        }
    }
    for (name, start, len) in DEVICE_WINDOWS {
        let _ = writeln!(text, "region {name} {start:#x} {len:#x}");
    }
    // The stack runs from the end of the firmware's data up to its top; a
    // board that declares its stack (`stack_size`) is held to that, so a
    // run that goes deeper than the board says fails as an overflow even
    // while RAM is left below it.
    let stack = file
        .symbols()
        .find(|s| s.name() == Ok("_stack_start"))
        .map(|s| s.address())
        .filter(|&top| top > ram_top)
        .map(|top| {
            let bottom = board
                .stack_size
                .map_or(ram_top, |size| top.saturating_sub(size).max(ram_top));
            (bottom as u32, top as u32)
        });
    if let Some((bottom, top)) = stack {
        let _ = writeln!(text, "stack {bottom:#x} {:#x}", top - bottom);
    }
    if let Some(flash) = board.memory.iter().find(|m| m.name == "FLASH") {
        let _ = writeln!(
            text,
            "flash {:#x} {:#x} {} {}",
            flash.origin,
            flash.length,
            timing.flash_wait_states,
            if timing.flash_cache {
                "cache"
            } else {
                "nocache"
            }
        );
    }
    Ok(ControlFile {
        text,
        stack,
        marked,
    })
}

/// Where the planned head ends, bytes from the arena's start: after its
/// last buffer, that buffer's alignment padding and the guard that follows
/// it (with canaries): bytes no op owns, which a kernel writing past its
/// output reaches first.
pub fn head_end(plan: &[PlannedBuffer], guard: u32) -> u32 {
    let head = head_start(plan, guard);
    plan.iter()
        .map(|b| head + b.offset + b.size.next_multiple_of(b.align.max(1)))
        .max()
        .unwrap_or(head)
        + guard
}

/// The plan file: the arena, each buffer, and each op's buffers (its
/// input, output and intermediate tensors' and its scratch) and which of
/// them it writes.
pub fn plan_text(
    image: &FirmwareImage,
    plan: &[PlannedBuffer],
    guard: u32,
    (model, schedule): (&ModelFile, hilt_runtime::schedule::Schedule),
) -> String {
    let (start, end) = image.arena;
    let head = head_start(plan, guard);
    let head_end = head_end(plan, guard);
    let mut text = format!(
        "arena {start:#x} {:#x} head {head_end:#x}\n",
        end.saturating_sub(start)
    );
    for b in plan {
        let _ = writeln!(
            text,
            "buffer {:#x} {:#x} {} {}",
            head + b.offset,
            b.size,
            b.first_step,
            b.last_step
        );
    }
    let model = model.model();
    for op in model.operators() {
        let index = op.index;
        let tensor_buffers = |tensors: &mut dyn Iterator<Item = u32>| -> Vec<usize> {
            let tensors: Vec<u32> = tensors
                .map(|t| hilt_runtime::schedule::buffer_of(&model, schedule, t))
                .collect();
            plan.iter()
                .enumerate()
                .filter(|(_, b)| b.kind == "tensor" && tensors.contains(&u32::from(b.index)))
                .map(|(n, _)| n)
                .collect()
        };
        let scratch: Vec<usize> = plan
            .iter()
            .enumerate()
            .filter(|(_, b)| b.kind == "scratch" && u32::from(b.index) == index)
            .map(|(n, _)| n)
            .collect();
        let raw = op.raw();
        let intermediates = raw
            .intermediates()
            .map(|v| {
                v.iter()
                    .filter_map(|t| u32::try_from(t).ok())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let mut writes =
            tensor_buffers(&mut op.outputs().flatten().chain(intermediates.iter().copied()));
        writes.extend(&scratch);
        // A fused chain's last op reads the chain's input too.
        let chain_input = hilt_runtime::schedule::chain_of(&model, schedule, index)
            .filter(|c| c.runner == index)
            .map(|c| c.input);
        let mut uses = tensor_buffers(&mut op.inputs().flatten().chain(chain_input));
        uses.extend(&writes);
        uses.sort_unstable();
        uses.dedup();
        writes.sort_unstable();
        writes.dedup();
        let list = |v: &[usize]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
            }
        };
        let _ = writeln!(text, "op {} {}", list(&uses), list(&writes));
    }
    text
}
