//! Cycle costs of short sequences, per core, against the published tables.
//!
//! Encodings were produced by the LLVM assembler (`rustc --emit=obj --target
//! thumbv7em-none-eabihf -C target-cpu=cortex-m4` on a `global_asm!` block, read back with
//! `llvm-objdump -d`); the assembly source is next to each sequence.
//!
//! Documents: "M4 TRM" = Arm Cortex-M4 TRM (ARM DDI 0439), Table 3-1 "Processor instruction set
//! summary", section 3.3.2 "Load/store timings", Table 7-1 "FPU instruction set".
//! "M3 TRM" = Arm Cortex-M3 TRM (ARM DDI 0337), Table 3-1 "Cortex-M3 instruction set summary".
//! "M0+ TRM" = Arm Cortex-M0+ TRM (ARM DDI 0484C), Table 3.1 "Cortex-M0+ instruction summary".

mod common;

use common::seq;
use hilt_qemu_plugin::timing::{
    BRANCH_REFILL_P as P, Core, Cost, DIVIDE_ESTIMATE, Insn, M3_LONG_MUL, M3_LONG_MUL_ACC,
    block_costs, cost,
};

fn cycles(core: Core, insns: &[Insn]) -> Vec<u32> {
    block_costs(core, insns).iter().map(|c| c.cycles).collect()
}

fn one(core: Core, hws: &[u16]) -> Cost {
    cost(core, &seq(&[hws])[0], None)
}

// --- Cortex-M4 -------------------------------------------------------------------------------

#[test]
fn m4_neighbouring_loads_pipeline() {
    // M4 TRM Table 3-1 (LDR 2, neighbouring single loads/stores pipeline) and 3.3.2.
    // ldr r0,[r1]; ldr r2,[r1,#4]; ldr r3,[r1,#8]
    let s = seq(&[&[0x6808], &[0x684a], &[0x688b]]);
    assert_eq!(cycles(Core::M4, &s), vec![2, 1, 1]);
}

#[test]
fn m4_load_then_store_pipelines_and_store_after_load() {
    // M4 TRM 3.3.2: "LDR R0,[R1,R2]; STR R0,[R3,#20] - normally three cycles total".
    // Same shape: ldr r2,[r0,r1]; str r3,[r2,#4] -- but here the STR's base is r2, the loaded
    // register, so it must NOT pipeline (address dependency): 2 + 2.
    let dependent = seq(&[&[0x5842], &[0x6053]]);
    assert_eq!(cycles(Core::M4, &dependent), vec![2, 2]);
    // ldr r0,[r1]; str r0,[r2]: stores what was loaded, address independent: 2 + 1.
    let independent = seq(&[&[0x6808], &[0x6010]]);
    assert_eq!(cycles(Core::M4, &independent), vec![2, 1]);
}

#[test]
fn m4_load_address_dependency_blocks_pipelining() {
    // M4 TRM 3.3.2: pipelined only if the first LDR's destination is not used for the next
    // address. ldr r0,[r1]; ldr r1,[r0] -> 2 + 2. And via the offset register:
    // ldr r0,[r1]; ldr r2,[r3,r0] -> 2 + 2.
    assert_eq!(cycles(Core::M4, &seq(&[&[0x6808], &[0x6801]])), vec![2, 2]);
    assert_eq!(cycles(Core::M4, &seq(&[&[0x6808], &[0x581a]])), vec![2, 2]);
}

#[test]
fn m4_nothing_pipelines_after_register_offset_store_or_around_ldrd() {
    // M4 TRM 3.3.2: nothing is pipelined after an STR with register offset; LDRD/STRD never
    // pipeline. str r0,[r1,r2]; ldr r0,[r1] -> 2 + 2.
    assert_eq!(cycles(Core::M4, &seq(&[&[0x5088], &[0x6808]])), vec![2, 2]);
    // ldrd r0,r1,[r2,#8]; ldr r3,[r1,#8] -> (1 + N = 3) + 2; ldr r0,[r1]; strd -> 2 + 3.
    assert_eq!(
        cycles(Core::M4, &seq(&[&[0xe9d2, 0x0102], &[0x688b]])),
        vec![3, 2]
    );
    assert_eq!(
        cycles(Core::M4, &seq(&[&[0x6808], &[0xe9c2, 0x0102]])),
        vec![2, 3]
    );
    // A data-processing instruction in between breaks the pair:
    // ldr r0,[r1]; adds r1,r1,#4; ldr r2,[r1,#4] -> 2 + 1 + 2.
    assert_eq!(
        cycles(Core::M4, &seq(&[&[0x6808], &[0x1d09], &[0x684a]])),
        vec![2, 1, 2]
    );
}

