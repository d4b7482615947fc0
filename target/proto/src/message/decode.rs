//! Reading a message: its tag picks the payload's layout, every field must
//! be there and nothing may follow.
//!
//! The decoder's half of the layout (`encode` writes the same fields in the
//! same order). Besides the layouts it decides which error a frame that
//! does not read gets: an unknown tag, a text field that is not UTF-8, or
//! a payload of the wrong length.

use super::codes::{ErrorCode, NoteKind, OffloadMode, TargetError};
use super::records::{Cycles, Hello, JobList, JobTimes, PlanEntries, PlanEntry};
use super::wire::Reader;
use super::{Message, tag};
use crate::ProtoError;
use crate::ledger::EngineLedger;

impl<'a> Message<'a> {
    /// Reads a message from tag and payload (unframed).
    pub fn read(bytes: &'a [u8]) -> Result<Self, ProtoError> {
        read_with(bytes, true)
    }

    /// [`read`](Self::read) for a target: a message the host does not send
    /// is [`ProtoError::NotARequest`], and the replies' layouts are not
    /// linked.
    pub fn read_request(bytes: &'a [u8]) -> Result<Self, ProtoError> {
        read_with(bytes, false)
    }
}

/// Reads a message; the replies' tags only when `replies`.
fn read_with(bytes: &[u8], replies: bool) -> Result<Message<'_>, ProtoError> {
    let (&t, payload) = bytes.split_first().ok_or(ProtoError::Truncated)?;
    let mut r = Reader {
        buf: payload,
        at: 0,
    };
    let request = matches!(t, 0x01..=0x06);
    let message = if request {
        read_request(t, &mut r)
    } else if replies {
        read_reply(t, &mut r)
    } else if is_reply(t) {
        return Err(ProtoError::NotARequest(t));
    } else {
        return Err(ProtoError::UnknownTag(t));
    };
    match message {
        Some(m) if r.done() => Ok(m),
        _ if !request && !is_reply(t) => Err(ProtoError::UnknownTag(t)),
        Some(_) | None => Err(payload_failure(t, payload)),
    }
}

/// Whether `t` is the tag of a message the target sends.
fn is_reply(t: u8) -> bool {
    matches!(t, 0x81..=0x8C | 0x8F..=0x91)
}

/// The request tag `t` introduces, read from `r`; `None` when the payload
/// is too short for it or holds a value the message cannot have. (Whether
/// anything follows is the caller's check.)
fn read_request<'a>(t: u8, r: &mut Reader<'a>) -> Option<Message<'a>> {
    Some(match t {
        tag::HELLO_REQUEST => Message::HelloRequest,
        tag::PLAN_REQUEST => Message::PlanRequest,
        tag::RESET_STATE => Message::ResetState,
        tag::LOAD_INPUT => Message::LoadInput {
            input: r.u8()?,
            offset: r.u32()?,
            chunk: r.blob()?,
        },
        tag::INVOKE => read_invoke(r)?,
        tag::SET_OFFLOAD => read_set_offload(r)?,
        _ => return None,
    })
}

/// The reply (a message the target sends) tag `t` introduces, as
/// [`read_request`] does for requests.
fn read_reply<'a>(t: u8, r: &mut Reader<'a>) -> Option<Message<'a>> {
    Some(match t {
        tag::OFFLOAD => read_offload(r)?,
        tag::JOBS => read_jobs(r)?,
        tag::HELLO => read_hello(r)?,
        tag::INPUT_ACK => Message::InputAck {
            input: r.u8()?,
            received: r.u32()?,
        },
        tag::OUTPUT_CHUNK => Message::OutputChunk {
            output: r.u8()?,
            offset: r.u32()?,
            total: r.u32()?,
            chunk: r.blob()?,
        },
        tag::TIMING => Message::Timing {
            invocation: r.u32()?,
            total_cycles: r.u64()?,
            ops: r.u16()?,
        },
        tag::OP_CYCLES => read_op_cycles(r)?,
        tag::ARENA_USAGE => Message::ArenaUsage {
            capacity: r.u32()?,
            head: r.u32()?,
            tail: r.u32()?,
            used: r.u32()?,
        },
        tag::PLAN_ENTRIES => read_plan_entries(r)?,
        tag::DONE => Message::Done { request: r.u8()? },
        tag::GUARDS => Message::Guards {
            mode: r.u8()?,
            len: r.u16()?,
            addresses: [r.u32()?, r.u32()?, r.u32()?, r.u32()?],
        },
        tag::CANARY_FAULT => Message::CanaryFault {
            owner: r.u8()?,
            index: r.u32()?,
            address: r.u32()?,
            bytes_hit: r.u32()?,
            op: r.u16()?,
        },
        tag::ERROR => Message::Error(TargetError {
            code: ErrorCode(r.u16()?),
            op: r.u16()?,
            detail: r.u32()?,
        }),
        tag::LOG => Message::Log(core::str::from_utf8(r.blob()?).ok()?),
        tag::NOTE => Message::Note {
            kind: NoteKind(r.u8()?),
            body: r.blob()?,
        },
        _ => return None,
    })
}

