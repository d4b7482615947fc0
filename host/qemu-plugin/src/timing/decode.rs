//! Thumb (16-bit) and Thumb-2 (32-bit) decoding into instruction *classes*: just enough to
//! cost an instruction, not to execute it.
//!
//! Encodings follow the ARMv7-M Architecture Reference Manual (ARM DDI 0403), chapter A5
//! "The Thumb Instruction Set Encoding" (16-bit: A5.2, 32-bit: A5.3) and chapter A6 for the
//! floating-point (coprocessor 10/11) space. ARMv6-M (Cortex-M0+) is the subset of the same
//! encodings, so one decoder serves every core.

use super::insn::{Class, Insn};

/// True when a first halfword announces a 32-bit instruction (bits 15:11 = 0b11101/11110/11111).
pub(crate) fn is_wide(hw1: u16) -> bool {
    (hw1 >> 11) >= 0b11101
}

/// Decodes one instruction from its raw little-endian bytes (2 or 4 of them).
///
/// Never panics. Slices shorter than the instruction's length, and encodings the decoder does
/// not recognise, give [`Class::Unknown`] (costed 1 cycle). The size is taken from the first
/// halfword when there is one (so a truncated 32-bit instruction still reports 4), else 2.
pub fn decode(bytes: &[u8]) -> Insn {
    let Some(hw1) = halfword(bytes, 0) else {
        return Insn::new(Class::Unknown, 2);
    };
    if !is_wide(hw1) {
        return decode16(hw1);
    }
    match halfword(bytes, 2) {
        Some(hw2) => decode32(hw1, hw2),
        None => Insn::new(Class::Unknown, 4),
    }
}

fn halfword(bytes: &[u8], at: usize) -> Option<u16> {
    let lo = *bytes.get(at)?;
    let hi = *bytes.get(at + 1)?;
    Some(u16::from_le_bytes([lo, hi]))
}

fn bits(v: u16, hi: u32, lo: u32) -> u32 {
    (u32::from(v) >> lo) & ((1 << (hi - lo + 1)) - 1)
}

/// ARMv7-M ARM A5.2 "16-bit Thumb instruction encoding" (Table A5-1 and sub-tables).
fn decode16(hw: u16) -> Insn {
    let alu = Insn::new(Class::Alu, 2);
    let (rt, rn, rm) = (bits(hw, 2, 0), bits(hw, 5, 3), bits(hw, 8, 6));
    match bits(hw, 15, 10) {
        // Shift (immediate), add, subtract, move, compare (A5.2.1).
        0b000000..=0b001111 => alu,
        // Data processing (A5.2.2): MULS is opcode 0b1101.
        0b010000 => {
            if bits(hw, 9, 6) == 0b1101 {
                Insn::new(Class::Mul, 2)
            } else {
                alu
            }
        }
        // Special data processing and branch and exchange (A5.2.3).
        0b010001 => {
            let rd = (bits(hw, 7, 7) << 3) | rt;
            match bits(hw, 9, 8) {
                0b00 | 0b10 => alu.pc(rd == 15), // ADD / MOV (high registers)
                0b01 => alu,                     // CMP (high registers)
                _ if bits(hw, 7, 7) == 0 => Insn::new(Class::BranchExchange, 2).pc(true),
                _ => Insn::new(Class::BranchLinkExchange, 2).pc(true),
            }
        }
        // LDR (literal).
        0b010010 | 0b010011 => Insn::single(Class::Load, 2, bits(hw, 10, 8), 15, None),
        // Load/store single data item (A5.2.4).
        0b010100..=0b010111 => {
            // opB: 000 STR, 001 STRH, 010 STRB, 011 LDRSB, 1xx loads.
            let class = if bits(hw, 11, 9) < 0b011 {
                Class::Store
            } else {
                Class::Load
            };
            Insn::single(class, 2, rt, rn, Some(rm))
        }
        0b011000..=0b100011 => {
            // STR/LDR, STRB/LDRB, STRH/LDRH (immediate): bit 11 is L.
            let class = if bits(hw, 11, 11) == 1 {
                Class::Load
            } else {
                Class::Store
            };
            Insn::single(class, 2, rt, rn, None)
        }
        0b100100..=0b100111 => {
            // STR/LDR (SP-relative).
            let class = if bits(hw, 11, 11) == 1 {
                Class::Load
            } else {
                Class::Store
            };
            Insn::single(class, 2, bits(hw, 10, 8), 13, None)
        }
        // ADR, ADD (SP plus immediate).
        0b101000..=0b101011 => alu,
        // Miscellaneous 16-bit instructions (A5.2.5).
        0b101100..=0b101111 => decode16_misc(hw),
        // STM / LDM (T1).
        0b110000..=0b110011 => {
            let n = u32::from(hw & 0xFF).count_ones();
            let class = if bits(hw, 11, 11) == 1 {
                Class::LoadMultiple
            } else {
                Class::StoreMultiple
            };
            Insn::new(class, 2).with_regs(n)
        }
        // Conditional branch and supervisor call (A5.2.6).
        0b110100..=0b110111 => match bits(hw, 11, 8) {
            0b1110 => Insn::new(Class::Unknown, 2), // UDF
            0b1111 => Insn::new(Class::Svc, 2),
            _ => Insn::new(Class::CondBranch, 2).pc(true),
        },
        // B (T2, unconditional).
        0b111000 | 0b111001 => Insn::new(Class::Branch, 2).pc(true),
        _ => Insn::new(Class::Unknown, 2),
    }
}

