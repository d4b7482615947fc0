//! The Cortex-M DSP extension (feature `arm-dsp`: Cortex-M4, M7, and M33/M55
//! cores built with it): two 16-bit multiply-adds per instruction, and the
//! byte-pair unpacking that feeds them.
//!
//! Four int8 values load as one word; `SXTB16` sign-extends bytes 0 and 2
//! into two halfwords and, rotated by 8, bytes 1 and 3; `SADD16` adds an
//! offset to both; `SMLAD` adds both products to an accumulator. Weights
//! unpacked the same way pair up with the inputs, so every product meets its
//! partner without re-ordering either operand.
//!
//! Every instruction is one `asm!` marked `pure, nomem`, so the compiler
//! still allocates registers and hoists or merges them like any arithmetic.
//! Off the target (host tests, and cores without DSP) each is emulated bit
//! for bit in plain Rust, so kernels written with them are tested on the
//! host against their plain loops.

/// Defines a register-only DSP instruction with its plain-Rust emulation.
macro_rules! dsp_instruction {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident),+) $asm:literal, $emulated:expr) => {
        $(#[$doc])*
        #[inline(always)]
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        pub(crate) fn $name($($arg: u32),+) -> u32 {
            #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
            {
                let r: u32;
                // SAFETY: a register-only DSP instruction (the feature
                // promises the core has it); no memory or stack is touched.
                // Flags are not claimed preserved (SADD16 sets GE, SMLAD may
                // set the sticky Q flag; nothing here reads either).
                unsafe {
                    core::arch::asm!($asm, r = lateout(reg) r, $($arg = in(reg) $arg),+,
                        options(pure, nomem, nostack));
                }
                r
            }
            #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
            {
                $emulated
            }
        }
    };
}

/// Halfword `h` (0 low, 1 high) of `v`, signed.
#[cfg_attr(all(target_arch = "arm", feature = "arm-dsp"), allow(dead_code))]
#[inline(always)]
fn half(v: u32, h: u32) -> i32 {
    i32::from((v >> (16 * h)) as u16 as i16)
}

/// Two halfwords packed into a word.
#[inline(always)]
pub(crate) fn pack(lo: i32, hi: i32) -> u32 {
    u32::from(lo as u16) | (u32::from(hi as u16) << 16)
}

dsp_instruction!(
    /// `SXTB16 rd, rm`: bytes 0 and 2, sign-extended into halfwords.
    fn sxtb16(v) "sxtb16 {r}, {v}",
    pack(i32::from(v as u8 as i8), i32::from((v >> 16) as u8 as i8))
);

dsp_instruction!(
    /// `SXTB16 rd, rm, ROR #8`: bytes 1 and 3, sign-extended into halfwords.
    fn sxtb16_ror8(v) "sxtb16 {r}, {v}, ror #8",
    sxtb16(v.rotate_right(8))
);

dsp_instruction!(
    /// `SADD16`: halfword-wise wrapping addition.
    fn sadd16(a, b) "sadd16 {r}, {a}, {b}",
    pack(half(a, 0) + half(b, 0), half(a, 1) + half(b, 1))
);

dsp_instruction!(
    /// `SMLAD`: `acc + lo(a)·lo(b) + hi(a)·hi(b)`, signed halfwords, wrapping.
    fn smlad(a, b, acc) "smlad {r}, {a}, {b}, {acc}",
    (acc as i32)
        .wrapping_add(half(a, 0) * half(b, 0))
        .wrapping_add(half(a, 1) * half(b, 1)) as u32
);

// DEPTHWISE_CONV_2D's instructions: products stay per channel, so each
// halfword meets only its own partner.

dsp_instruction!(
    /// `SMLABB`: `acc + lo(a)·lo(b)`, signed halfwords, wrapping.
    /// On the target only the `asm!` blocks below use it (off it, their
    /// emulation does).
    #[cfg_attr(all(target_arch = "arm", feature = "arm-dsp"), allow(dead_code))]
    fn smlabb(a, b, acc) "smlabb {r}, {a}, {b}, {acc}",
    (acc as i32).wrapping_add(half(a, 0) * half(b, 0)) as u32
);

