//! The tag byte every message starts with, one constant per message.
//!
//! Its own module because both directions read it: the encoder writes the
//! tag [`Message::tag`](super::Message::tag) picks, the decoder matches on
//! it to choose the payload's layout.

pub(super) const HELLO_REQUEST: u8 = 0x01;
pub(super) const LOAD_INPUT: u8 = 0x02;
pub(super) const INVOKE: u8 = 0x03;
pub(super) const PLAN_REQUEST: u8 = 0x04;
pub(super) const RESET_STATE: u8 = 0x05;
pub(super) const SET_OFFLOAD: u8 = 0x06;
pub(super) const HELLO: u8 = 0x81;
pub(super) const INPUT_ACK: u8 = 0x82;
pub(super) const OUTPUT_CHUNK: u8 = 0x83;
pub(super) const TIMING: u8 = 0x84;
pub(super) const OP_CYCLES: u8 = 0x85;
pub(super) const ARENA_USAGE: u8 = 0x86;
pub(super) const PLAN_ENTRIES: u8 = 0x87;
pub(super) const DONE: u8 = 0x88;
pub(super) const GUARDS: u8 = 0x89;
pub(super) const CANARY_FAULT: u8 = 0x8A;
pub(super) const OFFLOAD: u8 = 0x8B;
pub(super) const JOBS: u8 = 0x8C;
pub(super) const ERROR: u8 = 0x8F;
pub(super) const LOG: u8 = 0x90;
pub(super) const NOTE: u8 = 0x91;