/// ARMv7-M ARM A5.2.5 "Miscellaneous 16-bit instructions" (Table A5-5).
fn decode16_misc(hw: u16) -> Insn {
    let opcode = bits(hw, 11, 5);
    match opcode {
        // ADD/SUB SP, SP, #imm.
        0b0000000..=0b0000111 => Insn::new(Class::Alu, 2),
        // SXTH, SXTB, UXTH, UXTB.
        0b0010000..=0b0010111 => Insn::new(Class::Alu, 2),
        // PUSH: register list plus LR (bit 8).
        0b0100000..=0b0101111 => {
            Insn::new(Class::StoreMultiple, 2).with_regs(u32::from(hw & 0x1FF).count_ones())
        }
        // CPS.
        0b0110011 => Insn::new(Class::Cps, 2),
        // REV, REV16, REVSH.
        0b1010000..=0b1010111 => Insn::new(Class::Alu, 2),
        // POP: register list plus PC (bit 8).
        0b1100000..=0b1101111 => Insn::new(Class::LoadMultiple, 2)
            .with_regs(u32::from(hw & 0x1FF).count_ones())
            .pc(bits(hw, 8, 8) == 1),
        // BKPT.
        0b1110000..=0b1110111 => Insn::new(Class::Bkpt, 2),
        // IT and hints.
        0b1111000..=0b1111111 => {
            if hw & 0xF != 0 {
                Insn::new(Class::It, 2)
            } else {
                match bits(hw, 7, 4) {
                    0b0010 | 0b0011 => Insn::new(Class::WaitFor, 2), // WFE, WFI
                    _ => Insn::new(Class::Hint, 2),                  // NOP, YIELD, SEV, ...
                }
            }
        }
        // CBZ / CBNZ (op = x0x1xxx in bits 11:5 means bits 11,9..8 pattern; checked by mask).
        _ if hw & 0xF500 == 0xB100 => Insn::new(Class::CompareBranch, 2).pc(true),
        _ => Insn::new(Class::Unknown, 2),
    }
}

