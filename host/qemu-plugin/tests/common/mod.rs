// Shared helpers for the integration tests (included with `mod common;`).
#![allow(dead_code)]

use hilt_qemu_plugin::timing::{Insn, decode};

/// Bytes of a 16-bit Thumb instruction as the objdump halfword `hw`.
pub fn t16(hw: u16) -> Vec<u8> {
    hw.to_le_bytes().to_vec()
}

/// Bytes of a 32-bit Thumb instruction shown by objdump as `hw1 hw2`.
pub fn t32(hw1: u16, hw2: u16) -> Vec<u8> {
    let mut v = hw1.to_le_bytes().to_vec();
    v.extend_from_slice(&hw2.to_le_bytes());
    v
}

/// Decodes a sequence given as objdump halfword groups: one element = 16-bit, two = 32-bit.
pub fn seq(items: &[&[u16]]) -> Vec<Insn> {
    items
        .iter()
        .map(|hws| match hws {
            [a] => decode(&t16(*a)),
            [a, b] => decode(&t32(*a, *b)),
            _ => panic!("bad test item"),
        })
        .collect()
}
