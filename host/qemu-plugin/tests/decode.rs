//! Decoding real encodings. Every byte pattern below was produced by the LLVM assembler
//! (`rustc --crate-type=lib --emit=obj --target thumbv7em-none-eabihf -C target-cpu=cortex-m4`
//! on a `core::arch::global_asm!` block, `.syntax unified` / `.thumb`) and read back with
//! `llvm-objdump -d`; the halfwords are written as objdump prints them (first halfword first).

mod common;

use common::{t16, t32};
use hilt_qemu_plugin::timing::{Class, Insn, decode};

struct Case {
    asm: &'static str,
    hws: &'static [u16],
    class: Class,
    regs: u32,
    writes_pc: bool,
    conditional: bool,
}

const fn c(asm: &'static str, hws: &'static [u16], class: Class) -> Case {
    Case {
        asm,
        hws,
        class,
        regs: 0,
        writes_pc: false,
        conditional: false,
    }
}
const fn n(asm: &'static str, hws: &'static [u16], class: Class, regs: u32) -> Case {
    Case {
        asm,
        hws,
        class,
        regs,
        writes_pc: false,
        conditional: false,
    }
}
const fn pc(asm: &'static str, hws: &'static [u16], class: Class, regs: u32) -> Case {
    Case {
        asm,
        hws,
        class,
        regs,
        writes_pc: true,
        conditional: false,
    }
}
const fn cond(asm: &'static str, hws: &'static [u16], class: Class) -> Case {
    Case {
        asm,
        hws,
        class,
        regs: 0,
        writes_pc: true,
        conditional: true,
    }
}

fn bytes(hws: &[u16]) -> Vec<u8> {
    match hws {
        [a] => t16(*a),
        [a, b] => t32(*a, *b),
        _ => unreachable!(),
    }
}

fn check(cases: &[Case]) {
    for case in cases {
        let insn: Insn = decode(&bytes(case.hws));
        let what = format!("{} {:04x?}: {:?}", case.asm, case.hws, insn);
        assert_eq!(insn.class(), case.class, "class of {what}");
        assert_eq!(insn.size(), 2 * case.hws.len() as u32, "size of {what}");
        assert_eq!(insn.writes_pc(), case.writes_pc, "writes_pc of {what}");
        assert_eq!(
            insn.is_conditional_branch(),
            case.conditional,
            "conditional of {what}"
        );
        if case.regs != 0 {
            assert_eq!(insn.regs(), case.regs, "regs of {what}");
        }
    }
}