/// ARMv7-M ARM A5.3 "32-bit Thumb instruction encoding" (Table A5-9 and sub-tables).
fn decode32(hw1: u16, hw2: u16) -> Insn {
    let alu = Insn::new(Class::Alu, 4);
    match bits(hw1, 12, 11) {
        0b01 => {
            if hw1 & 0xFE40 == 0xE800 {
                decode32_ldm_stm(hw1, hw2)
            } else if hw1 & 0xFE40 == 0xE840 {
                decode32_dual_excl_tb(hw1, hw2)
            } else if hw1 & 0xFE00 == 0xEA00 {
                alu // Data processing (shifted register), incl. PKHBT/PKHTB.
            } else {
                decode_coproc(hw1, hw2)
            }
        }
        0b10 => {
            if hw2 & 0x8000 == 0 {
                alu // Data processing (modified / plain binary immediate).
            } else {
                decode32_branch_misc(hw1, hw2)
            }
        }
        _ => {
            if hw1 & 0xFE00 == 0xF800 {
                decode32_load_store(hw1, hw2)
            } else if hw1 & 0xFF00 == 0xFA00 {
                alu // Data processing (register), parallel add/sub, misc (REV, CLZ, QADD, ...).
            } else if hw1 & 0xFF80 == 0xFB00 {
                decode32_mul(hw1, hw2)
            } else if hw1 & 0xFF80 == 0xFB80 {
                decode32_long_mul_div(hw1, hw2)
            } else if hw1 & 0xEC00 == 0xEC00 {
                decode_coproc(hw1, hw2)
            } else {
                Insn::new(Class::Unknown, 4)
            }
        }
    }
}

/// A5.3.5 "Load Multiple and Store Multiple" (Table A5-10).
fn decode32_ldm_stm(hw1: u16, hw2: u16) -> Insn {
    let op = bits(hw1, 8, 7);
    if op == 0b00 || op == 0b11 {
        return Insn::new(Class::Unknown, 4); // SRS / RFE: not in M profile.
    }
    let load = bits(hw1, 4, 4) == 1;
    let n = u32::from(hw2).count_ones();
    if load {
        Insn::new(Class::LoadMultiple, 4)
            .with_regs(n)
            .pc(hw2 & 0x8000 != 0)
    } else {
        Insn::new(Class::StoreMultiple, 4).with_regs(n)
    }
}

/// A5.3.6 "Load/store dual or exclusive, table branch" (Table A5-11).
fn decode32_dual_excl_tb(hw1: u16, hw2: u16) -> Insn {
    let (op1, op2, op3) = (bits(hw1, 8, 7), bits(hw1, 5, 4), bits(hw2, 7, 4));
    let rn = bits(hw1, 3, 0);
    let rt = bits(hw2, 15, 12);
    match (op1, op2) {
        (0b00, 0b00) => {
            // STREX: the status register (bits 11:8) is the written destination.
            let mut i = Insn::single(Class::Store, 4, 0, rn, None);
            i.dest = bits(hw2, 11, 8) as u8;
            i
        }
        (0b00, 0b01) => Insn::single(Class::Load, 4, rt, rn, None), // LDREX
        (0b01, 0b00) => match op3 {
            0b0100 | 0b0101 => {
                let mut i = Insn::single(Class::Store, 4, 0, rn, None); // STREXB/H
                i.dest = bits(hw2, 3, 0) as u8;
                i
            }
            _ => Insn::new(Class::Unknown, 4),
        },
        (0b01, 0b01) => match op3 {
            0b0000 | 0b0001 => Insn::new(Class::TableBranch, 4).with_regs(1).pc(true),
            0b0100 | 0b0101 => Insn::single(Class::Load, 4, rt, rn, None), // LDREXB/H
            _ => Insn::new(Class::Unknown, 4),
        },
        _ => {
            // LDRD / STRD (immediate or literal): op2 bit 0 is L.
            let class = if op2 & 1 == 1 {
                Class::LoadDual
            } else {
                Class::StoreDual
            };
            let mut i = Insn::new(class, 4).with_regs(2);
            i.base = rn as u8;
            i
        }
    }
}