#[test]
fn m4_multiple_transfers() {
    // M4 TRM Table 3-1: PUSH 1 + N; POP with PC 1 + N + P; LDM 1 + N; STM 1 + N.
    assert_eq!(one(Core::M4, &[0xb5f0]).cycles, 6); // push {r4-r7, lr}: N = 5
    assert_eq!(one(Core::M4, &[0xbd10]).cycles, 1 + 2 + P); // pop {r4, pc}
    assert_eq!(one(Core::M4, &[0xbc70]).cycles, 4); // pop {r4-r6}
    assert_eq!(one(Core::M4, &[0xe890, 0x001e]).cycles, 5); // ldm.w r0, {r1-r4}
    assert_eq!(one(Core::M4, &[0xcc0f]).cycles, 5); // ldm r4!, {r0-r3}
    assert_eq!(one(Core::M4, &[0xe8bd, 0x8ff0]).cycles, 1 + 9 + P); // pop.w {r4-r11, pc}
    assert_eq!(one(Core::M4, &[0xe92d, 0x4ff0]).cycles, 10); // push.w {r4-r11, lr}
    // LDM is not a "single" load: ldr r0,[r1]; ldm r4!,{r0-r3} -> 2 + 5 (no pipelining).
    assert_eq!(cycles(Core::M4, &seq(&[&[0x6808], &[0xcc0f]])), vec![2, 5]);
}

#[test]
fn m4_branches() {
    // M4 TRM Table 3-1: B<cc> and CBZ 1 not taken, 1 + P taken; B/BL/BX/BLX 1 + P;
    // TBB/TBH 2 + P; MOV PC 1 + P; LDR PC (3.3.2) load 2 + refill P.
    assert_eq!(
        one(Core::M4, &[0xd110]),
        Cost {
            cycles: 1,
            taken_extra: P
        }
    ); // bne
    assert_eq!(
        one(Core::M4, &[0xf000, 0x80ce]),
        Cost {
            cycles: 1,
            taken_extra: P
        }
    ); // beq.w
    assert_eq!(
        one(Core::M4, &[0xb170]),
        Cost {
            cycles: 1,
            taken_extra: P
        }
    ); // cbz
    assert_eq!(
        one(Core::M4, &[0xe00f]),
        Cost {
            cycles: 1 + P,
            taken_extra: 0
        }
    ); // b
    assert_eq!(
        one(Core::M4, &[0xf000, 0xf8d0]),
        Cost {
            cycles: 1 + P,
            taken_extra: 0
        }
    ); // bl
    assert_eq!(one(Core::M4, &[0x4770]).cycles, 1 + P); // bx lr
    assert_eq!(one(Core::M4, &[0x4798]).cycles, 1 + P); // blx r3
    assert_eq!(one(Core::M4, &[0xe8df, 0xf000]).cycles, 2 + P); // tbb
    assert_eq!(one(Core::M4, &[0x46f7]).cycles, 1 + P); // mov pc, lr
    assert_eq!(one(Core::M4, &[0xf8d1, 0xf100]).cycles, 2 + P); // ldr.w pc, [r1, #0x100]
    assert_eq!(P, 2, "documented choice of the refill P");
}