// Source (16-bit, one global_asm! block):
//   movs r0,#1; adds r0,r1,r2; lsls r0,r1,#3; mov r8,r9; mov pc,lr; add pc,r1; cmp r0,#5;
//   muls r0,r1,r0; ldr r0,[r1]; ldr r2,[r1,#4]; ldr r3,[r1,#8]; ldr r0,[r1,r2]; str r0,[r1,r2];
//   ldr r0,[sp,#8]; str r0,[sp,#8]; ldrb r0,[r1,#1]; strh r0,[r1,#2]; ldr r0,1f;
//   push {r4-r7,lr}; pop {r4,pc}; pop {r4-r6}; ldm r0!,{r1-r4}; stm r0!,{r1-r3};
//   beq 1f; bne 1f; b 1f; cbz r0,1f; cbnz r1,1f; bx lr; blx r3; it eq; moveq r0,r1; nop;
//   wfi; wfe; svc #1; bkpt #0; cpsid i; sxtb r0,r1; uxtb r0,r1; rev r0,r1; udf #0
#[test]
fn sixteen_bit_encodings() {
    check(&[
        c("movs r0, #1", &[0x2001], Class::Alu),
        c("adds r0, r1, r2", &[0x1888], Class::Alu),
        c("lsls r0, r1, #3", &[0x00c8], Class::Alu),
        c("mov r8, r9", &[0x46c8], Class::Alu),
        pc("mov pc, lr", &[0x46f7], Class::Alu, 0),
        pc("add pc, r1", &[0x448f], Class::Alu, 0),
        c("cmp r0, #5", &[0x2805], Class::Alu),
        c("muls r0, r1, r0", &[0x4348], Class::Mul),
        n("ldr r0, [r1]", &[0x6808], Class::Load, 1),
        n("ldr r2, [r1, #4]", &[0x684a], Class::Load, 1),
        n("ldr r0, [r1, r2]", &[0x5888], Class::Load, 1),
        n("str r0, [r1, r2]", &[0x5088], Class::Store, 1),
        n("ldr r0, [sp, #8]", &[0x9802], Class::Load, 1),
        n("str r0, [sp, #8]", &[0x9002], Class::Store, 1),
        n("ldrb r0, [r1, #1]", &[0x7848], Class::Load, 1),
        n("strh r0, [r1, #2]", &[0x8048], Class::Store, 1),
        n("ldr r0, 1f (literal)", &[0x480c], Class::Load, 1),
        n("push {r4-r7, lr}", &[0xb5f0], Class::StoreMultiple, 5),
        pc("pop {r4, pc}", &[0xbd10], Class::LoadMultiple, 2),
        n("pop {r4-r6}", &[0xbc70], Class::LoadMultiple, 3),
        n("ldm r0!, {r1-r4}", &[0xc81e], Class::LoadMultiple, 4),
        n("stm r0!, {r1-r3}", &[0xc00e], Class::StoreMultiple, 3),
        cond("beq 1f", &[0xd011], Class::CondBranch),
        cond("bne 1f", &[0xd110], Class::CondBranch),
        pc("b 1f", &[0xe00f], Class::Branch, 0),
        cond("cbz r0, 1f", &[0xb170], Class::CompareBranch),
        cond("cbnz r1, 1f", &[0xb969], Class::CompareBranch),
        pc("bx lr", &[0x4770], Class::BranchExchange, 0),
        pc("blx r3", &[0x4798], Class::BranchLinkExchange, 0),
        c("it eq", &[0xbf08], Class::It),
        c("moveq r0, r1", &[0x4608], Class::Alu),
        c("nop", &[0xbf00], Class::Hint),
        c("wfi", &[0xbf30], Class::WaitFor),
        c("wfe", &[0xbf20], Class::WaitFor),
        c("svc #1", &[0xdf01], Class::Svc),
        c("bkpt #0", &[0xbe00], Class::Bkpt),
        c("cpsid i", &[0xb672], Class::Cps),
        c("sxtb r0, r1", &[0xb248], Class::Alu),
        c("uxtb r0, r1", &[0xb2c8], Class::Alu),
        c("rev r0, r1", &[0xba08], Class::Alu),
        c("udf #0", &[0xde00], Class::Unknown),
    ]);
}

