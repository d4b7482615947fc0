//! Per-core base costs (before load/store pipelining, which `block` applies).
//!
//! Sources, cited by short name in the rules below:
//! - **M0+ TRM**: Arm Cortex-M0+ Technical Reference Manual (ARM DDI 0484C), section 3.3,
//!   Table 3.1 "Cortex-M0+ instruction summary".
//! - **M3 TRM**: Arm Cortex-M3 Technical Reference Manual (ARM DDI 0337), Table 3-1
//!   "Cortex-M3 instruction set summary", and section 3.3.1 "Load/store timings".
//! - **M4 TRM**: Arm Cortex-M4 Technical Reference Manual (ARM DDI 0439 / 100166), Table 3-1
//!   "Processor instruction set summary" (section 3.3.1), section 3.3.2 "Load/store timings",
//!   and Table 7-1 "FPU instruction set" (the FPU chapter). The same tables are reproduced in
//!   vendor manuals, e.g. TI SWCU192 Tables 3-25 and 3-27.
//! - **M33**: the Cortex-M33 TRM (Arm 100230) publishes no per-instruction cycle table, so the
//!   M33 uses the M4 TRM rules (same 3-stage single-issue class of pipeline, same DSP and
//!   single-precision FPU instruction set). M7 and M55 reuse the same rules and are `rough()`.

use super::core::Core;
use super::insn::{Class, Insn};

/// Pipeline refill `P` on M3/M4/M33 (and the rough M7/M55 estimate), in cycles.
///
/// M3 TRM Table 3-1 and M4 TRM Table 3-1 define P as the refill after a PC write and give a
/// range of 1 to 3 cycles, depending on the alignment and width of the target instruction and
/// on whether the core managed to speculate the target early. The model cannot know the target
/// when costing the branch, so it takes the middle of the documented range, 2. (LLVM's
/// Cortex-M3/M4 scheduling model likewise uses 2 as its taken-branch penalty.)
pub const BRANCH_REFILL_P: u32 = 2;

/// Fixed estimate for SDIV/UDIV on M3/M4/M33/M7/M55, in cycles.
///
/// M3 TRM and M4 TRM Table 3-1 give "2 to 12" cycles: the divider terminates early depending on
/// the operand values, which the plugin cannot see at translation time. The model uses 7, the
/// middle of the documented range.
pub const DIVIDE_ESTIMATE: u32 = 7;

/// SMULL/UMULL on the Cortex-M3, in cycles.
///
/// M3 TRM Table 3-1 gives "3 to 5" (early termination on operand values); the model uses the
/// middle value, 4.
pub const M3_LONG_MUL: u32 = 4;

/// SMLAL/UMLAL (and UMAAL) on the Cortex-M3, in cycles.
///
/// M3 TRM Table 3-1 gives "4 to 7" for the long multiply-accumulates; the model uses 6, the
/// middle of the range rounded up (accumulating code usually has wide operands).
pub const M3_LONG_MUL_ACC: u32 = 6;

/// MULS on the Cortex-M0+, in cycles.
///
/// M0+ TRM Table 3.1: MULS is "1 or 32" depending on whether the implementation chose the fast
/// single-cycle multiplier or the small iterative one. STM32 (and RP2040) parts configure the
/// fast multiplier, so the model uses 1.
pub const M0PLUS_MULS: u32 = 1;

/// Cycles for `core` before any pipelining with the previous instruction. Returns
/// `(cycles, taken_extra)`.
pub fn base_cost(core: Core, insn: &Insn) -> (u32, u32) {
    match core {
        Core::M0Plus => m0plus(insn),
        Core::M3 | Core::M4 | Core::M33 | Core::M7 | Core::M55 => armv7m(core, insn),
    }
}