/// A5.3.4 "Branches and miscellaneous control" (Table A5-13).
fn decode32_branch_misc(hw1: u16, hw2: u16) -> Insn {
    let op1 = bits(hw2, 14, 12);
    let op = bits(hw1, 10, 4);
    if op1 & 0b101 == 0b000 {
        if op & 0b0111000 != 0b0111000 {
            return Insn::new(Class::CondBranch, 4).pc(true); // B<cond> T3
        }
        return match op {
            0b0111000 | 0b0111001 => Insn::new(Class::Msr, 4),
            0b0111010 => match hw2 & 0xFF {
                0x02 | 0x03 => Insn::new(Class::WaitFor, 4), // WFE.W, WFI.W
                _ => Insn::new(Class::Hint, 4),              // NOP.W, YIELD.W, SEV.W, DBG
            },
            0b0111011 => match bits(hw2, 7, 4) {
                0b0100 | 0b0101 => Insn::new(Class::Barrier, 4), // DSB, DMB
                0b0110 => Insn::new(Class::Isb, 4),
                0b0010 => Insn::new(Class::Hint, 4), // CLREX
                _ => Insn::new(Class::Unknown, 4),
            },
            0b0111110 | 0b0111111 => Insn::new(Class::Mrs, 4),
            _ => Insn::new(Class::Unknown, 4), // includes UDF.W
        };
    }
    match op1 {
        0b001 | 0b011 => Insn::new(Class::Branch, 4).pc(true), // B T4
        0b101 | 0b111 => Insn::new(Class::BranchLink, 4).pc(true), // BL
        _ => Insn::new(Class::Unknown, 4),                     // BLX (immediate): not on M
    }
}

/// A5.3.7 / A5.3.8 / A5.3.9 / A5.3.10: load/store single data items (T2-T4 encodings).
fn decode32_load_store(hw1: u16, hw2: u16) -> Insn {
    let load = bits(hw1, 4, 4) == 1;
    let size = bits(hw1, 6, 5); // 00 byte, 01 halfword, 10 word
    let rn = bits(hw1, 3, 0);
    let rt = bits(hw2, 15, 12);
    if size == 0b11 || (!load && hw1 & 0x0100 != 0) {
        return Insn::new(Class::Unknown, 4); // undefined; SIMD element space (not on M)
    }
    // Register offset form: Rn != PC, bit 7 (U for imm12) clear and hw2[11:6] == 0.
    let reg_offset = rn != 15 && hw1 & 0x0080 == 0 && bits(hw2, 11, 6) == 0;
    let offset = reg_offset.then(|| bits(hw2, 3, 0));
    if load && rt == 15 && size != 0b10 {
        return Insn::new(Class::Hint, 4); // PLD / PLI (byte/halfword load into PC)
    }
    let class = if load { Class::Load } else { Class::Store };
    Insn::single(class, 4, rt, rn, offset)
}

/// A5.3.16 "Multiply, multiply accumulate, and absolute difference" (Table A5-20).
fn decode32_mul(hw1: u16, hw2: u16) -> Insn {
    let op1 = bits(hw1, 6, 4);
    let op2 = bits(hw2, 5, 4);
    let ra_is_pc = bits(hw2, 15, 12) == 0b1111;
    match (op1, op2) {
        (0b000, 0b00) if ra_is_pc => Insn::new(Class::Mul, 4),
        (0b000, 0b00) | (0b000, 0b01) => Insn::new(Class::MulAcc, 4), // MLA, MLS
        (0b000, _) => Insn::new(Class::Unknown, 4),
        (0b111, 0b00) => Insn::new(Class::DspMul, 4), // USAD8 / USADA8
        (0b111, _) => Insn::new(Class::Unknown, 4),
        _ => Insn::new(Class::DspMul, 4),
    }
}

/// A5.3.17 "Long multiply, long multiply accumulate, and divide" (Table A5-21).
fn decode32_long_mul_div(hw1: u16, hw2: u16) -> Insn {
    let op1 = bits(hw1, 6, 4);
    let op2 = bits(hw2, 7, 4);
    let class = match (op1, op2) {
        (0b000, 0b0000) | (0b010, 0b0000) => Class::MulLong, // SMULL, UMULL
        (0b001, 0b1111) | (0b011, 0b1111) => Class::Div,     // SDIV, UDIV
        (0b100, 0b0000) | (0b110, 0b0000) | (0b110, 0b0110) => Class::MulLongAcc, // SMLAL, UMLAL, UMAAL
        (0b100, 0b1000..=0b1011) | (0b100, 0b1100 | 0b1101) | (0b101, 0b1100 | 0b1101) => {
            Class::MulLongAcc // SMLALxy, SMLALD(X), SMLSLD(X)
        }
        _ => Class::Unknown,
    };
    Insn::new(class, 4)
}

