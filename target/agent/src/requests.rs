//! The requests' handlers, one per message, and the start-up that hosts
//! the model: parse it, prepare the kernels, commit the arena plan.

use embedded_hal::digital::OutputPin;
use embedded_io::Write;
use hilt_proto::message::{Cycles, JobList, PlanEntries};
use hilt_proto::{
    AccelFault, ErrorCode, Hello, JobTimes, MAX_CHUNK, Message, OffloadMode, PROTOCOL_VERSION,
    PlanEntry,
};
use hilt_runtime::accel::vnpu::{DriverModel, LatencyModel};
use hilt_runtime::accel::{AddressWindow, Coherent, JobTrace, OFFLOAD_LINKED, Offload};
use hilt_runtime::canary::{CanaryMode, GUARD_BYTES};
use hilt_runtime::constants::Constants;
use hilt_runtime::interpreter::{Clock, Interpreter};
use hilt_runtime::kernels::Resolver;
use hilt_runtime::model::Model;
#[cfg(feature = "fault-injection")]
use hilt_runtime::planner::MemoryPlanner;
use hilt_runtime::request::BufferOwner;

use crate::config::Config;
use crate::counter::CycleCounter;
use crate::link::{Link, WireError};
use crate::notes::Note;
use crate::offload::{
    EngineLedger, EngineSetup, NetClock, OffloadChoice, OffloadEngine, ShadowMemory, TICK_COUNTS,
    WAIT_TIMEOUT, op_set,
};
use crate::planner::PlannerSource;
use crate::report::{accelerator_error, interpreter_error};
use crate::workspace::{MAX_JOBS, MAX_OPS, MAX_PLAN};

/// No operator: the error is not about one.
pub(crate) const NO_OP: u16 = u16::MAX;
/// The agent's version, as the Hello reports it.
const VERSION: [u8; 3] = [0, 1, 0];
/// Per-op cycle counts per `OpCycles` message.
const CYCLES_PER_MESSAGE: usize = 64;
/// Plan entries per `PlanEntries` message (19 bytes each).
const PLAN_PER_MESSAGE: usize = 40;
/// Job records per `Jobs` message.
const JOBS_PER_MESSAGE: usize = 48;

/// The firmware's seams a service holds.
pub(crate) struct Seams<'s, C, T, P> {
    pub(crate) counter: C,
    pub(crate) pin: T,
    pub(crate) planner: P,
    pub(crate) engine: Option<&'s dyn OffloadEngine>,
}

/// The last invoke's offload figures, for the `Offload` message.
#[derive(Debug, Clone, Copy, Default)]
struct OffloadFigures {
    jobs: u32,
    overlapped: u32,
    busy: u64,
    waited: u64,
    ledger: EngineLedger,
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
pub(crate) struct Service<'s, W, C, T, P> {
    config: Config,
    pub(crate) link: Link<'s, W>,
    interpreter: Option<Interpreter<'s, 's, 's>>,
    status: Status,
    counter: C,
    pin: T,
    planner: P,
    engine: Option<&'s dyn OffloadEngine>,
    /// The model and kernels, kept to re-plan when the offload changes.
    model: Option<Model<'s>>,
    resolver: Option<&'s dyn Resolver>,
    /// The model's constant image (empty: constants in the tail).
    constants: &'s [u8],
    /// The whole arena the session was given (the interpreter runs in all
    /// of it, or in its first half when the other is an engine's shadow).
    arena_full: (*mut u8, usize),
    offload: OffloadChoice,
    /// One bit per op: the engine claimed it.
    placement: [u8; MAX_OPS / 8],
    jobs: &'s mut [JobTrace; MAX_JOBS],
    figures: OffloadFigures,
    /// The arena plan as committed, for `PlanRequest`.
    plan: &'s mut [PlanEntry; MAX_PLAN],
    plan_len: usize,
    per_op: &'s mut [u64; MAX_OPS],
    invocations: u32,
    arena_capacity: u32,
}

