//! What a board run produced: its outcome, per-step figures, the arena
//! plan the firmware committed and its logs. The gate, the reports and the
//! orchestrator read these; the session and the drivers fill them in.

use serde::Serialize;

/// The result of one step (one invocation's outputs).
#[derive(Debug, Clone, Serialize)]
pub struct StepResult {
    /// Case name.
    pub case: String,
    /// Step index.
    pub step: usize,
    /// Cycles of the last invocation of this step.
    pub total_cycles: u64,
    /// Per-op cycles of the last invocation.
    pub op_cycles: Vec<u32>,
    /// `None` when every output matched, else what differed.
    pub mismatch: Option<String>,
    /// The last invocation's offload figures (offload runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload: Option<StepOffload>,
    /// What hilt's QEMU plugin counted for the step's (last) invoke: exact
    /// instructions, estimated cycles and stack depth, per op and in all
    /// (virtual boards only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed: Option<ObservedStep>,
}

/// One op in one invoke, as the plugin counted it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct OpCount {
    /// Instructions executed, exactly.
    pub instructions: u64,
    /// Estimated cycles on the board's core (or timing profile).
    pub estimated_cycles: u64,
    /// Deepest stack use while it ran, bytes below the stack's top.
    pub stack_high_water: u64,
}

/// A violation, typed and described.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AccessViolation {
    /// The invoke (from 1, per board run).
    pub invoke: u64,
    /// `not-its-buffer`, `held-by-job`, `stack-overflow`, `unmapped`.
    pub fault: String,
    /// Who: "op 3 (CONV_2D)", "the job of op 3 (CONV_2D)", "the interpreter".
    pub by: String,
    /// A store (else a load).
    pub store: bool,
    /// Guest address.
    pub address: u32,
    /// Bytes.
    pub size: u32,
    /// The instruction's address.
    pub pc: u32,
    /// The function holding it (ELF symbols), if known.
    pub function: Option<String>,
    /// Where the address is, in the plan's terms.
    pub place: String,
}

impl std::fmt::Display for AccessViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} of {} byte{} at {:#010x} (pc {:#010x}{}): {}",
            self.by,
            if self.store { "store" } else { "load" },
            self.size,
            if self.size == 1 { "" } else { "s" },
            self.address,
            self.pc,
            self.function
                .as_ref()
                .map_or_else(String::new, |n| format!(" in {n}")),
            self.place
        )
    }
}

/// One invoke as the QEMU plugin saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ObservedStep {
    /// Instructions executed, exactly (no SysTick quantum).
    pub instructions: u64,
    /// Estimated cycles on the board's core or timing profile.
    pub estimated_cycles: u64,
    /// Deepest stack use, bytes.
    pub stack_high_water: u64,
    /// Per op, in order; they add up to the figures above.
    pub ops: Vec<OpCount>,
    /// Instructions an accelerator's jobs ran (on a virtual board, the
    /// firmware emulating the engine): not the CPU's, so not in the
    /// figures above.
    pub engine_instructions: u64,
}

/// What the accelerator did in one invocation (`Offload` and `Jobs`),
/// scaled to the board's cycles like every other figure.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StepOffload {
    /// Jobs submitted.
    pub jobs: u16,
    /// CPU ops that ran while a job was in flight.
    pub overlapped: u16,
    /// Cycles the engine was busy (its latency model).
    pub busy: u64,
    /// Cycles the CPU spent blocked in waits.
    pub waited: u64,
    /// What every figure leaves out: the firmware's time emulating the
    /// engine, by category.
    pub removed: RemovedCycles,
    /// What every figure keeps that the emulation does not pay: a real
    /// driver's modelled CPU cost (the `[vnpu]` driver keys).
    pub kept: KeptCycles,
    /// Per op: whether the engine ran it.
    pub on_npu: Vec<bool>,
    /// Every job's times, from the invocation's start.
    pub job_times: Vec<JobSpan>,
}