dsp_instruction!(
    /// `SMLATT`: `acc + hi(a)·hi(b)`, signed halfwords, wrapping.
    /// On the target only the `asm!` blocks below use it (off it, their
    /// emulation does).
    #[cfg_attr(all(target_arch = "arm", feature = "arm-dsp"), allow(dead_code))]
    fn smlatt(a, b, acc) "smlatt {r}, {a}, {b}, {acc}",
    (acc as i32).wrapping_add(half(a, 1) * half(b, 1)) as u32
);

dsp_instruction!(
    /// `USADA8`: `acc + Σ |a_i − b_i|` over the four unsigned bytes.
    fn usada8(a, b, acc) "usada8 {r}, {a}, {b}, {acc}",
    (0..4).fold(acc, |s, i| {
        let (x, y) = ((a >> (8 * i)) as u8, (b >> (8 * i)) as u8);
        s.wrapping_add(u32::from(x.abs_diff(y)))
    })
);

dsp_instruction!(
    /// `SMMULR`: the high word of `a·b`, rounded (`(a·b + 2^31) >> 32`).
    fn smmulr(a, b) "smmulr {r}, {a}, {b}",
    ((i64::from(a as i32) * i64::from(b as i32) + (1 << 31)) >> 32) as u32
);

/// Four per-channel multiply-adds of one tap: `acc[i] += x_i · w_i` for the
/// four signed bytes of `x` and of `w` (`SXTB16` ×4, `SMLABB`/`SMLATT` ×4).
/// One `asm!` block rather than eight, so that the compiler keeps each
/// tap's unpacked halves together instead of hoisting every tap's unpacking
/// ahead of the multiplies (which spills them all).
#[inline(always)]
pub(crate) fn mla_bytes4(x: u32, w: u32, acc: &mut [u32; 4]) {
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    {
        let [mut a0, mut a1, mut a2, mut a3] = *acc;
        // SAFETY: register-only DSP instructions (the feature promises the
        // core has them); no memory or stack is touched; Q is not read.
        unsafe {
            core::arch::asm!(
                "sxtb16 {xh}, {x}",
                "sxtb16 {wh}, {w}",
                "smlabb {a0}, {xh}, {wh}, {a0}",
                "smlatt {a2}, {xh}, {wh}, {a2}",
                "sxtb16 {xh}, {x}, ror #8",
                "sxtb16 {wh}, {w}, ror #8",
                "smlabb {a1}, {xh}, {wh}, {a1}",
                "smlatt {a3}, {xh}, {wh}, {a3}",
                x = in(reg) x,
                w = in(reg) w,
                xh = out(reg) _,
                wh = out(reg) _,
                a0 = inout(reg) a0,
                a1 = inout(reg) a1,
                a2 = inout(reg) a2,
                a3 = inout(reg) a3,
                options(pure, nomem, nostack),
            );
        }
        *acc = [a0, a1, a2, a3];
    }
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    {
        let (x02, w02) = (sxtb16(x), sxtb16(w));
        let (x13, w13) = (sxtb16_ror8(x), sxtb16_ror8(w));
        *acc = [
            smlabb(x02, w02, acc[0]),
            smlabb(x13, w13, acc[1]),
            smlatt(x02, w02, acc[2]),
            smlatt(x13, w13, acc[3]),
        ];
    }
}

/// [`mla_bytes4`] with the weights unpacked beforehand: `w` is
/// `[SXTB16(w), SXTB16(w ror 8)]` (channels 0 and 2, 1 and 3), so a tap
/// costs two `SXTB16` instead of four when its weights serve many pixels.
#[inline(always)]
pub(crate) fn mla_bytes4_unpacked(x: u32, w: [u32; 2], acc: &mut [u32; 4]) {
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    {
        let [mut a0, mut a1, mut a2, mut a3] = *acc;
        // SAFETY: as in `mla_bytes4`.
        unsafe {
            core::arch::asm!(
                "sxtb16 {xh}, {x}",
                "smlabb {a0}, {xh}, {w02}, {a0}",
                "smlatt {a2}, {xh}, {w02}, {a2}",
                "sxtb16 {xh}, {x}, ror #8",
                "smlabb {a1}, {xh}, {w13}, {a1}",
                "smlatt {a3}, {xh}, {w13}, {a3}",
                x = in(reg) x,
                w02 = in(reg) w[0],
                w13 = in(reg) w[1],
                xh = out(reg) _,
                a0 = inout(reg) a0,
                a1 = inout(reg) a1,
                a2 = inout(reg) a2,
                a3 = inout(reg) a3,
                options(pure, nomem, nostack),
            );
        }
        *acc = [a0, a1, a2, a3];
    }
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    {
        let (x02, x13) = (sxtb16(x), sxtb16_ror8(x));
        *acc = [
            smlabb(x02, w[0], acc[0]),
            smlabb(x13, w[1], acc[1]),
            smlatt(x02, w[0], acc[2]),
            smlatt(x13, w[1], acc[3]),
        ];
    }
}

