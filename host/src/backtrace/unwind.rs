//! Unwinding a stopped Cortex-M core's stack with the call-frame
//! information of its ELF (`.debug_frame`): from the registers, each
//! frame's canonical frame address (CFA) and saved registers give its
//! caller's, until a frame has no information or returns nowhere.
//!
//! An exception (a HardFault, SysTick, PendSV) shows in a handler's frame
//! as a return address of the form `0xFFFF_FFxx` (EXC_RETURN): the core
//! stacked r0–r3, r12, lr, pc and xPSR at the handler's CFA, so the frame
//! below is read from there, its pc the instruction that was interrupted
//! (or that faulted) rather than a return address.

use gimli::{
    BaseAddresses, CfaRule, DebugFrame, EndianSlice, RegisterRule, RunTimeEndian, UnwindContext,
    UnwindSection,
};

use crate::memory::{MemoryError, TargetMemory};

/// Most frames followed (a corrupted stack can loop).
const MAX_FRAMES: usize = 48;

/// ARM's DWARF numbers: r0..r15 are 0..15.
const SP: usize = 13;
const LR: usize = 14;
const PC: usize = 15;

/// One frame as unwinding found it, before naming.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RawFrame {
    /// The instruction's address (Thumb bit clear).
    pub pc: u32,
    /// Whether `pc` is a return address (the call is just before it)
    /// rather than the instruction that was running or faulted.
    pub returned_to: bool,
    /// The stack pointer in this frame.
    pub sp: u32,
    /// An exception interrupted this frame here: the handler's frame is
    /// the one before; its name (`HardFault`, ...) from the vector number
    /// the core stacked in xPSR.
    pub interrupted_by: Option<String>,
}

/// What unwinding found: the frames, innermost first, and why it stopped
/// when it did not reach a frame that returns nowhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Unwound {
    pub frames: Vec<RawFrame>,
    pub stopped: Option<String>,
}

/// The ELF's `.debug_frame`, for unwinding.
pub(super) struct Cfi<'a> {
    section: DebugFrame<EndianSlice<'a, RunTimeEndian>>,
}

impl<'a> Cfi<'a> {
    /// Over the bytes of a little-endian 32-bit `.debug_frame`.
    pub(super) fn new(debug_frame: &'a [u8]) -> Self {
        let mut section = DebugFrame::new(debug_frame, RunTimeEndian::Little);
        section.set_address_size(4);
        Cfi { section }
    }

    /// Unwinds from `registers` (r0..r15, xPSR), reading the stack through
    /// `memory`, up to the frame whose pc is in `outermost` (the reset
    /// handler, the ELF's entry: nothing called it).
    pub(super) fn unwind(
        &self,
        registers: &[u32; 17],
        memory: &mut dyn TargetMemory,
        outermost: Option<std::ops::Range<u32>>,
    ) -> Unwound {
        let mut regs = [0u32; 16];
        regs.copy_from_slice(&registers[..16]);
        // The exception being handled where the core stopped (IPSR).
        let mut handling = registers[16] & 0x1FF;
        let mut frames = Vec::new();
        let mut returned_to = false;
        let mut context = UnwindContext::new();
        let mut pending_exception: Option<String> = None;
        let stopped = loop {
            let pc = regs[PC] & !1;
            frames.push(RawFrame {
                pc,
                returned_to,
                sp: regs[SP],
                interrupted_by: pending_exception.take(),
            });
            if outermost.as_ref().is_some_and(|r| r.contains(&pc)) {
                break None;
            }
            if frames.len() >= MAX_FRAMES {
                break Some(format!("stopped after {MAX_FRAMES} frames"));
            }
            let lookup = if returned_to { pc.wrapping_sub(1) } else { pc };
            let caller = match self.caller(&mut context, lookup, &regs, memory) {
                Ok(caller) => caller,
                Err(why) => break Some(why),
            };
            let Some(mut caller) = caller else {
                break None;
            };
            if let Some(exc_return) = exception_return(caller[PC]) {
                // The handler's CFA is where the core stacked the frame.
                match exception_frame(exc_return, caller[SP], memory) {
                    Ok((interrupted, vector)) => {
                        pending_exception = Some(exception_name(handling));
                        // The interrupted code's own exception, if any.
                        handling = vector;
                        for n in [0, 1, 2, 3, 12, LR, PC, SP] {
                            caller[n] = interrupted[n];
                        }
                        returned_to = false;
                    }
                    Err(why) => break Some(why),
                }
            } else {
                returned_to = true;
            }
            // A caller's frame is above its callee's: a stack that does not
            // grow back up is damaged (or unwinding went wrong).
            if caller[SP] < regs[SP] || (caller[SP] == regs[SP] && caller[PC] == regs[PC]) {
                break Some(format!(
                    "the stack does not unwind past {:#010x} (sp {:#010x})",
                    pc, regs[SP]
                ));
            }
            regs = caller;
        };
        Unwound { frames, stopped }
    }

