//! The protocol session: read frames from the host, act, answer. One
//! handler per request; every request is answered in order, and the host
//! waits for each answer before it sends the next request.

use core::fmt::Write as _;

use embedded_hal::digital::OutputPin;
use embedded_io::{Error as _, Read, ReadReady, Write};
use hilt_proto::message::{Cycles, PlanEntries};
use hilt_proto::{
    ErrorCode, FrameAccumulator, Hello, MAX_CHUNK, MAX_FRAME, Message, PROTOCOL_VERSION, PlanEntry,
    decode_frame,
};
use hilt_runtime::canary::{CanaryMode, GUARD_BYTES};
use hilt_runtime::interpreter::Interpreter;
use hilt_runtime::kernels::Resolver;
use hilt_runtime::model::Model;
use hilt_runtime::planner::MemoryPlanner;
use hilt_runtime::request::BufferOwner;

use crate::config::Config;
use crate::counter::CycleCounter;
use crate::link::{Line, Link, WireError};
use crate::pin::NoPin;
use crate::planner::{Accelerator, NoAccelerator, NoCustomPlanner, Planner, PlannerChoice};
use crate::report::interpreter_error;
use crate::workspace::{MAX_OPS, MAX_PLAN, Parts};

/// No operator: the error is not about one.
const NO_OP: u16 = u16::MAX;
/// The agent's version, as the Hello reports it.
const VERSION: [u8; 3] = [0, 1, 0];
/// Bytes taken from the wire per read.
const READ_CHUNK: usize = 256;
/// Per-op cycle counts per `OpCycles` message.
const CYCLES_PER_MESSAGE: usize = 64;
/// Plan entries per `PlanEntries` message (19 bytes each).
const PLAN_PER_MESSAGE: usize = 40;

/// A session being set up: the seams first, then [`start`](Self::start)
/// with the memory to run in.
#[derive(Debug)]
pub struct Agent<W, C, T = NoPin, P = NoCustomPlanner, A = NoAccelerator> {
    config: Config,
    wire: W,
    counter: C,
    pin: T,
    planner: PlannerChoice<P>,
    accelerator: A,
}

impl<W: Read + Write, C: CycleCounter> Agent<W, C> {
    /// An agent on `wire`, timing with `counter`; greedy planning, no
    /// timestamp pin, no accelerator until said otherwise.
    pub fn new(config: Config, wire: W, counter: C) -> Self {
        Agent {
            config,
            wire,
            counter,
            pin: NoPin,
            planner: PlannerChoice::Builtin(Planner::Greedy),
            accelerator: NoAccelerator,
        }
    }
}