/// [`mla_bytes4`] with `offset` (both halfwords, [`splat16`]) added to
/// each input byte: `acc[i] += (x_i + offset) · w_i`.
#[inline(always)]
pub(crate) fn mla_bytes4_offset(x: u32, w: u32, offset: u32, acc: &mut [u32; 4]) {
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    {
        let [mut a0, mut a1, mut a2, mut a3] = *acc;
        // SAFETY: as in `mla_bytes4`; SADD16's GE flags are not read.
        unsafe {
            core::arch::asm!(
                "sxtb16 {xh}, {x}",
                "sadd16 {xh}, {xh}, {off}",
                "sxtb16 {wh}, {w}",
                "smlabb {a0}, {xh}, {wh}, {a0}",
                "smlatt {a2}, {xh}, {wh}, {a2}",
                "sxtb16 {xh}, {x}, ror #8",
                "sadd16 {xh}, {xh}, {off}",
                "sxtb16 {wh}, {w}, ror #8",
                "smlabb {a1}, {xh}, {wh}, {a1}",
                "smlatt {a3}, {xh}, {wh}, {a3}",
                x = in(reg) x,
                w = in(reg) w,
                off = in(reg) offset,
                xh = out(reg) _,
                wh = out(reg) _,
                a0 = inout(reg) a0,
                a1 = inout(reg) a1,
                a2 = inout(reg) a2,
                a3 = inout(reg) a3,
                options(pure, nomem, nostack),
            );
        }
        *acc = [a0, a1, a2, a3];
    }
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    {
        let (x02, w02) = (sadd16(sxtb16(x), offset), sxtb16(w));
        let (x13, w13) = (sadd16(sxtb16_ror8(x), offset), sxtb16_ror8(w));
        *acc = [
            smlabb(x02, w02, acc[0]),
            smlabb(x13, w13, acc[1]),
            smlatt(x02, w02, acc[2]),
            smlatt(x13, w13, acc[3]),
        ];
    }
}

/// Four per-channel multiply-adds against one input value: `acc[i] +=
/// x · w_i` for the four signed bytes of `w`, `x` in both halfwords of
/// `xx` (a depth multiplier of 4 or more: four outputs of one input).
#[inline(always)]
pub(crate) fn mla_shared4(xx: u32, w: u32, acc: &mut [u32; 4]) {
    #[cfg(all(target_arch = "arm", feature = "arm-dsp"))]
    {
        let [mut a0, mut a1, mut a2, mut a3] = *acc;
        // SAFETY: as in `mla_bytes4`.
        unsafe {
            core::arch::asm!(
                "sxtb16 {wh}, {w}",
                "smlabb {a0}, {xx}, {wh}, {a0}",
                "smlatt {a2}, {xx}, {wh}, {a2}",
                "sxtb16 {wh}, {w}, ror #8",
                "smlabb {a1}, {xx}, {wh}, {a1}",
                "smlatt {a3}, {xx}, {wh}, {a3}",
                xx = in(reg) xx,
                w = in(reg) w,
                wh = out(reg) _,
                a0 = inout(reg) a0,
                a1 = inout(reg) a1,
                a2 = inout(reg) a2,
                a3 = inout(reg) a3,
                options(pure, nomem, nostack),
            );
        }
        *acc = [a0, a1, a2, a3];
    }
    #[cfg(not(all(target_arch = "arm", feature = "arm-dsp")))]
    {
        let (w02, w13) = (sxtb16(w), sxtb16_ror8(w));
        *acc = [
            smlabb(xx, w02, acc[0]),
            smlabb(xx, w13, acc[1]),
            smlatt(xx, w02, acc[2]),
            smlatt(xx, w13, acc[3]),
        ];
    }
}

