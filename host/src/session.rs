//! The protocol session with a started board, whatever drives it: Hello
//! and its checks, then per step the inputs streamed, the invoke, the
//! results read and compared, and at the end the committed arena plan.
//! Blocking (probe, gdbstub and serial I/O); a driver runs it on the
//! orchestrator's blocking thread.

use std::time::{Duration, Instant};

use hilt_contract::offload::Accelerator;
use hilt_proto::{
    AccelFault, EngineLedger, ErrorCode, JobTimes, MAX_CHUNK, Message, OffloadMode,
    PROTOCOL_VERSION,
};
use hilt_runtime::accel::AccelError;

use crate::config::board::Board;
use crate::config::scenario::{Scenario, StepData};
use crate::elf::ElfError;
use crate::link::{Link, LinkError};
use crate::outcome::{
    BoardRun, JobSpan, KeptCycles, ObservedStep, OffloadSetting, PlannedBuffer, RemovedCycles,
    StepOffload, StepResult,
};

/// A failure while running, before it becomes an [`Outcome::Error`].
#[derive(Debug, thiserror::Error)]
pub enum RunFailure {
    /// Starting the board failed.
    #[error("{0}")]
    Start(String),
    /// The protocol session failed.
    #[error(transparent)]
    Link(#[from] LinkError),
    /// The firmware reported an error.
    #[error("firmware error {code} (op {op}, detail {detail})")]
    Target {
        /// Error code name.
        code: String,
        /// Operator.
        op: u16,
        /// Detail.
        detail: u32,
    },
    /// The board's process (QEMU) ended during the run: how, and its last
    /// words.
    #[error("{0}")]
    BoardExited(String),
    /// The run was stopped at its time limit; where the core was.
    #[error("{0}")]
    Stopped(String),
    /// The firmware is not the one expected.
    #[error("{0}")]
    WrongFirmware(String),
    /// The firmware image cannot be used this way (e.g. no RTT block).
    #[error(transparent)]
    Image(#[from] ElfError),
    /// A guard band was found damaged (by the firmware or by the host).
    #[error("canary: {0}")]
    Canary(String),
    /// An offloaded op's job failed (`ErrorCode::ACCELERATOR`), decoded.
    #[error("firmware error ACCELERATOR: op {op} ({op_name}), job {job}: {error}")]
    Accelerator {
        /// The operator (execution step).
        op: u16,
        /// Its name in the model (`?` when unknown).
        op_name: String,
        /// The low 8 bits of the job's id.
        job: u32,
        /// What went wrong.
        error: AccelError,
    },
    /// hilt's QEMU plugin saw a load or store outside what its op may
    /// touch (the first, described; how many in all).
    #[error("access check: {first}{}", if *count > 1 { format!(" ({count} violations in all)") } else { String::new() })]
    Access {
        /// The first violation, described.
        first: String,
        /// Violations seen.
        count: u64,
    },
    /// hilt's QEMU plugin could not observe the run.
    #[error("QEMU plugin: {0}")]
    Observer(String),
    /// The firmware refused `SetOffload`.
    #[error("the firmware refused SetOffload ({code}): {why}")]
    OffloadRefused {
        /// Error code name.
        code: String,
        /// What that means for this request.
        why: String,
    },
}

/// Guard bands the firmware announced, checked by the host through memory reads.
#[derive(Debug, Clone, Copy)]
struct Guards {
    len: u16,
    addresses: [u32; 4],
}

const GUARD_NAMES: [&str; 4] = [
    "the arena's start guard",
    "the guard after the head",
    "the guard before the tail",
    "the arena's end guard",
];

fn owner_name(owner: u8, index: u32) -> String {
    match owner {
        0..=3 => GUARD_NAMES[owner as usize].to_string(),
        4 => format!("the guard after tensor {index}"),
        5 => format!("the guard after op {index}'s scratch buffer"),
        other => format!("guard kind {other}"),
    }
}

/// The host's own check: reads every section guard from target memory, so
/// a firmware whose checker is itself broken is still caught. Over a bare
/// serial line there is no memory access: the firmware's check stands alone
/// (said once in the run's log).
fn host_check_guards(link: &mut Link<'_>, guards: &Guards, when: &str) -> Result<(), RunFailure> {
    for (i, &address) in guards.addresses.iter().enumerate() {
        let Some(bytes) = link.read_memory(address, usize::from(guards.len))? else {
            const NOTE: &str = "hilt: no memory access over this serial line: the host's own guard check is skipped, the firmware's runs";
            if !link.logs.iter().any(|l| l == NOTE) {
                link.logs.push(NOTE.to_string());
            }
            return Ok(());
        };
        if let Some((first, count)) = hilt_runtime::canary::damage(&bytes) {
            return Err(RunFailure::Canary(format!(
                "host check {when}: {} was overwritten at {:#010x} ({count} bytes hit)",
                GUARD_NAMES[i],
                address + first as u32
            )));
        }
    }
    Ok(())
}

fn code_name(code: ErrorCode) -> String {
    match code {
        ErrorCode::BAD_FRAME => "BAD_FRAME".into(),
        ErrorCode::UNSUPPORTED => "UNSUPPORTED".into(),
        ErrorCode::BAD_INPUT => "BAD_INPUT".into(),
        ErrorCode::MODEL => "MODEL".into(),
        ErrorCode::ALLOCATE => "ALLOCATE".into(),
        ErrorCode::KERNEL => "KERNEL".into(),
        ErrorCode::CANARY => "CANARY".into(),
        ErrorCode::ACCELERATOR => "ACCELERATOR".into(),
        ErrorCode(other) => format!("#{other}"),
    }
}

/// Drives a session: hello, then each case's steps, then the committed plan.
pub fn run_session(
    link: &mut Link<'_>,
    board: &Board,
    scenario: &Scenario,
    model_crc: u32,
    run: &mut BoardRun,
) -> Result<(), RunFailure> {
    run_session_observed(link, board, scenario, model_crc, run, None)
}

/// What watches a board from outside while its session runs (hilt's QEMU
/// plugin): it is handed the committed plan before the first invoke, and
/// reports each invoke's exact figures, or the first access violation.
pub trait SessionObserver {
    /// The plan the board committed (before the first invoke).
    fn plan_committed(
        &mut self,
        plan: &[PlannedBuffer],
        scenario: &Scenario,
    ) -> Result<(), RunFailure>;
    /// The invoke the board just answered, as observed.
    fn invoke_done(&mut self, scenario: &Scenario) -> Result<ObservedStep, RunFailure>;
}

/// [`run_session`], with `observer` watching.
pub fn run_session_observed(
    link: &mut Link<'_>,
    board: &Board,
    scenario: &Scenario,
    model_crc: u32,
    run: &mut BoardRun,
    observer: Option<&mut dyn SessionObserver>,
) -> Result<(), RunFailure> {
    steps(link, board, scenario, model_crc, run, observer).map_err(|e| match e {
        // The op's name is the model's: read it only when it is needed.
        RunFailure::Accelerator { op, job, error, .. } => RunFailure::Accelerator {
            op,
            op_name: scenario.model_file.op_name(usize::from(op)).to_string(),
            job,
            error,
        },
        other => other,
    })
}

/// The session itself; [`run_session`] names the op of an accelerator error.
fn steps(
    link: &mut Link<'_>,
    board: &Board,
    scenario: &Scenario,
    model_crc: u32,
    run: &mut BoardRun,
    mut observer: Option<&mut dyn SessionObserver>,
) -> Result<(), RunFailure> {
    run.pools = crate::outcome::RunPools::of(scenario, board);
    let guards = handshake(link, board, scenario, model_crc)?;
    run.answered = true;
    let mut session = Session {
        link,
        board,
        scenario,
        guards,
        run,
    };
    session.set_offload()?;
    if let Some(o) = observer.as_mut() {
        // The observer checks each op against the plan: it needs it first.
        session.read_plan()?;
        o.plan_committed(&session.run.plan, scenario)?;
    }
    session.check_guards("before the first invoke")?;
    for (case_index, case) in scenario.cases.iter().enumerate() {
        if case_index > 0 {
            session.reset_state()?;
        }
        for (s, step) in case.steps.iter().enumerate() {
            // Each iteration is one invoke on the step's own input: the plan
            // may reuse an input's bytes for later activations (TFLM's does),
            // so the input is sent again before every invoke rather than
            // left for the next one to compute on whatever remains there.
            session.load_inputs(step)?;
            let mut results = session.invoke(step.expected.len())?;
            results.observed = observed(&mut observer, scenario)?;
            for _ in 1..scenario.iterations {
                session.load_inputs(step)?;
                results = session.invoke(step.expected.len())?;
                results.observed = observed(&mut observer, scenario)?;
            }
            session.check_guards(&format!("after {} step {s}", case.name))?;
            session.record_step(&case.name, s, step, results);
        }
    }
    if observer.is_none() {
        session.read_plan()?;
    }
    session.cpu_alone(&mut observer)
}

/// The observer's figures for the invoke just answered.
fn observed(
    observer: &mut Option<&mut dyn SessionObserver>,
    scenario: &Scenario,
) -> Result<Option<ObservedStep>, RunFailure> {
    match observer {
        Some(o) => o.invoke_done(scenario).map(Some),
        None => Ok(None),
    }
}

/// A session after its handshake: one method per exchange.
struct Session<'s, 'l> {
    link: &'s mut Link<'l>,
    board: &'s Board,
    scenario: &'s Scenario,
    guards: Option<Guards>,
    run: &'s mut BoardRun,
}

/// What one invoke sent back, before scaling and comparison.
#[derive(Debug, Default)]
struct InvokeResults {
    outputs: Vec<Vec<u8>>,
    total_cycles: u64,
    op_cycles: Vec<u32>,
    offload: Option<OffloadFigures>,
    observed: Option<ObservedStep>,
}

/// An invoke's `Offload` and `Jobs` messages, as received (unscaled).
#[derive(Debug, Default)]
struct OffloadFigures {
    jobs: u16,
    overlapped: u16,
    busy: u64,
    waited: u64,
    ledger: EngineLedger,
    on_npu: Vec<bool>,
    job_times: Vec<JobTimes>,
}

impl OffloadFigures {
    /// Scaled to the board's cycles; placement cut to `ops` operators.
    fn scaled(&self, scale: f64, ops: usize) -> StepOffload {
        let s = |c: u64| (c as f64 * scale).round() as u64;
        let mut on_npu = self.on_npu.clone();
        if ops > 0 {
            on_npu.resize(ops, false);
        }
        StepOffload {
            jobs: self.jobs,
            overlapped: self.overlapped,
            busy: s(self.busy),
            waited: s(self.waited),
            removed: RemovedCycles {
                engine: s(self.ledger.engine),
                shadow_copies: s(self.ledger.shadow),
                oversleep: s(self.ledger.oversleep),
            },
            kept: KeptCycles {
                driver_submit: s(self.ledger.driver_submit),
                driver_cache: s(self.ledger.driver_cache),
            },
            on_npu,
            job_times: self
                .job_times
                .iter()
                .map(|j| JobSpan {
                    op: j.op,
                    submitted: s(u64::from(j.submitted)),
                    completed: s(u64::from(j.completed)),
                    wait_started: s(u64::from(j.wait_started)),
                    retired: s(u64::from(j.retired)),
                })
                .collect(),
        }
    }
}

impl InvokeResults {
    /// Folds one result message in: figures, output chunks.
    fn add(&mut self, message: &Message<'_>) {
        match message {
            Message::Timing { total_cycles, .. } => self.total_cycles = *total_cycles,
            Message::OpCycles { first_op, cycles } => {
                let first = usize::from(*first_op);
                if self.op_cycles.len() < first + cycles.len() {
                    self.op_cycles.resize(first + cycles.len(), 0);
                }
                for (i, c) in cycles.iter().enumerate() {
                    self.op_cycles[first + i] = c;
                }
            }
            Message::Offload {
                jobs,
                overlapped,
                busy,
                waited,
                ledger,
                placement,
            } => {
                let figures = self.offload.get_or_insert_with(OffloadFigures::default);
                figures.jobs = *jobs;
                figures.overlapped = *overlapped;
                figures.busy = *busy;
                figures.waited = *waited;
                figures.ledger = *ledger;
                figures.on_npu = placement
                    .iter()
                    .flat_map(|byte| (0..8).map(move |bit| byte >> bit & 1 == 1))
                    .collect();
            }
            Message::Jobs { first, total, jobs } => {
                let figures = self.offload.get_or_insert_with(OffloadFigures::default);
                let list = &mut figures.job_times;
                list.resize(usize::from(*total), JobTimes::default());
                for (i, j) in jobs.iter().enumerate() {
                    if let Some(slot) = list.get_mut(usize::from(*first) + i) {
                        *slot = j;
                    }
                }
            }
            Message::OutputChunk {
                output,
                offset,
                total,
                chunk,
            } => {
                if let Some(buf) = self.outputs.get_mut(usize::from(*output)) {
                    buf.resize(*total as usize, 0);
                    let end = (*offset as usize + chunk.len()).min(buf.len());
                    let start = (*offset as usize).min(end);
                    buf[start..end].copy_from_slice(&chunk[..end - start]);
                }
            }
            _ => {}
        }
    }
}

/// How a message during an invoke bears on it.
enum InvokeEvent {
    Done,
    Fail(hilt_proto::TargetError),
    Canary(String),
    Other,
}

impl Session<'_, '_> {
    /// How long one send may take.
    fn send_limit(&self) -> Duration {
        Duration::from_secs(30).min(self.scenario.timeout)
    }

    /// The host's own guard check, when the firmware announced guards.
    fn check_guards(&mut self, when: &str) -> Result<(), RunFailure> {
        match &self.guards {
            Some(g) => host_check_guards(self.link, g, when),
            None => Ok(()),
        }
    }

    /// `SetOffload`, when the scenario offloads: after the handshake's
    /// barrier and before any input, since the firmware re-plans its arena
    /// for it. The run records what was asked even when it is refused.
    fn set_offload(&mut self) -> Result<(), RunFailure> {
        let choice = &self.scenario.offload;
        if choice.accelerator == Accelerator::None {
            return Ok(());
        }
        if !choice.coherent && self.run.pools.is_some() {
            // The firmware would give the interpreter half the arena, which
            // a split arena (exactly its pools) cannot be.
            return Err(RunFailure::Start(format!(
                "scenario {} splits the arena into pools: non-coherent offload needs half of it for the engine's view; run it coherent",
                self.scenario.name
            )));
        }
        let model = choice.vnpu_on(self.board.vnpu);
        let (mode, mode_name) = if choice.coherent {
            (OffloadMode::Coherent, "coherent")
        } else {
            (OffloadMode::NonCoherent, "non-coherent")
        };
        let fault = self.scenario.accel_fault;
        self.run.offload = Some(OffloadSetting {
            mode: mode_name,
            ops: choice.ops.clone(),
            job_cycles: model.job_cycles,
            cycles_per_1000_macs: model.cycles_per_1000_macs,
            driver_submit_cycles: model.driver_submit_cycles,
            driver_cycles_per_line: model.driver_cycles_per_line,
            fault: (fault != AccelFault::None).then(|| fault.name()),
        });
        let ops = choice.op_codes();
        let message = Message::SetOffload {
            mode,
            fault: fault as u8,
            job_cycles: model.job_cycles,
            cycles_per_1000_macs: model.cycles_per_1000_macs,
            driver_submit_cycles: model.driver_submit_cycles,
            driver_cycles_per_line: model.driver_cycles_per_line,
            cycles_per_count_milli: (self.board.cycle_scale() * 1000.0).round() as u32,
            ops: &ops,
        };
        let done = self.send_set_offload(&message, "Done of SetOffload")?;
        done.map_err(|e| offload_refused(self.link, e, fault))
    }

    /// Sends a `SetOffload` and waits for its `Done` (`what` names the
    /// wait in a timeout); the firmware's own answer is returned for the
    /// caller to word. The re-plan moves the arena's guards: the firmware
    /// describes the new ones before its `Done`, and the host checks those
    /// from now on.
    fn send_set_offload(
        &mut self,
        message: &Message<'_>,
        what: &str,
    ) -> Result<Result<(), hilt_proto::TargetError>, RunFailure> {
        self.link.send(message, self.send_limit())?;
        let mut moved = None;
        let done = self
            .link
            .recv_matching(self.scenario.timeout, what, |m| match m {
                Message::Guards {
                    mode,
                    len,
                    addresses,
                } => {
                    moved = Some((*mode != 0).then_some(Guards {
                        len: *len,
                        addresses: *addresses,
                    }));
                    None
                }
                Message::Done { request: 0x06 } => Some(Ok(())),
                Message::Error(e) => Some(Err(*e)),
                _ => None,
            })?;
        if let Some(guards) = moved {
            self.guards = guards;
        }
        Ok(done)
    }

    /// An offloaded run's yardstick: with offload turned off on the same
    /// firmware (the arena re-planned, the state fresh), the first step's
    /// cycles with every op on the CPU, in [`BoardRun::cpu_alone`]. Its
    /// outputs must match too. Skipped for runs that did not pass or that
    /// inject a fault. Runs after the plan is read, so the layout a gate
    /// snapshots is the offloaded one.
    fn cpu_alone(
        &mut self,
        observer: &mut Option<&mut dyn SessionObserver>,
    ) -> Result<(), RunFailure> {
        let offloaded = self.scenario.offload.accelerator != Accelerator::None
            && self.scenario.accel_fault == AccelFault::None;
        let passed = self.run.steps.iter().all(|s| s.mismatch.is_none());
        let Some(step) = self
            .scenario
            .cases
            .first()
            .and_then(|c| c.steps.first())
            .filter(|_| offloaded && passed)
        else {
            return Ok(());
        };
        let message = Message::SetOffload {
            mode: OffloadMode::Off,
            fault: AccelFault::None as u8,
            job_cycles: 0,
            cycles_per_1000_macs: 0,
            driver_submit_cycles: 0,
            driver_cycles_per_line: 0,
            cycles_per_count_milli: (self.board.cycle_scale() * 1000.0).round() as u32,
            ops: &[],
        };
        let done = self.send_set_offload(&message, "Done of SetOffload (off)")?;
        done.map_err(|e| target_error(self.link, e))?;
        // Offload off re-plans the arena: the observer checks this invoke
        // against the new plan.
        if let Some(o) = observer.as_mut() {
            let plan = self.fetch_plan()?;
            o.plan_committed(&plan, self.scenario)?;
        }
        // The arena figures the invoke reports are the re-planned, CPU-only
        // arena's: the run keeps the offloaded one's.
        let offloaded_arena = self.run.arena;
        self.load_inputs(step)?;
        let results = self.invoke(step.expected.len());
        self.run.arena = offloaded_arena;
        let results = results?;
        observed(observer, self.scenario)?;
        self.check_guards("after the run with offload off")?;
        if let Some(problem) = results
            .outputs
            .iter()
            .zip(&step.expected)
            .enumerate()
            .find_map(|(o, (got, want))| {
                self.scenario
                    .compare
                    .check(got, want)
                    .map(|p| format!("output {o}: {p}"))
            })
        {
            return Err(RunFailure::Start(format!(
                "with offload off, the first step's outputs differ: {problem}"
            )));
        }
        self.run.cpu_alone =
            Some((results.total_cycles as f64 * self.board.cycle_scale()).round() as u64);
        Ok(())
    }

    /// `ResetState` between cases: a fresh interpreter state.
    fn reset_state(&mut self) -> Result<(), RunFailure> {
        self.link.send(&Message::ResetState, self.send_limit())?;
        expect_done(self.link, self.scenario.timeout, 0x05)
    }

    /// Streams a step's inputs in chunks, each acknowledged.
    fn load_inputs(&mut self, step: &StepData) -> Result<(), RunFailure> {
        let (t, wait) = (self.send_limit(), self.scenario.timeout);
        for (input, bytes) in step.inputs.iter().enumerate() {
            for (c, chunk) in bytes.chunks(MAX_CHUNK).enumerate() {
                let offset = (c * MAX_CHUNK) as u32;
                let message = Message::LoadInput {
                    input: input as u8,
                    offset,
                    chunk,
                };
                self.link.send(&message, t)?;
                let ack = self.link.recv_matching(wait, "InputAck", |m| match m {
                    Message::InputAck { .. } => Some(Ok(())),
                    Message::Error(e) => Some(Err(*e)),
                    _ => None,
                })?;
                ack.map_err(|e| target_error(self.link, e))?;
            }
        }
        Ok(())
    }

    /// One `Invoke`, then every result message up to its `Done`.
    fn invoke(&mut self, outputs: usize) -> Result<InvokeResults, RunFailure> {
        self.link.send(
            &Message::Invoke {
                count: 1,
                per_op: self.scenario.op_profile,
            },
            self.send_limit(),
        )?;
        let mut results = InvokeResults {
            outputs: vec![Vec::new(); outputs],
            ..InvokeResults::default()
        };
        loop {
            let run = &mut *self.run;
            let event = self
                .link
                .recv(self.scenario.timeout, "the results of Invoke", |m| {
                    results.add(m);
                    invoke_event(m, run)
                })?;
            match event {
                InvokeEvent::Canary(text) => return Err(RunFailure::Canary(text)),
                InvokeEvent::Done => return Ok(results),
                InvokeEvent::Fail(e) => return Err(target_error(self.link, e)),
                InvokeEvent::Other => {}
            }
        }
    }

    /// The step's figures (scaled to the board's cycles) and how its
    /// outputs compare with the expected ones.
    fn record_step(&mut self, case: &str, s: usize, step: &StepData, results: InvokeResults) {
        let mismatch = results
            .outputs
            .iter()
            .zip(&step.expected)
            .enumerate()
            .find_map(|(o, (got, want))| {
                self.scenario
                    .compare
                    .check(got, want)
                    .map(|p| format!("output {o}: {p}"))
            });
        let scale = self.board.cycle_scale();
        self.run.steps.push(StepResult {
            case: case.to_string(),
            step: s,
            total_cycles: (results.total_cycles as f64 * scale).round() as u64,
            op_cycles: results
                .op_cycles
                .iter()
                .map(|&c| (f64::from(c) * scale).round() as u32)
                .collect(),
            mismatch,
            offload: results
                .offload
                .as_ref()
                .map(|f| f.scaled(scale, results.op_cycles.len())),
            observed: results.observed,
        });
    }

    /// The committed plan, for the layout snapshot.
    fn read_plan(&mut self) -> Result<(), RunFailure> {
        self.run.plan = self.fetch_plan()?;
        Ok(())
    }

    /// The plan the board has committed now.
    fn fetch_plan(&mut self) -> Result<Vec<PlannedBuffer>, RunFailure> {
        self.link.send(&Message::PlanRequest, self.send_limit())?;
        let mut plan = Vec::new();
        loop {
            let entries = &mut plan;
            let done = self
                .link
                .recv(self.scenario.timeout, "the arena plan", |m| match m {
                    Message::PlanEntries { entries: got, .. } => {
                        entries.extend(got.iter().map(|e| PlannedBuffer {
                            kind: if e.kind == 0 { "tensor" } else { "scratch" },
                            index: e.index,
                            first_step: e.first_step,
                            last_step: e.last_step,
                            size: e.size,
                            align: e.align,
                            offset: e.offset,
                        }));
                        false
                    }
                    Message::Done { request: 0x04 } => true,
                    _ => false,
                })?;
            if done {
                return Ok(plan);
            }
        }
    }
}

/// What a message means for a running invoke; arena figures go straight
/// into `run`.
fn invoke_event(message: &Message<'_>, run: &mut BoardRun) -> InvokeEvent {
    match message {
        Message::ArenaUsage {
            capacity,
            head,
            tail,
            used,
        } => {
            run.arena = Some([*capacity, *head, *tail, *used]);
            InvokeEvent::Other
        }
        Message::CanaryFault {
            owner,
            index,
            address,
            bytes_hit,
            op,
        } => InvokeEvent::Canary(format!(
            "firmware check: {} was overwritten at {address:#010x} ({bytes_hit} bytes hit){}",
            owner_name(*owner, *index),
            if *op == u16::MAX {
                String::new()
            } else {
                format!(", after op {op}")
            }
        )),
        Message::Done { request: 0x03 } => InvokeEvent::Done,
        Message::Error(e) => InvokeEvent::Fail(*e),
        _ => InvokeEvent::Other,
    }
}

/// How long to wait for the first Hello before asking again, and the most
/// to wait between later asks: a serial line may lose the first request
/// (QEMU drops a pty's traffic until it sees the host there; a real board
/// may still be booting). Asking again soon keeps a virtual board's start-up
/// short; backing off to a second leaves a slow real board time to answer.
const HELLO_FIRST_RETRY: Duration = Duration::from_millis(100);
const HELLO_RETRY: Duration = Duration::from_secs(1);

/// What a Hello said that the host checks.
struct HelloFacts {
    protocol: u16,
    board: String,
    model_hash: u32,
}

/// Hello (asked again until it comes, up to the scenario's time limit),
/// the firmware's checks against what the host expects, its guard bands,
/// then a barrier: `ResetState` and its `Done`, so that answers to repeated
/// Hellos are behind us and no state is left from an earlier session.
fn handshake(
    link: &mut Link<'_>,
    board: &Board,
    scenario: &Scenario,
    model_crc: u32,
) -> Result<Option<Guards>, RunFailure> {
    let t = Duration::from_secs(30).min(scenario.timeout);
    let deadline = Instant::now() + scenario.timeout;
    // Errors the firmware hit at start-up arrive before its Hello.
    let mut startup_error = None;
    let mut retry = HELLO_FIRST_RETRY;
    let hello = 'ask: loop {
        // A lone delimiter ends any partial frame the firmware holds.
        link.send_bytes(&[0], t)?;
        link.send(&Message::HelloRequest, t)?;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let got = link.recv_matching(left.min(retry), "Hello", |m| match m {
                Message::Hello(h) => Some(Ok(HelloFacts {
                    protocol: h.protocol,
                    board: h.board.to_string(),
                    model_hash: h.model_hash,
                })),
                Message::Error(e) => Some(Err(*e)),
                _ => None,
            });
            match got {
                Ok(Ok(hello)) => break 'ask hello,
                Ok(Err(e)) => startup_error = Some(e),
                Err(LinkError::Timeout { .. }) if left > retry => {
                    retry = (retry * 2).min(HELLO_RETRY);
                    continue 'ask;
                }
                Err(LinkError::Timeout { .. }) => {
                    return Err(RunFailure::Link(LinkError::Timeout {
                        waiting_for: "Hello".into(),
                        timeout: scenario.timeout,
                    }));
                }
                Err(e) => return Err(e.into()),
            }
        }
    };
    if hello.protocol != PROTOCOL_VERSION {
        return Err(RunFailure::WrongFirmware(format!(
            "firmware speaks protocol {}, the host {PROTOCOL_VERSION}",
            hello.protocol
        )));
    }
    if hello.board != board.name {
        return Err(RunFailure::WrongFirmware(format!(
            "firmware was built for {}, not {}",
            hello.board, board.name
        )));
    }
    if hello.model_hash != model_crc {
        let hint = if !board.hilt_installs_firmware() {
            format!(
                "; {} has no flash_command, so hilt cannot put the scenario's firmware on it",
                board.name
            )
        } else {
            String::new()
        };
        return Err(RunFailure::WrongFirmware(format!(
            "firmware embeds a different model (CRC {:#010x}, expected {model_crc:#010x}){hint}",
            hello.model_hash
        )));
    }
    if let Some(e) = startup_error {
        return Err(target_error(link, e));
    }
    // A ready firmware describes its guard bands next (an unready one sends its error).
    let guards = link.recv_matching(t, "the guard description", |m| match m {
        Message::Guards {
            mode,
            len,
            addresses,
        } => Some(Ok((*mode != 0).then_some(Guards {
            len: *len,
            addresses: *addresses,
        }))),
        Message::Error(e) => Some(Err(*e)),
        _ => None,
    })?;
    let guards = guards.map_err(|e| target_error(link, e))?;
    link.send(&Message::ResetState, t)?;
    expect_done(link, scenario.timeout, 0x05)?;
    Ok(guards)
}