// Source (32-bit integer, one global_asm! block):
//   bl 1f; beq.w 1f; b.w 1f; movw r0,#0x1234; movt r0,#0x5678; add.w r0,r1,r2,lsl #2;
//   adds.w r0,r1,#0x100; addw r0,r1,#0xfff; lsl.w r0,r1,r2; cmp.w r0,#0x100;
//   ldr.w r0,[r1,#0x100]; ldr r0,[r1,#-4]; ldr r0,[r1],#4; ldr r0,[r1,#4]!;
//   ldr.w r0,[r1,r2,lsl #2]; str.w r0,[r1,r2,lsl #2]; str.w r0,[r1,#0x100];
//   ldrb.w r0,[r1,#0x100]; ldrsh.w r0,[r1,#0x100]; ldr.w r0,1f; ldr.w pc,[r1,#0x100];
//   ldrd r0,r1,[r2,#8]; strd r0,r1,[r2,#8]; ldrex r0,[r1]; strex r2,r0,[r1];
//   ldmia.w r0!,{r1-r4,r8}; ldmia.w r0,{r4-r7}; stmdb sp!,{r4-r11,lr}; pop.w {r4-r11,pc};
//   ldmia.w sp!,{r4-r8}; tbb [pc,r0]; tbh [pc,r0,lsl #1]
#[test]
fn thirty_two_bit_core_encodings() {
    check(&[
        pc("bl 1f", &[0xf000, 0xf8d0], Class::BranchLink, 0),
        cond("beq.w 1f", &[0xf000, 0x80ce], Class::CondBranch),
        pc("b.w 1f", &[0xf000, 0xb8cc], Class::Branch, 0),
        c("movw r0, #0x1234", &[0xf241, 0x2034], Class::Alu),
        c("movt r0, #0x5678", &[0xf2c5, 0x6078], Class::Alu),
        c("add.w r0, r1, r2, lsl #2", &[0xeb01, 0x0082], Class::Alu),
        c("adds.w r0, r1, #0x100", &[0xf511, 0x7080], Class::Alu),
        c("addw r0, r1, #0xfff", &[0xf601, 0x70ff], Class::Alu),
        c("lsl.w r0, r1, r2", &[0xfa01, 0xf002], Class::Alu),
        c("cmp.w r0, #0x100", &[0xf5b0, 0x7f80], Class::Alu),
        n("ldr.w r0, [r1, #0x100]", &[0xf8d1, 0x0100], Class::Load, 1),
        n("ldr r0, [r1, #-4]", &[0xf851, 0x0c04], Class::Load, 1),
        n("ldr r0, [r1], #4", &[0xf851, 0x0b04], Class::Load, 1),
        n("ldr r0, [r1, #4]!", &[0xf851, 0x0f04], Class::Load, 1),
        n(
            "ldr.w r0, [r1, r2, lsl #2]",
            &[0xf851, 0x0022],
            Class::Load,
            1,
        ),
        n(
            "str.w r0, [r1, r2, lsl #2]",
            &[0xf841, 0x0022],
            Class::Store,
            1,
        ),
        n("str.w r0, [r1, #0x100]", &[0xf8c1, 0x0100], Class::Store, 1),
        n("ldrb.w r0, [r1, #0x100]", &[0xf891, 0x0100], Class::Load, 1),
        n(
            "ldrsh.w r0, [r1, #0x100]",
            &[0xf9b1, 0x0100],
            Class::Load,
            1,
        ),
        n("ldr.w r0, 1f (literal)", &[0xf8df, 0x0154], Class::Load, 1),
        pc("ldr.w pc, [r1, #0x100]", &[0xf8d1, 0xf100], Class::Load, 1),
        n(
            "ldrd r0, r1, [r2, #8]",
            &[0xe9d2, 0x0102],
            Class::LoadDual,
            2,
        ),
        n(
            "strd r0, r1, [r2, #8]",
            &[0xe9c2, 0x0102],
            Class::StoreDual,
            2,
        ),
        n("ldrex r0, [r1]", &[0xe851, 0x0f00], Class::Load, 1),
        n("strex r2, r0, [r1]", &[0xe841, 0x0200], Class::Store, 1),
        n(
            "ldmia.w r0!, {r1-r4, r8}",
            &[0xe8b0, 0x011e],
            Class::LoadMultiple,
            5,
        ),
        n(
            "ldmia.w r0, {r4-r7}",
            &[0xe890, 0x00f0],
            Class::LoadMultiple,
            4,
        ),
        n(
            "push.w {r4-r11, lr}",
            &[0xe92d, 0x4ff0],
            Class::StoreMultiple,
            9,
        ),
        pc(
            "pop.w {r4-r11, pc}",
            &[0xe8bd, 0x8ff0],
            Class::LoadMultiple,
            9,
        ),
        n("pop.w {r4-r8}", &[0xe8bd, 0x01f0], Class::LoadMultiple, 5),
        pc("tbb [pc, r0]", &[0xe8df, 0xf000], Class::TableBranch, 1),
        pc(
            "tbh [pc, r0, lsl #1]",
            &[0xe8df, 0xf010],
            Class::TableBranch,
            1,
        ),
    ]);
}