impl<'s, W, C, T, P> Service<'s, W, C, T, P> {
    pub(crate) fn new(
        config: Config,
        link: Link<'s, W>,
        arena_capacity: u32,
        seams: Seams<'s, C, T, P>,
        plan: &'s mut [PlanEntry; MAX_PLAN],
        per_op: &'s mut [u64; MAX_OPS],
        jobs: &'s mut [JobTrace; MAX_JOBS],
    ) -> Self {
        Service {
            config,
            link,
            interpreter: None,
            status: Status::NoModel,
            counter: seams.counter,
            pin: seams.pin,
            planner: seams.planner,
            engine: seams.engine,
            model: None,
            resolver: None,
            constants: &[],
            arena_full: (core::ptr::null_mut(), 0),
            offload: OffloadChoice::OFF,
            placement: [0; MAX_OPS / 8],
            jobs,
            figures: OffloadFigures::default(),
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

    /// The engine offloading is done to, if the firmware has one (never
    /// under `no-offload`).
    pub(crate) fn engine(&self) -> Option<&'s dyn OffloadEngine> {
        self.engine.filter(|_| OFFLOAD_LINKED)
    }
}

impl<'s, W: Write, C: CycleCounter, T: OutputPin, P: PlannerSource> Service<'s, W, C, T, P> {
    pub(crate) fn log_start(&mut self, model_len: usize) -> Result<(), WireError> {
        self.link.note(&Note::Start {
            board: self.config.board,
            model: self.config.model_name,
            model_bytes: model_len as u32,
            arena_bytes: self.arena_capacity,
            cycles_from: self.counter.source(),
        })
    }

    /// Reads the model and commits its arena plan, recording the plan for
    /// `PlanRequest`.
    pub(crate) fn host(
        &mut self,
        model_bytes: &'s [u8],
        constants: &'s [u8],
        arena: &'s mut [u8],
        resolver: &'s dyn Resolver,
    ) -> Result<(), WireError> {
        let model = match Model::from_bytes(model_bytes) {
            Ok(m) => m,
            Err(e) => return self.link.note(&Note::Model(e)),
        };
        #[cfg(feature = "defmt")]
        defmt::info!(
            "model read: {=usize} bytes, {=u32} operators",
            model_bytes.len(),
            model.operator_count()
        );
        self.model = Some(model);
        self.resolver = Some(resolver);
        self.constants = constants;
        self.arena_full = (arena.as_mut_ptr(), arena.len());
        self.commit(arena)
    }