impl<W: Read + Write, C: CycleCounter, T: OutputPin, P: MemoryPlanner, A: Accelerator>
    Agent<W, C, T, P, A>
{
    /// Holds `pin` high for the duration of each invoke (set just outside
    /// the timed region, so the cycle figures do not include it).
    pub fn timestamp_pin<T2: OutputPin>(self, pin: T2) -> Agent<W, C, T2, P, A> {
        Agent {
            config: self.config,
            wire: self.wire,
            counter: self.counter,
            pin,
            planner: self.planner,
            accelerator: self.accelerator,
        }
    }

    /// Plans the arena with one of the runtime's planners.
    pub fn planner(self, planner: Planner) -> Agent<W, C, T, NoCustomPlanner, A> {
        self.with_planner(PlannerChoice::Builtin(planner))
    }

    /// Plans the arena with a planner of your own (an allocator port, a
    /// test planner): it gets the same requests and its plan the same
    /// checks as the runtime's.
    pub fn custom_planner<P2: MemoryPlanner>(self, planner: P2) -> Agent<W, C, T, P2, A> {
        self.with_planner(PlannerChoice::Custom(planner))
    }

    fn with_planner<P2>(self, planner: PlannerChoice<P2>) -> Agent<W, C, T, P2, A> {
        Agent {
            config: self.config,
            wire: self.wire,
            counter: self.counter,
            pin: self.pin,
            planner,
            accelerator: self.accelerator,
        }
    }

    /// Hands operators to `accelerator` (a place kept: see [`Accelerator`]).
    pub fn accelerator<A2: Accelerator>(self, accelerator: A2) -> Agent<W, C, T, P, A2> {
        Agent {
            config: self.config,
            wire: self.wire,
            counter: self.counter,
            pin: self.pin,
            planner: self.planner,
            accelerator,
        }
    }

    /// Says hello in the log, reads the model, prepares the kernels and
    /// commits the arena plan. A model or plan that fails is not an error
    /// here: the session still answers, and tells the host what failed
    /// (a `Log` now, an `Error` after each Hello), so the host reports it.
    /// Only the wire failing stops it.
    pub fn start<'s>(
        self,
        parts: Parts<'s>,
        resolver: &'s dyn Resolver,
    ) -> Result<Session<'s, W, C, T, A>, WireError> {
        let Parts {
            model,
            arena,
            workspace,
        } = parts;
        let arena_capacity = arena.len() as u32;
        let mut service = Service {
            config: self.config,
            link: Link::new(self.wire, arena.as_ptr() as u32, &mut workspace.frame),
            interpreter: None,
            status: Status::NoModel,
            counter: self.counter,
            pin: self.pin,
            accelerator: self.accelerator,
            plan: &mut workspace.plan,
            plan_len: 0,
            per_op: &mut workspace.per_op,
            invocations: 0,
            arena_capacity,
        };
        service.log_start(model.len())?;
        service.host(model, arena, resolver, &self.planner)?;
        Ok(Session {
            service,
            accumulator: FrameAccumulator::default(),
            input: [0; READ_CHUNK],
            scratch: &mut workspace.scratch,
        })
    }
}

/// A running session: [`poll`](Self::poll) it, or [`run`](Self::run) it
/// for good.
pub struct Session<'s, W, C, T = NoPin, A = NoAccelerator> {
    service: Service<'s, W, C, T, A>,
    accumulator: FrameAccumulator,
    input: [u8; READ_CHUNK],
    scratch: &'s mut [u8; MAX_FRAME],
}

impl<W, C, T, A> core::fmt::Debug for Session<'_, W, C, T, A> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Session")
            .field("status", &self.service.status)
            .field("invocations", &self.service.invocations)
            .finish_non_exhaustive()
    }
}

impl<'s, W: Read + Write, C: CycleCounter, T: OutputPin, A: Accelerator> Session<'s, W, C, T, A> {
    /// Waits for bytes from the host (a blocking `read`), then handles every
    /// request they complete. A damaged frame is answered with a
    /// `BAD_FRAME` error and the session goes on.
    pub fn poll(&mut self) -> Result<(), WireError> {
        let n = self
            .service
            .link
            .wire
            .read(&mut self.input)
            .map_err(|e| WireError::Read(e.kind()))?;
        if n == 0 {
            return Err(WireError::Closed);
        }
        for &byte in &self.input[..n] {
            let Some(frame) = self.accumulator.push(byte) else {
                continue;
            };
            match frame.and_then(|f| decode_frame(f, self.scratch)) {
                Ok(message) => self.service.dispatch(message)?,
                Err(_) => self.service.link.error(ErrorCode::BAD_FRAME, NO_OP, 0)?,
            }
        }
        Ok(())
    }

    /// Serves the host until the wire fails; returns why.
    pub fn run(&mut self) -> WireError {
        loop {
            if let Err(e) = self.poll() {
                return e;
            }
        }
    }

    /// The accelerator the session holds.
    pub fn accelerator(&self) -> &A {
        &self.service.accelerator
    }

    /// The wire, e.g. for a test to look at what was sent.
    pub fn wire(&mut self) -> &mut W {
        &mut self.service.link.wire
    }
}

impl<'s, W: Read + ReadReady + Write, C: CycleCounter, T: OutputPin, A: Accelerator>
    Session<'s, W, C, T, A>
{
    /// [`poll`](Self::poll) without the wait: handles what has arrived and
    /// returns at once when nothing has (`Ok(false)`), for a main loop that
    /// has other work between requests. A request in progress still runs
    /// to its end (an invoke is not split).
    pub fn poll_ready(&mut self) -> Result<bool, WireError> {
        let ready = self
            .service
            .link
            .wire
            .read_ready()
            .map_err(|e| WireError::Read(e.kind()))?;
        if ready {
            self.poll()?;
        }
        Ok(ready)
    }
}