// Source (multiply, divide, DSP, hints, system):
//   mul r0,r1,r2; mla r0,r1,r2,r3; mls r0,r1,r2,r3; smull/umull/smlal/umlal/umaal r0,r1,r2,r3;
//   smulbb r0,r1,r2; smlabt r0,r1,r2,r3; smlad/smladx/smlsd r0,r1,r2,r3; smuad r0,r1,r2;
//   smlald r0,r1,r2,r3; smlalbb r0,r1,r2,r3; smmul r0,r1,r2; smmla r0,r1,r2,r3;
//   smulwb r0,r1,r2; sdiv r0,r1,r2; udiv r0,r1,r2; ssat r0,#8,r1; usat r0,#8,r1;
//   qadd r0,r1,r2; sadd16 r0,r1,r2; sxtb16 r0,r1; sxtab16 r0,r1,r2; pkhbt r0,r1,r2,lsl #8;
//   uxtb.w r0,r1; ubfx r0,r1,#4,#8; bfi r0,r1,#4,#8; clz r0,r1; nop.w; dmb ish; dsb sy;
//   isb sy; wfi.w; mrs r0,primask; msr basepri,r0
#[test]
fn thirty_two_bit_multiply_dsp_system_encodings() {
    check(&[
        c("mul r0, r1, r2", &[0xfb01, 0xf002], Class::Mul),
        c("mla r0, r1, r2, r3", &[0xfb01, 0x3002], Class::MulAcc),
        c("mls r0, r1, r2, r3", &[0xfb01, 0x3012], Class::MulAcc),
        c("smull r0, r1, r2, r3", &[0xfb82, 0x0103], Class::MulLong),
        c("umull r0, r1, r2, r3", &[0xfba2, 0x0103], Class::MulLong),
        c("smlal r0, r1, r2, r3", &[0xfbc2, 0x0103], Class::MulLongAcc),
        c("umlal r0, r1, r2, r3", &[0xfbe2, 0x0103], Class::MulLongAcc),
        c("umaal r0, r1, r2, r3", &[0xfbe2, 0x0163], Class::MulLongAcc),
        c("smulbb r0, r1, r2", &[0xfb11, 0xf002], Class::DspMul),
        c("smlabt r0, r1, r2, r3", &[0xfb11, 0x3012], Class::DspMul),
        c("smlad r0, r1, r2, r3", &[0xfb21, 0x3002], Class::DspMul),
        c("smladx r0, r1, r2, r3", &[0xfb21, 0x3012], Class::DspMul),
        c("smlsd r0, r1, r2, r3", &[0xfb41, 0x3002], Class::DspMul),
        c("smuad r0, r1, r2", &[0xfb21, 0xf002], Class::DspMul),
        c(
            "smlald r0, r1, r2, r3",
            &[0xfbc2, 0x01c3],
            Class::MulLongAcc,
        ),
        c(
            "smlalbb r0, r1, r2, r3",
            &[0xfbc2, 0x0183],
            Class::MulLongAcc,
        ),
        c("smmul r0, r1, r2", &[0xfb51, 0xf002], Class::DspMul),
        c("smmla r0, r1, r2, r3", &[0xfb51, 0x3002], Class::DspMul),
        c("smulwb r0, r1, r2", &[0xfb31, 0xf002], Class::DspMul),
        c("sdiv r0, r1, r2", &[0xfb91, 0xf0f2], Class::Div),
        c("udiv r0, r1, r2", &[0xfbb1, 0xf0f2], Class::Div),
        c("ssat r0, #8, r1", &[0xf301, 0x0007], Class::Alu),
        c("usat r0, #8, r1", &[0xf381, 0x0008], Class::Alu),
        c("qadd r0, r1, r2", &[0xfa82, 0xf081], Class::Alu),
        c("sadd16 r0, r1, r2", &[0xfa91, 0xf002], Class::Alu),
        c("sxtb16 r0, r1", &[0xfa2f, 0xf081], Class::Alu),
        c("sxtab16 r0, r1, r2", &[0xfa21, 0xf082], Class::Alu),
        c("pkhbt r0, r1, r2, lsl #8", &[0xeac1, 0x2002], Class::Alu),
        c("uxtb.w r0, r1", &[0xfa5f, 0xf081], Class::Alu),
        c("ubfx r0, r1, #4, #8", &[0xf3c1, 0x1007], Class::Alu),
        c("bfi r0, r1, #4, #8", &[0xf361, 0x100b], Class::Alu),
        c("clz r0, r1", &[0xfab1, 0xf081], Class::Alu),
        c("nop.w", &[0xf3af, 0x8000], Class::Hint),
        c("dmb ish", &[0xf3bf, 0x8f5b], Class::Barrier),
        c("dsb sy", &[0xf3bf, 0x8f4f], Class::Barrier),
        c("isb sy", &[0xf3bf, 0x8f6f], Class::Isb),
        c("wfi.w", &[0xf3af, 0x8003], Class::WaitFor),
        c("mrs r0, primask", &[0xf3ef, 0x8010], Class::Mrs),
        c("msr basepri, r0", &[0xf380, 0x8811], Class::Msr),
    ]);
}