    /// A new interpreter in `arena`, offloading as chosen, with its plan
    /// committed and recorded. A plan that fails is reported (the status
    /// says so); only the wire failing is an error.
    fn commit(&mut self, arena: &'s mut [u8]) -> Result<(), WireError> {
        let (Some(model), Some(resolver)) = (self.model, self.resolver) else {
            return Ok(());
        };
        self.status = Status::NotAllocated;
        self.plan_len = 0;
        self.arena_capacity = arena.len() as u32;
        let engine = self
            .engine()
            .filter(|_| self.offload.mode != OffloadMode::Off);
        let interpreter = self
            .interpreter
            .insert(Interpreter::new(model, resolver, arena));
        if !self.constants.is_empty() {
            interpreter.set_constants(Constants::read(self.constants));
        }
        interpreter.set_offload(engine.map(|engine| Offload {
            accelerator: engine,
            cache: match self.offload.mode {
                OffloadMode::NonCoherent => engine,
                _ => &Coherent,
            },
            ops: self.offload.ops,
            timeout: WAIT_TIMEOUT,
        }));
        #[cfg(feature = "fault-injection")]
        {
            use crate::faults::{Fault, armed};
            if armed(Fault::Accel) {
                interpreter.inject_offload_fault(self.offload.runtime_fault());
                if self.offload.fault == AccelFault::DropHolds {
                    interpreter.inject_drop_holds();
                }
            }
            if armed(Fault::UncheckedPlan) {
                interpreter.inject_unchecked_plan();
            }
        }
        let (plan, plan_len) = (&mut *self.plan, &mut self.plan_len);
        let alloc = self.config.alloc;
        let result = self.planner.with(&model, |p| {
            #[cfg(feature = "fault-injection")]
            let misplanned = crate::faults::Misplanned(p);
            #[cfg(feature = "fault-injection")]
            let p: &dyn MemoryPlanner = if crate::faults::armed(crate::faults::Fault::Misplan) {
                &misplanned
            } else {
                p
            };
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
            Err(e) => {
                let name = self.planner.name();
                self.link.note(&Note::Planner { name, error: e })
            }
            Ok(Ok(())) => {
                self.status = Status::Ready;
                #[cfg(feature = "defmt")]
                defmt::info!(
                    "arena plan committed: {=usize} buffers, by the {=str} planner",
                    self.plan_len,
                    self.planner.name()
                );
                let mut claimed = [false; MAX_OPS];
                let ops = (model.operator_count() as usize).min(MAX_OPS);
                self.placement = [0; MAX_OPS / 8];
                if interpreter.claimed_ops(&mut claimed[..ops]).is_ok() {
                    for (i, _) in claimed.iter().enumerate().filter(|(_, c)| **c) {
                        self.placement[i / 8] |= 1 << (i % 8);
                    }
                }
                #[cfg(feature = "fault-injection")]
                arm_kernel_faults(interpreter);
                Ok(())
            }
            Ok(Err(e)) => interpreter_error(&mut self.link, e),
        }
    }

    /// Answers one request. The handlers are kept out of line
    /// (`#[inline(never)]`), the invoke's too: inlined, each one's buffers
    /// would sit in the caller's frame (on a firmware, `main`'s, which
    /// every kernel runs on top of) for the whole session, stack that a
    /// part with 64 KiB of RAM needs for its arena.
    pub(crate) fn dispatch(&mut self, message: Message<'_>) -> Result<(), WireError> {
        let tag = message.tag();
        match message {
            Message::HelloRequest => self.handle_hello(),
            // Allowed after a plan failed too: the host may turn offload off.
            Message::SetOffload {
                mode,
                fault,
                job_cycles,
                cycles_per_1000_macs,
                driver_submit_cycles,
                driver_cycles_per_line,
                cycles_per_count_milli,
                ops,
            } if self.status != Status::NoModel => {
                let latency = LatencyModel {
                    job_cycles: u64::from(job_cycles),
                    cycles_per_1000_macs: u64::from(cycles_per_1000_macs),
                };
                let driver = DriverModel {
                    submit_cycles: u64::from(driver_submit_cycles),
                    cycles_per_line: u64::from(driver_cycles_per_line),
                };
                let choice = OffloadChoice {
                    mode,
                    fault: AccelFault::None,
                    latency,
                    driver,
                    cycles_per_count_milli: cycles_per_count_milli.max(1),
                    ops: op_set(ops),
                };
                self.handle_set_offload(choice, fault, tag)
            }
            _ if self.status != Status::Ready => {
                self.link
                    .error(ErrorCode::UNSUPPORTED, NO_OP, u32::from(tag))
            }
            Message::LoadInput {
                input,
                offset,
                chunk,
            } => self.handle_load_input(input, offset, chunk),
            Message::Invoke { count, per_op } => self.handle_invoke(count, per_op, tag),
            Message::PlanRequest => self.handle_plan_request(tag),
            Message::ResetState => self.handle_reset_state(tag),
            _ => self
                .link
                .error(ErrorCode::UNSUPPORTED, NO_OP, u32::from(tag)),
        }
    }

    /// Sets the offload up as the host asks, then re-plans the arena:
    /// non-coherent mode gives the interpreter the arena's first half and
    /// the engine the second as its view of memory. Answered by `Done`, or
    /// by the error that stopped it (no engine, a fault this firmware was
    /// not built to inject, a plan that does not fit).
    #[inline(never)]
    fn handle_set_offload(
        &mut self,
        choice: OffloadChoice,
        fault: u8,
        tag: u8,
    ) -> Result<(), WireError> {
        let mode = choice.mode;
        let fault = match AccelFault::from_u8(fault) {
            Some(AccelFault::None) => AccelFault::None,
            Some(f) if accel_faults_armed() => f,
            _ => {
                self.link.note(&Note::FaultNotArmed { fault })?;
                return self
                    .link
                    .error(ErrorCode::UNSUPPORTED, NO_OP, u32::from(tag));
            }
        };
        let ticking = mode != OffloadMode::Off;
        if ticking && (self.engine().is_none() || !self.counter.tick_every(Some(TICK_COUNTS))) {
            self.link
                .log("offload: this firmware has no engine, or no timer to step it")?;
            return self
                .link
                .error(ErrorCode::UNSUPPORTED, NO_OP, u32::from(tag));
        }
        if !ticking {
            self.counter.tick_every(None);
        }
        self.offload = OffloadChoice { fault, ..choice };
        let arena = self.release_arena();
        let arena = self.set_up_engine(arena);
        self.commit(arena)?;
        if self.status == Status::Ready {
            // The re-plan moved the guards: the host checks the new ones.
            self.send_guards()?;
            self.link.send(&Message::Done { request: tag })
        } else {
            Ok(())
        }
    }

    /// Ends the interpreter and stops the engine; returns the whole arena.
    fn release_arena(&mut self) -> &'s mut [u8] {
        if let Some(interpreter) = self.interpreter.take() {
            let _ = interpreter.into_arena();
        }
        if let Some(engine) = self.engine() {
            // SAFETY: no shadow is given.
            unsafe { engine.configure(None) };
        }
        // SAFETY: `arena_full` is the arena `start` was handed for the
        // session's whole life; the interpreter that borrowed it is gone
        // and the engine no longer mirrors any of it.
        unsafe { core::slice::from_raw_parts_mut(self.arena_full.0, self.arena_full.1) }
    }