#[test]
fn m4_multiply_divide_dsp() {
    // M4 TRM Table 3-1: MUL/MLA/MLS/SMULL/UMULL/SMLAL/UMLAL and all DSP MACs 1;
    // SDIV/UDIV 2..12 -> DIVIDE_ESTIMATE.
    for hws in [
        &[0xfb01u16, 0xf002][..], // mul
        &[0xfb01, 0x3002],        // mla
        &[0xfb01, 0x3012],        // mls
        &[0xfb82, 0x0103],        // smull
        &[0xfbe2, 0x0103],        // umlal
        &[0xfb21, 0x3002],        // smlad
        &[0xfb21, 0xf002],        // smuad
        &[0xfbc2, 0x01c3],        // smlald
        &[0xfb51, 0x3002],        // smmla
        &[0xf301, 0x0007],        // ssat
        &[0xfa91, 0xf002],        // sadd16
    ] {
        assert_eq!(
            one(Core::M4, hws),
            Cost {
                cycles: 1,
                taken_extra: 0
            },
            "{hws:04x?}"
        );
    }
    assert_eq!(one(Core::M4, &[0xfb91, 0xf0f2]).cycles, DIVIDE_ESTIMATE); // sdiv
    assert_eq!(one(Core::M4, &[0xfbb1, 0xf0f2]).cycles, DIVIDE_ESTIMATE); // udiv
    assert!((2..=12).contains(&DIVIDE_ESTIMATE));
}

#[test]
fn m4_fpu() {
    // M4 TRM Table 7-1 "FPU instruction set".
    let t = |hws: &[u16]| one(Core::M4, hws).cycles;
    assert_eq!(t(&[0xed90, 0x0a01]), 2); // vldr s0: single 2
    assert_eq!(t(&[0xed90, 0x1b02]), 3); // vldr d1: double 3
    assert_eq!(t(&[0xed80, 0x0a01]), 2); // vstr s0
    assert_eq!(t(&[0xecb0, 0x0a04]), 5); // vldmia {s0-s3}: 1 + N
    assert_eq!(t(&[0xecb0, 0x0b06]), 7); // vldmia {d0-d2}: 1 + 2N
    assert_eq!(t(&[0xed2d, 0x8a08]), 9); // vpush {s16-s23}: 1 + N
    assert_eq!(t(&[0xecbd, 0x8a08]), 9); // vpop {s16-s23}
    assert_eq!(t(&[0xee30, 0x0a81]), 1); // vadd
    assert_eq!(t(&[0xee20, 0x0a81]), 1); // vmul
    assert_eq!(t(&[0xee00, 0x0a81]), 3); // vmla
    assert_eq!(t(&[0xeea0, 0x0a81]), 3); // vfma
    assert_eq!(t(&[0xee80, 0x0a81]), 14); // vdiv
    assert_eq!(t(&[0xeeb1, 0x0ae0]), 14); // vsqrt
    assert_eq!(t(&[0xeebd, 0x0ae0]), 1); // vcvt
    assert_eq!(t(&[0xee00, 0x0a10]), 2); // vmov s0, r0
    assert_eq!(t(&[0xec51, 0x0b10]), 2); // vmov r0, r1, d0
    assert_eq!(t(&[0xeef1, 0xfa10]), 1); // vmrs
    // FP loads are not single core loads: ldr r0,[r1]; vldr s0,[r0,#4] -> 2 + 2.
    assert_eq!(
        cycles(Core::M4, &seq(&[&[0x6808], &[0xed90, 0x0a01]])),
        vec![2, 2]
    );
}

#[test]
fn m4_system_and_hints() {
    // M4 TRM Table 3-1: NOP 1, IT 1, DMB/DSB 1 + B (B >= 0), ISB 1 + B (B >= P), MRS/MSR 1.
    let t = |hws: &[u16]| one(Core::M4, hws).cycles;
    assert_eq!(t(&[0xbf00]), 1);
    assert_eq!(t(&[0xbf08]), 1);
    assert_eq!(t(&[0xf3bf, 0x8f5b]), 1);
    assert_eq!(t(&[0xf3bf, 0x8f6f]), 1 + P);
    assert_eq!(t(&[0xf3ef, 0x8010]), 1);
    assert_eq!(t(&[0xde00]), 1); // udf: unknown -> 1
}

// --- Cortex-M3 -------------------------------------------------------------------------------