/// Coprocessor space restricted to the FPU (coprocessors 10 and 11): ARMv7-M ARM A6.4/A6.5/A6.6.
fn decode_coproc(hw1: u16, hw2: u16) -> Insn {
    let coproc = bits(hw2, 11, 8);
    if coproc & 0b1110 != 0b1010 || hw1 & 0xEC00 != 0xEC00 || hw1 & 0x1000 != 0 {
        return Insn::new(Class::Unknown, 4); // other coprocessors, or the 0xFCxx space
    }
    let double = coproc == 0b1011;
    if hw1 & 0xFFE0 == 0xEC40 {
        // VMOV two core registers <-> two singles or one double (A6.6).
        return Insn::new(Class::FpMovCore, 4);
    }
    if hw1 & 0xEE00 == 0xEC00 {
        return decode_fp_load_store(hw1, hw2, double);
    }
    if hw1 & 0xEF00 == 0xEE00 {
        if hw2 & 0x0010 == 0 {
            return decode_fp_data(hw1, hw2);
        }
        // 8/16/32-bit transfers between core and extension registers (A6.6).
        let a = bits(hw1, 7, 5);
        let c = bits(hw2, 8, 8);
        return match (a, c) {
            (0b000, 0) => Insn::new(Class::FpMovCore, 4), // VMOV Sn <-> Rt
            (0b111, 0) => Insn::new(Class::FpMov, 4),     // VMRS / VMSR
            (_, 1) if a & 0b100 == 0 => Insn::new(Class::FpMov, 4), // VMOV Dn[x] <-> Rt
            _ => Insn::new(Class::Unknown, 4),
        };
    }
    Insn::new(Class::Unknown, 4)
}

/// A6.5 "Extension register load or store instructions" (Table A6-3).
fn decode_fp_load_store(hw1: u16, hw2: u16, double: bool) -> Insn {
    let load = bits(hw1, 4, 4) == 1;
    let p = bits(hw1, 8, 8);
    let w = bits(hw1, 5, 5);
    if p == 1 && w == 0 {
        // VLDR / VSTR: one single (1 word) or one double (2 words).
        let class = if load { Class::FpLoad } else { Class::FpStore };
        return Insn::new(class, 4).with_regs(if double { 2 } else { 1 });
    }
    if bits(hw1, 8, 7) == 0b00 || (p == 1 && bits(hw1, 7, 7) == 1) {
        return Insn::new(Class::Unknown, 4);
    }
    // VLDM / VSTM / VPUSH / VPOP: imm8 counts 32-bit words (2 per double register).
    // ARMv7-M ARM VLDM/VSTM: an empty list or more than 32 words is UNPREDICTABLE.
    let words = u32::from(hw2 & 0xFF);
    if words == 0 || words > 32 {
        return Insn::new(Class::Unknown, 4);
    }
    let class = if load {
        Class::FpLoadMultiple
    } else {
        Class::FpStoreMultiple
    };
    Insn::new(class, 4).with_regs(words)
}

/// A6.4 "Floating-point data-processing instructions" (Table A6-1 / A6-2).
fn decode_fp_data(hw1: u16, hw2: u16) -> Insn {
    let opc1 = bits(hw1, 7, 4) & 0b1011; // bit 6 is the D register bit
    let opc3 = bits(hw2, 7, 6);
    let class = match opc1 {
        0b0000 | 0b0001 | 0b1001 | 0b1010 => Class::FpMac, // VMLA/VMLS, VNMLA/VNMLS, VFNMA/S, VFMA/S
        0b0010 | 0b0011 => Class::FpAlu,                   // VMUL/VNMUL, VADD/VSUB
        0b1000 => Class::FpDivSqrt,                        // VDIV
        0b1011 => {
            let opc2 = bits(hw1, 3, 0);
            if opc3 & 1 == 0 {
                Class::FpAlu // VMOV (immediate)
            } else if opc2 == 0b0001 && opc3 == 0b11 {
                Class::FpDivSqrt // VSQRT
            } else {
                Class::FpAlu // VMOV reg, VABS, VNEG, VCMP, VCVT*, VRINT*
            }
        }
        _ => Class::Unknown,
    };
    Insn::new(class, 4)
}