// Source (FPU, same block, -C target-cpu=cortex-m4 on thumbv7em-none-eabihf):
//   vldr s0,[r0,#4]; vldr d1,[r0,#8]; vstr s0,[r0,#4]; vstr d1,[r0]; vldmia r0!,{s0-s3};
//   vldmia r0!,{d0-d2}; vstmia r0,{s4-s5}; vpush {s16-s23}; vpop {s16-s23}; vpush {d8-d9};
//   vadd/vsub/vmul/vnmul/vmla/vmls/vnmla/vfma/vdiv.f32 s0,s1,s2; vsqrt/vabs/vneg.f32 s0,s1;
//   vcmp.f32 s0,s1; vcvt.s32.f32 s0,s1; vcvt.f32.s32 s0,s1; vmov.f32 s0,#1.0; vmov.f32 s0,s1;
//   vmov s0,r0; vmov r0,s0; vmov r0,r1,d0; vmov s0,s1,r0,r1; vmrs APSR_nzcv,fpscr; vmsr fpscr,r0
#[test]
fn floating_point_encodings() {
    check(&[
        n("vldr s0, [r0, #4]", &[0xed90, 0x0a01], Class::FpLoad, 1),
        n("vldr d1, [r0, #8]", &[0xed90, 0x1b02], Class::FpLoad, 2),
        n("vstr s0, [r0, #4]", &[0xed80, 0x0a01], Class::FpStore, 1),
        n("vstr d1, [r0]", &[0xed80, 0x1b00], Class::FpStore, 2),
        n(
            "vldmia r0!, {s0-s3}",
            &[0xecb0, 0x0a04],
            Class::FpLoadMultiple,
            4,
        ),
        n(
            "vldmia r0!, {d0-d2}",
            &[0xecb0, 0x0b06],
            Class::FpLoadMultiple,
            6,
        ),
        n(
            "vstmia r0, {s4-s5}",
            &[0xec80, 0x2a02],
            Class::FpStoreMultiple,
            2,
        ),
        n(
            "vpush {s16-s23}",
            &[0xed2d, 0x8a08],
            Class::FpStoreMultiple,
            8,
        ),
        n(
            "vpop {s16-s23}",
            &[0xecbd, 0x8a08],
            Class::FpLoadMultiple,
            8,
        ),
        n(
            "vpush {d8-d9}",
            &[0xed2d, 0x8b04],
            Class::FpStoreMultiple,
            4,
        ),
        c("vadd.f32 s0, s1, s2", &[0xee30, 0x0a81], Class::FpAlu),
        c("vsub.f32 s0, s1, s2", &[0xee30, 0x0ac1], Class::FpAlu),
        c("vmul.f32 s0, s1, s2", &[0xee20, 0x0a81], Class::FpAlu),
        c("vnmul.f32 s0, s1, s2", &[0xee20, 0x0ac1], Class::FpAlu),
        c("vmla.f32 s0, s1, s2", &[0xee00, 0x0a81], Class::FpMac),
        c("vmls.f32 s0, s1, s2", &[0xee00, 0x0ac1], Class::FpMac),
        c("vnmla.f32 s0, s1, s2", &[0xee10, 0x0ac1], Class::FpMac),
        c("vfma.f32 s0, s1, s2", &[0xeea0, 0x0a81], Class::FpMac),
        c("vdiv.f32 s0, s1, s2", &[0xee80, 0x0a81], Class::FpDivSqrt),
        c("vsqrt.f32 s0, s1", &[0xeeb1, 0x0ae0], Class::FpDivSqrt),
        c("vabs.f32 s0, s1", &[0xeeb0, 0x0ae0], Class::FpAlu),
        c("vneg.f32 s0, s1", &[0xeeb1, 0x0a60], Class::FpAlu),
        c("vcmp.f32 s0, s1", &[0xeeb4, 0x0a60], Class::FpAlu),
        c("vcvt.s32.f32 s0, s1", &[0xeebd, 0x0ae0], Class::FpAlu),
        c("vcvt.f32.s32 s0, s1", &[0xeeb8, 0x0ae0], Class::FpAlu),
        c("vmov.f32 s0, #1.0", &[0xeeb7, 0x0a00], Class::FpAlu),
        c("vmov.f32 s0, s1", &[0xeeb0, 0x0a60], Class::FpAlu),
        c("vmov s0, r0", &[0xee00, 0x0a10], Class::FpMovCore),
        c("vmov r0, s0", &[0xee10, 0x0a10], Class::FpMovCore),
        c("vmov r0, r1, d0", &[0xec51, 0x0b10], Class::FpMovCore),
        c("vmov s0, s1, r0, r1", &[0xec41, 0x0a10], Class::FpMovCore),
        c("vmrs APSR_nzcv, fpscr", &[0xeef1, 0xfa10], Class::FpMov),
        c("vmsr fpscr, r0", &[0xeee1, 0x0a10], Class::FpMov),
    ]);
}