#[test]
fn m3_multiplies_differ_from_m4() {
    // M3 TRM Table 3-1: MUL 1, MLA/MLS 2, SMULL/UMULL 3..5, SMLAL/UMLAL 4..7.
    assert_eq!(one(Core::M3, &[0xfb01, 0xf002]).cycles, 1);
    assert_eq!(one(Core::M3, &[0xfb01, 0x3002]).cycles, 2);
    assert_eq!(one(Core::M3, &[0xfb01, 0x3012]).cycles, 2);
    assert_eq!(one(Core::M3, &[0xfb82, 0x0103]).cycles, M3_LONG_MUL);
    assert_eq!(one(Core::M3, &[0xfba2, 0x0103]).cycles, M3_LONG_MUL);
    assert_eq!(one(Core::M3, &[0xfbc2, 0x0103]).cycles, M3_LONG_MUL_ACC);
    assert!((3..=5).contains(&M3_LONG_MUL));
    assert!((4..=7).contains(&M3_LONG_MUL_ACC));
    assert_eq!(one(Core::M3, &[0xfb91, 0xf0f2]).cycles, DIVIDE_ESTIMATE);
    // No FPU on the M3: vdiv would fault, costed 1.
    assert_eq!(one(Core::M3, &[0xee80, 0x0a81]).cycles, 1);
}

#[test]
fn m3_loads_and_branches_match_m4() {
    // M3 TRM Table 3-1 and 3.3.1 "Load/store timings": same load/store and branch rules.
    let s = seq(&[&[0x6808], &[0x684a], &[0x688b], &[0xbd10], &[0xd110]]);
    assert_eq!(block_costs(Core::M3, &s), block_costs(Core::M4, &s));
    assert_eq!(cycles(Core::M3, &s), vec![2, 1, 1, 1 + 2 + P, 1]);
}

// --- Cortex-M0+ ------------------------------------------------------------------------------

#[test]
fn m0plus_loads_do_not_pipeline() {
    // M0+ TRM Table 3.1: LDR 2 each; no pipelining. ldr; ldr; ldr -> 2 + 2 + 2.
    let s = seq(&[&[0x6808], &[0x684a], &[0x688b]]);
    assert_eq!(cycles(Core::M0Plus, &s), vec![2, 2, 2]);
    // str r0,[r2]; strh r2,[r5] -> 2 + 2.
    assert_eq!(
        cycles(Core::M0Plus, &seq(&[&[0x6010], &[0x802a]])),
        vec![2, 2]
    );
}

#[test]
fn m0plus_branches_calls_and_multiply() {
    // M0+ TRM Table 3.1: B<cc> 1 not taken / 2 taken; B 2; BL 3; BX 2; BLX 2; MOV PC 2;
    // MULS 1 (fast multiplier, see M0PLUS_MULS).
    let t = |hws: &[u16]| one(Core::M0Plus, hws);
    assert_eq!(
        t(&[0xd110]),
        Cost {
            cycles: 1,
            taken_extra: 1
        }
    ); // bne
    assert_eq!(
        t(&[0xe00f]),
        Cost {
            cycles: 2,
            taken_extra: 0
        }
    ); // b
    assert_eq!(
        t(&[0xf000, 0xf8d0]),
        Cost {
            cycles: 3,
            taken_extra: 0
        }
    ); // bl
    assert_eq!(t(&[0x4770]).cycles, 2); // bx lr
    assert_eq!(t(&[0x4798]).cycles, 2); // blx r3
    assert_eq!(t(&[0x46f7]).cycles, 2); // mov pc, lr
    assert_eq!(t(&[0x4348]).cycles, 1); // muls
    assert_eq!(t(&[0x4640]).cycles, 1); // mov r0, r8
}

