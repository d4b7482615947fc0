//! The messages, and their byte layout (little-endian, tag first).

use crate::ProtoError;

/// What went wrong on the target, as a code the host can match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ErrorCode(pub u16);

impl ErrorCode {
    /// A frame from the host could not be decoded.
    pub const BAD_FRAME: ErrorCode = ErrorCode(1);
    /// A request the firmware does not serve.
    pub const UNSUPPORTED: ErrorCode = ErrorCode(2);
    /// An input index or offset out of range.
    pub const BAD_INPUT: ErrorCode = ErrorCode(3);
    /// The model failed verification.
    pub const MODEL: ErrorCode = ErrorCode(4);
    /// Allocation failed (arena too small, plan invalid).
    pub const ALLOCATE: ErrorCode = ErrorCode(5);
    /// A kernel failed (`op` names the operator).
    pub const KERNEL: ErrorCode = ErrorCode(6);
    /// An arena guard band was damaged.
    pub const CANARY: ErrorCode = ErrorCode(7);
    /// An offloaded op's job failed (`op` names the operator; `detail` is
    /// the runtime's `AccelError` code, see `hilt_runtime::accel`).
    pub const ACCELERATOR: ErrorCode = ErrorCode(8);
}

/// How the firmware's virtual NPU sees memory ([`Message::SetOffload`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OffloadMode {
    /// No offload: every op on the CPU (the default after reset).
    Off = 0,
    /// Offload to vnpu, memory coherent between CPU and engine.
    Coherent = 1,
    /// Offload to vnpu behind a modelled data cache: the engine sees only
    /// what the CPU cleaned, the CPU its writes only once invalidated.
    NonCoherent = 2,
}

impl OffloadMode {
    /// From its wire byte.
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(OffloadMode::Off),
            1 => Some(OffloadMode::Coherent),
            2 => Some(OffloadMode::NonCoherent),
            _ => None,
        }
    }
}

/// Faults a `fault-accel` firmware injects into its offload path, by the
/// byte [`Message::SetOffload`] carries: each is a bug a real NPU
/// integration has, and each must be caught and named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AccelFault {
    /// No fault.
    None = 0,
    /// The schedule never waits a job before a CPU op reads its output.
    SkipWait = 1,
    /// The planner drops the holds (buffers freed before the job's wait).
    DropHolds = 2,
    /// A job's output region is given at an address off its alignment.
    Misaligned = 3,
    /// The engine's window excludes the arena's head.
    OutsideWindow = 4,
    /// A job marks its output read-only.
    WriteReadOnly = 5,
    /// The CPU does not clean a job's inputs before submit.
    MissingClean = 6,
    /// The CPU does not invalidate a job's outputs after its wait.
    MissingInvalidate = 7,
    /// The engine never completes a job.
    NeverCompletes = 8,
    /// The engine fails every job with an error of its own.
    EngineError = 9,
}

impl AccelFault {
    /// Every fault, in wire order.
    pub const ALL: [AccelFault; 10] = [
        AccelFault::None,
        AccelFault::SkipWait,
        AccelFault::DropHolds,
        AccelFault::Misaligned,
        AccelFault::OutsideWindow,
        AccelFault::WriteReadOnly,
        AccelFault::MissingClean,
        AccelFault::MissingInvalidate,
        AccelFault::NeverCompletes,
        AccelFault::EngineError,
    ];

    /// From its wire byte.
    pub fn from_u8(v: u8) -> Option<Self> {
        Self::ALL.get(usize::from(v)).copied()
    }

    /// Its name, as the host's `--accel-fault` flag spells it.
    pub fn name(self) -> &'static str {
        match self {
            AccelFault::None => "none",
            AccelFault::SkipWait => "skip-wait",
            AccelFault::DropHolds => "drop-holds",
            AccelFault::Misaligned => "misaligned",
            AccelFault::OutsideWindow => "outside-window",
            AccelFault::WriteReadOnly => "write-read-only",
            AccelFault::MissingClean => "missing-clean",
            AccelFault::MissingInvalidate => "missing-invalidate",
            AccelFault::NeverCompletes => "never-completes",
            AccelFault::EngineError => "engine-error",
        }
    }
}

/// One offloaded job's times in an invoke, in the invoke's cycles (from its
/// start): sent in [`Message::Jobs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JobTimes {
    /// The operator.
    pub op: u16,
    /// When it was submitted.
    pub submitted: u32,
    /// When the engine completed it (as the engine reports it).
    pub completed: u32,
    /// When the CPU started waiting for it.
    pub wait_started: u32,
    /// When the wait returned.
    pub retired: u32,
}

impl JobTimes {
    /// Bytes per record on the wire.
    pub const BYTES: usize = 18;