/// Whether the session can run the model, and if not, why (the Hello
/// answers with that error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Ready,
    NoModel,
    NotAllocated,
}

/// The part of a session that answers requests (the frame reader is kept
/// apart: a decoded message borrows its buffer while a handler runs).
struct Service<'s, W, C, T, A> {
    config: Config,
    link: Link<'s, W>,
    interpreter: Option<Interpreter<'s, 's, 's>>,
    status: Status,
    counter: C,
    pin: T,
    accelerator: A,
    /// The arena plan as committed, for `PlanRequest`.
    plan: &'s mut [PlanEntry; MAX_PLAN],
    plan_len: usize,
    per_op: &'s mut [u64; MAX_OPS],
    invocations: u32,
    arena_capacity: u32,
}

impl<'s, W: Write, C: CycleCounter, T: OutputPin, A: Accelerator> Service<'s, W, C, T, A> {
    fn log_start(&mut self, model_len: usize) -> Result<(), WireError> {
        let mut line = Line::default();
        let _ = write!(
            line,
            "hilt firmware: board {}, model {} ({} bytes), arena {} bytes, cycles from {}",
            self.config.board,
            self.config.model_name,
            model_len,
            self.arena_capacity,
            self.counter.source()
        );
        self.link.log(&line)
    }

    /// Reads the model and commits its arena plan, recording the plan for
    /// `PlanRequest`.
    fn host<P: MemoryPlanner>(
        &mut self,
        model_bytes: &'s [u8],
        arena: &'s mut [u8],
        resolver: &'s dyn Resolver,
        planner: &PlannerChoice<P>,
    ) -> Result<(), WireError> {
        let model = match Model::from_bytes(model_bytes) {
            Ok(m) => m,
            Err(e) => {
                let mut line = Line::default();
                let _ = write!(line, "model: {e}");
                return self.link.log(&line);
            }
        };
        self.status = Status::NotAllocated;
        let interpreter = self
            .interpreter
            .insert(Interpreter::new(model, resolver, arena));
        let (plan, plan_len) = (&mut *self.plan, &mut self.plan_len);
        let alloc = self.config.alloc;
        let result = planner.with(&model, |p| {
            interpreter
                .allocate_with_report(p, &alloc, |report| {
                    for (r, &offset) in report.requests.iter().zip(report.offsets) {
                        if *plan_len == MAX_PLAN {
                            break;
                        }
                        plan[*plan_len] = plan_entry(r, offset);
                        *plan_len += 1;
                    }
                })
                .map(|_| ())
        });
        match result {
            None => {
                let mut line = Line::default();
                let _ = write!(
                    line,
                    "planner {}: the model has no valid offline plan",
                    planner.name()
                );
                self.link.log(&line)
            }
            Some(Ok(())) => {
                self.status = Status::Ready;
                #[cfg(feature = "fault-overrun")]
                interpreter.inject_overrun(0, 8);
                Ok(())
            }
            Some(Err(e)) => interpreter_error(&mut self.link, e),
        }
    }

    fn dispatch(&mut self, message: Message<'_>) -> Result<(), WireError> {
        let tag = message.tag();
        match message {
            Message::HelloRequest => self.handle_hello(),
            _ if self.status != Status::Ready => {
                self.link
                    .error(ErrorCode::UNSUPPORTED, NO_OP, u32::from(tag))
            }
            Message::LoadInput {
                input,
                offset,
                chunk,
            } => self.handle_load_input(input, offset, chunk),
            Message::Invoke { count } => self.handle_invoke(count, tag),
            Message::PlanRequest => self.handle_plan_request(tag),
            Message::ResetState => self.handle_reset_state(tag),
            _ => self
                .link
                .error(ErrorCode::UNSUPPORTED, NO_OP, u32::from(tag)),
        }
    }