#[test]
fn m0plus_multiple_transfers_and_system() {
    // M0+ TRM Table 3.1: PUSH 1 + N; POP 1 + N; POP with PC 3 + N; LDM/STM 1 + N;
    // DMB/DSB/ISB 3; MRS/MSR 3; CPS 1; WFI/WFE 2.
    let t = |hws: &[u16]| one(Core::M0Plus, hws).cycles;
    assert_eq!(t(&[0xb5f0]), 6); // push {r4-r7, lr}
    assert_eq!(t(&[0xbd10]), 3 + 2); // pop {r4, pc}
    assert_eq!(t(&[0xbc70]), 4); // pop {r4-r6}
    assert_eq!(t(&[0xcc0f]), 5); // ldm r4!, {r0-r3}
    assert_eq!(t(&[0xc101]), 2); // stm r1!, {r0}
    assert_eq!(t(&[0xf3bf, 0x8f5b]), 3); // dmb
    assert_eq!(t(&[0xf3bf, 0x8f6f]), 3); // isb
    assert_eq!(t(&[0xf3ef, 0x8010]), 3); // mrs
    assert_eq!(t(&[0xf380, 0x8811]), 3); // msr
    assert_eq!(t(&[0xb672]), 1); // cpsid i
    assert_eq!(t(&[0xbf30]), 2); // wfi
}

// --- M33, M7, M55 and the core list ---------------------------------------------------------

/// A mix of every class that differs between cores.
fn sampler() -> Vec<Insn> {
    seq(&[
        &[0x6808],
        &[0x684a],
        &[0x5088],
        &[0x6808],
        &[0xb5f0],
        &[0xbd10],
        &[0xd110],
        &[0xf000, 0xf8d0],
        &[0xfb01, 0x3002],
        &[0xfb82, 0x0103],
        &[0xfb21, 0x3002],
        &[0xfb91, 0xf0f2],
        &[0xee80, 0x0a81],
        &[0xed90, 0x1b02],
        &[0xe8df, 0xf000],
    ])
}

#[test]
fn m33_m7_m55_use_the_m4_rules() {
    // The Cortex-M33 TRM publishes no cycle table: M33 = M4 rules; M7/M55 reuse them, rough.
    let s = sampler();
    let m4 = block_costs(Core::M4, &s);
    for core in [Core::M33, Core::M7, Core::M55] {
        assert_eq!(block_costs(core, &s), m4, "{core:?}");
    }
    assert_ne!(block_costs(Core::M3, &s), m4);
    assert_ne!(block_costs(Core::M0Plus, &s), m4);
    assert!(Core::M7.rough() && Core::M55.rough());
    for core in [Core::M0Plus, Core::M3, Core::M4, Core::M33] {
        assert!(!core.rough(), "{core:?}");
    }
}

#[test]
fn block_costs_uses_predecessor_and_handles_empty() {
    let s = sampler();
    for core in Core::ALL {
        let costs = block_costs(core, &s);
        assert_eq!(costs.len(), s.len());
        assert_eq!(costs[0], cost(core, &s[0], None));
        for i in 1..s.len() {
            assert_eq!(
                costs[i],
                cost(core, &s[i], Some(&s[i - 1])),
                "{core:?} #{i}"
            );
        }
        assert!(block_costs(core, &[]).is_empty());
    }
    // Only conditional branches have a taken cost.
    for core in Core::ALL {
        for (insn, c) in s.iter().zip(block_costs(core, &s)) {
            assert_eq!(
                c.taken_extra > 0,
                insn.is_conditional_branch(),
                "{core:?} {insn:?}"
            );
        }
    }
}

#[test]
fn core_names_parse() {
    for core in Core::ALL {
        assert_eq!(Core::parse(core.name()), Some(core));
        assert_eq!(Core::parse(&core.name().to_uppercase()), Some(core));
    }
    let cases = [
        ("cortex-m0plus", Core::M0Plus),
        ("m0+", Core::M0Plus),
        ("M0PLUS", Core::M0Plus),
        ("Cortex-M0+", Core::M0Plus),
        ("m3", Core::M3),
        ("Cortex-M4", Core::M4),
        ("m33", Core::M33),
        ("CORTEX-M7", Core::M7),
        ("m55", Core::M55),
    ];
    for (name, core) in cases {
        assert_eq!(Core::parse(name), Some(core), "{name}");
    }
    for bad in [
        "",
        "m0",
        "cortex-m",
        "m4f",
        "cortex-m85",
        "arm7",
        "cortex-",
        "m 4",
    ] {
        assert_eq!(Core::parse(bad), None, "{bad}");
    }
    assert_eq!(Core::M4.name(), "cortex-m4");
    assert_eq!(Core::M0Plus.name(), "cortex-m0plus");
}