    fn write(&self, out: &mut [u8]) {
        out[..2].copy_from_slice(&self.op.to_le_bytes());
        for (i, v) in [
            self.submitted,
            self.completed,
            self.wait_started,
            self.retired,
        ]
        .iter()
        .enumerate()
        {
            out[2 + 4 * i..6 + 4 * i].copy_from_slice(&v.to_le_bytes());
        }
    }

    fn read(b: &[u8]) -> Self {
        let u = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        JobTimes {
            op: u16::from_le_bytes([b[0], b[1]]),
            submitted: u(2),
            completed: u(6),
            wait_started: u(10),
            retired: u(14),
        }
    }
}

/// Job records, read lazily from the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobList<'a>(&'a [u8]);

impl<'a> JobList<'a> {
    /// Records to send (encoded into `out`).
    pub fn encode_into(jobs: &[JobTimes], out: &'a mut [u8]) -> Result<JobList<'a>, ProtoError> {
        let bytes = out
            .get_mut(..JobTimes::BYTES * jobs.len())
            .ok_or(ProtoError::BufferTooSmall)?;
        for (c, j) in bytes.chunks_exact_mut(JobTimes::BYTES).zip(jobs) {
            j.write(c);
        }
        Ok(JobList(bytes))
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.0.len() / JobTimes::BYTES
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The records.
    pub fn iter(&self) -> impl Iterator<Item = JobTimes> + 'a {
        self.0.chunks_exact(JobTimes::BYTES).map(JobTimes::read)
    }
}

/// A typed error from the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TargetError {
    /// What kind.
    pub code: ErrorCode,
    /// The operator involved, or `u16::MAX`.
    pub op: u16,
    /// Code-specific detail (a sub-code, an address, a byte count).
    pub detail: u32,
}

/// The target introduces itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello<'a> {
    /// [`crate::PROTOCOL_VERSION`] of the firmware.
    pub protocol: u16,
    /// Firmware version (major, minor, patch).
    pub firmware: [u8; 3],
    /// The board the firmware was built for.
    pub board: &'a str,
    /// CRC-32 of the embedded model.
    pub model_hash: u32,
    /// Arena bytes.
    pub arena_size: u32,
    /// Model inputs.
    pub inputs: u8,
    /// Model outputs.
    pub outputs: u8,
    /// Core clock, Hz.
    pub clock_hz: u32,
}

/// One planned buffer, as sent by the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PlanEntry {
    /// 0 = tensor, 1 = scratch.
    pub kind: u8,
    /// Tensor index (or requesting op for scratch).
    pub index: u16,
    /// First step.
    pub first_step: u16,
    /// Last step.
    pub last_step: u16,
    /// Requested bytes.
    pub size: u32,
    /// Alignment.
    pub align: u32,
    /// Offset from the head.
    pub offset: u32,
}

impl PlanEntry {
    const BYTES: usize = 19;

    fn write(&self, w: &mut Writer<'_>) -> Result<(), ProtoError> {
        w.u8(self.kind)?;
        w.u16(self.index)?;
        w.u16(self.first_step)?;
        w.u16(self.last_step)?;
        w.u32(self.size)?;
        w.u32(self.align)?;
        w.u32(self.offset)
    }

    fn read(r: &mut Reader<'_>) -> Option<Self> {
        Some(PlanEntry {
            kind: r.u8()?,
            index: r.u16()?,
            first_step: r.u16()?,
            last_step: r.u16()?,
            size: r.u32()?,
            align: r.u32()?,
            offset: r.u32()?,
        })
    }
}

/// A run of plan entries, read lazily from the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanEntries<'a>(&'a [u8]);

impl<'a> PlanEntries<'a> {
    /// Entries to send.
    pub fn encode_into(
        entries: &[PlanEntry],
        out: &'a mut [u8],
    ) -> Result<PlanEntries<'a>, ProtoError> {
        let mut w = Writer { buf: out, at: 0 };
        for e in entries {
            e.write(&mut w)?;
        }
        let len = w.at;
        Ok(PlanEntries(&out[..len]))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len() / PlanEntry::BYTES
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entries.
    pub fn iter(&self) -> impl Iterator<Item = PlanEntry> + 'a {
        let bytes = self.0;
        bytes
            .chunks_exact(PlanEntry::BYTES)
            .filter_map(|c| PlanEntry::read(&mut Reader { buf: c, at: 0 }))
    }
}

/// Per-op cycle counts, read lazily from the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cycles<'a>(&'a [u8]);