/// Cycles an offloaded run's figures leave out, by category: the CPU's
/// work that a real engine does itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RemovedCycles {
    /// The engine's own work, emulated on the CPU: each job's kernel, and
    /// its checks at submit, retire and abort.
    pub engine: u64,
    /// A non-coherent engine's shadow copies at clean and invalidate.
    pub shadow_copies: u64,
    /// Waits that slept past the job's completion (until the next tick),
    /// where a real engine's interrupt would have woken the CPU on time.
    pub oversleep: u64,
}

impl RemovedCycles {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.engine + self.shadow_copies + self.oversleep
    }
}

/// Cycles an offloaded run's figures keep though the emulation does not
/// spend them: a real driver's CPU cost, modelled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct KeptCycles {
    /// Job set-up, per submit (`driver_submit_cycles`).
    pub driver_submit: u64,
    /// Cache maintenance, per line cleaned or invalidated
    /// (`driver_cycles_per_line`; none when memory is coherent).
    pub driver_cache: u64,
}

impl KeptCycles {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.driver_submit + self.driver_cache
    }
}

impl StepOffload {
    /// Engine cycles the CPU did not wait for: the work the offload
    /// overlapped with the CPU's own (busy − waited, floored at 0).
    pub fn overlap(&self) -> u64 {
        self.busy.saturating_sub(self.waited)
    }
}

/// One job's times in an invocation, cycles from its start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct JobSpan {
    /// The operator it computed.
    pub op: u16,
    /// Submitted.
    pub submitted: u64,
    /// Completed by the engine.
    pub completed: u64,
    /// The CPU started waiting for it.
    pub wait_started: u64,
    /// The wait returned.
    pub retired: u64,
}

/// How a run offloaded: what the host asked the firmware for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OffloadSetting {
    /// `coherent` or `non-coherent`.
    pub mode: &'static str,
    /// Ops the engine could claim.
    pub ops: Vec<String>,
    /// Latency model: cycles per job.
    pub job_cycles: u32,
    /// Latency model: cycles per thousand MACs.
    pub cycles_per_1000_macs: u32,
    /// Driver model: CPU cycles per submit.
    pub driver_submit_cycles: u32,
    /// Driver model: CPU cycles per cache line maintained.
    pub driver_cycles_per_line: u32,
    /// The injected fault, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<&'static str>,
}

/// How a board run ended.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(tag = "status", content = "message", rename_all = "snake_case")]
pub enum Outcome {
    /// Every output of every step matched.
    Passed,
    /// Ran, but some output differed.
    Mismatch(String),
    /// Could not run to the end (build, boot, timeout, crash, garbled link).
    Error(String),
}

impl std::fmt::Display for Outcome {
    /// `PASS`, `MISMATCH: what differed`, `ERROR: why`: as `hilt run`
    /// prints a board's line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Passed => f.write_str("PASS"),
            Outcome::Mismatch(m) => write!(f, "MISMATCH: {m}"),
            Outcome::Error(e) => write!(f, "ERROR: {e}"),
        }
    }
}

