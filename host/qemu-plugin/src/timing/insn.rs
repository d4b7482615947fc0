//! The decoded form of one instruction: its class and the few operands costing needs.

/// What kind of instruction this is, at the granularity the timing tables use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// Data processing: moves, MOVW/MOVT, add/sub/logic, shifts, compares, extends, bit-field,
    /// reverse, saturate, SIMD add/sub, packing, CLZ. (`writes_pc` for MOV PC / ADD PC.)
    Alu,
    /// MUL/MULS (32-bit result).
    Mul,
    /// MLA, MLS.
    MulAcc,
    /// SMULL, UMULL.
    MulLong,
    /// SMLAL, UMLAL, UMAAL, SMLALxy, SMLALD, SMLSLD.
    MulLongAcc,
    /// DSP multiplies: SMULxy, SMLAxy, SMULWy, SMLAWy, SMLAD(X), SMLSD(X), SMUAD, SMUSD, SMMUL,
    /// SMMLA, SMMLS, USAD8, USADA8.
    DspMul,
    /// SDIV, UDIV.
    Div,
    /// Single load (LDR/LDRB/LDRH/LDRSB/LDRSH, any addressing form incl. literal, LDREX*).
    Load,
    /// Single store (STR/STRB/STRH, any addressing form, STREX*).
    Store,
    /// LDRD (two accesses).
    LoadDual,
    /// STRD (two accesses).
    StoreDual,
    /// LDM/LDMDB/POP (16 and 32-bit).
    LoadMultiple,
    /// STM/STMDB/PUSH (16 and 32-bit).
    StoreMultiple,
    /// Unconditional B.
    Branch,
    /// B<cond> (16-bit T1 or 32-bit T3).
    CondBranch,
    /// CBZ, CBNZ.
    CompareBranch,
    /// BL.
    BranchLink,
    /// BX Rm.
    BranchExchange,
    /// BLX Rm.
    BranchLinkExchange,
    /// TBB, TBH.
    TableBranch,
    /// IT.
    It,
    /// NOP, YIELD, SEV, CLREX, PLD/PLI and other hints.
    Hint,
    /// DMB, DSB.
    Barrier,
    /// ISB.
    Isb,
    /// WFI, WFE.
    WaitFor,
    /// SVC.
    Svc,
    /// BKPT.
    Bkpt,
    /// MRS.
    Mrs,
    /// MSR.
    Msr,
    /// CPSIE/CPSID.
    Cps,
    /// VFP arithmetic costed like an add: VADD, VSUB, VMUL, VNMUL, VABS, VNEG, VCMP(E),
    /// VCVT*, VMOV (immediate and register-to-register), VRINT and friends.
    FpAlu,
    /// VMLA, VMLS, VNMLA, VNMLS, VFMA, VFMS, VFNMA, VFNMS.
    FpMac,
    /// VDIV, VSQRT.
    FpDivSqrt,
    /// VLDR (single or double; `regs` counts 32-bit words).
    FpLoad,
    /// VSTR (single or double; `regs` counts 32-bit words).
    FpStore,
    /// VLDM/VPOP (`regs` counts 32-bit words).
    FpLoadMultiple,
    /// VSTM/VPUSH (`regs` counts 32-bit words).
    FpStoreMultiple,
    /// Single-cycle FP transfers: VMRS, VMSR, VMOV between a core register and half of a double.
    FpMov,
    /// Two-cycle FP transfers: VMOV between core register(s) and one single, two singles or a double.
    FpMovCore,
    /// Anything not recognised (including short slices and undefined encodings).
    Unknown,
}

/// "No register" marker for the register fields.
pub(crate) const NO_REG: u8 = 0xFF;

/// One decoded instruction: its class plus the few operands the cost rules look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub(crate) class: Class,
    pub(crate) size: u8,
    /// Transfers: registers in the list for LDM/STM/PUSH/POP (PC and LR included), 32-bit words
    /// for VLDR/VSTR/VLDM/VSTM/VPUSH/VPOP, 2 for LDRD/STRD, 1 for single loads/stores, else 0.
    pub(crate) regs: u8,
    pub(crate) writes_pc: bool,
    pub(crate) conditional: bool,
    /// Core register a single load (or STREX status) writes, else [`NO_REG`].
    pub(crate) dest: u8,
    /// Base register of a load/store, else [`NO_REG`].
    pub(crate) base: u8,
    /// Offset register of a register-offset load/store, else [`NO_REG`].
    pub(crate) offset: u8,
}