impl<'a> Cycles<'a> {
    /// Counts to send (as little-endian bytes in `out`).
    pub fn encode_into(cycles: &[u32], out: &'a mut [u8]) -> Result<Cycles<'a>, ProtoError> {
        let bytes = out
            .get_mut(..4 * cycles.len())
            .ok_or(ProtoError::BufferTooSmall)?;
        for (c, v) in bytes.chunks_exact_mut(4).zip(cycles) {
            c.copy_from_slice(&v.to_le_bytes());
        }
        Ok(Cycles(bytes))
    }

    /// Number of counts.
    pub fn len(&self) -> usize {
        self.0.len() / 4
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The counts.
    pub fn iter(&self) -> impl Iterator<Item = u32> + 'a {
        self.0
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
    }
}

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
        /// Fault to inject (0: none); only firmware built with the
        /// `fault-accel` feature accepts another value.
        fault: u8,
        /// Latency model: fixed cycles per job.
        job_cycles: u32,
        /// Latency model: cycles per thousand multiply-accumulates.
        cycles_per_1000_macs: u32,
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
        /// Cycles the firmware spent emulating the engine (running its
        /// kernels in an interrupt), already taken out of every figure.
        emulation: u64,
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
}

mod tag {
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
}

pub(crate) struct Writer<'b> {
    pub(crate) buf: &'b mut [u8],
    pub(crate) at: usize,
}