    /// Configures the engine for the chosen offload; returns the part of
    /// `arena` the interpreter runs in.
    fn set_up_engine(&mut self, arena: &'s mut [u8]) -> &'s mut [u8] {
        let Some(engine) = self
            .engine()
            .filter(|_| self.offload.mode != OffloadMode::Off)
        else {
            return arena;
        };
        let (arena, shadow) = match self.offload.mode {
            OffloadMode::NonCoherent => {
                let half = (arena.len() / 2) & !63;
                let (arena, shadow) = arena.split_at_mut(half);
                let mirror = ShadowMemory {
                    start: arena.as_ptr() as usize,
                    shadow: shadow.as_mut_ptr(),
                    len: arena.len(),
                };
                (arena, Some(mirror))
            }
            _ => (arena, None),
        };
        let (start, len) = (arena.as_ptr() as usize, arena.len());
        // The window fault: the engine reaches only the arena's upper half,
        // where the tail (op data), not the activations, lives.
        let window = if self.offload.fault == AccelFault::OutsideWindow {
            AddressWindow {
                start: start + len / 2,
                len: len - len / 2,
                writable: true,
            }
        } else {
            AddressWindow {
                start,
                len,
                writable: true,
            }
        };
        let setup = EngineSetup {
            latency: self.offload.latency,
            driver: self.offload.driver,
            cycles_per_tick: self.offload.cycles_per_tick(),
            window,
            shadow,
            fault: self.offload.engine_fault(),
        };
        // SAFETY: the shadow is the arena's second half, which nothing else
        // uses until the next `release_arena`.
        unsafe { engine.configure(Some(setup)) };
        arena
    }

    /// Who we are, the guards' addresses (so the host can check them
    /// itself), and, when the model cannot run, why.
    #[inline(never)]
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
        self.send_guards()?;
        match self.status {
            Status::Ready => Ok(()),
            Status::NoModel => self.link.error(ErrorCode::MODEL, NO_OP, 0),
            Status::NotAllocated => self.link.error(ErrorCode::ALLOCATE, NO_OP, 0),
        }
    }