#[test]
fn load_store_flags_and_class_names() {
    let ldr = decode(&t16(0x6808)); // ldr r0, [r1]
    assert!(ldr.is_load() && !ldr.is_store());
    assert!(!ldr.register_offset());
    let str_reg = decode(&t16(0x5088)); // str r0, [r1, r2]
    assert!(str_reg.is_store() && !str_reg.is_load());
    assert!(str_reg.register_offset());
    assert!(decode(&t32(0xf851, 0x0022)).register_offset()); // ldr.w r0, [r1, r2, lsl #2]
    assert!(!decode(&t32(0xf851, 0x0b04)).register_offset()); // ldr r0, [r1], #4
    assert!(!decode(&t32(0xf8df, 0x0154)).register_offset()); // ldr.w r0, literal
    assert!(decode(&t16(0xb5f0)).is_store()); // push
    assert!(decode(&t16(0xbd10)).is_load()); // pop {r4, pc}
    assert!(decode(&t32(0xe8df, 0xf000)).is_load()); // tbb reads the table
    assert!(decode(&t32(0xed90, 0x0a01)).is_load()); // vldr
    assert!(decode(&t32(0xed2d, 0x8a08)).is_store()); // vpush
    let add = decode(&t16(0x1888));
    assert!(!add.is_load() && !add.is_store() && !add.is_conditional_branch());
    assert_eq!(add.class_name(), "alu");
    assert_eq!(decode(&t32(0xfb21, 0x3002)).class_name(), "dsp-mul");
    assert_eq!(decode(&t16(0xd110)).class_name(), "cond-branch");
    assert_eq!(decode(&[]).class_name(), "unknown");
}