    /// Who we are, the guards' addresses (so the host can check them
    /// itself), and, when the model cannot run, why.
    fn handle_hello(&mut self) -> Result<(), WireError> {
        let (inputs, outputs) = self
            .interpreter
            .as_ref()
            .map_or((0, 0), |i| (i.input_count() as u8, i.output_count() as u8));
        self.link.send(&Message::Hello(Hello {
            protocol: PROTOCOL_VERSION,
            firmware: VERSION,
            board: self.config.board,
            model_hash: self.config.model_hash,
            arena_size: self.arena_capacity,
            inputs,
            outputs,
            clock_hz: self.config.clock_hz,
        }))?;
        if let Some(a) = self.interpreter.as_ref().and_then(|i| i.allocation().ok()) {
            let g = a.guards;
            let mode = match g.mode {
                CanaryMode::Off => 0,
                CanaryMode::Bounds => 1,
                CanaryMode::Buffers => 2,
            };
            let base = self.link.arena_base;
            self.link.send(&Message::Guards {
                mode,
                len: GUARD_BYTES as u16,
                addresses: g.regions.map(|r| base + r.offset),
            })?;
        }
        match self.status {
            Status::Ready => Ok(()),
            Status::NoModel => self.link.error(ErrorCode::MODEL, NO_OP, 0),
            Status::NotAllocated => self.link.error(ErrorCode::ALLOCATE, NO_OP, 0),
        }
    }

    /// Copies one chunk into an input tensor; a chunk outside the tensor
    /// (or an input that does not exist) is a `BAD_INPUT` error.
    fn handle_load_input(
        &mut self,
        position: u8,
        offset: u32,
        chunk: &[u8],
    ) -> Result<(), WireError> {
        let Some(interpreter) = self.interpreter.as_mut() else {
            return Ok(());
        };
        let start = offset as usize;
        match interpreter.input_mut(usize::from(position)) {
            Ok(bytes)
                if start
                    .checked_add(chunk.len())
                    .is_some_and(|end| end <= bytes.len()) =>
            {
                bytes[start..start + chunk.len()].copy_from_slice(chunk);
                self.link.send(&Message::InputAck {
                    input: position,
                    received: offset + chunk.len() as u32,
                })
            }
            _ => self
                .link
                .error(ErrorCode::BAD_INPUT, NO_OP, u32::from(position)),
        }
    }

    /// Runs the model `count` times (at least once), a `Timing` after each;
    /// then the last run's per-op cycles, outputs and arena use, and `Done`.
    /// A failed run ends the request with its error instead.
    fn handle_invoke(&mut self, count: u32, tag: u8) -> Result<(), WireError> {
        #[cfg(feature = "fault-hang-on-invoke")]
        crate::faults::hang();
        let Some(ops) = self
            .interpreter
            .as_ref()
            .map(|i| (i.model().operator_count() as usize).min(MAX_OPS))
        else {
            return Ok(());
        };
        for _ in 0..count.max(1) {
            if !self.invoke_timed(ops)? {
                return Ok(());
            }
        }
        self.send_op_cycles(ops)?;
        self.send_outputs()?;
        self.send_arena_usage()?;
        self.link.send(&Message::Done { request: tag })
    }

    /// One timed invoke and its `Timing`; `false` when it failed (the
    /// error is sent).
    fn invoke_timed(&mut self, ops: usize) -> Result<bool, WireError> {
        let Some(interpreter) = self.interpreter.as_mut() else {
            return Ok(false);
        };
        let per_op = &mut self.per_op[..ops];
        per_op.fill(0);
        #[cfg(feature = "fault-stack-overflow")]
        crate::faults::grow_stack_into_arena(
            self.link.arena_base as usize + self.arena_capacity as usize,
        );
        let pin_high = self.pin.set_high();
        self.counter.restart();
        let start = self.counter.now();
        let result = interpreter.invoke_profiled(&self.counter, per_op);
        let total = self.counter.now() - start;
        let pin_low = self.pin.set_low();
        self.invocations += 1;
        #[cfg(feature = "fault-blind-checker")]
        let result = crate::faults::blind(result);
        if pin_high.is_err() || pin_low.is_err() {
            let mut line = Line::default();
            let _ = write!(
                line,
                "timestamp pin: could not be set; the timing is still valid"
            );
            self.link.log(&line)?;
        }
        if let Err(e) = result {
            interpreter_error(&mut self.link, e)?;
            return Ok(false);
        }
        self.link.send(&Message::Timing {
            invocation: self.invocations,
            total_cycles: total,
            ops: ops as u16,
        })?;
        Ok(true)
    }