    /// Where the section guards are, so the host can check them itself
    /// (after the Hello, and after a re-plan has moved them).
    #[inline(never)]
    fn send_guards(&mut self) -> Result<(), WireError> {
        let Some(a) = self.interpreter.as_ref().and_then(|i| i.allocation().ok()) else {
            return Ok(());
        };
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
        })
    }

    /// Copies one chunk into an input tensor; a chunk outside the tensor
    /// (or an input that does not exist) is a `BAD_INPUT` error.
    #[inline(never)]
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
    /// then the last run's per-op cycles (zeros unless `per_op`), outputs
    /// and arena use, and `Done`. A failed run ends the request with its
    /// error instead.
    #[inline(never)]
    fn handle_invoke(&mut self, count: u32, per_op: bool, tag: u8) -> Result<(), WireError> {
        #[cfg(feature = "fault-injection")]
        if crate::faults::armed(crate::faults::Fault::HangOnInvoke) {
            crate::faults::hang();
        }
        let Some(ops) = self
            .interpreter
            .as_ref()
            .map(|i| (i.model().operator_count() as usize).min(MAX_OPS))
        else {
            return Ok(());
        };
        for _ in 0..count.max(1) {
            if !self.invoke_timed(ops, per_op)? {
                return Ok(());
            }
        }
        self.send_op_cycles(ops)?;
        if self.offload.mode != OffloadMode::Off {
            self.send_offload(ops)?;
        }
        self.send_outputs()?;
        self.send_arena_usage()?;
        self.link.send(&Message::Done { request: tag })
    }

    /// One timed invoke and its `Timing`; `false` when it failed (the
    /// error is sent). With `profile_ops` each op is timed too (two counter
    /// reads around each kernel, and job traces when offloading); without,
    /// the total is a plain invoke's, as TFLM's `Invoke()` is measured.
    fn invoke_timed(&mut self, ops: usize, profile_ops: bool) -> Result<bool, WireError> {
        let Some(interpreter) = self.interpreter.as_mut() else {
            return Ok(false);
        };
        let per_op = &mut self.per_op[..ops];
        per_op.fill(0);
        #[cfg(feature = "fault-injection")]
        if crate::faults::armed(crate::faults::Fault::StackOverflow) {
            crate::faults::grow_stack_into_arena(
                self.link.arena_base as usize + self.arena_capacity as usize,
            );
        }
        let pin_high = self.pin.set_high();
        let engine = self
            .engine
            .filter(|_| OFFLOAD_LINKED && self.offload.mode != OffloadMode::Off);
        self.counter.restart();
        if let Some(e) = engine {
            e.rebase();
        }
        let (busy, ledger) = engine.map_or((0, EngineLedger::default()), |e| {
            (e.busy_cycles(), e.ledger())
        });
        // Net of the engine's emulation, with a real driver's modelled cost:
        // what the run takes beside a real engine (the same as the counter
        // when nothing is offloaded).
        let clock = NetClock {
            counter: &self.counter,
            engine,
        };
        let start = clock.now();
        #[cfg(feature = "calibration-loop")]
        let result = {
            let _ = (&interpreter, &per_op, profile_ops);
            crate::calibration::calibration_loop();
            Ok(())
        };
        #[cfg(not(feature = "calibration-loop"))]
        let result = if profile_ops {
            interpreter.invoke_traced(&clock, per_op, &mut self.jobs[..], start)
        } else {
            interpreter.invoke()
        };
        let total = clock.now() - start;
        let pin_low = self.pin.set_low();
        if let Some(e) = engine {
            let stats = interpreter.offload_stats();
            self.figures = OffloadFigures {
                jobs: stats.jobs,
                overlapped: stats.cpu_ops_overlapped,
                busy: self.offload.counts(e.busy_cycles() - busy),
                waited: stats.waited,
                ledger: e.ledger().since(&ledger),
            };
        }
        // What the engine saw that the schedule did not: a lease broken, an
        // invalidate missing.
        let violation = engine.and_then(|e| e.settle());
        self.invocations += 1;
        #[cfg(feature = "fault-injection")]
        let result = if crate::faults::armed(crate::faults::Fault::BlindChecker) {
            crate::faults::blind(result)
        } else {
            result
        };
        if pin_high.is_err() || pin_low.is_err() {
            self.link
                .log("timestamp pin: could not be set; the timing is still valid")?;
        }
        if let Err(e) = result {
            interpreter_error(&mut self.link, e)?;
            return Ok(false);
        }
        if let Some(v) = violation {
            accelerator_error(&mut self.link, v.op, v.job.0, v.error)?;
            return Ok(false);
        }
        // Outside the timed region, as every other line here.
        #[cfg(feature = "defmt")]
        defmt::info!(
            "invoke {=u32}: {=usize} ops in {=u64} counts of the {=str} counter ({=u64} us at {=u32} Hz)",
            self.invocations,
            ops,
            total,
            self.counter.source(),
            total.saturating_mul(1_000_000) / u64::from(self.config.clock_hz.max(1)),
            self.config.clock_hz
        );
        self.link.send(&Message::Timing {
            invocation: self.invocations,
            total_cycles: total,
            ops: ops as u16,
        })?;
        Ok(true)
    }

    #[inline(never)]
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

    /// The last invoke's offload figures and placement, then its jobs.
    #[inline(never)]
    fn send_offload(&mut self, ops: usize) -> Result<(), WireError> {
        let f = self.figures;
        self.link.send(&Message::Offload {
            jobs: f.jobs.min(u32::from(u16::MAX)) as u16,
            overlapped: f.overlapped.min(u32::from(u16::MAX)) as u16,
            busy: f.busy,
            waited: f.waited,
            ledger: f.ledger,
            placement: &self.placement[..ops.div_ceil(8)],
        })?;
        let traced = (f.jobs as usize).min(MAX_JOBS);
        let mut bytes = [0u8; JobTimes::BYTES * JOBS_PER_MESSAGE];
        let mut times = [JobTimes::default(); JOBS_PER_MESSAGE];
        for (i, chunk) in self.jobs[..traced].chunks(JOBS_PER_MESSAGE).enumerate() {
            for (t, j) in times.iter_mut().zip(chunk) {
                *t = JobTimes {
                    op: j.op as u16,
                    submitted: j.submitted,
                    completed: j.completed,
                    wait_started: j.wait_started,
                    retired: j.retired,
                };
            }
            let jobs = JobList::encode_into(&times[..chunk.len()], &mut bytes)
                .map_err(WireError::Frame)?;
            self.link.send(&Message::Jobs {
                first: (i * JOBS_PER_MESSAGE) as u16,
                total: traced as u16,
                jobs,
            })?;
        }
        Ok(())
    }

    #[inline(never)]
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

    #[inline(never)]
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
    #[inline(never)]
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
    #[inline(never)]
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