/// Cortex-M0+ rules (all from M0+ TRM Table 3.1 "Cortex-M0+ instruction summary").
fn m0plus(insn: &Insn) -> (u32, u32) {
    let n = insn.regs();
    let cycles = match insn.class() {
        // "Move/Add ... Any to PC: 2"; every other move/add/sub/logic/shift/extend/reverse: 1.
        Class::Alu if insn.writes_pc() => 2,
        Class::Alu => 1,
        // "Multiply MULS: 1 or 32" -> fast multiplier, see M0PLUS_MULS.
        Class::Mul => M0PLUS_MULS,
        // "Load/Store ... 2 or 1": 1 only for the single-cycle I/O port, which the model does not
        // distinguish; memory accesses are 2. M0+ does not pipeline neighbouring loads.
        Class::Load | Class::Store => 2,
        // "Load multiple LDM: 1 + N", "Pop POP: 1 + N", "Pop and return POP {.., PC}: 3 + N".
        Class::LoadMultiple if insn.writes_pc() => 3 + n,
        Class::LoadMultiple => 1 + n,
        // "Store multiple STM: 1 + N", "Push PUSH: 1 + N".
        Class::StoreMultiple => 1 + n,
        // "Branch conditionally B<cc>: 1 or 2" (2 taken, 1 not taken). CBZ/CBNZ are not ARMv6-M
        // (they would fault); costed like B<cc> so every conditional branch has a taken cost.
        Class::CondBranch | Class::CompareBranch => return (1, 1),
        // "Branch unconditionally B: 2", "With link BL: 3", "With exchange BX: 2",
        // "With link and exchange BLX: 2".
        Class::Branch => 2,
        Class::BranchLink => 3,
        Class::BranchExchange | Class::BranchLinkExchange => 2,
        // "State change: CPSID/CPSIE 1, MRS 3, MSR 3"; "Barriers DMB/DSB/ISB: 3".
        Class::Cps => 1,
        Class::Mrs | Class::Msr => 3,
        Class::Barrier | Class::Isb => 3,
        // "Hint: SEV/YIELD/NOP 1, WFE/WFI 2" (plus the time actually spent waiting).
        Class::Hint => 1,
        Class::WaitFor => 2,
        // SVC and BKPT are listed without a count (exception entry / debug); the model charges
        // the issue cycle only.
        Class::Svc | Class::Bkpt => 1,
        // Everything else is not ARMv6-M (it would fault on a real M0+): 1 cycle.
        _ => 1,
    };
    (cycles, 0)
}

/// Cortex-M3/M4 rules, also used for M33 (no published table) and, roughly, M7/M55.
fn armv7m(core: Core, insn: &Insn) -> (u32, u32) {
    let p = BRANCH_REFILL_P;
    let n = insn.regs();
    let m3 = core == Core::M3;
    let cycles = match insn.class() {
        // M3/M4 TRM Table 3-1: MOV/ADD/... 1; "MOV PC, Rm" and "ADD PC, PC, Rm": 1 + P.
        // Saturate, extend, bit-field, reverse, SIMD parallel add/sub, packing (M4): 1.
        Class::Alu if insn.writes_pc() => 1 + p,
        Class::Alu => 1,
        Class::Mul | Class::MulAcc | Class::MulLong | Class::MulLongAcc | Class::DspMul => {
            multiply(insn.class(), m3)
        }
        // M3/M4 TRM Table 3-1: SDIV/UDIV "2 to 12" -> DIVIDE_ESTIMATE.
        Class::Div => DIVIDE_ESTIMATE,
        // M4 TRM Table 3-1 "Load word/halfword/byte ... 2" (footnote: neighbouring load/store
        // single instructions pipeline, handled in `block`); M4 TRM 3.3.2: "LDR PC,[any]" is
        // blocking: the load (2) then a pipeline refill, 2 + P. LDREX/STREX: 2 (same section:
        // pipelined exactly like LDR).
        Class::Load if insn.writes_pc() => 2 + p,
        Class::Load | Class::Store => 2,
        // M3/M4 TRM Table 3-1: "Load/Store double LDRD/STRD: 1 + N" with N = 2 words, i.e. 3;
        // 3.3.2: LDRD/STRD never pipeline with their neighbours.
        Class::LoadDual | Class::StoreDual => 1 + n,
        // M3/M4 TRM Table 3-1: "Load multiple LDM: 1 + N", "Pop: 1 + N",
        // "Load multiple including PC / Pop and return: 1 + N + P".
        Class::LoadMultiple if insn.writes_pc() => 1 + n + p,
        Class::LoadMultiple => 1 + n,
        // M3/M4 TRM Table 3-1: "Store multiple STM: 1 + N", "Push: 1 + N".
        Class::StoreMultiple => 1 + n,
        // M3/M4 TRM Table 3-1: "Branch conditionally B<cc>: 1 or 1 + P",
        // "Compare and branch CBZ/CBNZ: 1 or 1 + P".
        Class::CondBranch | Class::CompareBranch => return (1, p),
        // M3/M4 TRM Table 3-1: "B: 1 + P", "BL: 1 + P", "BX: 1 + P", "BLX: 1 + P".
        Class::Branch | Class::BranchLink | Class::BranchExchange | Class::BranchLinkExchange => {
            1 + p
        }
        // M3/M4 TRM Table 3-1: "Table branch TBB/TBH: 2 + P".
        Class::TableBranch => 2 + p,
        // M3/M4 TRM Table 3-1: "If-then-else IT: 1".
        Class::It => 1,
        // M3/M4 TRM Table 3-1: "NOP/YIELD/SEV: 1"; "WFE/WFI: 1 + W" (W, the wait, is dynamic);
        // CLREX 1; PLD 1.
        Class::Hint | Class::WaitFor => 1,
        // M3/M4 TRM Table 3-1: "DMB/DSB: 1 + B" with B at least 0 -> 1;
        // "ISB: 1 + B" with B at least a pipeline refill -> 1 + P.
        Class::Barrier => 1,
        Class::Isb => 1 + p,
        // M3/M4 TRM Table 3-1: "MRS: 1", "MSR: 1", "CPSID/CPSIE: 1".
        Class::Mrs | Class::Msr | Class::Cps => 1,
        // M3/M4 TRM Table 3-1: SVC and BKPT have no count (exception entry / debug halt);
        // the model charges the issue cycle only.
        Class::Svc | Class::Bkpt => 1,
        Class::FpAlu
        | Class::FpMac
        | Class::FpDivSqrt
        | Class::FpLoad
        | Class::FpStore
        | Class::FpLoadMultiple
        | Class::FpStoreMultiple
        | Class::FpMov
        | Class::FpMovCore => fpu(insn, m3),
        Class::Unknown => 1,
    };
    (cycles, 0)
}

