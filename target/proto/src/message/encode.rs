//! Writing a message: its tag, then its payload's fields in order.
//!
//! The encoder's half of the layout; `decode` reads the same fields back in
//! the same order. [`Message::write`] routes each message to the group of
//! messages it belongs to, so no one function lists every layout.

use super::records::Hello;
use super::wire::Writer;
use super::{Message, tag};
use crate::ProtoError;

impl<'a> Message<'a> {
    /// The message's tag byte.
    pub fn tag(&self) -> u8 {
        match self {
            Message::HelloRequest => tag::HELLO_REQUEST,
            Message::LoadInput { .. } => tag::LOAD_INPUT,
            Message::Invoke { .. } => tag::INVOKE,
            Message::PlanRequest => tag::PLAN_REQUEST,
            Message::ResetState => tag::RESET_STATE,
            Message::SetOffload { .. } => tag::SET_OFFLOAD,
            Message::Offload { .. } => tag::OFFLOAD,
            Message::Jobs { .. } => tag::JOBS,
            Message::Hello(_) => tag::HELLO,
            Message::InputAck { .. } => tag::INPUT_ACK,
            Message::OutputChunk { .. } => tag::OUTPUT_CHUNK,
            Message::Timing { .. } => tag::TIMING,
            Message::OpCycles { .. } => tag::OP_CYCLES,
            Message::ArenaUsage { .. } => tag::ARENA_USAGE,
            Message::PlanEntries { .. } => tag::PLAN_ENTRIES,
            Message::Done { .. } => tag::DONE,
            Message::Guards { .. } => tag::GUARDS,
            Message::CanaryFault { .. } => tag::CANARY_FAULT,
            Message::Error(_) => tag::ERROR,
            Message::Log(_) => tag::LOG,
            Message::Note { .. } => tag::NOTE,
        }
    }

    /// Writes tag and payload (unframed) into `out`; returns the length.
    pub fn write(&self, out: &mut [u8]) -> Result<usize, ProtoError> {
        let mut w = Writer { buf: out, at: 0 };
        w.u8(self.tag())?;
        match *self {
            Message::HelloRequest | Message::PlanRequest | Message::ResetState => {}
            // The two messages that carry tensor bytes are written here, with
            // no further dispatch: they are most of what crosses the wire.
            Message::LoadInput {
                input,
                offset,
                chunk,
            } => {
                w.u8(input)?;
                w.u32(offset)?;
                w.blob(chunk)?;
            }
            Message::OutputChunk {
                output,
                offset,
                total,
                chunk,
            } => {
                w.u8(output)?;
                w.u32(offset)?;
                w.u32(total)?;
                w.blob(chunk)?;
            }
            Message::Invoke { .. } | Message::SetOffload { .. } => self.write_request(&mut w)?,
            Message::Hello(h) => write_hello(&mut w, &h)?,
            Message::InputAck { input, received } => {
                w.u8(input)?;
                w.u32(received)?;
            }
            Message::Timing { .. }
            | Message::OpCycles { .. }
            | Message::Offload { .. }
            | Message::Jobs { .. } => self.write_invoke_report(&mut w)?,
            Message::ArenaUsage { .. }
            | Message::PlanEntries { .. }
            | Message::Guards { .. }
            | Message::CanaryFault { .. } => self.write_arena_report(&mut w)?,
            Message::Done { request } => w.u8(request)?,
            Message::Error(e) => {
                w.u16(e.code.0)?;
                w.u16(e.op)?;
                w.u32(e.detail)?;
            }
            Message::Log(text) => w.blob(text.as_bytes())?,
            Message::Note { kind, body } => {
                w.u8(kind.0)?;
                w.blob(body)?;
            }
        }
        Ok(w.at)
    }

    /// The payloads of the host's requests that carry settings: `Invoke`
    /// and `SetOffload`.
    fn write_request(&self, w: &mut Writer<'_>) -> Result<(), ProtoError> {
        match *self {
            Message::Invoke { count, per_op } => {
                w.u32(count)?;
                w.u8(u8::from(per_op))
            }
            Message::SetOffload {
                mode,
                fault,
                job_cycles,
                cycles_per_1000_macs,
                driver_submit_cycles,
                driver_cycles_per_line,
                cycles_per_count_milli,
                ops,
            } => {
                w.u8(mode as u8)?;
                w.u8(fault)?;
                w.u32(job_cycles)?;
                w.u32(cycles_per_1000_macs)?;
                w.u32(driver_submit_cycles)?;
                w.u32(driver_cycles_per_line)?;
                w.u32(cycles_per_count_milli)?;
                w.blob(ops)
            }
            _ => unreachable!("write routes only Invoke and SetOffload here"),
        }
    }

    /// The payloads of what the target reports after an invoke: its time,
    /// each op's cycles, and the offload figures and job records.
    fn write_invoke_report(&self, w: &mut Writer<'_>) -> Result<(), ProtoError> {
        match *self {
            Message::Timing {
                invocation,
                total_cycles,
                ops,
            } => {
                w.u32(invocation)?;
                w.u64(total_cycles)?;
                w.u16(ops)
            }
            Message::OpCycles { first_op, cycles } => {
                w.u16(first_op)?;
                w.blob(cycles.0)
            }
            Message::Offload {
                jobs,
                overlapped,
                busy,
                waited,
                ledger,
                placement,
            } => {
                w.u16(jobs)?;
                w.u16(overlapped)?;
                w.u64(busy)?;
                w.u64(waited)?;
                w.u64(ledger.engine)?;
                w.u64(ledger.shadow)?;
                w.u64(ledger.oversleep)?;
                w.u64(ledger.driver_submit)?;
                w.u64(ledger.driver_cache)?;
                w.blob(placement)
            }
            Message::Jobs { first, total, jobs } => {
                w.u16(first)?;
                w.u16(total)?;
                w.blob(jobs.0)
            }
            _ => unreachable!("write routes only invoke reports here"),
        }
    }

    /// The payloads of what the target reports about its arena: the
    /// figures, the plan, where the guard bands are and a damaged one.
    fn write_arena_report(&self, w: &mut Writer<'_>) -> Result<(), ProtoError> {
        match *self {
            Message::ArenaUsage {
                capacity,
                head,
                tail,
                used,
            } => {
                w.u32(capacity)?;
                w.u32(head)?;
                w.u32(tail)?;
                w.u32(used)
            }
            Message::PlanEntries {
                first,
                total,
                entries,
            } => {
                w.u16(first)?;
                w.u16(total)?;
                w.blob(entries.0)
            }
            Message::Guards {
                mode,
                len,
                addresses,
            } => {
                w.u8(mode)?;
                w.u16(len)?;
                for a in addresses {
                    w.u32(a)?;
                }
                Ok(())
            }
            Message::CanaryFault {
                owner,
                index,
                address,
                bytes_hit,
                op,
            } => {
                w.u8(owner)?;
                w.u32(index)?;
                w.u32(address)?;
                w.u32(bytes_hit)?;
                w.u16(op)
            }
            _ => unreachable!("write routes only arena reports here"),
        }
    }
}

/// The payload of `Hello`: the firmware's versions, board, model and arena.
fn write_hello(w: &mut Writer<'_>, h: &Hello<'_>) -> Result<(), ProtoError> {
    w.u16(h.protocol)?;
    w.bytes(&h.firmware)?;
    w.blob(h.board.as_bytes())?;
    w.u32(h.model_hash)?;
    w.u32(h.arena_size)?;
    w.u8(h.inputs)?;
    w.u8(h.outputs)?;
    w.u32(h.clock_hz)
}
