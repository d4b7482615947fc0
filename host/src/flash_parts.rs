//! What takes a firmware's flash, read from its ELF's symbols: the kernels,
//! the rest of the runtime (interpreter, planners, the model's verifier),
//! the agent and its wire, the model's bytes, and everything else
//! (`core` and what it instantiates for hilt's types, such as the
//! planners' sorts, compiler intrinsics, the vector table, `.data`'s
//! image, padding). `hilt bench-target` prints it beside the flash of a firmware
//! with every kernel and of one with only the model's.
//!
//! Symbols are attributed by the crate and module their (mangled) names
//! carry. With fat LTO, code inlined into a caller counts where the
//! caller is: a kernel's helper from `core` inside `conv_i8` is a kernel's.

use std::path::Path;

use object::{Object, ObjectSection, ObjectSymbol, SectionFlags, SectionKind};
use serde::Serialize;

use crate::report::thousands;

/// A firmware ELF that cannot be read for its flash.
#[derive(Debug, thiserror::Error)]
#[error("{elf}: {problem}")]
pub struct FlashError {
    /// The ELF.
    pub elf: String,
    /// Why.
    pub problem: String,
}

/// Bytes a firmware ELF puts in flash: every allocated section that holds
/// data in the file (code, read-only data with the model's weights, the
/// vector table and `.data`'s initial image); zero-initialised and
/// uninitialised sections (`.bss`, the arena, the stack) take none.
pub fn flash_bytes(elf: &Path) -> Result<u64, FlashError> {
    let fail = |problem: String| FlashError {
        elf: elf.display().to_string(),
        problem,
    };
    let data = std::fs::read(elf).map_err(|e| fail(e.to_string()))?;
    let file = object::File::parse(&*data).map_err(|e| fail(format!("not an ELF file: {e}")))?;
    // The model slot is a size class: only the model's bytes (and the
    // slot's header) are the model's flash, the rest of the slot is free.
    let (slot_start, slot_len) = crate::firmware::slot_range(&file).map_err(fail)?;
    let model = hilt_proto::model_slot::read(&data[slot_start..slot_start + slot_len])
        .map_err(|e| fail(e.to_string()))?;
    let free = slot_len - hilt_proto::model_slot::HEADER - model.bytes.len();
    let allocated: u64 = file.sections().filter(takes_flash).map(|s| s.size()).sum();
    Ok(allocated - free as u64)
}

/// A firmware's flash bytes by what holds them; the parts add up to
/// [`FlashParts::total`], which is [`flash_bytes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct FlashParts {
    /// `hilt_runtime::kernels`: the kernels the resolver links.
    pub kernels: u64,
    /// The rest of `hilt_runtime`: interpreter, allocation, planners, the
    /// model's schema and its verifier (with `flatbuffers`' own code).
    pub runtime: u64,
    /// `hilt_agent`, `hilt_proto` and the board binary: the session, the
    /// wire, the offload engine, start-up.
    pub agent: u64,
    /// The model's bytes and its slot header (the slot's free tail is not
    /// flash the firmware needs).
    pub model: u64,
    /// Everything else: `core`, compiler intrinsics, symbols without a
    /// size, `.data`'s initial image, alignment padding.
    pub other: u64,
}

impl FlashParts {
    /// Every part.
    pub fn total(&self) -> u64 {
        self.kernels + self.runtime + self.agent + self.model + self.other
    }
}

/// A firmware with only the model's kernels: its flash beside the
/// every-kernel firmware's in `hilt bench-target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OwnKernels {
    /// The model's builtin operators the firmware has kernels for.
    pub operators: usize,
    /// Its flash bytes, by part.
    pub flash: FlashParts,
    /// The same firmware built for size, when it was.
    pub for_size: Option<ForSize>,
}

/// A model's-kernels firmware built for size (`optimize = "size"`), run on
/// the reference part's timing profile as the speed build was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ForSize {
    /// Its flash bytes.
    pub flash: u64,
    /// Instructions per inference (the plugin's exact count, median).
    pub instructions: u64,
    /// Estimated cycles per inference on the part (median).
    pub estimated_cycles: u64,
}