/// Multiplies on the M3/M4 class: `class` is one of the multiply classes.
fn multiply(class: Class, m3: bool) -> u32 {
    match class {
        // M3/M4 TRM Table 3-1: "Multiply MUL: 1".
        Class::Mul => 1,
        // M3 TRM Table 3-1: "MLA/MLS: 2"; M4 TRM Table 3-1: "MLA/MLS: 1".
        Class::MulAcc => {
            if m3 {
                2
            } else {
                1
            }
        }
        // M3 TRM Table 3-1: SMULL/UMULL "3 to 5" (M3_LONG_MUL); M4 TRM Table 3-1: 1.
        Class::MulLong => {
            if m3 {
                M3_LONG_MUL
            } else {
                1
            }
        }
        // M3 TRM Table 3-1: SMLAL/UMLAL "4 to 7" (M3_LONG_MUL_ACC); M4 TRM Table 3-1: 1
        // (also UMAAL, SMLALxy, SMLALD, SMLSLD, which exist only from ARMv7E-M).
        Class::MulLongAcc => {
            if m3 {
                M3_LONG_MUL_ACC
            } else {
                1
            }
        }
        // M4 TRM Table 3-1: all DSP multiplies (SMULxy, SMLAxy, SMLAD, SMUAD, SMMUL, SMMLA, ...)
        // 1. The M3 (ARMv7-M) does not have them; costed 1 too.
        Class::DspMul => 1,
        _ => 1,
    }
}

/// FPU instructions on the M3/M4 class (the M3 has none).
fn fpu(insn: &Insn, m3: bool) -> u32 {
    let n = insn.regs();
    match insn.class() {
        // The Cortex-M3 has no FPU: floating-point encodings would fault; costed 1.
        _ if m3 => 1,
        // M4 TRM Table 7-1 "FPU instruction set": VABS, VADD/VSUB, VCMP, VCVT, VMUL, VNMUL,
        // VNEG, VMOV immediate/register: 1.
        Class::FpAlu => 1,
        // Table 7-1: VMLA/VMLS/VNMLA/VNMLS and fused VFMA/VFMS/VFNMA/VFNMS: 3.
        Class::FpMac => 3,
        // Table 7-1: VDIV 14, VSQRT 14.
        Class::FpDivSqrt => 14,
        // Table 7-1: VLDR/VSTR single 2, double 3 = 1 + words; VLDM/VSTM/VPUSH/VPOP
        // "1 + N" floats or "1 + 2N" doubles = 1 + words.
        Class::FpLoad | Class::FpStore | Class::FpLoadMultiple | Class::FpStoreMultiple => 1 + n,
        // Table 7-1: VMRS/VMSR and "top/bottom half of double to/from core register": 1.
        Class::FpMov => 1,
        // Table 7-1: "one float to/from one core register" and "two floats/one double to/from
        // two core registers": 2.
        Class::FpMovCore => 2,
        _ => 1,
    }
}