/// `Invoke`: its count, and a per-op flag that is 0 or 1, nothing else.
fn read_invoke<'a>(r: &mut Reader<'a>) -> Option<Message<'a>> {
    Some(Message::Invoke {
        count: r.u32()?,
        per_op: match r.u8()? {
            0 => false,
            1 => true,
            _ => return None,
        },
    })
}

/// `SetOffload`: a known mode, the fault byte, the latency model and the
/// operator codes the engine may claim.
fn read_set_offload<'a>(r: &mut Reader<'a>) -> Option<Message<'a>> {
    Some(Message::SetOffload {
        mode: OffloadMode::from_u8(r.u8()?)?,
        fault: r.u8()?,
        job_cycles: r.u32()?,
        cycles_per_1000_macs: r.u32()?,
        driver_submit_cycles: r.u32()?,
        driver_cycles_per_line: r.u32()?,
        cycles_per_count_milli: r.u32()?,
        ops: r.blob()?,
    })
}

/// `Offload`: the invoke's offload figures and its placement bits.
fn read_offload<'a>(r: &mut Reader<'a>) -> Option<Message<'a>> {
    Some(Message::Offload {
        jobs: r.u16()?,
        overlapped: r.u16()?,
        busy: r.u64()?,
        waited: r.u64()?,
        ledger: EngineLedger {
            engine: r.u64()?,
            shadow: r.u64()?,
            oversleep: r.u64()?,
            driver_submit: r.u64()?,
            driver_cache: r.u64()?,
        },
        placement: r.blob()?,
    })
}

/// `Jobs`: a run of whole job records.
fn read_jobs<'a>(r: &mut Reader<'a>) -> Option<Message<'a>> {
    let first = r.u16()?;
    let total = r.u16()?;
    let bytes = r.blob()?;
    if bytes.len() % JobTimes::BYTES != 0 {
        return None;
    }
    Some(Message::Jobs {
        first,
        total,
        jobs: JobList(bytes),
    })
}

/// `Hello`: versions, a UTF-8 board name, the model's hash and the arena.
fn read_hello<'a>(r: &mut Reader<'a>) -> Option<Message<'a>> {
    let protocol = r.u16()?;
    let f = r.bytes(3)?;
    let board = r.blob()?;
    let board = core::str::from_utf8(board).ok()?;
    Some(Message::Hello(Hello {
        protocol,
        firmware: [f[0], f[1], f[2]],
        board,
        model_hash: r.u32()?,
        arena_size: r.u32()?,
        inputs: r.u8()?,
        outputs: r.u8()?,
        clock_hz: r.u32()?,
    }))
}

/// `OpCycles`: the first op, then whole 4-byte counts.
fn read_op_cycles<'a>(r: &mut Reader<'a>) -> Option<Message<'a>> {
    let first_op = r.u16()?;
    let bytes = r.blob()?;
    if bytes.len() % 4 != 0 {
        return None;
    }
    Some(Message::OpCycles {
        first_op,
        cycles: Cycles(bytes),
    })
}

/// `PlanEntries`: a run of whole plan entries.
fn read_plan_entries<'a>(r: &mut Reader<'a>) -> Option<Message<'a>> {
    let first = r.u16()?;
    let total = r.u16()?;
    let bytes = r.blob()?;
    if bytes.len() % PlanEntry::BYTES != 0 {
        return None;
    }
    Some(Message::PlanEntries {
        first,
        total,
        entries: PlanEntries(bytes),
    })
}

/// The error for a known tag `t` whose payload did not read.
fn payload_failure(t: u8, payload: &[u8]) -> ProtoError {
    // A text field that failed UTF-8 is reported as such.
    if matches!(t, tag::LOG | tag::HELLO) && payload.len() >= 2 && !text_ok(t, payload) {
        ProtoError::BadText
    } else {
        ProtoError::BadLength { tag: t }
    }
}

/// Whether the text field of a `Log` or `Hello` payload is valid UTF-8
/// (used only to pick the error to report).
fn text_ok(t: u8, payload: &[u8]) -> bool {
    let mut r = Reader {
        buf: payload,
        at: 0,
    };
    if t == tag::HELLO && r.bytes(5).is_none() {
        return true;
    }
    match r.blob() {
        Some(text) => core::str::from_utf8(text).is_ok(),
        None => true,
    }
}