/// Which part a symbol's (mangled or demangled) name puts it in.
fn part_of(name: &str) -> Option<fn(&mut FlashParts) -> &mut u64> {
    // Legacy mangling spells a path `12hilt_runtime7kernels…`, a type in a
    // trait impl `hilt_runtime..kernels..…`; demangled, `hilt_runtime::kernels`.
    let kernels = [
        "hilt_runtime7kernels",
        "hilt_runtime..kernels",
        "hilt_runtime::kernels",
    ];
    if kernels.iter().any(|k| name.contains(k)) {
        Some(|p| &mut p.kernels)
    } else if name.contains("hilt_runtime") || name.contains("flatbuffers") {
        Some(|p| &mut p.runtime)
    } else if ["hilt_agent", "hilt_proto", "hilt_firmware", "hilt_vnpu"]
        .iter()
        .any(|c| name.contains(c))
    {
        Some(|p| &mut p.agent)
    } else {
        None
    }
}

/// Whether a section takes flash: allocated, with bytes in the file, not
/// zero-initialised (`.data` does: its initial image).
fn takes_flash(section: &object::Section<'_, '_>) -> bool {
    let allocated = match section.flags() {
        SectionFlags::Elf { sh_flags } => sh_flags & u64::from(object::elf::SHF_ALLOC) != 0,
        _ => false,
    };
    allocated
        && !matches!(
            section.kind(),
            SectionKind::UninitializedData | SectionKind::UninitializedTls | SectionKind::Metadata
        )
        && section.file_range().is_some()
}

/// Whether a section's symbols lie in flash: [`takes_flash`] but `.data`,
/// whose symbols are RAM addresses (its image counts as "other").
fn symbols_in_flash(section: &object::Section<'_, '_>) -> bool {
    takes_flash(section) && section.kind() != SectionKind::Data
}

/// `elf`'s flash by part.
pub fn flash_parts(elf: &Path) -> Result<FlashParts, FlashError> {
    let fail = |problem: String| FlashError {
        elf: elf.display().to_string(),
        problem,
    };
    let total = flash_bytes(elf)?;
    let data = std::fs::read(elf).map_err(|e| fail(e.to_string()))?;
    let file = object::File::parse(&*data).map_err(|e| fail(format!("not an ELF file: {e}")))?;
    let (slot_start, slot_len) = crate::firmware::slot_range(&file).map_err(fail)?;
    let model = hilt_proto::model_slot::read(&data[slot_start..slot_start + slot_len])
        .map_err(|e| fail(e.to_string()))?;
    let mut parts = FlashParts {
        model: (hilt_proto::model_slot::HEADER + model.bytes.len()) as u64,
        ..FlashParts::default()
    };
    for symbol in file.symbols() {
        let Some(section) = symbol
            .section_index()
            .and_then(|i| file.section_by_index(i).ok())
        else {
            continue;
        };
        if !symbols_in_flash(&section) || symbol.name() == Ok(hilt_proto::model_slot::SYMBOL) {
            continue;
        }
        if let Some(part) = symbol.name().ok().and_then(part_of) {
            *part(&mut parts) += symbol.size();
        }
    }
    let attributed = parts.kernels + parts.runtime + parts.agent + parts.model;
    parts.other = total.checked_sub(attributed).ok_or_else(|| {
        fail(format!(
            "its symbols hold {attributed} bytes, more than its {total} bytes of flash"
        ))
    })?;
    Ok(parts)
}

/// One row of the flash table: the model, the board, the every-kernel
/// firmware's flash and the model's-kernels firmware.
pub type FlashRow<'r> = (&'r str, &'r str, u64, &'r OwnKernels);

/// A row's figures after its model and board, as the tables print them.
fn cells((_, _, every, own): &FlashRow<'_>) -> [String; 8] {
    let f = own.flash;
    [
        thousands(*every),
        thousands(f.total()),
        own.operators.to_string(),
        thousands(f.kernels),
        thousands(f.runtime),
        thousands(f.agent),
        thousands(f.model),
        thousands(f.other),
    ]
}