/// `SMLAD` on signed accumulators.
#[inline(always)]
pub(crate) fn mla2(a: u32, b: u32, acc: i32) -> i32 {
    smlad(a, b, acc as u32) as i32
}

/// A 16-bit offset in both halfwords (for [`sadd16`]).
#[inline(always)]
pub(crate) fn splat16(offset: i32) -> u32 {
    pack(offset, offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emulation_is_the_instruction_set() {
        // SXTB16: bytes 0 and 2 of 0x80_7F_FF_01 are 0x01 and 0x7F.
        assert_eq!(sxtb16(0x807F_FF01), 0x007F_0001);
        assert_eq!(sxtb16_ror8(0x807F_FF01), 0xFF80_FFFF);
        assert_eq!(sadd16(0x7FFF_0001, 0x0001_FFFF), 0x8000_0000);
        assert_eq!(mla2(pack(-3, 4), pack(5, -6), 10), 10 - 15 - 24);
        assert_eq!(
            mla2(pack(-32768, -32768), pack(-32768, -32768), 0),
            i32::MIN
        );
        assert_eq!(splat16(-7), 0xFFF9_FFF9);
    }

    #[test]
    fn halfword_multiply_adds_take_one_half_each() {
        let (a, b) = (pack(-3, 7), pack(5, -32768));
        assert_eq!(smlabb(a, b, 10) as i32, 10 - 15);
        assert_eq!(smlatt(a, b, 10) as i32, 10 - 7 * 32768);
        // Wrapping, as the instruction (it sets Q, never saturates).
        let m = pack(-32768, -32768);
        assert_eq!(
            smlabb(m, m, i32::MAX as u32) as i32,
            i32::MIN + (1 << 30) - 1
        );
        assert_eq!(
            smlatt(m, m, i32::MAX as u32) as i32,
            i32::MIN + (1 << 30) - 1
        );
    }

    #[test]
    fn byte_multiply_adds_keep_channels_apart() {
        let x = u32::from_le_bytes([0x80, 0x7F, 0xFF, 0x01]);
        let w = u32::from_le_bytes([0x80, 0x80, 0x03, 0x7F]);
        let mut acc = [1, 2, 3, 4];
        mla_bytes4(x, w, &mut acc);
        let want = [1 + 128 * 128, 2 - 127 * 128, 3 - 3, 4 + 127];
        assert_eq!(acc.map(|a| a as i32), want);
        let mut acc = [1, 2, 3, 4];
        mla_bytes4_offset(x, w, splat16(128), &mut acc);
        let want = [1, 2 - 255 * 128, 3 + 3 * 127, 4 + 129 * 127];
        assert_eq!(acc.map(|a| a as i32), want);
        let mut acc = [1, 2, 3, 4];
        mla_shared4(splat16(-255), w, &mut acc);
        let want = [1 + 255 * 128, 2 + 255 * 128, 3 - 255 * 3, 4 - 255 * 127];
        assert_eq!(acc.map(|a| a as i32), want);
    }

    #[test]
    fn byte_differences_add_up_unsigned() {
        let (a, b) = (
            u32::from_le_bytes([0, 255, 7, 128]),
            u32::from_le_bytes([255, 0, 9, 128]),
        );
        assert_eq!(usada8(a, b, 5), 5 + 255 + 255 + 2);
        assert_eq!(usada8(a, 0, u32::MAX), (255 + 7 + 128) - 1);
    }

    #[test]
    fn rounded_high_multiply_rounds_half_up() {
        assert_eq!(smmulr(1 << 31, 1 << 31) as i32, 1 << 30);
        // 3·(-2^31) / 2^32 = -1.5 → -1 and 1.5 → 2 (half up); 0.75 → 1.
        assert_eq!(smmulr(3, 1 << 31) as i32, -1);
        assert_eq!(smmulr(3, 0x4000_0000) as i32, 1);
        assert_eq!(smmulr(6, 0x4000_0000) as i32, 2);
        assert_eq!(smmulr(-6i32 as u32, 0x4000_0000) as i32, -1);
        assert_eq!(smmulr(i32::MAX as u32, i32::MAX as u32) as i32, 0x3FFF_FFFF);
    }
}
