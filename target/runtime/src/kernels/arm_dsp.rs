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
fn pack(lo: i32, hi: i32) -> u32 {
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
}
