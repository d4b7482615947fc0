//! Which Thumb loads and stores go through SP: pushes, pops and SP-based
//! single, dual, multiple and floating-point transfers. The check calls
//! such an access outside the stack an overflow, whatever memory it lands
//! in (an overflowing stack reaches the arena's tail first, which any op
//! may otherwise touch).
//!
//! Encodings: Arm v7-M Architecture Reference Manual (DDI 0403), A5.2
//! (16-bit: PUSH 1011010, POP 1011110, LDR/STR SP-relative 1001) and A5.3
//! (32-bit: load/store multiple and dual 1110100, single 1111100, extension
//! register load/store 111011 0x; the base register is bits 3..0 of the
//! first halfword).

const SP: u16 = 13;

/// Whether the instruction in `bytes` (little-endian, 2 or 4 bytes) moves
/// data through SP.
pub fn via_sp(bytes: &[u8]) -> bool {
    let &[a, b, ..] = bytes else {
        return false;
    };
    let hw1 = u16::from_le_bytes([a, b]);
    let wide = matches!(hw1 >> 11, 0b11101..=0b11111);
    if !wide {
        return hw1 & 0xFE00 == 0xB400 || hw1 & 0xFE00 == 0xBC00 || hw1 & 0xF000 == 0x9000;
    }
    let rn = hw1 & 0xF;
    let multiple_or_dual = hw1 & 0xFE00 == 0xE800;
    let single = hw1 & 0xFE00 == 0xF800;
    let extension = hw1 >> 9 == 0x76;
    (multiple_or_dual || single || extension) && rn == SP
}

#[cfg(test)]
mod tests {
    use super::via_sp;

    fn wide(hw1: u16, hw2: u16) -> [u8; 4] {
        let (a, b) = (hw1.to_le_bytes(), hw2.to_le_bytes());
        [a[0], a[1], b[0], b[1]]
    }

    #[test]
    fn pushes_pops_and_sp_relative_transfers_are_through_sp() {
        assert!(via_sp(&0xB5F0u16.to_le_bytes())); // push {r4-r7, lr}
        assert!(via_sp(&0xBD10u16.to_le_bytes())); // pop {r4, pc}
        assert!(via_sp(&0x9801u16.to_le_bytes())); // ldr r0, [sp, #4]
        assert!(via_sp(&wide(0xE92D, 0x4FF0))); // push.w {r4-r11, lr}
        assert!(via_sp(&wide(0xE8BD, 0x8FF0))); // pop.w {r4-r11, pc}
        assert!(via_sp(&wide(0xF8CD, 0x0008))); // str.w r0, [sp, #8]
        assert!(via_sp(&wide(0xED2D, 0x8B02))); // vpush {d8}
    }

    #[test]
    fn other_transfers_and_short_input_are_not() {
        assert!(!via_sp(&0x6808u16.to_le_bytes())); // ldr r0, [r1]
        assert!(!via_sp(&wide(0xF8D1, 0x0004))); // ldr.w r0, [r1, #4]
        assert!(!via_sp(&wide(0xE891, 0x000F))); // ldm r1, {r0-r3}
        assert!(!via_sp(&wide(0xEE20, 0x0A01))); // vmul.f32: not a transfer
        assert!(!via_sp(&[0xB5]));
        assert!(!via_sp(&[]));
    }
}