    /// The caller's registers (its pc the return address), `None` when
    /// this frame returns nowhere (the reset handler's `lr` is 0 or all
    /// ones), or why they cannot be known.
    fn caller(
        &self,
        context: &mut UnwindContext<usize>,
        lookup: u32,
        regs: &[u32; 16],
        memory: &mut dyn TargetMemory,
    ) -> Result<Option<[u32; 16]>, String> {
        let bases = BaseAddresses::default();
        let row = self
            .section
            .unwind_info_for_address(
                &bases,
                context,
                u64::from(lookup),
                DebugFrame::cie_from_offset,
            )
            .map_err(|e| match e {
                gimli::Error::NoUnwindInfoForAddress => {
                    format!("no call-frame information for {lookup:#010x}")
                }
                e => format!("call-frame information for {lookup:#010x}: {e}"),
            })?;
        let cfa = match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } => {
                let base = *regs
                    .get(usize::from(register.0))
                    .ok_or_else(|| format!("a CFA in register {} at {lookup:#010x}", register.0))?;
                (i64::from(base) + offset) as u32
            }
            CfaRule::Expression(_) => {
                return Err(format!("a CFA given by an expression at {lookup:#010x}"));
            }
        };
        let mut caller = *regs;
        caller[SP] = cfa;
        // Without a rule, lr still holds the return address (a leaf).
        caller[PC] = regs[LR];
        for n in 0..16u16 {
            let value = match row.register(gimli::Register(n)) {
                RegisterRule::Undefined | RegisterRule::SameValue => continue,
                RegisterRule::Offset(offset) => {
                    let at = (i64::from(cfa) + offset) as u32;
                    memory.read_u32(at).map_err(|e| read_failed(n, at, &e))?
                }
                RegisterRule::ValOffset(offset) => (i64::from(cfa) + offset) as u32,
                RegisterRule::Register(other) => regs[usize::from(other.0).min(15)],
                other => {
                    return Err(format!(
                        "register {n} at {lookup:#010x} has a rule hilt does not follow ({other:?})"
                    ));
                }
            };
            if usize::from(n) == LR {
                caller[PC] = value;
            } else if usize::from(n) != SP {
                caller[usize::from(n)] = value;
            }
        }
        if caller[PC] == 0 || caller[PC] == u32::MAX {
            return Ok(None);
        }
        Ok(Some(caller))
    }
}

fn read_failed(register: u16, at: u32, e: &MemoryError) -> String {
    format!("register {register}'s saved value at {at:#010x} cannot be read: {e}")
}

/// `value` as an EXC_RETURN (an exception handler's return address), if it
/// is one.
fn exception_return(value: u32) -> Option<u32> {
    (value >= 0xFFFF_FF00).then_some(value)
}