/// Everything one (scenario, board) run produced.
#[derive(Debug, Clone, Serialize)]
pub struct BoardRun {
    /// Scenario name.
    pub scenario: String,
    /// Board name.
    pub board: String,
    /// Result.
    pub outcome: Outcome,
    /// Per-step results (kept even when a later step failed).
    pub steps: Vec<StepResult>,
    /// Offloaded runs: the first step's cycles on the same firmware with
    /// offload off (every op on the CPU), the yardstick for what the
    /// engine saves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_alone: Option<u64>,
    /// Arena figures reported by the firmware: capacity, head, tail, used.
    pub arena: Option<[u32; 4]>,
    /// Firmware log lines.
    pub logs: Vec<String>,
    /// The arena plan the firmware committed (offsets from the head).
    pub plan: Vec<PlannedBuffer>,
    /// The offload the run asked for (None: every op on the CPU).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload: Option<OffloadSetting>,
    /// The arena's memory pools, when the scenario splits it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pools: Option<RunPools>,
    /// Loads and stores outside what their op may touch, as the QEMU
    /// plugin counted them; `None` when the run was not checked (a real
    /// board, or checks turned off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_violations: Option<u64>,
    /// The first violations, described.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<AccessViolation>,
    /// The timing model or profile estimated cycles come from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing: Option<String>,
    /// The first step's invoke: exact instructions (virtual boards).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<u64>,
    /// The first step's invoke: estimated cycles (virtual boards).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_cycles: Option<u64>,
    /// The deepest stack use of any invoke, bytes (virtual boards).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack_high_water: Option<u64>,
    /// Instructions by function over the run's invokes (`--hotspots`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hotspots: Option<crate::observer::hotspots::Hotspots>,
    /// How many times it ran: 1, or more under `--retries` after a failure.
    pub attempts: u32,
    /// A run that failed and then passed on a retry: the first failure
    /// (`ERROR: …`), so that it is reported as flaky, never as a plain pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flaky: Option<String>,
    /// Whether the board answered (its Hello came): a run that failed
    /// before is the board's failure, not the model's.
    pub answered: bool,
    /// The board never answered, even after its `power_cycle` if it has
    /// one: *board offline*, reported apart from model failures.
    pub offline: bool,
    /// The board's `power_cycle` command ran before the last attempt.
    pub power_cycled: bool,
    /// Where the core was when the run ended in a HardFault, a panic or a
    /// timeout: its registers and its stack, unwound and named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backtrace: Option<crate::backtrace::Backtrace>,
    /// The firmware's defmt log, decoded (firmware whose ELF has a
    /// `.defmt` section, on a board whose memory the host reaches).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub defmt: Option<DefmtLog>,
}

/// A firmware's defmt log as the host decoded it, from the RTT up channel
/// named `defmt`, with the table in the firmware's ELF.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DefmtLog {
    /// The frames, in the order the firmware wrote them.
    pub lines: Vec<DefmtLine>,
    /// What could not be read or decoded, one line each, in hilt's words
    /// (a damaged frame, a table of another defmt version, a firmware
    /// without the channel).
    pub problems: Vec<String>,
}

/// One decoded defmt frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DefmtLine {
    /// The firmware's own timestamp, as its `defmt::timestamp!` formats it
    /// (e.g. `{=u64:us}`: seconds with six decimals); `None` when the
    /// firmware defines none.
    pub timestamp: Option<String>,
    /// `trace`, `debug`, `info`, `warn` or `error`; `None` for
    /// `defmt::println!`.
    pub level: Option<&'static str>,
    /// The formatted message.
    pub message: String,
    /// `file:line` of the log statement, when the ELF's debug information
    /// says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

impl std::fmt::Display for DefmtLine {
    /// `0.001234 INFO  message`, as `hilt run` prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(t) = &self.timestamp {
            write!(f, "{t} ")?;
        }
        let level = self.level.map_or_else(String::new, str::to_uppercase);
        write!(f, "{level:<5} {}", self.message)
    }
}

/// One memory pool of a run's arena.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolRange {
    /// The board's name for it.
    pub name: String,
    /// First byte, from the arena's start.
    pub start: u32,
    /// Bytes.
    pub size: u32,
    /// Who reaches it (`cpu`, `cpu+accel`).
    pub reach: String,
    /// Whether the scenario lets buffers go there.
    pub planned: bool,
}

/// The pools of a run's arena, to say which pool each planned buffer is
/// in: pools are adjacent, so a buffer's offset tells.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunPools {
    /// In address order.
    pub pools: Vec<PoolRange>,
    /// Bytes of guard band before the head (0 without canaries).
    pub guard: u32,
}

