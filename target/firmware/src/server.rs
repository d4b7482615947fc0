//! The protocol loop: read frames from the down channel, act, answer on the
//! up channel.

use core::fmt::Write as _;

use hilt_proto::message::{Cycles, PlanEntries};
use hilt_proto::{
    ErrorCode, FrameAccumulator, Hello, MAX_CHUNK, MAX_FRAME, Message, PROTOCOL_VERSION, PlanEntry,
    TargetError, decode_frame, encode_frame,
};
use hilt_runtime::allocation::AllocOptions;
use hilt_runtime::canary::{CanaryMode, GUARD_BYTES, GuardOwner};
use hilt_runtime::interpreter::{Interpreter, InterpreterError};
use hilt_runtime::kernels::{OpResolver, all_builtins};
use hilt_runtime::model::Model;
#[cfg_attr(feature = "fault-misplan", allow(unused_imports))]
use hilt_runtime::planner::{Greedy, Linear, MemoryPlanner, Offline};
use hilt_runtime::request::BufferOwner;

use crate::config;
use crate::cycles::Counter;
use crate::wire::Wire;

/// Most operators a model may have for per-op cycle counts.
const MAX_OPS: usize = 256;
const EMPTY_ENTRY: PlanEntry = PlanEntry {
    kind: 0,
    index: 0,
    first_step: 0,
    last_step: 0,
    size: 0,
    align: 0,
    offset: 0,
};

/// The arena plan as committed, kept for `PlanRequest`.
static mut PLAN: [PlanEntry; MAX_PLAN] = [EMPTY_ENTRY; MAX_PLAN];

/// Most plan entries kept for `PlanRequest`.
const MAX_PLAN: usize = 384;

/// Stops here for good (the host sees no more frames and times out).
pub(crate) fn halt() -> ! {
    loop {
        cortex_m::asm::wfi();
    }
}

pub(crate) fn report_panic(info: &core::panic::PanicInfo<'_>) -> ! {
    let mut line = Line::default();
    let _ = write!(line, "panic: {info}");
    crate::wire::report_panic_line(line.as_str());
    #[cfg(feature = "qemu")]
    cortex_m_semihosting::debug::exit(cortex_m_semihosting::debug::EXIT_FAILURE);
    halt()
}

/// A fixed-size text line for log messages.
struct Line {
    buf: [u8; 160],
    len: usize,
}

impl Default for Line {
    fn default() -> Self {
        Line {
            buf: [0; 160],
            len: 0,
        }
    }
}