/// The registers an exception stacked at `frame` (r0–r3, r12, lr, pc;
/// sp past the frame) and the exception's vector number (xPSR's low
/// bits). `exc_return` says which stack (bit 2: the process stack, which
/// hilt's firmware never uses and the host cannot read back) and whether
/// the frame holds the FPU's registers too (bit 4 clear).
fn exception_frame(
    exc_return: u32,
    frame: u32,
    memory: &mut dyn TargetMemory,
) -> Result<([u32; 16], u32), String> {
    if exc_return & 0b100 != 0 {
        return Err(format!(
            "the exception ({exc_return:#010x}) interrupted code on the process stack, which is not followed"
        ));
    }
    let mut bytes = [0u8; 32];
    memory
        .read(frame, &mut bytes)
        .map_err(|e| format!("the exception frame at {frame:#010x} cannot be read: {e}"))?;
    let word = |i: usize| {
        u32::from_le_bytes([
            bytes[i * 4],
            bytes[i * 4 + 1],
            bytes[i * 4 + 2],
            bytes[i * 4 + 3],
        ])
    };
    let mut regs = [0u32; 16];
    for (i, n) in [0, 1, 2, 3, 12, LR, PC].into_iter().enumerate() {
        regs[n] = word(i);
    }
    let xpsr = word(7);
    let fpu = if exc_return & 0b1_0000 == 0 { 0x48 } else { 0 };
    // Bit 9: the core aligned the frame to 8 bytes with a padding word.
    let padding = if xpsr & (1 << 9) != 0 { 4 } else { 0 };
    regs[SP] = frame + 0x20 + fpu + padding;
    Ok((regs, xpsr & 0x1FF))
}

/// The name of exception `vector` (IPSR's numbering).
pub(super) fn exception_name(vector: u32) -> String {
    match vector {
        0 => "thread mode".into(),
        2 => "NMI".into(),
        3 => "HardFault".into(),
        4 => "MemManage".into(),
        5 => "BusFault".into(),
        6 => "UsageFault".into(),
        7 => "SecureFault".into(),
        11 => "SVCall".into(),
        12 => "DebugMonitor".into(),
        14 => "PendSV".into(),
        15 => "SysTick".into(),
        n => format!("interrupt {}", n - 16),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::FakeMemory;

    #[test]
    fn an_exception_frame_gives_the_interrupted_registers() {
        let base = 0x2000_0000;
        let mut bytes = vec![0u8; 64];
        let words = [10, 11, 12, 13, 0xC, 0x0000_1235, 0x0000_2000, 0x0100_0003];
        for (i, w) in words.iter().enumerate() {
            bytes[i * 4..i * 4 + 4].copy_from_slice(&u32::to_le_bytes(*w));
        }
        let mut memory = FakeMemory {
            base,
            bytes,
            paused: 0,
        };
        let (regs, vector) = exception_frame(0xFFFF_FFF9, base, &mut memory).unwrap();
        assert_eq!(vector, 3);
        assert_eq!(exception_name(vector), "HardFault");
        assert_eq!((regs[0], regs[3], regs[12]), (10, 13, 0xC));
        assert_eq!(
            (regs[LR], regs[PC], regs[SP]),
            (0x1235, 0x2000, base + 0x20)
        );
        // The FPU's frame and the alignment word move the stack further.
        let (regs, _) = exception_frame(0xFFFF_FFE9, base, &mut memory).unwrap();
        assert_eq!(regs[SP], base + 0x68);
        // The process stack is named, not followed.
        let refused = exception_frame(0xFFFF_FFFD, base, &mut memory).unwrap_err();
        assert!(refused.contains("process stack"), "{refused}");
        // A frame outside memory says where.
        let unread = exception_frame(0xFFFF_FFF9, 0x1000_0000, &mut memory).unwrap_err();
        assert!(unread.contains("0x10000000"), "{unread}");
    }

    #[test]
    fn exc_return_values_are_told_from_addresses() {
        assert_eq!(exception_return(0xFFFF_FFF9), Some(0xFFFF_FFF9));
        assert_eq!(exception_return(0x0800_1235), None);
        assert_eq!(exception_name(31), "interrupt 15");
    }
}
