//! Faults you can read: when a run ends in a HardFault, a panic or a
//! timeout, the host stops the core, reads its registers and unwinds its
//! stack with the call-frame information of the firmware's ELF
//! (`.debug_frame`; hilt's firmware keeps line tables in its release
//! builds), naming each frame's function and source line, and the op the
//! interpreter was running (the runtime's `HILT_OP_IN_PROGRESS` word).
//!
//! A core is reached through [`Core`]: QEMU's gdbstub on a virtual board,
//! probe-rs on a real one. Unwinding and naming are the same for both.

pub mod fault_status;
mod symbols;
mod unwind;

use std::fmt;
use std::path::Path;

use serde::Serialize;

use crate::memory::{MemoryError, TargetMemory};

/// The runtime's word holding the op in progress (its index + 1; 0
/// between ops).
pub const OP_IN_PROGRESS_SYMBOL: &str = "HILT_OP_IN_PROGRESS";

/// A core the host can stop and read.
pub trait Core: TargetMemory {
    /// r0..r15 then xPSR, the core stopped.
    fn registers(&mut self) -> Result<[u32; 17], MemoryError>;
}

/// Why no backtrace could be made.
#[derive(Debug, thiserror::Error)]
pub enum BacktraceError {
    /// The ELF cannot be read.
    #[error("{path}: {message}")]
    Elf {
        /// File.
        path: String,
        /// What failed.
        message: String,
    },
    /// The core's registers cannot be read.
    #[error("the core's registers cannot be read: {0}")]
    Registers(MemoryError),
}

/// One frame of a backtrace, innermost first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Frame {
    /// The instruction running in this frame (a return address in every
    /// frame but the innermost and the one an exception interrupted).
    pub pc: u32,
    /// Demangled (`?` when the ELF does not say).
    pub function: String,
    /// `file:line`, when the line tables say.
    pub place: Option<String>,
    /// This function was inlined into the next frame's (same pc).
    pub inlined: bool,
    /// An exception (`HardFault`, `SysTick`, ...) interrupted the frame
    /// here: the frames before it are the handler's.
    pub interrupted_by: Option<String>,
}

/// Where a stopped core was, and how it got there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Backtrace {
    /// r0..r15 and xPSR as read.
    pub registers: Vec<u32>,
    /// The op the interpreter was running (`op 3 (CONV_2D)`), if any.
    pub op: Option<String>,
    /// Innermost first.
    pub frames: Vec<Frame>,
    /// Why unwinding stopped early (none when it reached a frame that
    /// returns nowhere, such as the reset handler).
    pub stopped: Option<String>,
}

/// Reads `core` (stopped for it) and unwinds its stack with the ELF at
/// `elf`; `op_name` names op `n` of the model. Paths under `repo` are
/// shown relative to it.
pub fn capture(
    core: &mut dyn Core,
    elf: &Path,
    repo: Option<&Path>,
    op_name: &dyn Fn(usize) -> String,
) -> Result<Backtrace, BacktraceError> {
    let elf_error = |message: String| BacktraceError::Elf {
        path: elf.display().to_string(),
        message,
    };
    let data = std::fs::read(elf).map_err(|e| elf_error(e.to_string()))?;
    let file = object::File::parse(&*data).map_err(|e| elf_error(e.to_string()))?;
    let registers = core.registers().map_err(BacktraceError::Registers)?;
    let symbols = symbols::Symbols::new(&file, repo);
    let op = symbols
        .data_symbol(OP_IN_PROGRESS_SYMBOL)
        .and_then(|at| core.read_u32(at).ok())
        .and_then(|word| word.checked_sub(1))
        .map(|n| format!("op {n} ({})", op_name(n as usize)));
    let debug_frame = {
        use object::{Object, ObjectSection};
        file.section_by_name(".debug_frame")
            .and_then(|s| s.data().ok())
            .unwrap_or(&[])
    };
    let entry = u32::try_from(object::Object::entry(&file)).ok();
    let outermost = entry.and_then(|e| symbols.function_range(e));
    let unwound = unwind::Cfi::new(debug_frame).unwind(&registers, core, outermost);
    let mut frames = Vec::new();
    for raw in &unwound.frames {
        let lookup = if raw.returned_to {
            raw.pc.wrapping_sub(1)
        } else {
            raw.pc
        };
        let names = symbols.names(lookup);
        for (i, name) in names.into_iter().enumerate() {
            frames.push(Frame {
                pc: raw.pc,
                function: name.function,
                place: name.place,
                inlined: name.inlined,
                // Said once, before the frame's first name.
                interrupted_by: if i == 0 {
                    raw.interrupted_by.clone()
                } else {
                    None
                },
            });
        }
    }
    Ok(Backtrace {
        registers: registers.to_vec(),
        op,
        frames,
        stopped: unwound.stopped,
    })
}

impl fmt::Display for Backtrace {
    /// The registers, then one line per frame (`#n pc in function at
    /// file:line`), inlined functions marked, then why unwinding stopped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "backtrace")?;
        if let Some(op) = &self.op {
            write!(f, " (in {op})")?;
        }
        writeln!(f, ":")?;
        let names = [
            "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "sp",
            "lr", "pc", "xpsr",
        ];
        for (row, chunk) in names.chunks(6).enumerate() {
            write!(f, "   ")?;
            for (i, name) in chunk.iter().enumerate() {
                let value = self.registers.get(row * 6 + i).copied().unwrap_or(0);
                write!(f, " {name:>4} {value:#010x}")?;
            }
            writeln!(f)?;
        }
        let mut number = 0;
        for frame in &self.frames {
            if let Some(exception) = &frame.interrupted_by {
                writeln!(f, "    <{exception} entered here>")?;
            }
            write!(
                f,
                "    #{number:<2} {:#010x} in {}",
                frame.pc, frame.function
            )?;
            if let Some(place) = &frame.place {
                write!(f, " at {place}")?;
            }
            if frame.inlined {
                write!(f, " (inlined)")?;
            } else {
                number += 1;
            }
            writeln!(f)?;
        }
        if let Some(why) = &self.stopped {
            writeln!(f, "    (unwinding stopped: {why})")?;
        }
        Ok(())
    }
}
