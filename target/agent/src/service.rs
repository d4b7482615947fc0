//! The requests' handlers, one per message, and the start-up that hosts
//! the model: parse it, prepare the kernels, commit the arena plan.

use core::fmt::Write as _;

use embedded_hal::digital::OutputPin;
use embedded_io::Write;
use hilt_proto::message::{Cycles, PlanEntries};
use hilt_proto::{ErrorCode, Hello, MAX_CHUNK, Message, PROTOCOL_VERSION, PlanEntry};
use hilt_runtime::canary::{CanaryMode, GUARD_BYTES};
use hilt_runtime::interpreter::Interpreter;
use hilt_runtime::kernels::Resolver;
use hilt_runtime::model::Model;
use hilt_runtime::planner::MemoryPlanner;
use hilt_runtime::request::BufferOwner;

use crate::config::Config;
use crate::counter::CycleCounter;
use crate::link::{Line, Link, WireError};
use crate::planner::{Accelerator, PlannerChoice};
use crate::report::interpreter_error;
use crate::workspace::{MAX_OPS, MAX_PLAN};

/// No operator: the error is not about one.
pub(crate) const NO_OP: u16 = u16::MAX;
/// The agent's version, as the Hello reports it.
const VERSION: [u8; 3] = [0, 1, 0];
/// Per-op cycle counts per `OpCycles` message.
const CYCLES_PER_MESSAGE: usize = 64;
/// Plan entries per `PlanEntries` message (19 bytes each).
const PLAN_PER_MESSAGE: usize = 40;

/// The firmware's seams a service holds.
pub(crate) struct Seams<C, T, A> {
    pub(crate) counter: C,
    pub(crate) pin: T,
    pub(crate) accelerator: A,
}

/// Whether the session can run the model, and if not, why (the Hello
/// answers with that error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Ready,
    NoModel,
    NotAllocated,
}

/// The part of a session that answers requests (the frame reader is kept
/// apart: a decoded message borrows its buffer while a handler runs).
pub(crate) struct Service<'s, W, C, T, A> {
    config: Config,
    pub(crate) link: Link<'s, W>,
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

impl<'s, W, C, T, A> Service<'s, W, C, T, A> {
    pub(crate) fn new(
        config: Config,
        link: Link<'s, W>,
        arena_capacity: u32,
        seams: Seams<C, T, A>,
        plan: &'s mut [PlanEntry; MAX_PLAN],
        per_op: &'s mut [u64; MAX_OPS],
    ) -> Self {
        Service {
            config,
            link,
            interpreter: None,
            status: Status::NoModel,
            counter: seams.counter,
            pin: seams.pin,
            accelerator: seams.accelerator,
            plan,
            plan_len: 0,
            per_op,
            invocations: 0,
            arena_capacity,
        }
    }

    pub(crate) fn status(&self) -> Status {
        self.status
    }

    pub(crate) fn invocations(&self) -> u32 {
        self.invocations
    }

    pub(crate) fn accelerator(&self) -> &A {
        &self.accelerator
    }
}

impl<'s, W: Write, C: CycleCounter, T: OutputPin, A: Accelerator> Service<'s, W, C, T, A> {
    pub(crate) fn log_start(&mut self, model_len: usize) -> Result<(), WireError> {
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
    pub(crate) fn host<P: MemoryPlanner>(
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
                #[cfg(feature = "fault-slow-op")]
                interpreter.inject_slowdown(2, 10);
                Ok(())
            }
            Some(Err(e)) => interpreter_error(&mut self.link, e),
        }
    }

    pub(crate) fn dispatch(&mut self, message: Message<'_>) -> Result<(), WireError> {
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