impl Writer<'_> {
    fn bytes(&mut self, b: &[u8]) -> Result<(), ProtoError> {
        let end = self.at + b.len();
        self.buf
            .get_mut(self.at..end)
            .ok_or(ProtoError::BufferTooSmall)?
            .copy_from_slice(b);
        self.at = end;
        Ok(())
    }
    fn u8(&mut self, v: u8) -> Result<(), ProtoError> {
        self.bytes(&[v])
    }
    fn u16(&mut self, v: u16) -> Result<(), ProtoError> {
        self.bytes(&v.to_le_bytes())
    }
    fn u32(&mut self, v: u32) -> Result<(), ProtoError> {
        self.bytes(&v.to_le_bytes())
    }
    fn u64(&mut self, v: u64) -> Result<(), ProtoError> {
        self.bytes(&v.to_le_bytes())
    }
    /// A length-prefixed (u16) byte string.
    fn blob(&mut self, b: &[u8]) -> Result<(), ProtoError> {
        self.u16(u16::try_from(b.len()).map_err(|_| ProtoError::BufferTooSmall)?)?;
        self.bytes(b)
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let b = self.buf.get(self.at..self.at + n)?;
        self.at += n;
        Some(b)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.bytes(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        let b = self.bytes(2)?;
        Some(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        let b = self.bytes(4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Option<u64> {
        let b = self.bytes(8)?;
        Some(u64::from_le_bytes([
            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
        ]))
    }
    fn blob(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(self.u16()?);
        self.bytes(n)
    }
    fn done(&self) -> bool {
        self.at == self.buf.len()
    }
}

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
        }
    }

    /// Writes tag and payload (unframed) into `out`; returns the length.
    pub fn write(&self, out: &mut [u8]) -> Result<usize, ProtoError> {
        let mut w = Writer { buf: out, at: 0 };
        w.u8(self.tag())?;
        match *self {
            Message::HelloRequest | Message::PlanRequest | Message::ResetState => {}
            Message::LoadInput {
                input,
                offset,
                chunk,
            } => {
                w.u8(input)?;
                w.u32(offset)?;
                w.blob(chunk)?;
            }
            Message::Invoke { count, per_op } => {
                w.u32(count)?;
                w.u8(u8::from(per_op))?;
            }
            Message::SetOffload {
                mode,
                fault,
                job_cycles,
                cycles_per_1000_macs,
                cycles_per_count_milli,
                ops,
            } => {
                w.u8(mode as u8)?;
                w.u8(fault)?;
                w.u32(job_cycles)?;
                w.u32(cycles_per_1000_macs)?;
                w.u32(cycles_per_count_milli)?;
                w.blob(ops)?;
            }
            Message::Offload {
                jobs,
                overlapped,
                busy,
                waited,
                emulation,
                placement,
            } => {
                w.u16(jobs)?;
                w.u16(overlapped)?;
                w.u64(busy)?;
                w.u64(waited)?;
                w.u64(emulation)?;
                w.blob(placement)?;
            }
            Message::Jobs { first, total, jobs } => {
                w.u16(first)?;
                w.u16(total)?;
                w.blob(jobs.0)?;
            }
            Message::Hello(h) => {
                w.u16(h.protocol)?;
                w.bytes(&h.firmware)?;
                w.blob(h.board.as_bytes())?;
                w.u32(h.model_hash)?;
                w.u32(h.arena_size)?;
                w.u8(h.inputs)?;
                w.u8(h.outputs)?;
                w.u32(h.clock_hz)?;
            }
            Message::InputAck { input, received } => {
                w.u8(input)?;
                w.u32(received)?;
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
            Message::Timing {
                invocation,
                total_cycles,
                ops,
            } => {
                w.u32(invocation)?;
                w.u64(total_cycles)?;
                w.u16(ops)?;
            }
            Message::OpCycles { first_op, cycles } => {
                w.u16(first_op)?;
                w.blob(cycles.0)?;
            }
            Message::ArenaUsage {
                capacity,
                head,
                tail,
                used,
            } => {
                w.u32(capacity)?;
                w.u32(head)?;
                w.u32(tail)?;
                w.u32(used)?;
            }
            Message::PlanEntries {
                first,
                total,
                entries,
            } => {
                w.u16(first)?;
                w.u16(total)?;
                w.blob(entries.0)?;
            }
            Message::Done { request } => w.u8(request)?,
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
                w.u16(op)?;
            }
            Message::Error(e) => {
                w.u16(e.code.0)?;
                w.u16(e.op)?;
                w.u32(e.detail)?;
            }
            Message::Log(text) => w.blob(text.as_bytes())?,
        }
        Ok(w.at)
    }

    /// Reads a message from tag and payload (unframed).
    pub fn read(bytes: &'a [u8]) -> Result<Self, ProtoError> {
        let (&t, payload) = bytes.split_first().ok_or(ProtoError::Truncated)?;
        let mut r = Reader {
            buf: payload,
            at: 0,
        };
        let bad = ProtoError::BadLength { tag: t };
        let message = (|| -> Option<Message<'a>> {
            Some(match t {
                tag::HELLO_REQUEST => Message::HelloRequest,
                tag::PLAN_REQUEST => Message::PlanRequest,
                tag::RESET_STATE => Message::ResetState,
                tag::LOAD_INPUT => Message::LoadInput {
                    input: r.u8()?,
                    offset: r.u32()?,
                    chunk: r.blob()?,
                },
                tag::INVOKE => Message::Invoke {
                    count: r.u32()?,
                    per_op: match r.u8()? {
                        0 => false,
                        1 => true,
                        _ => return None,
                    },
                },
                tag::SET_OFFLOAD => Message::SetOffload {
                    mode: OffloadMode::from_u8(r.u8()?)?,
                    fault: r.u8()?,
                    job_cycles: r.u32()?,
                    cycles_per_1000_macs: r.u32()?,
                    cycles_per_count_milli: r.u32()?,
                    ops: r.blob()?,
                },
                tag::OFFLOAD => Message::Offload {
                    jobs: r.u16()?,
                    overlapped: r.u16()?,
                    busy: r.u64()?,
                    waited: r.u64()?,
                    emulation: r.u64()?,
                    placement: r.blob()?,
                },
                tag::JOBS => {
                    let first = r.u16()?;
                    let total = r.u16()?;
                    let bytes = r.blob()?;
                    if bytes.len() % JobTimes::BYTES != 0 {
                        return None;
                    }
                    Message::Jobs {
                        first,
                        total,
                        jobs: JobList(bytes),
                    }
                }
                tag::HELLO => {
                    let protocol = r.u16()?;
                    let f = r.bytes(3)?;
                    let board = r.blob()?;
                    let board = core::str::from_utf8(board).ok()?;
                    Message::Hello(Hello {
                        protocol,
                        firmware: [f[0], f[1], f[2]],
                        board,
                        model_hash: r.u32()?,
                        arena_size: r.u32()?,
                        inputs: r.u8()?,
                        outputs: r.u8()?,
                        clock_hz: r.u32()?,
                    })
                }
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
                tag::OP_CYCLES => {
                    let first_op = r.u16()?;
                    let bytes = r.blob()?;
                    if bytes.len() % 4 != 0 {
                        return None;
                    }
                    Message::OpCycles {
                        first_op,
                        cycles: Cycles(bytes),
                    }
                }
                tag::ARENA_USAGE => Message::ArenaUsage {
                    capacity: r.u32()?,
                    head: r.u32()?,
                    tail: r.u32()?,
                    used: r.u32()?,
                },
                tag::PLAN_ENTRIES => {
                    let first = r.u16()?;
                    let total = r.u16()?;
                    let bytes = r.blob()?;
                    if bytes.len() % PlanEntry::BYTES != 0 {
                        return None;
                    }
                    Message::PlanEntries {
                        first,
                        total,
                        entries: PlanEntries(bytes),
                    }
                }
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
                _ => return None,
            })
        })();
        let known = matches!(t, 0x01..=0x06 | 0x81..=0x8C | 0x8F | 0x90);
        match message {
            Some(m) if r.done() => Ok(m),
            _ if !known => Err(ProtoError::UnknownTag(t)),
            Some(_) | None => {
                // A text field that failed UTF-8 is reported as such.
                if matches!(t, tag::LOG | tag::HELLO) && payload.len() >= 2 && !text_ok(t, payload)
                {
                    Err(ProtoError::BadText)
                } else {
                    Err(bad)
                }
            }
        }
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