/// The flash table in Markdown (the book's).
pub fn render_markdown(rows: &[FlashRow<'_>]) -> String {
    let mut s = String::from(
        "| model | board | flash, every kernel | flash, the model's kernels | operators | kernels | runtime | agent and wire | model bytes | other |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        s.push_str(&format!(
            "| {} | {} | {} |\n",
            row.0,
            row.1,
            cells(row).join(" | ")
        ));
    }
    s
}

/// The same for a terminal.
pub fn render_table(rows: &[FlashRow<'_>]) -> String {
    let line = |model: &str, board: &str, c: &[String]| {
        format!(
            "{model:<34} {board:<17} {:>11} {:>11} {:>4} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
            c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]
        )
    };
    let head = [
        "flash all",
        "flash own",
        "ops",
        "kernels",
        "runtime",
        "agent",
        "model",
        "other",
    ];
    let mut s = line("model", "board", &head.map(String::from));
    for row in rows {
        s.push_str(&line(row.0, row.1, &cells(row)));
    }
    s
}

/// One row of the speed-or-size table: the model, the board, the speed
/// build's flash, instructions and estimated cycles, and the size build's.
pub type SizeRow<'r> = (&'r str, &'r str, [u64; 3], &'r ForSize);

/// A size row's figures after its model and board.
fn size_cells((_, _, speed, size): &SizeRow<'_>) -> [String; 7] {
    let ratio = size.instructions as f64 / speed[1].max(1) as f64;
    [
        thousands(speed[0]),
        thousands(size.flash),
        thousands(speed[1]),
        thousands(size.instructions),
        format!("{ratio:.2}"),
        thousands(speed[2]),
        thousands(size.estimated_cycles),
    ]
}

/// The speed-or-size table in Markdown (the book's).
pub fn render_size_markdown(rows: &[SizeRow<'_>]) -> String {
    let mut s = String::from(
        "| model | board | flash, for speed | flash, for size | instructions, for speed | instructions, for size | size ÷ speed | estimated cycles, for speed | estimated cycles, for size |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        s.push_str(&format!(
            "| {} | {} | {} |\n",
            row.0,
            row.1,
            size_cells(row).join(" | ")
        ));
    }
    s
}

/// The same for a terminal.
pub fn render_size_table(rows: &[SizeRow<'_>]) -> String {
    let line = |model: &str, board: &str, c: &[String]| {
        format!(
            "{model:<34} {board:<17} {:>11} {:>11} {:>12} {:>12} {:>6} {:>12} {:>12}\n",
            c[0], c[1], c[2], c[3], c[4], c[5], c[6]
        )
    };
    let head = [
        "flash speed",
        "flash size",
        "instr speed",
        "instr size",
        "ratio",
        "cycles speed",
        "cycles size",
    ];
    let mut s = line("model", "board", &head.map(String::from));
    for row in rows {
        s.push_str(&line(row.0, row.1, &size_cells(row)));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_go_to_their_crate_and_module() {
        let mut p = FlashParts::default();
        for (name, size) in [
            (
                "_ZN12hilt_runtime7kernels4conv7conv_i817h5c898bbb183a3aa9E",
                100,
            ),
            (
                "_ZN93_$LT$hilt_runtime..kernels..OpResolver$LT$_$GT$$u20$as$u20$x..Y$GT$4find17hE",
                10,
            ),
            ("_ZN12hilt_runtime11interpreter6invoke17h0E", 20),
            ("_ZN10hilt_agent7session4poll17h0E", 30),
            ("_ZN10hilt_proto5frame6decode17h0E", 4),
            (
                "_ZN11flatbuffers8verifier13TableVerifier11visit_field17h0E",
                5,
            ),
            ("_ZN4core3fmt9Formatter3pad17h0E", 7),
        ] {
            if let Some(part) = part_of(name) {
                *part(&mut p) += size;
            }
        }
        assert_eq!((p.kernels, p.runtime, p.agent), (110, 25, 34));
        assert_eq!(p.other, 0, "the rest is what the flash total leaves");
    }
}