fn expect_done(link: &mut Link<'_>, wait: Duration, request: u8) -> Result<(), RunFailure> {
    let done = link.recv_matching(wait, "Done", |m| match m {
        Message::Done { request: r } if *r == request => Some(Ok(())),
        Message::Error(e) => Some(Err(*e)),
        _ => None,
    })?;
    done.map_err(|e| target_error(link, e))
}

/// A refused `SetOffload`: UNSUPPORTED says what the firmware lacks (the
/// `accel` fault armed for an injected fault, offload itself otherwise);
/// any other error is the firmware's own.
fn offload_refused(link: &Link<'_>, e: hilt_proto::TargetError, fault: AccelFault) -> RunFailure {
    if e.code != ErrorCode::UNSUPPORTED {
        return target_error(link, e);
    }
    let why = if fault == AccelFault::None {
        "this firmware cannot offload to vnpu (rebuild it from a hilt with accelerator support)"
            .to_string()
    } else {
        format!(
            "fault {:?} needs a firmware with the `accel` fault armed (add \"accel\" to the scenario's faults)",
            fault.name()
        )
    };
    RunFailure::OffloadRefused {
        code: code_name(e.code),
        why,
    }
}

fn target_error(link: &Link<'_>, e: hilt_proto::TargetError) -> RunFailure {
    let _ = link;
    if e.code == ErrorCode::ACCELERATOR
        && let Some((error, job)) = AccelError::from_code(e.detail)
    {
        return RunFailure::Accelerator {
            op: e.op,
            op_name: "?".into(),
            job,
            error,
        };
    }
    RunFailure::Target {
        code: code_name(e.code),
        op: e.op,
        detail: e.detail,
    }
}
