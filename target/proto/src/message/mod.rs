//! The messages, and their byte layout (little-endian, tag first).
//!
//! [`Message`] is defined here; the rest lives in one module per concern:
//! the codes and records messages carry (`codes`, `records`), the tag byte
//! of each message (`tag`), the little-endian primitives every layout is
//! made of (`wire`), and the two directions of the layout itself
//! (`encode`: [`Message::write`], `decode`: [`Message::read`]).

mod codes;
mod decode;
mod encode;
mod records;
mod tag;
mod wire;

use crate::ledger::EngineLedger;
pub use codes::{AccelFault, ErrorCode, NoteKind, OffloadMode, TargetError};
pub use records::{Cycles, Hello, JobList, JobTimes, PlanEntries, PlanEntry};

/// Every message of protocol version 1. Tags below 0x80 go host → target,
/// the rest target → host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Message<'a> {
    /// Host: who are you? (answered by [`Message::Hello`]).
    HelloRequest,
    /// Host: bytes `offset..offset+chunk.len()` of model input `input`.
    LoadInput {
        /// Input position.
        input: u8,
        /// Byte offset in the tensor.
        offset: u32,
        /// The bytes.
        chunk: &'a [u8],
    },
    /// Host: run the model `count` times, then send results.
    Invoke {
        /// Invocations, one after another on what the input tensors hold:
        /// a plan may reuse an input's bytes for later activations, so only
        /// the first of them is sure to compute on the loaded input. The
        /// hilt host sends 1 and loads the inputs again before each
        /// iteration of a scenario.
        count: u32,
        /// Whether each operator is timed (its counts come in `OpCycles`).
        /// Without, each `Timing` total is a plain invoke's, timed from
        /// outside as TFLM's `Invoke()` is (what `hilt bench-target` sets
        /// beside TFLM's figures), and every `OpCycles` entry is 0.
        per_op: bool,
    },
    /// Host: send the arena plan.
    PlanRequest,
    /// Host: reset variable tensors.
    ResetState,
    /// Host: offload ops to the firmware's virtual NPU (or stop), then
    /// re-plan the arena (answered by `Done`, or an `Error`).
    SetOffload {
        /// Off, coherent or non-coherent.
        mode: OffloadMode,
        /// Fault to inject (0: none); only a firmware with the
        /// `accel` fault armed accepts another value.
        fault: u8,
        /// Latency model: fixed cycles per job.
        job_cycles: u32,
        /// Latency model: cycles per thousand multiply-accumulates.
        cycles_per_1000_macs: u32,
        /// Driver model: CPU cycles per submit, kept in the figures.
        driver_submit_cycles: u32,
        /// Driver model: CPU cycles per cache line cleaned or invalidated.
        driver_cycles_per_line: u32,
        /// Core cycles per count of the firmware's counter, times 1000 (the
        /// host's scale: 40 000 under QEMU's `-icount` with a 25 MHz
        /// SysTick, 1 000 on a real core), so the engine's latency runs in
        /// cycles while every figure on the wire stays in counts.
        cycles_per_count_milli: u32,
        /// Builtin operator codes the engine may claim (`CUSTOM`, 32, lets
        /// it claim the custom ops it registers).
        ops: &'a [u8],
    },
    /// Target: introduction.
    Hello(Hello<'a>),
    /// Target: input bytes received so far.
    InputAck {
        /// Input position.
        input: u8,
        /// Bytes of it received in total.
        received: u32,
    },
    /// Target: part of output `output`.
    OutputChunk {
        /// Output position.
        output: u8,
        /// Byte offset.
        offset: u32,
        /// The output's total size.
        total: u32,
        /// The bytes.
        chunk: &'a [u8],
    },
    /// Target: cycle count of the last invocation.
    Timing {
        /// Invocations so far.
        invocation: u32,
        /// Cycles of the whole invoke.
        total_cycles: u64,
        /// Operators (per-op counts follow in `OpCycles`).
        ops: u16,
    },
    /// Target: per-op cycles, from `first_op` on.
    OpCycles {
        /// First operator of the run.
        first_op: u16,
        /// Their counts.
        cycles: Cycles<'a>,
    },
    /// Target: arena figures.
    ArenaUsage {
        /// Arena bytes.
        capacity: u32,
        /// Planned head.
        head: u32,
        /// Persistent tail.
        tail: u32,
        /// High-water mark.
        used: u32,
    },
    /// Target: plan entries from `first` on.
    PlanEntries {
        /// Index of the first entry.
        first: u16,
        /// Total entries in the plan.
        total: u16,
        /// The entries.
        entries: PlanEntries<'a>,
    },
    /// Target: the request with this tag is complete.
    Done {
        /// The request's tag.
        request: u8,
    },
    /// Target: where the arena's section guard bands are, so the host can
    /// check them itself by reading memory.
    Guards {
        /// 0 = off, 1 = bounds, 2 = buffers.
        mode: u8,
        /// Guard length in bytes.
        len: u16,
        /// Addresses of the arena start, head end, tail start and arena end guards.
        addresses: [u32; 4],
    },
    /// Target: a damaged guard band.
    CanaryFault {
        /// 0 arena start, 1 head end, 2 tail start, 3 arena end, 4 tensor, 5 scratch.
        owner: u8,
        /// Tensor index (owner 4) or requesting op (owner 5).
        index: u32,
        /// Address of the first damaged byte.
        address: u32,
        /// Guard bytes that differ.
        bytes_hit: u32,
        /// The op that ran last (`u16::MAX`: none).
        op: u16,
    },
    /// Target: the last invoke's offload figures (after `OpCycles`, when
    /// offloading), in the same cycles as `Timing`.
    Offload {
        /// Jobs submitted.
        jobs: u16,
        /// CPU ops that ran while a job was in flight.
        overlapped: u16,
        /// Counts the engine was busy (its latency model, in cycles, turned
        /// into the counter's counts).
        busy: u64,
        /// Cycles the CPU spent blocked in waits.
        waited: u64,
        /// What every figure leaves out (the firmware's time emulating the
        /// engine) and keeps (a real driver's modelled cost), in counts, by
        /// category.
        ledger: EngineLedger,
        /// One bit per op (LSB first): 1 when the engine ran it.
        placement: &'a [u8],
    },
    /// Target: job records of the last invoke, from `first` on.
    Jobs {
        /// Index of the first record.
        first: u16,
        /// Records in the invoke.
        total: u16,
        /// The records.
        jobs: JobList<'a>,
    },
    /// Target: a typed error.
    Error(TargetError),
    /// Target: a log line.
    Log(&'a str),
    /// Target: a log line as values: the host writes the words
    /// ([`NoteKind`] says which sentence).
    Note {
        /// Which sentence.
        kind: NoteKind,
        /// Its values.
        body: &'a [u8],
    },
}