impl Insn {
    pub(crate) fn new(class: Class, size: u8) -> Insn {
        Insn {
            class,
            size,
            regs: 0,
            writes_pc: false,
            conditional: matches!(class, Class::CondBranch | Class::CompareBranch),
            dest: NO_REG,
            base: NO_REG,
            offset: NO_REG,
        }
    }

    pub(crate) fn with_regs(mut self, regs: u32) -> Insn {
        self.regs = regs.min(u8::MAX as u32) as u8;
        self
    }

    pub(crate) fn pc(mut self, writes_pc: bool) -> Insn {
        self.writes_pc = writes_pc;
        self
    }

    pub(crate) fn single(
        class: Class,
        size: u8,
        dest: u32,
        base: u32,
        offset: Option<u32>,
    ) -> Insn {
        let mut i = Insn::new(class, size).with_regs(1);
        i.dest = if class == Class::Load {
            dest as u8
        } else {
            NO_REG
        };
        i.base = base as u8;
        i.offset = offset.map_or(NO_REG, |r| r as u8);
        i.writes_pc = class == Class::Load && dest == 15;
        i
    }

    /// Instruction length in bytes: 2 or 4.
    pub fn size(&self) -> u32 {
        u32::from(self.size)
    }

    /// The instruction's class.
    pub fn class(&self) -> Class {
        self.class
    }

    /// Registers (or FP words) transferred; see [`Class`] for what counts.
    pub fn regs(&self) -> u32 {
        u32::from(self.regs)
    }

    /// Whether executing it writes the PC (branches, POP/LDM with PC, LDR PC, MOV/ADD PC).
    /// Conditional branches write it only when taken; they report `true` too.
    pub fn writes_pc(&self) -> bool {
        self.writes_pc
    }

    /// Whether it reads memory (single, dual, multiple, FP loads, TBB/TBH table reads).
    pub fn is_load(&self) -> bool {
        matches!(
            self.class,
            Class::Load
                | Class::LoadDual
                | Class::LoadMultiple
                | Class::FpLoad
                | Class::FpLoadMultiple
                | Class::TableBranch
        )
    }

    /// Whether it writes memory.
    pub fn is_store(&self) -> bool {
        matches!(
            self.class,
            Class::Store
                | Class::StoreDual
                | Class::StoreMultiple
                | Class::FpStore
                | Class::FpStoreMultiple
        )
    }

    /// B<cond>, CBZ, CBNZ: the branches whose taken cost is `cycles + taken_extra`.
    pub fn is_conditional_branch(&self) -> bool {
        self.conditional
    }

    /// True for a single load/store that uses a register offset (`[Rn, Rm{, LSL #n}]`).
    pub fn register_offset(&self) -> bool {
        self.offset != NO_REG
    }

    /// A short lower-case name of the class, for reports.
    pub fn class_name(&self) -> &'static str {
        match self.class {
            Class::Alu => "alu",
            Class::Mul => "mul",
            Class::MulAcc => "mul-acc",
            Class::MulLong => "mul-long",
            Class::MulLongAcc => "mul-long-acc",
            Class::DspMul => "dsp-mul",
            Class::Div => "div",
            Class::Load => "load",
            Class::Store => "store",
            Class::LoadDual => "load-dual",
            Class::StoreDual => "store-dual",
            Class::LoadMultiple => "load-multiple",
            Class::StoreMultiple => "store-multiple",
            Class::Branch => "branch",
            Class::CondBranch => "cond-branch",
            Class::CompareBranch => "compare-branch",
            Class::BranchLink => "branch-link",
            Class::BranchExchange => "branch-exchange",
            Class::BranchLinkExchange => "branch-link-exchange",
            Class::TableBranch => "table-branch",
            Class::It => "it",
            Class::Hint => "hint",
            Class::Barrier => "barrier",
            Class::Isb => "isb",
            Class::WaitFor => "wait-for",
            Class::Svc => "svc",
            Class::Bkpt => "bkpt",
            Class::Mrs => "mrs",
            Class::Msr => "msr",
            Class::Cps => "cps",
            Class::FpAlu => "fp-alu",
            Class::FpMac => "fp-mac",
            Class::FpDivSqrt => "fp-div-sqrt",
            Class::FpLoad => "fp-load",
            Class::FpStore => "fp-store",
            Class::FpLoadMultiple => "fp-load-multiple",
            Class::FpStoreMultiple => "fp-store-multiple",
            Class::FpMov => "fp-mov",
            Class::FpMovCore => "fp-mov-core",
            Class::Unknown => "unknown",
        }
    }
}