impl Line {
    fn as_str(&self) -> &str {
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl core::fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

struct Link<W: Wire> {
    wire: W,
    /// Address of the arena's first byte (canary offsets are relative to it).
    arena_base: u32,
    frame: [u8; MAX_FRAME],
    #[cfg(feature = "fault-corrupt-frame")]
    corrupted: bool,
}

impl<W: Wire> Link<W> {
    fn send(&mut self, message: &Message<'_>) {
        if let Ok(n) = encode_frame(message, &mut self.frame) {
            #[cfg(feature = "fault-corrupt-frame")]
            if !self.corrupted && matches!(message, Message::OutputChunk { .. }) {
                // Damage the middle of the frame, keeping its delimiter.
                let i = n / 2;
                self.frame[i] = if self.frame[i] == 0x55 { 0x56 } else { 0x55 };
                self.corrupted = true;
            }
            let mut sent = 0;
            while sent < n {
                sent += self.wire.write(&self.frame[sent..n]);
            }
        }
    }

    fn error(&mut self, code: ErrorCode, op: u16, detail: u32) {
        self.send(&Message::Error(TargetError { code, op, detail }));
    }

    fn log(&mut self, line: &Line) {
        self.send(&Message::Log(line.as_str()));
    }
}

fn interpreter_error<W: Wire>(link: &mut Link<W>, e: InterpreterError) {
    let (code, op) = match e {
        InterpreterError::Kernel { op, .. } | InterpreterError::UnsupportedOperator { op, .. } => {
            (ErrorCode::KERNEL, op as u16)
        }
        InterpreterError::Alloc(_) => (ErrorCode::ALLOCATE, u16::MAX),
        InterpreterError::Canary(fault) => {
            let (owner, index) = match fault.owner {
                GuardOwner::ArenaStart => (0, 0),
                GuardOwner::HeadEnd => (1, 0),
                GuardOwner::TailStart => (2, 0),
                GuardOwner::ArenaEnd => (3, 0),
                GuardOwner::Tensor(t) => (4, t),
                GuardOwner::Scratch(op) => (5, op),
            };
            link.send(&Message::CanaryFault {
                owner,
                index,
                address: link.arena_base + fault.offset,
                bytes_hit: fault.bytes_hit,
                op: fault.op.map_or(u16::MAX, |o| o as u16),
            });
            (ErrorCode::CANARY, fault.op.map_or(u16::MAX, |o| o as u16))
        }
        _ => (ErrorCode::UNSUPPORTED, u16::MAX),
    };
    let mut line = Line::default();
    let _ = write!(line, "{e}");
    link.log(&line);
    link.error(code, op, 0);
}

pub(crate) fn run(
    model_bytes: &'static [u8],
    arena: &'static mut [u8],
    counter: Counter,
    wire: impl Wire,
) -> ! {
    let mut link = Link {
        wire,
        arena_base: arena.as_ptr() as u32,
        frame: [0; MAX_FRAME],
        #[cfg(feature = "fault-corrupt-frame")]
        corrupted: false,
    };
    let arena_capacity = arena.len() as u32;
    let mut line = Line::default();
    let _ = write!(
        line,
        "hilt firmware: board {}, model {} ({} bytes), arena {} bytes, cycles from {}",
        config::BOARD,
        config::MODEL_NAME,
        model_bytes.len(),
        arena_capacity,
        Counter::SOURCE
    );
    link.log(&line);

    let model = match Model::from_bytes(model_bytes) {
        Ok(m) => Some(m),
        Err(e) => {
            let mut line = Line::default();
            let _ = write!(line, "model: {e}");
            link.log(&line);
            None
        }
    };
    let resolver: OpResolver<32> = all_builtins();
    // The plan copy lives in .bss, not on the stack: on a 128 KiB part the
    // stack is what is left after the arena, and must stay small.
    // SAFETY: `run` is entered once and never returns; this is the only reference.
    let plan: &mut [PlanEntry; MAX_PLAN] = unsafe { &mut *(&raw mut PLAN) };
    let mut plan_len = 0usize;
    let mut interpreter = model.map(|m| Interpreter::new(m, &resolver, arena));
    let mut ready = false;
    #[cfg_attr(feature = "fault-misplan", allow(unused_variables))]
    let offline = model.and_then(|m| Offline::from_model(&m).ok());
    #[cfg(feature = "fault-misplan")]
    let planner: Option<&dyn MemoryPlanner> = Some(&crate::faults::Misplan);
    #[cfg(not(feature = "fault-misplan"))]
    let planner: Option<&dyn MemoryPlanner> = match config::PLANNER {
        "linear" => Some(&Linear),
        "offline" => offline.as_ref().map(|o| o as &dyn MemoryPlanner),
        _ => Some(&Greedy),
    };
    if planner.is_none() {
        let mut line = Line::default();
        let _ = write!(
            line,
            "planner {}: the model has no valid offline plan",
            config::PLANNER
        );
        link.log(&line);
    }
    if let (Some(interp), Some(planner)) = (interpreter.as_mut(), planner) {
        let result = interp.allocate_with_report(planner, &alloc_options(), |p| {
            for (r, &offset) in p.requests.iter().zip(p.offsets) {
                if plan_len == MAX_PLAN {
                    break;
                }
                let (kind, index) = match r.owner() {
                    BufferOwner::Tensor(t) => (0, t as u16),
                    BufferOwner::Scratch { op, .. } => (1, op as u16),
                };
                plan[plan_len] = PlanEntry {
                    kind,
                    index,
                    first_step: r.first_step as u16,
                    last_step: r.live_until() as u16,
                    size: r.size,
                    align: r.align,
                    offset,
                };
                plan_len += 1;
            }
        });
        match result {
            Ok(_) => {
                ready = true;
                #[cfg(feature = "fault-overrun")]
                interp.inject_overrun(0, 8);
            }
            Err(e) => interpreter_error(&mut link, e),
        }
    }

    let mut per_op = [0u64; MAX_OPS];
    let mut invocations = 0u32;
    let mut accumulator = FrameAccumulator::default();
    let mut scratch = [0u8; MAX_FRAME];
    let mut input = [0u8; 256];
    loop {
        let n = link.wire.read(&mut input);
        for &byte in &input[..n] {
            let Some(frame) = accumulator.push(byte) else {
                continue;
            };
            let message = match frame.and_then(|f| decode_frame(f, &mut scratch)) {
                Ok(m) => m,
                Err(_) => {
                    link.error(ErrorCode::BAD_FRAME, u16::MAX, 0);
                    continue;
                }
            };
            let tag = message.tag();
            match message {
                Message::HelloRequest => {
                    let (inputs, outputs) = interpreter
                        .as_ref()
                        .map_or((0, 0), |i| (i.input_count() as u8, i.output_count() as u8));
                    link.send(&Message::Hello(Hello {
                        protocol: PROTOCOL_VERSION,
                        firmware: [0, 1, 0],
                        board: config::BOARD,
                        model_hash: config::MODEL_CRC,
                        arena_size: arena_capacity,
                        inputs,
                        outputs,
                        clock_hz: config::CLOCK_HZ,
                    }));
                    if let Some(a) = interpreter.as_ref().and_then(|i| i.allocation().ok()) {
                        let g = a.guards;
                        let mode = match g.mode {
                            CanaryMode::Off => 0,
                            CanaryMode::Bounds => 1,
                            CanaryMode::Buffers => 2,
                        };
                        let base = link.arena_base;
                        link.send(&Message::Guards {
                            mode,
                            len: GUARD_BYTES as u16,
                            addresses: g.regions.map(|r| base + r.offset),
                        });
                    }
                    if !ready {
                        link.error(
                            if model.is_none() {
                                ErrorCode::MODEL
                            } else {
                                ErrorCode::ALLOCATE
                            },
                            u16::MAX,
                            0,
                        );
                    }
                }
                _ if !ready => link.error(ErrorCode::UNSUPPORTED, u16::MAX, u32::from(tag)),
                Message::LoadInput {
                    input: position,
                    offset,
                    chunk,
                } => {
                    let Some(interp) = interpreter.as_mut() else {
                        continue;
                    };
                    match interp.input_mut(usize::from(position)) {
                        Ok(bytes) if (offset as usize) + chunk.len() <= bytes.len() => {
                            bytes[offset as usize..offset as usize + chunk.len()]
                                .copy_from_slice(chunk);
                            let received = offset + chunk.len() as u32;
                            link.send(&Message::InputAck {
                                input: position,
                                received,
                            });
                        }
                        _ => link.error(ErrorCode::BAD_INPUT, u16::MAX, u32::from(position)),
                    }
                }
                Message::Invoke { count } => {
                    #[cfg(feature = "fault-hang-on-invoke")]
                    loop {
                        cortex_m::asm::nop();
                    }
                    let Some(interp) = interpreter.as_mut() else {
                        continue;
                    };
                    let ops = interp.model().operator_count() as usize;
                    let mut failed = false;
                    for _ in 0..count.max(1) {
                        per_op[..ops.min(MAX_OPS)].fill(0);
                        #[cfg(feature = "fault-stack-overflow")]
                        crate::faults::grow_stack_into_arena();
                        counter.restart();
                        let start = counter.now();
                        let result =
                            interp.invoke_profiled(&counter, &mut per_op[..ops.min(MAX_OPS)]);
                        let total = counter.now() - start;
                        invocations += 1;
                        #[cfg(feature = "fault-blind-checker")]
                        let result = match result {
                            Err(InterpreterError::Canary(_)) => Ok(()),
                            other => other,
                        };
                        if let Err(e) = result {
                            interpreter_error(&mut link, e);
                            failed = true;
                            break;
                        }
                        link.send(&Message::Timing {
                            invocation: invocations,
                            total_cycles: total,
                            ops: ops as u16,
                        });
                    }
                    if failed {
                        continue;
                    }
                    let mut cycle_bytes = [0u8; 4 * 64];
                    let mut cycles = [0u32; 64];
                    for (chunk_index, chunk) in per_op[..ops.min(MAX_OPS)].chunks(64).enumerate() {
                        for (c, &v) in cycles.iter_mut().zip(chunk) {
                            *c = v.min(u64::from(u32::MAX)) as u32;
                        }
                        if let Ok(encoded) =
                            Cycles::encode_into(&cycles[..chunk.len()], &mut cycle_bytes)
                        {
                            link.send(&Message::OpCycles {
                                first_op: (chunk_index * 64) as u16,
                                cycles: encoded,
                            });
                        }
                    }
                    for position in 0..interp.output_count() {
                        let Ok(bytes) = interp.output(position) else {
                            continue;
                        };
                        let total = bytes.len() as u32;
                        for (i, chunk) in bytes.chunks(MAX_CHUNK).enumerate() {
                            link.send(&Message::OutputChunk {
                                output: position as u8,
                                offset: (i * MAX_CHUNK) as u32,
                                total,
                                chunk,
                            });
                        }
                    }
                    if let Ok(a) = interp.allocation() {
                        link.send(&Message::ArenaUsage {
                            capacity: arena_capacity,
                            head: a.head.len,
                            tail: a.tail_bytes,
                            used: interp.arena_used_bytes() as u32,
                        });
                    }
                    link.send(&Message::Done { request: tag });
                }
                Message::PlanRequest => {
                    let mut bytes = [0u8; 19 * 40];
                    let total = plan_len as u16;
                    for (i, chunk) in plan[..plan_len].chunks(40).enumerate() {
                        if let Ok(entries) = PlanEntries::encode_into(chunk, &mut bytes) {
                            link.send(&Message::PlanEntries {
                                first: (i * 40) as u16,
                                total,
                                entries,
                            });
                        }
                    }
                    link.send(&Message::Done { request: tag });
                }
                Message::ResetState => {
                    if let Some(interp) = interpreter.as_mut() {
                        let _ = interp.reset();
                    }
                    link.send(&Message::Done { request: tag });
                }
                _ => link.error(ErrorCode::UNSUPPORTED, u16::MAX, u32::from(tag)),
            }
        }
    }
}

/// Allocation options from the build: canary mode (`HILT_CANARY`).
fn alloc_options() -> AllocOptions {
    let canary = match config::CANARY {
        "bounds" => CanaryMode::Bounds,
        "buffers" => CanaryMode::Buffers,
        _ => CanaryMode::Off,
    };
    AllocOptions {
        canary,
        align: config::ALIGN,
    }
}