    fn send_op_cycles(&mut self, ops: usize) -> Result<(), WireError> {
        let mut cycle_bytes = [0u8; 4 * CYCLES_PER_MESSAGE];
        let mut cycles = [0u32; CYCLES_PER_MESSAGE];
        for (chunk_index, chunk) in self.per_op[..ops].chunks(CYCLES_PER_MESSAGE).enumerate() {
            for (c, &v) in cycles.iter_mut().zip(chunk) {
                *c = v.min(u64::from(u32::MAX)) as u32;
            }
            let encoded = Cycles::encode_into(&cycles[..chunk.len()], &mut cycle_bytes)
                .map_err(WireError::Frame)?;
            self.link.send(&Message::OpCycles {
                first_op: (chunk_index * CYCLES_PER_MESSAGE) as u16,
                cycles: encoded,
            })?;
        }
        Ok(())
    }

    fn send_outputs(&mut self) -> Result<(), WireError> {
        let Some(interpreter) = self.interpreter.as_ref() else {
            return Ok(());
        };
        for position in 0..interpreter.output_count() {
            let Ok(bytes) = interpreter.output(position) else {
                continue;
            };
            let total = bytes.len() as u32;
            for (i, chunk) in bytes.chunks(MAX_CHUNK).enumerate() {
                self.link.send(&Message::OutputChunk {
                    output: position as u8,
                    offset: (i * MAX_CHUNK) as u32,
                    total,
                    chunk,
                })?;
            }
        }
        Ok(())
    }

    fn send_arena_usage(&mut self) -> Result<(), WireError> {
        let Some(interpreter) = self.interpreter.as_ref() else {
            return Ok(());
        };
        if let Ok(a) = interpreter.allocation() {
            self.link.send(&Message::ArenaUsage {
                capacity: self.arena_capacity,
                head: a.head.len,
                tail: a.tail_bytes,
                used: interpreter.arena_used_bytes() as u32,
            })?;
        }
        Ok(())
    }

    /// The committed arena plan, 40 entries a message, then `Done`.
    fn handle_plan_request(&mut self, tag: u8) -> Result<(), WireError> {
        let mut bytes = [0u8; 19 * PLAN_PER_MESSAGE];
        let total = self.plan_len as u16;
        for (i, chunk) in self.plan[..self.plan_len]
            .chunks(PLAN_PER_MESSAGE)
            .enumerate()
        {
            let entries = PlanEntries::encode_into(chunk, &mut bytes).map_err(WireError::Frame)?;
            self.link.send(&Message::PlanEntries {
                first: (i * PLAN_PER_MESSAGE) as u16,
                total,
                entries,
            })?;
        }
        self.link.send(&Message::Done { request: tag })
    }

    /// Back to the state right after start-up: variables (RNN state)
    /// zeroed, so a new case does not see the last one's state.
    fn handle_reset_state(&mut self, tag: u8) -> Result<(), WireError> {
        if let Some(interpreter) = self.interpreter.as_mut() {
            // A reset of a committed interpreter cannot fail; the status
            // says Ready only for a committed one.
            let _ = interpreter.reset();
        }
        self.link.send(&Message::Done { request: tag })
    }
}

/// One planned buffer as the protocol carries it.
fn plan_entry(r: &hilt_runtime::request::BufferRequest, offset: u32) -> PlanEntry {
    let (kind, index) = match r.owner() {
        BufferOwner::Tensor(t) => (0, t as u16),
        BufferOwner::Scratch { op, .. } => (1, op as u16),
    };
    PlanEntry {
        kind,
        index,
        first_step: r.first_step as u16,
        last_step: r.live_until() as u16,
        size: r.size,
        align: r.align,
        offset,
    }
}