/// Arms the kernel faults the host armed in this firmware (each on the op
/// its [`Fault`](crate::faults::Fault) names).
#[cfg(feature = "fault-injection")]
fn arm_kernel_faults(interpreter: &mut Interpreter<'_, '_, '_>) {
    use crate::faults::{Fault, armed};
    if armed(Fault::Overrun) {
        interpreter.inject_overrun(0, 8);
    }
    if armed(Fault::OverRead) {
        interpreter.inject_over_read(0);
    }
    if armed(Fault::WriteInput) {
        interpreter.inject_write_input(1);
    }
    if armed(Fault::StackInOp) {
        interpreter.inject_after_op(0, crate::faults::push_below_stack);
    }
    if armed(Fault::BadPointer) {
        interpreter.inject_after_op(0, crate::faults::load_through_bad_pointer);
    }
    if armed(Fault::SlowOp) {
        interpreter.inject_slowdown(2, 10);
    }
    if armed(Fault::SlowOp3Ticks) {
        interpreter.inject_delay(2, 3);
    }
}

/// Whether the host may ask for an offload fault (`SetOffload`'s `fault`).
fn accel_faults_armed() -> bool {
    #[cfg(feature = "fault-injection")]
    if crate::faults::armed(crate::faults::Fault::Accel) {
        return true;
    }
    false
}