impl RunPools {
    /// The pools of `scenario` on `board`, if it splits the arena.
    pub fn of(
        scenario: &crate::config::scenario::Scenario,
        board: &crate::config::board::Board,
    ) -> Option<RunPools> {
        let layout = scenario.pool_layout(board).ok()?;
        if !layout.is_split() {
            return None;
        }
        let pools = layout
            .pools()
            .iter()
            .enumerate()
            .map(|(k, p)| PoolRange {
                name: hilt_contract::pools::pool_name(&board.pools, k),
                start: layout.start(k),
                size: p.size,
                reach: format!("{:?}", p.reach),
                planned: p.planned,
            })
            .collect();
        let guard = if scenario.canary == hilt_runtime::canary::CanaryMode::Off {
            0
        } else {
            hilt_runtime::canary::GUARD_BYTES
        };
        Some(RunPools { pools, guard })
    }

    /// Where the head starts: after the guard, aligned for its most
    /// aligned buffer, as the runtime places it (the firmware's arena
    /// starts on a 64-byte boundary).
    pub fn head_start(&self, plan: &[PlannedBuffer]) -> u32 {
        head_start(plan, self.guard)
    }

    /// The pool (by position in `pools`) each buffer of `plan` is in, in
    /// plan order.
    pub fn placement(&self, plan: &[PlannedBuffer]) -> Vec<Option<usize>> {
        let head_start = self.head_start(plan);
        plan.iter()
            .map(|b| {
                let at = head_start + b.offset;
                self.pools
                    .iter()
                    .position(|p| at >= p.start && at - p.start < p.size)
            })
            .collect()
    }

    /// Bytes from each pool's start to its highest buffer's end, for the
    /// `placement` of `plan`.
    pub fn heads(&self, plan: &[PlannedBuffer], placement: &[Option<usize>]) -> Vec<u32> {
        let head_start = self.head_start(plan);
        let mut heads = vec![0; self.pools.len()];
        for (b, k) in plan.iter().zip(placement) {
            if let Some(k) = *k {
                let end = head_start + b.offset + b.size.next_multiple_of(b.align.max(1));
                heads[k] = heads[k].max(end - self.pools[k].start);
            }
        }
        heads
    }
}

impl BoardRun {
    /// A run that has not produced anything yet (outcome: passed until
    /// something fails).
    pub fn new(scenario: &str, board: &str) -> Self {
        BoardRun {
            scenario: scenario.to_string(),
            board: board.to_string(),
            outcome: Outcome::Passed,
            steps: Vec::new(),
            cpu_alone: None,
            arena: None,
            logs: Vec::new(),
            plan: Vec::new(),
            offload: None,
            pools: None,
            access_violations: None,
            violations: Vec::new(),
            timing: None,
            instructions: None,
            estimated_cycles: None,
            stack_high_water: None,
            hotspots: None,
            attempts: 1,
            flaky: None,
            answered: false,
            offline: false,
            power_cycled: false,
            backtrace: None,
            defmt: None,
        }
    }
}

/// Where the head of `plan` starts in its arena: after the start guard
/// (`guard` bytes, 0 without canaries), aligned for its most aligned
/// buffer, as the runtime places it (the firmware's arena starts on a
/// 64-byte boundary).
pub fn head_start(plan: &[PlannedBuffer], guard: u32) -> u32 {
    let head_align = plan.iter().map(|b| b.align).max().unwrap_or(1).max(1);
    guard.next_multiple_of(head_align)
}

/// One buffer of the firmware's plan, as the gate snapshots it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedBuffer {
    /// "tensor" or "scratch".
    pub kind: &'static str,
    /// Tensor index, or the requesting op for scratch.
    pub index: u16,
    /// First step.
    pub first_step: u16,
    /// Last step.
    pub last_step: u16,
    /// Requested bytes.
    pub size: u32,
    /// Alignment.
    pub align: u32,
    /// Offset from the head's start.
    pub offset: u32,
}
