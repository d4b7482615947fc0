//! Garbage, truncated and exhaustive byte patterns never panic, and every result is sane.
//! (No proptest available: the loops below walk every first halfword and many seconds.)

use hilt_qemu_plugin::timing::{Class, Core, Insn, block_costs, cost, decode};

fn sane(insn: &Insn, bytes: &[u8]) {
    assert!(
        insn.size() == 2 || insn.size() == 4,
        "{bytes:02x?} -> {insn:?}"
    );
    assert!(!insn.class_name().is_empty());
    assert!(
        !(insn.is_load() && insn.is_store()),
        "{bytes:02x?} -> {insn:?}"
    );
    for core in Core::ALL {
        let c = cost(core, insn, Some(insn));
        assert!(
            c.cycles >= 1 && c.cycles <= 40,
            "{core:?} {bytes:02x?} -> {c:?}"
        );
        assert_eq!(
            c.taken_extra > 0,
            insn.is_conditional_branch(),
            "{core:?} {bytes:02x?}"
        );
    }
}

#[test]
fn empty_and_short_slices() {
    let empty = decode(&[]);
    assert_eq!(empty.class(), Class::Unknown);
    assert_eq!(empty.size(), 2);
    sane(&empty, &[]);
    for b in 0..=255u8 {
        let one = decode(&[b]);
        assert_eq!(one.class(), Class::Unknown);
        sane(&one, &[b]);
    }
    // First halfword of a 32-bit instruction without its second half: Unknown, size 4.
    for hw1 in [0xf000u16, 0xe92d, 0xfb91, 0xed90, 0xffff, 0xe800] {
        let b = hw1.to_le_bytes();
        for len in 2..4 {
            let v = [b[0], b[1], 0x12][..len].to_vec();
            let insn = decode(&v);
            assert_eq!(insn.class(), Class::Unknown, "{v:02x?}");
            assert_eq!(insn.size(), 4, "{v:02x?}");
            sane(&insn, &v);
        }
    }
    // A 16-bit instruction followed by extra bytes still decodes as the 16-bit one.
    assert_eq!(decode(&[0x08, 0x68, 0xff, 0xff]).class(), Class::Load);
    assert_eq!(decode(&[0x08, 0x68, 0xff, 0xff]).size(), 2);
}

#[test]
fn every_first_halfword_with_many_second_halfwords() {
    let seconds = [
        0x0000u16, 0xffff, 0x8000, 0x7fff, 0xf000, 0x0f00, 0x00f0, 0x000f, 0xaaaa, 0x5555, 0x0a10,
        0x0b00, 0xfa10, 0x8f6f, 0xf0f2, 0x0c04,
    ];
    let mut wide = 0u32;
    for hw1 in 0..=u16::MAX {
        for &hw2 in &seconds {
            let mut v = hw1.to_le_bytes().to_vec();
            v.extend_from_slice(&hw2.to_le_bytes());
            let insn = decode(&v);
            sane(&insn, &v);
            if insn.size() == 4 {
                wide += 1;
            }
        }
    }
    // 3/32 of the first halfwords (0xe800..=0xffff) announce a 32-bit instruction.
    assert_eq!(wide, 0x1800 * seconds.len() as u32);
}

#[test]
fn pseudo_random_byte_streams_in_blocks() {
    // xorshift; decode a stream the way the plugin walks a block, then cost it as a block.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..2000 {
        let len = (next() % 40) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let mut insns = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let insn = decode(&bytes[at..]);
            sane(&insn, &bytes[at..]);
            insns.push(insn);
            at += insn.size() as usize;
        }
        for core in Core::ALL {
            assert_eq!(block_costs(core, &insns).len(), insns.len());
        }
    }
}
